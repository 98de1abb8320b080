//===- CudaTrainer.h - The training step loop on one GPU ---------*- C++ -*-===//
//
// `mtrun PLAN --device cuda` trains a plan compiled with --target=cuda on one GPU: the
// same step as the CPU's Trainer (Trainer.h), with the plan's CUDA host code
// (`kernels/cuda_host.so`, KernelLibrary::loadCudaHost) in place of its x86 kernels:
//
//   for each micro-batch m of the global batch:
//     tokens, labels <- data(step, samples [m * micro, (m + 1) * micro)), copied in
//     loss_m, grads_m <- forward_backward(tokens, labels, params)   (dropout key: step, m)
//     grads += grads_m                               (cuBLAS saxpy from the second on)
//   grad_norm, lr, params', states' <- optimizer_step(step, 1 / micro-batches, grads, ...)
//
// Everything the functions read and write lives in one device arena (DeviceStepLayout.h)
// allocated when the trainer is created; the host code's launches and GEMMs go to one
// compute stream (GpuHostCalls.h), the losses, the gradient norm and the learning rate are
// copied back after each call, and the optimizer's outputs are swapped in (no copy) unless
// an fp16 step overflowed (LossScaler.h, as on the CPU). The parameters and optimizer state
// reach the host only when asked (`syncState`: checkpoints, the export, the end of the
// run).
//
// One rank, no mesh, no pipeline: multi-GPU training (NCCL) is not implemented; `create`
// refuses such a plan. Nothing of this has run on a GPU yet (docs/runtime.md, "The CUDA
// trainer").
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DEVICE_CUDA_CUDATRAINER_H
#define MTC_RUNTIME_DEVICE_CUDA_CUDATRAINER_H

#include "runtime/device/cuda/CublasAxpy.h"
#include "runtime/device/cuda/CublasLtGemm.h"
#include "runtime/device/cuda/CudaDevice.h"
#include "runtime/device/cuda/DeviceArena.h"
#include "runtime/device/cuda/DeviceStepLayout.h"
#include "runtime/device/cuda/GpuHostCalls.h"
#include "runtime/device/cuda/Stream.h"
#include "runtime/exec/DeviceTrainer.h"
#include "runtime/exec/StepBindings.h"

#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace mtc::rt::cuda {

class CudaTrainer final : public DeviceTrainer {
public:
  /// Places `inputs.state` on the device of local rank 0 (CudaDevice::forLocalRank) and
  /// binds the host code to it. Fails when no GPU is usable, the plan is partitioned or
  /// pipelined, the batch does not split into the kernels' micro-batches, the bindings do not
  /// fit (StepBindings), or the arena does not fit in the device's memory.
  static Expected<std::unique_ptr<CudaTrainer>> create(DeviceTrainerInputs inputs);

  std::string describeDevice() const override { return device_.describe(); }
  Expected<StepStats> step() override;
  using DeviceTrainer::evaluate;
  Expected<double> evaluate(int64_t firstBatch, int64_t count,
                            const TokenSource *source) override;
  const TrainingState &state() const override { return host_; }
  Error syncState() override;
  int64_t microBatches() const override { return microBatches_; }
  int64_t microBatchSize() const override { return shape_.microBatchSize; }
  int64_t sequenceLength() const override { return shape_.sequenceLength; }
  int64_t peakBytes() const override;

private:
  CudaTrainer(DeviceTrainerInputs &inputs, CudaDevice device, PlanKernels kernels,
              Stream compute, CublasLtGemm gemm, CublasAxpy axpy, DeviceArena arena,
              DeviceStepLayout layout, DeviceStepShape shape, StepBindings bindings);

  /// The device address of `range` of the arena.
  void *at(const ArenaRange &range) const;
  /// Copies `bytes` between the host and the arena on the compute stream; reads wait for it.
  Error upload(const ArenaRange &range, const void *host, int64_t bytes, std::string_view what);
  Error download(void *host, const ArenaRange &range, int64_t bytes, std::string_view what);
  /// Calls `kernel` on the compute stream with the arena's workspace; the call's first
  /// failure names `what`.
  Error call(const LoadedKernel &kernel, std::span<void *const> buffers, std::string_view what,
             DropoutCall *dropout, float lossScale);
  /// Reads the next batch of `source` into the device's tokens and labels.
  Error loadBatch(const TokenSource &source, int64_t batch, int64_t sampleBegin);

  const Plan *plan_;
  const KernelLibrary *library_;
  const TokenSource *data_;
  const TokenSource *validation_;
  LossScaleOptions lossScaleOptions_;
  CudaDevice device_;
  PlanKernels kernels_;
  Stream compute_;
  CublasLtGemm gemm_;
  CublasAxpy axpy_;
  DeviceArena arena_;
  DeviceStepLayout layout_;
  DeviceStepShape shape_;
  StepBindings bindings_;
  int64_t microBatches_ = 1;
  /// The host's copy (DeviceTrainer.h); which of the layout's two copies of the parameters
  /// and states is current.
  TrainingState host_;
  size_t current_ = 0;
  std::vector<int32_t> tokens_, labels_;
  /// With a loss mask (Plan::eodMaskLoss): the mask of the tokens read, and the data's end
  /// of document.
  std::vector<float> lossMask_;
  int64_t endOfDocument_ = 0;
  /// The device buffer of the i-th input of forward_backward or forward: the tokens, the
  /// labels, the loss mask (the loader checked that order).
  void *inputBuffer(int index) const;
  /// forward_backward's `expert_load` outputs (counts copied back), summed over the step.
  std::vector<ExpertLoad> expertLoad_;
};

/// The CUDA device as runTraining takes it (DeviceTrainer.h): the plan's CUDA host code and
/// a CudaTrainer.
DeviceBackend cudaBackend();

} // namespace mtc::rt::cuda

#endif // MTC_RUNTIME_DEVICE_CUDA_CUDATRAINER_H
