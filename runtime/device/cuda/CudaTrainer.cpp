//===- CudaTrainer.cpp - The training step loop on one GPU ----------------===//

#include "runtime/device/cuda/CudaTrainer.h"

#include "runtime/comm/ElementTypes.h"
#include "runtime/data/Documents.h"
#include "runtime/data/LossMask.h"
#include "runtime/device/cuda/CudaError.h"
#include "runtime/exec/DropoutKey.h"

#include <cuda_runtime_api.h>

#ifdef MTC_HAVE_NCCL
#include "runtime/comm/NcclCommunicator.h"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>

namespace mtc::rt::cuda {
namespace {

constexpr int64_t kGemmWorkspaceBytes = 32ll << 20;

/// Joins the job's NCCL world on `device` (one rank: none).
Expected<std::unique_ptr<Communicator>> joinNcclWorld(const CudaJob &job,
                                                      const CudaDevice &device) {
  if (job.size <= 1)
    return std::unique_ptr<Communicator>();
#ifdef MTC_HAVE_NCCL
  NcclOptions options;
  options.device = device.ordinal();
  options.timeout = job.timeout;
  options.rendezvousTimeout = job.timeout;
  Expected<std::unique_ptr<NcclCommunicator>> world =
      NcclCommunicator::create(job.store, job.rank, job.size, options);
  if (!world)
    return world.takeError().withContext("connecting the ranks' GPUs over NCCL");
  return std::unique_ptr<Communicator>(std::move(*world));
#else
  (void)device;
  return makeError("--device cuda on ", job.size,
                   " ranks needs NCCL, and this mtrun was built without it (NCCL's header and "
                   "library were not found next to the CUDA toolkit)");
#endif
}

} // namespace

Error checkCudaPlan(const Plan &plan, int64_t worldSize) {
  if (plan.pipeline)
    return makeError(plan.dir.string(), ": a pipeline plan; the CUDA trainer does not run "
                                        "pipeline parallelism (train it with --device cpu)");
  if (plan.dataParallelAxis)
    return makeError(plan.dir.string(), ": the plan's mesh has a data-parallel axis '",
                     plan.mesh[*plan.dataParallelAxis].name,
                     "' (the distributed optimizer, ZeRO-", plan.zeroStage,
                     "); the CUDA trainer does not shard the optimizer (train it with --device "
                     "cpu)");
  if (worldSize < 1 || worldSize % plan.meshSize() != 0)
    return makeError(plan.dir.string(), ": the plan is partitioned over a mesh of ",
                     plan.meshSize(), " ranks, which the job's ", worldSize, " rank",
                     worldSize == 1 ? "" : "s", " cannot hold (give a multiple of ",
                     plan.meshSize(), ")");
  return Error::success();
}

Error StreamMemory::synchronize() {
  return stream_->synchronize().withContext("waiting for the kernels before a collective");
}

Error StreamMemory::copy(void *out, const void *in, size_t bytes) {
  return cudaStatus(
      cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, stream_->handle()),
      "copying a collective's buffer on the device");
}

Error StreamMemory::clear(void *out, size_t bytes) {
  return cudaStatus(cudaMemsetAsync(out, 0, bytes, stream_->handle()),
                    "clearing a failed collective's output on the device");
}

CudaTrainer::CudaTrainer(DeviceTrainerInputs &inputs, CudaDevice device, PlanKernels kernels,
                         Stream compute, CublasLtGemm gemm, CublasAxpy axpy, DeviceArena arena,
                         DeviceStepLayout layout, DeviceStepShape shape, StepBindings bindings)
    : plan_(&inputs.plan), library_(&inputs.kernels), data_(&inputs.data),
      validation_(inputs.validation), lossScaleOptions_(inputs.lossScaling),
      device_(std::move(device)), kernels_(std::move(kernels)), compute_(std::move(compute)),
      gemm_(std::move(gemm)), axpy_(std::move(axpy)), arena_(std::move(arena)),
      layout_(std::move(layout)), shape_(std::move(shape)), bindings_(std::move(bindings)),
      microBatches_(shape_.microBatches), host_(std::move(inputs.state)) {}

Expected<std::unique_ptr<CudaTrainer>> CudaTrainer::create(DeviceTrainerInputs inputs,
                                                           const CudaJob &job) {
  const Plan &plan = inputs.plan;
  if (Error err = checkCudaPlan(plan, job.size); !err.ok())
    return err;
  if (!plan.cudaKernels || !plan.cudaKernels->host)
    return makeError(plan.dir.string(), ": the plan has no CUDA host code (compile it with "
                                        "`mtc compile --target=x86,cuda`)");
  const KernelFunction &fb = *inputs.kernels.forwardBackward().function;
  if (fb.inputs.size() < 2 || fb.inputs[0].kind != BufferKind::Input ||
      fb.inputs[1].kind != BufferKind::Input || fb.inputs[0].dims != fb.inputs[1].dims ||
      fb.inputs[0].dims.size() != 2)
    return makeError(plan.dir.string(),
                     ": forward_backward must take the tokens and labels [batch, seq] first");
  if (Error err = checkEndOfDocument(plan, inputs.endOfDocument); !err.ok())
    return err;
  if (inputs.state.params.size() != plan.params.size() ||
      inputs.state.states.size() != plan.states.size())
    return makeError(plan.dir.string(), ": the training state does not match the plan's tables");
  // With data parallelism (the ranks beyond the mesh) each rank computes its share of the
  // micro-batches (RankMesh places data parallelism outermost: world size / mesh size).
  const int64_t dpSize = job.size / plan.meshSize();
  Expected<int64_t> microBatches = countMicroBatches(plan, fb, inputs.globalBatch, dpSize);
  if (!microBatches)
    return microBatches.takeError();
  Expected<StepBindings> bindings =
      StepBindings::create(plan, inputs.kernels, inputs.state, inputs.validation != nullptr);
  if (!bindings)
    return bindings.takeError();
  std::optional<StepBindings> hostBindings;
  if (inputs.hostOptimizer) {
    if (Error err = checkOptimizerOffload(plan); !err.ok())
      return std::move(err).withContext("optimizer offload");
    Expected<StepBindings> bound =
        StepBindings::create(plan, *inputs.hostOptimizer, inputs.state, false);
    if (!bound)
      return bound.takeError().withContext("optimizer offload");
    hostBindings.emplace(std::move(*bound));
  }

  DeviceStepShape shape;
  shape.microBatchSize = fb.inputs[0].dims[0].size;
  shape.sequenceLength = fb.inputs[0].dims[1].size;
  shape.microBatches = *microBatches / dpSize;
  shape.workspaceBytes = plan.cudaKernels->hostWorkspaceBytes;
  shape.lossMask = plan.eodMaskLoss;
  shape.positionIds = plan.takesPositionIds();
  shape.optimizerOnHost = inputs.hostOptimizer != nullptr;
  for (const KernelBuffer &b : fb.outputs)
    if (b.kind == BufferKind::ExpertLoad)
      shape.expertLoadElements.push_back(b.numElements());
  Expected<DeviceStepLayout> layout = DeviceStepLayout::create(inputs.state, shape);
  if (!layout)
    return layout.takeError().withContext(plan.dir.string());

  // The device, then everything on it: the code, the stream, the libraries, the arena.
  Expected<CudaDevice> device = CudaDevice::forLocalRank(job.localRank);
  if (!device)
    return device.takeError();
  // The NCCL world and the plan's mesh split from it, before anything large is allocated
  // (every rank reaches this point: the splits are collective).
  Expected<std::unique_ptr<Communicator>> world = joinNcclWorld(job, *device);
  if (!world)
    return world.takeError();
  std::optional<RankMesh> mesh;
  if (*world) {
    Expected<RankMesh> split = RankMesh::create(plan, world->get());
    if (!split)
      return split.takeError().withContext("splitting the plan's mesh from the NCCL world");
    mesh.emplace(std::move(*split));
  }
  Expected<PlanKernels> kernels = PlanKernels::load(plan, *device);
  if (!kernels)
    return kernels.takeError();
  Expected<Stream> compute = Stream::create("compute");
  if (!compute)
    return compute.takeError();
  CublasLtGemmOptions gemmOptions;
  gemmOptions.workspaceBytes = kGemmWorkspaceBytes;
  Expected<CublasLtGemm> gemm = CublasLtGemm::create(gemmOptions);
  if (!gemm)
    return gemm.takeError();
  Expected<CublasAxpy> axpy = CublasAxpy::create();
  if (!axpy)
    return axpy.takeError();
  Expected<DeviceArena> arena = DeviceArena::create(*device, layout->bytes);
  if (!arena)
    return arena.takeError().withContext(concat(
        "placing the training state of ", plan.dir.string(), " on ", device->describe()));
  // The arena's ranges are those of the layout: record them in its high-water mark.
  if (Expected<void *> all = arena->at(0, layout->bytes); !all)
    return all.takeError();

  std::unique_ptr<CudaTrainer> t(new CudaTrainer(
      inputs, std::move(*device), std::move(*kernels), std::move(*compute), std::move(*gemm),
      std::move(*axpy), std::move(*arena), std::move(*layout), std::move(shape),
      std::move(*bindings)));
  t->world_ = std::move(*world);
  if (mesh) {
    t->mesh_.emplace(std::move(*mesh));
    t->meshContext_ = t->mesh_->context();
    t->dataParallel_ = t->mesh_->dataParallel();
  } else {
    for (const MeshAxis &a : plan.mesh)
      t->meshContext_.axes.push_back(MeshAxisGroup{a.name, a.size, 0, nullptr});
  }
  t->meshContext_.memory = &t->meshMemory_;
  t->microBatches_ = *microBatches;
  if (hostBindings) {
    t->hostOptimizer_ = inputs.hostOptimizer;
    t->hostOptimizerBindings_ = std::move(hostBindings->optimizerStep);
  }
  try {
    if (t->hostOptimizer_) {
      t->hostGradients_.resize(size_t(t->layout_.gradients.bytes) / sizeof(float));
    }
    t->tokens_.resize(size_t(t->shape_.microBatchSize * t->shape_.sequenceLength));
    t->labels_.resize(t->tokens_.size());
    if (t->layout_.lossMask)
      t->lossMask_.resize(t->tokens_.size());
    if (t->layout_.positionIds)
      t->positionIds_.resize(t->tokens_.size());
    t->endOfDocument_ = inputs.endOfDocument.value_or(0);
    t->expertLoad_ = ExpertLoad::forOutputs(fb);
  } catch (const std::bad_alloc &) {
    return makeError("out of memory allocating the training buffers");
  }
  if (t->dataParallel_) {
    // The loss sum (f64) and the largest row of expert counts (i64), 8 bytes each.
    size_t values = 1;
    for (const ExpertLoad &load : t->expertLoad_)
      values = std::max(values, load.sum.size());
    Expected<DeviceArena> staging = DeviceArena::create(t->device_, int64_t(values * 8));
    if (!staging)
      return staging.takeError().withContext("the buffer of the data-parallel reductions");
    if (Expected<void *> all = staging->at(0, int64_t(values * 8)); !all)
      return all.takeError();
    t->staging_.emplace(std::move(*staging));
  }
  // The start state in the first copy; the gradients zero (their padding is never read, but
  // the saxpy of a later micro-batch runs over it).
  const TrainingState &s = t->host_;
  for (size_t i = 0; i < s.params.size(); ++i)
    if (Error err = t->upload(t->layout_.params[i], s.params[i].values.data(),
                              t->layout_.params[i].bytes, "a parameter");
        !err.ok())
      return std::move(err).withContext(s.params[i].name);
  // Offloaded, the state stays on the host.
  for (size_t i = 0; !t->hostOptimizer_ && i < s.states.size(); ++i)
    if (Error err = t->upload(t->layout_.states[i], s.states[i].values.data(),
                              t->layout_.states[i].bytes, "an optimizer state");
        !err.ok())
      return std::move(err).withContext(s.states[i].name);
  for (const std::optional<ArenaRange> &r : {std::optional(t->layout_.gradients), t->layout_.scratch})
    if (r)
      if (Error err = cudaStatus(cudaMemsetAsync(t->at(*r), 0, size_t(r->bytes), t->compute_.handle()),
                                 "clearing the gradients");
          !err.ok())
        return err;
  if (Error err = t->compute_.synchronize(); !err.ok())
    return std::move(err).withContext("placing the training state on the device");
  return t;
}

void *CudaTrainer::inputBuffer(int index) const {
  switch (dataInputAt(index, layout_.lossMask.has_value())) {
  case DataInput::Tokens:
    return at(layout_.tokens);
  case DataInput::Labels:
    return at(layout_.labels);
  case DataInput::LossMask:
    return at(*layout_.lossMask);
  case DataInput::PositionIds:
    break;
  }
  return at(*layout_.positionIds);
}

void *CudaTrainer::at(const ArenaRange &range) const {
  return static_cast<char *>(arena_.base()) + range.offset;
}

Error CudaTrainer::upload(const ArenaRange &range, const void *host, int64_t bytes,
                          std::string_view what) {
  // From pageable memory the copy returns once the bytes are staged, so `host` may change
  // as soon as it returns.
  return cudaStatus(cudaMemcpyAsync(at(range), host, size_t(bytes), cudaMemcpyHostToDevice,
                                    compute_.handle()),
                    concat("copying ", what, " to the device"));
}

Error CudaTrainer::download(void *host, const ArenaRange &range, int64_t bytes,
                            std::string_view what) {
  if (Error err = cudaStatus(cudaMemcpyAsync(host, at(range), size_t(bytes),
                                             cudaMemcpyDeviceToHost, compute_.handle()),
                             concat("copying ", what, " from the device"));
      !err.ok())
    return err;
  return compute_.synchronize().withContext(concat("copying ", what, " from the device"));
}

Error CudaTrainer::call(const LoadedKernel &kernel, std::span<void *const> buffers,
                        std::string_view what, DropoutCall *dropout, float lossScale) {
  GpuCall gpu;
  gpu.kernels = &kernels_;
  gpu.stream = &compute_;
  gpu.gemm = &gemm_;
  // The host code's collectives run over the NCCL mesh on device buffers (meshContext_'s
  // MeshMemory orders them after the compute stream's work).
  MeshCall mesh(meshContext_);
  KernelCallState state;
  state.mesh = &mesh;
  state.dropout = dropout;
  state.lossScale = lossScale;
  state.gpu = &gpu;
  state.workspace = at(layout_.workspace);
  state.workspaceBytes = static_cast<uint64_t>(layout_.workspace.bytes);
  KernelLibrary::call(kernel, buffers, state);
  if (!gpu.failure.ok())
    return std::move(gpu.failure).withContext(what);
  if (Error err = mesh.takeError(); !err.ok())
    return std::move(err).withContext(what);
  return Error::success();
}

Error CudaTrainer::allReduceHost(void *values, size_t count, MtcElementType type,
                                 std::string_view what) {
  const size_t bytes = count * elementSize(type);
  void *device = staging_->base();
  if (Error err = cudaStatus(cudaMemcpyAsync(device, values, bytes, cudaMemcpyHostToDevice,
                                             compute_.handle()),
                             concat("copying ", what, " to the device"));
      !err.ok())
    return err;
  if (Error err = compute_.synchronize(); !err.ok())
    return err;
  if (Error err = dataParallel_->allReduce(device, count, type, MTC_SUM); !err.ok())
    return std::move(err).withContext(
        concat("all-reduce of ", what, " over the data-parallel ranks"));
  if (Error err = cudaStatus(cudaMemcpyAsync(values, device, bytes, cudaMemcpyDeviceToHost,
                                             compute_.handle()),
                             concat("copying ", what, " from the device"));
      !err.ok())
    return err;
  return compute_.synchronize();
}

Error CudaTrainer::reduceOverDataParallel(double &lossSum, int64_t step) {
  if (!dataParallel_)
    return Error::success();
  // One buffer, as the CPU's GradientBuffer all-reduces its gradients; the compute stream
  // first (the last micro-batch's saxpy), the host waits for NCCL's result before the
  // optimizer step is queued (see the file comment of the header).
  if (Error err = compute_.synchronize(); !err.ok())
    return std::move(err).withContext(concat("step ", step + 1));
  if (Error err = dataParallel_->allReduce(at(layout_.gradients),
                                           size_t(layout_.gradients.bytes) / sizeof(float),
                                           MTC_F32, MTC_SUM);
      !err.ok())
    return std::move(err).withContext(
        concat("step ", step + 1, ": all-reduce of the gradients over the data-parallel ranks"));
  if (Error err = allReduceHost(&lossSum, 1, MTC_F64, "the loss"); !err.ok())
    return std::move(err).withContext(concat("step ", step + 1));
  for (ExpertLoad &load : expertLoad_)
    if (Error err =
            allReduceHost(load.sum.data(), load.sum.size(), MTC_I64, "the tokens per expert");
        !err.ok())
      return std::move(err).withContext(concat("step ", step + 1));
  return Error::success();
}

Error CudaTrainer::loadBatch(const TokenSource &source, int64_t batch, int64_t sampleBegin) {
  if (Error err = source.batch(batch, sampleBegin, shape_.microBatchSize, shape_.sequenceLength,
                               tokens_.data(), labels_.data());
      !err.ok())
    return err;
  const int64_t bytes = static_cast<int64_t>(tokens_.size() * sizeof(int32_t));
  if (Error err = upload(layout_.tokens, tokens_.data(), bytes, "the tokens"); !err.ok())
    return err;
  if (Error err = upload(layout_.labels, labels_.data(), bytes, "the labels"); !err.ok())
    return err;
  if (layout_.lossMask) {
    eodLossMask(tokens_, endOfDocument_, lossMask_);
    if (Error err = upload(*layout_.lossMask, lossMask_.data(),
                           static_cast<int64_t>(lossMask_.size() * sizeof(float)), "the loss mask");
        !err.ok())
      return err;
  }
  if (!layout_.positionIds)
    return Error::success();
  resetPositionIds(tokens_, shape_.sequenceLength, endOfDocument_, positionIds_);
  return upload(*layout_.positionIds, positionIds_.data(), bytes, "the position ids");
}

Expected<StepStats> CudaTrainer::step() {
  auto start = std::chrono::steady_clock::now();
  const int64_t step = host_.step;
  std::optional<LossScaler> scaler;
  if (plan_->lossScaling)
    scaler.emplace(lossScaleOptions_, host_.lossScale);
  const float lossScale = scaler ? scaler->scale() : 1.0f;
  double lossSum = 0;
  for (ExpertLoad &load : expertLoad_)
    std::fill(load.sum.begin(), load.sum.end(), 0);
  std::vector<void *> buffers;
  // This rank's micro-batches: m % dp == its data-parallel index (the CPU's Trainer's deal).
  const int64_t dpRank = dataParallelRank(), dpSize = dataParallelSize();
  for (int64_t m = dpRank; m < microBatches_; m += dpSize) {
    if (Error err = loadBatch(*data_, step, m * shape_.microBatchSize); !err.ok())
      return std::move(err).withContext(concat("step ", step + 1));
    // The first micro-batch writes the step's gradients, the others the scratch ones.
    const bool first = m == dpRank;
    const ArenaRange &grads = first ? layout_.gradients : *layout_.scratch;
    buffers.clear();
    int inputIndex = 0;
    for (const BufferBinding &b : bindings_.forwardBackward) {
      switch (b.kind) {
      case BufferKind::Input:
        buffers.push_back(inputBuffer(inputIndex++));
        break;
      case BufferKind::Param:
        buffers.push_back(at(layout_.params[b.index]));
        break;
      case BufferKind::Grad:
        buffers.push_back(static_cast<char *>(at(grads)) + layout_.gradientOffsets[b.index]);
        break;
      case BufferKind::ExpertLoad:
        buffers.push_back(at(layout_.expertLoads[b.index]));
        break;
      default: // the loss (StepBindings allows nothing else)
        buffers.push_back(at(layout_.loss));
        break;
      }
    }
    DropoutCall dropout{DropoutKey{plan_->seed, step, m * shape_.microBatchSize}};
    if (Error err = call(library_->forwardBackward(), buffers,
                         concat("step ", step + 1, ": forward_backward"),
                         plan_->dropout ? &dropout : nullptr, lossScale);
        !err.ok())
      return err;
    if (!first)
      if (Error err = axpy_.add(static_cast<float *>(at(layout_.gradients)),
                                static_cast<const float *>(at(*layout_.scratch)),
                                layout_.gradients.bytes / int64_t(sizeof(float)), compute_);
          !err.ok())
        return std::move(err).withContext(concat("step ", step + 1));
    float loss = 0;
    if (Error err = download(&loss, layout_.loss, sizeof loss, "the loss"); !err.ok())
      return std::move(err).withContext(concat("step ", step + 1));
    lossSum += loss;
    for (size_t i = 0; i < expertLoad_.size(); ++i) {
      ExpertLoad &load = expertLoad_[i];
      if (Error err = download(load.counts.data(), layout_.expertLoads[i],
                               layout_.expertLoads[i].bytes, "the tokens per expert");
          !err.ok())
        return std::move(err).withContext(concat("step ", step + 1));
      load.addCounts();
    }
  }
  if (Error err = reduceOverDataParallel(lossSum, step); !err.ok())
    return err;
  const double meanLoss = lossSum / static_cast<double>(microBatches_);
  if (!std::isfinite(meanLoss))
    return makeError("step ", step + 1, ": the loss is ", meanLoss,
                     " (training diverged; try a lower learning rate)");

  const float stepScalar = static_cast<float>(host_.optimizerSteps());
  const float gradScale = 1.0f / static_cast<float>(microBatches_) / lossScale;
  float gradNorm = 0, lr = 0;
  if (Error err = hostOptimizer_
                      ? optimizerStepOnHost(stepScalar, gradScale, gradNorm, lr, step)
                      : optimizerStepOnDevice(stepScalar, gradScale, gradNorm, lr, step);
      !err.ok())
    return err;
  Expected<bool> overflowed = gradientOverflow(gradNorm, scaler.has_value(), step);
  if (!overflowed)
    return overflowed.takeError();
  if (scaler) {
    scaler->update(*overflowed);
    host_.lossScale = scaler->state();
  }
  // A skipped step left the parameters as they were: nothing to upload.
  if (hostOptimizer_ && !*overflowed)
    if (Error err = uploadHostUpdate(step); !err.ok())
      return err;
  host_.step = step + 1;

  StepStats stats;
  stats.step = host_.step;
  if (scaler) {
    stats.lossScale = lossScale;
    stats.skipped = *overflowed;
  }
  stats.loss = meanLoss;
  stats.lr = lr;
  stats.gradNorm = gradNorm;
  stats.tokens = microBatches_ * shape_.microBatchSize * shape_.sequenceLength;
  stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stats.tokensPerExpert = ExpertLoad::rows(expertLoad_);
  return stats;
}

Error CudaTrainer::optimizerStepOnDevice(float stepScalar, float gradScale, float &gradNorm,
                                         float &lr, int64_t step) {
  if (Error err = upload(layout_.step, &stepScalar, sizeof stepScalar, "the step"); !err.ok())
    return err;
  if (Error err = upload(layout_.gradScale, &gradScale, sizeof gradScale, "the gradient scale");
      !err.ok())
    return err;
  OptimizerStepBuffers where{at(layout_.step), at(layout_.gradScale), at(layout_.gradNorm),
                             at(layout_.lr)};
  where.grad = [&](size_t i) -> void * {
    return static_cast<char *>(at(layout_.gradients)) + layout_.gradientOffsets[i];
  };
  where.param = [&](size_t i) { return at(layout_.params[i]); };
  where.state = [&](size_t i) { return at(layout_.states[i]); };
  std::vector<void *> buffers = optimizerStepCall(bindings_.optimizerStep, where);
  if (Error err = call(library_->optimizerStep(), buffers,
                       concat("step ", step + 1, ": optimizer_step"), nullptr, 1.0f);
      !err.ok())
    return err;
  if (Error err = download(&gradNorm, layout_.gradNorm, sizeof gradNorm, "the gradient norm");
      !err.ok())
    return std::move(err).withContext(concat("step ", step + 1));
  if (Error err = download(&lr, layout_.lr, sizeof lr, "the learning rate"); !err.ok())
    return std::move(err).withContext(concat("step ", step + 1));
  return Error::success();
}

Error CudaTrainer::optimizerStepOnHost(float stepScalar, float gradScale, float &gradNorm,
                                       float &lr, int64_t step) {
  // The gradients are in one range, laid out as on the device (gradientOffsets).
  if (Error err = download(hostGradients_.data(), layout_.gradients, layout_.gradients.bytes,
                           "the gradients");
      !err.ok())
    return std::move(err).withContext(concat("step ", step + 1, ": optimizer offload"));
  OptimizerStepBuffers where{&stepScalar, &gradScale, &gradNorm, &lr};
  where.grad = [&](size_t i) -> void * {
    return hostGradients_.data() + layout_.gradientOffsets[i] / int64_t(sizeof(float));
  };
  where.param = [&](size_t i) -> void * { return host_.params[i].values.data(); };
  where.state = [&](size_t i) -> void * { return host_.states[i].values.data(); };
  const LoadedKernel &optimizer = hostOptimizer_->optimizerStep();
  std::vector<void *> buffers = optimizerStepCall(hostOptimizerBindings_, where);
  // No mesh (checkOptimizerOffload): the x86 step has no collective to run.
  return callInMesh(optimizer, buffers, MeshContext{}, nullptr)
      .withContext(concat("step ", step + 1, ": optimizer_step on the host"));
}

Error CudaTrainer::uploadHostUpdate(int64_t step) {
  for (size_t i = 0; i < host_.params.size(); ++i)
    if (Error err = upload(layout_.params[i], host_.params[i].values.data(),
                           layout_.params[i].bytes, "an updated parameter");
        !err.ok())
      return std::move(err).withContext(concat("step ", step + 1, ": ", host_.params[i].name));
  return Error::success();
}

Expected<double> CudaTrainer::evaluate(int64_t firstBatch, int64_t count,
                                       const TokenSource *source) {
  const int64_t step = host_.step;
  if (!validation_)
    return makeError("the trainer was given no validation data");
  const TokenSource &data = source ? *source : *validation_;
  std::vector<void *> buffers;
  int inputIndex = 0;
  for (const BufferBinding &b : bindings_.forward) {
    if (b.kind == BufferKind::Input)
      buffers.push_back(inputBuffer(inputIndex++));
    else if (b.kind == BufferKind::Param)
      buffers.push_back(at(layout_.params[b.index]));
    else // the loss (StepBindings allows nothing else)
      buffers.push_back(at(layout_.loss));
  }
  double lossSum = 0;
  const int64_t dpRank = dataParallelRank(), dpSize = dataParallelSize();
  for (int64_t batch = firstBatch; batch < firstBatch + count; ++batch)
    for (int64_t m = dpRank; m < microBatches_; m += dpSize) {
      if (Error err = loadBatch(data, batch, m * shape_.microBatchSize); !err.ok())
        return std::move(err).withContext(concat("validation at step ", step));
      // No DropoutCall: the kernels keep every element (evaluation without dropout).
      if (Error err = call(*library_->forward(), buffers,
                           concat("validation at step ", step, ": forward"), nullptr, 1.0f);
          !err.ok())
        return err;
      float loss = 0;
      if (Error err = download(&loss, layout_.loss, sizeof loss, "the validation loss");
          !err.ok())
        return err;
      lossSum += loss;
    }
  if (dataParallel_)
    if (Error err = allReduceHost(&lossSum, 1, MTC_F64, "the validation loss"); !err.ok())
      return std::move(err).withContext(concat("validation at step ", step));
  return lossSum / static_cast<double>(count * microBatches_);
}

Error CudaTrainer::syncState() {
  // Offloaded, the host's values are the current ones.
  if (hostOptimizer_)
    return Error::success();
  for (size_t i = 0; i < host_.params.size(); ++i)
    if (Error err = download(host_.params[i].values.data(), layout_.params[i],
                             layout_.params[i].bytes, "a parameter");
        !err.ok())
      return std::move(err).withContext(host_.params[i].name);
  for (size_t i = 0; i < host_.states.size(); ++i)
    if (Error err = download(host_.states[i].values.data(), layout_.states[i],
                             layout_.states[i].bytes, "an optimizer state");
        !err.ok())
      return std::move(err).withContext(host_.states[i].name);
  return Error::success();
}

int64_t CudaTrainer::peakBytes() const {
  return arena_.layout().highWaterBytes() + kGemmWorkspaceBytes +
         (staging_ ? staging_->layout().highWaterBytes() : 0);
}

uint64_t CudaTrainer::bytesSent() const { return mesh_ ? mesh_->bytesSent() : 0; }

DeviceBackend cudaBackend(CudaJob job) {
  DeviceBackend backend;
  backend.loadKernels = [](const Plan &plan) { return KernelLibrary::loadCudaHost(plan); };
  backend.createTrainer = [job = std::move(job)](DeviceTrainerInputs inputs)
      -> Expected<std::unique_ptr<DeviceTrainer>> {
    Expected<std::unique_ptr<CudaTrainer>> trainer = CudaTrainer::create(std::move(inputs), job);
    if (!trainer)
      return trainer.takeError();
    return std::unique_ptr<DeviceTrainer>(std::move(*trainer));
  };
  return backend;
}

} // namespace mtc::rt::cuda
