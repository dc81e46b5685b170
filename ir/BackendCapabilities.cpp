//===- BackendCapabilities.cpp - What each runtime backend runs -----------===//

#include "ir/BackendCapabilities.h"

using namespace autopar;
using namespace llvm;

namespace {

struct CapabilityRow {
  StringRef Choice, What;
  uint8_t Cpu, Cuda;
};

const CapabilityRow Rows[] = {
#define CAPABILITY(Name, Choice, Cpu, Cuda, What) {Choice, What, Cpu, Cuda},
#include "ir/BackendCapabilities.def"
};

const CapabilityRow &rowOf(Capability C) { return Rows[unsigned(C)]; }

} // namespace

RuntimeBackend autopar::getPlanBackend(StringRef DeviceName) {
  return DeviceName == "cpu" ? RuntimeBackend::Cpu : RuntimeBackend::Cuda;
}

StringRef autopar::getBackendName(RuntimeBackend B) {
  switch (B) {
  case RuntimeBackend::Cpu:
    return "cpu";
  case RuntimeBackend::Cuda:
    return "cuda";
  }
  return "";
}

CapabilitySupport autopar::getCapabilitySupport(RuntimeBackend B,
                                                Capability C) {
  uint8_t Level = B == RuntimeBackend::Cpu ? rowOf(C).Cpu : rowOf(C).Cuda;
  return Level == 1   ? CapabilitySupport::Priced
         : Level == 2 ? CapabilitySupport::Unpriced
                      : CapabilitySupport::None;
}

bool autopar::hasCapability(RuntimeBackend B, Capability C) {
  return getCapabilitySupport(B, C) == CapabilitySupport::Priced;
}

StringRef autopar::getCapabilityChoice(Capability C) { return rowOf(C).Choice; }
StringRef autopar::getCapabilityWhat(Capability C) { return rowOf(C).What; }

SmallVector<Capability, 4>
autopar::getRequiredCapabilities(const PlanConfig &C) {
  SmallVector<Capability, 4> Needs;
  switch (C.Attention) {
  case AttentionKernel::Flash:
    Needs.push_back(Capability::FlashAttention);
    break;
  case AttentionKernel::Materialized:
    Needs.push_back(Capability::MaterializedAttention);
    break;
  }
  switch (C.Recomputation) {
  case Recompute::None:
    break;
  case Recompute::Selective:
    Needs.push_back(Capability::RecomputeSelective);
    break;
  case Recompute::Full:
    Needs.push_back(Capability::RecomputeFull);
    break;
  }
  // One replica has nothing to overlap.
  if (C.DpOverlap && C.DP > 1)
    Needs.push_back(Capability::OverlapDpSync);
  // One stage sends nothing.
  if (C.VerifyTransfers && C.PP > 1)
    Needs.push_back(Capability::VerifyTransfers);
  switch (C.Offload) {
  case OffloadKind::None:
    break;
  case OffloadKind::OptimizerCpu:
  case OffloadKind::AllCpu:
    Needs.push_back(Capability::OffloadHost);
    break;
  case OffloadKind::OptimizerNvme:
  case OffloadKind::AllNvme:
    Needs.push_back(Capability::OffloadNvme);
    break;
  }
  return Needs;
}

std::optional<Capability> autopar::findCapability(RuntimeBackend B,
                                                  const PlanConfig &C,
                                                  CapabilitySupport S) {
  for (Capability Need : getRequiredCapabilities(C))
    if (getCapabilitySupport(B, Need) == S)
      return Need;
  return std::nullopt;
}
