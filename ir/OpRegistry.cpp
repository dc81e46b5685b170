//===- OpRegistry.cpp - The op table and annotation table -----------------===//

#include "ir/OpRegistry.h"
#include "ir/Folders.h"
#include "ir/Graph.h"
#include "ir/ShapeFunctions.h"
#include "ir/ShapeValues.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/ErrorHandling.h"

#include <cassert>

using namespace autopar;
using namespace llvm;

static const OpInfo OpTable[] = {
#define OP(Name, Operands, Results, Attrs, Verify, Infer, Fold)                \
  {#Name, Operands, Results, Attrs, Verify, Infer, Fold},
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

namespace {
/// What Ops.def says of one op, parsed once.
struct ParsedOpSpecs {
  std::vector<OperandSpec> Operands;
  std::vector<OperandSpec> Results;
  std::vector<AttrSpec> Attrs;
  bool AllowsOtherAttrs = false;
};
} // namespace

static std::vector<OperandSpec> parseOperandSpecs(StringRef Spec) {
  std::vector<OperandSpec> Specs;
  SmallVector<StringRef, 4> Entries;
  Spec.split(Entries, ',', -1, /*KeepEmpty=*/false);
  for (StringRef Entry : Entries) {
    Entry = Entry.trim();
    bool Optional = Entry.consume_back("?");
    bool Variadic = Entry.consume_back("...");
    Specs.push_back({Entry.str(), Optional, Variadic});
  }
  return Specs;
}

static const ParsedOpSpecs &getParsedSpecs(const OpInfo *Info) {
  // Parsed once for every op, the first time any spec is asked for.
  static const std::vector<ParsedOpSpecs> All = [] {
    std::vector<ParsedOpSpecs> Parsed;
    for (const OpInfo &Op : OpTable) {
      ParsedOpSpecs P;
      P.Operands = parseOperandSpecs(Op.OperandsSpec);
      P.Results = parseOperandSpecs(Op.ResultsSpec);
      SmallVector<StringRef, 4> Entries;
      Op.AttrSchemaSpec.split(Entries, ',', -1, /*KeepEmpty=*/false);
      for (StringRef Entry : Entries) {
        Entry = Entry.trim();
        if (Entry == "*") {
          P.AllowsOtherAttrs = true;
          continue;
        }
        auto [Name, Kind] = Entry.split(':');
        bool Optional = Kind.consume_back("?");
        P.Attrs.push_back({Name.str(), parseSchemaKind(Kind), !Optional});
      }
      Parsed.push_back(std::move(P));
    }
    return Parsed;
  }();
  return All[Info - OpTable];
}

ArrayRef<OperandSpec> OpInfo::getOperands() const {
  return getParsedSpecs(this).Operands;
}

ArrayRef<OperandSpec> OpInfo::getResults() const {
  return getParsedSpecs(this).Results;
}

static const OperandSpec *getSpecAt(ArrayRef<OperandSpec> Specs, unsigned I) {
  if (I < Specs.size())
    return &Specs[I];
  if (!Specs.empty() && Specs.back().Variadic)
    return &Specs.back();
  return nullptr;
}

static unsigned getMinCount(ArrayRef<OperandSpec> Specs) {
  unsigned Min = 0;
  for (unsigned I = 0, E = Specs.size(); I != E; ++I)
    if (!Specs[I].Optional)
      Min = I + 1;
  return Min;
}

static int getMaxCount(ArrayRef<OperandSpec> Specs) {
  if (!Specs.empty() && Specs.back().Variadic)
    return -1;
  return Specs.size();
}

const OperandSpec *OpInfo::getOperand(unsigned I) const {
  return getSpecAt(getOperands(), I);
}
const OperandSpec *OpInfo::getResult(unsigned I) const {
  return getSpecAt(getResults(), I);
}
unsigned OpInfo::getMinOperands() const { return getMinCount(getOperands()); }
int OpInfo::getMaxOperands() const { return getMaxCount(getOperands()); }
unsigned OpInfo::getMinResults() const { return getMinCount(getResults()); }
int OpInfo::getMaxResults() const { return getMaxCount(getResults()); }

ArrayRef<AttrSpec> OpInfo::getAttrSchema() const {
  return getParsedSpecs(this).Attrs;
}

bool OpInfo::allowsOtherAttrs() const {
  return getParsedSpecs(this).AllowsOtherAttrs;
}

bool AttrSpec::accepts(const Attribute &A) const {
  // `[]` reads back as an empty int list; it is also an empty float list.
  if (Kind == Attribute::Kind::FloatList && A.isa(Attribute::Kind::IntList))
    return A.getIntList().empty();
  return A.isa(Kind);
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

bool ShapeContext::hasOperand(unsigned I) const {
  return I < N.getNumOperands() && N.getOperand(I);
}

const TensorType &ShapeContext::getOperandType(unsigned I) const {
  assert(hasOperand(I) && "type of an absent operand");
  return N.getOperand(I)->getType();
}

const TensorType &ShapeContext::getResultType(unsigned I) const {
  return N.getResult(I)->getType();
}

const Attribute *ShapeContext::getAttr(StringRef Name) const {
  return N.getAttr(Name);
}

int64_t ShapeContext::getIntAttr(StringRef Name, int64_t Default) const {
  const Attribute *A = N.getAttr(Name);
  return A && A->isa(Attribute::Kind::Int) ? A->getInt() : Default;
}

const DenseTensor *ShapeContext::getConstantOperand(unsigned I) const {
  return hasOperand(I) ? getConstantValue(N.getOperand(I)) : nullptr;
}

std::optional<SmallVector<Dim, 4>>
ShapeContext::getShapeOperand(unsigned I) const {
  std::optional<ShapeValue> Value = getShapeValue(I);
  if (!Value)
    return std::nullopt;
  SmallVector<Dim, 4> Dims;
  for (const ShapeEntry &E : *Value) {
    if (E.Int && *E.Int < 0)
      return std::nullopt;
    Dims.push_back(E.toDim());
  }
  return Dims;
}

std::optional<ShapeValue> ShapeContext::getShapeValue(unsigned I) const {
  if (!hasOperand(I))
    return std::nullopt;
  return evaluateShapeValue(N.getOperand(I));
}

Error ShapeContext::error(const Twine &Message) const {
  return createStringError(inconvertibleErrorCode(), Message.str());
}

const DenseTensor *autopar::getConstantValue(const Value *V) {
  const Node *Def = V ? V->getDefiningNode() : nullptr;
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

std::optional<DropoutSetting> autopar::getDropoutSetting(const Node &N) {
  DropoutSetting S;
  if (N.getNumOperands() > 2 && N.getOperand(2)) {
    const DenseTensor *Mode = getConstantValue(N.getOperand(2));
    if (!Mode || Mode->isFloat() || Mode->size() != 1)
      return std::nullopt;
    S.Training = Mode->getInts()[0] != 0;
  }
  if (N.getNumOperands() > 1 && N.getOperand(1)) {
    const DenseTensor *Ratio = getConstantValue(N.getOperand(1));
    if (!Ratio || !Ratio->isFloat() || Ratio->size() != 1)
      return std::nullopt;
    S.Ratio = Ratio->getFloats()[0];
  }
  return S;
}

double autopar::getAttentionDropout(const Node &N) {
  const Attribute *A = N.getAttr("dropout");
  return A && A->isa(Attribute::Kind::Float) ? A->getFloat() : 0;
}

bool autopar::dropsInTraining(const Node &N) {
  if (N.getOp() == OpId::Dropout) {
    std::optional<DropoutSetting> S = getDropoutSetting(N);
    return S && S->drops();
  }
  return (N.getOp() == OpId::Attention ||
          N.getOp() == OpId::AttentionWithProbs) &&
         getAttentionDropout(N) > 0;
}

/// Ops through which a gradient reaches its optimizer step whole: the sums
/// over micro-batches, and what data-parallel synchronization does to it
/// (passes/InsertGradSync.cpp: views, the bucket's concatenation, the
/// reduction and the split back, a cast to the step's precision).
static bool movesGradient(OpId Op) {
  switch (Op) {
  case OpId::Add:
  case OpId::Reshape:
  case OpId::Flatten:
  case OpId::Squeeze:
  case OpId::Unsqueeze:
  case OpId::Concat:
  case OpId::Split:
  case OpId::AllReduce:
  case OpId::ReduceScatter:
  case OpId::Cast:
    return true;
  default:
    return false;
  }
}

SmallVector<const Value *, 8> autopar::getStepGradientTerms(const Node &Step) {
  SmallVector<const Value *, 8> Terms;
  if ((Step.getOp() != OpId::AdamW && Step.getOp() != OpId::Sgd) ||
      Step.getNumOperands() < 2)
    return Terms;
  SmallVector<const Value *, 8> Work{Step.getOperand(1)};
  SmallPtrSet<const Value *, 16> Seen;
  while (!Work.empty()) {
    const Value *V = Work.pop_back_val();
    if (!V || V->isParam() || !Seen.insert(V).second)
      continue;
    Terms.push_back(V);
    const Node *D = V->getDefiningNode();
    // clip-gradients' scaling: the gradient (`grad.<p>.unclipped`, and
    // with loss scaling `grad.<p>.scaled`) times its coefficient, a scalar
    // that is not gradient.
    if (D && D->getOp() == OpId::Mul && D->getNumOperands() == 2 &&
        D->getOperand(0) &&
        (D->getOperand(0)->getName().endswith(".unclipped") ||
         D->getOperand(0)->getName().endswith(".scaled"))) {
      Work.push_back(D->getOperand(0));
      continue;
    }
    if (!D || !movesGradient(D->getOp()))
      continue;
    // Shapes and split sizes are constants, not gradient.
    for (const Value *O : D->getOperands())
      if (O && !getConstantValue(O))
        Work.push_back(O);
  }
  return Terms;
}

std::optional<unsigned> autopar::getUpdatedOperand(OpId Op, unsigned Result) {
  // Results and operands as Ops.def names them: AdamW's param_out,
  // exp_avg_out and exp_avg_sq_out replace param, exp_avg and exp_avg_sq;
  // Sgd's param_out replaces param.
  if (Op == OpId::AdamW)
    return Result == 0 ? 0u : Result + 1;
  if (Op == OpId::Sgd && Result == 0)
    return 0u;
  return std::nullopt;
}
