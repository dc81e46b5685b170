//===- BackendFactory.h - The backend autopar-run runs on -------*- C++ -*-===//
//
// autopar-run's --backend: `cpu` (runtime/cpu/, always built) or `cuda`
// (runtime/cuda/, built when CMake found the CUDA toolkit: AUTOPAR_CUDA).
// Asking for `cuda` in a build without it, or on a machine without a CUDA
// device, is an error that says so.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_BACKENDFACTORY_H
#define AUTOPAR_RUNTIME_BACKENDFACTORY_H

#include "runtime/Backend.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <string>

namespace autopar {

struct BackendChoice {
  /// "cpu" or "cuda".
  std::string Name = "cpu";
  /// OpenBLAS and kernel threads of the CPU backend.
  int Threads = 1;
  /// Seconds one communication may take (0: AUTOPAR_COMM_TIMEOUT, else
  /// 300).
  double CommTimeoutSeconds = 0;
};

/// True when this build has the CUDA backend.
bool isCudaBackendBuilt();
/// An error unless Name is a backend this build has (--backend NAME).
llvm::Error checkBackendName(llvm::StringRef Name);
/// The backend; an error naming --backend when it cannot be made.
llvm::Expected<std::unique_ptr<Backend>> createBackend(const BackendChoice &C);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_BACKENDFACTORY_H
