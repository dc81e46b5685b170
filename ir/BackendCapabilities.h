//===- BackendCapabilities.h - What each runtime backend runs ---*- C++ -*-===//
//
// The table of BackendCapabilities.def: which plan choices each runtime
// backend executes, the backend a device's plans target, and the
// capabilities a plan configuration needs. The planner reads it so that it
// never chooses what the backend of the plan's device cannot run.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_BACKENDCAPABILITIES_H
#define AUTOPAR_IR_BACKENDCAPABILITIES_H

#include "ir/Plan.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

namespace autopar {

enum class RuntimeBackend : uint8_t { Cpu, Cuda };

enum class Capability : uint8_t {
#define CAPABILITY(Name, Choice, Cpu, Cuda, What) Name,
#include "ir/BackendCapabilities.def"
};

/// The backend that runs plans of the device named DeviceName (a cluster
/// device: `cpu`, or a GPU such as `a100`).
RuntimeBackend getPlanBackend(llvm::StringRef DeviceName);
llvm::StringRef getBackendName(RuntimeBackend B);

/// How backend B executes choice C (ir/BackendCapabilities.def).
enum class CapabilitySupport : uint8_t { None, Priced, Unpriced };
CapabilitySupport getCapabilitySupport(RuntimeBackend B, Capability C);
/// Whether B runs C as the cost model prices it: what the search chooses.
bool hasCapability(RuntimeBackend B, Capability C);
/// The choice as the plan spells it (`attention=flash`), and what the
/// backend would need (`flash-attention kernel`).
llvm::StringRef getCapabilityChoice(Capability C);
llvm::StringRef getCapabilityWhat(Capability C);

/// What configuration C needs of its backend. Tensor parallelism needs the
/// sharded gathers only where the sharding solver chooses them, which it
/// does only where the backend has them (not listed here).
llvm::SmallVector<Capability, 4> getRequiredCapabilities(const PlanConfig &C);

/// The first choice of C whose support on B is S (None: B does not run
/// it; Unpriced: B runs it slower than priced).
std::optional<Capability> findCapability(RuntimeBackend B, const PlanConfig &C,
                                         CapabilitySupport S);

} // namespace autopar

#endif // AUTOPAR_IR_BACKENDCAPABILITIES_H
