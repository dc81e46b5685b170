//===- Schedule.cpp - Pipeline-schedule simulation ------------------------===//
//
// The orders are built into one flat action list sized up front; the
// simulation then walks it with a worklist of ranks. A rank runs actions
// until one waits on an action another rank has not finished; that rank is
// woken when the action it may be waiting on completes. Every action's
// start time depends only on its rank's previous action and on its
// dependency, so no time-ordered event queue is needed: the walk computes
// the longest path through the dependency graph in O(actions), and a rank
// left with actions when the worklist is empty is a deadlock.
//
//===----------------------------------------------------------------------===//

#include "planner/Schedule.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace autopar;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

static Error makeError(const Twine &Message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Message);
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

static Error checkTimes(const std::vector<double> &Times, StringRef Field,
                        size_t Expected) {
  if (Times.size() != Expected)
    return makeError("pipeline spec: " + Field + " has " + Twine(Times.size()) +
                     " entries, expected " + Twine(Expected) +
                     " (Stages * VirtualStages)");
  for (size_t I = 0; I != Times.size(); ++I)
    if (!std::isfinite(Times[I]) || Times[I] < 0)
      return makeError("pipeline spec: " + Field + "[" + Twine(I) +
                       "] is not a finite time >= 0");
  return Error::success();
}

/// The rules every simulation needs, whatever the order.
static Error validateShape(const PipelineSpec &S) {
  if (S.Stages == 0)
    return makeError("pipeline spec: Stages must be at least 1");
  if (S.VirtualStages == 0)
    return makeError("pipeline spec: VirtualStages must be at least 1");
  if (S.MicroBatches == 0)
    return makeError("pipeline spec: MicroBatches must be at least 1");
  size_t NumStages = size_t(S.Stages) * S.VirtualStages;
  if (Error E = checkTimes(S.Forward, "Forward", NumStages))
    return E;
  if (Error E = checkTimes(S.Backward, "Backward", NumStages))
    return E;
  if (!std::isfinite(S.P2PSeconds) || S.P2PSeconds < 0)
    return makeError("pipeline spec: P2PSeconds is not a finite time >= 0");
  return Error::success();
}

Error PipelineSpec::validate() const {
  if (Error E = validateShape(*this))
    return E;
  StringRef Name = getScheduleName(Kind);
  if (Kind != ScheduleKind::Interleaved) {
    if (VirtualStages != 1)
      return makeError("pipeline spec: the " + Name +
                       " schedule needs VirtualStages == 1, got " +
                       Twine(VirtualStages));
    return Error::success();
  }
  if (VirtualStages < 2)
    return makeError("pipeline spec: the interleaved schedule needs "
                     "VirtualStages >= 2, got " +
                     Twine(VirtualStages));
  if (MicroBatches % Stages != 0)
    return makeError("pipeline spec: the interleaved schedule needs "
                     "MicroBatches (" +
                     Twine(MicroBatches) + ") to be a multiple of Stages (" +
                     Twine(Stages) + ")");
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Orders
//===----------------------------------------------------------------------===//

static size_t actionsPerRank(const PipelineSpec &S) {
  return size_t(2) * S.VirtualStages * S.MicroBatches;
}

Expected<std::vector<PipelineAction>>
autopar::getScheduleOrder(const PipelineSpec &Spec) {
  if (Error E = Spec.validate())
    return E;
  size_t PerRank = actionsPerRank(Spec);
  std::vector<PipelineAction> Order(PerRank * Spec.Stages);
  for (unsigned R = 0; R != Spec.Stages; ++R)
    llvm::copy(getRankOrder(Spec.Kind, Spec.Stages, Spec.VirtualStages,
                            Spec.MicroBatches, R),
               Order.begin() + R * PerRank);
  return Order;
}

static std::string formatAction(const PipelineAction &A) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << A.Stage << (A.Backward ? 'B' : 'F') << A.MicroBatch;
  return OS.str();
}

Expected<std::vector<std::vector<std::string>>>
autopar::getScheduleActions(const PipelineSpec &Spec) {
  Expected<std::vector<PipelineAction>> Order = getScheduleOrder(Spec);
  if (!Order)
    return Order.takeError();
  size_t PerRank = actionsPerRank(Spec);
  std::vector<std::vector<std::string>> Result(Spec.Stages);
  for (unsigned R = 0; R != Spec.Stages; ++R) {
    Result[R].reserve(PerRank);
    for (size_t I = 0; I != PerRank; ++I)
      Result[R].push_back(formatAction((*Order)[R * PerRank + I]));
  }
  return Result;
}

//===----------------------------------------------------------------------===//
// Simulation
//===----------------------------------------------------------------------===//

namespace {
class Simulator {
public:
  Simulator(const PipelineSpec &S, llvm::ArrayRef<PipelineAction> Order)
      : S(S), Order(Order), P(S.Stages), M(S.MicroBatches),
        NumStages(P * S.VirtualStages), PerRank(actionsPerRank(S)),
        ForwardDone(size_t(NumStages) * M, NotDone),
        BackwardDone(size_t(NumStages) * M, NotDone), Next(P, 0), Free(P, 0),
        Busy(P, 0), InFlight(P, 0), Peak(P, 0), Queued(P, true) {}

  Expected<PipelineResult> run();

private:
  static constexpr double NotDone = -1;

  unsigned rankOf(unsigned Stage) const { return Stage % P; }
  size_t slot(unsigned Stage, unsigned MicroBatch) const {
    return size_t(Stage) * M + MicroBatch;
  }
  /// The time the result of Stage's action on MicroBatch is available to
  /// Consumer, or NotDone.
  double arrival(const std::vector<double> &Done, unsigned Stage,
                 unsigned MicroBatch, unsigned Consumer) const {
    double T = Done[slot(Stage, MicroBatch)];
    if (T == NotDone || rankOf(Stage) == Consumer)
      return T;
    return T + S.P2PSeconds;
  }
  void wake(unsigned Rank) {
    if (!Queued[Rank]) {
      Queued[Rank] = true;
      Worklist.push_back(Rank);
    }
  }
  Error checkAction(unsigned Rank, size_t Index, const PipelineAction &A) const;
  /// Runs Rank's actions until one must wait or none is left.
  Error advance(unsigned Rank);
  /// The first action of Rank's order that is still waiting, and what it
  /// waits for, for the deadlock error.
  Error deadlock(unsigned Rank) const;

  const PipelineSpec &S;
  llvm::ArrayRef<PipelineAction> Order;
  unsigned P, M, NumStages;
  size_t PerRank;
  /// Finish time of each forward and backward, by slot(), or NotDone.
  std::vector<double> ForwardDone, BackwardDone;
  /// Per rank: index of the next action in its order, time it is free,
  /// seconds busy, chunks in flight now and at most.
  std::vector<size_t> Next;
  std::vector<double> Free, Busy;
  std::vector<unsigned> InFlight, Peak;
  /// Ranks to advance, and whether a rank is among them.
  std::vector<unsigned> Worklist;
  std::vector<bool> Queued;
};
} // namespace

Error Simulator::checkAction(unsigned Rank, size_t Index,
                             const PipelineAction &A) const {
  if (A.Stage >= NumStages || A.MicroBatch >= M || rankOf(A.Stage) != Rank)
    return makeError("pipeline order: action " + Twine(Index) + " of rank " +
                     Twine(Rank) + " (" + formatAction(A) +
                     ") is out of range or on another rank");
  const std::vector<double> &Done = A.Backward ? BackwardDone : ForwardDone;
  if (Done[slot(A.Stage, A.MicroBatch)] != NotDone)
    return makeError("pipeline order: rank " + Twine(Rank) + " runs " +
                     formatAction(A) + " twice");
  return Error::success();
}

Error Simulator::advance(unsigned Rank) {
  const PipelineAction *Actions = Order.data() + Rank * PerRank;
  for (size_t &I = Next[Rank]; I != PerRank; ++I) {
    const PipelineAction &A = Actions[I];
    if (Error E = checkAction(Rank, I, A))
      return E;
    double Ready;
    double Seconds;
    if (!A.Backward) {
      Ready = 0;
      if (A.Stage != 0) {
        Ready = arrival(ForwardDone, A.Stage - 1, A.MicroBatch, Rank);
        if (Ready == NotDone)
          return Error::success();
      }
      Seconds = S.Forward[A.Stage];
    } else {
      Ready = ForwardDone[slot(A.Stage, A.MicroBatch)];
      if (Ready == NotDone)
        return Error::success();
      if (A.Stage + 1 != NumStages) {
        double Grad = arrival(BackwardDone, A.Stage + 1, A.MicroBatch, Rank);
        if (Grad == NotDone)
          return Error::success();
        Ready = std::max(Ready, Grad);
      }
      Seconds = S.Backward[A.Stage];
    }
    double Finish = std::max(Free[Rank], Ready) + Seconds;
    Free[Rank] = Finish;
    Busy[Rank] += Seconds;
    if (!A.Backward) {
      ForwardDone[slot(A.Stage, A.MicroBatch)] = Finish;
      Peak[Rank] = std::max(Peak[Rank], ++InFlight[Rank]);
      if (A.Stage + 1 != NumStages)
        wake(rankOf(A.Stage + 1));
    } else {
      BackwardDone[slot(A.Stage, A.MicroBatch)] = Finish;
      --InFlight[Rank];
      if (A.Stage != 0)
        wake(rankOf(A.Stage - 1));
    }
  }
  return Error::success();
}

Error Simulator::deadlock(unsigned Rank) const {
  const PipelineAction &A = Order[Rank * PerRank + Next[Rank]];
  PipelineAction Needed = A;
  if (!A.Backward)
    Needed.Stage = A.Stage - 1;
  else if (ForwardDone[slot(A.Stage, A.MicroBatch)] != NotDone)
    Needed.Stage = A.Stage + 1;
  else
    Needed.Backward = false;
  return makeError("pipeline order deadlocks: rank " + Twine(Rank) +
                   " waits at its action " + Twine(Next[Rank]) + " (" +
                   formatAction(A) + "), which needs " + formatAction(Needed) +
                   " (rank " + Twine(rankOf(Needed.Stage)) + ")");
}

Expected<PipelineResult> Simulator::run() {
  if (Order.size() != PerRank * P)
    return makeError("pipeline order: " + Twine(Order.size()) +
                     " actions, expected " + Twine(PerRank * P) +
                     " (2 * VirtualStages * MicroBatches per rank)");
  Worklist.reserve(P);
  for (unsigned R = P; R-- != 0;)
    Worklist.push_back(R);
  while (!Worklist.empty()) {
    unsigned Rank = Worklist.back();
    Worklist.pop_back();
    Queued[Rank] = false;
    if (Error E = advance(Rank))
      return E;
  }
  for (unsigned R = 0; R != P; ++R)
    if (Next[R] != PerRank)
      return deadlock(R);

  PipelineResult Result;
  Result.StepSeconds = *std::max_element(Free.begin(), Free.end());
  double Idle = 0;
  for (double B : Busy)
    Idle += Result.StepSeconds - B;
  if (Result.StepSeconds > 0)
    Result.BubbleFraction = Idle / (Result.StepSeconds * P);
  Result.PeakInFlight = std::move(Peak);
  Result.BusySeconds = std::move(Busy);
  if (S.RecordTimeline) {
    Result.ForwardFinish = std::move(ForwardDone);
    Result.BackwardFinish = std::move(BackwardDone);
  }
  return Result;
}

Expected<PipelineResult>
autopar::simulatePipelineOrder(const PipelineSpec &Spec,
                               llvm::ArrayRef<PipelineAction> Order) {
  if (Error E = validateShape(Spec))
    return E;
  return Simulator(Spec, Order).run();
}

Expected<PipelineResult> autopar::simulatePipeline(const PipelineSpec &Spec) {
  Expected<std::vector<PipelineAction>> Order = getScheduleOrder(Spec);
  if (!Order)
    return Order.takeError();
  return Simulator(Spec, *Order).run();
}
