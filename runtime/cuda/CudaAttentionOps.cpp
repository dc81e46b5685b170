//===- CudaAttentionOps.cpp - Attention and its gradient ------------------===//
//
// ONNX Attention in its 4-D form without a KV cache, softcap or
// qk_matmul_output, and AttentionGrad, with the scores materialized in
// scratch (the plan's `attention=materialized` kernel): cuBLAS products,
// strided-batched over batch x key/value heads (a group's query heads are
// consecutive rows of Q, so one product serves the group in grouped-query
// attention), and AttentionKernels.cu's masked softmax rows. Semantics are
// the CPU kernel's (runtime/cpu/AttentionKernel.cpp): scale defaults to
// 1 / sqrt(D), is_causal masks key j > i, a bool attn_mask masks where
// false and a float one is added (broadcast to [B, Hq, Sq, T], a shorter
// last dimension padded with masked keys), a row whose keys are all masked
// gives zeros. The scores are kept in the operands' type; the softmax
// computes in f32 with f64 sums.
//
// The gradient recomputes the probabilities P, then dV = P^T dY,
// dP = dY V^T, dS = scale P (dP - rowsum(P dP)), dQ = dS K, dK = dS^T Q.
//
// RotaryEmbedding (opset 23; the CPU kernel is runtime/cpu/RotaryKernel.cpp)
// rotates each head's first rotary_embedding_dim entries by the cos and sin
// rows at its position; its gradient is the same op with the sine negated.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaOpSupport.h"

#include "ir/Graph.h"

#include <cmath>

using namespace autopar;
using namespace autopar::cuda;
using namespace llvm;

namespace {

enum : unsigned { Q, K, V, Mask, PastKey, PastValue };

struct Shapes {
  int64_t B = 0, Hq = 0, Hkv = 0, Sq = 0, Skv = 0, D = 0, Dv = 0;
  /// Query heads per key/value head.
  int64_t Rep() const { return Hq / Hkv; }
};

} // namespace

/// Q, K, V (operands First..First+2) and what the CUDA kernel takes.
static Expected<Shapes> getShapes(const KernelArgs &A, unsigned First) {
  const Tensor &QT = A.In[First + Q], &KT = A.In[First + K],
               &VT = A.In[First + V];
  if (QT.getRank() != 4 || KT.getRank() != 4 || VT.getRank() != 4)
    return A.error("the CUDA kernel takes 4-D Q, K and V only");
  if (A.has(First + PastKey) || A.has(First + PastValue))
    return A.error("the CUDA kernel takes no past_key or past_value");
  if (A.floatAttr("softcap", 0) > 0)
    return A.error("the CUDA kernel does not support softcap");
  ElementType Elem = QT.getElementType();
  if (!isCudaFloat(Elem))
    return typeError(A, "Q", QT, "f32, f16, bf16");
  for (unsigned I : {First + K, First + V})
    if (A.In[I].getElementType() != Elem)
      return A.error("Q " + QT.getTypeString() + ", K " + KT.getTypeString() +
                     " and V " + VT.getTypeString() +
                     " differ in type; the CUDA kernel takes one type");
  Shapes S;
  S.B = QT.getDim(0);
  S.Hq = QT.getDim(1);
  S.Sq = QT.getDim(2);
  S.D = QT.getDim(3);
  S.Hkv = KT.getDim(1);
  S.Skv = KT.getDim(2);
  S.Dv = VT.getDim(3);
  if (KT.getDim(0) != S.B || VT.getDim(0) != S.B || KT.getDim(3) != S.D ||
      VT.getDim(1) != S.Hkv || VT.getDim(2) != S.Skv)
    return A.error("K " + KT.getTypeString() + " and V " + VT.getTypeString() +
                   " do not match Q " + QT.getTypeString());
  if (S.Hkv == 0 || S.Hq % S.Hkv)
    return A.error("the " + Twine(S.Hq) +
                   " query heads are not a multiple of the " + Twine(S.Hkv) +
                   " key/value heads");
  return S;
}

/// The row kernels' view of is_causal and attn_mask (operand MaskIndex).
static Expected<std::pair<AttentionRows, AttentionMask>>
getMask(const KernelArgs &A, const Shapes &S, unsigned MaskIndex) {
  AttentionRows R;
  R.Hq = S.Hq;
  R.Sq = S.Sq;
  R.T = S.Skv;
  R.Causal = A.intAttr("is_causal", 0) != 0;
  AttentionMask M;
  if (!A.has(MaskIndex))
    return std::make_pair(R, M);
  const Tensor &MT = A.In[MaskIndex];
  ElementType Elem = MT.getElementType();
  if (Elem != ElementType::Bool && !isCudaFloat(Elem))
    return typeError(A, "attn_mask", MT, "bool, f32, f16, bf16");
  std::string Target = "[" + std::to_string(S.B) + ", " + std::to_string(S.Hq) +
                       ", " + std::to_string(S.Sq) + ", " +
                       std::to_string(S.Skv) + "]";
  if (MT.getRank() == 0 || MT.getRank() > 4 || MT.getShape().back() > S.Skv)
    return A.error("attn_mask " + MT.getTypeString() +
                   " does not broadcast to " + Target);
  M.Len = MT.getShape().back();
  Shape Full{S.B, S.Hq, S.Sq, M.Len};
  std::optional<Shape> Joint = broadcastShapes({MT.getShape(), Full});
  if (!Joint || *Joint != Full)
    return A.error("attn_mask " + MT.getTypeString() +
                   " does not broadcast to " + Target);
  Shape St = getBroadcastStrides(MT.getShape(), Full);
  M.T = Elem == ElementType::Bool ? DType::Bool : dt(MT);
  M.Data = MT.getData();
  M.StrideB = St[0];
  M.StrideH = St[1];
  M.StrideI = St[2];
  M.StrideJ = St[3];
  return std::make_pair(R, M);
}

/// Out = Alpha op(X) op(W) for each (batch, key/value head) group: op(X) is
/// [M, K], op(W) [K, N], each group's matrices consecutive.
static Error groupProduct(const KernelArgs &A, CudaContext &C, const Shapes &S,
                          bool TransX, bool TransW, int64_t M, int64_t N,
                          int64_t K, float Alpha, const void *X, const void *W,
                          const Tensor &Out) {
  GemmCall G;
  G.TransA = TransX;
  G.TransB = TransW;
  G.M = M;
  G.N = N;
  G.K = K;
  G.Alpha = Alpha;
  G.A = X;
  G.B = W;
  G.C = Out.getData();
  G.Batch = S.B * S.Hkv;
  G.StrideA = M * K;
  G.StrideB = K * N;
  G.StrideC = M * N;
  return runGemmCall(A, C, Out, G);
}

/// Scale * Q K^T into Scores, then the masked softmax in place: P.
static Error computeProbabilities(const KernelArgs &A, CudaContext &C,
                                  const Shapes &S, const Tensor &QT,
                                  const Tensor &KT, double Scale,
                                  unsigned MaskIndex, const Tensor &Scores) {
  if (Error E = groupProduct(A, C, S, false, true, S.Rep() * S.Sq, S.Skv, S.D,
                             float(Scale), QT.getData(), KT.getData(), Scores))
    return E;
  auto Mask = getMask(A, S, MaskIndex);
  if (!Mask)
    return Mask.takeError();
  return launched(A, attentionSoftmax(dt(Scores), Scores.getData(),
                                      S.B * S.Hq * S.Sq, Mask->first,
                                      Mask->second, C.getStream()));
}

Error cuda::runAttention(const KernelArgs &A, CudaContext &C) {
  Expected<Shapes> SOr = getShapes(A, 0);
  if (!SOr)
    return SOr.takeError();
  const Shapes &S = *SOr;
  for (unsigned I = 1; I != A.Out.size(); ++I)
    if (A.hasResult(I))
      return A.error("the CUDA kernel writes no present_key, present_value "
                     "or qk_matmul_output");
  const Tensor &QT = A.In[Q], &VT = A.In[V], &Y = A.Out[0];
  if (Error E = A.checkShape(0, {S.B, S.Hq, S.Sq, S.Dv}))
    return E;
  if (Y.getElementType() != QT.getElementType())
    return A.error("the result " + Y.getTypeString() + " and Q " +
                   QT.getTypeString() + " differ in type");
  Scratch Work(C);
  Expected<Tensor> P =
      Work.get(A, QT.getElementType(), {S.B, S.Hq, S.Sq, S.Skv});
  if (!P)
    return P.takeError();
  double Scale = A.floatAttr("scale", 1 / std::sqrt(double(S.D)));
  if (Error E = computeProbabilities(A, C, S, QT, A.In[K], Scale, Mask, *P))
    return E;
  // Y = P V over each group's rows.
  return groupProduct(A, C, S, false, false, S.Rep() * S.Sq, S.Dv, S.Skv, 1,
                      P->getData(), VT.getData(), Y);
}

Error cuda::runAttentionGrad(const KernelArgs &A, CudaContext &C) {
  // Operands: dY, then the forward's Q, K, V and attn_mask.
  Expected<Shapes> SOr = getShapes(A, 1);
  if (!SOr)
    return SOr.takeError();
  const Shapes &S = *SOr;
  const Tensor &DY = A.In[0], &QT = A.In[1 + Q], &KT = A.In[1 + K],
               &VT = A.In[1 + V];
  ElementType Elem = QT.getElementType();
  if (DY.getShape() != ArrayRef<int64_t>{S.B, S.Hq, S.Sq, S.Dv} ||
      DY.getElementType() != Elem)
    return A.error("dY " + DY.getTypeString() +
                   " is not the attention's output");
  for (unsigned I = 0; I != 3; ++I) {
    if (Error E = A.checkShape(I, A.In[I + 1].getShape()))
      return E;
    if (A.Out[I].getElementType() != Elem)
      return A.error("the gradients must have Q's type " + QT.getTypeString());
  }
  Scratch Work(C);
  Expected<Tensor> P = Work.get(A, Elem, {S.B, S.Hq, S.Sq, S.Skv});
  if (!P)
    return P.takeError();
  Expected<Tensor> DS = Work.get(A, Elem, {S.B, S.Hq, S.Sq, S.Skv});
  if (!DS)
    return DS.takeError();
  double Scale = A.floatAttr("scale", 1 / std::sqrt(double(S.D)));
  if (Error E = computeProbabilities(A, C, S, QT, KT, Scale, 1 + Mask, *P))
    return E;
  int64_t Rows = S.Rep() * S.Sq;
  const Tensor &DQ = A.Out[0], &DK = A.Out[1], &DV = A.Out[2];
  // dV = P^T dY: [Skv, Rows] x [Rows, Dv].
  if (Error E = groupProduct(A, C, S, true, false, S.Skv, S.Dv, Rows, 1,
                             P->getData(), DY.getData(), DV))
    return E;
  // dP = dY V^T: [Rows, Dv] x [Dv, Skv], then dS in place.
  if (Error E = groupProduct(A, C, S, false, true, Rows, S.Skv, S.Dv, 1,
                             DY.getData(), VT.getData(), *DS))
    return E;
  if (Error E =
          launched(A, attentionSoftmaxGrad(dt(*P), P->getData(), DS->getData(),
                                           S.B * S.Hq * S.Sq, S.Skv,
                                           float(Scale), C.getStream())))
    return E;
  // dQ = dS K: [Rows, Skv] x [Skv, D]; dK = dS^T Q: [Skv, Rows] x [Rows, D].
  if (Error E = groupProduct(A, C, S, false, false, Rows, S.D, S.Skv, 1,
                             DS->getData(), KT.getData(), DQ))
    return E;
  return groupProduct(A, C, S, true, false, S.Skv, S.D, Rows, 1, DS->getData(),
                      QT.getData(), DK);
}

Error cuda::runRotaryEmbedding(const KernelArgs &A, CudaContext &C) {
  for (unsigned I : {0u, 1u, 2u})
    if (Error E = checkFloat(A, I))
      return E;
  if (Error E = checkFloatResult(A, 0))
    return E;
  const Tensor &X = A.In[0], &Cos = A.In[1], &Sin = A.In[2], &Y = A.Out[0];
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  if (X.getRank() != 3 && X.getRank() != 4)
    return A.error("X " + X.getTypeString() + " must have rank 3 or 4");
  RotaryShape Sh;
  Sh.ThreeD = X.getRank() == 3;
  Sh.B = X.getDim(0);
  if (Sh.ThreeD) {
    Sh.H = A.intAttr("num_heads", 0);
    if (Sh.H <= 0 || X.getDim(2) % Sh.H)
      return A.error("3-D X needs a 'num_heads' that divides " +
                     Twine(X.getDim(2)));
    Sh.S = X.getDim(1);
    Sh.D = X.getDim(2) / Sh.H;
  } else {
    Sh.H = X.getDim(1);
    Sh.S = X.getDim(2);
    Sh.D = X.getDim(3);
  }
  Sh.R = A.intAttr("rotary_embedding_dim", 0);
  if (Sh.R == 0)
    Sh.R = Sh.D;
  if (Sh.R < 0 || Sh.R % 2 || Sh.R > Sh.D)
    return A.error("the rotary dimension " + Twine(Sh.R) +
                   " must be even and at most the head size " + Twine(Sh.D));
  Sh.Interleaved = A.intAttr("interleaved", 0) != 0;
  int64_t Half = Sh.R / 2;
  bool HasPositions = A.has(3);
  if (Cos.getShape() != Sin.getShape() ||
      Cos.getElementType() != Sin.getElementType() ||
      Cos.getRank() != (HasPositions ? 2u : 3u) ||
      Cos.getShape().back() != Half)
    return A.error("cos_cache " + Cos.getTypeString() + " and sin_cache " +
                   Sin.getTypeString() + " must be [" +
                   (HasPositions ? "max position" : "batch, sequence") + ", " +
                   Twine(Half) + "] of one type");
  if (!HasPositions && (Cos.getDim(0) != Sh.B || Cos.getDim(1) != Sh.S))
    return A.error("cos_cache " + Cos.getTypeString() +
                   " must match X's batch and sequence");
  const int64_t *Positions = nullptr;
  if (HasPositions) {
    const Tensor &P = A.In[3];
    if (P.getElementType() != ElementType::I64 ||
        P.getShape() != ArrayRef<int64_t>{Sh.B, Sh.S})
      return A.error("position_ids " + P.getTypeString() + " must be i64[" +
                     Twine(Sh.B) + ", " + Twine(Sh.S) + "]");
    Positions = P.data<int64_t>();
  }
  int Code = C.getErrorCode(A.N, "a position id is outside the caches' " +
                                     Twine(Cos.getDim(0)) + " positions");
  return launched(A, rotaryEmbedding(dt(X), X.getData(), dt(Cos), Cos.getData(),
                                     Sin.getData(), Positions, Cos.getDim(0),
                                     dt(Y), Y.getData(), Sh, C.getErrorWord(),
                                     Code, C.getStream()));
}
