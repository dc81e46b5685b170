//===- SchedulePipeline.cpp - A pipeline stage's step, in schedule order --===//
//
// `schedule-pipeline{stage=S stages=P micro-batches=M schedule=1f1b|gpipe
// tied=...}` turns the training graph of one pipeline stage for one
// micro-batch (extract-stage, then autodiff: `loss` on the last stage,
// `seed=1` before it, `input-grads=1` after the first) into the stage's
// whole step as one straight-line program:
//   - the forward part (what the activation sent on, or the logits on the
//     last stage, needs) and the backward part (the rest) are cloned per
//     micro-batch (`.mb<k>` names) in the order of the schedule: GPipe runs
//     every forward, then every backward; 1F1B (Narayanan et al. 2021,
//     PipeDream-Flush) runs min(P - S - 1, M) forwards, then alternates one
//     forward and one backward, then the remaining backwards;
//   - each forward receives its input activation from stage S - 1 (Recv)
//     and sends its output to S + 1 (Send); each backward receives its
//     output's gradient from S + 1 and sends its input's gradient to S - 1;
//     the token input grows to the M micro-batches' rows, each forward
//     reading its rows (the first stage's ids, the last stage's labels);
//   - parameter gradients are summed over the micro-batches in order; a
//     parameter that two stages hold (`tied=NAME@A+B;...`: tied embeddings)
//     has its summed gradient exchanged between them and added in stage
//     order on both, so both apply the same update;
//   - the last stage sums the losses and sends the sum to every other stage,
//     whose `loss` output is what it receives.
// Outputs: `loss`, then `grad.<param>`; insert-grad-sync and
// insert-optimizer apply as on a whole model. Transfers match in program
// order per pair of stages; sends are non-blocking in the runtime, so the
// schedules do not deadlock. Assumes static shapes and vpp = 1.
//
//===----------------------------------------------------------------------===//

#include "passes/GradientRules.h"
#include "passes/Passes.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"

using namespace autopar;
using namespace llvm;

namespace {

struct SchedulePipelineOptions {
  int64_t Stage = 0, Stages = 1, MicroBatches = 1;
  std::string Schedule = "1f1b";
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
    if (Schedule != "1f1b" && Schedule != "gpipe")
      return Bad("schedule must be 1f1b or gpipe, got '" + Schedule + "'");
    return Error::success();
  }
};

class SchedulePipelinePass : public Pass {
public:
  SchedulePipelinePass() {
    Options.bind("stage", &Opts.Stage, "This pipeline stage");
    Options.bind("stages", &Opts.Stages, "Pipeline stages");
    Options.bind("micro-batches", &Opts.MicroBatches, "Micro-batches per step");
    Options.bind("schedule", &Opts.Schedule, "1f1b or gpipe");
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

/// One entry of the schedule: micro-batch K's forward or backward.
struct Slot {
  bool Forward;
  int64_t K;
};

} // namespace

static std::vector<Slot> getSchedule(StringRef Kind, int64_t Stage,
                                     int64_t Stages, int64_t M) {
  std::vector<Slot> Order;
  if (Kind == "gpipe") {
    for (int64_t K = 0; K != M; ++K)
      Order.push_back({true, K});
    for (int64_t K = 0; K != M; ++K)
      Order.push_back({false, K});
    return Order;
  }
  int64_t Warmup = std::min(Stages - Stage - 1, M);
  for (int64_t K = 0; K != Warmup; ++K)
    Order.push_back({true, K});
  for (int64_t I = 0; I != M - Warmup; ++I) {
    Order.push_back({true, Warmup + I});
    Order.push_back({false, I});
  }
  for (int64_t K = M - Warmup; K != M; ++K)
    Order.push_back({false, K});
  return Order;
}

Error SchedulePipelinePass::runOnGraph(Graph &G) {
  auto Fail = [](const Twine &Why) {
    return createStringError(inconvertibleErrorCode(), Why);
  };
  int64_t S = Opts.Stage, P = Opts.Stages, M = Opts.MicroBatches;
  bool IsLast = S == P - 1, IsFirst = S == 0;

  // The graph's parts.
  Value *Tokens = nullptr;
  SmallVector<Value *, 2> Received, Seeds;
  StringMap<Value *> InputByName;
  for (const std::unique_ptr<Value> &In : G.getInputs())
    InputByName[In->getName()] = In.get();
  Value *Loss = nullptr;
  SmallVector<Value *, 32> ParamGrads;
  SmallVector<Value *, 2> InputGrads, Sent, Forward;
  for (Value *Out : G.getOutputs()) {
    StringRef Name = Out->getName();
    if (Name == "loss") {
      Loss = Out;
    } else if (Name.startswith("grad.")) {
      Value *Of = G.lookupValue(Name.drop_front(5));
      if (Of && Of->isParam())
        ParamGrads.push_back(Out);
      else if (Of && Of->isInput())
        InputGrads.push_back(Out);
      else
        return Fail("output %" + Name + " is the gradient of nothing known");
    } else {
      Forward.push_back(Out);
    }
  }
  if (IsLast != (Loss != nullptr))
    return Fail(IsLast ? "the last stage needs the `loss` output (autodiff)"
                       : "only the last stage has a `loss` (autodiff seed=1)");
  if (!IsLast)
    Sent = Forward;
  for (const std::unique_ptr<Value> &In : G.getInputs()) {
    StringRef Name = In->getName();
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
  if (IsFirst != Received.empty())
    return Fail(IsFirst ? "the first stage receives no activation"
                        : "a stage after the first receives an activation");
  if (IsLast != Seeds.empty() || Seeds.size() != Sent.size())
    return Fail("needs one gradient input per activation sent (autodiff "
                "seed=1) before the last stage, none on it");
  if (!IsFirst && InputGrads.size() != Received.size())
    return Fail("needs the gradients of the received activations "
                "(autodiff input-grads=1)");
  for (Value *V : Received)
    if (!V->getType().hasStaticShape())
      return Fail("%" + V->getName() + " has no static shape");

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
    for (Value *V : N->getOperands())
      if (V)
        Needed.insert(V);
  }
  for (Value *Seed : Seeds)
    if (Needed.count(Seed))
      return Fail("the forward part reads the gradient input %" +
                  Seed->getName());

  // Tied parameters of this stage and their partner stages.
  StringMap<int64_t> Partner;
  SmallVector<StringRef, 4> Entries;
  StringRef(Opts.Tied).split(Entries, ';', -1, false);
  for (StringRef Entry : Entries) {
    auto [Name, Where] = Entry.rsplit('@');
    auto [A, B] = Where.split('+');
    int64_t SA, SB;
    if (Name.empty() || A.getAsInteger(10, SA) || B.getAsInteger(10, SB))
      return Fail("tied entry '" + Entry + "' is not NAME@A+B");
    if (SA == S || SB == S)
      Partner[Name] = SA == S ? SB : SA;
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
  auto StageAttr = [](StringRef Name, int64_t V) {
    AttrDict A;
    A.set(Name, Attribute::getInt(V));
    return A;
  };
  std::vector<DenseMap<Value *, Value *>> Maps(M);
  DenseMap<Value *, Value *> Shared; // constants, cloned once
  auto Clone = [&](Node *N, int64_t K) {
    std::string Suffix = ".mb" + std::to_string(K);
    cloneForMicroBatch(G, N, Maps[K], Suffix, Suffix, Shared);
  };
  auto Recv = [&](Value *Like, int64_t From, int64_t K) {
    Node *R = G.createNode(
        OpId::Recv, {}, {Like->getType()}, StageAttr("src_stage", From),
        {G.getUniqueName(Like->getName().str() + ".mb" + std::to_string(K))});
    return R->getResult(0);
  };
  auto Send = [&](Value *V, int64_t To) {
    G.createNode(OpId::Send, {V}, {}, StageAttr("dst_stage", To));
  };
  Value *LossSum = nullptr;
  SmallVector<Value *, 32> Sums(ParamGrads.size(), nullptr);
  auto Accumulate = [&](Value *&Sum, Value *V) -> Error {
    if (!Sum) {
      Sum = V;
      return Error::success();
    }
    Expected<Value *> Added = B.add(Sum, V);
    if (!Added)
      return Added.takeError();
    Sum = *Added;
    return Error::success();
  };
  for (Slot Next : getSchedule(Opts.Schedule, S, P, M)) {
    int64_t K = Next.K;
    DenseMap<Value *, Value *> &Map = Maps[K];
    if (Next.Forward) {
      if (Tokens) {
        Expected<Value *> Rows_ =
            B.emit1(OpId::Slice, {Tokens, B.ints({K * Rows}),
                                  B.ints({(K + 1) * Rows}), B.ints({0})});
        if (!Rows_)
          return Rows_.takeError();
        Map[Tokens] = *Rows_;
      }
      for (Value *In : Received)
        Map[In] = Recv(In, S - 1, K);
      for (Node *N : Body)
        if (IsForward.count(N))
          Clone(N, K);
      for (Value *Out : Sent)
        Send(Map.lookup(Out) ? Map.lookup(Out) : Out, S + 1);
      continue;
    }
    for (Value *Seed : Seeds)
      Map[Seed] = Recv(Seed, S + 1, K);
    for (Node *N : Body)
      if (!IsForward.count(N))
        Clone(N, K);
    for (Value *Grad : InputGrads)
      Send(Map.lookup(Grad) ? Map.lookup(Grad) : Grad, S - 1);
    if (Loss)
      if (Error E = Accumulate(LossSum, Map.lookup(Loss)))
        return E;
    for (unsigned I = 0; I != ParamGrads.size(); ++I)
      if (Error E = Accumulate(Sums[I], Map.lookup(ParamGrads[I])))
        return E;
  }
  // Tied parameters: exchange the summed gradients, add in stage order.
  for (unsigned I = 0; I != ParamGrads.size(); ++I) {
    auto It = Partner.find(ParamGrads[I]->getName().drop_front(5));
    if (It == Partner.end())
      continue;
    int64_t Other = It->second;
    Send(Sums[I], Other);
    Node *Peer = G.createNode(
        OpId::Recv, {}, {Sums[I]->getType()}, StageAttr("src_stage", Other),
        {G.getUniqueName(ParamGrads[I]->getName().str() + ".stage" +
                         std::to_string(Other))});
    Value *Theirs = Peer->getResult(0);
    Expected<Value *> Total =
        S < Other ? B.add(Sums[I], Theirs) : B.add(Theirs, Sums[I]);
    if (!Total)
      return Total.takeError();
    Sums[I] = *Total;
  }
  // Every stage reports the loss the last one computed.
  if (IsLast) {
    for (int64_t To = 0; To != P - 1; ++To)
      Send(LossSum, To);
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
