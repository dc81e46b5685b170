//===- GraphImporter.cpp - Builds an IR graph from an ONNX graph ----------===//
//
// Order of work: check versions; note every name the model uses; inputs
// (with dimension bindings); initializers (constants or parameters); nodes in
// topological order, each through its op importer; outputs. See
// docs/Frontend.md.
//
//===----------------------------------------------------------------------===//

#include "frontend/GraphImporter.h"
#include "frontend/ExternalData.h"
#include "frontend/NodeImporter.h"
#include "frontend/OnnxShapeInference.h"
#include "frontend/OnnxTypes.h"
#include "frontend/OpImporters.h"

#include "ir/Verifier.h"
#include "weights/TensorBytes.h"
#include "weights/WeightReader.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"

#include <limits>
#include <map>
#include <queue>

using namespace autopar;
using namespace llvm;

/// Whether an inline initializer holds any values (a model written for
/// planning may declare its weights with none; planning needs only types).
static bool holdsInlineData(const onnx::TensorProto &T) {
  return T.has_raw_data() || T.float_data_size() || T.int32_data_size() ||
         T.int64_data_size() || T.double_data_size() || T.uint64_data_size() ||
         T.string_data_size();
}

/// The IR versions and default-domain opsets the importer takes.
static constexpr int64_t MinIRVersion = 3, MaxIRVersion = 13;
static constexpr int64_t MinOpset = 7, MaxOpset = 24;
/// Initializers up to this many elements that are integers or scalars are
/// read as constants: they are shape arithmetic and formula constants.
static constexpr int64_t MaxConstantInitializerElements = 4096;

GraphImporter::GraphImporter(const onnx::ModelProto &Model, StringRef ModelPath,
                             const ImportOptions &Options,
                             DiagnosticEngine &Diag)
    : Model(Model), Proto(Model.graph()), ModelPath(ModelPath.str()),
      Options(Options), Diag(Diag) {
  ModelDir = sys::path::parent_path(ModelPath).str();
  if (ModelDir.empty())
    ModelDir = ".";
  for (const auto &[Name, Size] : Options.DimBindings)
    Bindings[Name] = Size;
}

std::unique_ptr<Module> GraphImporter::run() {
  std::string Name = Proto.name().empty() ? "main" : Proto.name();
  G = std::make_unique<Graph>(Name);
  std::vector<const onnx::NodeProto *> Order;
  if (failed(checkVersions()) || failed(collectNames()) ||
      failed(findBatchDim()) || failed(importInputs()) ||
      failed(importInitializers()) || failed(sortNodes(Order)))
    return nullptr;
  // Two symbols (or a symbol and a size) that meet in a broadcast are
  // assumed equal (ONNX allows it when they are at run time); every type is
  // then written with one name for them.
  G->getDimEqualities().setRecording(true);
  for (const onnx::NodeProto *N : Order)
    if (failed(importNode(*N)))
      return nullptr;
  G->getDimEqualities().setRecording(false);
  G->applyDimEqualities();
  if (failed(importOutputs()))
    return nullptr;
  warnOpaqueOps();
  auto M = std::make_unique<Module>();
  M->addGraph(std::move(G));
  return M;
}

LogicalResult GraphImporter::checkVersions() {
  int64_t IR = Model.ir_version();
  if (IR < MinIRVersion || IR > MaxIRVersion) {
    Diag.error(SMLoc(), "IR version " + Twine(IR) + " is not supported (" +
                            Twine(MinIRVersion) + " to " + Twine(MaxIRVersion) +
                            ")");
    return failure();
  }
  for (const onnx::OperatorSetIdProto &Opset : Model.opset_import()) {
    StringRef Domain = Opset.domain();
    OpsetImports.push_back({Opset.domain(), Opset.version()});
    if (Domain.empty() || Domain == "ai.onnx")
      DefaultOpset = Opset.version();
    else if (Domain == "com.microsoft")
      MicrosoftOpset = Opset.version();
  }
  if (DefaultOpset < MinOpset || DefaultOpset > MaxOpset) {
    Diag.error(SMLoc(), "default-domain opset " + Twine(DefaultOpset) +
                            " is not supported (" + Twine(MinOpset) + " to " +
                            Twine(MaxOpset) +
                            "); convert the model with onnx.version_converter");
    return failure();
  }
  return success();
}

LogicalResult GraphImporter::collectNames() {
  for (const onnx::ValueInfoProto &V : Proto.input())
    ModelNames.insert(V.name());
  for (const onnx::TensorProto &T : Proto.initializer()) {
    ModelNames.insert(T.name());
    InitializerNames.insert(T.name());
    Initializers[T.name()] = &T;
  }
  for (const onnx::NodeProto &N : Proto.node())
    for (const std::string &Out : N.output())
      ModelNames.insert(Out);
  // Declared types: value_info and graph outputs are hints for inference.
  auto Declare = [&](const onnx::ValueInfoProto &V) {
    if (std::optional<TensorType> T = convertType(V.type()))
      DeclaredTypes.insert({V.name(), *T});
  };
  for (const onnx::ValueInfoProto &V : Proto.value_info())
    Declare(V);
  for (const onnx::ValueInfoProto &V : Proto.output())
    Declare(V);
  return success();
}

std::optional<TensorType>
GraphImporter::convertType(const onnx::TypeProto &Type, std::string *Problem) {
  auto Fail = [&](const Twine &Why) -> std::optional<TensorType> {
    if (Problem)
      *Problem = Why.str();
    return std::nullopt;
  };
  if (Type.has_sequence_type() || Type.has_optional_type())
    return Fail(Twine("it is ") +
                (Type.has_sequence_type() ? "a sequence" : "an optional") +
                ", which autopar holds only as the tensors the model builds "
                "it from (SequenceConstruct, SplitToSequence, Optional); "
                "give its tensors as inputs instead");
  if (!Type.has_tensor_type())
    return Fail("it is not a tensor");
  const onnx::TypeProto::Tensor &T = Type.tensor_type();
  std::optional<ElementType> Elem = getElementTypeFromOnnx(T.elem_type());
  if (!Elem)
    return Fail("element type " + getOnnxDataTypeName(T.elem_type()) +
                " is not supported");
  if (!T.has_shape())
    return Fail("its shape (rank) is not given");
  SmallVector<Dim, 4> Shape;
  for (const onnx::TensorShapeProto::Dimension &D : T.shape().dim()) {
    if (D.has_dim_value()) {
      // Some exporters write -1 for a dimension they do not know.
      Shape.push_back(D.dim_value() >= 0 ? Dim::get(D.dim_value()) : Dim());
    } else if (D.has_dim_param() && !D.dim_param().empty()) {
      std::string Symbol = makeSymbolName(D.dim_param());
      auto It = Bindings.find(Symbol);
      Shape.push_back(It != Bindings.end() ? Dim::get(It->second)
                                           : Dim::getSymbol(Symbol));
    } else {
      Shape.push_back(Dim());
    }
  }
  return TensorType(*Elem, Shape);
}

LogicalResult GraphImporter::findBatchDim() {
  // The symbols of the inputs' dimensions, before bindings.
  std::vector<std::string> Symbols;
  std::string Leading;
  for (const onnx::ValueInfoProto &V : Proto.input()) {
    if (InitializerNames.count(V.name()) || !V.type().has_tensor_type())
      continue;
    const auto &Dims = V.type().tensor_type().shape().dim();
    for (int I = 0; I != Dims.size(); ++I) {
      if (!Dims[I].has_dim_param() || Dims[I].dim_param().empty())
        continue;
      std::string S = makeSymbolName(Dims[I].dim_param());
      if (I == 0 && Leading.empty())
        Leading = S;
      if (!is_contained(Symbols, S))
        Symbols.push_back(S);
    }
  }
  auto [Input, Axis] = StringRef(Options.BatchDim).rsplit(':');
  if (!Axis.empty()) {
    // `INPUT:AXIS`: the named input's dimension, static or symbolic.
    for (const onnx::ValueInfoProto &V : Proto.input()) {
      if (V.name() != Input || InitializerNames.count(V.name()) ||
          !V.type().has_tensor_type())
        continue;
      const auto &Dims = V.type().tensor_type().shape().dim();
      unsigned A;
      if (Axis.getAsInteger(10, A) || A >= unsigned(Dims.size())) {
        Diag.error(SMLoc(), "--batch-dim " + Options.BatchDim + ": input '" +
                                Input + "' has " + Twine(Dims.size()) +
                                " dimensions; give an axis below that");
        return failure();
      }
      BatchInput = Input.str();
      BatchAxis = int(A);
      if (Dims[A].has_dim_param() && !Dims[A].dim_param().empty())
        BatchSymbol = makeSymbolName(Dims[A].dim_param());
      return success();
    }
    Diag.error(SMLoc(), "--batch-dim " + Options.BatchDim +
                            ": the model has no graph input '" + Input + "'");
    return failure();
  }
  if (!Options.BatchDim.empty()) {
    if (!is_contained(Symbols, Options.BatchDim)) {
      Diag.error(SMLoc(), "--batch-dim " + Options.BatchDim +
                              ": no input has a dimension of that name "
                              "(the inputs' symbols: " +
                              join(Symbols, ", ") + ")");
      return failure();
    }
    BatchSymbol = Options.BatchDim;
    return success();
  }
  for (const std::string &S : Symbols) {
    std::string Lower = StringRef(S).lower();
    if (StringRef(Lower).contains("batch") || Lower == "n" || Lower == "b" ||
        Lower == "bs") {
      BatchSymbol = S;
      return success();
    }
  }
  BatchSymbol = Leading;
  return success();
}

LogicalResult GraphImporter::importInputs() {
  for (const onnx::ValueInfoProto &V : Proto.input()) {
    // Before IR version 4, initializers are listed as inputs too.
    if (InitializerNames.count(V.name()))
      continue;
    if (V.name().empty() || G->isNameUsed(V.name())) {
      Diag.error(SMLoc(),
                 "graph input '" + V.name() + "' is unnamed or defined twice");
      return failure();
    }
    std::string Problem;
    std::optional<TensorType> Type = convertType(V.type(), &Problem);
    if (!Type) {
      Diag.error(SMLoc(), "graph input '" + V.name() + "': " + Problem);
      return failure();
    }
    Value *In = G->addInput(V.name(), *Type);
    Values[V.name()] = In;
    // The batch dimension: the input --batch-dim names, or found from the
    // inputs' symbols.
    if (!BatchInput.empty()) {
      if (V.name() == BatchInput)
        In->getAttrs().set("batch_dim", Attribute::getInt(BatchAxis));
      continue;
    }
    const auto &Dims = V.type().tensor_type().shape().dim();
    for (int I = 0; I != Dims.size(); ++I)
      if (!BatchSymbol.empty() && Dims[I].has_dim_param() &&
          makeSymbolName(Dims[I].dim_param()) == BatchSymbol) {
        In->getAttrs().set("batch_dim", Attribute::getInt(I));
        break;
      }
  }
  return success();
}

LogicalResult GraphImporter::importInitializers() {
  for (const onnx::TensorProto &T : Proto.initializer()) {
    auto Fail = [&](const Twine &Msg) {
      Diag.error(SMLoc(), "initializer '" + T.name() + "': " + Msg);
      return failure();
    };
    if (T.name().empty() || Values.count(T.name()))
      return Fail("unnamed or defined twice");
    Expected<TensorType> Type = getInitializerType(T);
    if (!Type)
      return Fail(toString(Type.takeError()));
    int64_t Count = *Type->getStaticNumElements();
    bool External = T.data_location() == onnx::TensorProto::EXTERNAL;
    bool IsConstant =
        Count <= MaxConstantInitializerElements &&
        (!isFloatElementType(Type->getElementType()) || Type->getRank() == 0);
    auto AddConstant = [&](DenseTensor Data) {
      AttrDict Attrs;
      Attrs.set("value", Attribute::getTensor(std::move(Data)));
      Node *N = G->createNode(OpId::Constant, {}, {*Type}, std::move(Attrs),
                              {T.name()});
      Values[T.name()] = N->getResult(0);
    };
    if (IsConstant && !External) {
      Expected<DenseTensor> Data = readInlineTensor(T, *Type);
      if (!Data)
        return Fail(toString(Data.takeError()));
      AddConstant(std::move(*Data));
      continue;
    }
    std::optional<WeightSource> Source;
    if (External) {
      std::optional<int64_t> Bytes = Type->getStaticSizeInBytes();
      if (!Bytes)
        return Fail("it is too large");
      Expected<ExternalDataRef> Ref = checkExternalData(T, ModelDir, *Bytes);
      if (!Ref)
        return Fail(toString(Ref.takeError()));
      // A small integer or scalar tensor is a constant wherever it is
      // stored (a model saved with every initializer external keeps its
      // Reshape targets there): read it when the file is there, as the
      // shape functions need its values. Without the file it stays a
      // parameter, as below.
      if (IsConstant && Ref->FileExists) {
        Expected<std::vector<uint8_t>> Data =
            readWeightBytes(T.name(), Ref->Source, ModelDir);
        if (!Data)
          return Fail(toString(Data.takeError()));
        Expected<DenseTensor> Tensor = decodeTensorBytes(*Data, *Type);
        if (!Tensor)
          return Fail(toString(Tensor.takeError()));
        AddConstant(std::move(*Tensor));
        continue;
      }
      // Loading weights is running's mode: the file must be there.
      if (!Ref->FileExists && Options.LoadWeights)
        return Fail("external data file '" + Ref->Source.Location +
                    "' is missing (--load-weights needs it)");
      // One warning per missing file, not per initializer in it.
      if (!Ref->FileExists &&
          MissingExternalFiles.insert(Ref->Source.Location).second)
        Diag.warning(SMLoc(), "initializer '" + T.name() +
                                  "': external data file '" +
                                  Ref->Source.Location +
                                  "' is missing (planning does not read it; "
                                  "running will)");
      Source = Ref->Source;
    } else if (Options.LoadWeights ||
               (Options.LoadInlineWeights && holdsInlineData(T))) {
      // The model's sizes are untrusted: the data must fill the type
      // exactly.
      Expected<DenseTensor> Data =
          readInlineTensor(T, *Type, std::numeric_limits<int64_t>::max());
      if (!Data)
        return Fail(toString(Data.takeError()));
      Source = WeightSource::getInline(std::move(*Data));
    }
    Values[T.name()] = G->addParam(T.name(), *Type, std::move(Source));
  }
  return success();
}

LogicalResult
GraphImporter::sortNodes(std::vector<const onnx::NodeProto *> &Order) {
  // Kahn's algorithm; among ready nodes the earliest in the file goes first,
  // so a file already in order keeps its order.
  int NumNodes = Proto.node_size();
  StringMap<int> Producer;
  auto NodeLabel = [&](int I) {
    const onnx::NodeProto &N = Proto.node(I);
    return std::make_pair(
        StringRef(N.name().empty() && N.output_size() ? N.output(0) : N.name()),
        StringRef(N.op_type()));
  };
  // Older exporters wrote the same Constant twice under one output name: a
  // repeat with the same value is dropped (with a warning).
  auto IsRepeatedConstant = [&](int First, int Again) {
    const onnx::NodeProto &A = Proto.node(First), &B = Proto.node(Again);
    if (A.op_type() != "Constant" || B.op_type() != "Constant" ||
        !A.domain().empty() || !B.domain().empty() || A.output_size() != 1 ||
        B.output_size() != 1 || A.attribute_size() != B.attribute_size())
      return false;
    for (int K = 0; K != A.attribute_size(); ++K)
      if (A.attribute(K).SerializeAsString() !=
          B.attribute(K).SerializeAsString())
        return false;
    return true;
  };
  std::vector<bool> Dropped(NumNodes, false);
  for (int I = 0; I != NumNodes; ++I)
    for (const std::string &Out : Proto.node(I).output()) {
      if (Out.empty())
        continue;
      auto [It, Inserted] = Producer.try_emplace(Out, I);
      if (!Inserted && !Values.count(Out) &&
          IsRepeatedConstant(It->second, I)) {
        auto [Name, Op] = NodeLabel(I);
        Diag.warning(SMLoc(), "node '" + Name + "' (" + Op +
                                  ") repeats node '" +
                                  NodeLabel(It->second).first +
                                  "', the same constant under the same "
                                  "output name '" +
                                  Out + "'; the repeat is dropped");
        Dropped[I] = true;
        continue;
      }
      if (!Inserted || Values.count(Out)) {
        auto [Name, Op] = NodeLabel(I);
        Diag.nodeError(
            Name, Op,
            "output '" + Out + "' is already defined" +
                (Inserted ? Twine(" by the graph")
                          : " by node '" + NodeLabel(It->second).first + "'"));
        return failure();
      }
    }
  std::vector<int> Pending(NumNodes, 0);
  std::vector<std::vector<int>> Users(NumNodes);
  for (int I = 0; I != NumNodes; ++I) {
    // What the node's graph attributes (If's branches, Loop's body) read
    // from this graph orders it too; a name defined nowhere there is for
    // the subgraph's own inference to report.
    for (const std::string &In : getOuterScopeReads(Proto.node(I))) {
      auto It = Producer.find(In);
      if (Values.count(In) || It == Producer.end() || It->second == I ||
          is_contained(Proto.node(I).input(), In))
        continue;
      ++Pending[I];
      Users[It->second].push_back(I);
    }
    for (const std::string &In : Proto.node(I).input()) {
      if (In.empty() || Values.count(In))
        continue;
      auto It = Producer.find(In);
      if (It == Producer.end()) {
        auto [Name, Op] = NodeLabel(I);
        Diag.nodeError(Name, Op,
                       "input '" + In +
                           "' is not a graph input, an initializer or "
                           "another node's output");
        return failure();
      }
      ++Pending[I];
      Users[It->second].push_back(I);
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> Ready;
  for (int I = 0; I != NumNodes; ++I)
    if (Pending[I] == 0 && !Dropped[I])
      Ready.push(I);
  while (!Ready.empty()) {
    int I = Ready.top();
    Ready.pop();
    Order.push_back(&Proto.node(I));
    for (int U : Users[I])
      if (--Pending[U] == 0)
        Ready.push(U);
  }
  int Kept = NumNodes - int(std::count(Dropped.begin(), Dropped.end(), true));
  if (int(Order.size()) != Kept) {
    for (int I = 0; I != NumNodes; ++I)
      if (Pending[I] != 0 && !Dropped[I]) {
        auto [Name, Op] = NodeLabel(I);
        Diag.nodeError(Name, Op, "is part of a cycle");
        return failure();
      }
  }
  return success();
}

LogicalResult GraphImporter::importNode(const onnx::NodeProto &N) {
  StringRef Domain = N.domain();
  if (Domain == "ai.onnx")
    Domain = "";
  int64_t Version = DefaultOpset;
  if (!Domain.empty()) {
    // Other domains at the version the model imports them (ONNX's
    // inference looks up their schemas by it), 1 when it does not.
    Version = 1;
    for (const auto &[Imported, V] : OpsetImports)
      if (Imported == Domain)
        Version = V;
  }
  if (Domain == "com.microsoft") {
    if (MicrosoftOpset == 0 && !WarnedMissingMicrosoftImport) {
      Diag.warning(SMLoc(), "the model uses com.microsoft ops without "
                            "importing that domain; assuming version 1");
      WarnedMissingMicrosoftImport = true;
    }
    Version = std::max<int64_t>(MicrosoftOpset, 1);
  }
  ++NumImportedNodes;
  NodeImporter Importer(*this, N, Version);
  if (failed(checkSequenceReads(N, Importer.getDisplayName())))
    return failure();
  OpImportFn Import = lookupOpImporter(Domain, N.op_type());
  if (!Import)
    Import = lookupOpImporter("", "$Opaque");
  unsigned Errors = Diag.getNumErrors();
  if (failed(Import(Importer)) || Diag.getNumErrors() != Errors)
    return failure();
  for (const std::string &Out : N.output())
    if (!Out.empty() && !Values.count(Out) && !Sequences.count(Out)) {
      Diag.nodeError(Importer.getDisplayName(), N.op_type(),
                     "importing the node did not define output '" + Out +
                         "' (an importer bug)");
      return failure();
    }
  return success();
}

LogicalResult GraphImporter::importOutputs() {
  std::vector<Value *> Outputs;
  for (const onnx::ValueInfoProto &V : Proto.output()) {
    if (const std::vector<Value *> *Seq = lookupSequence(V.name())) {
      Diag.error(SMLoc(), "graph output '" + V.name() + "' is a sequence (of " +
                              Twine(Seq->size()) +
                              " tensors), which autopar holds only as its "
                              "tensors; return ConcatFromSequence of it, or "
                              "its elements, instead");
      return failure();
    }
    Value *Out = V.name().empty() ? nullptr : Values.lookup(V.name());
    if (!Out) {
      Diag.error(SMLoc(), "graph output '" + V.name() + "' is not defined");
      return failure();
    }
    Outputs.push_back(Out);
  }
  G->setOutputs(Outputs);
  return success();
}

LogicalResult GraphImporter::checkSequenceReads(const onnx::NodeProto &N,
                                                StringRef DisplayName) {
  StringRef Domain = N.domain() == "ai.onnx" ? "" : StringRef(N.domain());
  if (Domain.empty() && readsSequences(N.op_type()))
    return success();
  for (const std::string &In : N.input())
    if (const std::vector<Value *> *Seq = lookupSequence(In)) {
      Diag.nodeError(DisplayName, N.op_type(),
                     "input '" + In + "' is a sequence (of " +
                         Twine(Seq->size()) +
                         " tensors), which autopar holds only as its "
                         "tensors, and op '" +
                         N.op_type() +
                         "' cannot take one; read its elements with "
                         "SequenceAt or ConcatFromSequence first");
      return failure();
    }
  return success();
}

const std::vector<Value *> *
GraphImporter::lookupSequence(StringRef OnnxName) const {
  auto It = Sequences.find(OnnxName);
  return It == Sequences.end() ? nullptr : &It->second;
}

std::optional<OnnxValue>
GraphImporter::lookupOnnxValue(StringRef OnnxName) const {
  if (Value *V = Values.lookup(OnnxName))
    return OnnxValue{V, std::nullopt};
  if (const std::vector<Value *> *Seq = lookupSequence(OnnxName))
    return OnnxValue::getSequence(*Seq);
  return std::nullopt;
}

void GraphImporter::saveBinding(StringRef OnnxName) {
  if (!BodyScopes.empty())
    BodyScopes.back().push_back({OnnxName.str(), lookupOnnxValue(OnnxName)});
}

void GraphImporter::bind(StringRef OnnxName, Value *V, bool Rename) {
  saveBinding(OnnxName);
  Sequences.erase(OnnxName);
  Values[OnnxName] = V;
  if (Rename && V->getName() != OnnxName && !G->isNameUsed(OnnxName) &&
      !V->isInput() && !V->isParam() && !Values.count(V->getName()))
    G->renameValue(V, OnnxName);
}

void GraphImporter::bindSequence(StringRef OnnxName,
                                 std::vector<Value *> Elements) {
  saveBinding(OnnxName);
  Values.erase(OnnxName);
  Sequences[OnnxName] = std::move(Elements);
}

void GraphImporter::bindOnnxValue(StringRef OnnxName, const OnnxValue &V,
                                  bool Rename) {
  if (V.isSequence())
    bindSequence(OnnxName, *V.Elements);
  else
    bind(OnnxName, V.Tensor, Rename);
}

LogicalResult GraphImporter::importBodyNodes(const onnx::GraphProto &Body,
                                             StringRef Where) {
  for (const onnx::NodeProto &N : Body.node()) {
    for (const std::string &In : N.input())
      if (!In.empty() && !lookupOnnxValue(In)) {
        Diag.error(SMLoc(), "node '" + Where + "': the body's node '" +
                                N.name() + "' reads '" + In +
                                "', which nothing defines before it");
        return failure();
      }
    for (const std::string &Out : N.output())
      if (!Out.empty() && lookupOnnxValue(Out)) {
        Diag.error(SMLoc(), "node '" + Where + "': the body's node '" +
                                N.name() + "' defines '" + Out + "' again");
        return failure();
      }
    if (failed(importNode(N)))
      return failure();
  }
  return success();
}

LogicalResult GraphImporter::importInlineGraph(const onnx::GraphProto &Body,
                                               ArrayRef<std::string> Results,
                                               StringRef Where) {
  auto Fail = [&](const Twine &Why) {
    Diag.error(SMLoc(), "node '" + Where + "': " + Why);
    return failure();
  };
  if (Body.input_size() != 0 || Body.initializer_size() != 0)
    return Fail("the branch has inputs or initializers of its own, which "
                "autopar does not inline");
  if (Body.output_size() != int(Results.size()))
    return Fail("the branch has " + Twine(Body.output_size()) +
                " outputs for " + Twine(Results.size()) + " results");
  if (failed(importBodyNodes(Body, Where)))
    return failure();
  for (int I = 0, E = Body.output_size(); I != E; ++I) {
    std::optional<OnnxValue> V = lookupOnnxValue(Body.output(I).name());
    if (!V)
      return Fail("the branch's output '" + Body.output(I).name() +
                  "' is not defined");
    if (Results[I].empty())
      continue;
    // The branch's names are its own: its result takes the node's name.
    if (!V->isSequence() && !V->Tensor->isInput() && !V->Tensor->isParam() &&
        !G->isNameUsed(Results[I]))
      G->renameValue(V->Tensor, Results[I]);
    bindOnnxValue(Results[I], *V);
  }
  return success();
}

LogicalResult GraphImporter::importBody(const onnx::GraphProto &Body,
                                        ArrayRef<OnnxValue> Inputs,
                                        std::vector<OnnxValue> &Outputs,
                                        StringRef Where) {
  auto Fail = [&](const Twine &Why) {
    Diag.error(SMLoc(), "node '" + Where + "': " + Why);
    return failure();
  };
  if (Body.input_size() != int(Inputs.size()))
    return Fail("the body has " + Twine(Body.input_size()) + " inputs for " +
                Twine(Inputs.size()) + " values");
  if (Body.initializer_size() != 0)
    return Fail("the body has initializers of its own, which autopar does "
                "not unroll");
  bool Repeat = !ImportedBodies.insert(&Body).second;
  RepeatingBodies += Repeat;
  BodyScopes.emplace_back();
  // An input the body never reads may be given no value.
  for (int I = 0, E = Body.input_size(); I != E; ++I)
    if (Inputs[I].Tensor || Inputs[I].isSequence())
      bindOnnxValue(Body.input(I).name(), Inputs[I], /*Rename=*/false);
  LogicalResult Result = importBodyNodes(Body, Where);
  Outputs.clear();
  for (int I = 0, E = Body.output_size(); I != E && succeeded(Result); ++I) {
    std::optional<OnnxValue> V = lookupOnnxValue(Body.output(I).name());
    if (!V)
      Result = Fail("the body's output '" + Body.output(I).name() +
                    "' is not defined");
    else
      Outputs.push_back(std::move(*V));
  }
  // The body's names are forgotten; what they shadowed is back.
  std::vector<SavedBinding> Saved = std::move(BodyScopes.back());
  BodyScopes.pop_back();
  for (SavedBinding &S : reverse(Saved)) {
    Values.erase(S.Name);
    Sequences.erase(S.Name);
    if (S.Old && S.Old->isSequence())
      Sequences[S.Name] = std::move(*S.Old->Elements);
    else if (S.Old)
      Values[S.Name] = S.Old->Tensor;
  }
  RepeatingBodies -= Repeat;
  return Result;
}

GraphImporter::Checkpoint GraphImporter::checkpoint() const {
  return {G->getNodes().empty() ? nullptr : &G->getNodes().back(),
          G->getDimEqualities()};
}

void GraphImporter::rollBack(const Checkpoint &C) {
  // Newest first, so that every result is unused when its node goes.
  while (!G->getNodes().empty() && &G->getNodes().back() != C.Last)
    G->getNodes().back().erase();
  bool Recording = G->getDimEqualities().isRecording();
  G->getDimEqualities() = C.Equalities;
  G->getDimEqualities().setRecording(Recording);
}

LogicalResult
GraphImporter::measureBody(const onnx::GraphProto &Body,
                           ArrayRef<OnnxValue> Inputs, StringRef Where,
                           function_ref<void(ArrayRef<const Node *>)> Measure) {
  Checkpoint Mark = checkpoint();
  unsigned Errors = Diag.getNumErrors();
  bool WasQuiet = Diag.isQuiet();
  std::vector<OpaqueOpType> SavedOpaque = OpaqueOps;
  int64_t SavedImported = NumImportedNodes;
  bool FirstTime = !ImportedBodies.contains(&Body);
  Diag.setQuiet(true);
  std::vector<OnnxValue> Outputs;
  LogicalResult Result = importBody(Body, Inputs, Outputs, Where);
  Outputs.clear();
  Diag.setQuiet(WasQuiet);
  if (Diag.getNumErrors() != Errors)
    Result = failure();
  Diag.dropErrorsAfter(Errors);
  if (succeeded(Result)) {
    std::vector<const Node *> Created;
    auto It =
        Mark.Last ? std::next(Mark.Last->getIterator()) : G->getNodes().begin();
    for (; It != G->getNodes().end(); ++It)
      Created.push_back(&*It);
    Measure(Created);
  }
  rollBack(Mark);
  OpaqueOps = std::move(SavedOpaque);
  NumImportedNodes = SavedImported;
  if (FirstTime)
    ImportedBodies.erase(&Body);
  return Result;
}

std::optional<DenseTensor>
GraphImporter::getSmallInitializerData(StringRef Name) {
  const onnx::TensorProto *T = Initializers.lookup(Name);
  if (!T)
    return std::nullopt;
  Expected<TensorType> Type = getInitializerType(*T);
  if (!Type) {
    consumeError(Type.takeError());
    return std::nullopt;
  }
  if (T->data_location() == onnx::TensorProto::EXTERNAL) {
    // Read from its file when that is there (a model saved with every
    // initializer external keeps Resize's scales there too).
    std::optional<int64_t> Count = Type->getStaticNumElements();
    std::optional<int64_t> Bytes = Type->getStaticSizeInBytes();
    if (!Count || *Count > 4096 || !Bytes)
      return std::nullopt;
    Expected<ExternalDataRef> Ref = checkExternalData(*T, ModelDir, *Bytes);
    if (!Ref) {
      consumeError(Ref.takeError());
      return std::nullopt;
    }
    if (!Ref->FileExists)
      return std::nullopt;
    Expected<std::vector<uint8_t>> Raw =
        readWeightBytes(T->name(), Ref->Source, ModelDir);
    if (!Raw) {
      consumeError(Raw.takeError());
      return std::nullopt;
    }
    Expected<DenseTensor> Data = decodeTensorBytes(*Raw, *Type);
    if (!Data) {
      consumeError(Data.takeError());
      return std::nullopt;
    }
    return std::move(*Data);
  }
  Expected<DenseTensor> Data = readInlineTensor(*T, *Type, 4096);
  if (!Data) {
    consumeError(Data.takeError());
    return std::nullopt;
  }
  return std::move(*Data);
}

void GraphImporter::noteOpaque(const onnx::NodeProto &N, StringRef DisplayName,
                               bool TypedByOnnx, StringRef Reason,
                               bool HasFlops) {
  StringRef Domain = N.domain() == "ai.onnx" ? "" : StringRef(N.domain());
  auto It = find_if(OpaqueOps, [&](const OpaqueOpType &O) {
    return O.Domain == Domain && O.OpType == N.op_type();
  });
  if (It == OpaqueOps.end()) {
    OpaqueOps.push_back(
        {Domain.str(), N.op_type(), DisplayName.str(), Reason.str()});
    It = std::prev(OpaqueOps.end());
  }
  ++It->Nodes;
  It->TypedByOnnx |= TypedByOnnx;
  It->HasFlops |= HasFlops;
}

void GraphImporter::warnOpaqueOps() {
  for (const OpaqueOpType &O : OpaqueOps)
    Diag.nodeWarning(
        O.FirstNode, O.OpType,
        (O.Reason.empty() ? "autopar does not know op '" + O.OpType + "'"
                          : "op '" + O.OpType + "' is not imported") +
            (O.Domain.empty() ? Twine("") : " of domain " + O.Domain) + " (" +
            Twine(O.Nodes) + (O.Nodes == 1 ? " node" : " nodes") +
            ", the first named here" +
            (O.Reason.empty() ? Twine("") : ": " + O.Reason) +
            "): it is kept as Opaque, typed " +
            (O.TypedByOnnx ? "by ONNX's shape inference"
                           : "as the model declares") +
            (O.HasFlops
                 ? ", and priced at an estimate of its FLOPs or the bytes it "
                   "reads and writes, whichever takes longer; "
                 : ", and priced as memory-bound at the bytes it reads and "
                   "writes; ") +
            "autopar-run cannot execute it");
}

const TensorType *GraphImporter::getDeclaredType(StringRef OnnxName) const {
  auto It = DeclaredTypes.find(OnnxName);
  return It == DeclaredTypes.end() ? nullptr : &It->second;
}

std::string GraphImporter::makeFreshName(StringRef Base) {
  std::string Name = Base.str();
  unsigned &Last = FreshSuffixes[Base];
  while (G->isNameUsed(Name) || ModelNames.count(Name))
    Name = (Base + "_" + Twine(++Last)).str();
  ModelNames.insert(Name);
  return Name;
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

Error ImportOptions::addDimBinding(StringRef Text) {
  auto [Name, Size] = Text.split('=');
  int64_t Value;
  if (Name.empty() || Size.getAsInteger(10, Value) || Value < 0)
    return createStringError(inconvertibleErrorCode(),
                             "--dim " + Text.str() +
                                 ": expected NAME=SIZE with SIZE >= 0, e.g. "
                                 "--dim batch=8");
  DimBindings.push_back({makeSymbolName(Name), Value});
  return Error::success();
}

/// An error naming `--freeze` unless Pattern is a non-empty valid regex.
static Error checkFreezePattern(StringRef Pattern) {
  std::string Why;
  if (Pattern.empty())
    Why = "empty";
  else if (!Regex(Pattern).isValid(Why))
    Why = "not a valid regular expression: " + Why;
  if (Why.empty())
    return Error::success();
  return createStringError(inconvertibleErrorCode(),
                           "--freeze '" + Pattern.str() + "': " + Why);
}

Error ImportOptions::addFreeze(StringRef Pattern) {
  if (Error E = checkFreezePattern(Pattern))
    return E;
  Freeze.push_back(Pattern.str());
  return Error::success();
}

Error ImportOptions::validate() const {
  for (const std::string &Pattern : Freeze)
    if (Error E = checkFreezePattern(Pattern))
      return E;
  for (size_t I = 0; I != DimBindings.size(); ++I)
    for (size_t J = 0; J != I; ++J)
      if (DimBindings[I].first == DimBindings[J].first)
        return createStringError(inconvertibleErrorCode(),
                                 "--dim " + DimBindings[I].first +
                                     " is given twice");
  return Error::success();
}

bool autopar::isOnnxModelPath(StringRef Path) {
  StringRef Ext = sys::path::extension(Path);
  return Ext == ".onnx" || Ext == ".pbtxt" || Ext == ".textproto";
}

/// The --dim bindings checked against the dimensions the model assumes
/// equal, and extended to every symbol assumed equal to a bound one. The
/// assumptions come from an import without bindings (types only, silent):
/// with the bindings applied, two bound symbols that meet are two sizes.
/// Reports and returns nullopt when two bindings conflict.
static std::optional<ImportOptions>
checkDimBindings(const onnx::ModelProto &Model, StringRef ModelPath,
                 const ImportOptions &Options, DiagnosticEngine &Diag) {
  if (Options.DimBindings.empty())
    return Options;
  ImportOptions Symbolic = Options;
  Symbolic.DimBindings.clear();
  Symbolic.LoadWeights = Symbolic.LoadInlineWeights = false;
  std::string Ignored;
  raw_string_ostream Sink(Ignored);
  DiagnosticEngine Silent(nullptr, ModelPath, Sink);
  std::unique_ptr<Module> M =
      GraphImporter(Model, ModelPath, Symbolic, Silent).run();
  if (!M)
    return Options; // The import with bindings reports what is wrong.
  const DimEqualities &Eq = M->getGraphs().front()->getDimEqualities();
  ImportOptions Extended = Options;
  auto BoundValue = [&](StringRef Symbol) -> std::optional<int64_t> {
    for (const auto &[Name, Size] : Extended.DimBindings)
      if (Name == Symbol)
        return Size;
    return std::nullopt;
  };
  // Each class of assumed-equal symbols: its representative and members.
  struct AssumedClass {
    std::optional<int64_t> Size; // A static representative.
    std::vector<std::string> Members;
  };
  std::map<std::string, AssumedClass> Classes; // By representative.
  for (const auto &[Symbol, A] : Eq.getAssumptions()) {
    const Dim &Rep = A.Representative;
    std::string Key;
    raw_string_ostream(Key) << Rep;
    AssumedClass &C = Classes[Key];
    if (Rep.isStatic())
      C.Size = Rep.getSize();
    else if (C.Members.empty())
      C.Members.push_back(Rep.getSymbols()[0]);
    C.Members.push_back(Symbol);
  }
  for (const auto &[Key, C] : Classes) {
    const std::vector<std::string> &Members = C.Members;
    std::optional<int64_t> Size = C.Size;
    std::string SizeFrom = Size ? "the model's size " + Key : "";
    for (const std::string &S : Members) {
      std::optional<int64_t> B = BoundValue(S);
      if (!B)
        continue;
      if (Size && *Size != *B) {
        auto It = Eq.getAssumptions().find(S);
        std::string Where =
            It != Eq.getAssumptions().end() && !It->second.Where.empty()
                ? " (first at node '" + It->second.Where + "')"
                : "";
        Diag.error(SMLoc(), "--dim " + S + "=" + std::to_string(*B) +
                                " conflicts with " + SizeFrom +
                                ": the model assumes them equal, as they "
                                "meet in a broadcast" +
                                Where + "; bind them to one size");
        return std::nullopt;
      }
      Size = B;
      SizeFrom = "--dim " + S + "=" + std::to_string(*B);
    }
    if (!Size)
      continue;
    for (const std::string &S : Members)
      if (!BoundValue(S)) {
        Diag.warning(SMLoc(), SizeFrom + " also binds " + S +
                                  ": the model assumes them equal, as they "
                                  "meet in a broadcast");
        Extended.DimBindings.push_back({S, *Size});
      }
  }
  return Extended;
}

/// `--freeze`: marks the parameters whose names the patterns match (a
/// search, as grep's) `frozen = true`; warns of a pattern that matches none
/// (a mistyped name). The patterns were validated (ImportOptions).
static void markFrozenParams(Module &M, ArrayRef<std::string> Patterns,
                             DiagnosticEngine &Diag) {
  for (const std::string &Pattern : Patterns) {
    Regex R(Pattern);
    bool Matched = false;
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      for (const std::unique_ptr<Value> &P : G->getParams())
        if (R.match(P->getName())) {
          P->getAttrs().set("frozen", Attribute::getBool(true));
          Matched = true;
        }
    if (!Matched)
      Diag.warning(SMLoc(), "--freeze '" + Pattern +
                                "' matches no parameter; nothing is frozen "
                                "by it");
  }
}

std::unique_ptr<Module> autopar::importModelProto(const onnx::ModelProto &Model,
                                                  StringRef ModelPath,
                                                  const ImportOptions &Options,
                                                  DiagnosticEngine &Diag) {
  std::optional<ImportOptions> Checked =
      checkDimBindings(Model, ModelPath, Options, Diag);
  if (!Checked)
    return nullptr;
  std::unique_ptr<Module> M =
      GraphImporter(Model, ModelPath, *Checked, Diag).run();
  if (M)
    markFrozenParams(*M, Options.Freeze, Diag);
  // The importer types every node through the shape functions; the verifier
  // checks the whole graph once more (and catches importer bugs).
  if (M && failed(verifyModule(*M, Diag)))
    return nullptr;
  return M;
}
