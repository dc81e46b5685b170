//===- OpShapesAttention.cpp - Shape plans of Attention and rotary --------===//
//
// See OpShapes.h: ONNX Attention's Q, K, V and cache shapes, its mask's
// broadcast, and RotaryEmbedding's. The CPU kernels and the CUDA ops both
// plan with these; each checks its own element types first.
//
//===----------------------------------------------------------------------===//

#include "runtime/OpShapes.h"

#include "ir/Graph.h"

using namespace autopar;
using namespace llvm;

namespace {
enum : unsigned { Q, K, V, Mask, PastKey, PastValue };
} // namespace

Expected<AttentionPlan> autopar::planAttention(const KernelArgs &A) {
  const Tensor &QT = A.In[Q], &KT = A.In[K], &VT = A.In[V];
  AttentionPlan S;
  unsigned Rank = QT.getRank();
  if ((Rank != 3 && Rank != 4) || KT.getRank() != Rank || VT.getRank() != Rank)
    return A.error("Q, K and V must all have rank 3 or all rank 4");
  S.ThreeD = Rank == 3;
  S.B = QT.getDim(0);
  if (S.ThreeD) {
    S.Hq = A.intAttr("q_num_heads", 0);
    S.Hkv = A.intAttr("kv_num_heads", 0);
    if (S.Hq <= 0 || S.Hkv <= 0 || QT.getDim(2) % S.Hq ||
        KT.getDim(2) % S.Hkv || VT.getDim(2) % S.Hkv)
      return A.error("3-D Q, K and V need 'q_num_heads' and 'kv_num_heads' "
                     "that divide their hidden sizes");
    S.Sq = QT.getDim(1);
    S.Skv = KT.getDim(1);
    S.D = QT.getDim(2) / S.Hq;
    S.Dv = VT.getDim(2) / S.Hkv;
    if (KT.getDim(2) / S.Hkv != S.D || VT.getDim(1) != S.Skv)
      return A.error("K and V do not match Q's heads and sequence");
  } else {
    S.Hq = QT.getDim(1);
    S.Hkv = KT.getDim(1);
    S.Sq = QT.getDim(2);
    S.Skv = KT.getDim(2);
    S.D = QT.getDim(3);
    S.Dv = VT.getDim(3);
    if (KT.getDim(3) != S.D || VT.getDim(1) != S.Hkv || VT.getDim(2) != S.Skv)
      return A.error("K " + KT.getTypeString() + " and V " +
                     VT.getTypeString() + " do not match Q " +
                     QT.getTypeString());
  }
  if (KT.getDim(0) != S.B || VT.getDim(0) != S.B)
    return A.error("Q, K and V have different batch sizes");
  if (S.Hkv == 0 || S.Hq % S.Hkv)
    return A.error("the " + Twine(S.Hq) +
                   " query heads are not a multiple of "
                   "the " +
                   Twine(S.Hkv) + " key/value heads");
  if (A.has(PastKey) != A.has(PastValue))
    return A.error("past_key and past_value must be given together");
  if (A.has(PastKey)) {
    const Tensor &PK = A.In[PastKey], &PV = A.In[PastValue];
    if (PK.getRank() != 4 || PV.getRank() != 4)
      return A.error("past_key and past_value must have rank 4");
    S.P = PK.getDim(2);
    if (PK.getShape() != ArrayRef<int64_t>{S.B, S.Hkv, S.P, S.D} ||
        PV.getShape() != ArrayRef<int64_t>{S.B, S.Hkv, S.P, S.Dv})
      return A.error("past_key " + PK.getTypeString() + " or past_value " +
                     PV.getTypeString() + " does not match K and V");
  }
  return S;
}

Expected<AttentionMaskPlan> autopar::planAttentionMask(const KernelArgs &A,
                                                       const AttentionPlan &S) {
  AttentionMaskPlan M;
  if (!A.has(Mask))
    return M;
  const Tensor &MT = A.In[Mask];
  int64_t T = S.P + S.Skv;
  if (MT.getRank() == 0 || MT.getRank() > 4 || MT.getShape().back() > T)
    return A.error("attn_mask " + MT.getTypeString() +
                   " does not broadcast to [batch, q heads, q sequence, " +
                   Twine(T) + "]");
  M.Present = true;
  M.Len = MT.getShape().back();
  Shape Target{S.B, S.Hq, S.Sq, M.Len};
  std::optional<Shape> Joint = broadcastShapes({MT.getShape(), Target});
  if (!Joint || *Joint != Target)
    return A.error("attn_mask " + MT.getTypeString() +
                   " does not broadcast to [batch, q heads, q sequence, " +
                   Twine(T) + "]");
  M.Strides = getBroadcastStrides(MT.getShape(), Target);
  return M;
}

Expected<RotaryPlan> autopar::planRotary(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Cos = A.In[1], &Sin = A.In[2];
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  if (X.getRank() != 3 && X.getRank() != 4)
    return A.error("X " + X.getTypeString() + " must have rank 3 or 4");
  RotaryPlan R;
  R.ThreeD = X.getRank() == 3;
  R.B = X.getDim(0);
  if (R.ThreeD) {
    R.H = A.intAttr("num_heads", 0);
    if (R.H <= 0 || X.getDim(2) % R.H)
      return A.error("3-D X needs a 'num_heads' that divides " +
                     Twine(X.getDim(2)));
    R.S = X.getDim(1);
    R.D = X.getDim(2) / R.H;
  } else {
    R.H = X.getDim(1);
    R.S = X.getDim(2);
    R.D = X.getDim(3);
  }
  R.R = A.intAttr("rotary_embedding_dim", 0);
  if (R.R == 0)
    R.R = R.D;
  if (R.R < 0 || R.R % 2 || R.R > R.D)
    return A.error("the rotary dimension " + Twine(R.R) +
                   " must be even and at most the head size " + Twine(R.D));
  R.Interleaved = A.intAttr("interleaved", 0) != 0;
  R.HasPositions = A.has(3);
  int64_t Half = R.R / 2;
  if (Cos.getShape() != Sin.getShape() ||
      Cos.getRank() != (R.HasPositions ? 2u : 3u) ||
      Cos.getShape().back() != Half)
    return A.error("cos_cache " + Cos.getTypeString() + " and sin_cache " +
                   Sin.getTypeString() + " must be [" +
                   (R.HasPositions ? "max position" : "batch, sequence") +
                   ", " + Twine(Half) + "]");
  if (!R.HasPositions && (Cos.getDim(0) != R.B || Cos.getDim(1) != R.S))
    return A.error("cos_cache " + Cos.getTypeString() +
                   " must match X's batch and sequence");
  if (R.HasPositions) {
    const Tensor &P = A.In[3];
    if (Error E = A.checkType(3, {ElementType::I64}))
      return E;
    if (P.getShape() != ArrayRef<int64_t>{R.B, R.S})
      return A.error("position_ids " + P.getTypeString() + " must be [" +
                     Twine(R.B) + ", " + Twine(R.S) + "]");
  }
  return R;
}
