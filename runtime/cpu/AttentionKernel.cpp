//===- AttentionKernel.cpp - ONNX Attention (opset 23) --------------------===//
//
// Q [B, Hq, Sq, D], K [B, Hkv, Skv, D], V [B, Hkv, Skv, Dv] (or all 3-D
// [B, S, H * D] with q_num_heads and kv_num_heads), optional past_key and
// past_value [B, Hkv, P, D|Dv] before K and V along the sequence (T = P +
// Skv keys in all). Query head h reads key/value head h / (Hq / Hkv)
// (grouped-query attention, ONNX's repeat of each K/V head).
//
// For each query row: s_j = scale * q . k_j (scale defaults to
// 1 / sqrt(D)), then softcap (c tanh(s / c) when `softcap` > 0), then the
// bias: with is_causal, key j is masked when j > i + P; a bool attn_mask
// masks where false, a float one is added; the mask broadcasts to
// [B, Hq, Sq, T] except its last dimension, which may be shorter than T and
// is then padded with masked positions. Softmax (sums in f64) and the
// weighted sum of V rows follow. A row whose keys are all masked gives
// zeros (not NaN). The products run as GEMMs over blocks of query rows;
// with is_causal, a block's products leave out the keys after its last row
// (masked for all of its rows), unless qk_matmul_output holds scores
// before the softmax.
//
// qk_matmul_output holds, by qk_matmul_output_mode: 0 the scaled QK
// product, 1 the scores after softcap and bias, 2 after softcap, 3 the
// softmax.
//
// With `dropout` (training; the node's random stream gives A.Dropout) the
// probabilities that multiply V are the softmax times the mask over
// (1 - dropout), the mask drawn per score (DropoutMask.h) so that the
// gradient, a recomputed forward and every tensor-parallel rank draw the
// same one.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/VectorMath.h"

#include "ir/Graph.h"
#include "runtime/DropoutStream.h"
#include "runtime/OpShapes.h"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace autopar;
using namespace llvm;

namespace {

enum : unsigned { Q, K, V, Mask, PastKey, PastValue };
enum : unsigned { Y, PresentKey, PresentValue, QKOutput };

/// Rows of a Q, K, V or Y operand: [B, H, S, D] or [B, S, H * D].
struct HeadRows {
  const float *Data = nullptr;
  bool ThreeD = false;
  int64_t H = 0, S = 0, D = 0;

  int64_t offset(int64_t B, int64_t Head, int64_t Pos) const {
    return (ThreeD ? (B * S + Pos) * H + Head : (B * H + Head) * S + Pos) * D;
  }
  const float *row(int64_t B, int64_t Head, int64_t Pos) const {
    return Data + offset(B, Head, Pos);
  }
  /// Elements from one row of a head to the next.
  int64_t ld() const { return ThreeD ? H * D : D; }
};

} // namespace

static Expected<AttentionPlan> getShapes(const KernelArgs &A) {
  for (unsigned I : {Q, K, V, PastKey, PastValue})
    if (A.has(I))
      if (Error E = A.checkType(I, {ElementType::F32}))
        return E;
  return planAttention(A);
}

/// The bias of one query row (T entries) from is_causal and attn_mask.
class AttentionBias {
public:
  AttentionBias(const KernelArgs &A, const AttentionPlan &S)
      : A(A), S(S), Causal(A.intAttr("is_causal", 0)) {}

  Error init() {
    if (!A.has(Mask))
      return Error::success();
    if (Error E = A.checkType(Mask, {ElementType::Bool, ElementType::F32}))
      return E;
    Expected<AttentionMaskPlan> M = planAttentionMask(A, S);
    if (!M)
      return M.takeError();
    MaskLen = M->Len;
    Strides = std::move(M->Strides);
    return Error::success();
  }

  bool isCausal() const { return Causal; }

  /// Keys [0, Visible) of rows [I0, I0 + R): with is_causal the keys after
  /// the block's last row (j > I0 + R - 1 + P) are masked for all of its
  /// rows, whatever the mask adds, so their probabilities are 0 and the
  /// products can leave them out. All T keys otherwise.
  int64_t getVisibleKeys(int64_t I0, int64_t R) const {
    int64_t T = S.P + S.Skv;
    return Causal ? std::min(T, I0 + R + S.P) : T;
  }

  /// Adds the bias of row (B, H, I) to its first T scores (all keys by
  /// default).
  void apply(int64_t B, int64_t H, int64_t I, float *Scores,
             int64_t T = -1) const {
    if (T < 0)
      T = S.P + S.Skv;
    if (Causal)
      for (int64_t J = I + S.P + 1; J < T; ++J)
        Scores[J] = -INFINITY;
    if (!A.has(Mask))
      return;
    const Tensor &M = A.In[Mask];
    int64_t Base = B * Strides[0] + H * Strides[1] + I * Strides[2];
    for (int64_t J = 0; J != T; ++J) {
      if (J >= MaskLen) {
        Scores[J] = -INFINITY;
        continue;
      }
      int64_t At = Base + J * Strides[3];
      if (M.getElementType() == ElementType::Bool) {
        if (!M.data<uint8_t>()[At])
          Scores[J] = -INFINITY;
      } else {
        Scores[J] += M.data<float>()[At];
      }
    }
  }

private:
  const KernelArgs &A;
  const AttentionPlan &S;
  bool Causal;
  int64_t MaskLen = 0;
  Shape Strides;
};

static Error checkResults(const KernelArgs &A, const AttentionPlan &S) {
  int64_t T = S.P + S.Skv;
  Shape YShape =
      S.ThreeD ? Shape{S.B, S.Sq, S.Hq * S.Dv} : Shape{S.B, S.Hq, S.Sq, S.Dv};
  Shape Want[] = {YShape,
                  {S.B, S.Hkv, T, S.D},
                  {S.B, S.Hkv, T, S.Dv},
                  {S.B, S.Hq, S.Sq, T}};
  for (unsigned I = 0; I != A.Out.size(); ++I) {
    if (!A.hasResult(I))
      continue;
    if (Error E = A.checkShape(I, Want[I]))
      return E;
    if (Error E = A.checkResultType(I, {ElementType::F32}))
      return E;
  }
  return Error::success();
}

/// Writes present_key or present_value: the past rows, then the new ones.
static void writePresent(const KernelArgs &A, const AttentionPlan &S,
                         unsigned Past, const HeadRows &New, unsigned Result) {
  if (!A.hasResult(Result))
    return;
  int64_t T = S.P + S.Skv, D = New.D;
  float *Out = A.Out[Result].data<float>();
  for (int64_t B = 0; B != S.B; ++B)
    for (int64_t H = 0; H != S.Hkv; ++H)
      for (int64_t J = 0; J != T; ++J) {
        const float *Row =
            J < S.P ? A.In[Past].data<float>() + ((B * S.Hkv + H) * S.P + J) * D
                    : New.row(B, H, J - S.P);
        std::copy_n(Row, D, Out + ((B * S.Hkv + H) * T + J) * D);
      }
}

/// Scores becomes softmax(Scores) in place, as both the forward and the
/// gradient compute it (so that recomputed probabilities are the forward's
/// bit for bit): one vectorized f32 exp per key and the sum in f64
/// (cpu/VectorMath.h); all keys masked gives zeros.
static void softmaxRow(float *Scores, int64_t T) {
  float Max = maxOf(Scores, T);
  if (Max == -INFINITY) {
    std::fill_n(Scores, T, 0.0f);
    return;
  }
  double Sum = expShifted(Scores, Max, Scores, T);
  scaleRow(Scores, float(1 / Sum), T);
}

/// Query rows per causal block (getBlockRows): at sequence S the products
/// cover (S / CausalRows + 1) / (2 S / CausalRows) of the keys, five
/// eighths at 128.
constexpr int64_t CausalRows = 32;

/// Query rows per block: a block's scores (rows x keys) stay within 1 MiB
/// of f32 (at least 16 rows), so the whole score matrix is never held.
static int64_t getBlockRows(int64_t Sq, int64_t T, bool Causal) {
  int64_t Rows =
      std::max<int64_t>(16, (int64_t(1) << 18) / std::max<int64_t>(T, 1));
  // Causal blocks see the keys up to their last row: smaller blocks leave
  // out more of the products, at GEMMs that cost more per FLOP.
  if (Causal)
    Rows = std::min(Rows, CausalRows);
  return std::max<int64_t>(1, std::min(Rows, Sq));
}

/// Scale * Q K^T of query rows [I0, I0 + R) of (batch B, query head H)
/// into Scores (R rows of P + Skv keys, the cache's first), keys [0,
/// Visible) only (at least the cache's): one GEMM for the cache and one
/// for the new keys, the same calls in the forward and the gradient.
static void blockScores(const KernelArgs &A, const AttentionPlan &S,
                        const HeadRows &QR, const HeadRows &KR, int64_t B,
                        int64_t H, int64_t I0, int64_t R, float Scale,
                        float *Scores, int64_t Visible) {
  int64_t T = S.P + S.Skv, KH = H / (S.Hq / S.Hkv);
  const float *QBlock = QR.row(B, H, I0);
  if (S.P)
    sgemm(false, true, R, S.P, S.D, Scale, QBlock, QR.ld(),
          A.In[PastKey].data<float>() + (B * S.Hkv + KH) * S.P * S.D, S.D, 0,
          Scores, T);
  if (Visible > S.P)
    sgemm(false, true, R, Visible - S.P, S.D, Scale, QBlock, QR.ld(),
          KR.row(B, KH, 0), KR.ld(), 0, Scores + S.P, T);
}

/// The dropout of attention node A (getAttentionDropoutBlock), which takes
/// no key/value cache.
static Expected<const DropoutBlock *> getKernelDropout(const KernelArgs &A,
                                                       const AttentionPlan &S) {
  Expected<const DropoutBlock *> Drop = getAttentionDropoutBlock(A);
  if (Drop && *Drop && S.P)
    return A.error("attention dropout with a key/value cache");
  return Drop;
}

/// Row I of (batch B, head H) of the probabilities: P dropped into Dropped
/// (P times the mask over 1 - ratio), the mask into Keep if given.
static void dropRow(const DropoutBlock &Drop, const AttentionPlan &S, int64_t B,
                    int64_t H, int64_t I, const float *P, float *Dropped,
                    uint8_t *Keep) {
  uint64_t Start = Drop.rowStart((B * S.Hq + H) * S.Sq + I);
  uint8_t Chunk[256];
  for (int64_t J0 = 0; J0 < S.Skv; J0 += 256) {
    int64_t N = std::min<int64_t>(256, S.Skv - J0);
    uint8_t *K = Keep ? Keep + J0 : Chunk;
    Drop.Key.keepsRun(Start + uint64_t(J0), N, K);
    for (int64_t J = 0; J != N; ++J)
      Dropped[J0 + J] = K[J] ? P[J0 + J] * Drop.Key.Scale : 0.0f;
  }
}

/// The forward of Attention and AttentionWithProbs: Y into A.Out[0], and
/// into QK (when not null) what qk_matmul_output_mode Mode says; with
/// dropout, the mask and the dropped probabilities into MaskOut and
/// DroppedOut when not null.
static Error attentionForward(const KernelArgs &A, const AttentionPlan &S,
                              float *QKData, int64_t Mode,
                              uint8_t *MaskOut = nullptr,
                              float *DroppedOut = nullptr) {
  Expected<const DropoutBlock *> Drop = getKernelDropout(A, S);
  if (!Drop)
    return Drop.takeError();
  AttentionBias Bias(A, S);
  if (Error E = Bias.init())
    return E;
  float Scale = float(A.floatAttr("scale", 1 / std::sqrt(double(S.D))));
  float Softcap = float(A.floatAttr("softcap", 0));
  HeadRows QR{A.In[Q].data<float>(), S.ThreeD, S.Hq, S.Sq, S.D};
  HeadRows KR{A.In[K].data<float>(), S.ThreeD, S.Hkv, S.Skv, S.D};
  HeadRows VR{A.In[V].data<float>(), S.ThreeD, S.Hkv, S.Skv, S.Dv};
  HeadRows YR{A.Out[Y].data<float>(), S.ThreeD, S.Hq, S.Sq, S.Dv};
  int64_t T = S.P + S.Skv, Group = S.Hq / S.Hkv;
  // The pre-softmax outputs (modes 0-2) hold every key's score.
  bool Skip = Bias.isCausal() && (!QKData || Mode == 3);
  int64_t Rows = getBlockRows(S.Sq, T, Skip);
  // Each (batch, head) is independent: threads take whole ones, each
  // calling OpenBLAS alone.
  SerialBlas Serial;
  parallelFor(S.B * S.Hq, [&](int64_t BH) {
    int64_t B = BH / S.Hq, H = BH % S.Hq, KH = H / Group;
    // Scratch kept by the thread: no allocation per call.
    float *Scores = getScratchFloats(0, Rows * T);
    float *Dropped =
        *Drop && !DroppedOut ? getScratchFloats(1, Rows * T) : nullptr;
    for (int64_t I0 = 0; I0 < S.Sq; I0 += Rows) {
      int64_t R = std::min(Rows, S.Sq - I0);
      int64_t First = (B * S.Hq + H) * S.Sq + I0;
      // Keys [0, Vis) take part; the others' probabilities are 0.
      int64_t Vis = Skip ? Bias.getVisibleKeys(I0, R) : T;
      blockScores(A, S, QR, KR, B, H, I0, R, Scale, Scores, Vis);
      for (int64_t Ri = 0; Ri != R; ++Ri) {
        int64_t I = I0 + Ri;
        float *Row = Scores + Ri * T;
        float *QK = QKData ? QKData + (First + Ri) * T : nullptr;
        if (QK && Mode == 0)
          std::copy_n(Row, T, QK);
        if (Softcap > 0)
          for (int64_t J = 0; J != T; ++J)
            Row[J] = Softcap * std::tanh(Row[J] / Softcap);
        if (QK && Mode == 2)
          std::copy_n(Row, T, QK);
        Bias.apply(B, H, I, Row, Vis);
        if (QK && Mode == 1)
          std::copy_n(Row, T, QK);
        softmaxRow(Row, Vis);
        std::fill(Row + Vis, Row + T, 0.0f);
        if (QK && Mode == 3)
          std::copy_n(Row, T, QK);
        if (*Drop)
          dropRow(**Drop, S, B, H, I, Row,
                  DroppedOut ? DroppedOut + (First + Ri) * T : Dropped + Ri * T,
                  MaskOut ? MaskOut + (First + Ri) * T : nullptr);
      }
      // The weights of V: the probabilities, or the dropped ones.
      const float *Weights = !*Drop       ? Scores
                             : DroppedOut ? DroppedOut + First * T
                                          : Dropped;
      float *Out = A.Out[Y].data<float>() + YR.offset(B, H, I0);
      if (S.P)
        sgemm(false, false, R, S.Dv, S.P, 1, Weights, T,
              A.In[PastValue].data<float>() + (B * S.Hkv + KH) * S.P * S.Dv,
              S.Dv, 0, Out, YR.ld());
      if (Vis > S.P)
        sgemm(false, false, R, S.Dv, Vis - S.P, 1, Weights + S.P, T,
              VR.row(B, KH, 0), VR.ld(), S.P ? 1 : 0, Out, YR.ld());
      else if (!S.P)
        for (int64_t Ri = 0; Ri != R; ++Ri)
          std::fill_n(Out + Ri * YR.ld(), S.Dv, 0.0f);
    }
  });
  return Error::success();
}

Error autopar::runAttention(const KernelArgs &A) {
  Expected<AttentionPlan> Shapes = getShapes(A);
  if (!Shapes)
    return Shapes.takeError();
  const AttentionPlan &S = *Shapes;
  if (Error E = checkResults(A, S))
    return E;
  float *QK = A.hasResult(QKOutput) ? A.Out[QKOutput].data<float>() : nullptr;
  if (Error E =
          attentionForward(A, S, QK, A.intAttr("qk_matmul_output_mode", 0)))
    return E;
  HeadRows KR{A.In[K].data<float>(), S.ThreeD, S.Hkv, S.Skv, S.D};
  HeadRows VR{A.In[V].data<float>(), S.ThreeD, S.Hkv, S.Skv, S.Dv};
  writePresent(A, S, PastKey, KR, PresentKey);
  writePresent(A, S, PastValue, VR, PresentValue);
  return Error::success();
}

// AttentionWithProbs(Q, K, V, attn_mask?) -> Y, probs, mask?, dropped?: the
// forward with the probabilities (qk_matmul_output_mode 3) as result 1;
// with dropout, the mask and the dropped probabilities as results 2 and 3.
Error autopar::runAttentionWithProbs(const KernelArgs &A) {
  Expected<AttentionPlan> Shapes = getShapes(A);
  if (!Shapes)
    return Shapes.takeError();
  const AttentionPlan &S = *Shapes;
  if (S.ThreeD)
    return A.error("AttentionWithProbs takes the 4-D form only");
  for (unsigned I = 0; I != 2; ++I)
    if (Error E = A.checkResultType(I, {ElementType::F32}))
      return E;
  if (Error E = A.checkShape(0, {S.B, S.Hq, S.Sq, S.Dv}))
    return E;
  if (Error E = A.checkShape(1, {S.B, S.Hq, S.Sq, S.Skv}))
    return E;
  bool Dropout = A.floatAttr("dropout", 0) > 0;
  if (Dropout != (A.hasResult(2) && A.hasResult(3)))
    return A.error(Dropout ? "with dropout, returns the mask and the dropped "
                             "probabilities"
                           : "returns a mask only with dropout");
  uint8_t *Mask = nullptr;
  float *Dropped = nullptr;
  if (Dropout) {
    for (unsigned I : {2u, 3u})
      if (Error E = A.checkShape(I, {S.B, S.Hq, S.Sq, S.Skv}))
        return E;
    if (Error E = A.checkResultType(2, {ElementType::Bool}))
      return E;
    if (Error E = A.checkResultType(3, {ElementType::F32}))
      return E;
    Mask = A.Out[2].data<uint8_t>();
    Dropped = A.Out[3].data<float>();
  }
  return attentionForward(A, S, A.Out[1].data<float>(), 3, Mask, Dropped);
}

// AttentionGrad(dY, Q, K, V, attn_mask?, probs?, mask?, dropped?) -> dQ,
// dK, dV for the 4-D form without a cache or softcap. Per query row the
// probabilities P are read from `probs` (AttentionWithProbs kept them) or
// recomputed exactly as the forward computes them; with dropout the mask M
// and the dropped probabilities D = P M / (1 - dropout) are read with them
// or drawn again (A.Dropout), else D = P and M = 1. With dD_j = dY . v_j,
// dP_j = dD_j M_j / (1 - dropout) and dS_j = P_j (dP_j - sum_k P_k dP_k):
// dQ += scale * sum_j dS_j k_j, dK_j += scale * dS_j q, dV_j += D_j dY.
// The products are GEMMs over blocks of query rows (as in the forward);
// dK and dV accumulate in f32 over the query heads of their group, then the
// blocks, on the one thread that takes the (batch, K/V head) pair, so the
// sums do not depend on the thread count.
Error autopar::runAttentionGrad(const KernelArgs &A) {
  // The forward operands start at 1: Q, K, V, attn_mask.
  KernelArgs Fwd{A.N, A.In.drop_front(1).take_front(4), {}};
  Expected<AttentionPlan> Shapes = getShapes(Fwd);
  if (!Shapes)
    return Shapes.takeError();
  const AttentionPlan &S = *Shapes;
  if (S.ThreeD)
    return A.error("the gradient takes the 4-D form only");
  if (A.floatAttr("softcap", 0) > 0)
    return A.error("the gradient does not support softcap");
  if (Error E = A.checkType(0, {ElementType::F32}))
    return E;
  if (A.In[0].getShape() != ArrayRef<int64_t>{S.B, S.Hq, S.Sq, S.Dv})
    return A.error("dY " + A.In[0].getTypeString() +
                   " is not the attention's output shape");
  for (unsigned I = 0; I != 3; ++I)
    if (Error E = A.checkShape(I, A.In[I + 1].getShape()))
      return E;
  constexpr unsigned Probs = 5, KeptMask = 6, KeptDropped = 7;
  const float *Kept = nullptr;
  Expected<const DropoutBlock *> Drop = getKernelDropout(A, S);
  if (!Drop)
    return Drop.takeError();
  const uint8_t *MaskIn = nullptr;
  const float *DroppedIn = nullptr;
  if (A.floatAttr("dropout", 0) > 0 && A.has(Probs)) {
    if (!A.has(KeptMask) || !A.has(KeptDropped))
      return A.error("with dropout and probs, needs the forward's mask and "
                     "dropped probabilities");
    for (unsigned I : {KeptMask, KeptDropped})
      if (A.In[I].getShape() != ArrayRef<int64_t>{S.B, S.Hq, S.Sq, S.Skv})
        return A.error("the kept " + A.In[I].getTypeString() +
                       " is not [batch, q heads, q sequence, kv sequence]");
    if (Error E = A.checkType(KeptMask, {ElementType::Bool}))
      return E;
    if (Error E = A.checkType(KeptDropped, {ElementType::F32}))
      return E;
    MaskIn = A.In[KeptMask].data<uint8_t>();
    DroppedIn = A.In[KeptDropped].data<float>();
  }
  if (A.has(Probs)) {
    if (Error E = A.checkType(Probs, {ElementType::F32}))
      return E;
    if (A.In[Probs].getShape() != ArrayRef<int64_t>{S.B, S.Hq, S.Sq, S.Skv})
      return A.error("probs " + A.In[Probs].getTypeString() +
                     " is not [batch, q heads, q sequence, kv sequence]");
    Kept = A.In[Probs].data<float>();
  }
  AttentionBias Bias(Fwd, S);
  if (Error E = Bias.init())
    return E;
  float Scale = float(A.floatAttr("scale", 1 / std::sqrt(double(S.D))));
  HeadRows QR{A.In[1].data<float>(), false, S.Hq, S.Sq, S.D};
  HeadRows KR{A.In[2].data<float>(), false, S.Hkv, S.Skv, S.D};
  HeadRows VR{A.In[3].data<float>(), false, S.Hkv, S.Skv, S.Dv};
  HeadRows DYR{A.In[0].data<float>(), false, S.Hq, S.Sq, S.Dv};
  float *DQ = A.Out[0].data<float>(), *DK = A.Out[1].data<float>(),
        *DV = A.Out[2].data<float>();
  int64_t T = S.Skv, Group = S.Hq / S.Hkv;
  int64_t Rows = getBlockRows(S.Sq, T, Bias.isCausal());
  float DropScale = *Drop ? (*Drop)->Key.Scale : 1.0f;
  // Threads take whole (batch, K/V head) pairs: the query heads of a group
  // add into the same dK and dV rows, in head order within the pair.
  SerialBlas Serial;
  parallelFor(S.B * S.Hkv, [&](int64_t BKH) {
    int64_t B = BKH / S.Hkv, KH = BKH % S.Hkv;
    // Scratch kept by the thread: no allocation per call.
    bool Redraw = *Drop && !MaskIn;
    float *Scores = Kept ? nullptr : getScratchFloats(0, Rows * T);
    float *DS = getScratchFloats(1, Rows * T);
    float *Dropped = Redraw ? getScratchFloats(2, Rows * T) : nullptr;
    uint8_t *Keep = Redraw ? getScratchBytes(3, Rows * T) : nullptr;
    const float *KRows = KR.row(B, KH, 0), *VRows = VR.row(B, KH, 0);
    float *DKRows = DK + KR.offset(B, KH, 0),
          *DVRows = DV + VR.offset(B, KH, 0);
    std::fill_n(DKRows, T * S.D, 0.0f);
    std::fill_n(DVRows, T * S.Dv, 0.0f);
    for (int64_t H = KH * Group, HE = H + Group; H != HE; ++H)
      for (int64_t I0 = 0; I0 < S.Sq; I0 += Rows) {
        int64_t R = std::min(Rows, S.Sq - I0);
        int64_t First = (B * S.Hq + H) * S.Sq + I0;
        // Keys [0, Vis) take part (all unless causal): the others'
        // probabilities are 0, and so are their terms below.
        int64_t Vis = Bias.getVisibleKeys(I0, R);
        // The probabilities P: kept, or recomputed as the forward does.
        const float *P = Kept ? Kept + First * T : Scores;
        if (!Kept) {
          blockScores(Fwd, S, QR, KR, B, H, I0, R, Scale, Scores, Vis);
          for (int64_t Ri = 0; Ri != R; ++Ri) {
            Bias.apply(B, H, I0 + Ri, Scores + Ri * T, Vis);
            softmaxRow(Scores + Ri * T, Vis);
            std::fill(Scores + Ri * T + Vis, Scores + (Ri + 1) * T, 0.0f);
          }
        }
        // The weights of V and the dropout mask: kept or drawn again.
        const float *Weights = P;
        const uint8_t *KeepRows = nullptr;
        if (*Drop && MaskIn) {
          Weights = DroppedIn + First * T;
          KeepRows = MaskIn + First * T;
        } else if (*Drop) {
          for (int64_t Ri = 0; Ri != R; ++Ri)
            dropRow(**Drop, S, B, H, I0 + Ri, P + Ri * T, Dropped + Ri * T,
                    Keep + Ri * T);
          Weights = Dropped;
          KeepRows = Keep;
        }
        const float *QBlock = QR.row(B, H, I0), *DYBlock = DYR.row(B, H, I0);
        // dD = dY V^T, then dP (through the dropout mask) and
        // dS = P (dP - sum_k P_k dP_k) * scale in place.
        sgemm(false, true, R, Vis, S.Dv, 1, DYBlock, S.Dv, VRows, S.Dv, 0, DS,
              T);
        for (int64_t Ri = 0; Ri != R; ++Ri) {
          float *Row = DS + Ri * T;
          const float *PRow = P + Ri * T;
          if (KeepRows)
            for (int64_t J = 0; J != Vis; ++J)
              Row[J] = KeepRows[Ri * T + J] ? Row[J] * DropScale : 0.0f;
          softmaxGradRow(PRow, Row, float(dotAsDouble(PRow, Row, Vis)), Scale,
                         Vis);
        }
        // dQ = dS K, dK += dS^T Q, dV += W^T dY, over key rows [0, Vis).
        sgemm(false, false, R, S.D, Vis, 1, DS, T, KRows, S.D, 0,
              DQ + QR.offset(B, H, I0), S.D);
        sgemm(true, false, Vis, S.D, R, 1, DS, T, QBlock, S.D, 1, DKRows, S.D);
        sgemm(true, false, Vis, S.Dv, R, 1, Weights, T, DYBlock, S.Dv, 1,
              DVRows, S.Dv);
      }
  });
  return Error::success();
}
