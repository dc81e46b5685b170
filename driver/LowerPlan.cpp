//===- LowerPlan.cpp - A plan's per-rank training programs ----------------===//

#include "driver/LowerPlan.h"

#include "ir/Diagnostics.h"
#include "ir/Graph.h"
#include "ir/OpRegistry.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "passes/PassManager.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/SourceMgr.h"

using namespace autopar;
using namespace llvm;

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

/// Pipeline run on a copy of the plan whose text is PlanText (the printer
/// and the parser round-trip).
static Expected<std::unique_ptr<Module>>
lowerCopy(StringRef PlanText, StringRef Pipeline, StringRef Kind) {
  SourceMgr SM;
  SM.AddNewSourceBuffer(MemoryBuffer::getMemBufferCopy(PlanText, "plan.air"),
                        SMLoc());
  std::string Messages;
  raw_string_ostream MOS(Messages);
  DiagnosticEngine Diag(&SM, "plan.air", MOS);
  std::unique_ptr<Module> Copy = parseModule(SM, Diag);
  PassManager PM;
  if (Error E = PM.addPipeline(Pipeline))
    return Expected<std::unique_ptr<Module>>(std::move(E));
  if (!Copy || failed(PM.run(*Copy, Diag)))
    return createStringError(inconvertibleErrorCode(),
                             "lowering the plan to " + Kind +
                                 " programs failed: " + MOS.str());
  return Expected<std::unique_ptr<Module>>(std::move(Copy));
}

/// A program's text: two comment lines (what it is, the pipeline that
/// lowered it), then the module.
static std::string printProgram(const Module &Program, StringRef Kind,
                                unsigned Stage, const PlanConfig &C,
                                StringRef Pipeline) {
  std::string Text;
  raw_string_ostream OS(Text);
  OS << "// autopar " << Kind << " program: pipeline stage " << Stage << " of "
     << C.PP << "; plan " << C.str() << "\n"
     << "// lowered by: " << Pipeline << "\n";
  printModule(OS, Program);
  return OS.str();
}

Expected<std::vector<std::pair<std::string, std::string>>>
autopar::lowerPlanToPrograms(const Module &Plan, const PlanConfig &C,
                             OptimizerKind Optimizer) {
  std::string Why = getUnloweredReason(Plan, C);
  if (!Why.empty())
    return createStringError(inconvertibleErrorCode(), Why);
  // A copy to lower: the printed plan, parsed again (the printer and the
  // parser round-trip).
  std::string Text;
  raw_string_ostream OS(Text);
  printModule(OS, Plan);
  SourceMgr SM;
  SM.AddNewSourceBuffer(MemoryBuffer::getMemBufferCopy(OS.str(), "plan.air"),
                        SMLoc());
  std::string Messages;
  raw_string_ostream MOS(Messages);
  DiagnosticEngine Diag(&SM, "plan.air", MOS);
  std::unique_ptr<Module> M = parseModule(SM, Diag);
  if (!M)
    return createStringError(inconvertibleErrorCode(),
                             "the plan does not parse: " + MOS.str());
  const Graph &G = *M->getGraphs().front();
  // The loss is the global mean: next-token predictions of every sample of
  // the global batch (the last position of each has no label).
  if (G.getInputs().empty() || G.getInputs()[0]->getType().getRank() != 2 ||
      !G.getInputs()[0]->getType().hasStaticShape())
    return createStringError(inconvertibleErrorCode(),
                             "the model's first input is not [batch, "
                             "sequence] token ids with static sizes");
  int64_t Seq = G.getInputs()[0]->getType().getDim(1).getSize();
  int64_t Samples = C.MicroBatch * C.MicroBatches * C.DP;
  std::string LossTokens = std::to_string(Samples * (Seq - 1));
  // Tensor parallelism: each rank's types, and autodiff's conjugate
  // collectives over the axis.
  std::string Localize = C.TP > 1 ? "localize-tp{axis=tp}," : "";
  // Mixed precision: 16-bit compute over fp32 master parameters, as the
  // plan says (and its cost model priced).
  if (C.TrainPrecision == Precision::BF16)
    Localize += "mixed-precision{compute=bf16},";
  else if (C.TrainPrecision == Precision::FP16)
    Localize += "mixed-precision{compute=f16},";
  std::string TPGrads = C.TP > 1 ? " tensor-parallel=tp" : "";
  std::string Tail;
  if (C.DP > 1)
    Tail += ",insert-grad-sync{zero=" + std::to_string(C.Zero) + "}";
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
  Tail += ",insert-optimizer{optimizer=" +
          std::string(Optimizer == OptimizerKind::SGD ? "sgd" : "adamw");
  if (States != "device")
    Tail += " states=" + States.str();
  if (Params != "device")
    Tail += " params=" + Params.str();
  Tail += "}";

  // Runs Pipeline on a copy of the plan; the lowered module's text.
  auto Lower = [&](StringRef Pipeline) {
    return lowerCopy(OS.str(), Pipeline, "training");
  };
  auto Print = [&](const Module &Program, unsigned Stage, StringRef Pipeline) {
    return printProgram(Program, "training", Stage, C, Pipeline);
  };
  std::vector<std::pair<std::string, std::string>> Programs;
  if (C.PP == 1) {
    std::string Pipeline = Localize + "autodiff{loss-tokens=" + LossTokens +
                           TPGrads +
                           "},accumulate-micro-batches{micro-batches=" +
                           std::to_string(C.MicroBatches) + "}" + Tail;
    Expected<std::unique_ptr<Module>> Program = Lower(Pipeline);
    if (!Program)
      return Program.takeError();
    Programs.push_back({"stage0.air", Print(**Program, 0, Pipeline)});
    return Programs;
  }

  // Pipeline stages. Parameters that several stages hold (tied embeddings,
  // rotary tables) get their gradients exchanged; which ones, the stages'
  // forwards say.
  StringMap<SmallVector<unsigned, 2>> Holders;
  std::vector<std::string> ParamOrder;
  // With vpp > 1 each rank holds several model chunks (virtual stages).
  bool Interleaved = C.VPP > 1;
  auto Extract = [&](unsigned S) {
    return "extract-stage{stage=" + std::to_string(S) +
           (Interleaved ? " vpp=" + std::to_string(C.VPP) : "") + "}";
  };
  for (unsigned S = 0; S != C.PP; ++S) {
    Expected<std::unique_ptr<Module>> Stage = Lower(Extract(S));
    if (!Stage)
      return Stage.takeError();
    for (const std::unique_ptr<Value> &P :
         (*Stage)->getGraphs().front()->getParams()) {
      auto &H = Holders[P->getName()];
      if (H.empty())
        ParamOrder.push_back(P->getName().str());
      H.push_back(S);
    }
  }
  std::string Tied;
  for (const std::string &Name : ParamOrder) {
    ArrayRef<unsigned> H = Holders[Name];
    if (H.size() < 2)
      continue;
    Tied += (Tied.empty() ? "" : ";") + Name + "@";
    for (unsigned J = 0; J != H.size(); ++J)
      Tied += (J ? "+" : "") + std::to_string(H[J]);
  }
  std::string Schedule = C.Schedule == ScheduleKind::GPipe ? "gpipe"
                         : Interleaved
                             ? "interleaved vpp=" + std::to_string(C.VPP)
                             : "1f1b";
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
    std::string Autodiff =
        Last ? "autodiff{loss-tokens=" + LossTokens + TPGrads + Grads + "}"
             : "autodiff{seed=1" + TPGrads + Grads + "}";
    std::string Pipeline = Extract(S) + "," + Localize + Autodiff +
                           ",schedule-pipeline{stage=" + std::to_string(S) +
                           " stages=" + std::to_string(C.PP) +
                           " micro-batches=" + std::to_string(C.MicroBatches) +
                           " schedule=" + Schedule +
                           (Tied.empty() ? "" : " tied=" + Tied) + "}" + Tail;
    Expected<std::unique_ptr<Module>> Program = Lower(Pipeline);
    if (!Program)
      return Program.takeError();
    Programs.push_back(
        {"stage" + std::to_string(S) + ".air", Print(**Program, S, Pipeline)});
  }
  return Programs;
}

Expected<std::vector<std::pair<std::string, std::string>>>
autopar::lowerPlanToForwardPrograms(const Module &Plan, const PlanConfig &C) {
  if (C.VPP > 1)
    return createStringError(inconvertibleErrorCode(),
                             "forward programs of interleaved schedules "
                             "(vpp > 1) are not lowered");
  std::string Text;
  raw_string_ostream OS(Text);
  printModule(OS, Plan);
  std::vector<std::pair<std::string, std::string>> Programs;
  for (unsigned S = 0; S != C.PP; ++S) {
    std::string Pipeline = (C.TP > 1 ? "localize-tp{axis=tp}," : "") +
                           std::string("forward-program{stage=") +
                           std::to_string(S) + "}";
    Expected<std::unique_ptr<Module>> Program =
        lowerCopy(OS.str(), Pipeline, "forward");
    if (!Program)
      return Program.takeError();
    Programs.push_back({"forward" + std::to_string(S) + ".air",
                        printProgram(**Program, "forward", S, C, Pipeline)});
  }
  return Programs;
}
