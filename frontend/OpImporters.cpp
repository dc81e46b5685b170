//===- OpImporters.cpp - ONNX ops to IR ops -------------------------------===//
//
// The importers named in OnnxOps.def. Most ONNX ops map one to one
// (importDirect); the rest bring older opsets to the newest form or rewrite
// com.microsoft contrib ops into standard ops with the same meaning.
//
//===----------------------------------------------------------------------===//

#include "frontend/OpImporters.h"
#include "frontend/GraphImporter.h"
#include "frontend/OnnxShapeInference.h"
#include "frontend/OnnxTypes.h"

#include "ir/Folders.h"
#include "ir/OpFlops.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/StringMap.h"

#include <limits>

using namespace autopar;
using namespace llvm;

SmallVector<Value *, 4> autopar::getInputs(NodeImporter &N) {
  SmallVector<Value *, 4> Inputs;
  for (unsigned I = 0, E = N.getNumInputs(); I != E; ++I)
    Inputs.push_back(N.getInput(I));
  return Inputs;
}

bool autopar::requireInputs(NodeImporter &N, unsigned Count) {
  for (unsigned I = 0; I != Count; ++I)
    if (!N.getInput(I)) {
      N.error("input #" + Twine(I) + " is required");
      return false;
    }
  return true;
}

template <OpId Op> static LogicalResult importDirect(NodeImporter &N) {
  std::optional<AttrDict> Attrs = N.convertAttrs(Op);
  if (!Attrs)
    return failure();
  return success(N.createNodeForOutputs(Op, getInputs(N), std::move(*Attrs)));
}

/// An op autopar does not know keeps the output types the model declares;
/// without them the shapes after it cannot be known.
LogicalResult autopar::keepOpaque(NodeImporter &N, StringRef Reason,
                                  const AttrDict &Extra) {
  // It (or its body) may read a sequence, which has no IR value to give.
  std::vector<std::string> Reads(N.getProto().input().begin(),
                                 N.getProto().input().end());
  size_t NumInputs = Reads.size();
  for (std::string &Name : getOuterScopeReads(N.getProto()))
    Reads.push_back(std::move(Name));
  for (size_t I = 0; I != Reads.size(); ++I)
    if (N.getImporter().lookupSequence(Reads[I])) {
      N.error("is kept as Opaque" +
              (Reason.empty() ? std::string() : " (" + Reason.str() + ")") +
              (I < NumInputs ? ", and its input '" : ", and its body reads '") +
              Reads[I] +
              "', a sequence, which autopar holds only as its tensors; an "
              "Opaque node cannot take it");
      return failure();
    }
  // ONNX's own shape inference types an op it has a schema for (given the
  // types autopar found for the inputs); the model's declarations fill in
  // what it leaves unknown, and type the ops of other domains.
  std::vector<std::optional<TensorType>> Inferred;
  std::string Rejected;
  if (hasOnnxSchema(N.getProto().domain(), N.getOpType(),
                    N.getOpsetVersion())) {
    Expected<std::vector<std::optional<TensorType>>> Types =
        N.inferTypesWithOnnx();
    if (Types)
      Inferred = std::move(*Types);
    else
      Rejected = toString(Types.takeError());
  }
  for (unsigned I = 0, E = N.getNumOutputs(); I != E; ++I) {
    StringRef Out = N.getOutputName(I);
    if (Out.empty() || N.getDeclaredType(Out) ||
        (I < Inferred.size() && Inferred[I]))
      continue;
    if (!Rejected.empty())
      N.error("op '" + N.getOpType() + "' is not known to autopar, and " +
              Rejected);
    else
      N.error("op '" + N.getOpType() +
              "' (or this form of it) is not supported, so it is kept as "
              "Opaque, and neither ONNX's shape inference nor the model "
              "gives the type of its output '" +
              Out + "'; add that type to the model's value_info");
    return failure();
  }
  if (!Rejected.empty())
    N.warning("using the types the model declares, as " + Rejected);
  // Graph attributes (a Loop's body, an If's branches) have no IR form;
  // the warning about the Opaque node says what is not imported.
  SmallVector<StringRef, 2> Graphs;
  for (const onnx::AttributeProto &A : N.getProto().attribute())
    if (A.type() == onnx::AttributeProto::GRAPH ||
        A.type() == onnx::AttributeProto::GRAPHS)
      Graphs.push_back(A.name());
  std::optional<AttrDict> Attrs = N.convertAttrs(OpId::Opaque, Graphs);
  if (!Attrs)
    return failure();
  Attrs->set("op_type", Attribute::getString(N.getOpType()));
  if (!N.getProto().domain().empty())
    Attrs->set("domain", Attribute::getString(N.getProto().domain()));
  // What its graph attributes read from this graph are operands too, after
  // its own inputs (`outer_reads` counts them), so that the data flow shows.
  SmallVector<Value *, 4> Operands = getInputs(N);
  int64_t OuterReads = 0;
  for (const std::string &Name : getOuterScopeReads(N.getProto()))
    if (Value *V = N.lookupValue(Name); V && !is_contained(Operands, V)) {
      Operands.push_back(V);
      ++OuterReads;
    }
  if (OuterReads)
    Attrs->set("outer_reads", Attribute::getInt(OuterReads));
  for (const auto &[Name, Value] : Extra)
    Attrs->set(Name, Value);
  Node *Created = N.createNodeForOutputs(OpId::Opaque, Operands,
                                         std::move(*Attrs), Inferred);
  if (!Created)
    return failure();
  N.noteOpaque(any_of(Inferred, [](const auto &T) { return T.has_value(); }),
               Reason, getForwardFlops(*Created).has_value());
  return success();
}

static LogicalResult importOpaque(NodeImporter &N) { return keepOpaque(N, ""); }

/// If with a condition autopar knows (a constant, or shape arithmetic such
/// as `x.size(1) > 1` once the dimensions are bound) is the branch it takes,
/// inlined; otherwise it stays Opaque, typed by ONNX's inference.
static LogicalResult importIf(NodeImporter &N) {
  std::optional<int64_t> Known = getKnownScalar(N.getInput(0));
  if (!Known) {
    // Priced as its costlier branch (an upper bound).
    std::string Why = "its condition is not known at import; a --dim "
                      "binding may make it known";
    std::optional<BodyWork> Work;
    for (StringRef Branch : {"then_branch", "else_branch"}) {
      const onnx::AttributeProto *A = N.getAttr(Branch);
      std::optional<BodyWork> W =
          A && A->has_g() ? measureBody(N, A->g(), {}) : std::nullopt;
      if (!W || !W->Static)
        return keepOpaqueRunning(N, Why, W, 1, "");
      if (!Work || *Work < *W)
        Work = W;
    }
    return keepOpaqueRunning(N, Why, Work, 1, "as its costlier branch");
  }
  return N.inlineGraphAttr(*Known ? "then_branch" : "else_branch");
}

static LogicalResult importCast(NodeImporter &N) {
  std::optional<int64_t> To = N.getIntAttr("to");
  if (!To) {
    N.error("attribute 'to' is missing or not an int");
    return failure();
  }
  std::optional<ElementType> Elem = getElementTypeFromOnnx(*To);
  if (!Elem) {
    N.error("casting to " + getOnnxDataTypeName(*To) + " is not supported");
    return failure();
  }
  std::optional<AttrDict> Attrs = N.convertAttrs(OpId::Cast, {"to"});
  if (!Attrs)
    return failure();
  Attrs->set("to", Attribute::getString(getElementTypeName(*Elem)));
  return success(
      N.createNodeForOutputs(OpId::Cast, getInputs(N), std::move(*Attrs)));
}

/// PyTorch's exporter deduplicates initializers with equal values and
/// re-creates each trainable tensor as an Identity of the survivor: such an
/// output is a parameter of its own (same type, same initial data).
static LogicalResult importIdentity(NodeImporter &N) {
  if (const std::vector<Value *> *Seq = N.getInputSequence(0)) {
    N.bindOutputSequence(0, *Seq);
    return success();
  }
  Value *In = N.getInput(0);
  if (!In || !In->isParam())
    return importDirect<OpId::Identity>(N);
  Value *P = N.bindOutputToParameter(0, In->getType());
  P->setWeightSource(In->getWeightSource());
  return success();
}

/// Dropout below opset 12 had its ratio as an attribute and an is_test flag;
/// neither matters for planning.
static LogicalResult importDropout(NodeImporter &N) {
  std::optional<AttrDict> Attrs =
      N.convertAttrs(OpId::Dropout, {"ratio", "is_test"});
  if (!Attrs)
    return failure();
  return success(
      N.createNodeForOutputs(OpId::Dropout, getInputs(N), std::move(*Attrs)));
}

/// Below opset 13, Softmax and LogSoftmax flatten the input to 2-D at `axis`
/// (default 1) and normalize each row; from 13 they normalize along `axis`
/// (default -1). The two agree when axis is the last dimension.
template <OpId Op> static LogicalResult importSoftmax(NodeImporter &N) {
  if (N.getOpsetVersion() >= 13)
    return importDirect<Op>(N);
  Value *X = N.getInput(0);
  if (!requireInputs(N, 1))
    return failure();
  int64_t Rank = X->getType().getRank();
  int64_t Axis = N.getIntAttr("axis").value_or(1);
  if (Axis < 0)
    Axis += Rank;
  if (Axis < 0 || Axis >= std::max<int64_t>(Rank, 1)) {
    N.error("axis " + Twine(Axis) + " is out of range for rank " + Twine(Rank));
    return failure();
  }
  AttrDict SoftmaxAttrs;
  SoftmaxAttrs.set("axis", Attribute::getInt(-1));
  if (Axis == Rank - 1 || Rank == 0)
    return success(N.createNodeForOutputs(Op, {X}, std::move(SoftmaxAttrs)));
  AttrDict FlattenAttrs;
  FlattenAttrs.set("axis", Attribute::getInt(Axis));
  Node *Flat = N.createNode(OpId::Flatten, {X}, std::move(FlattenAttrs),
                            {N.makeName("flat")});
  if (!Flat)
    return failure();
  Node *Norm = N.createNode(Op, {Flat->getResult(0)}, std::move(SoftmaxAttrs),
                            {N.makeName("rows")});
  if (!Norm)
    return failure();
  Node *Shape =
      N.createNode(OpId::Shape, {X}, AttrDict(), {N.makeName("shape")});
  if (!Shape)
    return failure();
  Node *Out =
      N.createNode(OpId::Reshape, {Norm->getResult(0), Shape->getResult(0)},
                   AttrDict(), {N.getOutputName(0).str()});
  if (!Out)
    return failure();
  N.bindOutput(0, Out->getResult(0));
  return success();
}

/// Clip's bounds were float attributes (no bound when absent) below opset
/// 11; they are scalar inputs of the input's type since.
static LogicalResult importClip(NodeImporter &N) {
  if (N.getOpsetVersion() >= 11)
    return importDirect<OpId::Clip>(N);
  if (!requireInputs(N, 1))
    return failure();
  Value *X = N.getInput(0);
  ElementType Ty = X->getType().getElementType();
  if (!isFloatElementType(Ty)) {
    N.error("input must be floating-point below opset 11, got " +
            X->getType().str());
    return failure();
  }
  SmallVector<Value *, 3> Inputs = {X, nullptr, nullptr};
  for (unsigned I : {1u, 2u}) {
    const onnx::AttributeProto *A = N.getAttr(I == 1 ? "min" : "max");
    if (!A)
      continue;
    if (A->type() != onnx::AttributeProto::FLOAT) {
      N.error("attribute '" + A->name() + "' must be a float");
      return failure();
    }
    Inputs[I] = N.createFloatScalar(Ty, A->f());
  }
  while (Inputs.size() > 1 && !Inputs.back())
    Inputs.pop_back();
  return success(N.createNodeForOutputs(OpId::Clip, Inputs, AttrDict()));
}

/// Swish (opset 24) is x * sigmoid(alpha * x): Silu when alpha is 1.
static LogicalResult importSwish(NodeImporter &N) {
  if (!requireInputs(N, 1))
    return failure();
  Value *X = N.getInput(0);
  double Alpha = 1.0;
  if (const onnx::AttributeProto *A = N.getAttr("alpha")) {
    if (A->type() != onnx::AttributeProto::FLOAT) {
      N.error("attribute 'alpha' must be a float");
      return failure();
    }
    Alpha = A->f();
  }
  if (Alpha == 1.0)
    return success(N.createNodeForOutputs(OpId::Silu, {X}, AttrDict()));
  if (!isFloatElementType(X->getType().getElementType())) {
    N.error("input must be floating-point, got " + X->getType().str());
    return failure();
  }
  Value *Scale = N.createFloatScalar(X->getType().getElementType(), Alpha);
  Node *Scaled =
      N.createNode(OpId::Mul, {X, Scale}, AttrDict(), {N.makeName("scaled")});
  if (!Scaled)
    return failure();
  Node *Gate = N.createNode(OpId::Sigmoid, {Scaled->getResult(0)}, AttrDict(),
                            {N.makeName("gate")});
  if (!Gate)
    return failure();
  return success(
      N.createNodeForOutputs(OpId::Mul, {X, Gate->getResult(0)}, AttrDict()));
}

/// An int-list attribute moved to a constant input in a later opset.
static std::optional<std::vector<int64_t>> getIntsAttr(NodeImporter &N,
                                                       StringRef Name) {
  const onnx::AttributeProto *A = N.getAttr(Name);
  if (!A || A->type() != onnx::AttributeProto::INTS)
    return std::nullopt;
  return std::vector<int64_t>(A->ints().begin(), A->ints().end());
}

/// Split's sizes were an attribute below opset 13.
static LogicalResult importSplit(NodeImporter &N) {
  SmallVector<Value *, 4> Inputs = getInputs(N);
  if (N.getOpsetVersion() < 13)
    if (std::optional<std::vector<int64_t>> Sizes = getIntsAttr(N, "split")) {
      Inputs.resize(1);
      Inputs.push_back(N.createI64Constant(*Sizes));
    }
  std::optional<AttrDict> Attrs = N.convertAttrs(OpId::Split, {"split"});
  if (!Attrs)
    return failure();
  return success(
      N.createNodeForOutputs(OpId::Split, Inputs, std::move(*Attrs)));
}

/// Slice's starts, ends and axes were attributes below opset 10.
static LogicalResult importSlice(NodeImporter &N) {
  if (N.getOpsetVersion() >= 10)
    return importDirect<OpId::Slice>(N);
  std::optional<std::vector<int64_t>> Starts = getIntsAttr(N, "starts");
  std::optional<std::vector<int64_t>> Ends = getIntsAttr(N, "ends");
  if (!Starts || !Ends || !requireInputs(N, 1)) {
    N.error("'starts' and 'ends' are required below opset 10");
    return failure();
  }
  SmallVector<Value *, 4> Inputs = {N.getInput(0), N.createI64Constant(*Starts),
                                    N.createI64Constant(*Ends)};
  if (std::optional<std::vector<int64_t>> Axes = getIntsAttr(N, "axes"))
    Inputs.push_back(N.createI64Constant(*Axes));
  return success(N.createNodeForOutputs(OpId::Slice, Inputs, AttrDict()));
}

/// TopK's k was an attribute below opset 10.
static LogicalResult importTopK(NodeImporter &N) {
  SmallVector<Value *, 4> Inputs = getInputs(N);
  if (N.getOpsetVersion() < 10) {
    std::optional<int64_t> K = N.getIntAttr("k");
    if (!K) {
      N.error("attribute 'k' is required below opset 10");
      return failure();
    }
    Inputs.resize(1);
    Inputs.push_back(N.createI64Constant({*K}));
  }
  std::optional<AttrDict> Attrs = N.convertAttrs(OpId::TopK, {"k"});
  if (!Attrs)
    return failure();
  return success(N.createNodeForOutputs(OpId::TopK, Inputs, std::move(*Attrs)));
}

/// Older BatchNormalization had spatial/is_test flags and, in training mode,
/// two more outputs (saved mean and variance) that inference graphs never
/// use.
static LogicalResult importBatchNormalization(NodeImporter &N) {
  for (unsigned I = 3; I < N.getNumOutputs(); ++I)
    if (!N.getOutputName(I).empty()) {
      N.error("output #" + Twine(I) +
              " (training-mode saved statistics before opset 14) is not "
              "supported");
      return failure();
    }
  // spatial = 0 (before opset 9) normalizes per element, not per channel.
  if (N.getIntAttr("spatial").value_or(1) != 1) {
    N.error("spatial = 0 (per-element statistics) is not supported");
    return failure();
  }
  std::optional<AttrDict> Attrs = N.convertAttrs(
      OpId::BatchNormalization, {"spatial", "is_test", "consumed_inputs"});
  if (!Attrs)
    return failure();
  return success(N.createNodeForOutputs(OpId::BatchNormalization, getInputs(N),
                                        std::move(*Attrs)));
}

/// Constant holds its value in one of several attributes. A large
/// floating-point value is a weight (some converters store weights so) and
/// becomes a parameter whose data stays in the model.
static LogicalResult importConstant(NodeImporter &N) {
  if (N.getProto().attribute_size() != 1) {
    N.error("expects exactly one value attribute");
    return failure();
  }
  const onnx::AttributeProto &A = N.getProto().attribute(0);
  std::optional<DenseTensor> Value;
  StringRef Name = A.name();
  if (Name == "value") {
    Expected<TensorType> Type = getInitializerType(A.t());
    if (!Type) {
      N.error("'value': " + toString(Type.takeError()));
      return failure();
    }
    if (isFloatElementType(Type->getElementType()) &&
        *Type->getStaticNumElements() > MaxFoldedElements)
      return success(N.bindOutputToParameter(0, *Type));
    Expected<DenseTensor> Data = readInlineTensor(A.t(), *Type);
    if (!Data) {
      N.error("'value': " + toString(Data.takeError()));
      return failure();
    }
    Value = std::move(*Data);
  } else if (Name == "value_float") {
    Value = DenseTensor(TensorType::get(ElementType::F32, {}),
                        std::vector<double>{A.f()});
  } else if (Name == "value_floats") {
    Value = DenseTensor(
        TensorType::get(ElementType::F32, {int64_t(A.floats_size())}),
        std::vector<double>(A.floats().begin(), A.floats().end()));
  } else if (Name == "value_int") {
    Value = DenseTensor(TensorType::get(ElementType::I64, {}),
                        std::vector<int64_t>{A.i()});
  } else if (Name == "value_ints") {
    Value =
        DenseTensor(TensorType::get(ElementType::I64, {int64_t(A.ints_size())}),
                    std::vector<int64_t>(A.ints().begin(), A.ints().end()));
  } else {
    N.error("constants given as '" + Name + "' are not supported");
    return failure();
  }
  AttrDict Attrs;
  Attrs.set("value", Attribute::getTensor(std::move(*Value)));
  return success(N.createNodeForOutputs(OpId::Constant, {}, std::move(Attrs)));
}

/// ONNX's weightless "light" models hold each weight as a ConstantOfShape
/// of a constant shape: a large floating-point one is a parameter.
static LogicalResult importConstantOfShape(NodeImporter &N) {
  const DenseTensor *Shape =
      N.getInput(0) ? getConstantValue(N.getInput(0)) : nullptr;
  const onnx::AttributeProto *Fill = N.getAttr("value");
  int32_t DataType = Fill ? Fill->t().data_type() : onnx::TensorProto::FLOAT;
  std::optional<ElementType> Elem = getElementTypeFromOnnx(DataType);
  if (Shape && !Shape->isFloat() && Elem && isFloatElementType(*Elem)) {
    SmallVector<Dim, 4> Dims;
    for (int64_t D : Shape->getInts())
      Dims.push_back(D >= 0 ? Dim::get(D) : Dim());
    TensorType Type(*Elem, Dims);
    std::optional<int64_t> Count = Type.getStaticNumElements();
    if (Count && *Count > MaxFoldedElements)
      return success(N.bindOutputToParameter(0, Type));
  }
  return importDirect<OpId::ConstantOfShape>(N);
}

/// Copies float attribute Name of the ONNX node into Attrs, if it has one.
static void copyFloatAttr(NodeImporter &N, StringRef Name, AttrDict &Attrs) {
  const onnx::AttributeProto *A = N.getAttr(Name);
  if (!A || A->type() != onnx::AttributeProto::FLOAT)
    return;
  if (Expected<Attribute> Converted = convertAttribute(*A))
    Attrs.set(Name, *Converted);
  else
    consumeError(Converted.takeError());
}

//===----------------------------------------------------------------------===//
// Padding, casts, losses and normalizations
//===----------------------------------------------------------------------===//

/// Pad's pads (and its constant value, 0 when absent) were attributes below
/// opset 11.
static LogicalResult importPad(NodeImporter &N) {
  if (N.getOpsetVersion() >= 11)
    return importDirect<OpId::Pad>(N);
  std::optional<std::vector<int64_t>> Pads = getIntsAttr(N, "pads");
  if (!Pads || !requireInputs(N, 1)) {
    N.error("attribute 'pads' is required below opset 11");
    return failure();
  }
  Value *X = N.getInput(0);
  ElementType Ty = X->getType().getElementType();
  SmallVector<Value *, 3> Inputs = {X, N.createI64Constant(*Pads)};
  if (const onnx::AttributeProto *V = N.getAttr("value"); V && V->f() != 0.0) {
    if (!isFloatElementType(Ty)) {
      N.error("input must be floating-point below opset 11, got " +
              X->getType().str());
      return failure();
    }
    Inputs.push_back(N.createFloatScalar(Ty, V->f()));
  }
  std::optional<AttrDict> Attrs = N.convertAttrs(OpId::Pad, {"pads", "value"});
  if (!Attrs)
    return failure();
  return success(N.createNodeForOutputs(OpId::Pad, Inputs, std::move(*Attrs)));
}

/// CastLike is Cast to the second input's element type.
static LogicalResult importCastLike(NodeImporter &N) {
  if (!requireInputs(N, 2))
    return failure();
  std::optional<AttrDict> Attrs = N.convertAttrs(OpId::Cast, {"to"});
  if (!Attrs)
    return failure();
  ElementType To = N.getInput(1)->getType().getElementType();
  Attrs->set("to", Attribute::getString(getElementTypeName(To)));
  return success(
      N.createNodeForOutputs(OpId::Cast, {N.getInput(0)}, std::move(*Attrs)));
}

/// EyeLike's dtype is an ONNX data type number.
static LogicalResult importEyeLike(NodeImporter &N) {
  std::optional<AttrDict> Attrs = N.convertAttrs(OpId::EyeLike, {"dtype"});
  if (!Attrs)
    return failure();
  if (std::optional<int64_t> DType = N.getIntAttr("dtype")) {
    std::optional<ElementType> Elem = getElementTypeFromOnnx(*DType);
    if (!Elem) {
      N.error("dtype " + getOnnxDataTypeName(*DType) + " is not supported");
      return failure();
    }
    Attrs->set("dtype", Attribute::getString(getElementTypeName(*Elem)));
  }
  return success(
      N.createNodeForOutputs(OpId::EyeLike, getInputs(N), std::move(*Attrs)));
}

/// SoftmaxCrossEntropyLoss is NegativeLogLikelihoodLoss of LogSoftmax over
/// the classes (axis 1), as ONNX defines it; log_prob is the LogSoftmax.
static LogicalResult importSoftmaxCrossEntropyLoss(NodeImporter &N) {
  if (!requireInputs(N, 2))
    return failure();
  AttrDict SoftmaxAttrs;
  SoftmaxAttrs.set("axis", Attribute::getInt(1));
  std::string LogProbName = N.getOutputName(1).str();
  if (LogProbName.empty())
    LogProbName = N.makeName("log_prob");
  Node *LogProb = N.createNode(OpId::LogSoftmax, {N.getInput(0)},
                               std::move(SoftmaxAttrs), {LogProbName});
  if (!LogProb)
    return failure();
  std::optional<AttrDict> Attrs =
      N.convertAttrs(OpId::NegativeLogLikelihoodLoss);
  if (!Attrs)
    return failure();
  Node *Loss =
      N.createNode(OpId::NegativeLogLikelihoodLoss,
                   {LogProb->getResult(0), N.getInput(1), N.getInput(2)},
                   std::move(*Attrs), {N.getOutputName(0).str()});
  if (!Loss)
    return failure();
  N.bindOutput(0, Loss->getResult(0));
  if (!N.getOutputName(1).empty())
    N.bindOutput(1, LogProb->getResult(0));
  return success();
}

/// The attributes of a reduction over Axes that keeps them as 1s.
static AttrDict keptAxes(std::vector<int64_t> Axes) {
  AttrDict Attrs;
  Attrs.set("axes", Attribute::getIntList(std::move(Axes)));
  Attrs.set("keepdims", Attribute::getInt(1));
  return Attrs;
}

/// GlobalMaxPool is ReduceMax over the spatial axes.
static LogicalResult importGlobalMaxPool(NodeImporter &N) {
  if (!requireInputs(N, 1))
    return failure();
  Value *X = N.getInput(0);
  int64_t Rank = X->getType().getRank();
  if (Rank < 3) {
    N.error("input must be [N, C, spatial...], got " + X->getType().str());
    return failure();
  }
  std::vector<int64_t> Axes;
  for (int64_t I = 2; I != Rank; ++I)
    Axes.push_back(I);
  return success(
      N.createNodeForOutputs(OpId::ReduceMax, {X}, keptAxes(std::move(Axes))));
}

/// LpNormalization divides by the L1 or L2 norm along `axis`.
static LogicalResult importLpNormalization(NodeImporter &N) {
  if (!requireInputs(N, 1))
    return failure();
  int64_t P = N.getIntAttr("p").value_or(2);
  if (P != 1 && P != 2) {
    N.error("'p' must be 1 or 2, got " + Twine(P));
    return failure();
  }
  Value *X = N.getInput(0);
  Value *Norm =
      createValue(N, P == 1 ? OpId::ReduceL1 : OpId::ReduceL2, {X}, "norm",
                  keptAxes({N.getIntAttr("axis").value_or(-1)}));
  if (!Norm)
    return failure();
  return success(N.createNodeForOutputs(OpId::Div, {X, Norm}, AttrDict()));
}

/// MeanVarianceNormalization is (X - mean) / (std + 1e-9) over `axes`
/// (default [0, 2, 3]), as ONNX defines it.
static LogicalResult importMeanVarianceNormalization(NodeImporter &N) {
  if (!requireInputs(N, 1))
    return failure();
  Value *X = N.getInput(0);
  ElementType Ty = X->getType().getElementType();
  if (!isFloatElementType(Ty)) {
    N.error("input must be floating-point, got " + X->getType().str());
    return failure();
  }
  std::vector<int64_t> Axes =
      getIntsAttr(N, "axes").value_or(std::vector<int64_t>{0, 2, 3});
  // Each step is null once one has failed (and reported).
  Value *Mean = createValue(N, OpId::ReduceMean, {X}, "mean", keptAxes(Axes));
  Value *D = Mean ? createValue(N, OpId::Sub, {X, Mean}, "centered") : nullptr;
  Value *Square = D ? createValue(N, OpId::Mul, {D, D}, "square") : nullptr;
  Value *Var =
      Square ? createValue(N, OpId::ReduceMean, {Square}, "var", keptAxes(Axes))
             : nullptr;
  Value *Std = Var ? createValue(N, OpId::Sqrt, {Var}, "std") : nullptr;
  Value *Denom =
      Std ? createValue(N, OpId::Add, {Std, N.createFloatScalar(Ty, 1e-9)},
                        "denom")
          : nullptr;
  if (!Denom)
    return failure();
  return success(N.createNodeForOutputs(OpId::Div, {D, Denom}, AttrDict()));
}

//===----------------------------------------------------------------------===//
// com.microsoft contrib ops
//===----------------------------------------------------------------------===//

/// Gelu, FastGelu (tanh approximation, optional bias) and BiasGelu (bias
/// added first) are Add + Gelu.
static LogicalResult importMsGelu(NodeImporter &N) {
  if (!requireInputs(N, 1))
    return failure();
  Value *X = N.getInput(0);
  StringRef Op = N.getOpType();
  if (Value *Bias = N.getInput(1)) {
    Node *Sum =
        N.createNode(OpId::Add, {X, Bias}, AttrDict(), {N.makeName("biased")});
    if (!Sum)
      return failure();
    X = Sum->getResult(0);
  } else if (Op == "BiasGelu") {
    N.error("input #1 (bias) is required");
    return failure();
  }
  AttrDict Attrs;
  if (Op == "FastGelu")
    Attrs.set("approximate", Attribute::getString("tanh"));
  return success(N.createNodeForOutputs(OpId::Gelu, {X}, std::move(Attrs)));
}

/// SkipLayerNormalization(input, skip, gamma, beta?, bias?) and
/// SkipSimplifiedLayerNormalization(input, skip, gamma, bias?) normalize
/// input + skip (+ bias); output #3 is that sum.
static LogicalResult importSkipNormalization(NodeImporter &N) {
  bool Simplified = N.getOpType() == "SkipSimplifiedLayerNormalization";
  if (!requireInputs(N, 3))
    return failure();
  Value *Beta = Simplified ? nullptr : N.getInput(3);
  Value *Bias = N.getInput(Simplified ? 3 : 4);
  if ((!N.getOutputName(1).empty() || !N.getOutputName(2).empty()) &&
      Simplified) {
    N.error("the mean and inverse standard deviation outputs are not "
            "supported");
    return failure();
  }
  std::string SumName =
      N.getOutputName(3).empty() ? N.makeName("sum") : N.getOutputName(3).str();
  std::string FirstSum = Bias ? N.makeName("skip_sum") : SumName;
  Node *Sum = N.createNode(OpId::Add, {N.getInput(0), N.getInput(1)},
                           AttrDict(), {FirstSum});
  if (!Sum)
    return failure();
  if (Bias) {
    Sum = N.createNode(OpId::Add, {Sum->getResult(0), Bias}, AttrDict(),
                       {SumName});
    if (!Sum)
      return failure();
  }
  AttrDict Attrs;
  Attrs.set("axis", Attribute::getInt(-1));
  copyFloatAttr(N, "epsilon", Attrs);
  unsigned NumResults = Simplified                    ? 1
                        : !N.getOutputName(2).empty() ? 3
                        : !N.getOutputName(1).empty() ? 2
                                                      : 1;
  SmallVector<std::string, 3> Names;
  for (unsigned I = 0; I != NumResults; ++I)
    Names.push_back(N.getOutputName(I).str());
  Node *Norm = Simplified
                   ? N.createNode(OpId::RMSNormalization,
                                  {Sum->getResult(0), N.getInput(2)},
                                  std::move(Attrs), Names)
                   : N.createNode(OpId::LayerNormalization,
                                  {Sum->getResult(0), N.getInput(2), Beta},
                                  std::move(Attrs), Names);
  if (!Norm)
    return failure();
  for (unsigned I = 0; I != NumResults; ++I)
    N.bindOutput(I, Norm->getResult(I));
  N.bindOutput(3, Sum->getResult(0));
  return success();
}

/// SimplifiedLayerNormalization is RMS normalization.
static LogicalResult importSimplifiedLayerNormalization(NodeImporter &N) {
  if (!N.getOutputName(1).empty()) {
    N.error("the inverse standard deviation output is not supported");
    return failure();
  }
  std::optional<AttrDict> Attrs = N.convertAttrs(OpId::RMSNormalization);
  if (!Attrs)
    return failure();
  SmallVector<Value *, 4> Inputs = getInputs(N);
  return success(N.createNodeForOutputs(OpId::RMSNormalization, Inputs,
                                        std::move(*Attrs)));
}

/// com.microsoft RotaryEmbedding(input, position_ids, cos_cache, sin_cache)
/// is ONNX's RotaryEmbedding(X, cos_cache, sin_cache, position_ids).
static LogicalResult importMsRotaryEmbedding(NodeImporter &N) {
  if (!requireInputs(N, 4))
    return failure();
  if (N.getIntAttr("is_packed_batching").value_or(0) != 0) {
    N.error("packed batching is not supported");
    return failure();
  }
  std::optional<AttrDict> Attrs =
      N.convertAttrs(OpId::RotaryEmbedding, {"scale", "is_packed_batching"});
  if (!Attrs)
    return failure();
  return success(N.createNodeForOutputs(
      OpId::RotaryEmbedding,
      {N.getInput(0), N.getInput(2), N.getInput(3), N.getInput(1)},
      std::move(*Attrs)));
}

/// Adds part Part of 3 of a packed [3 * H] bias to X.
static Value *addBiasPart(NodeImporter &N, Value *X, Value *Bias, int64_t H,
                          int64_t Part) {
  Node *Slice = N.createNode(OpId::Slice,
                             {Bias, N.createI64Constant({Part * H}),
                              N.createI64Constant({(Part + 1) * H})},
                             AttrDict(), {N.makeName("bias")});
  if (!Slice)
    return nullptr;
  Node *Sum = N.createNode(OpId::Add, {X, Slice->getResult(0)}, AttrDict(),
                           {N.makeName("biased")});
  return Sum ? Sum->getResult(0) : nullptr;
}

Value *autopar::createValue(NodeImporter &N, OpId Op,
                            ArrayRef<Value *> Operands, StringRef Suffix,
                            AttrDict Attrs) {
  Node *R = N.createNode(Op, Operands, std::move(Attrs), {N.makeName(Suffix)});
  return R ? R->getResult(0) : nullptr;
}

/// The first `batch` entries of a 1-D key_padding_mask whose length is not
/// K's batch: ONNX Runtime's [3 * batch + 2] form (MASK_1D_KEY_SEQ_LEN_START:
/// the key lengths, then batch + 1 query and batch + 1 key start offsets),
/// shaped [batch]. Null on error.
static Value *sliceKeyLengths(NodeImporter &N, Value *Mask, Value *K) {
  const Dim &Batch = K->getType().getDim(0);
  const Dim &Length = Mask->getType().getDim(0);
  if (Batch.isStatic() && Length.isStatic() &&
      Length.getSize() != 3 * Batch.getSize() + 2) {
    N.error("key_padding_mask has " + Twine(Length.getSize()) +
            " entries; a 1-D mask must have batch (" + Twine(Batch.getSize()) +
            ") or 3 * batch + 2 (" + Twine(3 * Batch.getSize() + 2) +
            ") entries");
    return nullptr;
  }
  // [batch] as a 1-D i64 value: a constant, or Slice(Shape(K), 0, 1).
  Value *End = nullptr;
  if (Batch.isStatic()) {
    End = N.createI64Constant({Batch.getSize()});
  } else {
    Value *Shape = createValue(N, OpId::Shape, {K}, "key_shape");
    End = Shape ? createValue(N, OpId::Slice,
                              {Shape, N.createI64Constant({0}),
                               N.createI64Constant({1})},
                              "batch")
                : nullptr;
  }
  Value *Lengths =
      End ? createValue(N, OpId::Slice, {Mask, N.createI64Constant({0}), End},
                        "key_lengths")
          : nullptr;
  // A slice to a computed end has an unknown length: reshaped to [batch].
  if (Lengths && !(Lengths->getType().getDim(0) == Batch))
    Lengths = createValue(N, OpId::Reshape, {Lengths, End}, "key_lengths");
  return Lengths;
}

/// MultiHeadAttention's key_padding_mask as a bool mask over [batch, 1,
/// q_seq or 1, kv_seq] (keep where true): [batch, kv_seq] (1 keeps, 0 pads)
/// and [batch, q_seq, kv_seq] as they are, [batch] as the valid lengths of
/// right-padded keys, [3 * batch + 2] as its first batch entries (the key
/// lengths; see importMultiHeadAttention). Null on error (diagnosed).
static Value *convertKeyPaddingMask(NodeImporter &N, Value *Mask, Value *K) {
  const TensorType &T = Mask->getType();
  auto ToBool = [&](Value *V) -> Value * {
    AttrDict A;
    A.set("to", Attribute::getString("bool"));
    return createValue(N, OpId::Cast, {V}, "keep", std::move(A));
  };
  Value *Keep = nullptr;
  if (T.getRank() == 2) {
    Keep = ToBool(Mask);
    if (Keep)
      Keep = createValue(N, OpId::Unsqueeze,
                         {Keep, N.createI64Constant({1, 2})}, "keep4d");
  } else if (T.getRank() == 3) {
    Keep = ToBool(Mask);
    if (Keep)
      Keep = createValue(N, OpId::Unsqueeze, {Keep, N.createI64Constant({1})},
                         "keep4d");
  } else if (T.getRank() == 1 && K->getType().getRank() == 3) {
    // keep[b, t] = t < length[b].
    Value *Lengths = T.getDim(0) == K->getType().getDim(0)
                         ? Mask
                         : sliceKeyLengths(N, Mask, K);
    if (!Lengths)
      return nullptr;
    AttrDict ToI64;
    ToI64.set("to", Attribute::getString("i64"));
    Value *Len =
        createValue(N, OpId::Cast, {Lengths}, "lengths", std::move(ToI64));
    Value *Shape =
        Len ? createValue(N, OpId::Shape, {K}, "key_shape") : nullptr;
    AttrDict Axis0;
    Axis0.set("axis", Attribute::getInt(0));
    Value *Seq = Shape ? createValue(N, OpId::Gather,
                                     {Shape, N.createI64Constant({1}, true)},
                                     "key_len", std::move(Axis0))
                       : nullptr;
    Value *Pos = Seq ? createValue(N, OpId::Range,
                                   {N.createI64Constant({0}, true), Seq,
                                    N.createI64Constant({1}, true)},
                                   "positions")
                     : nullptr;
    Value *Col =
        Pos ? createValue(N, OpId::Unsqueeze, {Len, N.createI64Constant({1})},
                          "length_col")
            : nullptr;
    Keep = Col ? createValue(N, OpId::Less, {Pos, Col}, "keep") : nullptr;
    if (Keep)
      Keep = createValue(N, OpId::Unsqueeze,
                         {Keep, N.createI64Constant({1, 2})}, "keep4d");
  } else {
    N.error("key_padding_mask must be 1-D, 2-D or 3-D, got " +
            Twine(T.getRank()) + "-D");
  }
  return Keep;
}

/// Splits a packed [batch, seq, heads, Parts, head_size] tensor on axis 3
/// into Parts tensors of [batch, seq, heads * head_size], named by Names.
static bool splitPacked(NodeImporter &N, Value *Packed,
                        ArrayRef<StringRef> Names,
                        MutableArrayRef<Value *> Out) {
  AttrDict SplitAttrs;
  SplitAttrs.set("axis", Attribute::getInt(3));
  SmallVector<std::string, 3> SplitNames;
  for (StringRef Name : Names)
    SplitNames.push_back(N.makeName(Name));
  Node *Split =
      N.createNode(OpId::Split, {Packed}, std::move(SplitAttrs), SplitNames);
  if (!Split)
    return false;
  for (unsigned I = 0, E = Names.size(); I != E; ++I) {
    Out[I] = createValue(N, OpId::Reshape,
                         {Split->getResult(I), N.createI64Constant({0, 0, -1})},
                         (Names[I] + "3d").str());
    if (!Out[I])
      return false;
  }
  return true;
}

/// MultiHeadAttention is ONNX's Attention on 3-D inputs ([batch, seq,
/// hidden]), as ONNX Runtime's CPU kernel computes it:
/// - Q, K and V 3-D; or packed in the query ([batch, seq, heads, 3,
///   head_size]) or K and V packed in the key ([batch, kv_seq, heads, 2,
///   head_size], no value): split on axis 3 and each merged to 3-D;
/// - K and V already split into heads ([batch, heads, kv_seq, head_size],
///   cross-attention over a projected encoder output): transposed and merged
///   to 3-D. ONNX Runtime takes them as the projections, bias included: of a
///   bias only the query's third is added. A past is concatenated before
///   them, as ONNX Runtime does when the present outputs are asked for;
/// - the [3 * hidden] bias added to Q, K and V (a third each);
/// - key_padding_mask as a bool mask: [batch, kv_seq], [batch, q_seq,
///   kv_seq], [batch] key lengths, or ONNX Runtime's [3 * batch + 2] (key
///   lengths, then query and key start offsets for its fused kernels on
///   unpadded tokens), of which the lengths are all its CPU kernel reads;
/// - the attention bias as a float mask (with a padding mask, the padding
///   becomes 0/-inf and adds to it); past key and value as Attention's.
/// Kept Opaque: a bias or a past with packed K and V (ONNX Runtime refuses
/// both), and past_sequence_length or cache_indirection (a shared past and
/// present buffer, and beam search's data-dependent reordering of it).
static LogicalResult importMultiHeadAttention(NodeImporter &N) {
  std::optional<int64_t> Heads = N.getIntAttr("num_heads");
  Value *Q = N.getInput(0), *K = N.getInput(1), *V = N.getInput(2);
  Value *Bias = N.getInput(3);
  Value *PastK = N.getInput(6), *PastV = N.getInput(7);
  auto KeepOpaque = [&](StringRef Why) {
    N.warning("this form of MultiHeadAttention (" + Why +
              ") is kept as Opaque");
    return lookupOpImporter("", "$Opaque")(N);
  };
  if (!Heads || *Heads <= 0 || !Q)
    return KeepOpaque("no positive num_heads or no query");
  if (N.getInput(8) || N.getInput(9))
    return KeepOpaque("past_sequence_length or cache_indirection");
  // The attention bias is added to the scores: a float tensor (ONNX
  // Runtime's schema says T, the query's type).
  if (Value *AttnBias = N.getInput(5))
    if (!isFloatElementType(AttnBias->getType().getElementType())) {
      N.error("attention_bias must be a float tensor, got " +
              AttnBias->getType().str());
      return failure();
    }
  bool Packed = Q->getType().getRank() == 5 && !K && !V;
  if (Packed) {
    // [batch, seq, heads, 3, head_size]: three [batch, seq, hidden].
    if (!(Q->getType().getDim(3) == Dim::get(3)))
      return KeepOpaque("a packed query whose fourth dimension is not 3");
    Value *Parts[3] = {nullptr, nullptr, nullptr};
    if (!splitPacked(N, Q, {"q", "k", "v"}, Parts))
      return failure();
    Q = Parts[0], K = Parts[1], V = Parts[2];
  }
  if (K && !V && K->getType().getRank() == 5) {
    // Packed K and V, [batch, kv_seq, heads, 2, head_size]: two [batch,
    // kv_seq, hidden].
    const TensorType &P = K->getType();
    if (!(P.getDim(3) == Dim::get(2)) ||
        (P.getDim(2).isStatic() && P.getDim(2).getSize() != *Heads))
      return KeepOpaque("a packed key that is not [batch, kv_seq, num_heads, "
                        "2, head_size]");
    if (Bias || PastK || PastV)
      return KeepOpaque("packed key and value with a bias or a past, which "
                        "ONNX Runtime refuses");
    Value *Parts[2] = {nullptr, nullptr};
    if (!splitPacked(N, K, {"k", "v"}, Parts))
      return failure();
    K = Parts[0], V = Parts[1];
  }
  bool SplitKV = false;
  if (K && V && Q->getType().getRank() == 3 && K->getType().getRank() == 4 &&
      V->getType().getRank() == 4) {
    // K and V already split into heads, [batch, heads, kv_seq, head_size]
    // (cross-attention over a projected encoder output): merged back into
    // [batch, kv_seq, hidden].
    SplitKV = true;
    for (Value **KV : {&K, &V}) {
      AttrDict Perm;
      Perm.set("perm", Attribute::getIntList({0, 2, 1, 3}));
      Value *T = createValue(N, OpId::Transpose, {*KV},
                             KV == &K ? "k_bshd" : "v_bshd", std::move(Perm));
      *KV = T ? createValue(N, OpId::Reshape,
                            {T, N.createI64Constant({0, 0, -1})},
                            KV == &K ? "k3d" : "v3d")
              : nullptr;
      if (!*KV)
        return failure();
    }
  }
  if (!K || !V || Q->getType().getRank() != 3 || K->getType().getRank() != 3 ||
      V->getType().getRank() != 3)
    return KeepOpaque("query, key and value of these ranks");
  bool BiasOk = !Bias || (Bias->getType().getRank() == 1 &&
                          Bias->getType().getDim(0).isStatic() &&
                          Bias->getType().getDim(0).getSize() % 3 == 0);
  if (!BiasOk)
    return KeepOpaque("a bias that is not [3 * hidden]");
  if (Bias) {
    // ONNX Runtime adds no bias to K and V split into heads (its CPU kernel
    // takes them as they are).
    int64_t H = Bias->getType().getDim(0).getSize() / 3;
    Q = addBiasPart(N, Q, Bias, H, 0);
    if (Q && !SplitKV) {
      K = addBiasPart(N, K, Bias, H, 1);
      V = K ? addBiasPart(N, V, Bias, H, 2) : nullptr;
    }
    if (!Q || !K || !V)
      return failure();
  }
  Value *Mask = N.getInput(5);
  if (Value *Padding = N.getInput(4)) {
    Value *Keep = convertKeyPaddingMask(N, Padding, K);
    if (!Keep)
      return failure();
    if (Mask) {
      // keep ? 0 : -inf, added to the attention bias.
      ElementType Ty = Mask->getType().getElementType();
      Value *Zero = N.createFloatScalar(Ty, 0.0);
      Value *NegInf =
          N.createFloatScalar(Ty, -std::numeric_limits<double>::infinity());
      Value *Additive =
          createValue(N, OpId::Where, {Keep, Zero, NegInf}, "padding_bias");
      Mask = Additive ? createValue(N, OpId::Add, {Mask, Additive}, "mask")
                      : nullptr;
      if (!Mask)
        return failure();
    } else {
      Mask = Keep;
    }
  }
  AttrDict Attrs;
  Attrs.set("q_num_heads", Attribute::getInt(*Heads));
  Attrs.set("kv_num_heads", Attribute::getInt(*Heads));
  if (N.getIntAttr("unidirectional").value_or(0))
    Attrs.set("is_causal", Attribute::getInt(1));
  copyFloatAttr(N, "scale", Attrs);
  return success(N.createNodeForOutputs(
      OpId::Attention, {Q, K, V, Mask, PastK, PastV}, std::move(Attrs)));
}

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

OpImportFn autopar::lookupOpImporter(StringRef Domain, StringRef OpType) {
  static const StringMap<OpImportFn> Table = [] {
    StringMap<OpImportFn> T;
#define ONNX_OP(Domain, OpType, Importer)                                      \
  T[std::string(Domain) + "::" + OpType] = Importer;
#include "frontend/OnnxOps.def"
    return T;
  }();
  return Table.lookup((Domain + "::" + OpType).str());
}
