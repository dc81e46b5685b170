//===- Importer.h - ONNX models to autopar IR -------------------*- C++ -*-===//
//
// The frontend's entry point. See docs/Frontend.md for what is imported and
// how.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_FRONTEND_IMPORTER_H
#define AUTOPAR_FRONTEND_IMPORTER_H

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace onnx {
class ModelProto;
} // namespace onnx

namespace autopar {

struct ImportOptions {
  /// Sizes for symbolic dimensions, as `--dim batch=8` gives them.
  std::vector<std::pair<std::string, int64_t>> DimBindings;
  /// The symbol that is the batch dimension, or `INPUT:AXIS` (an input's
  /// dimension, which may be static: a model exported for one batch size);
  /// found from the inputs when empty (a symbol named like "batch", else
  /// the first input's leading dimension).
  std::string BatchDim;
  /// Read the data of inline initializers into the parameters (what the
  /// runtime needs; planning needs only types). External data stays a
  /// reference, but its file must then exist.
  bool LoadWeights = false;
  /// Read the data of inline initializers only (external data stays a
  /// reference, and its file may be missing): what a plan folder copies
  /// (weights/WeightFile.h).
  bool LoadInlineWeights = false;

  /// `--freeze REGEX` patterns (llvm::Regex, POSIX extended): a parameter
  /// whose initializer name contains a match of one (a search: anchor with
  /// ^ and $ for the whole name) is marked `frozen = true` and not trained.
  std::vector<std::string> Freeze;

  /// Parses `NAME=SIZE` into DimBindings.
  llvm::Error addDimBinding(llvm::StringRef Text);
  /// Adds a `--freeze` pattern; an error naming the option when it is not a
  /// valid regular expression.
  llvm::Error addFreeze(llvm::StringRef Pattern);
  llvm::Error validate() const;
};

/// True for files the frontend reads (.onnx, .pbtxt, .textproto).
bool isOnnxModelPath(llvm::StringRef Path);

/// Reads and imports the model at Path. Returns null after reporting errors.
std::unique_ptr<Module> importOnnxModel(llvm::StringRef Path,
                                        const ImportOptions &Options,
                                        DiagnosticEngine &Diag);

/// Imports a parsed model; ModelPath locates external data and names the
/// model in diagnostics.
std::unique_ptr<Module> importModelProto(const onnx::ModelProto &Model,
                                         llvm::StringRef ModelPath,
                                         const ImportOptions &Options,
                                         DiagnosticEngine &Diag);

} // namespace autopar

#endif // AUTOPAR_FRONTEND_IMPORTER_H
