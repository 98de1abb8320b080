//===- DeviceTrainer.h - A training loop whose state lives on a device -*- C++ -*-===//
//
// The step loop of runTraining (TrainingRun.h) drives a Trainer on this CPU, a
// PipelineTrainer across stages, or a DeviceTrainer: one rank's steps on an accelerator,
// whose parameters, gradients and optimizer state live in device memory
// (runtime/device/cuda/CudaTrainer.h). The executor library does not link any device
// layer; the program that does (mtrun with the CUDA toolkit) hands runTraining a factory
// (TrainingRunOptions::device).
//
// The host's copy of the training state (`state()`) holds the step count and the loss
// scaler's state after every step; its parameter and state values are those of the last
// `syncState()`, which copies them back from the device (for a checkpoint, the export, the
// end of the run).
//
// Optimizer offload (Megatron-Core's --optimizer-cpu-offload, DeepSpeed's offload_optimizer):
// the optimizer state never reaches the device. Forward and backward run there; the summed
// gradients come to the host, the plan's x86 `optimizer_step` updates the host's f32 master
// parameters and state, and the new parameters go back. The device then holds one copy of
// the parameters and none of the state.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_DEVICETRAINER_H
#define MTC_RUNTIME_EXEC_DEVICETRAINER_H

#include "runtime/data/TokenSource.h"
#include "runtime/exec/KernelLibrary.h"
#include "runtime/exec/LossScaler.h"
#include "runtime/exec/Trainer.h"
#include "runtime/exec/TrainingState.h"
#include "runtime/plan/Plan.h"
#include "runtime/support/Error.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace mtc::rt {

class DeviceTrainer {
public:
  virtual ~DeviceTrainer() = default;

  /// The device, for the run's log ("NVIDIA H100 ... (device 0, sm_90, 132 SMs, 79.1 GiB)").
  virtual std::string describeDevice() const = 0;
  /// As Trainer::step and Trainer::evaluate (`source` null: the validation data), on the
  /// device.
  virtual Expected<StepStats> step() = 0;
  virtual Expected<double> evaluate(int64_t firstBatch, int64_t count,
                                    const TokenSource *source) = 0;
  Expected<double> evaluate(int64_t firstBatch, int64_t count) {
    return evaluate(firstBatch, count, nullptr);
  }
  /// The host's copy of the state (see the file comment).
  virtual const TrainingState &state() const = 0;
  /// Copies the parameters and optimizer state back into state().
  virtual Error syncState() = 0;
  virtual int64_t microBatches() const = 0;
  virtual int64_t microBatchSize() const = 0;
  virtual int64_t sequenceLength() const = 0;
  /// The most device memory the trainer has held: its buffers, the kernels' workspace and
  /// the GEMM library's workspace.
  virtual int64_t peakBytes() const = 0;
  /// Bytes this rank sent over the device's own communicators (NCCL's; 0 for one rank).
  virtual uint64_t bytesSent() const { return 0; }
};

/// What runTraining gives a device trainer's factory: the plan and its loaded device host
/// code (both outlive the trainer), the start state, the data (outliving the trainer), the
/// global batch (0: the plan's), the validation data (null: no evaluation) and the data's
/// end-of-document id (for a plan that masks the loss there, Plan::eodMaskLoss).
struct DeviceTrainerInputs {
  const Plan &plan;
  const KernelLibrary &kernels;
  TrainingState state;
  const TokenSource &data;
  int64_t globalBatch = 0;
  const TokenSource *validation = nullptr;
  LossScaleOptions lossScaling;
  std::optional<int64_t> endOfDocument;
  /// With the optimizer offloaded (see the file comment): the plan's x86 kernels, whose
  /// optimizer_step runs on the host (outliving the trainer); null otherwise.
  const KernelLibrary *hostOptimizer = nullptr;
};

/// What optimizer offload needs of a plan, before any device is looked for: its x86
/// optimizer_step (a plan compiled with --target=x86,cuda) and no mesh (the x86 step's
/// collectives, the gradient norm's over tp say, would run on the host, where a device
/// trainer's communicators take device memory). Data parallelism outside the mesh is fine:
/// the gradients are summed on the device first.
Error checkOptimizerOffload(const Plan &plan);

/// A device as runTraining uses it: the plan's host code for the device
/// (KernelLibrary::loadCudaHost) and a trainer over it.
struct DeviceBackend {
  std::function<Expected<KernelLibrary>(const Plan &plan)> loadKernels;
  std::function<Expected<std::unique_ptr<DeviceTrainer>>(DeviceTrainerInputs inputs)>
      createTrainer;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_DEVICETRAINER_H
