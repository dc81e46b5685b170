//===- ModelReader.h - Reads ONNX ModelProto files safely -------*- C++ -*-===//
//
// Binary models are parsed with a byte limit just under 2 GiB, protobuf's
// recursion limit, and a check that the whole file was consumed; `.pbtxt` and
// `.textproto` files are protobuf text format (used by tests). Only the
// frontend sees ONNX's protobuf classes.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_FRONTEND_MODELREADER_H
#define AUTOPAR_FRONTEND_MODELREADER_H

#include "ir/Diagnostics.h"

#include "llvm/ADT/StringRef.h"

#include <memory>

namespace onnx {
class ModelProto;
} // namespace onnx

namespace autopar {

/// The largest model file read: protobuf's limit is 2 GiB - 1 bytes.
constexpr int64_t MaxModelFileBytes = (int64_t(1) << 31) - 1;
/// Protobuf's default nesting limit, set explicitly.
constexpr int ModelRecursionLimit = 100;

/// True for paths read as protobuf text format.
bool isTextModelPath(llvm::StringRef Path);

/// Reads Path; reports problems through Diag and returns null after them.
std::unique_ptr<onnx::ModelProto> readModelProto(llvm::StringRef Path,
                                                 DiagnosticEngine &Diag);

/// Parses a model held in memory (binary, or text when AsText), with the
/// same limits; Name names it in diagnostics.
std::unique_ptr<onnx::ModelProto> parseModelProto(llvm::StringRef Bytes,
                                                  bool AsText,
                                                  llvm::StringRef Name,
                                                  DiagnosticEngine &Diag);

} // namespace autopar

#endif // AUTOPAR_FRONTEND_MODELREADER_H
