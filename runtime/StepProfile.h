//===- StepProfile.h - Where a training step's time goes --------*- C++ -*-===//
//
// What `autopar-run --profile` prints: the time of one step (the mean over
// the steps after the first when there are several: the first allocates,
// faults its pages in and starts the BLAS threads) split by node, by op and
// by kind of kernel (GEMMs, attention, norms, elementwise, layouts, the
// loss, the optimizer, communication), each with its FLOPs, the bytes its
// operands and results hold, and the rates they give (GFLOP/s over the
// nodes whose FLOPs are known), sorted by time. The
// time outside every node (the interpreter between nodes, the step's input
// and output copies) is a line of its own.
//
// FLOPs are the forward FLOPs of ir/OpFlops.h, the convention of the cost
// model; backward-only ops have none there and show none. Bytes are a
// lower bound of the memory traffic: each operand read once and each
// result written once.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_STEPPROFILE_H
#define AUTOPAR_RUNTIME_STEPPROFILE_H

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace autopar {

class Node;

/// Bytes N's static operands and results hold (each once); none for the
/// views, constants and shape queries, which move no data.
int64_t getTouchedBytes(const Node &N);

/// Per-node times of a run's steps.
class StepProfiler {
public:
  /// Steps: how many will run; with more than one the first is left out.
  void setSteps(int64_t Steps) { SkipFirst = Steps > 1; }

  void beginStep();
  void record(const Node &N, std::chrono::steady_clock::time_point Start,
              std::chrono::steady_clock::time_point End);
  void endStep(double StepSeconds);

  /// The profile as text: a header line, then the tables by kind, by op
  /// and the heaviest nodes (at most TopNodes), each row's time per step.
  std::string format(int Rank, unsigned TopNodes = 15) const;

private:
  struct Entry {
    std::string Name, Op, Kind;
    double Seconds = 0;
    int64_t Calls = 0;
    /// Per call; FLOPs unknown when nullopt.
    std::optional<int64_t> Flops;
    int64_t Bytes = 0;
  };
  bool SkipFirst = false;
  bool Counting = false;
  int64_t StepsBegun = 0;
  int64_t Steps = 0;
  double StepSeconds = 0;
  std::vector<Entry> Nodes;
  llvm::DenseMap<const Node *, unsigned> Index;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_STEPPROFILE_H
