//===- RotaryKernel.cpp - ONNX RotaryEmbedding (opset 23) -----------------===//
//
// X is [B, H, S, D] or [B, S, H * D] (with num_heads). The first R =
// rotary_embedding_dim (default D) entries of each head are rotated, the
// rest copied. The cos and sin rows (R / 2 entries) come from caches
// [max position, R / 2] indexed by position_ids [B, S], or from caches
// [B, S, R / 2] without position ids. Pairs are (x[j], x[j + R / 2]), or
// (x[2j], x[2j + 1]) when interleaved; each becomes (c x1 - s x2,
// s x1 + c x2).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"

#include "ir/Graph.h"
#include "runtime/OpShapes.h"

#include <algorithm>

using namespace autopar;
using namespace llvm;

Error autopar::runRotaryEmbedding(const KernelArgs &A) {
  for (unsigned I : {0u, 1u, 2u})
    if (Error E = A.checkType(I, {ElementType::F32}))
      return E;
  if (Error E = A.checkResultType(0, {ElementType::F32}))
    return E;
  Expected<RotaryPlan> Plan = planRotary(A);
  if (!Plan)
    return Plan.takeError();
  const Tensor &X = A.In[0], &Cos = A.In[1], &Sin = A.In[2];
  int64_t B = Plan->B, H = Plan->H, S = Plan->S, D = Plan->D, R = Plan->R;
  int64_t Half = R / 2;
  bool ThreeD = Plan->ThreeD, Interleaved = Plan->Interleaved;
  const int64_t *Positions =
      Plan->HasPositions ? A.In[3].data<int64_t>() : nullptr;
  const float *XD = X.data<float>();
  float *YD = A.Out[0].data<float>();
  for (int64_t Bi = 0; Bi != B; ++Bi)
    for (int64_t Si = 0; Si != S; ++Si) {
      int64_t Row = Bi * S + Si;
      if (Positions) {
        Row = Positions[Bi * S + Si];
        if (Row < 0 || Row >= Cos.getDim(0))
          return A.error("position id " + Twine(Row) +
                         " is outside the caches' " + Twine(Cos.getDim(0)) +
                         " positions");
      }
      const float *C = Cos.data<float>() + Row * Half;
      const float *Sn = Sin.data<float>() + Row * Half;
      for (int64_t Hi = 0; Hi != H; ++Hi) {
        int64_t Offset =
            (ThreeD ? (Bi * S + Si) * H + Hi : (Bi * H + Hi) * S + Si) * D;
        const float *In = XD + Offset;
        float *Out = YD + Offset;
        for (int64_t J = 0; J != Half; ++J) {
          int64_t I1 = Interleaved ? 2 * J : J;
          int64_t I2 = Interleaved ? 2 * J + 1 : J + Half;
          float X1 = In[I1], X2 = In[I2];
          Out[I1] = C[J] * X1 - Sn[J] * X2;
          Out[I2] = Sn[J] * X1 + C[J] * X2;
        }
        std::copy(In + R, In + D, Out + R);
      }
    }
  return Error::success();
}
