//===- CudaOpSupport.cpp - What the CUDA ops share ------------------------===//
//
// See CudaOpSupport.h; also CudaOps.h's cudaNodeError and readIntOperand.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaOpSupport.h"

#include "ir/Graph.h"

#include <cstring>

using namespace autopar;
using namespace autopar::cuda;
using namespace llvm;

CudaContext::~CudaContext() = default;

Error autopar::cudaNodeError(const KernelArgs &A, cudaError_t E,
                             const Twine &What) {
  return A.error(What + ": " + cudaGetErrorString(E));
}

Error cuda::cublasNodeError(const KernelArgs &A, cublasStatus_t S,
                            const Twine &What) {
  return A.error(What + ": " + cublasGetStatusString(S));
}

std::optional<DType> cuda::toDType(ElementType T) {
  switch (T) {
  case ElementType::F32:
    return DType::F32;
  case ElementType::F16:
    return DType::F16;
  case ElementType::BF16:
    return DType::BF16;
  case ElementType::F64:
    return DType::F64;
  case ElementType::I64:
    return DType::I64;
  case ElementType::I32:
    return DType::I32;
  case ElementType::I8:
    return DType::I8;
  case ElementType::U8:
    return DType::U8;
  case ElementType::Bool:
    return DType::Bool;
  case ElementType::F8E4M3:
    return std::nullopt;
  }
  return std::nullopt;
}

bool cuda::isCudaFloat(ElementType T) {
  return T == ElementType::F32 || T == ElementType::F16 ||
         T == ElementType::BF16 || T == ElementType::F64;
}

Error cuda::typeError(const KernelArgs &A, const Twine &What, const Tensor &T,
                      StringRef Takes) {
  return A.error(What + " is " + T.getTypeString() +
                 "; the CUDA kernel takes " + Takes);
}

Error cuda::checkFloat(const KernelArgs &A, unsigned I) {
  if (!A.has(I) || isCudaFloat(A.In[I].getElementType()))
    return Error::success();
  return typeError(A, "operand " + Twine(I), A.In[I], "f32, f16, bf16, f64");
}

Error cuda::checkFloatResult(const KernelArgs &A, unsigned I) {
  if (!A.hasResult(I) || isCudaFloat(A.Out[I].getElementType()))
    return Error::success();
  return typeError(A, "result " + Twine(I), A.Out[I], "f32, f16, bf16, f64");
}

Error cuda::checkAllFloat(const KernelArgs &A) {
  for (unsigned I = 0; I != A.In.size(); ++I)
    if (Error E = checkFloat(A, I))
      return E;
  for (unsigned I = 0; I != A.Out.size(); ++I)
    if (Error E = checkFloatResult(A, I))
      return E;
  return Error::success();
}

Error cuda::checkIndexType(const KernelArgs &A, unsigned I) {
  ElementType T = A.In[I].getElementType();
  if (T == ElementType::I64 || T == ElementType::I32)
    return Error::success();
  return typeError(A, "operand " + Twine(I), A.In[I], "i64, i32");
}

Expected<Dims> cuda::makeDims(const KernelArgs &A, ArrayRef<int64_t> S) {
  if (S.size() > size_t(MaxRank))
    return A.error("rank " + Twine(S.size()) + " exceeds the CUDA kernels' " +
                   Twine(MaxRank));
  Dims D;
  D.Rank = int(S.size());
  for (size_t I = 0; I != S.size(); ++I)
    D.Size[I] = S[I];
  return D;
}

Strides cuda::makeStrides(ArrayRef<int64_t> S) {
  Strides R;
  for (size_t I = 0; I != S.size() && I != size_t(MaxRank); ++I)
    R.S[I] = S[I];
  return R;
}

Error cuda::launched(const KernelArgs &A, cudaError_t E) {
  if (E == cudaSuccess)
    return Error::success();
  return cudaNodeError(A, E, "CUDA kernel launch failed");
}

Error cuda::copyDevice(const KernelArgs &A, CudaContext &C, const Tensor &Dst,
                       const Tensor &Src) {
  if (Dst.getData() == Src.getData() || Src.getSizeInBytes() == 0)
    return Error::success();
  return launched(A, cudaMemcpyAsync(Dst.getData(), Src.getData(),
                                     Src.getSizeInBytes(),
                                     cudaMemcpyDeviceToDevice, C.getStream()));
}

Expected<Shape> autopar::readIntOperand(const KernelArgs &A, CudaContext &C,
                                        unsigned I) {
  const Tensor &T = A.In[I];
  if (T.getRank() > 1)
    return A.error("operand " + Twine(I) + " must have rank 0 or 1, got " +
                   T.getTypeString());
  if (Error E = checkIndexType(A, I))
    return E;
  Expected<std::vector<uint8_t>> Bytes = C.readToHost(T);
  if (!Bytes)
    return A.error(toString(Bytes.takeError()));
  Shape Values;
  for (int64_t J = 0, N = T.getNumElements(); J != N; ++J) {
    if (T.getElementType() == ElementType::I64) {
      int64_t V;
      std::memcpy(&V, Bytes->data() + 8 * J, 8);
      Values.push_back(V);
    } else {
      int32_t V;
      std::memcpy(&V, Bytes->data() + 4 * J, 4);
      Values.push_back(V);
    }
  }
  return Values;
}

Error cuda::checkSameFloat(const KernelArgs &A, unsigned Count) {
  if (Error E = checkAllFloat(A))
    return E;
  for (unsigned I = 0; I != Count; ++I)
    if (A.In[I].getShape() != A.In[0].getShape() ||
        A.In[I].getElementType() != A.In[0].getElementType())
      return A.error("operands " + A.In[0].getTypeString() + " and " +
                     A.In[I].getTypeString() + " differ");
  for (unsigned I = 0; I != A.Out.size(); ++I) {
    if (Error E = A.checkShape(I, A.In[0].getShape()))
      return E;
    if (A.Out[I].getElementType() != A.In[0].getElementType())
      return A.error("result " + Twine(I) + " " + A.Out[I].getTypeString() +
                     " must have the type of " + A.In[0].getTypeString());
  }
  return Error::success();
}

Expected<Tensor> cuda::getF32Sums(const KernelArgs &A, Scratch &S,
                                  const Tensor &Out) {
  if (Out.getElementType() == ElementType::F32)
    return Out;
  return S.get(A, ElementType::F32, Out.getShape());
}

Error cuda::castFromF32(const KernelArgs &A, CudaContext &C, const Tensor &Sums,
                        const Tensor &Out) {
  if (Sums.getData() == Out.getData())
    return Error::success();
  return launched(A, cast(DType::F32, Sums.getData(), dt(Out), Out.getData(),
                          Out.getNumElements(), C.getStream()));
}
