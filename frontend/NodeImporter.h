//===- NodeImporter.h - What an op importer sees ----------------*- C++ -*-===//
//
// Each ONNX op is imported by a function of OnnxOps.def that receives a
// NodeImporter: the ONNX node, its inputs as IR values, and the means to
// create typed IR nodes and to bind the node's outputs.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_FRONTEND_NODEIMPORTER_H
#define AUTOPAR_FRONTEND_NODEIMPORTER_H

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace onnx {
class AttributeProto;
class NodeProto;
} // namespace onnx

namespace autopar {

class GraphImporter;

class NodeImporter {
public:
  NodeImporter(GraphImporter &Parent, const onnx::NodeProto &Proto,
               int64_t OpsetVersion)
      : Parent(Parent), Proto(Proto), OpsetVersion(OpsetVersion) {}

  const onnx::NodeProto &getProto() const { return Proto; }
  GraphImporter &getImporter() const { return Parent; }
  /// The opset version of the node's domain.
  int64_t getOpsetVersion() const { return OpsetVersion; }
  llvm::StringRef getOpType() const;
  /// The node's name, or its first output's when it has none.
  llvm::StringRef getDisplayName() const;

  unsigned getNumInputs() const;
  /// Input I as an IR value; null when absent (empty name) or past the end.
  Value *getInput(unsigned I) const;
  /// The elements of input I when it is a sequence (or optional), else
  /// null.
  const std::vector<Value *> *getInputSequence(unsigned I) const;
  /// The IR value of an ONNX name of the graph, or null.
  Value *lookupValue(llvm::StringRef OnnxName) const;
  unsigned getNumOutputs() const;
  /// The ONNX name of output I ("" when the node does not produce it).
  llvm::StringRef getOutputName(unsigned I) const;

  /// The type the model declares for an ONNX value name, if any.
  const TensorType *getDeclaredType(llvm::StringRef OnnxName) const;

  const onnx::AttributeProto *getAttr(llvm::StringRef Name) const;
  std::optional<int64_t> getIntAttr(llvm::StringRef Name) const;

  /// The ONNX attributes that Op's schema has, converted (an ONNX int where
  /// the schema wants a float is converted too); the others are dropped with
  /// a warning unless named in Ignore or Op accepts any attribute. Reports
  /// and returns nullopt when an attribute cannot be converted.
  std::optional<AttrDict>
  convertAttrs(OpId Op, llvm::ArrayRef<llvm::StringRef> Ignore = {});

  /// Creates a node of Op and types its results with the op's shape
  /// function (ONNX's value_info only fills in what inference leaves
  /// unknown). ResultNames gives each result's name; an empty one gets a
  /// fresh name. Reports and returns null on failure.
  Node *createNode(OpId Op, llvm::ArrayRef<Value *> Operands, AttrDict Attrs,
                   llvm::ArrayRef<std::string> ResultNames,
                   llvm::ArrayRef<std::optional<TensorType>> Hints = {});
  /// Creates Op with the node's own outputs as results (trailing outputs the
  /// node does not produce are left out) and binds them. Hints, one per
  /// output where given, type what the op's shape function takes as given
  /// (Opaque's) where the model declares nothing.
  Node *
  createNodeForOutputs(OpId Op, llvm::ArrayRef<Value *> Operands,
                       AttrDict Attrs,
                       llvm::ArrayRef<std::optional<TensorType>> Hints = {});

  /// The types of the node's outputs by ONNX's own shape inference
  /// (frontend/OnnxShapeInference.h), given the types autopar found for its
  /// inputs; an error with ONNX's message when it rejects the node.
  llvm::Expected<std::vector<std::optional<TensorType>>> inferTypesWithOnnx();
  /// Imports graph attribute Name (an If branch) in place of the node: its
  /// nodes join the graph and its outputs become the node's.
  LogicalResult inlineGraphAttr(llvm::StringRef Name);
  /// Records that the node is kept as Opaque (the import warns once per op
  /// type); TypedByOnnx when ONNX's inference typed it.
  /// Reason says why an op autopar knows is Opaque (empty: it does not
  /// know the op). HasFlops when its FLOPs are estimated (ir/OpFlops.h).
  void noteOpaque(bool TypedByOnnx, llvm::StringRef Reason, bool HasFlops);
  /// An i64 constant, 1-D or scalar, named after the node.
  Value *createI64Constant(llvm::ArrayRef<int64_t> Values, bool Scalar = false);
  /// A bool scalar constant, named after the node.
  Value *createBoolScalar(bool V);
  /// A floating-point scalar constant of type Ty, named after the node.
  Value *createFloatScalar(ElementType Ty, double V);
  /// A name for a value the importer adds, unused in the graph and the
  /// model, derived from the node's first output and Suffix.
  std::string makeName(llvm::StringRef Suffix);
  /// Binds ONNX output I to V.
  void bindOutput(unsigned I, Value *V);
  /// Binds ONNX output I to the sequence of Elements.
  void bindOutputSequence(unsigned I, std::vector<Value *> Elements);
  /// Makes ONNX output I a parameter of Type (a weight the model holds as a
  /// constant), named after the output.
  Value *bindOutputToParameter(unsigned I, const TensorType &Type);

  void error(const llvm::Twine &Message);
  void warning(const llvm::Twine &Message);

  /// A Constant node of Data, named after the node.
  Value *createConstant(DenseTensor Data);

private:
  GraphImporter &Parent;
  const onnx::NodeProto &Proto;
  int64_t OpsetVersion;
};

/// Imports one ONNX node; reports and returns failure on errors.
using OpImportFn = LogicalResult (*)(NodeImporter &N);

/// The importer of (Domain, OpType), where Domain is "" for the default
/// domain; null when autopar does not know the op.
OpImportFn lookupOpImporter(llvm::StringRef Domain, llvm::StringRef OpType);

} // namespace autopar

#endif // AUTOPAR_FRONTEND_NODEIMPORTER_H
