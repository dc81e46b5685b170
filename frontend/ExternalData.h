//===- ExternalData.h - Checks ONNX external-data references ----*- C++ -*-===//
//
// An initializer's data may live in a file beside the model. The reference is
// untrusted input: only the keys ONNX defines are accepted, and the location
// and byte range get the checks of weights/ExternalFile.h (the ones the
// weight reader makes again when running): the location stays inside the
// model's folder (relative, no `..`, no symlink on the way, no file with other
// hard links) and `offset + length` fits in the file. The file is not read.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_FRONTEND_EXTERNALDATA_H
#define AUTOPAR_FRONTEND_EXTERNALDATA_H

#include "ir/Graph.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace onnx {
class TensorProto;
} // namespace onnx

namespace autopar {

/// What checking a reference found.
struct ExternalDataRef {
  WeightSource Source;
  /// False when the file does not exist (a warning when planning).
  bool FileExists = true;
};

/// Checks T's external-data entries against the model in ModelDir; Bytes is
/// the tensor's size in bytes (the default and required length).
llvm::Expected<ExternalDataRef> checkExternalData(const onnx::TensorProto &T,
                                                  llvm::StringRef ModelDir,
                                                  int64_t Bytes);

} // namespace autopar

#endif // AUTOPAR_FRONTEND_EXTERNALDATA_H
