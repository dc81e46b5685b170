//===- LaunchFiles.cpp - Launch scripts and framework configs -------------===//
//
// The shared pieces of the emitters and renderLaunchFiles, which checks the
// plan and collects every emitter's file.
//
//===----------------------------------------------------------------------===//

#include "codegen/LaunchFiles.h"

#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace autopar;
using namespace llvm;

std::string autopar::describePlan(const PlanRecord &R) {
  const PlanConfig &P = R.Config;
  std::string S;
  raw_string_ostream OS(S);
  OS << "tp" << P.TP << " pp" << P.PP << " dp" << P.DP << " vpp" << P.VPP << " "
     << getScheduleName(P.Schedule) << " mbs" << P.MicroBatch << " x"
     << P.MicroBatches << " zero" << P.Zero << (P.SequenceParallel ? " sp" : "")
     << " recompute=" << getRecomputeName(P.Recomputation)
     << " offload=" << getOffloadName(P.Offload) << " "
     << getPrecisionName(P.TrainPrecision)
     << " attention=" << getAttentionKernelName(P.Attention)
     << (P.DpOverlap ? "" : " dp-overlap=off")
     << (P.Fusion ? "" : " fusion=off")
     << (P.VerifyTransfers ? " verify-transfers=on" : "");
  return OS.str();
}

int64_t autopar::getNumNodes(const PlanRecord &R) {
  if (R.NumGpus <= R.GpusPerNode)
    return 1;
  return R.NumGpus / R.GpusPerNode;
}

int64_t autopar::getTasksPerNode(const PlanRecord &R) {
  return R.NumGpus / getNumNodes(R);
}

Expected<std::vector<std::pair<std::string, std::string>>>
autopar::renderLaunchFiles(const PlanRecord &R, StringRef LaunchDir) {
  if (Error E = checkPlanInvariants(R, R.FileName + ": "))
    return E;
  Expected<std::string> Schedule = renderScheduleCSV(R);
  if (!Schedule)
    return Schedule.takeError();
  auto PathOf = [&](StringRef Name) {
    SmallString<128> Path(LaunchDir);
    sys::path::append(Path, Name);
    return std::string(Path);
  };
  std::vector<std::pair<std::string, std::string>> Files;
  Files.emplace_back(PathOf("slurm.sbatch"), renderSlurm(R));
  Files.emplace_back(PathOf("mpirun.sh"), renderMpirun(R));
  Files.emplace_back(PathOf("megatron_args.txt"), renderMegatronArgs(R));
  Files.emplace_back(PathOf("deepspeed.json"), renderDeepSpeedConfig(R));
  Files.emplace_back(PathOf("torchtitan.args"), renderTorchtitanArgs(R));
  Files.emplace_back(PathOf("schedule.csv"), std::move(*Schedule));
  return Files;
}
