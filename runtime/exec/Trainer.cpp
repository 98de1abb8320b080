//===- Trainer.cpp - The single-rank training step loop -------------------===//

#include "runtime/exec/Trainer.h"

#include "runtime/exec/DropoutKey.h"
#include "runtime/exec/KernelMemory.h"

#include <chrono>
#include <cmath>
#include <new>

namespace mtc::rt {
namespace {

std::optional<size_t> indexOf(const std::vector<TrainingState::Tensor> &table,
                              std::string_view name) {
  for (size_t i = 0; i < table.size(); ++i)
    if (table[i].name == name)
      return i;
  return std::nullopt;
}

std::optional<int64_t> trainInt(const Plan &plan, std::string_view key) {
  if (const JsonObject *train = plan.train.getObject())
    if (const JsonValue *v = train->find(key))
      return v->getInt();
  return std::nullopt;
}

} // namespace

Error Trainer::bind(const KernelFunction &fn, std::vector<Binding> &out) const {
  for (const auto *side : {&fn.inputs, &fn.outputs})
    for (const KernelBuffer &b : *side) {
      Binding binding{b.kind, 0};
      if (b.kind == BufferKind::Param || b.kind == BufferKind::Grad) {
        std::optional<size_t> i = indexOf(state_.params, b.name);
        if (!i)
          return makeError("kernel buffer ", bufferKindName(b.kind), " '", b.name,
                           "' names no parameter");
        binding.index = *i;
      } else if (b.kind == BufferKind::State) {
        std::optional<size_t> i = indexOf(state_.states, b.name);
        if (!i)
          return makeError("kernel buffer state '", b.name, "' names no optimizer state");
        binding.index = *i;
      }
      out.push_back(binding);
    }
  return Error::success();
}

Error Trainer::checkBindings() const {
  auto inputsOf = [](const LoadedKernel &k) { return k.function->inputs.size(); };
  for (size_t i = 0; i < forwardBackwardBindings_.size(); ++i) {
    BufferKind kind = forwardBackwardBindings_[i].kind;
    bool input = i < inputsOf(kernels_->forwardBackward());
    if (input ? kind != BufferKind::Input && kind != BufferKind::Param
              : kind != BufferKind::Loss && kind != BufferKind::Grad)
      return makeError("forward_backward: unexpected ", input ? "input" : "output", " buffer of kind ",
                       bufferKindName(kind));
  }
  // Every parameter and state is written by the optimizer exactly once: the trainer swaps
  // the whole tables after the call.
  std::vector<int> paramWrites(state_.params.size()), stateWrites(state_.states.size());
  for (size_t i = 0; i < optimizerBindings_.size(); ++i) {
    const Binding &b = optimizerBindings_[i];
    bool input = i < inputsOf(kernels_->optimizerStep());
    bool ok = input ? b.kind == BufferKind::Step || b.kind == BufferKind::GradScale ||
                          b.kind == BufferKind::Grad || b.kind == BufferKind::Param ||
                          b.kind == BufferKind::State
                    : b.kind == BufferKind::GradNorm || b.kind == BufferKind::Lr ||
                          b.kind == BufferKind::Param || b.kind == BufferKind::State;
    if (!ok)
      return makeError("optimizer_step: unexpected ", input ? "input" : "output",
                       " buffer of kind ", bufferKindName(b.kind));
    if (!input && b.kind == BufferKind::Param)
      ++paramWrites[b.index];
    if (!input && b.kind == BufferKind::State)
      ++stateWrites[b.index];
  }
  for (size_t i = 0; i < paramWrites.size(); ++i)
    if (paramWrites[i] != 1)
      return makeError("optimizer_step writes parameter '", state_.params[i].name, "' ",
                       paramWrites[i], " times (expected once)");
  for (size_t i = 0; i < stateWrites.size(); ++i)
    if (stateWrites[i] != 1)
      return makeError("optimizer_step writes state '", state_.states[i].name, "' ",
                       stateWrites[i], " times (expected once)");
  return Error::success();
}

Error Trainer::callInMesh(const LoadedKernel &kernel, std::span<void *const> buffers,
                          std::string_view what, int64_t step, DropoutCall *dropout) {
  MeshCall mesh(mesh_);
  KernelLibrary::call(kernel, buffers, {&mesh, dropout});
  if (!mesh.ok())
    return mesh.takeError().withContext(concat("step ", step + 1, ": ", what));
  return Error::success();
}

Expected<int64_t> countMicroBatches(const Plan &plan, const KernelFunction &forwardBackward,
                                    int64_t globalBatch, int64_t dataParallelSize) {
  if (forwardBackward.inputs.empty() || forwardBackward.inputs[0].dims.empty())
    return makeError(plan.dir.string(), ": forward_backward takes no batch of tokens");
  int64_t microBatchSize = forwardBackward.inputs[0].dims[0].size;
  int64_t global =
      globalBatch > 0 ? globalBatch : trainInt(plan, "global_batch").value_or(microBatchSize);
  if (microBatchSize <= 0 || global <= 0 || global % microBatchSize != 0)
    return makeError(plan.dir.string(), ": the global batch (", global,
                     ") is not a multiple of the kernels' micro-batch (", microBatchSize, ")");
  int64_t microBatches = global / microBatchSize;
  if (dataParallelSize > 0 && microBatches % dataParallelSize != 0)
    return makeError("the global batch of ", global, " sequences is ", microBatches,
                     " micro-batches of ", microBatchSize, ", which ", dataParallelSize,
                     " data-parallel ranks cannot share evenly (choose a global batch that is a "
                     "multiple of ",
                     microBatchSize * dataParallelSize, ")");
  return microBatches;
}

Expected<Trainer> Trainer::create(const Plan &plan, const KernelLibrary &kernels,
                                  TrainingState state, const TokenSource &data,
                                  int64_t globalBatch, Communicator *dataParallel,
                                  const MeshContext *mesh) {
  Trainer t(plan, kernels, std::move(state), data, dataParallel);
  if (mesh) {
    t.mesh_ = *mesh;
    if (t.mesh_.axes.size() != plan.mesh.size())
      return makeError(plan.dir.string(), ": the trainer's mesh has ", t.mesh_.axes.size(),
                       " axes but the plan's has ", plan.mesh.size());
  } else {
    if (plan.meshSize() > 1)
      return makeError(plan.dir.string(), ": the plan is partitioned over a mesh of ",
                       plan.meshSize(), " ranks, but the trainer was given no mesh");
    for (const MeshAxis &a : plan.mesh)
      t.mesh_.axes.push_back(MeshAxisGroup{a.name, a.size, 0, nullptr});
  }
  // The kernels take this rank's shards: the state must have the local shapes.
  if (t.state_.params.size() != plan.params.size() || t.state_.states.size() != plan.states.size())
    return makeError(plan.dir.string(), ": the training state does not match the plan's tables");
  for (size_t i = 0; i < plan.params.size() + plan.states.size(); ++i) {
    bool isParam = i < plan.params.size();
    const TrainingState::Tensor &tensor =
        isParam ? t.state_.params[i] : t.state_.states[i - plan.params.size()];
    const ParamInfo &p =
        isParam ? plan.params[i] : plan.params[plan.states[i - plan.params.size()].paramIndex];
    std::vector<Dim> local = isParam ? plan.localDims(p) : plan.optimizerLocalDims(p);
    if (tensor.shape != dimSizes(local) ||
        static_cast<int64_t>(tensor.values.size()) != numElements(local))
      return makeError(plan.dir.string(), ": ", isParam ? "parameter '" : "optimizer state '",
                       tensor.name, "' has ", tensor.values.size(),
                       " values in the training state, but this rank's shard is ",
                       formatDims(local));
  }
  const KernelFunction &fb = *kernels.forwardBackward().function;
  if (fb.inputs.size() < 2 || fb.inputs[0].kind != BufferKind::Input ||
      fb.inputs[1].kind != BufferKind::Input || fb.inputs[0].dims != fb.inputs[1].dims)
    return makeError(plan.dir.string(),
                     ": forward_backward must take the tokens and labels [batch, seq] first");
  t.microBatchSize_ = fb.inputs[0].dims[0].size;
  t.seqLen_ = fb.inputs[0].dims[1].size;
  if (plan.dataParallelAxis) {
    // The distributed optimizer: data parallelism is the mesh axis, whose communicator this
    // must be.
    const MeshAxis &axis = plan.mesh[*plan.dataParallelAxis];
    int64_t given = dataParallel ? dataParallel->size() : 1;
    if (given != axis.size)
      return makeError(plan.dir.string(), ": the plan's data-parallel axis '", axis.name,
                       "' has ", axis.size, " ranks, but the trainer's data-parallel group has ",
                       given);
    t.distributedOptimizer_ = true;
    t.dpSize_ = axis.size;
  }
  Expected<int64_t> microBatches =
      countMicroBatches(plan, fb, globalBatch, dataParallel ? dataParallel->size() : 1);
  if (!microBatches)
    return microBatches.takeError();
  t.microBatches_ = *microBatches;

  if (Error err = t.bind(fb, t.forwardBackwardBindings_); !err.ok())
    return std::move(err).withContext(plan.dir.string());
  if (Error err = t.bind(*kernels.optimizerStep().function, t.optimizerBindings_); !err.ok())
    return std::move(err).withContext(plan.dir.string());
  if (Error err = t.checkBindings(); !err.ok())
    return std::move(err).withContext(plan.dir.string());
  try {
    t.next_ = t.state_;
    // The gradients that are all-reduced first, then those reduce-scattered (the distributed
    // optimizer's), each group in table order.
    size_t n = t.state_.params.size();
    t.gradOffsets_.assign(n, 0);
    t.shardOf_.assign(n, std::nullopt);
    std::vector<std::optional<size_t>> shardDim(n);
    if (t.distributedOptimizer_)
      for (size_t i = 0; i < n; ++i)
        shardDim[i] = plan.dataParallelShardDim(plan.params[i]);
    size_t total = 0, shardTotal = 0;
    for (bool sharded : {false, true}) {
      for (size_t i = 0; i < n; ++i) {
        if (shardDim[i].has_value() != sharded)
          continue;
        t.gradOffsets_[i] = total;
        const TrainingState::Tensor &p = t.state_.params[i];
        if (sharded) {
          size_t elements = p.values.size() / size_t(t.dpSize_);
          t.shardOf_[i] = t.shardSpecs_.size();
          t.shardSpecs_.push_back(
              GradientShardSpec{p.name, p.shape, *shardDim[i], total, shardTotal, elements});
          shardTotal += elements;
        }
        total += p.values.size();
      }
      if (!sharded)
        t.allReducedElements_ = total;
    }
    t.grads_.assign(total, 0.0f);
    if (t.microBatches_ > 1)
      t.microGrads_.assign(total, 0.0f);
    // The packed blocks fill the second gradient buffer's reduce-scattered part when there is
    // one (it is free once the micro-batches are summed); the shards then land in the
    // reduce-scattered part of grads_, free once packed.
    if (t.microGrads_.empty() && shardTotal > 0)
      t.packed_.assign(total - t.allReducedElements_, 0.0f);
    t.tokens_.resize(size_t(t.microBatchSize_ * t.seqLen_));
    t.labels_.resize(t.tokens_.size());
  } catch (const std::bad_alloc &) {
    return makeError("out of memory allocating the training buffers");
  }
  return t;
}

int64_t Trainer::bufferBytes() const {
  return state_.bytes() + next_.bytes() +
         static_cast<int64_t>((grads_.size() + microGrads_.size() + packed_.size()) *
                                  sizeof(float) +
                              (tokens_.size() + labels_.size()) * sizeof(int32_t));
}

float *Trainer::optimizerGrad(size_t param) {
  if (const std::optional<size_t> &spec = shardOf_[param])
    return grads_.data() + allReducedElements_ + shardSpecs_[*spec].shardOffset;
  return grad(grads_, param);
}

Error Trainer::reduceOverDataParallel(double &lossSum, int64_t step) {
  if (distributedOptimizer_ && !shardSpecs_.empty()) {
    float *packed = packed_.empty() ? microGrads_.data() + allReducedElements_ : packed_.data();
    // The shards overwrite the start of the (packed, so free) reduce-scattered gradients.
    if (Error err = reduceScatterGradients(dataParallel_, dpSize_, shardSpecs_, grads_.data(),
                                           packed, grads_.data() + allReducedElements_);
        !err.ok())
      return std::move(err).withContext(concat(
          "step ", step + 1, ": reduce-scatter of the gradients over the data-parallel ranks"));
  }
  if (!dataParallel_)
    return Error::success();
  if (allReducedElements_ > 0)
    if (Error err =
            dataParallel_->allReduce(grads_.data(), allReducedElements_, MTC_F32, MTC_SUM);
        !err.ok())
      return std::move(err).withContext(
          concat("step ", step + 1, ": all-reduce of the gradients over the data-parallel ranks"));
  if (Error err = dataParallel_->allReduce(&lossSum, 1, MTC_F64, MTC_SUM); !err.ok())
    return std::move(err).withContext(
        concat("step ", step + 1, ": all-reduce of the loss over the data-parallel ranks"));
  return Error::success();
}

int64_t Trainer::peakBytes() const { return bufferBytes() + kernelPeakBytes(); }

Expected<StepStats> Trainer::step() {
  auto start = std::chrono::steady_clock::now();
  int64_t step = state_.step;
  double lossSum = 0;
  float loss = 0, stepScalar = static_cast<float>(step),
        gradScale = 1.0f / static_cast<float>(microBatches_), gradNorm = 0, lr = 0;
  std::vector<void *> buffers;

  int dpRank = dataParallel_ ? dataParallel_->rank() : 0;
  int dpSize = dataParallel_ ? dataParallel_->size() : 1;
  bool first = true;
  for (int64_t m = dpRank; m < microBatches_; m += dpSize) {
    int64_t sampleBegin = m * microBatchSize_;
    if (Error err = data_->batch(step, sampleBegin, microBatchSize_, seqLen_, tokens_.data(),
                                 labels_.data());
        !err.ok())
      return std::move(err).withContext(concat("step ", step + 1));
    // The first micro-batch writes the accumulated gradients directly.
    std::vector<float> &out = first ? grads_ : microGrads_;
    buffers.clear();
    int inputIndex = 0;
    for (const Binding &b : forwardBackwardBindings_) {
      switch (b.kind) {
      case BufferKind::Input:
        buffers.push_back(inputIndex++ == 0 ? tokens_.data() : labels_.data());
        break;
      case BufferKind::Param:
        buffers.push_back(state_.params[b.index].values.data());
        break;
      case BufferKind::Grad:
        buffers.push_back(grad(out, b.index));
        break;
      default: // the loss (checkBindings allows nothing else)
        buffers.push_back(&loss);
        break;
      }
    }
    {
      TraceRecorder::Scope span(trace_, "forward_backward", "compute", {{"micro_batch", m}});
      DropoutCall dropout{DropoutKey{plan_->seed, step, sampleBegin}};
      if (Error err = callInMesh(kernels_->forwardBackward(), buffers, "forward_backward", step,
                                 &dropout);
          !err.ok())
        return err;
    }
    lossSum += loss;
    if (!first)
      for (size_t j = 0, e = grads_.size(); j < e; ++j)
        grads_[j] += microGrads_[j];
    first = false;
  }
  {
    TraceRecorder::Scope span(dataParallel_ ? trace_ : nullptr, "reduce_gradients",
                              "communication");
    if (Error err = reduceOverDataParallel(lossSum, step); !err.ok())
      return err;
  }
  double meanLoss = lossSum / static_cast<double>(microBatches_);
  if (!std::isfinite(meanLoss))
    return makeError("step ", step + 1, ": the loss is ", meanLoss,
                     " (training diverged; try a lower learning rate)");

  buffers.clear();
  size_t inputs = kernels_->optimizerStep().function->inputs.size();
  for (size_t i = 0; i < optimizerBindings_.size(); ++i) {
    const Binding &b = optimizerBindings_[i];
    bool isOutput = i >= inputs;
    TrainingState &target = isOutput ? next_ : state_;
    switch (b.kind) {
    case BufferKind::Step:
      buffers.push_back(&stepScalar);
      break;
    case BufferKind::GradScale:
      buffers.push_back(&gradScale);
      break;
    case BufferKind::Grad:
      buffers.push_back(optimizerGrad(b.index));
      break;
    case BufferKind::Param:
      buffers.push_back(target.params[b.index].values.data());
      break;
    case BufferKind::State:
      buffers.push_back(target.states[b.index].values.data());
      break;
    case BufferKind::GradNorm:
      buffers.push_back(&gradNorm);
      break;
    default: // the learning rate (checkBindings allows nothing else)
      buffers.push_back(&lr);
      break;
    }
  }
  {
    TraceRecorder::Scope span(trace_, "optimizer_step", "optimizer");
    if (Error err = callInMesh(kernels_->optimizerStep(), buffers, "optimizer_step", step);
        !err.ok())
      return err;
  }
  if (!std::isfinite(gradNorm))
    return makeError("step ", step + 1, ": the gradient norm is ", double(gradNorm),
                     " (training diverged)");
  std::swap(state_.params, next_.params);
  std::swap(state_.states, next_.states);
  state_.step = step + 1;

  StepStats stats;
  stats.step = state_.step;
  stats.loss = meanLoss;
  stats.lr = lr;
  stats.gradNorm = gradNorm;
  stats.tokens = microBatches_ * microBatchSize_ * seqLen_;
  stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

} // namespace mtc::rt
