//===- Heartbeat.h - Ranks watching each other over UDP ---------*- C++ -*-===//
//
// `autopar-run --heartbeat S` (docs/Operations.md): every rank opens a UDP
// socket of its own (never the collectives' channel), the ranks exchange
// their addresses once (an all-gather through the backend), and a thread
// per rank
//   - sends a datagram every S seconds: ranks other than 0 to rank 0, rank
//     0 to every rank; it carries the rank, its step and its activity (the
//     node it is running, or the communication in progress);
//   - checks four times per period when it last heard from the ranks it
//     watches (rank 0 watches every rank, the others rank 0); one silent
//     for 1.5 S is lost: a frozen rank is noticed within 2 S of its last
//     beat at most (1.5 S plus a quarter period).
// On a loss it calls OnLost once with the lost rank, its host, its last
// activity and how long it has been silent, from the heartbeat thread; the
// caller reports it and ends the process (mpirun then ends the job).
//
// Assumes the ranks can reach each other's hosts over UDP at the address
// their host name resolves to (127.0.0.1 when it does not resolve).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_HEARTBEAT_H
#define AUTOPAR_RUNTIME_HEARTBEAT_H

#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <string>

namespace autopar {

class Backend;

struct HeartbeatLoss {
  int Rank = 0;
  std::string Host;
  /// What the rank's last heartbeat said it was doing, and its step.
  std::string Activity;
  int64_t Step = 0;
  double SilentSeconds = 0;
};

class HeartbeatMonitor {
public:
  using ActivityFn = std::function<std::string()>;
  using LostFn = std::function<void(const HeartbeatLoss &)>;

  /// Exchanges addresses over B's communicator (every rank must call it)
  /// and starts the thread. Activity is called on the thread at each beat.
  static llvm::Expected<std::unique_ptr<HeartbeatMonitor>>
  start(Backend &B, double PeriodSeconds, ActivityFn Activity, LostFn OnLost);
  ~HeartbeatMonitor();

  /// The step the next beats report.
  void setStep(int64_t Step);

  struct Impl;

private:
  explicit HeartbeatMonitor(std::unique_ptr<Impl> I);
  std::unique_ptr<Impl> P;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_HEARTBEAT_H
