//===- StepBindings.h - Which buffer each argument of a step function is -*- C++ -*-===//
//
// A step function's buffers (plan.json's `inputs` then `outputs`) name what they are: token
// ids, a parameter, an optimizer state, a gradient, the loss, a scalar. A trainer binds them
// once to its tables (by name: a parameter or state buffer to its entry of the training
// state) and checks that each function takes only what it can pass; every step then walks
// the bindings to lay out the call's pointers. The CPU's Trainer and a device's trainer
// (runtime/device/cuda/CudaTrainer.h) bind the same functions the same way, so the checks
// live here once:
//
//   forward_backward   tokens, labels, parameters in; loss, gradients, expert loads out
//   optimizer_step     step, gradient scale, gradients, every parameter and every state
//                      (once each, updated in place) in; gradient norm, learning rate out
//   forward            tokens, labels (forward_backward's), parameters in; the loss alone out
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_STEPBINDINGS_H
#define MTC_RUNTIME_EXEC_STEPBINDINGS_H

#include "runtime/exec/KernelLibrary.h"
#include "runtime/exec/TrainingState.h"
#include "runtime/plan/Plan.h"
#include "runtime/support/Error.h"

#include <cstddef>
#include <functional>
#include <vector>

namespace mtc::rt {

/// Where the i-th buffer of a kernel call points.
struct BufferBinding {
  BufferKind kind;
  /// Into the state's params (Param, Grad) or states (State), or the n-th ExpertLoad
  /// output; unused for inputs and scalars.
  size_t index = 0;
};

/// The data inputs of forward_backward and forward, in the order the plan's loader checked:
/// the token ids, the labels, the loss mask (Plan::eodMaskLoss), the position ids
/// (Plan::takesPositionIds).
enum class DataInput { Tokens, Labels, LossMask, PositionIds };

/// What the `index`-th data input of a plan that takes a loss mask (`lossMask`) or not is.
DataInput dataInputAt(int index, bool lossMask);

/// forward_backward's `expert_load` outputs as a trainer keeps them: a micro-batch's counts
/// and their sum over the step's micro-batches, row-major [layers, experts] (i64).
struct ExpertLoad {
  int64_t layers = 0, experts = 0;
  std::vector<int64_t> counts, sum;

  /// One per `expert_load` output of `forwardBackward` (KernelLibrary checked their shape);
  /// std::bad_alloc when out of memory.
  static std::vector<ExpertLoad> forOutputs(const KernelFunction &forwardBackward);
  /// The sums, layer by layer: StepStats::tokensPerExpert's rows of `loads`.
  static std::vector<std::vector<int64_t>> rows(const std::vector<ExpertLoad> &loads);
  /// Adds the counts to the sum.
  void addCounts();
};

/// The bindings of a trainer's step functions, checked.
struct StepBindings {
  std::vector<BufferBinding> forwardBackward, optimizerStep;
  /// Empty unless asked for (evaluation).
  std::vector<BufferBinding> forward;

  /// Binds `kernels`' forward_backward and optimizer_step (and with `withForward` its
  /// forward, an error naming the plan when it has none) to `state`'s tables. Errors name the
  /// plan and the buffer that names no table entry or has a kind its function cannot take.
  static Expected<StepBindings> create(const Plan &plan, const KernelLibrary &kernels,
                                       const TrainingState &state, bool withForward);
};

/// Where an optimizer_step call's buffers lie, as a trainer keeps them: the scalars, the
/// i-th gradient, and the i-th parameter or state (which the call updates in place; a step
/// whose gradient norm is not finite leaves them as they were).
struct OptimizerStepBuffers {
  void *step = nullptr, *gradScale = nullptr, *gradNorm = nullptr, *lr = nullptr;
  std::function<void *(size_t index)> grad, param, state;
};

/// The pointers of an optimizer_step call in its argument order: `bindings` are the
/// function's (StepBindings::optimizerStep). The
/// CPU's Trainer and the CUDA trainer (on the device, or on the host with the optimizer
/// offloaded) lay out their calls through this one walk.
std::vector<void *> optimizerStepCall(const std::vector<BufferBinding> &bindings,
                                      const OptimizerStepBuffers &where);

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_STEPBINDINGS_H
