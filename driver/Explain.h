//===- Explain.h - Where a plan's time and memory go ------------*- C++ -*-===//
//
// What `autopar explain` prints (driver/Explain.cpp), and the what-if
// changes it applies to a plan before explaining it.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DRIVER_EXPLAIN_H
#define AUTOPAR_DRIVER_EXPLAIN_H

#include "planner/Search.h"

#include "llvm/Support/raw_ostream.h"

namespace autopar {

/// Applies `k=v,...` (the --fix keys) to C for NumGpus GPUs and the global
/// batch: dp and the micro-batches follow; a change that moves the stages
/// (tp, pp, vpp, mbs, schedule, recompute, sp) clears the cut so that it is
/// chosen again. Errors name the key.
llvm::Error applyWhatIf(PlanConfig &C, llvm::StringRef WhatIf, unsigned NumGpus,
                        int64_t GlobalBatch);

/// The step's parts, each rank's busy time and memory, and the busiest
/// rank's layers.
void printExplanation(llvm::raw_ostream &OS, const Plan &P,
                      ModelProfile &Profile, const Cluster &Cl);

} // namespace autopar

#endif // AUTOPAR_DRIVER_EXPLAIN_H
