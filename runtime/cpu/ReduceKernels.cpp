//===- ReduceKernels.cpp - ReduceSum, ReduceMean and ReduceMax ------------===//
//
// Axes come from the attribute or the operand; none means every axis, or
// a copy with noop_with_empty_axes. f32 accumulates in f64 and i64 in i64
// (wrapping), visiting the input in row-major order, so each result is
// summed in index order.
//
//===----------------------------------------------------------------------===//

#include "runtime/OpShapes.h"
#include "runtime/cpu/Kernels.h"

#include "ir/Graph.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

using namespace autopar;
using namespace llvm;

template <typename T, typename Acc>
static void reduce(const KernelArgs &A, ArrayRef<int64_t> KeptShape,
                   int64_t Count) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  OpId Op = A.N.getOp();
  bool Max = Op == OpId::ReduceMax;
  Acc Init = Max ? (std::numeric_limits<Acc>::has_infinity
                        ? -std::numeric_limits<Acc>::infinity()
                        : std::numeric_limits<Acc>::lowest())
                 : Acc(0);
  std::vector<Acc> Totals(Y.getNumElements(), Init);
  StridedWalk Walk(X.getShape(),
                   {getBroadcastStrides(KeptShape, X.getShape())});
  const T *XD = X.data<T>();
  for (int64_t I = 0, N = X.getNumElements(); I != N; ++I, Walk.next()) {
    Acc &Total = Totals[Walk.offset(0)];
    Acc V = Acc(XD[I]);
    if constexpr (std::is_integral_v<Acc>) {
      Total = Max ? std::max(Total, V) : Acc(uint64_t(Total) + uint64_t(V));
    } else {
      if (!Max)
        Total += V;
      else if (V > Total || std::isnan(V))
        Total = V;
    }
  }
  T *YD = Y.data<T>();
  for (size_t I = 0; I != Totals.size(); ++I) {
    Acc V = Totals[I];
    if (Op == OpId::ReduceMean)
      V = Count ? V / Acc(Count) : Acc(0);
    YD[I] = T(V);
  }
}

Error autopar::runReduce(const KernelArgs &A) {
  const Tensor &X = A.In[0];
  if (Error E = A.checkType(0, {ElementType::F32, ElementType::I64}))
    return E;
  if (Error E = A.checkResultType(0, {X.getElementType()}))
    return E;
  Expected<ReducePlan> P =
      planReduce(A, [&](unsigned I) { return A.readInts(I); });
  if (!P)
    return P.takeError();
  if (P->Noop) {
    if (X.getSizeInBytes())
      std::memcpy(A.Out[0].getData(), X.getData(), X.getSizeInBytes());
    return Error::success();
  }
  if (X.getElementType() == ElementType::F32)
    reduce<float, double>(A, P->Kept, P->Count);
  else
    reduce<int64_t, int64_t>(A, P->Kept, P->Count);
  return Error::success();
}
