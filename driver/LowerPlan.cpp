//===- LowerPlan.cpp - A plan's per-rank training programs ----------------===//

#include "driver/LowerPlan.h"

#include "ir/Diagnostics.h"
#include "ir/Graph.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "passes/PassManager.h"

#include "llvm/Support/SourceMgr.h"

using namespace autopar;
using namespace llvm;

static bool isCommunication(OpId Op) {
  switch (Op) {
  case OpId::AllReduce:
  case OpId::AllGather:
  case OpId::ReduceScatter:
  case OpId::AllToAll:
  case OpId::SendRecv:
  case OpId::Send:
  case OpId::Recv:
    return true;
  default:
    return false;
  }
}

std::string autopar::getUnloweredReason(const Module &Plan,
                                        const PlanConfig &C) {
  if (Plan.getGraphs().size() != 1)
    return "the plan has more than one graph";
  if (C.PP > 1)
    return "pipeline-parallel plans (pp = " + std::to_string(C.PP) +
           ") are not lowered to programs yet";
  if (C.Offload != OffloadKind::None)
    return "offloaded optimizer states or parameters (offload = " +
           getOffloadName(C.Offload).str() +
           ") are not lowered to programs yet";
  const Graph &G = *Plan.getGraphs().front();
  for (const Node &N : G.getNodes())
    if (isCommunication(N.getOp()))
      return "tensor-parallel layouts (the plan splits node '" +
             N.getName().str() + "') are not lowered to programs yet";
  if (G.getOutputs().size() != 1)
    return "the model has " + std::to_string(G.getOutputs().size()) +
           " outputs; training programs take one (the logits)";
  return "";
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
  std::string Pipeline =
      "autodiff{loss-tokens=" + std::to_string(Samples * (Seq - 1)) +
      "},accumulate-micro-batches{micro-batches=" +
      std::to_string(C.MicroBatches) + "}";
  if (C.DP > 1)
    Pipeline += ",insert-grad-sync{zero=" + std::to_string(C.Zero) + "}";
  Pipeline += ",insert-optimizer{optimizer=" +
              std::string(Optimizer == OptimizerKind::SGD ? "sgd" : "adamw") +
              "}";
  PassManager PM;
  if (Error E = PM.addPipeline(Pipeline))
    return E;
  if (failed(PM.run(*M, Diag)))
    return createStringError(inconvertibleErrorCode(),
                             "lowering the plan to training programs failed: " +
                                 MOS.str());
  std::string Program;
  raw_string_ostream POS(Program);
  POS << "// autopar training program: pipeline stage 0 of " << C.PP
      << "; plan " << C.str() << "\n"
      << "// lowered by: " << Pipeline << "\n";
  printModule(POS, *M);
  return std::vector<std::pair<std::string, std::string>>{
      {"stage0.air", POS.str()}};
}
