//===- OpRegistry.cpp - The op table and annotation table -----------------===//

#include "ir/OpRegistry.h"
#include "ir/Folders.h"
#include "ir/Graph.h"
#include "ir/ShapeFunctions.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/ErrorHandling.h"

#include <cassert>

using namespace autopar;
using namespace llvm;

static const OpInfo OpTable[] = {
#define OP(Name, MinOps, MaxOps, MinRes, MaxRes, Attrs, Verify, Infer, Fold)   \
  {#Name, MinOps, MaxOps, MinRes, MaxRes, Attrs, Verify, Infer, Fold},
#include "ir/Ops.def"
};

const OpInfo &autopar::getOpInfo(OpId Op) {
  return OpTable[static_cast<unsigned>(Op)];
}

ArrayRef<OpInfo> autopar::getAllOps() { return OpTable; }

std::optional<OpId> autopar::lookupOp(StringRef Name) {
  static const StringMap<OpId> ByName = [] {
    StringMap<OpId> M;
    for (unsigned I = 0; I != std::size(OpTable); ++I)
      M[OpTable[I].Name] = static_cast<OpId>(I);
    return M;
  }();
  auto It = ByName.find(Name);
  if (It == ByName.end())
    return std::nullopt;
  return It->second;
}

static Attribute::Kind parseSchemaKind(StringRef Kind) {
  if (Kind == "int")
    return Attribute::Kind::Int;
  if (Kind == "float")
    return Attribute::Kind::Float;
  if (Kind == "string")
    return Attribute::Kind::String;
  if (Kind == "bool")
    return Attribute::Kind::Bool;
  if (Kind == "ints")
    return Attribute::Kind::IntList;
  if (Kind == "floats")
    return Attribute::Kind::FloatList;
  if (Kind == "tensor")
    return Attribute::Kind::Tensor;
  llvm_unreachable("unknown attribute kind in Ops.def");
}

ArrayRef<AttrSpec> OpInfo::getAttrSchema() const {
  // Parsed once for every op, the first time any schema is asked for.
  static const std::vector<std::vector<AttrSpec>> Schemas = [] {
    std::vector<std::vector<AttrSpec>> All;
    for (const OpInfo &Info : OpTable) {
      std::vector<AttrSpec> Specs;
      SmallVector<StringRef, 4> Entries;
      Info.AttrSchemaSpec.split(Entries, ',', -1, /*KeepEmpty=*/false);
      for (StringRef Entry : Entries) {
        auto [Name, Kind] = Entry.trim().split(':');
        bool Optional = Kind.consume_back("?");
        Specs.push_back({Name.str(), parseSchemaKind(Kind), !Optional});
      }
      All.push_back(std::move(Specs));
    }
    return All;
  }();
  return Schemas[this - OpTable];
}

const AttrSpec *OpInfo::lookupAttr(StringRef AttrName) const {
  for (const AttrSpec &Spec : getAttrSchema())
    if (Spec.Name == AttrName)
      return &Spec;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Annotations
//===----------------------------------------------------------------------===//

const AnnotationInfo *autopar::lookupAnnotation(StringRef Name) {
  static const AnnotationInfo Table[] = {
#define ANNOTATION(Name, Kinds, Description)                                   \
  {#Name, SmallVector<Attribute::Kind, 2> Kinds, Description},
#include "ir/Annotations.def"
  };
  for (const AnnotationInfo &Info : Table)
    if (Info.Name == Name)
      return &Info;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// ShapeContext
//===----------------------------------------------------------------------===//

unsigned ShapeContext::getNumOperands() const { return N.getNumOperands(); }

const TensorType &ShapeContext::getOperandType(unsigned I) const {
  return N.getOperand(I)->getType();
}

const Attribute *ShapeContext::getAttr(StringRef Name) const {
  return N.getAttr(Name);
}

int64_t ShapeContext::getIntAttr(StringRef Name, int64_t Default) const {
  const Attribute *A = N.getAttr(Name);
  return A && A->isa(Attribute::Kind::Int) ? A->getInt() : Default;
}

const DenseTensor *ShapeContext::getConstantOperand(unsigned I) const {
  return getConstantValue(N.getOperand(I));
}

std::optional<SmallVector<Dim, 4>>
ShapeContext::getShapeOperand(unsigned I) const {
  const Value *V = N.getOperand(I);
  if (const DenseTensor *T = getConstantValue(V)) {
    if (T->isFloat() || T->getType().getRank() != 1)
      return std::nullopt;
    SmallVector<Dim, 4> Dims;
    for (int64_t S : T->getInts()) {
      if (S < 0)
        return std::nullopt;
      Dims.push_back(Dim::get(S));
    }
    return Dims;
  }
  const Node *Def = V->getDefiningNode();
  if (!Def || Def->getOp() != OpId::Shape || Def->getNumOperands() != 1)
    return std::nullopt;
  ArrayRef<Dim> Shape = Def->getOperand(0)->getType().getShape();
  ShapeContext DefCtx(*Def);
  auto [Start, End] = getShapeRange(DefCtx, Shape.size());
  // Trust the Shape node only when it verifies: its declared type must be
  // what it computes.
  if (V->getType() != TensorType::get(ElementType::I64, {End - Start}))
    return std::nullopt;
  return SmallVector<Dim, 4>(Shape.begin() + Start, Shape.begin() + End);
}

Error ShapeContext::error(const Twine &Message) const {
  return createStringError(inconvertibleErrorCode(), Message.str());
}

const DenseTensor *autopar::getConstantValue(const Value *V) {
  const Node *Def = V->getDefiningNode();
  if (!Def || Def->getOp() != OpId::Constant)
    return nullptr;
  const Attribute *A = Def->getAttr("value");
  // A Constant that does not verify (its value disagrees with its declared
  // type) is no constant to the nodes that use it.
  if (!A || !A->isa(Attribute::Kind::Tensor) ||
      A->getTensor().getType() != V->getType())
    return nullptr;
  return &A->getTensor();
}
