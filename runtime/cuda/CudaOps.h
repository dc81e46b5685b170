//===- CudaOps.h - Nodes on the CUDA device ---------------------*- C++ -*-===//
//
// The device side of the CUDA backend: for each op with a CUDA kernel, the
// shape checks and plans the CPU kernels use too (runtime/OpShapes.h), the
// CUDA ops' own type checks, then launches on the backend's compute stream
// (CudaKernels.h, cuBLAS). What a kernel needs from the backend (the
// stream, cuBLAS, scratch memory, the values of small integer operands,
// device-side error codes) comes through CudaContext.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_CUDAOPS_H
#define AUTOPAR_RUNTIME_CUDA_CUDAOPS_H

#include "runtime/KernelArgs.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <vector>

namespace autopar {

enum class OpId : unsigned;

class CudaContext {
public:
  virtual ~CudaContext();
  virtual cudaStream_t getStream() = 0;
  virtual cublasHandle_t getCublas() = 0;
  /// Whether fp32 GEMMs may use TF32 tensor cores.
  virtual bool allowTF32() const = 0;
  /// The bytes of a tensor in device memory, on the host: from the
  /// backend's host copy of small integer tensors, else by a synchronous
  /// copy (counted in the backend's statistics).
  virtual llvm::Expected<std::vector<uint8_t>> readToHost(const Tensor &T) = 0;
  /// Scratch memory, stream-ordered: free it right after the launches that
  /// use it.
  virtual llvm::Expected<Tensor> allocateScratch(ElementType Elem,
                                                 llvm::ArrayRef<int64_t>) = 0;
  virtual void freeScratch(const Tensor &T) = 0;
  /// The device word kernels set on a failed check, and the code that
  /// names Message (about node N) when the backend finds it set.
  virtual int *getErrorWord() = 0;
  /// Makes the compute stream wait for the communication that wrote
  /// Buffers (a kernel about to read a collective's result).
  virtual llvm::Error waitForCommunication(llvm::ArrayRef<void *> Buffers) = 0;
  virtual int getErrorCode(const Node &N, const llvm::Twine &Message) = 0;
};

/// True when Op has a kernel here (communication and host-path ops are the
/// backend's).
bool hasCudaKernel(OpId Op);
/// Runs A.N on the device; errors name the node.
llvm::Error runCudaKernel(const KernelArgs &A, CudaContext &C);

/// The integers of an i64 or i32 operand of rank 0 or 1, through C.
llvm::Expected<Shape> readIntOperand(const KernelArgs &A, CudaContext &C,
                                     unsigned I);

/// A CUDA or cuBLAS failure as a node error.
llvm::Error cudaNodeError(const KernelArgs &A, cudaError_t E,
                          const llvm::Twine &What);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CUDA_CUDAOPS_H
