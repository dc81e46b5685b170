//===- BackendFactory.cpp - The backend autopar-run runs on ---------------===//

#include "runtime/BackendFactory.h"
#include "runtime/cpu/CpuBackend.h"

#ifdef AUTOPAR_HAVE_CUDA
#include "runtime/cuda/CudaBackend.h"
#endif

using namespace autopar;
using namespace llvm;

bool autopar::isCudaBackendBuilt() {
#ifdef AUTOPAR_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

Error autopar::checkBackendName(StringRef Name) {
  if (Name == "cpu")
    return Error::success();
  if (Name == "cuda") {
    if (isCudaBackendBuilt())
      return Error::success();
    return createStringError(inconvertibleErrorCode(),
                             "--backend cuda: this autopar-run was built "
                             "without the CUDA backend (configure with the "
                             "CUDA toolkit installed, -DAUTOPAR_CUDA=ON)");
  }
  return createStringError(inconvertibleErrorCode(),
                           "--backend must be cpu or cuda, not '" + Name + "'");
}

Expected<std::unique_ptr<Backend>>
autopar::createBackend(const BackendChoice &C) {
  if (Error E = checkBackendName(C.Name))
    return E;
  CpuBackendOptions CpuOptions;
  CpuOptions.BlasThreads = C.Threads;
  CpuOptions.setCommTimeoutSeconds(C.CommTimeoutSeconds);
  if (C.Name == "cpu")
    return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(CpuOptions));
#ifdef AUTOPAR_HAVE_CUDA
  CudaBackendOptions Options;
  Options.CommTimeout = CpuOptions.CommTimeout;
  Expected<std::unique_ptr<CudaBackend>> B = CudaBackend::create(Options);
  if (!B)
    return createStringError(inconvertibleErrorCode(),
                             "--backend cuda: " + toString(B.takeError()));
  return std::unique_ptr<Backend>(std::move(*B));
#else
  llvm_unreachable("checkBackendName accepted cuda without the backend");
#endif
}
