//===- EmitDeepSpeed.cpp - deepspeed.json ---------------------------------===//
//
// DeepSpeed's configuration for the plan: batch sizes (train_batch_size =
// micro-batch * gradient accumulation * data-parallel degree), the ZeRO
// stage with optimizer and parameter offload, bf16, and a "pipeline"
// section when the plan pipelines. Keys are written in a fixed order.
// DeepSpeed's pipeline engine takes ZeRO stage 0 or 1 only (PipelineEngine
// asserts it); a plan that pipelines with ZeRO-2 or 3 (which autopar-run
// runs) gets a "_comment" saying so first, and the file otherwise as the
// plan says, so that DeepSpeed stops with its own message rather than
// running another plan.
//
//===----------------------------------------------------------------------===//

#include "codegen/LaunchFiles.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace autopar;
using namespace llvm;

static void writeOffload(json::OStream &J, StringRef Key, OffloadKind K) {
  StringRef Device = getOffloadDevice(K);
  J.attributeObject(Key, [&] {
    J.attribute("device", Device);
    if (Device == "nvme")
      J.attribute("nvme_path", "/local_nvme");
    J.attribute("pin_memory", true);
  });
}

std::string autopar::renderDeepSpeedConfig(const PlanRecord &R) {
  const PlanConfig &P = R.Config;
  std::string S;
  raw_string_ostream OS(S);
  {
    json::OStream J(OS, 2);
    J.object([&] {
      if (P.PP > 1 && P.Zero >= 2)
        J.attribute("_comment",
                    "DeepSpeed's pipeline engine takes ZeRO stage 0 or 1: "
                    "this plan's ZeRO-" +
                        std::to_string(P.Zero) + " with " +
                        std::to_string(P.PP) +
                        " pipeline stages runs under autopar-run; for "
                        "DeepSpeed, plan again with --fix zero=1");
      J.attribute("train_batch_size", R.GlobalBatch);
      J.attribute("train_micro_batch_size_per_gpu", P.MicroBatch);
      J.attribute("gradient_accumulation_steps", P.MicroBatches);
      // Mixed precision as the plan says; fp32 enables neither.
      if (P.TrainPrecision == Precision::BF16)
        J.attributeObject("bf16", [&] { J.attribute("enabled", true); });
      else if (P.TrainPrecision == Precision::FP16)
        J.attributeObject("fp16", [&] { J.attribute("enabled", true); });
      // The gradients' reductions in the precision the plan was priced
      // with (DeepSpeed's communication_data_type).
      if (P.TrainPrecision != Precision::FP32)
        J.attribute("communication_data_type", getPrecisionName(P.GradReduce));
      J.attributeObject("zero_optimization", [&] {
        J.attribute("stage", P.Zero);
        // ZeRO's reductions overlap the backward as the plan was priced;
        // without overlap ZeRO-3 does not prefetch parameters either.
        if (P.Zero >= 1)
          J.attribute("overlap_comm", P.DpOverlap);
        // The gradient buckets the plan was priced with (elements).
        if (P.Zero >= 1 && P.DP > 1)
          J.attribute("reduce_bucket_size", P.GradBucket);
        if (P.Zero == 3 && !P.DpOverlap)
          J.attribute("stage3_prefetch_bucket_size", 0);
        if (P.Offload != OffloadKind::None)
          writeOffload(J, "offload_optimizer", P.Offload);
        if (offloadsParameters(P.Offload))
          writeOffload(J, "offload_param", P.Offload);
      });
      if (P.PP > 1)
        J.attributeObject("pipeline", [&] {
          J.attribute("stages", P.PP);
          J.attribute("activation_checkpoint_interval",
                      P.Recomputation == Recompute::Full ? 1 : 0);
        });
    });
  }
  OS << "\n";
  return OS.str();
}
