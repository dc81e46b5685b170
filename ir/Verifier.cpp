//===- Verifier.cpp - Checks the invariants of graphs ---------------------===//

#include "ir/Verifier.h"

#include "ir/Graph.h"
#include "ir/Plan.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace autopar;
using namespace llvm;

namespace {

class Verifier {
public:
  Verifier(const Graph &G, DiagnosticEngine &Diag) : G(G), Diag(Diag) {}
  LogicalResult verify();

private:
  void verifyParam(const Value &P);
  void verifyNode(const Node &N);

  const Graph &G;
  DiagnosticEngine &Diag;
  unsigned ErrorsBefore = 0;
  DenseSet<const Value *> Defined;
};

} // namespace

static void verifyAttrs(const Graph &G, const AttrDict &Attrs, const OpInfo *Op,
                        ArrayRef<const Value *> Annotated,
                        function_ref<void(const Twine &)> Report);

LogicalResult Verifier::verify() {
  ErrorsBefore = Diag.getNumErrors();
  for (const std::unique_ptr<Value> &In : G.getInputs()) {
    Defined.insert(In.get());
    verifyAttrs(G, In->getAttrs(), nullptr, {In.get()}, [&](const Twine &Msg) {
      Diag.error(In->getLoc(), "input '%" + In->getName() + "': " + Msg);
    });
  }
  for (const std::unique_ptr<Value> &P : G.getParams()) {
    Defined.insert(P.get());
    verifyParam(*P);
  }
  for (const Node &N : G.getNodes()) {
    verifyNode(N);
    for (unsigned I = 0, E = N.getNumResults(); I != E; ++I)
      Defined.insert(N.getResult(I));
  }
  for (const Value *Out : G.getOutputs())
    if (!Defined.count(Out))
      Diag.error(G.getLoc(), "graph '@" + G.getName() + "' returns '%" +
                                 Out->getName() +
                                 "', which is not defined in it");
  return Diag.getNumErrors() == ErrorsBefore ? success() : failure();
}

void Verifier::verifyParam(const Value &P) {
  auto Report = [&](const Twine &Msg) {
    Diag.error(P.getLoc(), "parameter '%" + P.getName() + "': " + Msg);
  };
  verifyAttrs(G, P.getAttrs(), nullptr, {&P}, Report);
  const std::optional<WeightSource> &S = P.getWeightSource();
  if (!S)
    return;
  // A shard's data is the whole tensor's.
  TensorType Whole = P.getLogicalType();
  if (S->SourceKind == WeightSource::Kind::Inline) {
    if (S->Data->getType() != Whole)
      Report("inline data of type " + S->Data->getType().str() +
             " does not match the parameter type " + Whole.str());
    return;
  }
  if (!Whole.hasStaticShape())
    return;
  std::optional<int64_t> Bytes = Whole.getStaticSizeInBytes();
  if (!Bytes)
    Report("type " + Whole.str() + " is too large");
  else if (S->Length != *Bytes)
    Report("external data length " + Twine(S->Length) + " does not match " +
           Whole.str() + " (" + Twine(*Bytes) + " bytes)");
}

void Verifier::verifyNode(const Node &N) {
  auto Report = [&](const Twine &Msg) { Diag.error(N, Msg); };
  for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I) {
    const Value *V = N.getOperand(I);
    if (!V)
      continue;
    if (V->getGraph() != &G)
      Report("operand '%" + V->getName() + "' belongs to another graph");
    else if (!Defined.count(V))
      Report("operand '%" + V->getName() + "' is used before it is defined");
  }
  std::optional<SmallVector<TensorType, 1>> Inferred =
      inferNodeResultTypes(N, Report);
  if (!Inferred)
    return;
  const DimEqualities &Eq = G.getDimEqualities();
  for (unsigned I = 0, E = N.getNumResults(); I != E; ++I) {
    const TensorType &Declared = N.getResult(I)->getType();
    if (!isCompatible(Eq.resolve(Declared), Eq.resolve((*Inferred)[I])))
      Report("result #" + Twine(I) + " is declared " + Declared.str() +
             " but the op gives " + (*Inferred)[I].str());
  }
}

std::optional<SmallVector<TensorType, 1>>
autopar::inferNodeResultTypes(const Node &N,
                              function_ref<void(const Twine &)> Report) {
  bool Failed = false;
  auto Fail = [&](const Twine &Msg) {
    Report(Msg);
    Failed = true;
  };
  const OpInfo &Info = N.getOpInfo();
  for (unsigned I = 0, E = N.getNumOperands(); I != E; ++I) {
    const OperandSpec *Spec = Info.getOperand(I);
    if (!N.getOperand(I) && Spec && !Spec->Optional)
      Fail("operand #" + Twine(I) + " ('" + Spec->Name +
           "') is required but absent");
  }
  auto CheckCount = [&](StringRef What, unsigned Count, int Min, int Max) {
    if (int(Count) >= Min && (Max < 0 || int(Count) <= Max))
      return;
    std::string Expected =
        Max < 0      ? "at least " + std::to_string(Min)
        : Min == Max ? std::to_string(Min)
                     : std::to_string(Min) + " to " + std::to_string(Max);
    Fail("expects " + Twine(Expected) + " " + What + ", got " + Twine(Count));
  };
  CheckCount("operands", N.getNumOperands(), Info.getMinOperands(),
             Info.getMaxOperands());
  CheckCount("results", N.getNumResults(), Info.getMinResults(),
             Info.getMaxResults());
  SmallVector<const Value *, 1> Results;
  for (unsigned I = 0, E = N.getNumResults(); I != E; ++I)
    Results.push_back(N.getResult(I));
  verifyAttrs(*N.getGraph(), N.getAttrs(), &Info, Results, Fail);
  // The op's own checks assume the structure above holds.
  if (Failed)
    return std::nullopt;

  ShapeContext Ctx(N);
  if (Info.Verify)
    if (Error E = Info.Verify(Ctx)) {
      Report(toString(std::move(E)));
      return std::nullopt;
    }
  Expected<SmallVector<TensorType, 1>> Inferred = Info.Infer(Ctx);
  if (!Inferred) {
    Report(toString(Inferred.takeError()));
    return std::nullopt;
  }
  assert(Inferred->size() == N.getNumResults() &&
         "shape function returned the wrong number of types");
  return std::move(*Inferred);
}

static void verifySharding(const Graph &G, const Sharding &S, const Value &V,
                           function_ref<void(const Twine &)> Report);

/// A data-parallel split: on one value with a batch_dim, over mesh axes of
/// the graph, splitting that dimension only.
static void verifyBatchSplit(const Graph &G, const AttrDict &Attrs,
                             const Sharding &S,
                             ArrayRef<const Value *> Annotated,
                             function_ref<void(const Twine &)> Report) {
  const Attribute *BatchDim = Attrs.get("batch_dim");
  if (Annotated.size() != 1 || !BatchDim ||
      !BatchDim->isa(Attribute::Kind::Int)) {
    Report("annotation 'batch_split' needs a graph input with a 'batch_dim'");
    return;
  }
  verifySharding(G, S, *Annotated[0], Report);
  bool OnlyBatch = S.PartialAxes.empty();
  for (unsigned D = 0; D != S.DimAxes.size(); ++D)
    OnlyBatch &= S.DimAxes[D].empty() || int64_t(D) == BatchDim->getInt();
  if (!OnlyBatch)
    Report("annotation 'batch_split' may split the batch dimension (" +
           Twine(BatchDim->getInt()) + ") only");
}

/// Checks attributes against Op's schema (or none, for inputs and
/// parameters) and annotations against Annotations.def. Report is called
/// with each message.
static void verifyAttrs(const Graph &G, const AttrDict &Attrs, const OpInfo *Op,
                        ArrayRef<const Value *> Annotated,
                        function_ref<void(const Twine &)> Report) {
  for (const NamedAttribute &E : Attrs) {
    const std::string &Name = E.first;
    const Attribute &A = E.second;
    if (const AttrSpec *Spec = Op ? Op->lookupAttr(Name) : nullptr) {
      if (!Spec->accepts(A))
        Report("attribute '" + Name + "' must be " +
               getAttributeKindName(Spec->Kind) + ", got " +
               getAttributeKindName(A.getKind()));
      continue;
    }
    const AnnotationInfo *Ann = lookupAnnotation(Name);
    if (!Ann && Op && Op->allowsOtherAttrs())
      continue;
    if (!Ann) {
      if (Op)
        Report("unknown attribute '" + Name + "' for op '" + Op->Name + "'");
      else
        Report("unknown annotation '" + Name + "'");
      continue;
    }
    if (!is_contained(Ann->Kinds, A.getKind())) {
      Report("annotation '" + Name + "' cannot be " +
             getAttributeKindName(A.getKind()));
      continue;
    }
    if ((Name == "stage" || Name == "layer") && A.getInt() < 0)
      Report("annotation '" + Name + "' must not be negative");
    if (Name == "batch_dim" &&
        (Annotated.size() != 1 || A.getInt() < 0 ||
         A.getInt() >= int64_t(Annotated[0]->getType().getRank())))
      Report("annotation 'batch_dim' must be a dimension of the value");
    if (Name == "batch_split") {
      verifyBatchSplit(G, Attrs, A.getSharding(), Annotated, Report);
      continue;
    }
    if (Name != "sharding")
      continue;
    if (A.isa(Attribute::Kind::Sharding)) {
      if (Annotated.size() != 1)
        Report("annotation 'sharding' needs one sharding per result (" +
               Twine(Annotated.size()) + ")");
      else
        verifySharding(G, A.getSharding(), *Annotated[0], Report);
      continue;
    }
    ArrayRef<Attribute> List = A.getList();
    if (List.size() != Annotated.size()) {
      Report("annotation 'sharding' has " + Twine(List.size()) +
             " entries for " + Twine(Annotated.size()) + " results");
      continue;
    }
    for (unsigned I = 0, E = List.size(); I != E; ++I) {
      if (!List[I].isa(Attribute::Kind::Sharding))
        Report("annotation 'sharding' entry #" + Twine(I) +
               " is not a sharding");
      else
        verifySharding(G, List[I].getSharding(), *Annotated[I], Report);
    }
  }
  if (!Op)
    return;
  for (const AttrSpec &Spec : Op->getAttrSchema())
    if (Spec.Required && !Attrs.get(Spec.Name))
      Report("missing attribute '" + Spec.Name + "'");
}

static void verifySharding(const Graph &G, const Sharding &S, const Value &V,
                           function_ref<void(const Twine &)> Report) {
  const Mesh *M = G.lookupMesh(S.Mesh);
  if (!M) {
    Report("sharding of '%" + V.getName() + "' uses undefined mesh '@" +
           S.Mesh + "'");
    return;
  }
  if (S.DimAxes.size() != V.getType().getRank())
    Report("sharding of '%" + V.getName() + "' has " + Twine(S.DimAxes.size()) +
           " dimensions but its type " + V.getType().str() + " has " +
           Twine(V.getType().getRank()));
  StringSet<> Used;
  auto CheckAxis = [&](const std::string &Axis) {
    if (!M->getAxisSize(Axis))
      Report("sharding of '%" + V.getName() + "' uses axis '" + Axis +
             "', which mesh '@" + M->Name + "' does not have");
    else if (!Used.insert(Axis).second)
      Report("sharding of '%" + V.getName() + "' uses axis '" + Axis +
             "' more than once");
  };
  for (const std::vector<std::string> &Axes : S.DimAxes)
    for_each(Axes, CheckAxis);
  for_each(S.PartialAxes, CheckAxis);
}

LogicalResult autopar::verifyGraph(const Graph &G, DiagnosticEngine &Diag) {
  return Verifier(G, Diag).verify();
}

/// The module's attributes are a plan's record (ir/Plan.h): every key
/// known, of its kind and in range, and the numbers agreeing.
static LogicalResult verifyModuleAttributes(const Module &M,
                                            DiagnosticEngine &Diag) {
  if (M.getAttrs().empty())
    return success();
  Expected<PlanRecord> R = decodePlan(M.getAttrs());
  Error E = R ? checkPlanInvariants(*R, "") : R.takeError();
  if (!E)
    return success();
  handleAllErrors(std::move(E), [&](const ErrorInfoBase &Info) {
    Diag.error(M.getAttrsLoc(), "module attributes: " + Info.message());
  });
  return failure();
}

LogicalResult autopar::verifyModule(const Module &M, DiagnosticEngine &Diag) {
  bool Failed = failed(verifyModuleAttributes(M, Diag));
  for (const std::unique_ptr<Graph> &G : M.getGraphs())
    Failed |= failed(verifyGraph(*G, Diag));
  return Failed ? failure() : success();
}
