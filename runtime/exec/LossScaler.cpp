//===- LossScaler.cpp - fp16's loss scale, chosen step by step ------------===//

#include "runtime/exec/LossScaler.h"

#include "runtime/exec/KernelABI.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mtc::rt {

namespace {

bool isScale(float value) { return std::isfinite(value) && value > 0; }

} // namespace

Error LossScaleOptions::check() const {
  if (fixed && !isScale(*fixed))
    return makeError("--loss-scale ", *fixed, " is not a positive finite f32 value");
  if (!isScale(initial))
    return makeError("--initial-loss-scale ", initial, " is not a positive finite f32 value");
  if (!isScale(minimum))
    return makeError("--min-loss-scale ", minimum, " is not a positive finite f32 value");
  if (minimum > initial)
    return makeError("--min-loss-scale ", minimum, " is above --initial-loss-scale ", initial);
  if (window < 1)
    return makeError("--loss-scale-window ", window, " is not a positive step count");
  if (hysteresis < 1)
    return makeError("--hysteresis ", hysteresis, " is not a positive count of overflows");
  return Error::success();
}

Expected<bool> gradientOverflow(float gradNorm, bool scaling, int64_t step) {
  if (std::isfinite(gradNorm))
    return false;
  if (!scaling)
    return makeError("step ", step + 1, ": the gradient norm is ", double(gradNorm),
                     " (training diverged)");
  return true;
}

LossScaler::LossScaler(const LossScaleOptions &options, std::optional<LossScaleState> resumed)
    : options_(options),
      state_(resumed ? *resumed : LossScaleState{options.initial, 0, options.hysteresis, 0}) {}

void LossScaler::update(bool overflow) {
  state_.skippedSteps += overflow;
  if (options_.fixed)
    return;
  if (overflow) {
    state_.growthTracker = 0;
    if (--state_.hysteresisTracker <= 0)
      state_.scale = std::max(state_.scale * 0.5f, options_.minimum);
    return;
  }
  if (++state_.growthTracker < options_.window)
    return;
  state_.growthTracker = 0;
  state_.hysteresisTracker = options_.hysteresis;
  if (state_.scale <= std::numeric_limits<float>::max() / 2)
    state_.scale *= 2;
}

} // namespace mtc::rt

extern "C" float mtc_loss_scale(MtcKernelContext *context) {
  const MtcKernelContext *checked = mtc_kernel_context_checked(context);
  return checked && checked->loss_scale > 0 ? checked->loss_scale : 1.0f;
}
