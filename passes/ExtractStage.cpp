//===- ExtractStage.cpp - One pipeline stage of a planned graph -----------===//
//
// `extract-stage{stage=S vpp=V}` rebuilds a planned graph (nodes annotated
// with their virtual `stage`, stage boundaries as SendRecv nodes:
// insert-collectives) as the forward graph of pipeline rank S alone, the
// graph a rank's training program is lowered from. With V = 1 the rank is
// virtual stage S; with V > 1 (interleaved schedules) the graph has P * V
// virtual stages and rank S holds V model chunks, chunk c being virtual
// stage c * P + S (Megatron-LM's interleaving). Per virtual stage j of the
// rank:
//   - nodes annotated `stage = j` are kept, with the nodes without a stage
//     (constants, weight transposes, cached masks, shape arithmetic) that
//     they need, cloned into each stage that needs them (a second copy on
//     one rank is named `<name>.chunk<c>`);
//   - a SendRecv into j becomes a graph input of its result's name and type
//     (the activation received), after the graph's own inputs, in chunk
//     order;
//   - a SendRecv out of j makes its operand a graph output (the activation
//     sent), in chunk order; the rank holding the last virtual stage has the
//     graph's outputs first;
//   - the graph's first input (the token ids) stays on the ranks of the
//     first virtual stage and of the last, whose loss needs the labels;
//     other inputs stay where they are used; parameters stay where they are
//     used, with their annotations and data.
// With V > 1 every kept node, and each received input, is annotated with
// its virtual `stage` j (the chunk is j / P, what schedule-pipeline
// schedules by), and transfers must go from one virtual stage to the next.
// A kept node that reads a value of another stage without a transfer is an
// error naming both.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace autopar;
using namespace llvm;

namespace {

struct ExtractStageOptions {
  int64_t Stage = 0;
  /// Model chunks per pipeline rank (virtual stages per rank).
  int64_t VPP = 1;

  Error validate() const {
    if (Stage < 0)
      return createStringError(inconvertibleErrorCode(),
                               "extract-stage: stage must be >= 0");
    if (VPP < 1)
      return createStringError(inconvertibleErrorCode(),
                               "extract-stage: vpp must be >= 1");
    return Error::success();
  }
};

class ExtractStagePass : public Pass {
public:
  ExtractStagePass() {
    Options.bind("stage", &Opts.Stage,
                 "The pipeline stage (with vpp > 1: rank) to keep");
    Options.bind("vpp", &Opts.VPP,
                 "Virtual stages (model chunks) per pipeline rank");
  }

  StringRef getArgument() const override { return "extract-stage"; }
  Error validateOptions() override { return Opts.validate(); }

  LogicalResult run(Module &M, DiagnosticEngine &Diag) override {
    for (size_t I = 0; I != M.getGraphs().size(); ++I) {
      Expected<std::unique_ptr<Graph>> New = extract(*M.getGraphs()[I]);
      if (!New) {
        Diag.error(M.getGraphs()[I]->getLoc(),
                   "extract-stage: graph @" + M.getGraphs()[I]->getName() +
                       ": " + toString(New.takeError()));
        return failure();
      }
      M.replaceGraph(I, std::move(*New));
    }
    return success();
  }

private:
  Expected<std::unique_ptr<Graph>> extract(const Graph &G);

  ExtractStageOptions Opts;
};

/// What one virtual stage of the rank keeps.
struct StagePart {
  int64_t Stage = 0;
  SmallPtrSet<const Node *, 32> Keep;
  SmallVector<const Node *, 4> Incoming, Outgoing;
  SmallPtrSet<const Value *, 32> Needed;
};

} // namespace

static std::optional<int64_t> getIntAttr(const Node &N, StringRef Name) {
  if (const Attribute *A = N.getAttrs().get(Name))
    if (A->isa(Attribute::Kind::Int))
      return A->getInt();
  return std::nullopt;
}

Expected<std::unique_ptr<Graph>> ExtractStagePass::extract(const Graph &G) {
  auto Fail = [](const Twine &Why) {
    return createStringError(inconvertibleErrorCode(), Why);
  };
  int64_t S = Opts.Stage, V = Opts.VPP, Last = 0;
  bool Interleaved = V > 1;
  for (const Node &N : G.getNodes())
    if (std::optional<int64_t> St = getIntAttr(N, "stage"))
      Last = std::max(Last, *St);
  // The virtual stages this rank holds, in chunk order.
  SmallVector<StagePart, 2> Parts;
  if (!Interleaved) {
    if (S > Last)
      return Fail("has stages 0.." + Twine(Last) + ", not " + Twine(S));
    Parts.emplace_back();
    Parts.back().Stage = S;
  } else {
    int64_t Virtual = Last + 1;
    if (Virtual % V || Virtual / V < 2)
      return Fail("has " + Twine(Virtual) +
                  " virtual stages, not 2 or more "
                  "pipeline ranks of vpp=" +
                  Twine(V));
    int64_t P = Virtual / V;
    if (S >= P)
      return Fail("has pipeline ranks 0.." + Twine(P - 1) + " (" +
                  Twine(Virtual) + " virtual stages, vpp=" + Twine(V) +
                  "), not " + Twine(S));
    Parts.resize(V);
    for (int64_t C = 0; C != V; ++C)
      Parts[C].Stage = C * P + S;
  }
  auto Holds = [&](int64_t Stage) {
    return any_of(Parts, [&](const StagePart &P) { return P.Stage == Stage; });
  };

  // What stays: each virtual stage's nodes, then (walking backwards) the
  // stage-less nodes it needs.
  SmallVector<const Node *, 256> All;
  for (const Node &N : G.getNodes())
    All.push_back(&N);
  for (StagePart &Part : Parts) {
    int64_t J = Part.Stage;
    for (const Node *N : All) {
      if (N->getOp() == OpId::SendRecv) {
        std::optional<int64_t> Src = getIntAttr(*N, "src_stage"),
                               Dst = getIntAttr(*N, "dst_stage");
        if (Dst == J)
          Part.Incoming.push_back(N);
        if (Src == J)
          Part.Outgoing.push_back(N);
        if (Interleaved && (Dst == J || Src == J) && Src && Dst &&
            *Dst != *Src + 1)
          return Fail("transfer %" + N->getResult(0)->getName() +
                      " goes from virtual stage " + Twine(*Src) + " to " +
                      Twine(*Dst) +
                      "; interleaved programs send to the next one only");
        continue;
      }
      if (getIntAttr(*N, "stage") == J)
        Part.Keep.insert(N);
    }
    if (J == Last)
      for (const Value *Out : G.getOutputs())
        Part.Needed.insert(Out);
    for (const Node *N : Part.Outgoing)
      Part.Needed.insert(N->getOperand(0));
    for (const Node *N : reverse(All)) {
      bool Kept = Part.Keep.count(N);
      if (!Kept && !getIntAttr(*N, "stage") && N->getOp() != OpId::SendRecv)
        for (const Value *R : N->getResults())
          if (Part.Needed.count(R)) {
            Part.Keep.insert(N);
            Kept = true;
            break;
          }
      if (Kept)
        for (const Value *Op : N->getOperands())
          if (Op)
            Part.Needed.insert(Op);
    }
  }
  auto AnyNeeds = [&](const Value *X) {
    return any_of(Parts, [&](const StagePart &P) { return P.Needed.count(X); });
  };

  auto New = std::make_unique<Graph>(G.getName());
  New->setLoc(G.getLoc());
  for (const Mesh &M : G.getMeshes())
    New->addMesh(M);
  DenseMap<const Value *, Value *> Map;
  for (const std::unique_ptr<Value> &In : G.getInputs()) {
    bool First = In.get() == G.getInputs().front().get();
    if (!AnyNeeds(In.get()) && !(First && (Holds(0) || Holds(Last))))
      continue;
    Value *NewIn = New->addInput(In->getName(), In->getType());
    NewIn->getAttrs() = In->getAttrs();
    Map[In.get()] = NewIn;
  }
  // Received activations, per virtual stage (only its nodes read them).
  std::vector<DenseMap<const Value *, Value *>> Received(Parts.size());
  for (unsigned C = 0; C != Parts.size(); ++C)
    for (const Node *N : Parts[C].Incoming) {
      const Value *R = N->getResult(0);
      Value *NewIn = New->addInput(R->getName(), R->getType());
      // How the activation lies over the tensor-parallel axis (localize-tp).
      if (const Attribute *Layout = N->getAttr("sharding"))
        NewIn->getAttrs().set("sharding", *Layout);
      if (Interleaved)
        NewIn->getAttrs().set("stage", Attribute::getInt(Parts[C].Stage));
      Received[C][R] = NewIn;
    }
  for (const std::unique_ptr<Value> &P : G.getParams()) {
    if (!AnyNeeds(P.get()))
      continue;
    Value *NewP =
        New->addParam(P->getName(), P->getType(), P->getWeightSource());
    NewP->getAttrs() = P->getAttrs();
    Map[P.get()] = NewP;
  }
  std::vector<DenseMap<const Value *, Value *>> Maps(Parts.size(), Map);
  for (unsigned C = 0; C != Parts.size(); ++C) {
    const StagePart &Part = Parts[C];
    DenseMap<const Value *, Value *> &CMap = Maps[C];
    for (auto &[From, To] : Received[C])
      CMap[From] = To;
    for (const Node *N : All) {
      if (!Part.Keep.count(N))
        continue;
      SmallVector<Value *, 6> Operands;
      for (const Value *Op : N->getOperands()) {
        if (!Op) {
          Operands.push_back(nullptr);
          continue;
        }
        Value *M = CMap.lookup(Op);
        if (!M) {
          const Node *From = Op->getDefiningNode();
          return Fail("node '" + N->getName() + "' of stage " +
                      Twine(Part.Stage) + " reads %" + Op->getName() +
                      (From && getIntAttr(*From, "stage")
                           ? " of stage " + Twine(*getIntAttr(*From, "stage"))
                           : Twine("")) +
                      " without a transfer (SendRecv) between them");
        }
        Operands.push_back(M);
      }
      SmallVector<TensorType, 3> Types;
      SmallVector<std::string, 3> Names;
      for (const Value *R : N->getResults()) {
        Types.push_back(R->getType());
        // A stage-less node cloned into a second chunk of the rank.
        Names.push_back(New->isNameUsed(R->getName())
                            ? New->getUniqueName(R->getName().str() + ".chunk" +
                                                 std::to_string(C))
                            : R->getName().str());
      }
      AttrDict Attrs = N->getAttrs();
      if (Interleaved && !Attrs.get("stage"))
        Attrs.set("stage", Attribute::getInt(Part.Stage));
      Node *Copy =
          New->createNode(N->getOp(), Operands, Types, std::move(Attrs), Names);
      Copy->setName(N->getName());
      Copy->setLoc(N->getLoc());
      for (unsigned I = 0; I != Copy->getNumResults(); ++I)
        CMap[N->getResult(I)] = Copy->getResult(I);
    }
  }
  SmallVector<Value *, 4> Outputs;
  for (unsigned C = 0; C != Parts.size(); ++C)
    if (Parts[C].Stage == Last)
      for (const Value *Out : G.getOutputs())
        Outputs.push_back(Maps[C].lookup(Out));
  for (unsigned C = 0; C != Parts.size(); ++C) {
    size_t Before = Outputs.size();
    for (const Node *N : Parts[C].Outgoing) {
      Value *Out = Maps[C].lookup(N->getOperand(0));
      // A received activation that this stage hands on to the next (a
      // value read two stages later): a copy, so that the gradient coming
      // back for it and the one sent on are distinct values.
      if (Out && Out->isInput()) {
        AttrDict Attrs;
        if (const Attribute *Layout = Out->getAttrs().get("sharding"))
          Attrs.set("sharding", *Layout);
        Attrs.set("stage", Attribute::getInt(Parts[C].Stage));
        Out = New->createNode(
                     OpId::Identity, {Out}, {Out->getType()}, std::move(Attrs),
                     {New->getUniqueName(Out->getName().str() + ".relay")})
                  ->getResult(0);
      }
      Outputs.push_back(Out);
    }
    if (Parts[C].Stage != Last && Outputs.size() == Before)
      return Fail("stage " + Twine(Parts[C].Stage) +
                  " has nothing to send or output");
  }
  if (Outputs.empty() || is_contained(Outputs, nullptr))
    return Fail("stage " + Twine(S) + " has nothing to send or output");
  New->setOutputs(Outputs);
  return Expected<std::unique_ptr<Graph>>(std::move(New));
}

std::unique_ptr<Pass> autopar::createExtractStagePass() {
  return std::make_unique<ExtractStagePass>();
}
