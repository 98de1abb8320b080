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
//   grad_norm, lr <- optimizer_step(step, 1 / micro-batches, grads, params, states)
//                                                (params and states updated in place)
//
// Everything the functions read and write lives in one device arena (DeviceStepLayout.h)
// allocated when the trainer is created; the host code's launches and GEMMs go to one
// compute stream (GpuHostCalls.h), the losses, the gradient norm and the learning rate are
// copied back after each call, and the optimizer updates the parameters and states in place
// unless an fp16 step overflowed (LossScaler.h, as on the CPU). The parameters and optimizer state
// reach the host only when asked (`syncState`: checkpoints, the export, the end of the
// run).
//
// Several ranks, one GPU each (the device of the local rank, CudaDevice::forLocalRank):
// the trainer joins an NCCL world over the job's rendezvous store (NcclCommunicator.h) and
// splits it into the plan's mesh exactly as the CPU path splits its Gloo world (RankMesh:
// one communicator per mesh axis, the data-parallel group). The host code's collectives
// (MeshCollectives.h) run over those axes on device pointers, through a MeshMemory on the
// compute stream; the data-parallel ranks deal the micro-batches as the CPU's Trainer does
// (m % dp == rank) and all-reduce the gradients (one buffer), the loss sum and the expert
// counts over NCCL before the optimizer step, so every rank logs the CPU run's loss.
//
// Stream order: a communicator operation runs on NCCL's own stream. Before each one the
// compute stream is synchronized (the operation reads what the kernels queued before it
// wrote), and its Work is waited for on the host before anything else is queued (what the
// kernels queue next reads its result). Both hold without the trainer knowing NCCL's
// stream, and the host code calls its collectives synchronously anyway (the C ABI returns
// after the operation), so an event between the streams would overlap nothing more. A hung
// or dead peer fails the wait within the job's --comm-timeout (NCCL's communicator is then
// aborted), and the step fails with that error.
//
// Not handled: pipeline plans, the distributed optimizer (a plan whose mesh names a
// data-parallel axis: ZeRO-1/2/3 shard the optimizer state and gradients over it) and expert
// parallelism's filled-slot exchange; `create` refuses the first two, the third fails the
// step with MeshCollectives' message. Nothing of this has run on a GPU yet (docs/runtime.md,
// "The CUDA trainer").
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DEVICE_CUDA_CUDATRAINER_H
#define MTC_RUNTIME_DEVICE_CUDA_CUDATRAINER_H

#include "runtime/device/cuda/CublasAxpy.h"
#include "runtime/device/cuda/CublasLtGemm.h"
#include "runtime/device/cuda/CudaDevice.h"
#include "runtime/device/cuda/CudaLayer.h"
#include "runtime/device/cuda/DeviceArena.h"
#include "runtime/device/cuda/DeviceStepLayout.h"
#include "runtime/device/cuda/GpuHostCalls.h"
#include "runtime/device/cuda/Stream.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/Rendezvous.h"
#include "runtime/exec/DeviceTrainer.h"
#include "runtime/exec/MeshCollectives.h"
#include "runtime/exec/RankMesh.h"
#include "runtime/exec/StepBindings.h"

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace mtc::rt::cuda {

/// What the CUDA trainer refuses of a plan on `worldSize` ranks, before any GPU is looked
/// for (mtrun checks the same before it starts the ranks): a pipeline, the distributed
/// optimizer, a mesh larger than the job.
Error checkCudaPlan(const Plan &plan, int64_t worldSize);

/// A MeshMemory (MeshCollectives.h) on a stream's device: copies and clears are queued on
/// the stream, `synchronize` waits for it.
class StreamMemory final : public MeshMemory {
public:
  explicit StreamMemory(const Stream *stream) : stream_(stream) {}
  Error synchronize() override;
  Error copy(void *out, const void *in, size_t bytes) override;
  Error clear(void *out, size_t bytes) override;

private:
  const Stream *stream_;
};

class CudaTrainer final : public DeviceTrainer {
public:
  /// Places `inputs.state` (this rank's shards) on the device of `job.localRank`
  /// (CudaDevice::forLocalRank) and binds the host code to it; with several ranks, joins the
  /// job's NCCL world and splits the plan's mesh from it (collective: every rank creates its
  /// trainer at the same point). Fails when no GPU is usable, checkCudaPlan refuses the plan,
  /// the batch does not split into the kernels' micro-batches over the data-parallel ranks,
  /// the bindings do not fit (StepBindings), the arena does not fit in the device's memory,
  /// or the NCCL world cannot be joined within the timeout.
  static Expected<std::unique_ptr<CudaTrainer>> create(DeviceTrainerInputs inputs,
                                                       const CudaJob &job = {});

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
  uint64_t bytesSent() const override;
  /// The data-parallel group's size and this rank's index in it (1 and 0 alone).
  int64_t dataParallelSize() const { return dataParallel_ ? dataParallel_->size() : 1; }
  int64_t dataParallelRank() const { return dataParallel_ ? dataParallel_->rank() : 0; }

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
  /// Sums `count` host values of `type` over the data-parallel ranks through the staging
  /// buffer (NCCL takes device pointers).
  Error allReduceHost(void *values, size_t count, MtcElementType type, std::string_view what);
  /// Sums the gradients, `lossSum` and the expert counts over the data-parallel ranks (as
  /// the CPU's Trainer::reduceOverDataParallel).
  Error reduceOverDataParallel(double &lossSum, int64_t step);
  /// The optimizer step on the device, updating the parameters and states in place.
  Error optimizerStepOnDevice(float stepScalar, float gradScale, float &gradNorm, float &lr,
                              int64_t step);
  /// The optimizer step offloaded (DeviceTrainer.h): the gradients down, the x86
  /// optimizer_step updating host_ in place.
  Error optimizerStepOnHost(float stepScalar, float gradScale, float &gradNorm, float &lr,
                            int64_t step);
  /// After an offloaded step that was not skipped: host_'s updated parameters go up to the
  /// device's copy.
  Error uploadHostUpdate(int64_t step);

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
  /// The host's copy (DeviceTrainer.h; with the optimizer offloaded, the current values).
  TrainingState host_;
  /// With the optimizer offloaded: the plan's x86 kernels and their optimizer_step's
  /// bindings and the summed gradients brought to the host (DeviceStepLayout's one range, as laid out there).
  const KernelLibrary *hostOptimizer_ = nullptr;
  std::vector<BufferBinding> hostOptimizerBindings_;
  std::vector<float> hostGradients_;
  std::vector<int32_t> tokens_, labels_;
  /// With a loss mask (Plan::eodMaskLoss) or position ids (Plan::takesPositionIds): those of
  /// the tokens read (data/LossMask.h, data/Documents.h, as the CPU's Trainer computes
  /// them), and the data's end of document.
  std::vector<float> lossMask_;
  std::vector<int32_t> positionIds_;
  int64_t endOfDocument_ = 0;
  /// The device buffer of the i-th input of forward_backward or forward: the tokens, the
  /// labels, the loss mask, the position ids (the loader checked that order).
  void *inputBuffer(int index) const;
  /// forward_backward's `expert_load` outputs (counts copied back), summed over the step.
  std::vector<ExpertLoad> expertLoad_;
  /// Several ranks: the NCCL world, the mesh split from it (destroyed first), the kernels'
  /// view of it (its axes with `memory` = meshMemory_) and the data-parallel group (null
  /// alone); a device buffer for the host values reduced over it.
  std::unique_ptr<Communicator> world_;
  std::optional<RankMesh> mesh_;
  StreamMemory meshMemory_{&compute_};
  MeshContext meshContext_;
  Communicator *dataParallel_ = nullptr;
  std::optional<DeviceArena> staging_;
};

/// The CUDA device as runTraining takes it (DeviceTrainer.h): the plan's CUDA host code and
/// a CudaTrainer for this rank of `job`.
DeviceBackend cudaBackend(CudaJob job = {});

} // namespace mtc::rt::cuda

#endif // MTC_RUNTIME_DEVICE_CUDA_CUDATRAINER_H
