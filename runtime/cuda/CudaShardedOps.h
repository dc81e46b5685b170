//===- CudaShardedOps.h - Ops split over a mesh axis (CUDA) -----*- C++ -*-===//
//
// ShardSlice and the vocabulary-parallel Gather, GatherGrad and
// cross-entropy (ops that runtime/ShardPlace.h's isShardedKernel
// names): kernels with the collectives between them, which the backend
// runs outside its kernel table because they need the communicator.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_CUDASHARDEDOPS_H
#define AUTOPAR_RUNTIME_CUDA_CUDASHARDEDOPS_H

#include "runtime/Backend.h"
#include "runtime/cuda/CudaOps.h"

namespace autopar {
namespace cuda {

llvm::Error runShardedOp(const KernelArgs &A, CudaContext &C,
                         Communicator &Comm, Communicator::Duration Timeout);

} // namespace cuda
} // namespace autopar

#endif // AUTOPAR_RUNTIME_CUDA_CUDASHARDEDOPS_H
