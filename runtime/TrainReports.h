//===- TrainReports.h - Traces and memory reports of a run ------*- C++ -*-===//
//
// What `autopar-run --trace FILE` and `--memory-report` produce:
// - A Chrome trace (the JSON object format Perfetto and chrome://tracing
//   read): one complete event ("ph": "X") per node run, on the rank's
//   process (pid = world rank) and one of two threads, compute (tid 0) or
//   communication (tid 1), with the node's op, step, forward FLOPs (where
//   ir/OpFlops.h knows them) and the bytes its operands and results hold
//   (runtime/StepProfile.h) as arguments. Times
//   are microseconds of the host's steady clock since the first rank's
//   first event (one clock on one host; across hosts the clocks are not
//   aligned). Rank 0 gathers every rank's events and writes FILE atomically.
//   Offloaded fetches (docs/Offload.md) are spans on a third thread,
//   offload (tid 2), named `fetch <tensor>`, with the bytes, whether it was
//   a prefetch and the prefetch depth (requests in flight) as arguments,
//   and a counter track of the depth.
// - A memory report: each rank's measured peak (parameters and optimizer
//   state, plus the largest activation footprint of a step) next to the
//   plan's prediction for its pipeline stage (`predicted_memory` in the
//   plan.json beside the programs), printed by rank 0.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_TRAINREPORTS_H
#define AUTOPAR_RUNTIME_TRAINREPORTS_H

#include "ir/Plan.h"
#include "runtime/OffloadStore.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace autopar {

class Backend;
class Node;

/// One rank's trace events.
class TraceRecorder {
public:
  explicit TraceRecorder(int Rank) : Rank(Rank) {}
  void setStep(int64_t S) { Step = S; }
  void record(const Node &N, std::chrono::steady_clock::time_point Start,
              std::chrono::steady_clock::time_point End);
  void recordFetch(const OffloadPrefetcher::FetchEvent &E);
  /// The events as a JSON array, times in microseconds since the epoch of
  /// the steady clock.
  std::string toJSON() const;

private:
  struct Event {
    std::string Name, Op;
    bool Communication;
    int64_t Step;
    double StartUs, DurationUs;
    /// A node's forward FLOPs (-1: unknown) and the bytes it touches
    /// (runtime/StepProfile.h).
    int64_t Flops = -1;
    /// An offloaded fetch (Op empty): its bytes, depth and kind.
    bool Fetch = false, Prefetched = false;
    uint64_t Bytes = 0;
    unsigned Depth = 0;
  };
  int Rank;
  int64_t Step = 0;
  std::vector<Event> Events;
  /// Each node's forward FLOPs and bytes, worked out at its first event.
  llvm::DenseMap<const Node *, std::pair<int64_t, uint64_t>> NodeFigures;
};

/// Every rank's Mine (the same size on each), in rank order, on every rank:
/// an all-gather over the whole job through the backend's communicator.
llvm::Expected<std::vector<uint8_t>> gatherBytes(Backend &B,
                                                 llvm::ArrayRef<uint8_t> Mine);

/// Every rank's Text, in rank order, on rank 0 (empty elsewhere): sizes
/// then bytes through the backend's communicator (all-gathers over the
/// whole job).
llvm::Expected<std::vector<std::string>> gatherTexts(Backend &B,
                                                     llvm::StringRef Text);

/// Writes the Chrome trace of the ranks' event arrays (from
/// TraceRecorder::toJSON) to Path atomically, times shifted so that the
/// earliest event starts at 0.
llvm::Error writeChromeTrace(llvm::StringRef Path,
                             llvm::ArrayRef<std::string> RankEvents);

/// One rank's measured memory.
struct MeasuredMemory {
  /// Parameters and optimizer state on the device, and those whose
  /// `placement` offloads them (host memory or NVMe; on the CPU backend
  /// these are the same memory, told apart for the comparison).
  uint64_t ParamBytes = 0, PeakActivationBytes = 0, OffloadedBytes = 0;
  /// The peaks of PeakActivationBytes' two parts, each on its own
  /// (Executor.h): gradients and the other computed values (activations).
  uint64_t PeakGradientBytes = 0, PeakNonGradientBytes = 0;
  /// Offloaded bytes by tier (OffloadedBytes is their sum), and the peak of
  /// offloaded tensors held in backend memory while fetched (part of
  /// ParamBytes).
  uint64_t HostBytes = 0, NvmeBytes = 0, PeakFetchedBytes = 0;
  /// Offloaded parameters uploaded ahead of their use in the last step.
  uint64_t UploadsAhead = 0;
  /// The peak of the whole copies ZeRO's gathers make of sharded
  /// parameters (part of ParamBytes, as the plan's weights include them).
  uint64_t PeakGatheredBytes = 0;
  /// This rank's largest activations at its activation peak (bytes, name).
  std::vector<std::pair<uint64_t, std::string>> PeakValues;
};

/// `largest activations at rank 0's peak: %a 2.000 MiB, ...`: what rank 0
/// held at its activation peak (nothing when Values is empty).
void printPeakValues(llvm::raw_ostream &OS,
                     llvm::ArrayRef<std::pair<uint64_t, std::string>> Values);

/// Rank 0's report: one line per rank with its measured bytes and, when
/// the program records its plan (Plan may be null), the prediction for the
/// rank's pipeline stage Stages[R].
void printMemoryReport(llvm::raw_ostream &OS,
                       llvm::ArrayRef<MeasuredMemory> Measured,
                       const PlanRecord *Plan, llvm::ArrayRef<unsigned> Stages);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_TRAINREPORTS_H
