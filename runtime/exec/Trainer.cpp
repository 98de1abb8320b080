//===- Trainer.cpp - The single-rank training step loop -------------------===//

#include "runtime/exec/Trainer.h"

#include "runtime/data/Documents.h"
#include "runtime/data/LossMask.h"
#include "runtime/exec/DropoutKey.h"
#include "runtime/exec/KernelMemory.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>

namespace mtc::rt {
namespace {

std::optional<int64_t> trainInt(const Plan &plan, std::string_view key) {
  if (const JsonObject *train = plan.train.getObject())
    if (const JsonValue *v = train->find(key))
      return v->getInt();
  return std::nullopt;
}

} // namespace

Error Trainer::callInMesh(const LoadedKernel &kernel, std::span<void *const> buffers,
                          std::string_view what, int64_t step, DropoutCall *dropout,
                          float lossScale) {
  return rt::callInMesh(kernel, buffers, mesh_, dropout, lossScale)
      .withContext(concat("step ", step + 1, ": ", what));
}

const KernelFunction *batchFunction(const KernelsInfo &kernels) {
  if (kernels.forwardBackward)
    return &*kernels.forwardBackward;
  if (!kernels.chunks.empty() && kernels.chunks[0].forward)
    return &*kernels.chunks[0].forward;
  return nullptr;
}

const KernelBuffer *tokensInput(const KernelFunction &step) {
  for (const KernelBuffer &b : step.inputs)
    if (b.kind == BufferKind::Input)
      return &b;
  return nullptr;
}

Expected<int64_t> countMicroBatches(const Plan &plan, const KernelFunction &step,
                                    int64_t globalBatch, int64_t dataParallelSize) {
  const KernelBuffer *tokens = tokensInput(step);
  if (!tokens || tokens->dims.size() != 2)
    return makeError(plan.dir.string(), ": the step takes no batch of tokens");
  int64_t microBatchSize = tokens->dims[0].size;
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

Error checkEndOfDocument(const Plan &plan, std::optional<int64_t> endOfDocument) {
  if (plan.eodMaskLoss && !endOfDocument)
    return makeError(plan.dir.string(),
                     ": the plan masks the loss at end-of-document tokens (eod_mask_loss), but "
                     "the data has no end-of-document id");
  if (plan.resetPositionIds && !endOfDocument)
    return makeError(plan.dir.string(),
                     ": the plan restarts the positions at each document (reset_position_ids), "
                     "but the data has no end-of-document id");
  if (plan.resetAttentionMask && !endOfDocument)
    return makeError(plan.dir.string(),
                     ": the plan attends within each document (reset_attention_mask), but the "
                     "data has no end-of-document id");
  return Error::success();
}

Expected<Trainer> Trainer::create(const Plan &plan, const KernelLibrary &kernels,
                                  TrainingState state, const TokenSource &data,
                                  int64_t globalBatch, Communicator *dataParallel,
                                  const MeshContext *mesh, const TokenSource *validation,
                                  std::optional<int64_t> endOfDocument) {
  Trainer t(plan, kernels, std::move(state), data, dataParallel, validation);
  if (Error err = checkEndOfDocument(plan, endOfDocument); !err.ok())
    return err;
  t.endOfDocument_ = endOfDocument.value_or(0);
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
  int64_t dpAxisSize = 1;
  if (plan.dataParallelAxis) {
    // The distributed optimizer: data parallelism is the mesh axis, whose communicator this
    // must be.
    const MeshAxis &axis = plan.mesh[*plan.dataParallelAxis];
    int64_t given = dataParallel ? dataParallel->size() : 1;
    if (given != axis.size)
      return makeError(plan.dir.string(), ": the plan's data-parallel axis '", axis.name,
                       "' has ", axis.size, " ranks, but the trainer's data-parallel group has ",
                       given);
    dpAxisSize = axis.size;
  }
  Expected<int64_t> microBatches =
      countMicroBatches(plan, fb, globalBatch, dataParallel ? dataParallel->size() : 1);
  if (!microBatches)
    return microBatches.takeError();
  t.microBatches_ = *microBatches;

  Expected<StepBindings> bindings =
      StepBindings::create(plan, kernels, t.state_, validation != nullptr);
  if (!bindings)
    return bindings.takeError();
  t.bindings_ = std::move(*bindings);
  try {
    t.expertLoad_ = ExpertLoad::forOutputs(fb);
    t.tokens_.resize(size_t(t.microBatchSize_ * t.seqLen_));
    t.labels_.resize(t.tokens_.size());
    if (plan.eodMaskLoss)
      t.lossMask_.resize(t.tokens_.size());
    if (plan.takesPositionIds())
      t.positionIds_.resize(t.tokens_.size());
  } catch (const std::bad_alloc &) {
    return makeError("out of memory allocating the training buffers");
  }
  // The scratch gradients serve a rank's second micro-batch on. Without ZeRO-2 or 3 they are
  // kept whenever the step has several micro-batches, as the compiler's memory prediction
  // counts them (it does not know data parallelism outside the mesh); under ZeRO-2 and 3 the
  // data-parallel degree is the plan's, and so is the rank's number of micro-batches.
  bool withScratch = plan.zeroStage >= 2 ? t.microBatches_ / dpAxisSize > 1 : t.microBatches_ > 1;
  Expected<GradientBuffer> grads =
      GradientBuffer::create(plan, t.state_, dpAxisSize, withScratch);
  if (!grads)
    return grads.takeError();
  t.grads_.emplace(std::move(*grads));
  return t;
}

int64_t Trainer::bufferBytes() const {
  return state_.bytes() + grads_->bytes() +
         static_cast<int64_t>(
             (tokens_.size() + labels_.size() + positionIds_.size()) * sizeof(int32_t) +
             lossMask_.size() * sizeof(float));
}

void *Trainer::inputBuffer(int index) {
  switch (dataInputAt(index, !lossMask_.empty())) {
  case DataInput::Tokens:
    return tokens_.data();
  case DataInput::Labels:
    return labels_.data();
  case DataInput::LossMask:
    return lossMask_.data();
  case DataInput::PositionIds:
    break;
  }
  return positionIds_.data();
}

Error Trainer::readBatch(const TokenSource &source, int64_t step, int64_t sampleBegin) {
  if (Error err = source.batch(step, sampleBegin, microBatchSize_, seqLen_, tokens_.data(),
                               labels_.data());
      !err.ok())
    return err;
  if (!lossMask_.empty())
    eodLossMask(tokens_, endOfDocument_, lossMask_);
  if (!positionIds_.empty())
    resetPositionIds(tokens_, seqLen_, endOfDocument_, positionIds_);
  return Error::success();
}

Error Trainer::reduceOverDataParallel(double &lossSum, int64_t step) {
  // ZeRO-3's kernels return the gradients reduce-scattered already.
  if (Error err = grads_->reduce(plan_->shardsParameters() ? nullptr : dataParallel_, step);
      !err.ok())
    return err;
  if (!dataParallel_)
    return Error::success();
  if (Error err = dataParallel_->allReduce(&lossSum, 1, MTC_F64, MTC_SUM); !err.ok())
    return std::move(err).withContext(
        concat("step ", step + 1, ": all-reduce of the loss over the data-parallel ranks"));
  // Under ZeRO-3 each call counted the data-parallel group's tokens already.
  for (ExpertLoad &load : plan_->shardsParameters() ? std::span<ExpertLoad>() : std::span(expertLoad_))
    if (Error err = dataParallel_->allReduce(load.sum.data(), load.sum.size(), MTC_I64, MTC_SUM);
        !err.ok())
      return std::move(err).withContext(concat(
          "step ", step + 1, ": all-reduce of the tokens per expert over the data-parallel ranks"));
  return Error::success();
}

int64_t Trainer::peakBytes() const { return bufferBytes() + kernelPeakBytes(); }

int64_t Trainer::groupSampleBegin(int64_t microBatch) const {
  // Under ZeRO-3 a call computes the data-parallel group's micro-batches dpRank - dpRank ..
  // .. + dpSize - 1 (its `batch` split over dp, global in the dropout masks).
  int64_t first = plan_->shardsParameters() && dataParallel_ ? microBatch - dataParallel_->rank()
                                                       : microBatch;
  return first * microBatchSize_;
}

Expected<StepStats> Trainer::step() {
  auto start = std::chrono::steady_clock::now();
  int64_t step = state_.step;
  double lossSum = 0;
  int dpRank = dataParallel_ ? dataParallel_->rank() : 0;
  int dpSize = dataParallel_ ? dataParallel_->size() : 1;
  std::optional<LossScaler> scaler;
  if (plan_->lossScaling)
    scaler.emplace(lossScaleOptions_, state_.lossScale);
  const float lossScale = scaler ? scaler->scale() : 1.0f;
  // The gradients are the mean over the step's micro-batches, of the loss times the loss
  // scale. Under ZeRO-3 each call's is already the mean over the data-parallel group's
  // micro-batch (of dpSize ranks' parts).
  float loss = 0, stepScalar = static_cast<float>(state_.optimizerSteps()),
        gradScale = static_cast<float>(plan_->shardsParameters() ? dpSize : 1) /
                    static_cast<float>(microBatches_) / lossScale,
        gradNorm = 0, lr = 0;
  std::vector<void *> buffers;
  bool first = true;
  for (ExpertLoad &load : expertLoad_)
    std::fill(load.sum.begin(), load.sum.end(), 0);
  for (int64_t m = dpRank; m < microBatches_; m += dpSize) {
    int64_t sampleBegin = m * microBatchSize_;
    if (Error err = readBatch(*data_, step, sampleBegin); !err.ok())
      return std::move(err).withContext(concat("step ", step + 1));
    // The first micro-batch writes the accumulated gradients directly.
    buffers.clear();
    int inputIndex = 0;
    for (const BufferBinding &b : bindings_.forwardBackward) {
      switch (b.kind) {
      case BufferKind::Input:
        buffers.push_back(inputBuffer(inputIndex++));
        break;
      case BufferKind::Param:
        buffers.push_back(state_.params[b.index].values.data());
        break;
      case BufferKind::Grad:
        buffers.push_back(grads_->microBatchGrad(b.index, first));
        break;
      case BufferKind::ExpertLoad:
        buffers.push_back(expertLoad_[b.index].counts.data());
        break;
      default: // the loss (StepBindings allows nothing else)
        buffers.push_back(&loss);
        break;
      }
    }
    {
      TraceRecorder::Scope span(trace_, "forward_backward", "compute", {{"micro_batch", m}});
      DropoutCall dropout{DropoutKey{plan_->seed, step, groupSampleBegin(m)}};
      if (Error err = callInMesh(kernels_->forwardBackward(), buffers, "forward_backward", step,
                                 plan_->dropout ? &dropout : nullptr, lossScale);
          !err.ok())
        return err;
    }
    lossSum += loss;
    for (ExpertLoad &load : expertLoad_)
      load.addCounts();
    {
      TraceRecorder::Scope span(dataParallel_ && plan_->zeroStage == 2 ? trace_ : nullptr,
                                "reduce_scatter_gradients", "communication",
                                {{"micro_batch", m}});
      if (Error err = grads_->addMicroBatch(dataParallel_, first, step); !err.ok())
        return err;
    }
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

  OptimizerStepBuffers where{&stepScalar, &gradScale, &gradNorm, &lr};
  where.grad = [&](size_t i) -> void * { return grads_->optimizerGrad(i); };
  where.param = [&](size_t i) -> void * { return state_.params[i].values.data(); };
  where.state = [&](size_t i) -> void * { return state_.states[i].values.data(); };
  buffers = optimizerStepCall(bindings_.optimizerStep, where);
  {
    TraceRecorder::Scope span(trace_, "optimizer_step", "optimizer");
    if (Error err = callInMesh(kernels_->optimizerStep(), buffers, "optimizer_step", step);
        !err.ok())
      return err;
  }
  // A gradient that overflowed under loss scaling makes the global norm inf or NaN on every
  // rank alike (it covers every gradient of the model): the compiled step left the
  // parameters and states as they were (the step is skipped), and the scale is lowered.
  Expected<bool> overflowed = gradientOverflow(gradNorm, scaler.has_value(), step);
  if (!overflowed)
    return overflowed.takeError();
  const bool overflow = *overflowed;
  if (scaler) {
    scaler->update(overflow);
    state_.lossScale = scaler->state();
  }
  state_.step = step + 1;

  StepStats stats;
  stats.step = state_.step;
  if (scaler) {
    stats.lossScale = lossScale;
    stats.skipped = overflow;
  }
  stats.loss = meanLoss;
  stats.lr = lr;
  stats.gradNorm = gradNorm;
  stats.tokens = microBatches_ * microBatchSize_ * seqLen_;
  stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stats.tokensPerExpert = ExpertLoad::rows(expertLoad_);
  return stats;
}

Expected<double> Trainer::evaluate(int64_t firstBatch, int64_t count, const TokenSource *source) {
  const int64_t step = state_.step;
  if (!validation_)
    return makeError("the trainer was given no validation data");
  const TokenSource &data = source ? *source : *validation_;
  int dpRank = dataParallel_ ? dataParallel_->rank() : 0;
  int dpSize = dataParallel_ ? dataParallel_->size() : 1;
  double lossSum = 0;
  float loss = 0;
  // The same buffers for every micro-batch: the batches are read into tokens_ and labels_
  // (and their loss mask).
  std::vector<void *> buffers;
  int inputIndex = 0;
  for (const BufferBinding &b : bindings_.forward) {
    if (b.kind == BufferKind::Input)
      buffers.push_back(inputBuffer(inputIndex++));
    else if (b.kind == BufferKind::Param)
      buffers.push_back(state_.params[b.index].values.data());
    else // the loss (StepBindings allows nothing else)
      buffers.push_back(&loss);
  }
  for (int64_t batch = firstBatch; batch < firstBatch + count; ++batch)
    for (int64_t m = dpRank; m < microBatches_; m += dpSize) {
      if (Error err = readBatch(data, batch, m * microBatchSize_); !err.ok())
        return std::move(err).withContext(concat("validation at step ", step));
      TraceRecorder::Scope span(trace_, "forward", "evaluation",
                                {{"batch", batch}, {"micro_batch", m}});
      // No DropoutCall: the kernels keep every element (evaluation without dropout).
      if (Error err = rt::callInMesh(*kernels_->forward(), buffers, mesh_, nullptr); !err.ok())
        return std::move(err).withContext(concat("validation at step ", step, ": forward"));
      lossSum += loss;
    }
  if (dataParallel_)
    if (Error err = dataParallel_->allReduce(&lossSum, 1, MTC_F64, MTC_SUM); !err.ok())
      return std::move(err).withContext(concat(
          "validation at step ", step, ": all-reduce of the loss over the data-parallel ranks"));
  return lossSum / static_cast<double>(count * microBatches_);
}

} // namespace mtc::rt
