//===- MixedPrecision.cpp - Compute in a narrow float, keep fp32 masters --===//
//
// `mixed-precision{compute=bf16}` makes a forward graph compute in a narrow
// float type while its parameters stay fp32 master weights (Micikevicius et
// al. 2018, "Mixed Precision Training"; Megatron-LM's bf16 training):
//   - every f32 parameter a node reads is read through a Cast to the
//     compute type, so autodiff's Cast rule gives fp32 gradients of the
//     masters and the optimizer updates them in fp32; one Cast per virtual
//     stage (`stage`) of its readers, as an interleaved pipeline rank's
//     chunks must not read each other's values (schedule-pipeline);
//   - f32 constants (except Dropout's ratio, a setting) and float graph
//     inputs (activations received from the previous pipeline stage)
//     become the compute type, and so does every
//     float result after them (the ops' shape functions say so); the
//     model's own casts to f32 (a norm computed in fp32) cast to the
//     compute type instead, as kernels accumulate in fp32 anyway;
//   - outputs stay in the compute type (activations sent to the next
//     pipeline stage); autodiff computes the loss over narrow logits in
//     fp32.
// Run before autodiff (after localize-tp and extract-stage when there are
// any). Assumes static shapes; other float types than f32 are left alone.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/Diagnostics.h"
#include "ir/Graph.h"
#include "ir/OpRegistry.h"

using namespace autopar;
using namespace llvm;

namespace {

class MixedPrecisionPass : public Pass {
public:
  MixedPrecisionPass() {
    Options.bind("compute", &Compute, "The compute type: bf16 or f16");
  }

  StringRef getArgument() const override { return "mixed-precision"; }
  Error validateOptions() override {
    if (Compute != "bf16" && Compute != "f16")
      return createStringError(inconvertibleErrorCode(),
                               "mixed-precision: compute must be bf16 or f16, "
                               "not '" +
                                   Compute + "'");
    return Error::success();
  }

  LogicalResult run(Module &M, DiagnosticEngine &Diag) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      if (Error E = runOnGraph(*G)) {
        Diag.error(G->getLoc(), "mixed-precision: " + toString(std::move(E)));
        return failure();
      }
    return success();
  }

private:
  Error runOnGraph(Graph &G);

  std::string Compute = "bf16";
};

} // namespace

/// Operand I of U is a scalar setting, not data (Dropout's ratio: ONNX types
/// it apart from the data), and keeps its f32 constant.
static bool isHyperparameter(const Node &U, unsigned I) {
  return U.getOp() == OpId::Dropout && I == 1;
}

static TensorType withElement(const TensorType &T, ElementType E) {
  return TensorType(E, T.getShape());
}

Error MixedPrecisionPass::runOnGraph(Graph &G) {
  ElementType Narrow = Compute == "bf16" ? ElementType::BF16 : ElementType::F16;
  AttrDict ToNarrow;
  ToNarrow.set("to", Attribute::getString(Compute));
  // A Cast of V to the compute type, before Before, read by V's users
  // that Reads accepts (the operand slots that take data; none: no cast).
  auto CastUses = [&](Value *V, Node *Before, const Node *AnnotateLike,
                      function_ref<bool(const Node &)> Reads) {
    SmallVector<std::pair<Node *, unsigned>, 8> Slots;
    for (Node *U : V->getUsers())
      for (unsigned I = 0, E = U->getNumOperands(); I != E; ++I)
        if (U->getOperand(I) == V && !isHyperparameter(*U, I) && Reads(*U) &&
            !is_contained(Slots, std::make_pair(U, I)))
          Slots.push_back({U, I});
    if (Slots.empty())
      return;
    AttrDict A = ToNarrow;
    if (AnnotateLike)
      for (StringRef Name : {"layer", "stage"})
        if (const Attribute *Copy = AnnotateLike->getAttr(Name))
          A.set(Name, *Copy);
    Node *C = G.createNode(
        OpId::Cast, {V}, {withElement(V->getType(), Narrow)}, std::move(A),
        {G.getUniqueName((V->getName() + "." + Compute).str())}, Before);
    for (auto [U, I] : Slots)
      U->setOperand(I, C->getResult(0));
  };
  // Parameters: one cast each, before the first reader; one per virtual
  // stage of its readers when the graph holds several (an interleaved
  // rank's chunks, which schedule-pipeline keeps apart: a rotary table every
  // chunk reads), before the first reader of each.
  auto StageOf = [](const Node &N) -> std::optional<int64_t> {
    const Attribute *A = N.getAttr("stage");
    if (!A || !A->isa(Attribute::Kind::Int))
      return std::nullopt;
    return A->getInt();
  };
  for (const std::unique_ptr<Value> &P : G.getParams()) {
    if (P->getType().getElementType() != ElementType::F32 ||
        P->getUsers().empty())
      continue;
    SmallVector<Node *, 4> Firsts;
    for (Node &N : G.getNodes())
      if (is_contained(N.getOperands(), P.get()) &&
          none_of(Firsts, [&](Node *F) { return StageOf(*F) == StageOf(N); }))
        Firsts.push_back(&N);
    for (Node *First : Firsts)
      CastUses(P.get(), First, First,
               [&](const Node &U) { return StageOf(U) == StageOf(*First); });
  }
  // Received activations arrive in the compute type.
  for (const std::unique_ptr<Value> &In : G.getInputs())
    if (In->getType().getElementType() == ElementType::F32)
      In->setType(withElement(In->getType(), Narrow));
  // Constants, then every result as its op now gives it.
  SmallVector<Node *, 64> Order;
  for (Node &N : G.getNodes())
    Order.push_back(&N);
  for (Node *N : Order) {
    if (N->getOp() == OpId::Cast &&
        N->getResult(0)->getType().getElementType() == ElementType::F32 &&
        !N->getOperand(0)->isParam()) {
      N->getAttrs().set("to", Attribute::getString(Compute));
      N->getResult(0)->setType(withElement(N->getResult(0)->getType(), Narrow));
      continue;
    }
    if (N->getOp() == OpId::Constant || N->getOp() == OpId::ConstantOfShape) {
      Value *R = N->getResult(0);
      if (R->getType().getElementType() == ElementType::F32 && R->hasUses()) {
        auto It = std::next(N->getIterator());
        CastUses(R, It == G.getNodes().end() ? nullptr : &*It, nullptr,
                 [](const Node &) { return true; });
      }
      continue;
    }
    if (N->getOp() == OpId::Cast)
      continue;
    Expected<SmallVector<TensorType, 1>> Types =
        N->getOpInfo().Infer(ShapeContext(*N));
    if (!Types)
      return createStringError(inconvertibleErrorCode(),
                               "node '" + N->getName() + "' (" +
                                   N->getOpName() +
                                   "): " + toString(Types.takeError()));
    for (unsigned I = 0, E = N->getNumResults(); I != E; ++I)
      N->getResult(I)->setType((*Types)[I]);
  }
  return Error::success();
}

std::unique_ptr<Pass> autopar::createMixedPrecisionPass() {
  return std::make_unique<MixedPrecisionPass>();
}
