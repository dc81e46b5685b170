//===- GraphImporter.h - Builds an IR graph from an ONNX graph --*- C++ -*-===//

#ifndef AUTOPAR_FRONTEND_GRAPHIMPORTER_H
#define AUTOPAR_FRONTEND_GRAPHIMPORTER_H

#include "frontend/Importer.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace onnx {
class GraphProto;
class NodeProto;
class TensorProto;
class TypeProto;
} // namespace onnx

namespace autopar {

/// What an ONNX name holds: a tensor, as an IR value, or a sequence (an
/// optional is a sequence of at most one element), as the IR values of its
/// elements. Sequences never become IR values.
struct OnnxValue {
  Value *Tensor = nullptr;
  std::optional<std::vector<Value *>> Elements;

  static OnnxValue getSequence(std::vector<Value *> Elements) {
    return {nullptr, std::move(Elements)};
  }
  bool isSequence() const { return Elements.has_value(); }
};

class GraphImporter {
public:
  GraphImporter(const onnx::ModelProto &Model, llvm::StringRef ModelPath,
                const ImportOptions &Options, DiagnosticEngine &Diag);

  std::unique_ptr<Module> run();

  // For NodeImporter.
  Graph &getGraph() { return *G; }
  DiagnosticEngine &getDiag() { return Diag; }
  /// The IR value of an ONNX name, or null.
  Value *lookup(llvm::StringRef OnnxName) const {
    return Values.lookup(OnnxName);
  }
  /// The elements of an ONNX name that is a sequence, or null.
  const std::vector<Value *> *lookupSequence(llvm::StringRef OnnxName) const;
  /// The tensor or sequence of an ONNX name; nullopt when undefined.
  std::optional<OnnxValue> lookupOnnxValue(llvm::StringRef OnnxName) const;
  /// Makes OnnxName refer to V, and gives V that name when it is free
  /// (and Rename).
  void bind(llvm::StringRef OnnxName, Value *V, bool Rename = true);
  /// Makes OnnxName the sequence of Elements.
  void bindSequence(llvm::StringRef OnnxName, std::vector<Value *> Elements);
  void bindOnnxValue(llvm::StringRef OnnxName, const OnnxValue &V,
                     bool Rename = true);
  /// The type the model declares for a name (value_info, graph outputs).
  const TensorType *getDeclaredType(llvm::StringRef OnnxName) const;
  /// The values of a small initializer (at most 4096 elements) held inline
  /// in the model or in an external file that is there, read on demand:
  /// what ONNX's inference and Resize's importer need of a parameter such
  /// as Resize's scales. Nullopt otherwise.
  std::optional<DenseTensor> getSmallInitializerData(llvm::StringRef Name);
  /// Imports the nodes of Body (an If branch) into the graph, in order,
  /// reading the enclosing graph's values, and binds its outputs to
  /// Results. Reports and fails when the body has inputs or initializers
  /// of its own, or reads a name nothing defines.
  LogicalResult importInlineGraph(const onnx::GraphProto &Body,
                                  llvm::ArrayRef<std::string> Results,
                                  llvm::StringRef Where);
  /// Imports the nodes of Body (a Loop or Scan body, one iteration) with its
  /// inputs bound to Inputs, reading the enclosing graph's values, and gives
  /// what its outputs hold in Outputs. The names Body defines are forgotten
  /// after, so that it can be imported again; the second and later times
  /// its nodes do not warn again. Reports and fails as importInlineGraph.
  LogicalResult importBody(const onnx::GraphProto &Body,
                           llvm::ArrayRef<OnnxValue> Inputs,
                           std::vector<OnnxValue> &Outputs,
                           llvm::StringRef Where);
  /// Where the graph was before an import that may be given up (an
  /// unrolling, a body measured): its last node and the dimension
  /// equalities assumed so far.
  struct Checkpoint {
    Node *Last;
    DimEqualities Equalities;
  };
  Checkpoint checkpoint() const;
  /// Erases the nodes created since C, newest first, and forgets the
  /// equalities assumed since.
  void rollBack(const Checkpoint &C);
  /// Imports Body once with Inputs after the graph's last node, quietly (no
  /// diagnostic printed, no Opaque op noted), hands the nodes it created to
  /// Measure, then erases them: a body priced without being unrolled. Fails,
  /// having printed nothing, when the body does not import.
  LogicalResult
  measureBody(const onnx::GraphProto &Body, llvm::ArrayRef<OnnxValue> Inputs,
              llvm::StringRef Where,
              llvm::function_ref<void(llvm::ArrayRef<const Node *>)> Measure);
  /// Whether the body being imported was imported before (its nodes'
  /// warnings were given then).
  bool isRepeatingBody() const { return RepeatingBodies != 0; }
  /// How many ONNX nodes were imported so far (a body's once per time).
  int64_t getNumImportedNodes() const { return NumImportedNodes; }
  /// The model's opset imports, (domain, version).
  llvm::ArrayRef<std::pair<std::string, int64_t>> getOpsetImports() const {
    return OpsetImports;
  }
  /// Records an op kept as Opaque, for the one warning per op type that
  /// run() gives at the end.
  void noteOpaque(const onnx::NodeProto &N, llvm::StringRef DisplayName,
                  bool TypedByOnnx, llvm::StringRef Reason, bool HasFlops);
  /// A name used neither in the graph nor in the model.
  std::string makeFreshName(llvm::StringRef Base);

private:
  LogicalResult checkVersions();
  LogicalResult collectNames();
  LogicalResult importInputs();
  LogicalResult importInitializers();
  LogicalResult sortNodes(std::vector<const onnx::NodeProto *> &Order);
  LogicalResult importNode(const onnx::NodeProto &Node);
  LogicalResult importOutputs();
  /// Reports and fails when N reads a sequence and its op cannot take one.
  LogicalResult checkSequenceReads(const onnx::NodeProto &N,
                                   llvm::StringRef DisplayName);
  /// Saves what OnnxName holds, for the innermost body scope to restore.
  void saveBinding(llvm::StringRef OnnxName);
  LogicalResult importBodyNodes(const onnx::GraphProto &Body,
                                llvm::StringRef Where);
  LogicalResult findBatchDim();
  /// The tensor type a TypeProto describes, with dimension bindings applied;
  /// nullopt when it is not a tensor with a known element type and rank.
  std::optional<TensorType> convertType(const onnx::TypeProto &Type,
                                        std::string *Problem = nullptr);

  const onnx::ModelProto &Model;
  const onnx::GraphProto &Proto;
  std::string ModelPath;
  std::string ModelDir;
  const ImportOptions &Options;
  DiagnosticEngine &Diag;
  std::unique_ptr<Graph> G;

  std::vector<std::pair<std::string, int64_t>> OpsetImports;
  int64_t DefaultOpset = 0;
  int64_t MicrosoftOpset = 0;
  llvm::StringMap<Value *> Values;
  llvm::StringMap<std::vector<Value *>> Sequences;
  /// What a name held before a body scope bound it: one list per body being
  /// imported, innermost last, restored in reverse when the body is done.
  struct SavedBinding {
    std::string Name;
    std::optional<OnnxValue> Old;
  };
  std::vector<std::vector<SavedBinding>> BodyScopes;
  /// How many of the bodies being imported were imported before.
  unsigned RepeatingBodies = 0;
  int64_t NumImportedNodes = 0;
  /// The bodies imported so far, to tell a repeat.
  llvm::DenseSet<const onnx::GraphProto *> ImportedBodies;
  llvm::StringMap<TensorType> DeclaredTypes;
  llvm::StringSet<> ModelNames;
  /// Per base name, the last suffix makeFreshName gave it: the names below
  /// it are in ModelNames for good, so the next search starts there (an
  /// unrolled loop names each iteration's values without rescanning).
  llvm::StringMap<unsigned> FreshSuffixes;
  llvm::StringSet<> InitializerNames;
  llvm::StringMap<const onnx::TensorProto *> Initializers;
  llvm::StringMap<int64_t> Bindings;
  /// Symbol of the batch dimension (before bindings), if any.
  std::string BatchSymbol;
  /// `--batch-dim INPUT:AXIS`: the input and its batch axis.
  std::string BatchInput;
  int BatchAxis = -1;
  bool WarnedMissingMicrosoftImport = false;
  /// The op types kept as Opaque, in the order first met.
  struct OpaqueOpType {
    std::string Domain, OpType, FirstNode;
    /// Why the first node is Opaque, for ops autopar knows but could not
    /// import (a Loop not unrolled); empty for unknown ops.
    std::string Reason;
    unsigned Nodes = 0;
    bool TypedByOnnx = false;
    /// Whether a node of the type has an estimate of its FLOPs.
    bool HasFlops = false;
  };
  std::vector<OpaqueOpType> OpaqueOps;
  void warnOpaqueOps();
  /// External data files found missing (each is reported once).
  llvm::StringSet<> MissingExternalFiles;
};

} // namespace autopar

#endif // AUTOPAR_FRONTEND_GRAPHIMPORTER_H
