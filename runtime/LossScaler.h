//===- LossScaler.h - The loss scale from step to step ----------*- C++ -*-===//
//
// The loss scale a training program's `optimizer.loss_scale` input takes
// (autodiff{loss-scale=1} seeds the loss's gradient with it,
// clip-gradients{loss-scale=1} unscales and outputs `found_inf`, which
// skips every optimizer step of a step whose gradients overflowed), as
// torch.cuda.amp.GradScaler (torch 1.13) keeps it: `dynamic` starts at
// --init-loss-scale; a step with found_inf halves the scale (backoff 0.5)
// and restarts the growth count, any other adds one to the count and, when
// it reaches --loss-scale-window (growth_interval), doubles the scale
// (growth 2) and restarts the count. `static:S` keeps S; `none` binds 1.
// Either way a step whose gradients are not finite is skipped (the program
// decides), and the optimizer's step count (AdamW's bias correction) does
// not advance on it, as torch's skipped optimizer.step() leaves each
// parameter's step.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_LOSSSCALER_H
#define AUTOPAR_RUNTIME_LOSSSCALER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <cmath>
#include <cstdint>

namespace autopar {

struct LossScaler {
  enum class Mode { None, Static, Dynamic };
  Mode Kind = Mode::None;
  /// The scale the next step uses.
  double Scale = 1;
  /// Steps without an overflow since the scale last changed (GradScaler's
  /// growth tracker).
  int64_t GrowthTracker = 0;
  /// Overflow-free steps after which a dynamic scale doubles.
  int64_t Window = 2000;

  /// Reads --loss-scale's value: "dynamic", "static:S" (S > 0, finite) or
  /// "none"; InitScale is a dynamic scale's first value.
  static llvm::Expected<LossScaler> parse(llvm::StringRef Text,
                                          double InitScale, int64_t Window) {
    LossScaler L;
    L.Window = Window;
    auto Bad = [](const llvm::Twine &Why) {
      return llvm::createStringError(llvm::inconvertibleErrorCode(), Why.str());
    };
    if (Window < 1)
      return Bad("--loss-scale-window must be 1 or more");
    if (!(InitScale > 0) || std::isinf(InitScale))
      return Bad("--init-loss-scale must be a finite scale > 0");
    llvm::StringRef Value = Text;
    if (Value == "none")
      return L;
    if (Value == "dynamic") {
      L.Kind = Mode::Dynamic;
      L.Scale = InitScale;
      return L;
    }
    if (Value.consume_front("static:") && !Value.getAsDouble(L.Scale) &&
        L.Scale > 0 && !std::isinf(L.Scale)) {
      L.Kind = Mode::Static;
      return L;
    }
    return Bad("--loss-scale must be dynamic, static:S (a finite S > 0) or "
               "none, not '" +
               Text + "'");
  }

  /// After a step: whether its gradients overflowed (found_inf).
  void update(bool FoundInf) {
    if (Kind != Mode::Dynamic)
      return;
    if (FoundInf) {
      Scale *= 0.5;
      GrowthTracker = 0;
      return;
    }
    if (++GrowthTracker == Window) {
      Scale *= 2;
      GrowthTracker = 0;
    }
  }
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_LOSSSCALER_H
