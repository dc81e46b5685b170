//===- SchedulePipeline.cpp - A pipeline stage's step, in schedule order --===//
//
// `schedule-pipeline{stage=S stages=P micro-batches=M
// schedule=1f1b|gpipe|interleaved vpp=V tied=...}` turns the training graph
// of one pipeline rank for one micro-batch (extract-stage, then autodiff:
// `loss` on the last rank, `seed=1` before it, `input-grads=1` after the
// first; with V > 1 also `seed-outputs=1` and `input-grads=1` everywhere)
// into the rank's whole step as one straight-line program:
//   - the forward part (what the activations sent on, or the logits on the
//     last rank, need) and the backward part (the rest) of each model chunk
//     are cloned per micro-batch (`.mb<k>` names) in the order of the
//     schedule: GPipe runs every forward, then every backward; 1F1B
//     (Narayanan et al. 2021, PipeDream-Flush) runs min(P - S - 1, M)
//     forwards, then alternates one forward and one backward, then the
//     remaining backwards; interleaved 1F1B (V > 1 chunks per rank, M a
//     multiple of P; Megatron-LM's forward_backward_pipelining_with_
//     interleaving) runs its k-th forward on chunk (k / P) mod V and
//     micro-batch (k / (P V)) P + k mod P, its k-th backward on chunk
//     V - 1 - (k / P) mod V of the same micro-batch, with
//     min(2 (P - S - 1) + (V - 1) P, M V) warm-up forwards (all M V of
//     them when M = P, as Megatron-LM does), then one forward and one
//     backward alternately, then the remaining backwards;
//   - each forward receives its input activation from the previous
//     (virtual) stage (Recv) and sends its output to the next (Send); each
//     backward receives its output's gradient from the next stage and sends
//     its input's gradient to the previous one; with V > 1 chunk c of rank S
//     is virtual stage c P + S, its neighbours are on ranks (S - 1) mod P and
//     (S + 1) mod P, and every such transfer has a `tag` 1 + 2 (k V + c') + d,
//     c' the chunk of the lower of the two virtual stages, d 1 for gradients:
//     one pair of ranks carries several chunks' and micro-batches' tensors in
//     orders that differ between them. The token input grows to the M
//     micro-batches' rows, each micro-batch's first forward reading its
//     rows (the first stage's ids, the last stage's labels);
//   - which chunk a node belongs to comes from its `stage` annotation
//     (virtual stage j: chunk j / P; extract-stage, autodiff copies it) or
//     from its operands; nodes of no chunk (constants) are cloned in the
//     first part of a micro-batch that uses them, a sum of gradients from
//     several chunks (a parameter two chunks use) after the last of their
//     backwards;
//   - parameter gradients are summed over the micro-batches in order; a
//     parameter that several ranks hold (`tied=NAME@A+B[+C...];...`: tied
//     embeddings, rotary tables every stage reads) has its summed gradient
//     sent by each holder to the others and the holders' sums added in rank
//     order on all of them, so all apply the same update (the parameter
//     is annotated `tied_holders`, their count);
//   - the last rank sums the losses and sends the sum to every other rank,
//     whose `loss` output is what it receives.
// Outputs: `loss`, then `grad.<param>`; insert-grad-sync and
// insert-optimizer apply as on a whole model. Untagged transfers match in
// program order per pair of ranks; sends are non-blocking in the runtime,
// so the schedules do not deadlock. Assumes static shapes.
//
//===----------------------------------------------------------------------===//

#include "passes/GradientRules.h"
#include "passes/Passes.h"

#include "ir/Diagnostics.h"
#include "ir/OpRegistry.h"
#include "ir/PipelineOrder.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"

using namespace autopar;
using namespace llvm;

namespace {

struct SchedulePipelineOptions {
  int64_t Stage = 0, Stages = 1, MicroBatches = 1;
  std::string Schedule = "1f1b";
  /// Model chunks per rank (virtual stages per rank); > 1 for interleaved.
  int64_t VPP = 1;
  /// `NAME@A+B` entries, separated by ';': parameters held by two stages.
  std::string Tied;

  Error validate() const {
    auto Bad = [](const Twine &Why) {
      return createStringError(inconvertibleErrorCode(),
                               "schedule-pipeline: " + Why);
    };
    if (Stages < 1 || Stage < 0 || Stage >= Stages)
      return Bad("stage must be in [0, stages)");
    if (MicroBatches < 1)
      return Bad("micro-batches must be 1 or more");
    if (Schedule != "1f1b" && Schedule != "gpipe" && Schedule != "interleaved")
      return Bad("schedule must be 1f1b, gpipe or interleaved, got '" +
                 Schedule + "'");
    if (VPP < 1)
      return Bad("vpp must be 1 or more");
    if ((Schedule == "interleaved") != (VPP > 1))
      return Bad("schedule=interleaved goes with vpp > 1, and vpp > 1 with "
                 "schedule=interleaved (got schedule=" +
                 Schedule + " vpp=" + std::to_string(VPP) + ")");
    if (VPP > 1 && Stages < 2)
      return Bad("the interleaved schedule needs 2 or more stages");
    if (VPP > 1 && MicroBatches % Stages)
      return Bad("the interleaved schedule needs micro-batches (" +
                 std::to_string(MicroBatches) +
                 ") to be a multiple of stages (" + std::to_string(Stages) +
                 ")");
    return Error::success();
  }
};

class SchedulePipelinePass : public Pass {
public:
  SchedulePipelinePass() {
    Options.bind("stage", &Opts.Stage, "This pipeline stage (rank)");
    Options.bind("stages", &Opts.Stages, "Pipeline stages (ranks)");
    Options.bind("micro-batches", &Opts.MicroBatches, "Micro-batches per step");
    Options.bind("schedule", &Opts.Schedule, "1f1b, gpipe or interleaved");
    Options.bind("vpp", &Opts.VPP,
                 "Model chunks per rank (interleaved schedule)");
    Options.bind("tied", &Opts.Tied,
                 "Parameters two stages hold: NAME@A+B, ';'-separated");
  }

  StringRef getArgument() const override { return "schedule-pipeline"; }
  Error validateOptions() override { return Opts.validate(); }

  LogicalResult run(Module &M, DiagnosticEngine &Diag) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      if (Error E = runOnGraph(*G)) {
        Diag.error(G->getLoc(), "schedule-pipeline: graph @" + G->getName() +
                                    ": " + toString(std::move(E)));
        return failure();
      }
    return success();
  }

private:
  Error runOnGraph(Graph &G);

  SchedulePipelineOptions Opts;
};

/// One entry of the schedule: micro-batch K's forward or backward through
/// the rank's model chunk Chunk.
struct Slot {
  bool Forward;
  int64_t Chunk;
  int64_t K;
};

} // namespace

/// The rank's order as the planner's simulation priced it (one function,
/// ir/PipelineOrder.h): each action's local chunk is its virtual stage
/// divided by the number of stages.
static std::vector<Slot> getSchedule(StringRef Kind, int64_t Stage,
                                     int64_t Stages, int64_t VPP, int64_t M) {
  ScheduleKind K = Kind == "gpipe"         ? ScheduleKind::GPipe
                   : Kind == "interleaved" ? ScheduleKind::Interleaved
                                           : ScheduleKind::OneFOneB;
  std::vector<Slot> Order;
  for (const PipelineAction &A : getRankOrder(
           K, unsigned(Stages), unsigned(VPP), unsigned(M), unsigned(Stage)))
    Order.push_back(
        {!A.Backward, int64_t(A.Stage) / Stages, int64_t(A.MicroBatch)});
  return Order;
}

Error SchedulePipelinePass::runOnGraph(Graph &G) {
  auto Fail = [](const Twine &Why) {
    return createStringError(inconvertibleErrorCode(), Why);
  };
  int64_t S = Opts.Stage, P = Opts.Stages, M = Opts.MicroBatches, V = Opts.VPP;
  bool IsLast = S == P - 1, IsFirst = S == 0, Interleaved = V > 1;

  // The graph's parts.
  Value *Tokens = nullptr;
  SmallVector<Value *, 2> Received, Seeds;
  Value *Loss = nullptr;
  SmallVector<Value *, 32> ParamGrads;
  SmallVector<Value *, 2> InputGrads, Sent, Forward;
  // Of each input gradient, the received activation it is the gradient of.
  DenseMap<Value *, Value *> GradOf;
  for (Value *Out : G.getOutputs()) {
    StringRef Name = Out->getName();
    if (Name == "loss") {
      Loss = Out;
    } else if (Name.startswith("grad.")) {
      Value *Of = G.lookupValue(Name.drop_front(5));
      if (Of && Of->isParam()) {
        ParamGrads.push_back(Out);
      } else if (Of && Of->isInput()) {
        InputGrads.push_back(Out);
        GradOf[Out] = Of;
      } else {
        return Fail("output %" + Name + " is the gradient of nothing known");
      }
    } else {
      Forward.push_back(Out);
    }
  }
  if (IsLast != (Loss != nullptr))
    return Fail(IsLast ? "the last stage needs the `loss` output (autodiff)"
                       : "only the last stage has a `loss` (autodiff seed=1)");
  // What is sent on: every forward output but the last rank's logits.
  if (!IsLast)
    Sent = Forward;
  else if (Interleaved)
    Sent.append(std::next(Forward.begin()), Forward.end());
  for (const std::unique_ptr<Value> &In : G.getInputs()) {
    StringRef Name = In->getName();
    // Optimizer scalars (autodiff{loss-scale=1}'s) are read as they are.
    if (Name.startswith("optimizer."))
      continue;
    if (!isFloatElementType(In->getType().getElementType())) {
      if (Tokens)
        return Fail("has two integer inputs; one (the tokens) is expected");
      Tokens = In.get();
    } else if (Name.startswith("grad.")) {
      Seeds.push_back(In.get());
    } else {
      Received.push_back(In.get());
    }
  }
  if (!Interleaved && IsFirst != Received.empty())
    return Fail(IsFirst ? "the first stage receives no activation"
                        : "a stage after the first receives an activation");
  if ((!Interleaved && IsLast != Seeds.empty()) || Seeds.size() != Sent.size())
    return Fail(Interleaved
                    ? "needs one gradient input per activation sent "
                      "(autodiff seed-outputs=1)"
                    : "needs one gradient input per activation sent (autodiff "
                      "seed=1) before the last stage, none on it");
  if ((Interleaved || !IsFirst) && InputGrads.size() != Received.size())
    return Fail("needs the gradients of the received activations "
                "(autodiff input-grads=1)");
  for (Value *In : Received)
    if (!In->getType().hasStaticShape())
      return Fail("%" + In->getName() + " has no static shape");

  // The forward part: what the forward outputs need; the rest is backward.
  SmallPtrSet<const Value *, 32> Needed(Forward.begin(), Forward.end());
  SmallPtrSet<const Node *, 32> IsForward;
  SmallVector<Node *, 256> Body;
  for (Node &N : G.getNodes())
    Body.push_back(&N);
  for (Node *N : reverse(Body)) {
    if (none_of(N->getResults(), [&](Value *R) { return Needed.count(R); }))
      continue;
    IsForward.insert(N);
    for (Value *Op : N->getOperands())
      if (Op)
        Needed.insert(Op);
  }
  for (Value *Seed : Seeds)
    if (Needed.count(Seed))
      return Fail("the forward part reads the gradient input %" +
                  Seed->getName());

  // Model chunks: every value's chunk (none: a constant, a parameter, what
  // only they compute), and per chunk what it receives, sends, seeds and
  // sends back. With one chunk, everything is chunk 0.
  DenseMap<const Value *, int64_t> ChunkOf;
  SmallVector<SmallVector<Value *, 2>, 2> ReceivedBy(V), SentBy(V), SeedsOf(V),
      InputGradsOf(V);
  DenseMap<const Value *, Value *> SentFor; // seed input -> sent output
  for (Value *Seed :
       Interleaved ? ArrayRef<Value *>(Seeds) : ArrayRef<Value *>()) {
    Value *Of = G.lookupValue(Seed->getName().drop_front(5));
    if (!Of || !is_contained(Sent, Of))
      return Fail("gradient input %" + Seed->getName() +
                  " is not the gradient of an activation sent");
    SentFor[Seed] = Of;
  }
  auto ChunkOfStage = [&](const Twine &What,
                          const Attribute *A) -> Expected<int64_t> {
    if (!A || !A->isa(Attribute::Kind::Int))
      return Fail(What + " has no virtual `stage` (extract-stage vpp=" +
                  Twine(V) + ")");
    int64_t J = A->getInt();
    if (J % P != S || J / P >= V)
      return Fail(What + " is of virtual stage " + Twine(J) +
                  ", which is not on rank " + Twine(S) + " of " + Twine(P) +
                  " with vpp=" + Twine(V));
    return J / P;
  };
  // Where each node runs: parts F0 < F1 < ... < F(V-1) < B(V-1) < ... < B0,
  // the order a micro-batch goes through them on this rank.
  auto FwdPart = [](int64_t C) { return C; };
  auto BwdPart = [&](int64_t C) { return 2 * V - 1 - C; };
  DenseMap<const Node *, int64_t> PartOf;
  if (!Interleaved) {
    for (Node *N : Body)
      PartOf[N] = IsForward.count(N) ? FwdPart(0) : BwdPart(0);
    ReceivedBy[0] = Received;
    SentBy[0] = Sent;
    SeedsOf[0] = Seeds;
    InputGradsOf[0] = InputGrads;
  } else {
    for (Value *In : Received) {
      Expected<int64_t> C = ChunkOfStage(
          "received activation %" + In->getName(), In->getAttrs().get("stage"));
      if (!C)
        return C.takeError();
      ChunkOf[In] = *C;
      ReceivedBy[*C].push_back(In);
    }
    // A value's chunk and the part that produces it; seeds are their sent
    // activation's chunk, produced before its backward.
    DenseMap<const Value *, int64_t> PartOfValue;
    for (Value *In : Received)
      PartOfValue[In] = FwdPart(ChunkOf[In]);
    auto Lookup = [&](Value *X) -> std::optional<std::pair<int64_t, int64_t>> {
      if (SentFor.count(X)) {
        auto It = ChunkOf.find(SentFor[X]);
        if (It == ChunkOf.end())
          return std::nullopt;
        return std::make_pair(It->second, BwdPart(It->second));
      }
      auto It = ChunkOf.find(X);
      if (It == ChunkOf.end())
        return std::nullopt;
      return std::make_pair(It->second, PartOfValue.lookup(X));
    };
    for (Node *N : Body) {
      std::optional<int64_t> C;
      bool Annotated = false;
      if (const Attribute *A = N->getAttr("stage")) {
        Expected<int64_t> Of = ChunkOfStage("node '" + N->getName() + "'", A);
        if (!Of)
          return Of.takeError();
        C = *Of;
        Annotated = true;
      }
      // Of an unannotated node whose operands come from several chunks
      // (the sum of a parameter's gradients from two chunks), the last
      // part that produces them.
      std::optional<int64_t> LastPart;
      bool Mixed = false;
      for (Value *Op : N->getOperands()) {
        std::optional<std::pair<int64_t, int64_t>> Found =
            Op ? Lookup(Op) : std::nullopt;
        if (!Found)
          continue;
        if (C && *C != Found->first) {
          if (Annotated || IsForward.count(N))
            return Fail("node '" + N->getName() + "' (" +
                        getOpInfo(N->getOp()).Name + ") of model chunk " +
                        Twine(*C) + " reads %" + Op->getName() + " of chunk " +
                        Twine(Found->first));
          Mixed = true;
        }
        if (!Annotated)
          C = Found->first;
        LastPart = std::max(LastPart.value_or(0), Found->second);
      }
      if (!C)
        continue;
      int64_t Part = IsForward.count(N) ? FwdPart(*C) : BwdPart(*C);
      if (Mixed) {
        Part = std::max(*LastPart, BwdPart(V - 1));
        C = Part < V ? Part : 2 * V - 1 - Part;
      }
      PartOf[N] = Part;
      for (Value *R : N->getResults()) {
        ChunkOf[R] = *C;
        PartOfValue[R] = Part;
      }
    }
    auto ChunkOfValue = [&](Value *X, int64_t Default) {
      auto It = ChunkOf.find(X);
      return It == ChunkOf.end() ? Default : It->second;
    };
    for (Value *Out : Sent) {
      auto It = ChunkOf.find(Out);
      if (It == ChunkOf.end())
        return Fail("activation sent %" + Out->getName() +
                    " belongs to no model chunk");
      SentBy[It->second].push_back(Out);
    }
    for (Value *Seed : Seeds)
      SeedsOf[ChunkOf.lookup(SentFor[Seed])].push_back(Seed);
    // Every virtual stage but the first receives, every one but the last
    // sends.
    for (int64_t C = 0; C != V; ++C) {
      int64_t J = C * P + S;
      if ((J == 0) != ReceivedBy[C].empty())
        return Fail("virtual stage " + Twine(J) +
                    (J ? " receives no activation"
                       : " receives an activation; the first should not"));
      if ((J == P * V - 1) != SentBy[C].empty())
        return Fail("virtual stage " + Twine(J) +
                    (J == P * V - 1 ? " sends an activation; the last should "
                                      "not"
                                    : " sends no activation"));
    }
    for (Value *Grad : InputGrads) {
      auto It = ChunkOf.find(GradOf[Grad]);
      if (It == ChunkOf.end())
        return Fail("%" + Grad->getName() +
                    " is the gradient of no received activation");
      InputGradsOf[It->second].push_back(Grad);
    }
    // Where the step uses each value after its part: sends, sums.
    DenseMap<const Value *, int64_t> OutputUse;
    for (int64_t C = 0; C != V; ++C) {
      for (Value *Out : SentBy[C])
        OutputUse[Out] = FwdPart(C);
      for (Value *Grad : InputGradsOf[C])
        OutputUse[Grad] = BwdPart(C);
    }
    if (Loss)
      OutputUse[Loss] = BwdPart(ChunkOfValue(Loss, V - 1));
    for (Value *Grad : ParamGrads)
      OutputUse[Grad] = BwdPart(ChunkOfValue(Grad, 0));
    // Nodes of no chunk run in the first part that uses them (the last
    // when nothing does).
    DenseMap<const Value *, int64_t> FirstUse;
    auto Use = [&](const Value *X, int64_t Part) {
      auto [It, New] = FirstUse.try_emplace(X, Part);
      if (!New)
        It->second = std::min(It->second, Part);
    };
    for (auto &[X, Part] : OutputUse)
      Use(X, Part);
    for (Node *N : reverse(Body)) {
      auto It = PartOf.find(N);
      if (It == PartOf.end()) {
        int64_t Part = BwdPart(0);
        for (Value *R : N->getResults())
          if (FirstUse.count(R))
            Part = std::min(Part, FirstUse[R]);
        It = PartOf.try_emplace(N, Part).first;
      }
      for (Value *Op : N->getOperands())
        if (Op)
          Use(Op, It->second);
    }
  }

  // Tied parameters of this stage and the other stages that hold them.
  StringMap<SmallVector<int64_t, 4>> Partners;
  SmallVector<StringRef, 4> Entries;
  StringRef(Opts.Tied).split(Entries, ';', -1, false);
  for (StringRef Entry : Entries) {
    auto [Name, Where] = Entry.rsplit('@');
    SmallVector<StringRef, 4> Parts;
    Where.split(Parts, '+');
    SmallVector<int64_t, 4> Stages;
    for (StringRef Part : Parts) {
      int64_t X;
      if (Part.getAsInteger(10, X) || X < 0 || X >= P ||
          (!Stages.empty() && X <= Stages.back()))
        return Fail("tied entry '" + Entry +
                    "' is not NAME@A+B[+...] with increasing stages below " +
                    Twine(P));
      Stages.push_back(X);
    }
    if (Name.empty() || Stages.size() < 2)
      return Fail("tied entry '" + Entry + "' is not NAME@A+B[+...]");
    if (is_contained(Stages, S))
      for (int64_t X : Stages)
        if (X != S)
          Partners[Name].push_back(X);
  }

  // The token input grows to the step's rows.
  int64_t Rows = 0;
  if (Tokens) {
    SmallVector<int64_t, 4> Sizes = Tokens->getType().getStaticSizes();
    Rows = Sizes[0];
    Sizes[0] *= M;
    Tokens->setType(TensorType::get(Tokens->getType().getElementType(), Sizes));
  }
  // The received values and seeds become per-micro-batch Recv results; the
  // inputs themselves go unused.
  GradBuilder B(G);
  B.setForwardNode(nullptr);
  auto StageAttr = [](StringRef Name, int64_t X) {
    AttrDict A;
    A.set(Name, Attribute::getInt(X));
    return A;
  };
  std::vector<DenseMap<Value *, Value *>> Maps(M);
  DenseMap<Value *, Value *> Shared; // constants, cloned once
  auto Clone = [&](Node *N, int64_t K) {
    std::string Suffix = ".mb" + std::to_string(K);
    cloneForMicroBatch(G, N, Maps[K], Suffix, Suffix, Shared, K, M);
  };
  // Transfers between this rank's virtual stage and a neighbour: the rank
  // of the other stage, and with V > 1 the transfer's tag (the chunk of the
  // lower stage, the micro-batch, forward or backward).
  auto Transfer = [&](StringRef Name, int64_t Rank, int64_t LowerChunk,
                      int64_t K, bool Backward) {
    AttrDict A = StageAttr(Name, Rank);
    if (Interleaved)
      A.set("tag", Attribute::getInt(1 + 2 * (K * V + LowerChunk) +
                                     (Backward ? 1 : 0)));
    return A;
  };
  auto Recv = [&](Value *Like, AttrDict A, int64_t K) {
    Node *R = G.createNode(
        OpId::Recv, {}, {Like->getType()}, std::move(A),
        {G.getUniqueName(Like->getName().str() + ".mb" + std::to_string(K))});
    return R->getResult(0);
  };
  auto Send = [&](Value *X, AttrDict A) {
    G.createNode(OpId::Send, {X}, {}, std::move(A));
  };
  Value *LossSum = nullptr;
  SmallVector<Value *, 32> Sums(ParamGrads.size(), nullptr);
  // Neighbouring ranks; chunk c's previous virtual stage is on Prev, of
  // chunk c (c - 1 on rank 0), its next on Next, of chunk c (c + 1 from the
  // last rank).
  int64_t Prev = Interleaved ? (S + P - 1) % P : S - 1;
  int64_t Next = Interleaved ? (S + 1) % P : S + 1;
  auto Mapped = [&](DenseMap<Value *, Value *> &Map, Value *X) {
    Value *Y = Map.lookup(X);
    return Y ? Y : X;
  };
  for (Slot Item : getSchedule(Opts.Schedule, S, P, V, M)) {
    int64_t K = Item.K, C = Item.Chunk;
    int64_t PrevChunk = IsFirst ? C - 1 : C;
    DenseMap<Value *, Value *> &Map = Maps[K];
    int64_t Part = Item.Forward ? FwdPart(C) : BwdPart(C);
    if (Item.Forward) {
      if (Tokens && C == 0) {
        Expected<Value *> Rows_ =
            B.emit1(OpId::Slice, {Tokens, B.ints({K * Rows}),
                                  B.ints({(K + 1) * Rows}), B.ints({0})});
        if (!Rows_)
          return Rows_.takeError();
        Map[Tokens] = *Rows_;
      }
      for (Value *In : ReceivedBy[C])
        Map[In] = Recv(In, Transfer("src_stage", Prev, PrevChunk, K, false), K);
      for (Node *N : Body)
        if (PartOf.lookup(N) == Part)
          Clone(N, K);
      for (Value *Out : SentBy[C])
        Send(Mapped(Map, Out), Transfer("dst_stage", Next, C, K, false));
      continue;
    }
    for (Value *Seed : SeedsOf[C])
      Map[Seed] = Recv(Seed, Transfer("src_stage", Next, C, K, true), K);
    for (Node *N : Body)
      if (PartOf.lookup(N) == Part)
        Clone(N, K);
    for (Value *Grad : InputGradsOf[C])
      Send(Mapped(Map, Grad), Transfer("dst_stage", Prev, PrevChunk, K, true));
    auto InChunk = [&](Value *X, int64_t Default) {
      auto It = ChunkOf.find(X);
      return (It == ChunkOf.end() ? Default : It->second) == C;
    };
    if (Loss && (!Interleaved || InChunk(Loss, V - 1)))
      if (Error E = addToRunningSum(B, LossSum, Map.lookup(Loss)))
        return E;
    for (unsigned I = 0; I != ParamGrads.size(); ++I)
      if (!Interleaved || InChunk(ParamGrads[I], 0))
        if (Error E = addToRunningSum(B, Sums[I], Map.lookup(ParamGrads[I])))
          return E;
  }
  // Tied parameters: every holder sends its summed gradient to the others
  // and adds all of them in stage order, so all apply the same update.
  for (unsigned I = 0; I != ParamGrads.size(); ++I) {
    auto It = Partners.find(ParamGrads[I]->getName().drop_front(5));
    if (It == Partners.end())
      continue;
    // Its holders, for what counts the gradient once (clip-gradients).
    if (Value *Param = G.lookupValue(It->first()); Param && Param->isParam())
      Param->getAttrs().set("tied_holders",
                            Attribute::getInt(int64_t(It->second.size()) + 1));
    for (int64_t Other : It->second)
      Send(Sums[I], StageAttr("dst_stage", Other));
    SmallVector<std::pair<int64_t, Value *>, 4> Parts = {{S, Sums[I]}};
    for (int64_t Other : It->second) {
      Node *Peer = G.createNode(
          OpId::Recv, {}, {Sums[I]->getType()}, StageAttr("src_stage", Other),
          {G.getUniqueName(ParamGrads[I]->getName().str() + ".stage" +
                           std::to_string(Other))});
      Parts.push_back({Other, Peer->getResult(0)});
    }
    llvm::sort(Parts,
               [](const auto &A, const auto &B) { return A.first < B.first; });
    Value *Total = Parts.front().second;
    for (unsigned J = 1; J != Parts.size(); ++J) {
      Expected<Value *> Sum = B.add(Total, Parts[J].second);
      if (!Sum)
        return Sum.takeError();
      Total = *Sum;
    }
    Sums[I] = Total;
  }
  // Every stage reports the loss the last one computed.
  if (IsLast) {
    for (int64_t To = 0; To != P - 1; ++To)
      Send(LossSum, StageAttr("dst_stage", To));
  } else {
    Node *R =
        G.createNode(OpId::Recv, {}, {TensorType::get(ElementType::F32, {})},
                     StageAttr("src_stage", P - 1));
    LossSum = R->getResult(0);
  }

  // The one-micro-batch body is dead; the sums take the outputs' names.
  replaceStepOutputs(G, Body, LossSum, ParamGrads, Sums);
  // The received values and seeds are Recv results now.
  for (Value *In : Received)
    G.eraseInput(In);
  for (Value *In : Seeds)
    G.eraseInput(In);
  return Error::success();
}

std::unique_ptr<Pass> autopar::createSchedulePipelinePass() {
  return std::make_unique<SchedulePipelinePass>();
}
