//===- OnnxShapeInference.h - ONNX's shape inference ------------*- C++ -*-===//
//
// An op autopar does not know is kept as Opaque; its result types come from
// ONNX's C++ shape inference (libonnx's operator schemas), run on the node
// alone: a one-node graph whose inputs have the types autopar found for
// them, and the values of those that are small integer constants (a
// Reshape-like target). So the inference sees what autopar inferred
// upstream (also past contrib ops ONNX does not know), and the model's
// weights are never copied.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_FRONTEND_ONNXSHAPEINFERENCE_H
#define AUTOPAR_FRONTEND_ONNXSHAPEINFERENCE_H

#include "ir/Attributes.h"
#include "ir/Types.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace onnx {
class NodeProto;
} // namespace onnx

namespace autopar {

/// A value the node reads (an operand, or a name its graph attributes read
/// from the enclosing graph), as the inference is given it.
struct OnnxInferenceInput {
  std::string Name;
  TensorType Type;
  /// The value, when it is a constant the inference may need.
  std::optional<DenseTensor> Data;
};

/// Whether libonnx has a schema for (Domain, OpType) at Version or below.
bool hasOnnxSchema(llvm::StringRef Domain, llvm::StringRef OpType,
                   int64_t Version);

/// The names that N's graph attributes (If's branches, Loop's and Scan's
/// bodies, at any depth) read from the enclosing graph, in first-use order.
std::vector<std::string> getOuterScopeReads(const onnx::NodeProto &N);

/// The types of N's outputs as ONNX's shape inference gives them, one per
/// output (nullopt where it gives none, or no rank, or an element type the
/// IR lacks). Opsets are the model's (domain, version) imports. Symbolic
/// dimensions of the inputs come back as themselves; dimensions the
/// inference makes up (`unk__0`) are unknown. An error carries ONNX's
/// message when the inference rejects the node, or names an output that is
/// a sequence, an optional or a map (no IR type).
llvm::Expected<std::vector<std::optional<TensorType>>>
inferTypesWithOnnx(const onnx::NodeProto &N,
                   llvm::ArrayRef<OnnxInferenceInput> Inputs,
                   llvm::ArrayRef<std::pair<std::string, int64_t>> Opsets);

} // namespace autopar

#endif // AUTOPAR_FRONTEND_ONNXSHAPEINFERENCE_H
