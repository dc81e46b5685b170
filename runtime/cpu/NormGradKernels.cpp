//===- NormGradKernels.cpp - Gradients of LayerNorm and RMSNorm -----------===//
//
// (dY, X, Scale) -> dX, dScale[, dB] for normalisation over the dimensions
// from `axis` on, with Scale (and the bias) holding one value per element of
// that normalised row. Per row, with xhat the normalised input and
// g = dY * Scale:
//   LayerNorm: dX = inv * (g - mean(g) - xhat * mean(g * xhat)),
//   RMSNorm:   dX = inv * (g - xhat * mean(g * xhat)),
// and dScale (dB) sums dY * xhat (dY) over blocks of 64 rows in row order,
// then over the blocks in order (threads take whole blocks), in f64. The
// statistics are recomputed as the forward kernels compute them; a row
// takes three passes (cpu/VectorMath.h: rowMoments, normGradSums for the
// row's sums and the parameters', normGradRow for dX), xhat and g in f32
// and their sums in f64.
//
//===----------------------------------------------------------------------===//

#include "runtime/OpShapes.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/VectorMath.h"

#include "ir/Graph.h"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace autopar;
using namespace llvm;

static Error runNormGrad(const KernelArgs &A, bool Centered) {
  for (unsigned I : {0u, 1u, 2u})
    if (Error E = A.checkType(I, {ElementType::F32}))
      return E;
  const Tensor &DY = A.In[0], &X = A.In[1], &Scale = A.In[2];
  Expected<NormPlan> P = planNormGrad(A);
  if (!P)
    return P.takeError();
  int64_t Len = P->Len, Rows = P->Rows;
  for (unsigned I = 1; I < A.Out.size(); ++I)
    if (A.hasResult(I))
      if (Error E = A.checkShape(I, Scale.getShape()))
        return E;
  double Epsilon = A.floatAttr("epsilon", 1e-5);
  const float *XD = X.data<float>(), *DYD = DY.data<float>(),
              *G = Scale.data<float>();
  float *DX = A.Out[0].data<float>();
  // Rows in blocks of a fixed size, which threads take whole: each block
  // sums its rows' dScale and dB in row order, and the blocks' sums add in
  // block order, so the result does not depend on the thread count.
  constexpr int64_t BlockRows = 64;
  int64_t Blocks = (Rows + BlockRows - 1) / BlockRows;
  std::vector<double> DScale(Blocks * Len, 0.0), DBias(Blocks * Len, 0.0);
  parallelFor(Blocks, [&](int64_t Block) {
    double *BlockScale = DScale.data() + Block * Len;
    double *BlockBias = DBias.data() + Block * Len;
    for (int64_t Row = Block * BlockRows, End = std::min(Rows, Row + BlockRows);
         Row != End; ++Row) {
      const float *In = XD + Row * Len, *Up = DYD + Row * Len;
      RowMoments M = rowMoments(In, Len, Centered);
      float Mean = float(M.Mean);
      float Inv = float(1 / std::sqrt(M.Variance + Epsilon));
      NormGradSums Sums = normGradSums(In, Up, G, Mean, Inv, Len, BlockScale,
                                       Centered ? BlockBias : nullptr);
      float MeanG = Centered && Len ? float(Sums.G / Len) : 0.0f;
      float MeanGX = Len ? float(Sums.GX / Len) : 0.0f;
      normGradRow(In, Up, G, Mean, Inv, MeanG, MeanGX, DX + Row * Len, Len);
    }
  });
  for (int64_t J = 0; J != Len; ++J) {
    double Scale = 0, Bias = 0;
    for (int64_t Block = 0; Block != Blocks; ++Block) {
      Scale += DScale[Block * Len + J];
      Bias += DBias[Block * Len + J];
    }
    if (A.hasResult(1))
      A.Out[1].data<float>()[J] = float(Scale);
    if (Centered && A.hasResult(2))
      A.Out[2].data<float>()[J] = float(Bias);
  }
  return Error::success();
}

Error autopar::runLayerNormGrad(const KernelArgs &A) {
  return runNormGrad(A, /*Centered=*/true);
}

Error autopar::runRMSNormGrad(const KernelArgs &A) {
  return runNormGrad(A, /*Centered=*/false);
}
