//===- PipelineTrainer.cpp - One pipeline stage's training step -----------===//

#include "runtime/exec/PipelineTrainer.h"

#include "runtime/data/Documents.h"
#include "runtime/data/LossMask.h"
#include "runtime/exec/DropoutKey.h"
#include "runtime/exec/EvaluationSchedule.h"
#include "runtime/exec/KernelMemory.h"
#include "runtime/exec/MeshCollectives.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>
#include <utility>

namespace mtc::rt {

Error PipelineTrainer::prepare(TrainingState state, int64_t globalBatch) {
  const Plan &plan = *plan_;
  const KernelLibrary &kernels = *kernels_;
  const RankMesh &mesh = *mesh_;
  const PipelinePlan &pipeline = *plan.pipeline;
  Expected<StageHoldings> holdings = stageHoldings(plan, mesh.stage());
  if (!holdings)
    return holdings.takeError();
  holdings_ = std::move(*holdings);
  stagePlan_ = rt::stagePlan(plan, holdings_);
  // Every call binds its buffers by name: index the stage's tables once.
  for (size_t i = 0; i < stagePlan_.params.size(); ++i)
    paramIndex_.emplace(stagePlan_.params[i].name, i);
  for (size_t i = 0; i < stagePlan_.states.size(); ++i)
    stateIndex_.emplace(stagePlan_.states[i].name, i);
  const Plan &sp = stagePlan_;
  if (state.params.size() != sp.params.size() || state.states.size() != sp.states.size())
    return makeError(plan.dir.string(), ": the training state does not match stage ",
                     mesh.stage(), "'s tables");
  state_ = std::move(state);
  step_ = state_.step;

  // The batch: micro-batches of the step's tokens, dealt over the data-parallel ranks, as
  // the single-stage trainer deals them (countMicroBatches reads the same function).
  // (Chunk 0's forward: a pipeline plan has no whole-model step.)
  if (kernels.chunks().empty() || !kernels.chunks()[0].forward.function)
    return makeError(plan.dir.string(), ": the plan has no chunk0.forward");
  const KernelFunction &step = *kernels.chunks()[0].forward.function;
  Communicator *dp = mesh.dataParallel();
  dpSize_ = dp ? dp->size() : 1;
  dpIndex_ = dp ? dp->rank() : 0;
  Expected<int64_t> microBatches = countMicroBatches(plan, step, globalBatch, dpSize_);
  if (!microBatches)
    return microBatches.takeError();
  // [batch, seq], as countMicroBatches checked.
  microBatchSize_ = tokensInput(step)->dims[0].size;
  seqLen_ = tokensInput(step)->dims[1].size;
  totalMicroBatches_ = *microBatches;
  microBatches_ = totalMicroBatches_ / dpSize_;
  Expected<const PipelineSchedule *> schedule = pipeline.forMicroBatches(microBatches_);
  if (!schedule)
    return schedule.takeError().withContext(
        concat(plan.dir.string(), ": ", microBatches_, " micro-batches per data-parallel rank"));
  schedule_ = *schedule;

  // The functions this stage's tasks call, and the stage's optimizer.
  for (const ScheduleTask &task : schedule_->stages[size_t(mesh.stage())].tasks) {
    if (!isComputeTask(task.op))
      continue;
    const LoadedChunk &lc = kernels.chunks()[size_t(task.chunk)];
    const LoadedKernel &k = task.op == TaskOp::Forward          ? lc.forward
                            : task.op == TaskOp::Backward       ? lc.backward
                            : task.op == TaskOp::BackwardInput  ? lc.backwardInput
                                                                : lc.backwardWeight;
    if (!k.entry)
      return makeError(plan.dir.string(), ": the plan's kernels have no 'chunk", task.chunk, '.',
                       taskOpName(task.op), "' function, which stage ", mesh.stage(),
                       "'s schedule runs");
    // Its data inputs are fed by name (dataInput): one the trainer cannot make is refused
    // here, before the stages start a step together.
    for (const KernelBuffer &b : k.function->inputs)
      if (b.kind == BufferKind::Input && !isDataInput(b.name))
        return makeError(plan.dir.string(), ": chunk", task.chunk, '.', taskOpName(task.op),
                         " takes the data input '", b.name, "', which the trainer does not make "
                         "(tokens, labels, ", kLossMaskInput, ", ", kPositionIdsInput, ")");
  }
  if (size_t(mesh.stage()) >= kernels.stages().size() ||
      !kernels.stages()[size_t(mesh.stage())].gradSquares.entry ||
      !kernels.stages()[size_t(mesh.stage())].optimizerStep.entry)
    return makeError(plan.dir.string(), ": the plan's kernels have no optimizer functions for "
                                        "stage ", mesh.stage(), " (stage", mesh.stage(),
                     ".grad_squares and stage", mesh.stage(), ".optimizer_step)");

  Expected<PipelineExpertLoad> expertLoad = pipelineExpertLoad(*plan.x86Kernels);
  if (!expertLoad)
    return expertLoad.takeError().withContext(plan.dir.string());
  expertLoad_ = std::move(*expertLoad);

  // A stage takes in its gradients in chunk parts (GradientBuffer::addPart): under ZeRO-2
  // each part is reduce-scattered as the chunk call returns it (ZeRO-3's chunk functions
  // return their gradients reduce-scattered already).
  int64_t dpAxisSize = plan.dataParallelAxis ? plan.mesh[*plan.dataParallelAxis].size : 1;
  Expected<GradientBuffer> grads =
      GradientBuffer::create(sp, state_, dpAxisSize, /*withScratch=*/true);
  if (!grads)
    return grads.takeError();
  grads_.emplace(std::move(*grads));
  try {
    // One forward's counts: the rows of the stage's largest chunk.
    int64_t rows = 0;
    for (const StageHoldings::Chunk &chunk : holdings_.chunks)
      rows = std::max(rows, chunk.numLayers);
    for (int64_t experts : expertLoad_.experts)
      expertLoadCounts_.emplace_back(static_cast<size_t>(rows * experts));
    expertLoadSum_.resize(expertLoad_.size());
  } catch (const std::bad_alloc &) {
    return makeError("out of memory allocating the optimizer's outputs and the tokens per expert");
  }

  return Error::success();
}

Expected<std::unique_ptr<PipelineTrainer>>
PipelineTrainer::create(const Plan &plan, const KernelLibrary &kernels, TrainingState state,
                        const TokenSource &data, int64_t globalBatch, const RankMesh &mesh,
                        TraceRecorder *trace, const TokenSource *validation,
                        std::optional<int64_t> endOfDocument) {
  if (!plan.pipeline)
    return makeError(plan.dir.string(), ": the plan has no pipeline");
  // Every stage checks the plan alike, before any collective.
  if (Error err = checkEndOfDocument(plan, endOfDocument); !err.ok())
    return err;
  const PipelinePlan &pipeline = *plan.pipeline;
  std::unique_ptr<PipelineTrainer> t(new PipelineTrainer(plan, kernels, data, mesh));
  t->endOfDocument_ = endOfDocument.value_or(0);
  Error prepared = t->prepare(std::move(state), globalBatch);
  // What follows is collective over the pipeline group: a stage that could not prepare
  // (its plan data, its memory) says so first, so that the others do not wait for it.
  if (Communicator *group = mesh.pipeline()) {
    int32_t ready = prepared.ok() ? 1 : 0;
    if (Error err = group->allReduce(&ready, 1, MTC_I32, MTC_MIN); !err.ok())
      return prepared.ok() ? std::move(err).withContext("setting up the pipeline")
                           : std::move(prepared);
    if (prepared.ok() && !ready)
      return makeError("stage ", mesh.stage(), ": another pipeline stage could not set up its "
                                               "step (its ranks say why)");
  }
  if (!prepared.ok())
    return prepared;

  // The links between stages, and the group of a shared parameter's stages (collective over
  // the pipeline group: every stage makes the same splits in the same order).
  if (Communicator *pipelineGroup = mesh.pipeline()) {
    Expected<PipelineLinks> links = PipelineLinks::create(*pipelineGroup, pipeline.schedules);
    if (!links)
      return links.takeError();
    t->links_.emplace(std::move(*links));
    // One group per set of stages sharing parameters, split in the plan's order on every
    // stage (a split is collective over the pipeline group).
    for (const PipelinePlan::SharedParam &shared : pipeline.sharedParams) {
      std::vector<int64_t> stages = pipeline.stagesOf(shared);
      if (stages.size() < 2)
        continue; // one stage holds every reader: its chunks' parts add up locally
      auto group = std::find_if(t->sharedGroups_.begin(), t->sharedGroups_.end(),
                                [&](const SharedGroup &g) { return g.stages == stages; });
      if (group == t->sharedGroups_.end()) {
        bool member = std::binary_search(stages.begin(), stages.end(), mesh.stage());
        Expected<std::unique_ptr<Communicator>> comm =
            pipelineGroup->split(member ? 0 : 1, static_cast<int>(mesh.stage()));
        if (!comm)
          return comm.takeError().withContext("building the shared parameters' group");
        t->sharedGroups_.push_back({stages, member ? std::move(*comm) : nullptr, {}});
        group = std::prev(t->sharedGroups_.end());
      }
      if (group->comm)
        if (std::optional<size_t> i = indexIn(t->paramIndex_, shared.name))
          group->params.push_back(*i);
    }
  }
  Expected<ScheduleExecutor> executor = ScheduleExecutor::create(
      *t->schedule_, static_cast<int>(mesh.stage()), t->links_ ? &*t->links_ : nullptr, trace);
  if (!executor)
    return executor.takeError();
  t->executor_.emplace(std::move(*executor));
  // Evaluation: the forward-only lists for the step's micro-batches, over the same links
  // (they send only where the training schedules send activations).
  if (validation) {
    Expected<PipelineSchedule> lists = evaluationSchedule(pipeline, t->microBatches_);
    if (!lists)
      return lists.takeError().withContext(concat(plan.dir.string(), ": evaluation"));
    t->evaluationSchedule_.emplace(std::move(*lists));
    Expected<ScheduleExecutor> evaluation =
        ScheduleExecutor::create(*t->evaluationSchedule_, static_cast<int>(mesh.stage()),
                                 t->links_ ? &*t->links_ : nullptr, trace);
    if (!evaluation)
      return evaluation.takeError().withContext("evaluation");
    t->evaluationExecutor_.emplace(std::move(*evaluation));
    t->validation_ = validation;
  }
  return t;
}

std::optional<size_t> PipelineTrainer::indexIn(const NameIndex &index, std::string_view name) {
  auto it = index.find(name);
  return it == index.end() ? std::nullopt : std::optional<size_t>(it->second);
}

Expected<float *> PipelineTrainer::buffer(const Key &key, size_t elements, std::string_view what) {
  auto it = buffers_.find(key);
  if (it == buffers_.end()) {
    if (elements == 0)
      return makeError("stage ", mesh_->stage(), ": no ", what, " of chunk ", std::get<1>(key),
                       " micro-batch ", std::get<2>(key),
                       " has been computed or received (the schedule is inconsistent)");
    try {
      it = buffers_.emplace(key, std::vector<float>(elements)).first;
    } catch (const std::bad_alloc &) {
      return makeError("stage ", mesh_->stage(), ": out of memory for the ", what, " of chunk ",
                       std::get<1>(key), " micro-batch ", std::get<2>(key));
    }
    countHeld(key, static_cast<int64_t>(elements * sizeof(float)));
  } else if (elements != 0 && it->second.size() != elements) {
    return makeError("stage ", mesh_->stage(), ": the ", what, " of chunk ", std::get<1>(key),
                     " micro-batch ", std::get<2>(key), " has ", it->second.size(),
                     " elements, but a function takes ", elements);
  }
  return it->second.data();
}

void PipelineTrainer::release(const Key &key) {
  if (auto it = buffers_.find(key); it != buffers_.end()) {
    countHeld(key, -static_cast<int64_t>(it->second.size() * sizeof(float)));
    buffers_.erase(it);
  }
}

void PipelineTrainer::releaseSaved(int64_t chunk, int64_t microBatch) {
  for (Held what : {Held::Residual, Held::Stash})
    while (true) {
      auto it = buffers_.lower_bound({what, chunk, microBatch, 0});
      if (it == buffers_.end() || std::get<0>(it->first) != what ||
          std::get<1>(it->first) != chunk || std::get<2>(it->first) != microBatch)
        break;
      release(it->first);
    }
}

void PipelineTrainer::countHeld(const Key &key, int64_t bytes) {
  Held what = std::get<0>(key);
  if (what == Held::Residual || what == Held::Stash) {
    savedBytes_ += bytes;
    peakSavedBytes_ = std::max(peakSavedBytes_, savedBytes_);
  }
  heldBytes_ += bytes;
  peakHeldBytes_ = std::max(peakHeldBytes_, heldBytes_);
}

Expected<void *> PipelineTrainer::dataInput(std::string_view name, int64_t microBatch) {
  auto it = batches_.find(microBatch);
  if (it == batches_.end()) {
    const size_t n = size_t(microBatchSize_ * seqLen_);
    MicroBatchData read;
    try {
      read.tokens.resize(n);
      read.labels.resize(n);
    } catch (const std::bad_alloc &) {
      return makeError("stage ", mesh_->stage(), ": out of memory for micro-batch ", microBatch,
                       "'s tokens");
    }
    // Evaluation reads validation batch b as step b of the validation data.
    const TokenSource &source = evaluationBatch_ ? *evaluationSource_ : *data_;
    if (Error err = source.batch(evaluationBatch_.value_or(step_), sampleBegin(microBatch),
                                 microBatchSize_, seqLen_, read.tokens.data(), read.labels.data());
        !err.ok())
      return evaluationBatch_ ? std::move(err)
                              : std::move(err).withContext(concat("step ", step_ + 1));
    it = batches_.emplace(microBatch, std::move(read)).first;
  }
  MicroBatchData &data = it->second;
  if (name == "tokens")
    return static_cast<void *>(data.tokens.data());
  if (name == "labels")
    return static_cast<void *>(data.labels.data());
  try {
    if (name == kLossMaskInput) {
      if (data.lossMask.empty()) {
        data.lossMask.resize(data.tokens.size());
        eodLossMask(data.tokens, endOfDocument_, data.lossMask);
      }
      return static_cast<void *>(data.lossMask.data());
    }
    if (name == kPositionIdsInput) {
      if (data.positionIds.empty()) {
        data.positionIds.resize(data.tokens.size());
        resetPositionIds(data.tokens, seqLen_, endOfDocument_, data.positionIds);
      }
      return static_cast<void *>(data.positionIds.data());
    }
  } catch (const std::bad_alloc &) {
    return makeError("stage ", mesh_->stage(), ": out of memory for micro-batch ", microBatch,
                     "'s ", name);
  }
  return makeError("stage ", mesh_->stage(), ": no data input '", name, "'");
}

bool PipelineTrainer::isDataInput(std::string_view name) {
  return name == "tokens" || name == "labels" || name == kLossMaskInput ||
         name == kPositionIdsInput;
}

Error PipelineTrainer::callStep(const LoadedKernel &kernel, std::span<void *const> buffers,
                                std::string_view what) {
  return callInMesh(kernel, buffers, mesh_->context(), nullptr)
      .withContext(concat("step ", step_ + 1, ": stage ", mesh_->stage(), ": ", what));
}

Error PipelineTrainer::callChunk(const LoadedKernel &kernel, const ScheduleTask &task,
                                 std::string_view role) {
  const KernelFunction &fn = *kernel.function;
  const int64_t c = task.chunk, i = task.microBatch;
  const std::vector<int64_t> &chunkStages = plan_->pipeline->chunkStages;
  const int64_t chunks = static_cast<int64_t>(chunkStages.size());
  auto local = [&](int64_t other) {
    return other >= 0 && other < chunks && chunkStages[size_t(other)] == mesh_->stage();
  };
  const int64_t layerOffset = holdings_.chunkOffset(c);
  std::vector<void *> pointers;
  // The gradients the call writes: (stage parameter, first element, count).
  std::vector<std::tuple<size_t, size_t, size_t>> written;
  size_t expertLoads = 0; // the call's expert_load outputs so far
  float loss = 0;
  bool wroteLoss = false;
  // Where the next value of a chunk boundary goes in its message.
  size_t activationIn = 0, activationOut = 0, gradientIn = 0, gradientOut = 0;
  size_t inputs = fn.inputs.size();
  for (size_t n = 0; n < inputs + fn.outputs.size(); ++n) {
    bool output = n >= inputs;
    const KernelBuffer &b = output ? fn.outputs[n - inputs] : fn.inputs[n];
    size_t elements = heldWords(b);
    Expected<float *> data = static_cast<float *>(nullptr);
    switch (b.kind) {
    case BufferKind::Param:
    case BufferKind::Grad: {
      std::optional<size_t> p = indexIn(paramIndex_, b.name);
      if (!p)
        return makeError("stage ", mesh_->stage(), " holds no parameter '", b.name,
                         "' that chunk", c, '.', role, " takes");
      const TrainingState::Tensor &tensor = state_.params[*p];
      size_t begin = stagePlan_.params[*p].layer && holdings_.layers > 0
                         ? tensor.values.size() / size_t(holdings_.layers) * size_t(layerOffset)
                         : 0;
      if (begin + elements > tensor.values.size())
        return makeError("chunk", c, '.', role, ": ", bufferKindName(b.kind), " '", b.name,
                         "' does not fit stage ", mesh_->stage(), "'s tensor");
      if (b.kind == BufferKind::Param) {
        data = state_.params[*p].values.data() + begin;
      } else {
        data = grads_->microBatchGrad(*p, /*first=*/false) + begin;
        written.emplace_back(*p, begin, elements);
      }
      break;
    }
    case BufferKind::Input: {
      Expected<void *> input = dataInput(b.name, i);
      if (!input)
        return input.takeError().withContext(concat("chunk", c, '.', role));
      pointers.push_back(*input);
      continue;
    }
    case BufferKind::ExpertLoad:
      // pipelineExpertLoad checked that the forwards return the counts of their layers.
      if (!output || expertLoads >= expertLoadCounts_.size())
        return makeError("chunk", c, '.', role, ": unexpected expert_load buffer");
      pointers.push_back(expertLoadCounts_[expertLoads++].data());
      continue;
    case BufferKind::Activation:
    case BufferKind::ActivationGrad: {
      // A chunk boundary may carry several values (a layer's running auxiliary loss beside
      // the hidden state): one message holds them all, in the functions' order. An input
      // must have arrived; an output is made the size of the boundary's values.
      bool gradient = b.kind == BufferKind::ActivationGrad;
      size_t &at = gradient ? (output ? gradientOut : gradientIn)
                            : (output ? activationOut : activationIn);
      Key key = !gradient ? (!output       ? Key{Held::Input, c, i, 0}
                             : local(c + 1) ? Key{Held::Input, c + 1, i, 0}
                                            : Key{Held::Output, c, i, 0})
                          : (!output       ? Key{Held::OutputGrad, c, i, 0}
                             : local(c - 1) ? Key{Held::OutputGrad, c - 1, i, 0}
                                            : Key{Held::InputGrad, c, i, 0});
      std::string_view what = gradient ? "activation gradient" : "activation";
      size_t words = output ? chunkActivationWords(*plan_->x86Kernels, gradient ? c - 1 : c) : 0;
      data = buffer(key, words, what);
      if (data) {
        if (at + elements > buffers_.find(key)->second.size())
          return makeError("chunk", c, '.', role, ": its ", what, "s do not fit the ",
                           buffers_.find(key)->second.size(),
                           " words the neighbouring chunk's exchange with it holds");
        *data += std::exchange(at, at + elements);
      }
      break;
    }
    case BufferKind::Residual:
      data = buffer({Held::Residual, c, i, b.index}, output ? elements : 0, "residual");
      break;
    case BufferKind::Stash:
      data = buffer({Held::Stash, c, i, b.index}, output ? elements : 0, "stash");
      break;
    case BufferKind::Loss:
      data = &loss;
      wroteLoss = true;
      break;
    default:
      return makeError("chunk", c, '.', role, ": unexpected buffer of kind ",
                       bufferKindName(b.kind));
    }
    if (!data)
      return data.takeError();
    pointers.push_back(*data);
  }
  {
    // Evaluation has no DropoutCall (the kernels keep every element) and no loss scale.
    const bool evaluating = evaluationBatch_.has_value();
    DropoutCall dropout{DropoutKey{plan_->seed, step_, kernelSampleBegin(i)}};
    if (Error err = callInMesh(kernel, pointers, mesh_->context(),
                               plan_->dropout && !evaluating ? &dropout : nullptr,
                               scaler_ && !evaluating ? scaler_->scale() : 1.0f);
        !err.ok())
      return std::move(err).withContext(
          concat(evaluating ? std::string() : concat("step ", step_ + 1, ": "), "stage ",
                 mesh_->stage(), ": chunk", c, '.', role, " micro-batch ", i));
  }
  for (auto [p, begin, count] : written)
    if (Error err = grads_->addPart(mesh_->dataParallel(), p, begin, count, step_); !err.ok())
      return std::move(err).withContext(
          concat("stage ", mesh_->stage(), ": chunk", c, '.', role, " micro-batch ", i));
  if (wroteLoss)
    lossSum_ += loss;
  // The counts of the chunk's layers, into their rows of the whole stack (a step's only).
  const ChunkKernels &chunkKernels = plan_->x86Kernels->chunks[size_t(c)];
  for (size_t load = 0; load < (evaluationBatch_ ? 0 : expertLoads); ++load) {
    int64_t *sum = expertLoadSum_.data() + expertLoad_.rowOffset(load, chunkKernels.firstLayer);
    const std::vector<int64_t> &counts = expertLoadCounts_[load];
    for (int64_t n = 0; n < chunkKernels.numLayers * expertLoad_.experts[load]; ++n)
      sum[n] += counts[size_t(n)];
  }
  // What no later task of this chunk and micro-batch reads.
  switch (task.op) {
  case TaskOp::Forward:
    release({Held::Input, c, i, 0});
    if (evaluationBatch_) // no backward reads what the forward saved
      releaseSaved(c, i);
    break;
  case TaskOp::BackwardInput: {
    release({Held::OutputGrad, c, i, 0});
    // The residuals backward_weight does not read.
    const KernelFunction &weight = *kernels_->chunks()[size_t(c)].backwardWeight.function;
    for (const KernelBuffer &b : kernels_->chunks()[size_t(c)].forward.function->outputs)
      if (b.kind == BufferKind::Residual &&
          std::none_of(weight.inputs.begin(), weight.inputs.end(), [&](const KernelBuffer &w) {
            return w.kind == BufferKind::Residual && w.index == b.index;
          }))
        release({Held::Residual, c, i, b.index});
    break;
  }
  case TaskOp::Backward:
  case TaskOp::BackwardWeight:
    release({Held::OutputGrad, c, i, 0});
    releaseSaved(c, i);
    break;
  default:
    break;
  }
  return Error::success();
}

Error PipelineTrainer::compute(const ScheduleTask &task) {
  const LoadedChunk &chunk = kernels_->chunks()[size_t(task.chunk)];
  switch (task.op) {
  case TaskOp::Forward:
    return callChunk(chunk.forward, task, "forward");
  case TaskOp::Backward:
    return callChunk(chunk.backward, task, "backward");
  case TaskOp::BackwardInput:
    return callChunk(chunk.backwardInput, task, "backward_input");
  case TaskOp::BackwardWeight:
    return callChunk(chunk.backwardWeight, task, "backward_weight");
  default:
    return makeError("stage ", mesh_->stage(), ": ", describeTask(task), " is not a compute task");
  }
}

void PipelineTrainer::sent(const ScheduleTask &send) {
  release({send.op == TaskOp::SendActivation ? Held::Output : Held::InputGrad, send.chunk,
           send.microBatch, 0});
}

Expected<MessageBuffer> PipelineTrainer::message(const ScheduleTask &task) {
  // The executor asks for a send's buffer before the task producing it runs (to wait for an
  // earlier send of the same memory), so every message's buffer is made on first sight.
  // Chunk c's input is chunk c - 1's output, and a gradient is the size of its activation.
  const int64_t c = task.chunk, i = task.microBatch;
  Expected<float *> data = static_cast<float *>(nullptr);
  size_t elements = 0;
  switch (task.op) {
  case TaskOp::SendActivation:
    elements = chunkActivationWords(*plan_->x86Kernels, c);
    data = buffer({Held::Output, c, i, 0}, elements, "output activation");
    break;
  case TaskOp::RecvActivation:
    elements = chunkActivationWords(*plan_->x86Kernels, c - 1);
    data = buffer({Held::Input, c, i, 0}, elements, "input activation");
    break;
  case TaskOp::SendGradient:
    elements = chunkActivationWords(*plan_->x86Kernels, c - 1);
    data = buffer({Held::InputGrad, c, i, 0}, elements, "input gradient");
    break;
  case TaskOp::RecvGradient:
    elements = chunkActivationWords(*plan_->x86Kernels, c);
    data = buffer({Held::OutputGrad, c, i, 0}, elements, "output gradient");
    break;
  default:
    return makeError("stage ", mesh_->stage(), ": ", describeTask(task), " is not a message");
  }
  if (elements == 0)
    return makeError("chunk", c, ".forward has no activation to exchange for ", describeTask(task));
  if (!data)
    return data.takeError();
  return MessageBuffer{*data, elements, MTC_F32};
}

Error PipelineTrainer::reduceGradients() {
  // A shared parameter's parts on the stages holding it first (Megatron's embedding group),
  // then the data-parallel sum. Under ZeRO-2 a reduce-scattered gradient is summed over the
  // data-parallel ranks already: its shard is summed over the stages (each stage's rank of
  // the same data-parallel coordinate holds the same block).
  for (const SharedGroup &group : sharedGroups_)
    for (size_t p : group.params) {
      std::span<float> grad = grads_->accumulated(p);
      if (Error err = group.comm->allReduce(grad.data(), grad.size(), MTC_F32, MTC_SUM);
          !err.ok())
        return std::move(err).withContext(concat("step ", step_ + 1, ": all-reduce of shared "
                                                 "parameter '",
                                                 state_.params[p].name, "' over its stages"));
    }
  // Under ZeRO-3 the chunk functions return the gradients reduce-scattered, and count the
  // data-parallel group's tokens per expert.
  bool shardedParameters = plan_->shardsParameters();
  if (Error err = grads_->reduce(shardedParameters ? nullptr : mesh_->dataParallel(), step_);
      !err.ok())
    return err;
  Communicator *dp = mesh_->dataParallel();
  if (!dp)
    return Error::success();
  // The loss and the stage's tokens per expert in one all-reduce (f64 holds the counts
  // exactly: they are far below 2^53).
  std::vector<double> sums = {lossSum_};
  std::vector<std::pair<size_t, size_t>> ranges;
  if (!shardedParameters)
    ranges = stageExpertLoadRanges();
  for (auto [first, values] : ranges)
    sums.insert(sums.end(), expertLoadSum_.begin() + ptrdiff_t(first),
                expertLoadSum_.begin() + ptrdiff_t(first + values));
  if (Error err = dp->allReduce(sums.data(), sums.size(), MTC_F64, MTC_SUM); !err.ok())
    return std::move(err).withContext(concat(
        "step ", step_ + 1,
        ": all-reduce of the loss and the tokens per expert over the data-parallel ranks"));
  lossSum_ = sums[0];
  size_t at = 1;
  for (auto [first, values] : ranges)
    for (size_t n = 0; n < values; ++n)
      expertLoadSum_[first + n] = static_cast<int64_t>(sums[at++]);
  return Error::success();
}

std::vector<std::pair<size_t, size_t>> PipelineTrainer::stageExpertLoadRanges() const {
  std::vector<std::pair<size_t, size_t>> ranges;
  for (size_t load = 0; load < expertLoad_.experts.size(); ++load)
    for (const StageHoldings::Chunk &chunk : holdings_.chunks)
      ranges.emplace_back(expertLoad_.rowOffset(load, chunk.firstLayer),
                          static_cast<size_t>(chunk.numLayers * expertLoad_.experts[load]));
  return ranges;
}

Error PipelineTrainer::optimizerStep() {
  const LoadedStage &stage = kernels_->stages()[size_t(mesh_->stage())];
  // Under ZeRO-3 each chunk call's gradient is the mean over the data-parallel group's
  // micro-batch; under fp16 every gradient is the loss scale's multiple.
  float gradScale = static_cast<float>(plan_->shardsParameters() ? dpSize_ : 1) /
                    static_cast<float>(totalMicroBatches_) /
                    (scaler_ ? scaler_->scale() : 1.0f);
  float stepScalar = static_cast<float>(state_.optimizerSteps()), squares = 0;
  auto bindGrads = [&](const KernelFunction &fn, std::vector<void *> &out, bool outputs,
                       const auto &scalar) -> Error {
    const std::vector<KernelBuffer> &side = outputs ? fn.outputs : fn.inputs;
    for (const KernelBuffer &b : side) {
      if (b.kind == BufferKind::Grad || b.kind == BufferKind::Param) {
        std::optional<size_t> p = indexIn(paramIndex_, b.name);
        if (!p)
          return makeError("stage ", mesh_->stage(), " holds no parameter '", b.name, "'");
        out.push_back(b.kind == BufferKind::Grad ? grads_->optimizerGrad(*p)
                                                 : state_.params[*p].values.data());
      } else if (b.kind == BufferKind::State) {
        std::optional<size_t> s = indexIn(stateIndex_, b.name);
        if (!s)
          return makeError("stage ", mesh_->stage(), " holds no optimizer state '", b.name, "'");
        out.push_back(state_.states[*s].values.data());
      } else if (void *p = scalar(b.kind)) {
        out.push_back(p);
      } else {
        return makeError("stage", mesh_->stage(), " optimizer: unexpected buffer of kind ",
                         bufferKindName(b.kind));
      }
    }
    return Error::success();
  };
  auto scalar = [&](BufferKind kind) -> void * {
    switch (kind) {
    case BufferKind::Step:
      return &stepScalar;
    case BufferKind::GradScale:
      return &gradScale;
    case BufferKind::GradNorm:
      return &gradNorm_;
    case BufferKind::Lr:
      return &lr_;
    case BufferKind::GradSquares:
      return &squares;
    default:
      return nullptr;
    }
  };
  std::vector<void *> buffers;
  for (bool outputs : {false, true})
    if (Error err = bindGrads(*stage.gradSquares.function, buffers, outputs, scalar); !err.ok())
      return err;
  if (Error err = callStep(stage.gradSquares, buffers, "grad_squares"); !err.ok())
    return err;
  // The squared norm of every stage, the loss (of the stage running the last chunk: the
  // last stage, or stage 0 in zb-v's V) and the tokens per expert (each stage's rows, zeros
  // in the others') in one all-reduce.
  bool lossStage = plan_->pipeline->chunkStages.back() == mesh_->stage();
  std::vector<double> shared = {squares, lossStage ? lossSum_ : 0.0};
  shared.insert(shared.end(), expertLoadSum_.begin(), expertLoadSum_.end());
  if (Communicator *pipeline = mesh_->pipeline())
    if (Error err = pipeline->allReduce(shared.data(), shared.size(), MTC_F64, MTC_SUM);
        !err.ok())
      return std::move(err).withContext(
          concat("step ", step_ + 1, ": all-reduce of the gradient norm over the stages"));
  lossSum_ = shared[1];
  tokensPerExpert_.clear();
  for (size_t load = 0; load < expertLoad_.experts.size(); ++load)
    for (int64_t layer = 0; layer < expertLoad_.layers; ++layer) {
      auto row = shared.begin() + 2 + ptrdiff_t(expertLoad_.rowOffset(load, layer));
      std::vector<int64_t> &counts = tokensPerExpert_.emplace_back();
      for (auto it = row; it != row + expertLoad_.experts[load]; ++it)
        counts.push_back(static_cast<int64_t>(*it));
    }
  double meanLoss = lossSum_ / static_cast<double>(totalMicroBatches_);
  if (!std::isfinite(meanLoss))
    return makeError("step ", step_ + 1, ": the loss is ", meanLoss,
                     " (training diverged; try a lower learning rate)");
  gradNorm_ = static_cast<float>(std::sqrt(shared[0]));
  // The norm is every stage's, so all ranks skip an overflowing fp16 step together: the
  // optimizer still runs (for the step's learning rate) and, given a norm that is not
  // finite, leaves the parameters and states as they were.
  Expected<bool> overflowed = gradientOverflow(gradNorm_, scaler_.has_value(), step_);
  if (!overflowed)
    return overflowed.takeError();
  skipped_ = *overflowed;
  buffers.clear();
  for (bool outputs : {false, true})
    if (Error err = bindGrads(*stage.optimizerStep.function, buffers, outputs, scalar); !err.ok())
      return err;
  return callStep(stage.optimizerStep, buffers, "optimizer_step");
}

Expected<StepStats> PipelineTrainer::step() {
  auto start = std::chrono::steady_clock::now();
  step_ = state_.step;
  lossSum_ = 0;
  scaler_.reset();
  if (plan_->lossScaling)
    scaler_.emplace(lossScaleOptions_, state_.lossScale);
  skipped_ = false;
  std::fill(expertLoadSum_.begin(), expertLoadSum_.end(), 0);
  grads_->clear();
  Expected<StageStepTimes> times = executor_->runStep(*this);
  buffers_.clear();
  batches_.clear();
  heldBytes_ = savedBytes_ = 0;
  if (!times)
    return times.takeError();
  times_.push_back(*times);
  StepStats stats;
  if (scaler_) {
    stats.lossScale = scaler_->scale();
    stats.skipped = skipped_;
    scaler_->update(skipped_);
    state_.lossScale = scaler_->state();
  }
  state_.step = step_ + 1;
  stats.step = state_.step;
  stats.loss = lossSum_ / static_cast<double>(totalMicroBatches_);
  stats.lr = lr_;
  stats.gradNorm = gradNorm_;
  stats.tokens = totalMicroBatches_ * microBatchSize_ * seqLen_;
  stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stats.tokensPerExpert = tokensPerExpert_;
  return stats;
}

Expected<double> PipelineTrainer::evaluate(int64_t firstBatch, int64_t count,
                                           const TokenSource *source) {
  step_ = state_.step;
  if (!validation_ || !evaluationExecutor_)
    return makeError("the trainer was given no validation data");
  evaluationSource_ = source ? source : validation_;
  // The memory high-water marks stay those of the training steps.
  const int64_t peakHeld = peakHeldBytes_, peakSaved = peakSavedBytes_;
  lossSum_ = 0;
  Error failed = Error::success();
  for (int64_t b = firstBatch; b < firstBatch + count && failed.ok(); ++b) {
    evaluationBatch_ = b;
    Expected<StageStepTimes> times = evaluationExecutor_->runStep(*this);
    buffers_.clear();
    batches_.clear();
    heldBytes_ = savedBytes_ = 0;
    if (!times)
      failed = times.takeError();
  }
  evaluationBatch_.reset();
  peakHeldBytes_ = peakHeld;
  peakSavedBytes_ = peakSaved;
  if (!failed.ok())
    return std::move(failed).withContext(concat("validation at step ", step_));
  // The loss of the stage running the last chunk, summed over the data-parallel ranks (every
  // stage takes part), then shared with every stage.
  double loss = plan_->pipeline->chunkStages.back() == mesh_->stage() ? lossSum_ : 0.0;
  if (Communicator *dp = mesh_->dataParallel())
    if (Error err = dp->allReduce(&loss, 1, MTC_F64, MTC_SUM); !err.ok())
      return std::move(err).withContext(concat(
          "validation at step ", step_, ": all-reduce of the loss over the data-parallel ranks"));
  if (Communicator *pipeline = mesh_->pipeline())
    if (Error err = pipeline->allReduce(&loss, 1, MTC_F64, MTC_SUM); !err.ok())
      return std::move(err).withContext(
          concat("validation at step ", step_, ": all-reduce of the loss over the stages"));
  return loss / static_cast<double>(count * totalMicroBatches_);
}

int64_t PipelineTrainer::bufferBytes() const {
  return state_.bytes() + grads_->bytes() + peakHeldBytes_;
}

uint64_t PipelineTrainer::bytesSent() const {
  uint64_t total = links_ ? links_->bytesSent() : 0;
  for (const SharedGroup &group : sharedGroups_)
    if (group.comm)
      total += group.comm->counters().totalBytesSent();
  return total;
}

int64_t PipelineTrainer::peakBytes() const { return bufferBytes() + kernelPeakBytes(); }

} // namespace mtc::rt
