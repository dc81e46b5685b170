//===- ForwardProgram.cpp - One rank's forward pass of a plan -------------===//
//
// `forward-program{stage=S}` turns a planned graph (after localize-tp when
// the plan is tensor-parallel) into the forward program of the ranks of
// pipeline stage S, what `autopar-run --eval DIR` runs under mpirun to
// compare a parallel plan's outputs with the model's:
//   - nodes annotated with another `stage` are dropped, with what only
//     they use; nodes without a stage (constants, weight transposes) stay
//     where they are needed;
//   - a SendRecv into S becomes a Recv of its value from its source stage,
//     one out of S a Send to its destination stage (one micro-batch, so
//     transfers pair up in program order);
//   - the last stage keeps the graph's outputs, each made whole: a split
//     output is all-gathered over its mesh axis (a partial one was summed
//     by localize-tp); other stages have no outputs.
// Parameters and inputs stay (the runtime loads every parameter; a rank's
// --input files may name inputs it does not read). The program evaluates,
// as PyTorch's model.eval() does: a training-mode Dropout whose mask
// nothing reads becomes the identity, and an Attention's `dropout` goes.
// Assumes the plan's `stage` annotations (partition-stages) and SendRecv
// transfers (insert-collectives), one chunk per stage (vpp = 1).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/ShardGraph.h"

#include "ir/Diagnostics.h"
#include "ir/Graph.h"
#include "ir/OpRegistry.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

using namespace autopar;
using namespace llvm;

namespace {

class ForwardProgramPass : public Pass {
public:
  ForwardProgramPass() {
    Options.bind("stage", &Stage, "The pipeline stage whose program to make");
    Options.bind("axis", &Axis, "The tensor-parallel mesh axis (tp)");
  }

  StringRef getArgument() const override { return "forward-program"; }
  Error validateOptions() override {
    if (Stage < 0)
      return createStringError(inconvertibleErrorCode(),
                               "forward-program: stage must be >= 0");
    return Error::success();
  }

  LogicalResult run(Module &M, DiagnosticEngine &Diag) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      if (Error E = runOnGraph(*G)) {
        Diag.error(G->getLoc(), "forward-program: " + toString(std::move(E)));
        return failure();
      }
    return success();
  }

private:
  Error runOnGraph(Graph &G);

  int64_t Stage = 0;
  std::string Axis = "tp";
};

} // namespace

static std::optional<int64_t> stageOf(const Node &N) {
  if (const Attribute *A = N.getAttr("stage"))
    if (A->isa(Attribute::Kind::Int))
      return A->getInt();
  return std::nullopt;
}

/// Dropout in inference mode: the identity (unless its mask is read).
static void evaluateWithoutDropout(Graph &G) {
  SmallVector<Node *, 8> Dropouts;
  for (Node &N : G.getNodes()) {
    if (N.getOp() == OpId::Attention)
      N.getAttrs().erase("dropout");
    if (N.getOp() == OpId::Dropout &&
        (N.getNumResults() < 2 || !N.getResult(1)->hasUses()))
      Dropouts.push_back(&N);
  }
  for (Node *N : Dropouts) {
    N->getResult(0)->replaceAllUsesWith(N->getOperand(0));
    N->erase();
  }
}

Error ForwardProgramPass::runOnGraph(Graph &G) {
  evaluateWithoutDropout(G);
  int64_t Last = 0;
  for (const Node &N : G.getNodes())
    if (std::optional<int64_t> S = stageOf(N))
      Last = std::max(Last, *S);
  if (Stage > Last)
    return createStringError(inconvertibleErrorCode(),
                             "graph @" + G.getName() + " has stages 0 to " +
                                 std::to_string(Last) + ", not " +
                                 std::to_string(Stage));
  // Transfers become this stage's Sends and Recvs.
  SmallVector<Node *, 8> Transfers;
  for (Node &N : G.getNodes())
    if (N.getOp() == OpId::SendRecv)
      Transfers.push_back(&N);
  SmallVector<Node *, 8> Sends;
  for (Node *N : Transfers) {
    const Attribute *Src = N->getAttr("src_stage");
    const Attribute *Dst = N->getAttr("dst_stage");
    int64_t From = Src ? Src->getInt() : -1, To = Dst ? Dst->getInt() : -1;
    if (To == Stage) {
      AttrDict A;
      A.set("src_stage", Attribute::getInt(From));
      A.set("stage", Attribute::getInt(Stage));
      Value *Old = N->getResult(0);
      std::string Name = Old->getName().str();
      G.renameValue(Old, G.getUniqueName(Name + ".transfer"));
      Node *Recv = G.createNode(OpId::Recv, {}, {Old->getType()}, std::move(A),
                                {Name}, N);
      Old->replaceAllUsesWith(Recv->getResult(0));
    } else if (From == Stage) {
      AttrDict A;
      A.set("dst_stage", Attribute::getInt(To));
      A.set("stage", Attribute::getInt(Stage));
      Sends.push_back(G.createNode(OpId::Send, {N->getOperand(0)}, {},
                                   std::move(A), {}, N));
    }
  }
  // What this stage computes: its nodes and the stage-less ones they need.
  bool IsLast = Stage == Last;
  DenseSet<const Node *> Keep;
  SmallVector<const Node *, 64> Work;
  for (Node &N : G.getNodes())
    if (N.getOp() != OpId::SendRecv && stageOf(N) == Stage)
      Work.push_back(&N);
  if (IsLast)
    for (Value *Out : G.getOutputs())
      if (Out->getDefiningNode())
        Work.push_back(Out->getDefiningNode());
  while (!Work.empty()) {
    const Node *N = Work.pop_back_val();
    if (!Keep.insert(N).second)
      continue;
    for (Value *O : N->getOperands())
      if (O && O->getDefiningNode()) {
        const Node *P = O->getDefiningNode();
        std::optional<int64_t> S = stageOf(*P);
        if (P->getOp() == OpId::SendRecv || (S && *S != Stage))
          return createStringError(inconvertibleErrorCode(),
                                   "a node of stage " + std::to_string(Stage) +
                                       " reads '" + O->getName().str() +
                                       "' of another stage without a "
                                       "transfer");
        Work.push_back(P);
      }
  }
  // Outputs: the last stage's, whole.
  SmallVector<Value *, 4> Outputs;
  if (IsLast)
    for (Value *Out : G.getOutputs()) {
      Node *Def = Out->getDefiningNode();
      std::string MeshName;
      int Layout =
          Def ? getAnnotatedLayout(Def->getAttr("sharding"),
                                   Out->getResultIndex(), Axis, MeshName)
              : LayoutReplicated;
      if (Layout < 0) {
        Outputs.push_back(Out);
        continue;
      }
      AttrDict A;
      A.set("mesh", Attribute::getString(MeshName));
      A.set("axis", Attribute::getString(Axis));
      A.set("dim", Attribute::getInt(Layout));
      A.set("local", Attribute::getInt(1));
      A.set("stage", Attribute::getInt(Stage));
      TensorType Ty = Out->getType();
      const Mesh *M = G.lookupMesh(MeshName);
      SmallVector<int64_t, 4> Sizes = Ty.getStaticSizes();
      Sizes[Layout] *= M ? M->getAxisSize(Axis).value_or(1) : 1;
      std::string Name = Out->getName().str();
      G.renameValue(Out, G.getUniqueName(Name + ".local"));
      Node *Gather = G.createNode(OpId::AllGather, {Out},
                                  {TensorType::get(Ty.getElementType(), Sizes)},
                                  std::move(A), {Name});
      Keep.insert(Gather);
      Outputs.push_back(Gather->getResult(0));
    }
  G.setOutputs(Outputs);
  for (Node *S : Sends)
    Keep.insert(S);
  SmallVector<Node *, 64> Dead;
  for (Node &N : G.getNodes())
    if (!Keep.count(&N))
      Dead.push_back(&N);
  for (Node *N : reverse(Dead))
    N->erase();
  return Error::success();
}

std::unique_ptr<Pass> autopar::createForwardProgramPass() {
  return std::make_unique<ForwardProgramPass>();
}
