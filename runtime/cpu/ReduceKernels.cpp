//===- ReduceKernels.cpp - The Reduce ops, ArgMax and ArgMin --------------===//
//
// Axes come from the attribute or the operand; none means every axis, or
// a copy with noop_with_empty_axes. f32 accumulates in f64 and i64 in i64
// (wrapping), visiting the input in row-major order, so each result is
// combined in index order. ReduceL2, ReduceLogSum and ReduceLogSumExp take
// f32 only; ReduceLogSumExp subtracts each result's maximum first. Max and
// Min propagate NaN. An empty reduction gives the identity of its
// combination (0, 1, -inf or +inf; log 0 = -inf for the logarithms).
//
// ArgMax and ArgMin return the index (i64) of the first extremum along
// `axis`, or the last with select_last_index; a NaN counts as the extremum,
// as numpy's argmax and argmin have it.
//
//===----------------------------------------------------------------------===//

#include "runtime/OpShapes.h"
#include "runtime/cpu/Kernels.h"

#include "ir/Graph.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

using namespace autopar;
using namespace llvm;

namespace {

/// How a reduction combines its elements.
enum class Combine { Sum, Prod, Max, Min };

struct ReduceOpInfo {
  Combine How = Combine::Sum;
  /// The element transform before combining: |x|, x * x.
  bool Abs = false, Square = false;
};

ReduceOpInfo getReduceOpInfo(OpId Op) {
  ReduceOpInfo R;
  if (Op == OpId::ReduceProd)
    R.How = Combine::Prod;
  else if (Op == OpId::ReduceMax)
    R.How = Combine::Max;
  else if (Op == OpId::ReduceMin)
    R.How = Combine::Min;
  R.Abs = Op == OpId::ReduceL1;
  R.Square = Op == OpId::ReduceL2 || Op == OpId::ReduceSumSquare;
  return R;
}

template <typename Acc> Acc identity(Combine How) {
  using Limits = std::numeric_limits<Acc>;
  switch (How) {
  case Combine::Sum:
    return Acc(0);
  case Combine::Prod:
    return Acc(1);
  case Combine::Max:
    return Limits::has_infinity ? -Limits::infinity() : Limits::lowest();
  case Combine::Min:
    return Limits::has_infinity ? Limits::infinity() : Limits::max();
  }
  return Acc(0);
}

template <typename Acc> Acc combine(Combine How, Acc Total, Acc V) {
  if constexpr (std::is_integral_v<Acc>) {
    switch (How) {
    case Combine::Sum:
      return Acc(uint64_t(Total) + uint64_t(V));
    case Combine::Prod:
      return Acc(uint64_t(Total) * uint64_t(V));
    case Combine::Max:
      return std::max(Total, V);
    case Combine::Min:
      return std::min(Total, V);
    }
  } else {
    switch (How) {
    case Combine::Sum:
      return Total + V;
    case Combine::Prod:
      return Total * V;
    case Combine::Max:
      return V > Total || std::isnan(V) ? V : Total;
    case Combine::Min:
      return V < Total || std::isnan(V) ? V : Total;
    }
  }
  return Total;
}

/// Each result of the reduction of X over the axes that KeptShape has as 1
/// (broadcast back over X), with Shift (one per result, may be empty)
/// subtracted from every element and exp applied when Exp.
template <typename T, typename Acc>
std::vector<Acc> reduceTotals(const Tensor &X, ArrayRef<int64_t> KeptShape,
                              int64_t NumOut, ReduceOpInfo Info,
                              ArrayRef<Acc> Shift = {}, bool Exp = false) {
  std::vector<Acc> Totals(NumOut, identity<Acc>(Info.How));
  // A plain f32 sum over leading axes (a bias's gradient) or trailing ones
  // runs over contiguous rows: the same sums, in the same order, without
  // the general walk.
  if constexpr (!std::is_integral_v<Acc>) {
    bool Plain = Info.How == Combine::Sum && !Info.Abs && !Info.Square && !Exp;
    ArrayRef<int64_t> Dims = X.getShape();
    size_t Leading = 0, Trailing = 0;
    while (Leading != Dims.size() && KeptShape[Leading] == 1)
      ++Leading;
    while (Trailing != Dims.size() &&
           KeptShape[Dims.size() - 1 - Trailing] == 1)
      ++Trailing;
    bool KeptAfterLeading =
        llvm::all_of(llvm::seq(Leading, Dims.size()),
                     [&](size_t I) { return KeptShape[I] == Dims[I]; });
    bool KeptBeforeTrailing =
        llvm::all_of(llvm::seq(size_t(0), Dims.size() - Trailing),
                     [&](size_t I) { return KeptShape[I] == Dims[I]; });
    const T *XD = X.data<T>();
    int64_t N = X.getNumElements();
    // Threads take whole blocks of columns (whole results): each sum keeps
    // its order whatever the thread count.
    if (Plain && NumOut > 0 && KeptAfterLeading) {
      constexpr int64_t Columns = 256;
      int64_t Rows = N / NumOut;
      parallelFor((NumOut + Columns - 1) / Columns, [&](int64_t Block) {
        int64_t J0 = Block * Columns, J1 = std::min(NumOut, J0 + Columns);
        for (int64_t Row = 0; Row != Rows; ++Row) {
          const T *In = XD + Row * NumOut;
          for (int64_t J = J0; J != J1; ++J)
            Totals[J] += Acc(In[J]);
        }
      });
      return Totals;
    }
    if (Plain && NumOut > 0 && KeptBeforeTrailing) {
      int64_t Len = N / NumOut;
      parallelFor(NumOut, [&](int64_t O) {
        const T *In = XD + O * Len;
        Acc Total = Totals[O];
        for (int64_t J = 0; J != Len; ++J)
          Total += Acc(In[J]);
        Totals[O] = Total;
      });
      return Totals;
    }
  }
  StridedWalk Walk(X.getShape(),
                   {getBroadcastStrides(KeptShape, X.getShape())});
  const T *XD = X.data<T>();
  for (int64_t I = 0, N = X.getNumElements(); I != N; ++I, Walk.next()) {
    int64_t O = Walk.offset(0);
    Acc V = Acc(XD[I]);
    if constexpr (std::is_integral_v<Acc>) {
      if (Info.Abs && V < 0)
        V = Acc(0 - uint64_t(V));
      if (Info.Square)
        V = Acc(uint64_t(V) * uint64_t(V));
    } else {
      if (Info.Abs)
        V = std::fabs(V);
      if (Info.Square)
        V *= V;
      if (Exp)
        V = std::exp(V - Shift[O]);
    }
    Totals[O] = combine(Info.How, Totals[O], V);
  }
  return Totals;
}

template <typename T, typename Acc>
void reduce(const KernelArgs &A, ArrayRef<int64_t> KeptShape, int64_t Count) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  OpId Op = A.N.getOp();
  ReduceOpInfo Info = getReduceOpInfo(Op);
  int64_t NumOut = Y.getNumElements();
  std::vector<Acc> Shift;
  if constexpr (!std::is_integral_v<Acc>)
    if (Op == OpId::ReduceLogSumExp) {
      // log(sum(exp(x - m))) + m with m the maximum (0 when infinite, so
      // that all -inf gives -inf and +inf gives +inf).
      ReduceOpInfo MaxInfo;
      MaxInfo.How = Combine::Max;
      Shift = reduceTotals<T, Acc>(X, KeptShape, NumOut, MaxInfo);
      for (Acc &M : Shift)
        if (std::isinf(M))
          M = 0;
    }
  std::vector<Acc> Totals =
      reduceTotals<T, Acc>(X, KeptShape, NumOut, Info, Shift, !Shift.empty());
  T *YD = Y.data<T>();
  for (int64_t I = 0; I != NumOut; ++I) {
    Acc V = Totals[I];
    if (Op == OpId::ReduceMean)
      V = Count ? V / Acc(Count) : Acc(0);
    if constexpr (!std::is_integral_v<Acc>) {
      if (Op == OpId::ReduceL2)
        V = std::sqrt(V);
      else if (Op == OpId::ReduceLogSum)
        V = std::log(V);
      else if (Op == OpId::ReduceLogSumExp)
        V = std::log(V) + Shift[I];
    }
    YD[I] = T(V);
  }
}

} // namespace

Error autopar::runReduce(const KernelArgs &A) {
  const Tensor &X = A.In[0];
  OpId Op = A.N.getOp();
  bool FloatOnly = Op == OpId::ReduceL2 || Op == OpId::ReduceLogSum ||
                   Op == OpId::ReduceLogSumExp;
  if (Error E = FloatOnly
                    ? A.checkType(0, {ElementType::F32})
                    : A.checkType(0, {ElementType::F32, ElementType::I64}))
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

/// True when V should replace Best as the extremum found so far.
template <typename T> static bool replaces(T V, T Best, bool Max, bool Last) {
  if constexpr (!std::is_integral_v<T>) {
    if (std::isnan(Best))
      return Last && std::isnan(V);
    if (std::isnan(V))
      return true;
  }
  if (V == Best)
    return Last;
  return Max ? V > Best : V < Best;
}

template <typename T>
static void argReduce(const KernelArgs &A, const AxisExtents &P) {
  bool Max = A.N.getOp() == OpId::ArgMax;
  bool Last = A.intAttr("select_last_index", 0) != 0;
  const T *XD = A.In[0].data<T>();
  int64_t *YD = A.Out[0].data<int64_t>();
  for (int64_t O = 0; O != P.Outer; ++O)
    for (int64_t I = 0; I != P.Inner; ++I) {
      const T *Row = XD + O * P.Len * P.Inner + I;
      int64_t Best = 0;
      for (int64_t J = 1; J < P.Len; ++J)
        if (replaces(Row[J * P.Inner], Row[Best * P.Inner], Max, Last))
          Best = J;
      YD[O * P.Inner + I] = Best;
    }
}

Error autopar::runArgReduce(const KernelArgs &A) {
  const Tensor &X = A.In[0];
  if (Error E = A.checkType(
          0, {ElementType::F32, ElementType::I64, ElementType::I32}))
    return E;
  if (Error E = A.checkResultType(0, {ElementType::I64}))
    return E;
  if (X.getRank() == 0)
    return A.error("'data' must have rank 1 or more");
  Expected<AxisExtents> P = planAxis(A, 0, 0);
  if (!P)
    return P.takeError();
  if (P->Len == 0)
    return A.error("axis " + Twine(P->Axis) + " of " + X.getTypeString() +
                   " is empty: there is no extremum to index");
  Shape Out(X.getShape().begin(), X.getShape().end());
  if (A.intAttr("keepdims", 1))
    Out[P->Axis] = 1;
  else
    Out.erase(Out.begin() + P->Axis);
  if (Error E = A.checkShape(0, Out))
    return E;
  if (X.getElementType() == ElementType::F32)
    argReduce<float>(A, *P);
  else if (X.getElementType() == ElementType::I64)
    argReduce<int64_t>(A, *P);
  else
    argReduce<int32_t>(A, *P);
  return Error::success();
}
