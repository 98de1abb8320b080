//===- LossScaler.h - fp16's loss scale, chosen step by step -----*- C++ -*-===//
//
// An fp16 step differentiates the loss times a scale S (the compiled backward starts from
// `mt.loss_scale`, which reads S through the kernel context: KernelABI.h's mtc_loss_scale),
// so that gradients too small for f16 are not flushed to zero; the optimizer step divides S
// out again with its gradient scale. Too large an S overflows instead: a gradient becomes inf
// or NaN, the step is skipped (parameters, optimizer state and the optimizer's step count
// stay as they were) and S is lowered.
//
// This is Megatron's recipe (megatron/core/optimizer/grad_scaler.py): `--loss-scale S` fixes
// S (its ConstantGradScaler: an overflow still skips the step); otherwise the scale is
// dynamic (DynamicGradScaler) from `--initial-loss-scale` (2^32), halved after `--hysteresis`
// (2) overflows, never below `--min-loss-scale` (1), and doubled after `--loss-scale-window`
// (1000) steps in a row without one, which also restores the hysteresis. The hysteresis is
// not restored by a step without an overflow, only by a growth. Megatron's scale is an f32
// tensor; so is S here (every value a power of two times the initial one, exact in f32).
// Growth stops where doubling would overflow f32 (Megatron has no bound; a window of 1000
// needs 100,000 clean steps from 2^32 to reach it).
//
// The state (scale and both trackers) is the run's: checkpoints keep it (Checkpoint.h), and
// every rank updates it from the same global gradient norm, so the ranks agree without
// communicating.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_LOSSSCALER_H
#define MTC_RUNTIME_EXEC_LOSSSCALER_H

#include "runtime/support/Error.h"

#include <cstdint>
#include <optional>

namespace mtc::rt {

/// mtrun's loss-scaling flags, with Megatron's defaults.
struct LossScaleOptions {
  /// `--loss-scale`: a fixed scale (none: dynamic).
  std::optional<float> fixed;
  /// `--initial-loss-scale`.
  float initial = 4294967296.0f; // 2^32
  /// `--min-loss-scale`.
  float minimum = 1.0f;
  /// `--loss-scale-window`: steps without an overflow before the scale doubles.
  int64_t window = 1000;
  /// `--hysteresis`: overflows before the scale halves.
  int64_t hysteresis = 2;

  /// An error naming the flag whose value is unusable (a scale that is not a positive finite
  /// f32, a minimum above the initial scale, a window or hysteresis below 1).
  Error check() const;
};

/// What a run carries from step to step (and checkpoints).
struct LossScaleState {
  float scale = 1.0f;
  /// Steps in a row without an overflow since the last change of scale.
  int64_t growthTracker = 0;
  /// Overflows left before the scale halves.
  int64_t hysteresisTracker = 0;
  /// Steps skipped because a gradient overflowed, in the whole run.
  int64_t skippedSteps = 0;

  bool operator==(const LossScaleState &) const = default;
};

/// Whether the step with 0-based index `step`, whose global gradient norm is `gradNorm`,
/// overflowed (an inf or NaN norm), so that it is skipped; without loss scaling (`scaling`
/// false) such a norm is an error instead: training diverged.
Expected<bool> gradientOverflow(float gradNorm, bool scaling, int64_t step);

class LossScaler {
public:
  /// Starts from `resumed` (a checkpoint's state) or from the options' initial scale.
  explicit LossScaler(const LossScaleOptions &options,
                      std::optional<LossScaleState> resumed = std::nullopt);

  /// The scale the next step's backward starts from.
  float scale() const { return options_.fixed ? *options_.fixed : state_.scale; }
  /// After a step: `overflow` is whether any gradient was inf or NaN (the step is skipped
  /// and counted).
  void update(bool overflow);
  const LossScaleState &state() const { return state_; }

private:
  LossScaleOptions options_;
  LossScaleState state_;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_LOSSSCALER_H
