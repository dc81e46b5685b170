//===- LaunchFiles.h - Launch scripts and framework configs -----*- C++ -*-===//
//
// The files a plan is launched with, each rendered as text from a
// PlanRecord by a small emitter (one source file each): the Slurm and
// mpirun scripts (EmitSlurm.cpp), Megatron-LM's arguments
// (EmitMegatron.cpp), DeepSpeed's configuration (EmitDeepSpeed.cpp),
// torchtitan's overrides (EmitTorchtitan.cpp) and the pipeline schedule per
// rank (EmitSchedule.cpp). The emitters assume a record that passed
// checkPlanInvariants; renderLaunchFiles checks it first. Nothing here
// writes files: the caller writes the (path, text) pairs all or nothing
// (driver/OutputFiles.h). docs/Codegen.md describes each file and where its
// flag names come from.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_CODEGEN_LAUNCHFILES_H
#define AUTOPAR_CODEGEN_LAUNCHFILES_H

#include "ir/Plan.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <utility>
#include <vector>

namespace autopar {

/// One line naming the plan, for the files' header comments:
/// "tp4 pp4 dp64 vpp8 interleaved mbs1 x24 zero2 sp recompute=none
/// offload=none".
std::string describePlan(const PlanRecord &R);

/// Nodes the job takes: whole nodes, or one node when the plan needs fewer
/// GPUs than a node has.
int64_t getNumNodes(const PlanRecord &R);
/// Tasks (one per GPU) on each node.
int64_t getTasksPerNode(const PlanRecord &R);

/// slurm.sbatch: #SBATCH nodes, tasks and GPUs per node; srun of
/// autopar-run with the plan folder.
std::string renderSlurm(const PlanRecord &R);
/// mpirun.sh: the same job through `mpirun -np N --hostfile FILE`.
std::string renderMpirun(const PlanRecord &R);
/// megatron_args.txt: Megatron-LM's command-line flags, one per line.
std::string renderMegatronArgs(const PlanRecord &R);
/// deepspeed.json: DeepSpeed's configuration.
std::string renderDeepSpeedConfig(const PlanRecord &R);
/// torchtitan.args: torchtitan's command-line overrides, one per line.
std::string renderTorchtitanArgs(const PlanRecord &R);
/// schedule.csv: per pipeline rank, its actions in order as PyTorch's
/// action strings ("0F0", "0B0").
llvm::Expected<std::string> renderScheduleCSV(const PlanRecord &R);

/// Checks R (checkPlanInvariants) and renders every launch file as
/// (LaunchDir/name, text), in a fixed order: slurm.sbatch, mpirun.sh,
/// megatron_args.txt, deepspeed.json, torchtitan.args, schedule.csv.
llvm::Expected<std::vector<std::pair<std::string, std::string>>>
renderLaunchFiles(const PlanRecord &R, llvm::StringRef LaunchDir);

} // namespace autopar

#endif // AUTOPAR_CODEGEN_LAUNCHFILES_H
