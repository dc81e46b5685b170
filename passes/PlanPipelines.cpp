//===- PlanPipelines.cpp - The pass pipelines a plan lowers with ----------===//

#include "passes/PlanPipelines.h"

#include "ir/Diagnostics.h"
#include "ir/Graph.h"
#include "ir/OpRegistry.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/PassManager.h"
#include "passes/PlanContext.h"

#include "llvm/ADT/StringMap.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include <set>

using namespace autopar;
using namespace llvm;

static Error pipelineError(const Twine &Message) {
  return createStringError(inconvertibleErrorCode(), Message);
}

std::string autopar::getUnloweredReason(const Module &Plan,
                                        const PlanConfig &C) {
  if (Plan.getGraphs().size() != 1)
    return "the plan has more than one graph";
  if (C.VPP > 1 && C.Schedule != ScheduleKind::Interleaved)
    return "vpp = " + std::to_string(C.VPP) +
           " is lowered with the interleaved schedule only";
  const Graph &G = *Plan.getGraphs().front();
  if (G.getOutputs().size() != 1)
    return "the model has " + std::to_string(G.getOutputs().size()) +
           " outputs; training programs take one (the logits)";
  return "";
}

/// Parses Text, verifies it and runs Pipeline; the module, or an error with
/// the diagnostics.
static Expected<std::unique_ptr<Module>> runOnCopy(StringRef Text,
                                                   StringRef Pipeline) {
  SourceMgr SM;
  SM.AddNewSourceBuffer(MemoryBuffer::getMemBufferCopy(Text, "plan.air"),
                        SMLoc());
  std::string Messages;
  raw_string_ostream MOS(Messages);
  DiagnosticEngine Diag(&SM, "plan.air", MOS);
  PassManager PM;
  if (Error E = PM.addPipeline(Pipeline))
    return E;
  std::unique_ptr<Module> M = parseModule(SM, Diag);
  if (!M || failed(verifyModule(*M, Diag)) || failed(PM.run(*M, Diag)))
    return pipelineError("running '" + Pipeline +
                         "' on the plan failed: " + MOS.str());
  return M;
}

Expected<std::string> autopar::runPipelineOnText(StringRef PlanText,
                                                 StringRef Pipeline) {
  Expected<std::unique_ptr<Module>> M = runOnCopy(PlanText, Pipeline);
  if (!M)
    return M.takeError();
  std::string Text;
  raw_string_ostream OS(Text);
  printModule(OS, **M);
  return OS.str();
}

std::string autopar::buildPlanPipeline() {
  return "split-batch{from-plan=1},shard-tp{from-plan=1},"
         "partition-stages{from-plan=1},insert-collectives";
}

/// The IR element type a 16-bit precision computes in ("bf16", "f16"), or
/// empty for fp32: the spelling of mixed-precision's and insert-grad-sync's
/// options.
static StringRef getNarrowTypeName(Precision P) {
  return P == Precision::BF16 ? "bf16" : P == Precision::FP16 ? "f16" : "";
}

/// What follows the backward in every stage: the data-parallel gradient
/// reduction and the optimizer step, with the plan's offload.
static std::string getUpdateTail(const PlanConfig &C) {
  std::string Tail;
  // ZeRO-3 and weight offload hold a mixed-precision parameter's 16-bit
  // copy only around each use, as they hold the parameter.
  bool Narrow = C.TrainPrecision == Precision::BF16 ||
                C.TrainPrecision == Precision::FP16;
  if (Narrow && (C.Zero == 3 || C.Offload == OffloadKind::AllCpu ||
                 C.Offload == OffloadKind::AllNvme))
    Tail += ",cast-params-per-use";
  // The plan's data-parallel axis by name: a pipeline rank whose stages
  // read no batch input (the middle ranks of an interleaved schedule) has
  // no batch_split to find it from.
  if (C.DP > 1) {
    Tail += ",insert-grad-sync{zero=" + std::to_string(C.Zero) +
            " mesh=" + PlanMeshName + " axis=" + DataParallelAxis;
    if (StringRef Reduce = getNarrowTypeName(C.GradReduce); !Reduce.empty())
      Tail += " reduce=" + Reduce.str();
    if (C.GradBucket != PlanConfig().GradBucket)
      Tail += " bucket-elements=" + std::to_string(C.GradBucket);
    Tail += "}";
  }
  // Offload: where the optimizer states (and with `cpu`/`nvme` the
  // parameters) live between uses.
  StringRef States = "device", Params = "device";
  switch (C.Offload) {
  case OffloadKind::None:
    break;
  case OffloadKind::OptimizerCpu:
    States = "host";
    break;
  case OffloadKind::OptimizerNvme:
    States = "nvme";
    break;
  case OffloadKind::AllCpu:
    States = Params = "host";
    break;
  case OffloadKind::AllNvme:
    States = Params = "nvme";
    break;
  }
  // Global-norm clipping, always: `autopar-run --clip-grad` sets its
  // threshold, +infinity (no clipping) by default. fp16 plans unscale
  // their gradients there and skip steps whose gradients overflowed
  // (dynamic loss scaling, `autopar-run --loss-scale`).
  Tail += ",clip-gradients";
  if (C.TrainPrecision == Precision::FP16)
    Tail += "{loss-scale=1}";
  // The planner prices AdamW (cost/ModelState.h).
  Tail += ",insert-optimizer{optimizer=adamw";
  if (States != "device")
    Tail += " states=" + States.str();
  if (Params != "device")
    Tail += " params=" + Params.str();
  Tail += "}";
  // The moves of what was placed off the device, explicit (Offload.cpp).
  if (States != "device")
    Tail += ",offload";
  return Tail;
}

/// Tensor parallelism (each rank's types) and the plan's precision: what
/// precedes the backward.
static std::string getLocalize(const PlanConfig &C) {
  std::string Localize = C.TP > 1 ? "localize-tp{axis=tp}," : "";
  // Mixed precision: 16-bit compute over fp32 master parameters, as the
  // plan says (and its cost model priced).
  if (StringRef Compute = getNarrowTypeName(C.TrainPrecision); !Compute.empty())
    Localize += "mixed-precision{compute=" + Compute.str() + "},";
  return Localize;
}

/// The schedule-pipeline spelling of the plan's schedule.
static std::string getScheduleOption(const PlanConfig &C) {
  if (C.Schedule == ScheduleKind::GPipe)
    return "gpipe";
  if (C.VPP > 1)
    return "interleaved vpp=" + std::to_string(C.VPP);
  return "1f1b";
}

static std::string getExtractStage(const PlanConfig &C, unsigned S) {
  return "extract-stage{stage=" + std::to_string(S) +
         (C.VPP > 1 ? " vpp=" + std::to_string(C.VPP) : "") + "}";
}

/// Trained parameters that several stages hold (tied embeddings, rotary
/// tables), as schedule-pipeline's `tied` option: `name@0+3;...`. A frozen
/// one has no gradient to exchange.
static Expected<std::string> getTiedParameters(StringRef PlanText,
                                               const PlanConfig &C) {
  StringMap<SmallVector<unsigned, 2>> Holders;
  std::vector<std::string> Order;
  for (unsigned S = 0; S != C.PP; ++S) {
    Expected<std::unique_ptr<Module>> Stage =
        runOnCopy(PlanText, getExtractStage(C, S));
    if (!Stage)
      return Stage.takeError();
    for (const std::unique_ptr<Value> &P :
         (*Stage)->getGraphs().front()->getParams()) {
      if (P->isFrozen())
        continue;
      auto &H = Holders[P->getName()];
      if (H.empty())
        Order.push_back(P->getName().str());
      H.push_back(S);
    }
  }
  std::string Tied;
  for (const std::string &Name : Order) {
    ArrayRef<unsigned> H = Holders[Name];
    if (H.size() < 2)
      continue;
    Tied += (Tied.empty() ? "" : ";") + Name + "@";
    for (unsigned J = 0; J != H.size(); ++J)
      Tied += (J ? "+" : "") + std::to_string(H[J]);
  }
  return Tied;
}

/// The attention kernel before autodiff: the materialized kernel keeps the
/// probabilities for the backward (materialize-attention); flash attention
/// keeps only what AttentionGrad recomputes them from.
static std::string getAttentionKernel(const PlanConfig &C) {
  return C.Attention == AttentionKernel::Materialized ? "materialize-attention,"
                                                      : "";
}

/// Recomputation after autodiff. Selective: the attention core
/// (recompute-attention). Full: the layers the planner prices it for, every
/// unit but the first and the last (the embedding and the head) when there
/// are more than two, as planner/Search.cpp's `recomputes`.
static std::string getRecompute(const Graph &G, const PlanConfig &C) {
  if (C.Recomputation == Recompute::Selective)
    return C.Attention == AttentionKernel::Materialized ? ",recompute-attention"
                                                        : "";
  if (C.Recomputation != Recompute::Full)
    return "";
  std::set<int64_t> Layers;
  for (const Node &N : G.getNodes())
    if (const Attribute *A = N.getAttr("layer"))
      Layers.insert(A->getInt());
  if (Layers.empty())
    return "";
  int64_t First = *Layers.begin(), Last = *Layers.rbegin();
  if (Layers.size() > 2) {
    First = *std::next(Layers.begin());
    Last = *std::next(Layers.rbegin());
  }
  return ",recompute{first=" + std::to_string(First) +
         " last=" + std::to_string(Last) + "}";
}

/// dropout-streams when the model drops in training mode: first, on the
/// whole graph, so that every stage numbers the streams the same way.
/// (A Dropout whose setting is not a constant too: the pass names it.)
static std::string getDropoutStreams(const Graph &G) {
  for (const Node &N : G.getNodes())
    if (dropsInTraining(N) ||
        (N.getOp() == OpId::Dropout && !getDropoutSetting(N)))
      return "dropout-streams,";
  return "";
}

Expected<std::vector<std::string>>
autopar::buildTrainingPipelines(const Module &Plan, const PlanConfig &C) {
  std::string Why = getUnloweredReason(Plan, C);
  if (!Why.empty())
    return pipelineError(Why);
  const Graph &G = *Plan.getGraphs().front();
  // The loss is the global mean: next-token predictions of every sample of
  // the global batch (the last position of each has no label).
  if (G.getInputs().empty() || G.getInputs()[0]->getType().getRank() != 2 ||
      !G.getInputs()[0]->getType().hasStaticShape())
    return pipelineError("the model's first input is not [batch, sequence] "
                         "token ids with static sizes");
  int64_t Seq = G.getInputs()[0]->getType().getDim(1).getSize();
  std::string LossTokens = std::to_string(C.getGlobalBatch() * (Seq - 1));
  std::string Streams = getDropoutStreams(G);
  std::string Localize = getLocalize(C) + getAttentionKernel(C);
  std::string TPGrads = C.TP > 1 ? " tensor-parallel=tp" : "";
  // fp16's narrow range: the loss's gradient is seeded with the run's loss
  // scale (clip-gradients unscales).
  std::string LossScale =
      C.TrainPrecision == Precision::FP16 ? " loss-scale=1" : "";
  std::string Tail = getUpdateTail(C);
  // Tensor parallelism's gathered activations are gathered again in the
  // backward, as the activation memory prices them.
  std::string Recompute =
      getRecompute(G, C) + (C.TP > 1 ? ",regather-activations" : "");
  if (C.PP == 1)
    return std::vector<std::string>{
        Streams + Localize + "autodiff{loss-tokens=" + LossTokens + TPGrads +
        LossScale + "}" + Recompute +
        ",accumulate-micro-batches{micro-batches=" +
        std::to_string(C.MicroBatches) + "}" + Tail};

  std::string Text;
  raw_string_ostream OS(Text);
  printModule(OS, Plan);
  Expected<std::string> Tied = getTiedParameters(OS.str(), C);
  if (!Tied)
    return Tied.takeError();
  bool Interleaved = C.VPP > 1;
  std::vector<std::string> Pipelines;
  for (unsigned S = 0; S != C.PP; ++S) {
    bool Last = S + 1 == C.PP;
    // Every activation a stage sends gets its gradient back (a cut inside
    // a block sends more than the residual stream); interleaved, every
    // rank also receives (for its later chunks).
    std::string Grads = Interleaved  ? " seed-outputs=1 input-grads=1"
                        : S && !Last ? " seed-outputs=1 input-grads=1"
                        : S          ? " input-grads=1"
                        : !Last      ? " seed-outputs=1"
                                     : "";
    std::string Autodiff = Last ? "autodiff{loss-tokens=" + LossTokens +
                                      TPGrads + LossScale + Grads + "}"
                                : "autodiff{seed=1" + TPGrads + Grads + "}";
    Pipelines.push_back(Streams + getExtractStage(C, S) + "," + Localize +
                        Autodiff + Recompute + ",schedule-pipeline{stage=" +
                        std::to_string(S) + " stages=" + std::to_string(C.PP) +
                        " micro-batches=" + std::to_string(C.MicroBatches) +
                        " schedule=" + getScheduleOption(C) +
                        (Tied->empty() ? "" : " tied=" + *Tied) + "}" + Tail);
  }
  return Pipelines;
}

Expected<std::vector<std::string>>
autopar::buildForwardPipelines(const PlanConfig &C) {
  if (C.VPP > 1)
    return pipelineError("forward programs of interleaved schedules (vpp > "
                         "1) are not lowered");
  std::vector<std::string> Pipelines;
  for (unsigned S = 0; S != C.PP; ++S)
    Pipelines.push_back((C.TP > 1 ? "localize-tp{axis=tp}," : "") +
                        std::string("forward-program{stage=") +
                        std::to_string(S) + "}");
  return Pipelines;
}
