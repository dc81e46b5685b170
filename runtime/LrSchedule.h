//===- LrSchedule.h - The learning rate of each training step ---*- C++ -*-===//
//
// Warmup, then decay, as Megatron-LM and torch.optim.lr_scheduler train:
// over the first W steps the rate rises linearly to its peak (step s of
// the W at Peak * s / W); then it stays (constant), or falls from the peak
// to Min over the decay steps linearly or on a half cosine, and stays at
// Min after them. Step s after the warmup is at progress (s - 1 - W) /
// (D - W): the first step after the warmup trains at the peak, exactly as
// torch's SequentialLR of LinearLR (warmup) and CosineAnnealingLR or
// LinearLR (decay) with milestone W does (test/Runtime/train-lr-schedule.test
// checks the losses against it). The rate depends on the step alone, so a
// resumed run continues it.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_LRSCHEDULE_H
#define AUTOPAR_RUNTIME_LRSCHEDULE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>

namespace autopar {

enum class LrDecay { Constant, Linear, Cosine };

/// "constant", "linear" or "cosine".
std::optional<LrDecay> parseLrDecay(llvm::StringRef Name);

struct LrSchedule {
  LrDecay Decay = LrDecay::Constant;
  /// The rate after the warmup, and the rate the decay ends at.
  double Peak = 1e-3, Min = 0;
  /// Steps of warmup (0: none), and the step the decay ends at (counted
  /// from the first step, warmup included).
  int64_t WarmupSteps = 0, DecaySteps = 0;

  /// The rate of step Step (1 for the first).
  double at(int64_t Step) const;
  /// True when every step has the peak rate.
  bool isConstant() const {
    return Decay == LrDecay::Constant && WarmupSteps == 0;
  }
  /// An error naming the option at fault (--warmup-steps, --min-lr,
  /// --lr-decay-steps).
  llvm::Error validate() const;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_LRSCHEDULE_H
