//===- Trainer.h - The single-rank training step loop ------------*- C++ -*-===//
//
// One optimizer step of the plan on this CPU:
//
//   for each micro-batch m of the global batch (global_batch / micro_batch of them):
//     tokens, labels <- data(step, samples [m * micro, (m + 1) * micro))
//     loss_m, grads_m <- forward_backward(tokens, labels, params)   (dropout key: step, m)
//     grads += grads_m
//   grad_norm, lr, params', states' <- optimizer_step(step, 1 / micro-batches, grads, ...)
//
// The step's loss is the mean of the micro-batch losses (each a mean over its tokens), so
// it does not depend on how the global batch is split. The optimizer writes the new
// parameters and state into a second set of buffers, swapped in after the call (kernel
// outputs must not alias inputs).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_TRAINER_H
#define MTC_RUNTIME_EXEC_TRAINER_H

#include "runtime/data/TokenSource.h"
#include "runtime/exec/KernelLibrary.h"
#include "runtime/exec/TrainingState.h"
#include "runtime/plan/Plan.h"

#include <vector>

namespace mtc::rt {

/// What one step measured.
struct StepStats {
  int64_t step = 0; // steps taken after this one (1 for the first)
  double loss = 0;
  double lr = 0;
  double gradNorm = 0;  // before clipping
  int64_t tokens = 0;   // tokens of the global batch
  double seconds = 0;   // wall time of the step
};

class Trainer {
public:
  /// Binds `kernels` (of `plan`) to `state`. The plan, kernels and data must outlive the
  /// trainer. Fails when the plan's batch settings and the kernels disagree.
  static Expected<Trainer> create(const Plan &plan, const KernelLibrary &kernels,
                                  TrainingState state, const TokenSource &data);

  /// Takes one optimizer step. Fails (leaving the state of the previous step) when the loss
  /// or the gradient norm is not finite.
  Expected<StepStats> step();

  const TrainingState &state() const { return state_; }
  int64_t microBatches() const { return microBatches_; }
  int64_t microBatchSize() const { return microBatchSize_; }
  int64_t sequenceLength() const { return seqLen_; }
  /// Bytes of the buffers the trainer holds (parameters and state twice, gradients twice,
  /// the token buffers); the kernels' own temporaries come on top.
  int64_t bufferBytes() const;

private:
  Trainer(const Plan &plan, const KernelLibrary &kernels, TrainingState state,
          const TokenSource &data)
      : plan_(&plan), kernels_(&kernels), data_(&data), state_(std::move(state)) {}

  /// Where the i-th buffer of a kernel call points, per buffer kind and table index.
  struct Binding {
    BufferKind kind;
    size_t index; // into params / states / grads; unused for scalars and inputs
  };
  Error bind(const KernelFunction &fn, std::vector<Binding> &out) const;
  /// The buffer kinds each function may take, and that the optimizer writes every
  /// parameter and state exactly once.
  Error checkBindings() const;

  const Plan *plan_;
  const KernelLibrary *kernels_;
  const TokenSource *data_;
  TrainingState state_;
  TrainingState next_; // the optimizer's outputs
  std::vector<std::vector<float>> grads_, microGrads_;
  std::vector<int32_t> tokens_, labels_;
  std::vector<Binding> forwardBackwardBindings_, optimizerBindings_;
  int64_t microBatches_ = 1, microBatchSize_ = 1, seqLen_ = 1;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_TRAINER_H
