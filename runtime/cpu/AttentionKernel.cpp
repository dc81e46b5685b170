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
// is then padded with masked positions. Softmax (sums in f64, keys in
// order) and the weighted sum of V rows follow. A row whose keys are all
// masked gives zeros (not NaN).
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

#include "runtime/cpu/Kernels.h"

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

  /// Adds the bias of row (B, H, I) to Scores.
  void apply(int64_t B, int64_t H, int64_t I, float *Scores) const {
    int64_t T = S.P + S.Skv;
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
/// bit for bit): sums in f64, keys in order; all keys masked gives zeros.
static void softmaxRow(MutableArrayRef<float> Scores) {
  float Max = -INFINITY;
  for (float Score : Scores)
    Max = std::max(Max, Score);
  if (Max == -INFINITY) {
    std::fill(Scores.begin(), Scores.end(), 0.0f);
    return;
  }
  double Sum = 0;
  for (float Score : Scores)
    Sum += std::exp(double(Score) - Max);
  for (float &Score : Scores)
    Score = float(std::exp(double(Score) - Max) / Sum);
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
  HeadRows YR{nullptr, S.ThreeD, S.Hq, S.Sq, S.Dv};
  int64_t T = S.P + S.Skv, Group = S.Hq / S.Hkv;
  auto KeyRow = [&](int64_t B, int64_t H, int64_t J) {
    return J < S.P
               ? A.In[PastKey].data<float>() + ((B * S.Hkv + H) * S.P + J) * S.D
               : KR.row(B, H, J - S.P);
  };
  auto ValueRow = [&](int64_t B, int64_t H, int64_t J) {
    return J < S.P ? A.In[PastValue].data<float>() +
                         ((B * S.Hkv + H) * S.P + J) * S.Dv
                   : VR.row(B, H, J - S.P);
  };
  // Each (batch, head) is independent: threads take whole ones.
  parallelFor(S.B * S.Hq, [&](int64_t BH) {
    int64_t B = BH / S.Hq, H = BH % S.Hq;
    std::vector<float> Scores(T), Raw(T), Dropped(*Drop && !DroppedOut ? T : 0);
    for (int64_t I = 0; I != S.Sq; ++I) {
      int64_t KH = H / Group;
      const float *QRow = QR.row(B, H, I);
      for (int64_t J = 0; J != T; ++J) {
        const float *KRow = KeyRow(B, KH, J);
        float Dot = 0;
        for (int64_t D = 0; D != S.D; ++D)
          Dot += QRow[D] * KRow[D];
        Raw[J] = Dot * Scale;
        Scores[J] =
            Softcap > 0 ? Softcap * std::tanh(Raw[J] / Softcap) : Raw[J];
      }
      float *QK = QKData ? QKData + ((B * S.Hq + H) * S.Sq + I) * T : nullptr;
      if (QK && (Mode == 0 || Mode == 2))
        std::copy_n(Mode == 0 ? Raw.data() : Scores.data(), T, QK);
      Bias.apply(B, H, I, Scores.data());
      if (QK && Mode == 1)
        std::copy_n(Scores.data(), T, QK);
      float *Out = A.Out[Y].data<float>() + YR.offset(B, H, I);
      std::fill_n(Out, S.Dv, 0.0f);
      softmaxRow(Scores);
      if (QK && Mode == 3)
        std::copy_n(Scores.data(), T, QK);
      const float *Weights = Scores.data();
      if (*Drop) {
        int64_t Row = ((B * S.Hq + H) * S.Sq + I) * T;
        float *DroppedRow = DroppedOut ? DroppedOut + Row : Dropped.data();
        dropRow(**Drop, S, B, H, I, Scores.data(), DroppedRow,
                MaskOut ? MaskOut + Row : nullptr);
        Weights = DroppedRow;
      }
      for (int64_t J = 0; J != T; ++J) {
        const float *VRow = ValueRow(B, KH, J);
        for (int64_t D = 0; D != S.Dv; ++D)
          Out[D] += Weights[J] * VRow[D];
      }
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
// Accumulation is in f64 in the order of (batch, query head, query row), so
// grouped K/V heads sum their query heads deterministically.
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
  double Scale = A.floatAttr("scale", 1 / std::sqrt(double(S.D)));
  HeadRows QR{A.In[1].data<float>(), false, S.Hq, S.Sq, S.D};
  HeadRows KR{A.In[2].data<float>(), false, S.Hkv, S.Skv, S.D};
  HeadRows VR{A.In[3].data<float>(), false, S.Hkv, S.Skv, S.Dv};
  HeadRows DYR{A.In[0].data<float>(), false, S.Hq, S.Sq, S.Dv};
  std::vector<double> DQ(A.In[1].getNumElements(), 0.0),
      DK(A.In[2].getNumElements(), 0.0), DV(A.In[3].getNumElements(), 0.0);
  int64_t T = S.Skv, Group = S.Hq / S.Hkv;
  // Threads take whole (batch, K/V head) pairs: the query heads of a group
  // add into the same dK and dV rows, in head order within the pair.
  parallelFor(S.B * S.Hkv, [&](int64_t BKH) {
    int64_t B = BKH / S.Hkv;
    std::vector<float> Scores(T), Dropped(*Drop ? T : 0);
    std::vector<uint8_t> Keep(*Drop ? T : 0);
    std::vector<double> P(T), DP(T);
    for (int64_t H = BKH % S.Hkv * Group, HE = H + Group; H != HE; ++H)
      for (int64_t I = 0; I != S.Sq; ++I) {
        int64_t KH = H / Group;
        const float *QRow = QR.row(B, H, I), *DY = DYR.row(B, H, I);
        if (Kept) {
          std::copy_n(Kept + ((B * S.Hq + H) * S.Sq + I) * T, T,
                      Scores.begin());
        } else {
          for (int64_t J = 0; J != T; ++J) {
            const float *KRow = KR.row(B, KH, J);
            float Dot = 0;
            for (int64_t D = 0; D != S.D; ++D)
              Dot += QRow[D] * KRow[D];
            Scores[J] = Dot * float(Scale);
          }
          Bias.apply(B, H, I, Scores.data());
          softmaxRow(Scores);
        }
        // The weights of V: the dropped probabilities, kept or drawn again.
        const float *Weights = Scores.data();
        if (*Drop) {
          int64_t Row = ((B * S.Hq + H) * S.Sq + I) * T;
          if (MaskIn) {
            std::copy_n(MaskIn + Row, T, Keep.begin());
            std::copy_n(DroppedIn + Row, T, Dropped.begin());
          } else {
            dropRow(**Drop, S, B, H, I, Scores.data(), Dropped.data(),
                    Keep.data());
          }
          Weights = Dropped.data();
        }
        double Inner = 0, DropScale = *Drop ? (*Drop)->Key.Scale : 1.0;
        for (int64_t J = 0; J != T; ++J) {
          P[J] = Scores[J];
          const float *VRow = VR.row(B, KH, J);
          double Dot = 0;
          for (int64_t D = 0; D != S.Dv; ++D)
            Dot += double(DY[D]) * VRow[D];
          if (*Drop)
            Dot = Keep[J] ? Dot * DropScale : 0.0;
          DP[J] = Dot;
          Inner += P[J] * Dot;
        }
        double *DQRow = DQ.data() + QR.offset(B, H, I);
        for (int64_t J = 0; J != T; ++J) {
          double DS = P[J] * (DP[J] - Inner) * Scale;
          const float *KRow = KR.row(B, KH, J);
          double *DKRow = DK.data() + KR.offset(B, KH, J);
          double *DVRow = DV.data() + VR.offset(B, KH, J);
          for (int64_t D = 0; D != S.D; ++D) {
            DQRow[D] += DS * KRow[D];
            DKRow[D] += DS * QRow[D];
          }
          for (int64_t D = 0; D != S.Dv; ++D)
            DVRow[D] += double(Weights[J]) * DY[D];
        }
      }
  });
  const std::vector<double> *Grads[] = {&DQ, &DK, &DV};
  for (unsigned I = 0; I != 3; ++I)
    std::transform(Grads[I]->begin(), Grads[I]->end(), A.Out[I].data<float>(),
                   [](double V) { return float(V); });
  return Error::success();
}
