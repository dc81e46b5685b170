//===- CudaAttentionOps.cpp - Attention and its gradient ------------------===//
//
// ONNX Attention in its 4-D form without a KV cache, softcap or
// qk_matmul_output, and AttentionGrad. Semantics are the CPU kernel's
// (runtime/cpu/AttentionKernel.cpp): scale defaults to 1 / sqrt(D),
// is_causal masks key j > i, a bool attn_mask masks where false and a float
// one is added (broadcast to [B, Hq, Sq, Skv], a shorter last dimension
// padded with masked keys), query head h reads key/value head h / (Hq /
// Hkv) (grouped-query attention), and a row whose keys are all masked gives
// zeros. Two kernels, as the plan chooses:
//
// Flash (`attention=flash`): Attention and an AttentionGrad without probs
// run FlashAttentionKernels.cu's tiled kernels, which never hold the
// scores: an online softmax in f32 over key tiles in shared memory, and a
// gradient that recomputes the scores tile by tile from each row's
// log-sum-exp and dY . Y (2 x [B, Hq, Sq] floats of scratch). D and Dv up
// to 256.
//
// Materialized (`attention=materialized`): AttentionWithProbs and an
// AttentionGrad that reads its probabilities, and the Attention and
// AttentionGrad that recompute-attention rebuilds from them (annotated
// `attention_kernel = "materialized"`: probabilities in scratch), hold the
// scores: cuBLAS
// products, strided-batched over batch x key/value heads (a group's query
// heads are consecutive rows of Q, so one product serves the group), and
// AttentionKernels.cu's masked softmax rows (in f32 with f64 sums, the
// scores kept in the operands' type). The gradient computes dV = P^T dY,
// dP = dY V^T, dS = scale P (dP - rowsum(P dP)), dQ = dS K, dK = dS^T Q.
//
// Dropout (`dropout`, the node's block of the probabilities' random tensor
// in A.Dropout): the materialized kernel drops P into D and a mask with the
// elementwise dropout kernel (AttentionWithProbs returns both; the
// recomputing forms hold them in scratch), Y = D V, and its gradient takes
// dV = D^T dY and dP = (dY V^T) times the mask over 1 - dropout; the flash
// kernels draw each score's mask in their loops (FlashShape::Drop).
//
// RotaryEmbedding (opset 23; the CPU kernel is runtime/cpu/RotaryKernel.cpp)
// rotates each head's first rotary_embedding_dim entries by the cos and sin
// rows at its position; its gradient is the same op with the sine negated.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaOpSupport.h"

#include "ir/Graph.h"
#include "runtime/DropoutStream.h"
#include "runtime/OpShapes.h"

#include <cmath>

using namespace autopar;
using namespace autopar::cuda;
using namespace llvm;

namespace {
enum : unsigned { Q, K, V, Mask, PastKey, PastValue };
} // namespace

using Shapes = AttentionPlan;

/// Query heads per key/value head.
static int64_t rep(const Shapes &S) { return S.Hq / S.Hkv; }

/// Fwd's Q, K and V (its operands as the forward's: AttentionGrad's start
/// at 1) when the CUDA kernel takes them: runtime/OpShapes.h's plan, 4-D,
/// no cache or softcap, one float type.
static Expected<Shapes> getShapes(const KernelArgs &Fwd) {
  const Tensor &QT = Fwd.In[Q], &KT = Fwd.In[K], &VT = Fwd.In[V];
  if (QT.getRank() != 4)
    return Fwd.error("the CUDA kernel takes 4-D Q, K and V only");
  if (Fwd.has(PastKey) || Fwd.has(PastValue))
    return Fwd.error("the CUDA kernel takes no past_key or past_value");
  if (Fwd.floatAttr("softcap", 0) > 0)
    return Fwd.error("the CUDA kernel does not support softcap");
  ElementType Elem = QT.getElementType();
  if (!isCudaFloat(Elem))
    return typeError(Fwd, "Q", QT, "f32, f16, bf16");
  if (KT.getElementType() != Elem || VT.getElementType() != Elem)
    return Fwd.error("Q " + QT.getTypeString() + ", K " + KT.getTypeString() +
                     " and V " + VT.getTypeString() +
                     " differ in type; the CUDA kernel takes one type");
  return planAttention(Fwd);
}

/// Whether the node computes the probabilities whole (recompute-attention's
/// `attention_kernel = "materialized"`), not with the flash kernels.
static bool isMaterialized(const KernelArgs &A) {
  return A.stringAttr("attention_kernel", "") == "materialized";
}

/// The scale of the scores: `scale`, 1 / sqrt(D) by default.
static double getScale(const KernelArgs &A, const Shapes &S) {
  return A.floatAttr("scale", 1 / std::sqrt(double(S.D)));
}

/// The row kernels' view of is_causal and Fwd's attn_mask.
static Expected<std::pair<AttentionRows, AttentionMask>>
getMask(const KernelArgs &Fwd, const Shapes &S) {
  AttentionRows R;
  R.Hq = S.Hq;
  R.Sq = S.Sq;
  R.T = S.Skv;
  R.Causal = Fwd.intAttr("is_causal", 0) != 0;
  AttentionMask M;
  if (!Fwd.has(Mask))
    return std::make_pair(R, M);
  const Tensor &MT = Fwd.In[Mask];
  ElementType Elem = MT.getElementType();
  if (Elem != ElementType::Bool && !isCudaFloat(Elem))
    return typeError(Fwd, "attn_mask", MT, "bool, f32, f16, bf16");
  Expected<AttentionMaskPlan> Plan = planAttentionMask(Fwd, S);
  if (!Plan)
    return Plan.takeError();
  M.T = Elem == ElementType::Bool ? DType::Bool : dt(MT);
  M.Data = MT.getData();
  M.Len = Plan->Len;
  M.StrideB = Plan->Strides[0];
  M.StrideH = Plan->Strides[1];
  M.StrideI = Plan->Strides[2];
  M.StrideJ = Plan->Strides[3];
  return std::make_pair(R, M);
}

/// The flash kernels' view of Fwd's shapes and attributes (with Drop, the
/// dropout); an error when a head dimension is over FlashMaxHeadDim.
static Expected<FlashShape> getFlashShape(const KernelArgs &Fwd,
                                          const Shapes &S,
                                          const DropoutBlock *Drop) {
  if (S.D > FlashMaxHeadDim || S.Dv > FlashMaxHeadDim || S.D < 1 || S.Dv < 1)
    return Fwd.error("the CUDA flash-attention kernel takes head dimensions "
                     "from 1 to " +
                     Twine(FlashMaxHeadDim) + "; Q's is " + Twine(S.D) +
                     " and V's " + Twine(S.Dv));
  FlashShape F;
  F.B = S.B;
  F.Hq = S.Hq;
  F.Hkv = S.Hkv;
  F.Sq = S.Sq;
  F.Skv = S.Skv;
  F.D = S.D;
  F.Dv = S.Dv;
  F.Scale = float(getScale(Fwd, S));
  F.Causal = Fwd.intAttr("is_causal", 0) != 0;
  if (Drop) {
    F.Dropout = true;
    F.Drop = *Drop;
  }
  return F;
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

/// scale * Q K^T into Scores, then the masked softmax in place: P.
static Error computeProbabilities(const KernelArgs &A, CudaContext &C,
                                  const KernelArgs &Fwd, const Shapes &S,
                                  const Tensor &Scores) {
  if (Error E = groupProduct(A, C, S, false, true, rep(S) * S.Sq, S.Skv, S.D,
                             float(getScale(Fwd, S)), Fwd.In[Q].getData(),
                             Fwd.In[K].getData(), Scores))
    return E;
  auto Mask = getMask(Fwd, S);
  if (!Mask)
    return Mask.takeError();
  return launched(A, attentionSoftmax(dt(Scores), Scores.getData(),
                                      S.B * S.Hq * S.Sq, Mask->first,
                                      Mask->second, C.getStream()));
}

/// With Drop: P dropped into Dropped and the mask into Mask.
static Error dropProbabilities(const KernelArgs &A, CudaContext &C,
                               const DropoutBlock &Drop, const Tensor &P,
                               const Tensor &Mask, const Tensor &Dropped) {
  return launched(A, dropout(dt(P), P.getData(), Dropped.getData(),
                             static_cast<uint8_t *>(Mask.getData()),
                             P.getNumElements(), Drop, C.getStream()));
}

/// The probabilities into P, then Y = P V over each group's rows; with
/// Drop, Y = Dropped V after P is dropped into Dropped and Mask.
static Error materializedForward(const KernelArgs &A, CudaContext &C,
                                 const Shapes &S, const Tensor &P,
                                 const DropoutBlock *Drop = nullptr,
                                 const Tensor *Mask = nullptr,
                                 const Tensor *Dropped = nullptr) {
  if (Error E = computeProbabilities(A, C, A, S, P))
    return E;
  const Tensor *W = &P;
  if (Drop) {
    if (Error E = dropProbabilities(A, C, *Drop, P, *Mask, *Dropped))
      return E;
    W = Dropped;
  }
  return groupProduct(A, C, S, false, false, rep(S) * S.Sq, S.Dv, S.Skv, 1,
                      W->getData(), A.In[V].getData(), A.Out[0]);
}

Error cuda::runAttention(const KernelArgs &A, CudaContext &C) {
  Expected<Shapes> SOr = getShapes(A);
  if (!SOr)
    return SOr.takeError();
  const Shapes &S = *SOr;
  for (unsigned I = 1; I != A.Out.size(); ++I)
    if (A.hasResult(I))
      return A.error("the CUDA kernel writes no present_key, present_value "
                     "or qk_matmul_output");
  const Tensor &QT = A.In[Q], &Y = A.Out[0];
  if (Error E = A.checkShape(0, {S.B, S.Hq, S.Sq, S.Dv}))
    return E;
  if (Y.getElementType() != QT.getElementType())
    return A.error("the result " + Y.getTypeString() + " and Q " +
                   QT.getTypeString() + " differ in type");
  Expected<const DropoutBlock *> Drop = getAttentionDropoutBlock(A);
  if (!Drop)
    return Drop.takeError();
  if (isMaterialized(A)) {
    // recompute-attention's: the probabilities (and with dropout the mask
    // and the dropped ones) in scratch.
    Scratch Work(C);
    SmallVector<int64_t, 4> Scores{S.B, S.Hq, S.Sq, S.Skv};
    Expected<Tensor> P = Work.get(A, QT.getElementType(), Scores);
    if (!P)
      return P.takeError();
    if (!*Drop)
      return materializedForward(A, C, S, *P);
    Expected<Tensor> Mask = Work.get(A, ElementType::Bool, Scores);
    if (!Mask)
      return Mask.takeError();
    Expected<Tensor> Dropped = Work.get(A, QT.getElementType(), Scores);
    if (!Dropped)
      return Dropped.takeError();
    return materializedForward(A, C, S, *P, *Drop, &*Mask, &*Dropped);
  }
  Expected<FlashShape> F = getFlashShape(A, S, *Drop);
  if (!F)
    return F.takeError();
  auto Mask = getMask(A, S);
  if (!Mask)
    return Mask.takeError();
  return launched(A, flashAttention(dt(QT), QT.getData(), A.In[K].getData(),
                                    A.In[V].getData(), Mask->second, *F,
                                    Y.getData(), nullptr, C.getStream()));
}

Error cuda::runAttentionWithProbs(const KernelArgs &A, CudaContext &C) {
  Expected<Shapes> SOr = getShapes(A);
  if (!SOr)
    return SOr.takeError();
  const Shapes &S = *SOr;
  const Tensor &QT = A.In[Q], &Y = A.Out[0], &P = A.Out[1];
  if (Error E = A.checkShape(0, {S.B, S.Hq, S.Sq, S.Dv}))
    return E;
  if (Error E = A.checkShape(1, {S.B, S.Hq, S.Sq, S.Skv}))
    return E;
  if (Y.getElementType() != QT.getElementType() ||
      P.getElementType() != QT.getElementType())
    return A.error("the results " + Y.getTypeString() + " and " +
                   P.getTypeString() + " must have Q's type " +
                   QT.getTypeString());
  Expected<const DropoutBlock *> Drop = getAttentionDropoutBlock(A);
  if (!Drop)
    return Drop.takeError();
  if (bool(*Drop) != (A.hasResult(2) && A.hasResult(3)))
    return A.error(*Drop ? "with dropout, returns the mask and the dropped "
                           "probabilities"
                         : "returns a mask only with dropout");
  if (!*Drop)
    return materializedForward(A, C, S, P);
  for (unsigned I : {2u, 3u})
    if (Error E = A.checkShape(I, {S.B, S.Hq, S.Sq, S.Skv}))
      return E;
  if (A.Out[2].getElementType() != ElementType::Bool)
    return typeError(A, "result 2", A.Out[2], "bool");
  if (A.Out[3].getElementType() != QT.getElementType())
    return A.error("the dropped probabilities " + A.Out[3].getTypeString() +
                   " must have Q's type " + QT.getTypeString());
  return materializedForward(A, C, S, P, *Drop, &A.Out[2], &A.Out[3]);
}

/// The gradient from the probabilities AttentionWithProbs kept, P (with
/// dropout: and its Mask and Dropped probabilities, Scale 1 / (1 - ratio)).
static Error materializedGrad(const KernelArgs &A, CudaContext &C,
                              const Shapes &S, const Tensor &P,
                              const Tensor *Mask = nullptr,
                              const Tensor *Dropped = nullptr,
                              float DropScale = 1) {
  const Tensor &DY = A.In[0], &QT = A.In[1 + Q], &KT = A.In[1 + K],
               &VT = A.In[1 + V];
  Scratch Work(C);
  Expected<Tensor> DS = Work.get(A, P.getElementType(), P.getShape());
  if (!DS)
    return DS.takeError();
  double Scale = getScale(A, S);
  int64_t Rows = rep(S) * S.Sq;
  const Tensor &DQ = A.Out[0], &DK = A.Out[1], &DV = A.Out[2];
  // dV = P^T dY (the dropped P with dropout): [Skv, Rows] x [Rows, Dv].
  if (Error E =
          groupProduct(A, C, S, true, false, S.Skv, S.Dv, Rows, 1,
                       (Dropped ? *Dropped : P).getData(), DY.getData(), DV))
    return E;
  // dP = dY V^T: [Rows, Dv] x [Dv, Skv] (with dropout, through the mask),
  // then dS in place.
  if (Error E = groupProduct(A, C, S, false, true, Rows, S.Skv, S.Dv, 1,
                             DY.getData(), VT.getData(), *DS))
    return E;
  if (Mask)
    if (Error E = launched(
            A, dropoutGrad(dt(*DS), DS->getData(),
                           static_cast<const uint8_t *>(Mask->getData()),
                           DS->getData(), DS->getNumElements(), DropScale,
                           C.getStream())))
      return E;
  if (Error E =
          launched(A, attentionSoftmaxGrad(dt(P), P.getData(), DS->getData(),
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

Error cuda::runAttentionGrad(const KernelArgs &A, CudaContext &C) {
  // Operands: dY, then the forward's Q, K, V and attn_mask, then the
  // probabilities when AttentionWithProbs kept them.
  KernelArgs Fwd{A.N, A.In.drop_front(1).take_front(4), {}};
  Expected<Shapes> SOr = getShapes(Fwd);
  if (!SOr)
    return SOr.takeError();
  const Shapes &S = *SOr;
  const Tensor &DY = A.In[0], &QT = A.In[1 + Q];
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
  Expected<const DropoutBlock *> Drop = getAttentionDropoutBlock(A);
  if (!Drop)
    return Drop.takeError();
  float DropScale = *Drop ? (*Drop)->Key.Scale : 1.0f;
  SmallVector<int64_t, 4> Scores{S.B, S.Hq, S.Sq, S.Skv};
  constexpr unsigned Probs = 5, KeptMask = 6, KeptDropped = 7;
  if (A.has(Probs)) {
    const Tensor &P = A.In[Probs];
    if (P.getShape() != ArrayRef<int64_t>(Scores) || P.getElementType() != Elem)
      return A.error("probs " + P.getTypeString() +
                     " is not [batch, q heads, q sequence, kv sequence] in "
                     "Q's type");
    if (!*Drop)
      return materializedGrad(A, C, S, P);
    if (!A.has(KeptMask) || !A.has(KeptDropped))
      return A.error("with dropout and probs, needs the forward's mask and "
                     "dropped probabilities");
    const Tensor &Mask = A.In[KeptMask], &Dropped = A.In[KeptDropped];
    if (Mask.getShape() != ArrayRef<int64_t>(Scores) ||
        Mask.getElementType() != ElementType::Bool ||
        Dropped.getShape() != ArrayRef<int64_t>(Scores) ||
        Dropped.getElementType() != Elem)
      return A.error("the kept mask " + Mask.getTypeString() +
                     " and dropped probabilities " + Dropped.getTypeString() +
                     " are not the probabilities' bool and Q's type");
    return materializedGrad(A, C, S, P, &Mask, &Dropped, DropScale);
  }
  if (isMaterialized(A)) {
    // recompute-attention's: the probabilities again, whole, in scratch
    // (with dropout: the mask drawn again, and the dropped ones).
    Scratch Work(C);
    Expected<Tensor> P = Work.get(A, Elem, Scores);
    if (!P)
      return P.takeError();
    if (Error E = computeProbabilities(A, C, Fwd, S, *P))
      return E;
    if (!*Drop)
      return materializedGrad(A, C, S, *P);
    Expected<Tensor> Mask = Work.get(A, ElementType::Bool, Scores);
    if (!Mask)
      return Mask.takeError();
    Expected<Tensor> Dropped = Work.get(A, Elem, Scores);
    if (!Dropped)
      return Dropped.takeError();
    if (Error E = dropProbabilities(A, C, **Drop, *P, *Mask, *Dropped))
      return E;
    return materializedGrad(A, C, S, *P, &*Mask, &*Dropped, DropScale);
  }
  // No probabilities: the flash kernels recompute them tile by tile (and
  // draw the mask again).
  Expected<FlashShape> F = getFlashShape(Fwd, S, *Drop);
  if (!F)
    return F.takeError();
  auto Mask = getMask(Fwd, S);
  if (!Mask)
    return Mask.takeError();
  Scratch Work(C);
  Expected<Tensor> Stats =
      Work.get(A, ElementType::F32, {flashGradWorkFloats(*F)});
  if (!Stats)
    return Stats.takeError();
  return launched(A, flashAttentionGrad(dt(QT), DY.getData(), QT.getData(),
                                        A.In[1 + K].getData(),
                                        A.In[1 + V].getData(), Mask->second, *F,
                                        A.Out[0].getData(), A.Out[1].getData(),
                                        A.Out[2].getData(),
                                        Stats->data<float>(), C.getStream()));
}

Error cuda::runRotaryEmbedding(const KernelArgs &A, CudaContext &C) {
  for (unsigned I : {0u, 1u, 2u})
    if (Error E = checkFloat(A, I))
      return E;
  if (Error E = checkFloatResult(A, 0))
    return E;
  const Tensor &X = A.In[0], &Cos = A.In[1], &Sin = A.In[2], &Y = A.Out[0];
  if (Cos.getElementType() != Sin.getElementType())
    return A.error("cos_cache " + Cos.getTypeString() + " and sin_cache " +
                   Sin.getTypeString() + " differ in type");
  Expected<RotaryPlan> Plan = planRotary(A);
  if (!Plan)
    return Plan.takeError();
  RotaryShape Sh;
  Sh.B = Plan->B;
  Sh.S = Plan->S;
  Sh.H = Plan->H;
  Sh.D = Plan->D;
  Sh.R = Plan->R;
  Sh.ThreeD = Plan->ThreeD;
  Sh.Interleaved = Plan->Interleaved;
  const int64_t *Positions =
      Plan->HasPositions ? A.In[3].data<int64_t>() : nullptr;
  int Code = C.getErrorCode(A.N, "a position id is outside the caches' " +
                                     Twine(Cos.getDim(0)) + " positions");
  return launched(A, rotaryEmbedding(dt(X), X.getData(), dt(Cos), Cos.getData(),
                                     Sin.getData(), Positions, Cos.getDim(0),
                                     dt(Y), Y.getData(), Sh, C.getErrorWord(),
                                     Code, C.getStream()));
}
