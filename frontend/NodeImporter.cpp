//===- NodeImporter.cpp - What an op importer sees ------------------------===//

#include "frontend/NodeImporter.h"
#include "frontend/GraphImporter.h"
#include "frontend/OnnxShapeInference.h"
#include "frontend/OnnxTypes.h"

#include "ir/ShapeValues.h"

#include "ir/Verifier.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/StringSet.h"

using namespace autopar;
using namespace llvm;

StringRef NodeImporter::getOpType() const { return Proto.op_type(); }

StringRef NodeImporter::getDisplayName() const {
  if (!Proto.name().empty() || Proto.output_size() == 0)
    return Proto.name();
  return Proto.output(0);
}

unsigned NodeImporter::getNumInputs() const { return Proto.input_size(); }

Value *NodeImporter::getInput(unsigned I) const {
  if (I >= unsigned(Proto.input_size()) || Proto.input(I).empty())
    return nullptr;
  return Parent.lookup(Proto.input(I));
}

const std::vector<Value *> *NodeImporter::getInputSequence(unsigned I) const {
  if (I >= unsigned(Proto.input_size()) || Proto.input(I).empty())
    return nullptr;
  return Parent.lookupSequence(Proto.input(I));
}

Value *NodeImporter::lookupValue(StringRef OnnxName) const {
  return Parent.lookup(OnnxName);
}

unsigned NodeImporter::getNumOutputs() const { return Proto.output_size(); }

StringRef NodeImporter::getOutputName(unsigned I) const {
  return I < unsigned(Proto.output_size()) ? StringRef(Proto.output(I))
                                           : StringRef();
}

const TensorType *NodeImporter::getDeclaredType(StringRef OnnxName) const {
  return Parent.getDeclaredType(OnnxName);
}

const onnx::AttributeProto *NodeImporter::getAttr(StringRef Name) const {
  for (const onnx::AttributeProto &A : Proto.attribute())
    if (A.name() == Name)
      return &A;
  return nullptr;
}

std::optional<int64_t> NodeImporter::getIntAttr(StringRef Name) const {
  const onnx::AttributeProto *A = getAttr(Name);
  if (!A || A->type() != onnx::AttributeProto::INT)
    return std::nullopt;
  return A->i();
}

std::optional<AttrDict> NodeImporter::convertAttrs(OpId Op,
                                                   ArrayRef<StringRef> Ignore) {
  const OpInfo &Info = getOpInfo(Op);
  AttrDict Attrs;
  for (const onnx::AttributeProto &A : Proto.attribute()) {
    if (A.name().empty()) {
      warning("an attribute without a name is dropped");
      continue;
    }
    if (is_contained(Ignore, StringRef(A.name())))
      continue;
    const AttrSpec *Spec = Info.lookupAttr(A.name());
    if (!Spec && !Info.allowsOtherAttrs()) {
      warning("attribute '" + A.name() + "' is not used by autopar's " +
              Info.Name + "; dropped");
      continue;
    }
    Expected<Attribute> Converted = convertAttribute(A);
    if (!Converted) {
      if (!Spec) {
        warning(toString(Converted.takeError()) + "; dropped");
        continue;
      }
      error(toString(Converted.takeError()));
      return std::nullopt;
    }
    if (Spec && Spec->Kind == Attribute::Kind::Float &&
        Converted->isa(Attribute::Kind::Int))
      *Converted = Attribute::getFloat(double(Converted->getInt()));
    if (Spec && !Spec->accepts(*Converted)) {
      error("attribute '" + A.name() + "' must be " +
            getAttributeKindName(Spec->Kind) + ", got " +
            getAttributeKindName(Converted->getKind()));
      return std::nullopt;
    }
    Attrs.set(A.name(), std::move(*Converted));
  }
  return Attrs;
}

Node *NodeImporter::createNode(OpId Op, ArrayRef<Value *> Operands,
                               AttrDict Attrs,
                               ArrayRef<std::string> ResultNames,
                               ArrayRef<std::optional<TensorType>> Hints) {
  Graph &G = Parent.getGraph();
  // Placeholder result types until the shape function has spoken.
  SmallVector<TensorType, 2> Placeholders;
  SmallVector<std::string, 2> Names;
  for (const std::string &Name : ResultNames) {
    const TensorType *Declared =
        Name.empty() ? nullptr : Parent.getDeclaredType(Name);
    unsigned I = Placeholders.size();
    if (I < Hints.size() && Hints[I])
      Declared = &*Hints[I];
    Placeholders.push_back(Declared ? *Declared : TensorType());
    // A used name is a body's, imported once per iteration: numbered.
    Names.push_back(Name.empty()         ? makeName("out")
                    : G.isNameUsed(Name) ? Parent.makeFreshName(Name)
                                         : Name);
  }
  Node *N = G.createNode(Op, Operands, Placeholders, std::move(Attrs), Names);
  N->setName(Proto.name());
  bool Failed = false;
  std::optional<SmallVector<TensorType, 1>> Inferred =
      inferNodeResultTypes(*N, [&](const Twine &Msg) {
        error(Msg);
        Failed = true;
      });
  if (!Inferred || Failed)
    return nullptr;
  for (unsigned I = 0, E = N->getNumResults(); I != E; ++I) {
    TensorType Type = (*Inferred)[I];
    if (const TensorType *Declared = Parent.getDeclaredType(ResultNames[I])) {
      if (!isCompatible(*Declared, Type)) {
        warning("the model declares '" + ResultNames[I] + "' as " +
                Declared->str() + " but inference gives " + Type.str() +
                "; using inference");
      } else {
        // Inference wins; the declaration fills in what it leaves unknown.
        SmallVector<Dim, 4> Shape(Type.getShape().begin(),
                                  Type.getShape().end());
        for (unsigned D = 0, R = Shape.size(); D != R; ++D)
          if (Shape[D].isUnknown())
            Shape[D] = Declared->getDim(D);
        Type = TensorType(Type.getElementType(), Shape);
      }
    }
    N->getResult(I)->setType(Type);
  }
  return N;
}

Node *
NodeImporter::createNodeForOutputs(OpId Op, ArrayRef<Value *> Operands,
                                   AttrDict Attrs,
                                   ArrayRef<std::optional<TensorType>> Hints) {
  // Outputs the node does not produce are left out when trailing.
  unsigned NumResults = getNumOutputs();
  while (NumResults != 0 && getOutputName(NumResults - 1).empty())
    --NumResults;
  SmallVector<std::string, 2> Names;
  for (unsigned I = 0; I != NumResults; ++I)
    Names.push_back(getOutputName(I).str());
  Node *N = createNode(Op, Operands, std::move(Attrs), Names, Hints);
  if (!N)
    return nullptr;
  for (unsigned I = 0; I != NumResults; ++I)
    if (!getOutputName(I).empty())
      bindOutput(I, N->getResult(I));
  return N;
}

Value *NodeImporter::createConstant(DenseTensor Data) {
  TensorType Type = Data.getType();
  AttrDict Attrs;
  Attrs.set("value", Attribute::getTensor(std::move(Data)));
  Node *N = Parent.getGraph().createNode(OpId::Constant, {}, {Type},
                                         std::move(Attrs), {makeName("const")});
  N->setName(Proto.name());
  return N->getResult(0);
}

Value *NodeImporter::createI64Constant(ArrayRef<int64_t> Values, bool Scalar) {
  TensorType Type =
      Scalar ? TensorType::get(ElementType::I64, {})
             : TensorType::get(ElementType::I64, {int64_t(Values.size())});
  return createConstant(
      DenseTensor(Type, std::vector<int64_t>(Values.begin(), Values.end())));
}

Value *NodeImporter::createBoolScalar(bool V) {
  return createConstant(DenseTensor(TensorType::get(ElementType::Bool, {}),
                                    std::vector<int64_t>{V ? 1 : 0}));
}

Value *NodeImporter::createFloatScalar(ElementType Ty, double V) {
  // Held as the element type holds it (an f32 attribute of an f16 Clip's
  // bound), so that the text form reads back the same value.
  return createConstant(DenseTensor(
      TensorType::get(Ty, {}), std::vector<double>{roundToElementType(V, Ty)}));
}

std::string NodeImporter::makeName(StringRef Suffix) {
  StringRef Base = Proto.output_size() ? StringRef(Proto.output(0))
                                       : StringRef(Proto.name());
  if (Base.empty())
    Base = Proto.op_type();
  return Parent.makeFreshName((Base + "." + Suffix).str());
}

void NodeImporter::bindOutput(unsigned I, Value *V) {
  if (!getOutputName(I).empty())
    Parent.bind(getOutputName(I), V);
}

void NodeImporter::bindOutputSequence(unsigned I,
                                      std::vector<Value *> Elements) {
  if (!getOutputName(I).empty())
    Parent.bindSequence(getOutputName(I), std::move(Elements));
}

Value *NodeImporter::bindOutputToParameter(unsigned I, const TensorType &Type) {
  std::string Name = getOutputName(I).str();
  Graph &G = Parent.getGraph();
  if (Name.empty() || G.isNameUsed(Name))
    Name = Parent.makeFreshName(Name.empty() ? makeName("param") : Name);
  Value *P = G.addParam(Name, Type);
  if (!getOutputName(I).empty())
    Parent.bind(getOutputName(I), P);
  return P;
}

void NodeImporter::error(const Twine &Message) {
  Parent.getDiag().nodeError(getDisplayName(), getOpType(), Message);
}

void NodeImporter::warning(const Twine &Message) {
  // A body unrolled again warned the first time.
  if (Parent.isRepeatingBody())
    return;
  Parent.getDiag().nodeWarning(getDisplayName(), getOpType(), Message);
}

/// What ONNX's inference is told of V: its type, and its value when it is a
/// constant, a small parameter held inline, or a shape computation autopar
/// followed to integers.
static OnnxInferenceInput describeForOnnx(StringRef Name, const Value &V,
                                          GraphImporter &Parent) {
  OnnxInferenceInput In{Name.str(), V.getType(), std::nullopt};
  if (V.isParam()) {
    In.Data = Parent.getSmallInitializerData(Name);
    return In;
  }
  if (const Node *Def = V.getDefiningNode())
    if (Def->getOp() == OpId::Constant)
      if (const Attribute *A = Def->getAttr("value"))
        if (A->isa(Attribute::Kind::Tensor)) {
          In.Data = A->getTensor();
          return In;
        }
  if (isFloatElementType(V.getType().getElementType()))
    return In;
  std::optional<ShapeValue> Entries = evaluateShapeValue(&V);
  if (!Entries)
    return In;
  std::vector<int64_t> Ints;
  for (const ShapeEntry &E : *Entries) {
    if (!E.Int)
      return In;
    Ints.push_back(*E.Int);
  }
  if (V.getType().getStaticNumElements() == int64_t(Ints.size()))
    In.Data = DenseTensor(V.getType(), std::move(Ints));
  return In;
}

Expected<std::vector<std::optional<TensorType>>>
NodeImporter::inferTypesWithOnnx() {
  std::vector<OnnxInferenceInput> Inputs;
  StringSet<> Seen;
  auto Add = [&](StringRef Name) {
    if (Name.empty() || !Seen.insert(Name).second)
      return;
    if (Value *V = Parent.lookup(Name))
      Inputs.push_back(describeForOnnx(Name, *V, Parent));
  };
  for (const std::string &In : Proto.input())
    Add(In);
  for (const std::string &In : getOuterScopeReads(Proto))
    Add(In);
  return autopar::inferTypesWithOnnx(Proto, Inputs, Parent.getOpsetImports());
}

LogicalResult NodeImporter::inlineGraphAttr(StringRef Name) {
  const onnx::AttributeProto *A = getAttr(Name);
  if (!A || !A->has_g()) {
    error("attribute '" + Name + "' is missing or not a graph");
    return failure();
  }
  std::vector<std::string> Results(Proto.output().begin(),
                                   Proto.output().end());
  return Parent.importInlineGraph(A->g(), Results, getDisplayName());
}

void NodeImporter::noteOpaque(bool TypedByOnnx, StringRef Reason,
                              bool HasFlops) {
  Parent.noteOpaque(Proto, getDisplayName(), TypedByOnnx, Reason, HasFlops);
}
