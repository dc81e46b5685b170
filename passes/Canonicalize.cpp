//===- Canonicalize.cpp - Simplify graphs to a canonical form -------------===//
//
// The canonicalizer removes what planning should not see and makes shapes
// as static as the graph allows:
//   - Identity nodes are bypassed, except an Identity of a parameter: an
//     exporter that deduplicated equal initializers re-creates each trainable
//     parameter through an Identity, and bypassing it would tie weights that
//     train separately. An Identity whose result is a graph output passes its
//     name to its operand, so output names do not change.
//   - Nodes whose operands are integer constants are folded into Constant
//     nodes through the op's folder (Folders.cpp); Shape of statically known
//     dimensions, and Gather of such dimensions, fold as well. The folded
//     Constant keeps the result's name.
//   - Result types are refined where the shape function now knows more than
//     the declared type (a Reshape whose target became constant).
//   - Nodes whose results are unused are erased (every registered op is free
//     of side effects), and so are parameters that only such nodes read
//     (a parameter the graph never read stays).
// Assumes its input verifies.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/Folders.h"
#include "ir/Graph.h"
#include "ir/ShapeValues.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace autopar;
using namespace llvm;

namespace {

struct CanonicalizeOptions {
  /// Bypass Identity nodes (never those of parameters).
  bool RemoveIdentities = true;
  /// Fold integer shape arithmetic into constants.
  bool FoldConstants = true;
  /// Refine declared result types from shape functions.
  bool RefineTypes = true;
  /// Erase nodes whose results are unused.
  bool EliminateDeadNodes = true;
  /// Upper bound on rounds of the above; each round is linear in the graph.
  int64_t MaxIterations = 8;

  Error validate() const {
    if (MaxIterations < 1)
      return createStringError(inconvertibleErrorCode(),
                               "max-iterations must be at least 1");
    return Error::success();
  }
};

class CanonicalizePass : public Pass {
public:
  CanonicalizePass() {
    Options.bind("remove-identities", &Opts.RemoveIdentities,
                 "Bypass Identity nodes (not those of parameters)");
    Options.bind("fold-constants", &Opts.FoldConstants,
                 "Fold integer shape arithmetic into constants");
    Options.bind("refine-types", &Opts.RefineTypes,
                 "Refine declared result types from shape functions");
    Options.bind("dce", &Opts.EliminateDeadNodes,
                 "Erase nodes whose results are unused");
    Options.bind("max-iterations", &Opts.MaxIterations,
                 "Upper bound on simplification rounds");
  }

  StringRef getArgument() const override { return "canonicalize"; }
  Error validateOptions() override { return Opts.validate(); }

  LogicalResult run(Module &M, DiagnosticEngine &) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs()) {
      ReadParams.clear();
      for (const std::unique_ptr<Value> &P : G->getParams())
        if (P->hasUses())
          ReadParams.insert(P.get());
      for (int64_t I = 0; I != Opts.MaxIterations; ++I)
        if (!simplify(*G))
          break;
    }
    return success();
  }

private:
  /// One round over the graph; returns true if anything changed.
  bool simplify(Graph &G);
  bool removeIdentity(Graph &G, Node &N);
  bool foldNode(Graph &G, Node &N);
  bool refineTypes(Node &N);

  CanonicalizeOptions Opts;
  /// The parameters that something read when the pass began.
  SmallPtrSet<Value *, 16> ReadParams;
};

} // namespace

bool CanonicalizePass::removeIdentity(Graph &G, Node &N) {
  Value *In = N.getOperand(0), *Out = N.getResult(0);
  if (In->isParam())
    return false;
  if (Out->getNumOutputUses() == 0) {
    Out->replaceAllUsesWith(In);
    N.erase();
    return true;
  }
  // The result is returned: keep the returned name. That is possible only
  // when the operand is a node result that is not itself returned.
  if (!In->getDefiningNode() || In->getNumOutputUses() != 0)
    return false;
  std::string Name = Out->getName().str();
  Out->replaceAllUsesWith(In);
  N.erase();
  G.renameValue(In, Name);
  return true;
}

/// The constant value of a Shape-derived node that folders cannot see:
/// Shape of static dimensions, or Gather of static dimensions out of a Shape
/// (evaluated by ir/ShapeValues, the mechanism shape functions use).
static std::optional<DenseTensor> foldShapeOf(const Node &N) {
  const TensorType &ResultType = N.getResult(0)->getType();
  const Node *Data =
      N.getOperand(0) ? N.getOperand(0)->getDefiningNode() : nullptr;
  bool ShapeLike =
      N.getOp() == OpId::Shape ||
      (N.getOp() == OpId::Gather && Data && Data->getOp() == OpId::Shape);
  if (!ShapeLike || !ResultType.hasStaticShape())
    return std::nullopt;
  std::optional<ShapeValue> Value = evaluateShapeValue(N.getResult(0));
  if (!Value)
    return std::nullopt;
  std::vector<int64_t> Sizes;
  for (const ShapeEntry &E : *Value) {
    if (!E.Int)
      return std::nullopt;
    Sizes.push_back(*E.Int);
  }
  return DenseTensor(ResultType, std::move(Sizes));
}

bool CanonicalizePass::foldNode(Graph &G, Node &N) {
  if (N.getOp() == OpId::Constant || N.getNumResults() != 1)
    return false;
  std::optional<DenseTensor> Folded = foldShapeOf(N);
  if (!Folded) {
    FoldFn Fold = N.getOpInfo().Fold;
    if (!Fold)
      return false;
    SmallVector<const DenseTensor *, 2> Operands;
    for (Value *V : N.getOperands())
      Operands.push_back(getConstantValue(V));
    std::optional<SmallVector<DenseTensor, 1>> Results = Fold(N, Operands);
    if (!Results)
      return false;
    Folded = std::move((*Results)[0]);
  }
  // Replace N by a Constant that takes over its result's name.
  Value *Old = N.getResult(0);
  AttrDict Attrs;
  Attrs.set("value", Attribute::getTensor(std::move(*Folded)));
  std::string Name = Old->getName().str();
  Node *C = G.createNode(OpId::Constant, {}, {Old->getType()}, std::move(Attrs),
                         {G.getUniqueName(Name + ".fold")}, &N);
  C->setName(N.getName());
  Old->replaceAllUsesWith(C->getResult(0));
  N.erase();
  G.renameValue(C->getResult(0), Name);
  return true;
}

bool CanonicalizePass::refineTypes(Node &N) {
  Expected<SmallVector<TensorType, 1>> Inferred =
      N.getOpInfo().Infer(ShapeContext(N));
  if (!Inferred) {
    consumeError(Inferred.takeError());
    return false;
  }
  bool Changed = false;
  for (unsigned I = 0, E = N.getNumResults(); I != E; ++I) {
    Value *R = N.getResult(I);
    const TensorType &Declared = R->getType(), &Better = (*Inferred)[I];
    if (!isCompatible(Declared, Better))
      continue;
    SmallVector<Dim, 4> Shape(Declared.getShape().begin(),
                              Declared.getShape().end());
    bool Refined = false;
    for (unsigned D = 0, Rank = Shape.size(); D != Rank; ++D)
      if (Shape[D].isUnknown() && !Better.getDim(D).isUnknown()) {
        Shape[D] = Better.getDim(D);
        Refined = true;
      }
    if (Refined) {
      R->setType(TensorType(Declared.getElementType(), Shape));
      Changed = true;
    }
  }
  return Changed;
}

bool CanonicalizePass::simplify(Graph &G) {
  bool Changed = false;
  for (Node &N : make_early_inc_range(G.getNodes())) {
    if (Opts.RemoveIdentities && N.getOp() == OpId::Identity &&
        removeIdentity(G, N)) {
      Changed = true;
      continue;
    }
    if (Opts.RefineTypes)
      Changed |= refineTypes(N);
    if (Opts.FoldConstants)
      Changed |= foldNode(G, N);
  }
  if (Opts.EliminateDeadNodes) {
    for (Node &N : make_early_inc_range(reverse(G.getNodes()))) {
      if (any_of(N.getResults(), [](Value *R) { return R->hasUses(); }))
        continue;
      N.erase();
      Changed = true;
    }
    // A parameter that only dead nodes read (a causal-mask buffer that a
    // fused Attention no longer needs) goes with them; one that the graph
    // never read stays, as the model declares it.
    SmallVector<Value *, 4> Unread;
    for (const std::unique_ptr<Value> &P : G.getParams())
      if (!P->hasUses() && ReadParams.count(P.get()))
        Unread.push_back(P.get());
    for (Value *P : Unread)
      G.eraseParam(P);
    Changed |= !Unread.empty();
  }
  return Changed;
}

std::unique_ptr<Pass> autopar::createCanonicalizePass() {
  return std::make_unique<CanonicalizePass>();
}
