//===- InsertCollectives.cpp - Make communication explicit ----------------===//
//
// insert-collectives turns the layout decisions of shard-tp (the `sharding`
// annotations over a mesh axis, `axis`, default `tp`) and of the pipeline
// cut (`stage` annotations) into explicit communication nodes:
//   - where a node reads a value in another layout than its producer wrote
//     it: AllReduce (partial -> replicated), ReduceScatter (partial ->
//     split), AllGather (split -> replicated), AllToAll (split on one
//     dimension -> split on another); reading a part of a replicated value
//     needs no communication. The rule is getReshardCollective
//     (ShardingSolver.h), the one the sharding solver prices;
//   - where a node of one stage reads a value of another: SendRecv, one per
//     stage boundary crossed (the stages between hand the value on);
//   - a graph output that is a partial sum: AllReduce.
// A conversion of one value to one layout (or stage) is made once and shared
// by its readers. A node's layout is read from its results' sharding and its
// loops (ir/OpLoops.h): the loop a split result maps, or the reduction loop
// its partial result leaves. Assumes verified input whose sharding
// annotations are consistent with the ops' loops (as shard-tp writes them);
// nodes without annotations are replicated. Backward communication is the
// autodiff lowering's (docs/Planner.md).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/ShardGraph.h"

#include "ir/Graph.h"
#include "ir/OpLoops.h"

#include "llvm/ADT/DenseMap.h"

#include <map>

using namespace autopar;
using namespace llvm;

namespace {

constexpr int Replicated = LayoutReplicated, Partial = LayoutPartial;

class InsertCollectivesPass : public Pass {
public:
  InsertCollectivesPass() {
    Options.bind("axis", &Axis, "Mesh axis of the tensor-parallel group");
  }
  StringRef getArgument() const override { return "insert-collectives"; }
  LogicalResult run(Module &M, DiagnosticEngine &Diag) override;

private:
  LogicalResult runOnGraph(Graph &G, DiagnosticEngine &Diag);

  std::string Axis = "tp";
};

std::optional<int64_t> stageOf(const Node *N) {
  if (!N)
    return std::nullopt;
  const Attribute *A = N->getAttr("stage");
  if (!A || !A->isa(Attribute::Kind::Int))
    return std::nullopt;
  return A->getInt();
}

} // namespace

LogicalResult InsertCollectivesPass::run(Module &M, DiagnosticEngine &Diag) {
  for (const std::unique_ptr<Graph> &G : M.getGraphs())
    if (failed(runOnGraph(*G, Diag)))
      return failure();
  return success();
}

LogicalResult InsertCollectivesPass::runOnGraph(Graph &G,
                                                DiagnosticEngine &Diag) {
  // (value, layout) and (value, stage) conversions already made.
  std::map<std::pair<Value *, int>, Value *> Converted;
  std::map<std::pair<Value *, int64_t>, Value *> Moved;
  std::vector<Node *> Order;
  for (Node &N : G.getNodes())
    Order.push_back(&N);
  for (Node *N : Order) {
    std::optional<OpLoops> L = getOpLoops(*N);
    int Loop = L ? getAnnotatedSplitLoop(*N, *L, Axis) : OpLoops::NoLoop;
    std::optional<int64_t> Stage = stageOf(N);
    for (unsigned I = 0, E = N->getNumOperands(); I != E; ++I) {
      Value *O = N->getOperand(I);
      Node *Producer = O ? O->getDefiningNode() : nullptr;
      if (!Producer)
        continue;
      // Pipeline: a value from another stage is sent to this one, through
      // every stage between (each hands it on to the next).
      std::optional<int64_t> From = stageOf(Producer);
      if (Stage && From && *From != *Stage) {
        int64_t Step = *Stage > *From ? 1 : -1;
        Value *At = O;
        for (int64_t Dst = *From + Step;; Dst += Step) {
          auto [It, New] = Moved.insert({{O, Dst}, nullptr});
          if (New) {
            AttrDict Attrs;
            Attrs.set("src_stage", Attribute::getInt(Dst - Step));
            Attrs.set("dst_stage", Attribute::getInt(Dst));
            Attrs.set("stage", Attribute::getInt(Dst));
            if (const Attribute *S = Producer->getAttr("sharding"))
              if (!S->isa(Attribute::Kind::List))
                Attrs.set("sharding", *S);
            Node *Send = G.createNode(
                OpId::SendRecv, {At}, {O->getType()}, std::move(Attrs),
                {G.getUniqueName((O->getName() + ".stage" + Twine(Dst)).str())},
                N);
            It->second = Send->getResult(0);
          }
          At = It->second;
          if (Dst == *Stage)
            break;
        }
        N->setOperand(I, At);
        O = At;
        Producer = O->getDefiningNode();
      }
      // Tensor parallelism: the layout this node reads against the one
      // its producer wrote (a Shape reads only the type: any layout).
      if (readsOnlyShape(*N, I))
        continue;
      std::string Mesh;
      unsigned R = O->getResultIndex();
      int Have =
          getAnnotatedLayout(Producer->getAttr("sharding"), R, Axis, Mesh);
      if (Mesh.empty())
        continue;
      int Want = Replicated;
      if (L && Loop != OpLoops::NoLoop) {
        auto Pos = find(L->Operands[I], Loop);
        if (Pos != L->Operands[I].end())
          Want = int(Pos - L->Operands[I].begin());
      }
      std::optional<Collective> Kind = getReshardCollective(Have, Want);
      if (!Kind)
        continue;
      auto [It, New] = Converted.insert({{O, Want}, nullptr});
      if (New) {
        OpId Op = OpId::AllReduce;
        AttrDict Attrs;
        Attrs.set("mesh", Attribute::getString(Mesh));
        Attrs.set("axis", Attribute::getString(Axis));
        switch (*Kind) {
        case Collective::AllReduce:
          break;
        case Collective::ReduceScatter:
          Op = OpId::ReduceScatter;
          Attrs.set("dim", Attribute::getInt(Want));
          break;
        case Collective::AllGather:
          Op = OpId::AllGather;
          Attrs.set("dim", Attribute::getInt(Have));
          break;
        case Collective::AllToAll:
          Op = OpId::AllToAll;
          Attrs.set("src_dim", Attribute::getInt(Have));
          Attrs.set("dst_dim", Attribute::getInt(Want));
          break;
        case Collective::SendRecv:
        case Collective::Broadcast:
          llvm_unreachable("not a layout change");
        }
        Attrs.set("sharding",
                  makeSharding(Want, O->getType().getRank(), Mesh, Axis));
        if (Stage)
          Attrs.set("stage", Attribute::getInt(*Stage));
        if (const Attribute *Layer = N->getAttr("layer"))
          Attrs.set("layer", *Layer);
        StringRef Suffix = Op == OpId::AllReduce       ? ".allreduce"
                           : Op == OpId::ReduceScatter ? ".reducescatter"
                           : Op == OpId::AllGather     ? ".allgather"
                                                       : ".alltoall";
        Node *C =
            G.createNode(Op, {O}, {O->getType()}, std::move(Attrs),
                         {G.getUniqueName((O->getName() + Suffix).str())}, N);
        It->second = C->getResult(0);
      }
      N->setOperand(I, It->second);
    }
  }
  // Outputs the solver leaves as partial sums (a head split over the hidden
  // dimension: the solver costs their sum) are all-reduced, under their
  // names.
  for (unsigned I = 0, E = G.getOutputs().size(); I != E; ++I) {
    Value *Out = G.getOutputs()[I];
    Node *Producer = Out->getDefiningNode();
    std::string Mesh;
    if (!Producer ||
        getAnnotatedLayout(Producer->getAttr("sharding"), Out->getResultIndex(),
                           Axis, Mesh) != Partial)
      continue;
    AttrDict Attrs;
    Attrs.set("mesh", Attribute::getString(Mesh));
    Attrs.set("axis", Attribute::getString(Axis));
    Attrs.set("sharding",
              makeSharding(Replicated, Out->getType().getRank(), Mesh, Axis));
    for (StringRef Name : {"layer", "stage"})
      if (const Attribute *A = Producer->getAttr(Name))
        Attrs.set(Name, *A);
    std::string Name = Out->getName().str();
    G.renameValue(Out, G.getUniqueName(Name + ".partial"));
    Node *Sum = G.createNode(OpId::AllReduce, {Out}, {Out->getType()},
                             std::move(Attrs), {Name});
    G.setOutput(I, Sum->getResult(0));
  }
  (void)Diag;
  return success();
}

std::unique_ptr<Pass> autopar::createInsertCollectivesPass() {
  return std::make_unique<InsertCollectivesPass>();
}
