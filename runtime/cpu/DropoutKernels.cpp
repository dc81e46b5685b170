//===- DropoutKernels.cpp - Dropout and its gradient ----------------------===//
//
// Dropout of a node with a random stream (A.Dropout, DropoutStream.h)
// keeps each element with probability 1 - ratio, scaled by 1 / (1 - ratio),
// and writes the mask (bool) when asked; its draws are those of
// DropoutMask.h, so a recomputed forward and every tensor-parallel rank
// draw the same mask for the same element. Without one, Dropout is the
// inference copy (and a mask of all true); training mode with a non-zero
// ratio is then an error naming the pass that gives nodes their streams.
// DropoutGrad: dX = dY * mask / (1 - ratio). Both compute in f32 (the
// backend converts other floats).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cstring>

using namespace autopar;
using namespace llvm;

/// Whether Dropout's training_mode operand (when given) is true, and its
/// ratio (ONNX's default 0.5).
static Expected<std::pair<bool, float>> getDropoutMode(const KernelArgs &A) {
  bool Training = false;
  float Ratio = 0.5f;
  if (A.has(2)) {
    if (Error E = A.checkType(2, {ElementType::Bool}))
      return E;
    Training = A.In[2].getNumElements() && A.In[2].data<uint8_t>()[0];
  }
  if (A.has(1)) {
    if (Error E = A.checkType(1, {ElementType::F32}))
      return E;
    Ratio = A.In[1].getNumElements() ? A.In[1].data<float>()[0] : 0.5f;
  }
  return std::make_pair(Training, Ratio);
}

Error autopar::runDropout(const KernelArgs &A) {
  Expected<std::pair<bool, float>> Mode = getDropoutMode(A);
  if (!Mode)
    return Mode.takeError();
  const Tensor &X = A.In[0];
  if (Error E = A.checkType(0, {ElementType::F32}))
    return E;
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  if (Error E = A.checkResultType(0, {ElementType::F32}))
    return E;
  uint8_t *Mask = nullptr;
  if (A.hasResult(1)) {
    if (Error E = A.checkShape(1, X.getShape()))
      return E;
    if (Error E = A.checkResultType(1, {ElementType::Bool}))
      return E;
    Mask = A.Out[1].data<uint8_t>();
  }
  int64_t Count = X.getNumElements();
  const float *In = X.data<float>();
  float *Out = A.Out[0].data<float>();
  if (!A.Dropout) {
    if (Mode->first && Mode->second != 0)
      return A.error("training-mode Dropout without a random stream "
                     "(`rng_stream`: run dropout-streams before autodiff)");
    if (Count)
      std::memcpy(Out, In, Count * sizeof(float));
    if (Mask)
      std::fill_n(Mask, Count, uint8_t(1));
    return Error::success();
  }
  const DropoutBlock &B = *A.Dropout;
  int64_t Len = B.rowLength();
  if (Len == 0)
    return Error::success();
  float Scale = B.Key.Scale;
  parallelFor(Count / Len, [&](int64_t Row) {
    uint64_t Start = B.rowStart(Row);
    int64_t Base = Row * Len;
    // The row's mask, in chunks when it is not a result.
    uint8_t Chunk[256];
    for (int64_t J0 = 0; J0 < Len; J0 += 256) {
      int64_t N = std::min<int64_t>(256, Len - J0);
      uint8_t *Keep = Mask ? Mask + Base + J0 : Chunk;
      B.Key.keepsRun(Start + uint64_t(J0), N, Keep);
      for (int64_t J = 0; J != N; ++J)
        Out[Base + J0 + J] = Keep[J] ? In[Base + J0 + J] * Scale : 0.0f;
    }
  });
  return Error::success();
}

Error autopar::runDropoutGrad(const KernelArgs &A) {
  const Tensor &DY = A.In[0], &Mask = A.In[1];
  if (Error E = A.checkType(0, {ElementType::F32}))
    return E;
  if (Error E = A.checkType(1, {ElementType::Bool}))
    return E;
  if (Mask.getShape() != DY.getShape())
    return A.error("mask " + Mask.getTypeString() + " is not dY's shape " +
                   DY.getTypeString());
  if (Error E = A.checkShape(0, DY.getShape()))
    return E;
  if (Error E = A.checkResultType(0, {ElementType::F32}))
    return E;
  double Ratio = A.floatAttr("ratio", 0);
  if (!(Ratio >= 0 && Ratio < 1))
    return A.error("ratio " + std::to_string(Ratio) + " is not in [0, 1)");
  float Scale = float(1 / (1 - Ratio));
  const float *In = DY.data<float>();
  const uint8_t *Keep = Mask.data<uint8_t>();
  float *Out = A.Out[0].data<float>();
  int64_t Count = DY.getNumElements();
  constexpr int64_t Chunk = 1 << 14;
  parallelFor((Count + Chunk - 1) / Chunk, [&](int64_t C) {
    for (int64_t I = C * Chunk, E = std::min(Count, I + Chunk); I != E; ++I)
      Out[I] = Keep[I] ? In[I] * Scale : 0.0f;
  });
  return Error::success();
}
