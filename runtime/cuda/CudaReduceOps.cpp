//===- CudaReduceOps.cpp - Reductions and casts on the device -------------===//
//
// ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceL1, ReduceL2,
// ReduceSumSquare and ReduceLogSum over any set of axes (kept and reduced
// dimensions as strided index spaces, f64 partial sums in scratch;
// ReduceProd and ReduceLogSumExp have no CUDA kernel),
// and Cast between the stored types (f8e4m3 has no CUDA kernel).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaOpSupport.h"

#include "ir/Graph.h"
#include "runtime/OpShapes.h"

using namespace autopar;
using namespace autopar::cuda;
using namespace llvm;

/// The device reduction of a Reduce op; none for ReduceProd and
/// ReduceLogSumExp (a product and a shifted sum of exponentials the
/// kernels do not combine).
static std::optional<ReduceOp> getReduceOp(OpId Op) {
  switch (Op) {
  case OpId::ReduceSum:
    return ReduceOp::Sum;
  case OpId::ReduceMean:
    return ReduceOp::Mean;
  case OpId::ReduceMax:
    return ReduceOp::Max;
  case OpId::ReduceMin:
    return ReduceOp::Min;
  case OpId::ReduceL1:
    return ReduceOp::L1;
  case OpId::ReduceL2:
    return ReduceOp::L2;
  case OpId::ReduceSumSquare:
    return ReduceOp::SumSquare;
  case OpId::ReduceLogSum:
    return ReduceOp::LogSum;
  default:
    return std::nullopt;
  }
}

Error cuda::runReduce(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0];
  std::optional<ReduceOp> Op = getReduceOp(A.N.getOp());
  if (!Op)
    return A.error("no CUDA kernel (the CPU backend runs it)");
  if (Error E = checkFloat(A, 0))
    return E;
  if (Error E = checkFloatResult(A, 0))
    return E;
  Expected<ReducePlan> P =
      planReduce(A, [&](unsigned I) { return readIntOperand(A, C, I); });
  if (!P)
    return P.takeError();
  if (P->Noop) {
    if (X.getElementType() == A.Out[0].getElementType())
      return copyDevice(A, C, A.Out[0], X);
    return launched(A,
                    cast(dt(X), X.getData(), dt(A.Out[0]), A.Out[0].getData(),
                         X.getNumElements(), C.getStream()));
  }
  unsigned Rank = X.getRank();
  const Shape &Kept = P->Kept, &Red = P->Red;
  Expected<Dims> KD = makeDims(A, Kept);
  if (!KD)
    return KD.takeError();
  Expected<Dims> RD = makeDims(A, Red);
  if (!RD)
    return RD.takeError();
  Strides In = makeStrides(getStrides(X.getShape()));
  bool InnerKept = Rank > 0 && !P->Reduced[Rank - 1] && X.getDim(Rank - 1) > 1;
  Scratch S(C);
  double *Work = nullptr;
  int64_t WorkDoubles =
      reduceWorkDoubles(getNumElements(Kept), getNumElements(Red), InnerKept);
  if (WorkDoubles > 0) {
    Expected<Tensor> T = S.get(A, ElementType::F64, {WorkDoubles});
    if (!T)
      return T.takeError();
    Work = T->data<double>();
  }
  return launched(A, reduce(*Op, dt(X), X.getData(), dt(A.Out[0]),
                            A.Out[0].getData(), *KD, In, *RD, In, InnerKept,
                            Work, C.getStream()));
}

Error cuda::runCast(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  Expected<ElementType> To = planCast(A);
  if (!To)
    return To.takeError();
  if (Y.getElementType() != *To)
    return A.error("the result " + Y.getTypeString() + " is not of type '" +
                   getElementTypeName(*To) + "'");
  if (X.getElementType() == *To)
    return copyDevice(A, C, Y, X);
  if (!toDType(X.getElementType()) || !toDType(*To))
    return A.error("casts from or to f8e4m3 have no CUDA kernel");
  return launched(A, cast(dt(X), X.getData(), dt(Y), Y.getData(),
                          X.getNumElements(), C.getStream()));
}
