//===- TrainingState.h - Parameters, optimizer state and the step count -*- C++ -*-===//
//
// Everything a training run carries from one step to the next, in host memory: the
// parameters and optimizer state in the plan's table order (f32, row-major, stored dims)
// the number of steps taken and, for fp16, the loss scaler's state. A run starts from `initialize` (Philox
// initialisation, zero state) or from a checkpoint (Checkpoint.h).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_TRAININGSTATE_H
#define MTC_RUNTIME_EXEC_TRAININGSTATE_H

#include "runtime/exec/LossScaler.h"
#include "runtime/plan/ParamInit.h"
#include "runtime/plan/Plan.h"
#include "runtime/support/Error.h"
#include "runtime/support/Safetensors.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace mtc::rt {

struct TrainingState {
  using Tensor = HostParams::Tensor;

  std::vector<Tensor> params; // plan.params order
  std::vector<Tensor> states; // plan.states order
  int64_t step = 0;           // steps taken, skipped ones included
  /// fp16's loss scaling so far (LossScaler.h): none before an fp16 plan's first step.
  std::optional<LossScaleState> lossScale;

  /// The optimizer's count of the updates it made (Adam's bias correction and the learning
  /// rate schedule read it): the steps taken but those skipped for a gradient overflow.
  int64_t optimizerSteps() const { return step - (lossScale ? lossScale->skippedSteps : 0); }

  /// The state at step 0 of `plan`: initialised parameters, zero optimizer state.
  static Expected<TrainingState> initialize(const Plan &plan, unsigned threads = 0);
  /// The same for the rank at mesh `coordinates` (runtime/plan/Sharding.h): every tensor is
  /// the rank's shard, in local shape, with the values of the whole tensor there (parameters
  /// by their layout, optimizer states by their parameter's optimizer layout).
  static Expected<TrainingState> initializeShards(const Plan &plan,
                                                  const std::vector<int64_t> &coordinates,
                                                  unsigned threads = 0);

  /// The zero optimizer state of the rank at mesh `coordinates` (each state in its
  /// optimizer layout's local shape; whole without a mesh).
  static Expected<std::vector<Tensor>> zeroStates(const Plan &plan,
                                                  const std::vector<int64_t> &coordinates);
  /// Borrowed F32 views of the parameters, named as in the .mtl (for export).
  std::vector<TensorRef> paramRefs() const;
  /// Bytes of all tensors together.
  int64_t bytes() const;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_TRAININGSTATE_H
