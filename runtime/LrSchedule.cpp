//===- LrSchedule.cpp - The learning rate of each training step -----------===//

#include "runtime/LrSchedule.h"

#include <algorithm>
#include <cmath>

using namespace llvm;

namespace autopar {

std::optional<LrDecay> parseLrDecay(StringRef Name) {
  if (Name == "constant")
    return LrDecay::Constant;
  if (Name == "linear")
    return LrDecay::Linear;
  if (Name == "cosine")
    return LrDecay::Cosine;
  return std::nullopt;
}

double LrSchedule::at(int64_t Step) const {
  if (WarmupSteps > 0 && Step <= WarmupSteps)
    return Peak * double(Step) / double(WarmupSteps);
  if (Decay == LrDecay::Constant)
    return Peak;
  int64_t Span = DecaySteps - WarmupSteps;
  double Progress =
      std::clamp(double(Step - 1 - WarmupSteps) / double(Span), 0.0, 1.0);
  if (Decay == LrDecay::Linear)
    return Peak + (Min - Peak) * Progress;
  return Min + (Peak - Min) * 0.5 * (1 + std::cos(M_PI * Progress));
}

Error LrSchedule::validate() const {
  auto Bad = [](const Twine &Message) {
    return createStringError(inconvertibleErrorCode(), Message.str());
  };
  if (WarmupSteps < 0)
    return Bad("--warmup-steps must be 0 or more");
  if (Min < 0 || Min > Peak)
    return Bad("--min-lr must be in [0, --lr]");
  if (Decay != LrDecay::Constant && DecaySteps <= WarmupSteps)
    return Bad("--lr-decay-steps (" + Twine(DecaySteps) +
               ") must be more than --warmup-steps (" + Twine(WarmupSteps) +
               ") for a decaying --lr-schedule");
  return Error::success();
}

} // namespace autopar
