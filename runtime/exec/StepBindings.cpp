//===- StepBindings.cpp - Which buffer each argument of a step function is ===//

#include "runtime/exec/StepBindings.h"

#include <algorithm>
#include <optional>
#include <string_view>

namespace mtc::rt {
namespace {

std::optional<size_t> indexOf(const std::vector<TrainingState::Tensor> &table,
                              std::string_view name) {
  for (size_t i = 0; i < table.size(); ++i)
    if (table[i].name == name)
      return i;
  return std::nullopt;
}

/// Binds each buffer of `fn` (inputs then outputs) to `state`'s tables by name.
Error bindFunction(const KernelFunction &fn, const TrainingState &state,
                   std::vector<BufferBinding> &out) {
  for (const auto *side : {&fn.inputs, &fn.outputs})
    for (const KernelBuffer &b : *side) {
      BufferBinding binding{b.kind, 0};
      if (b.kind == BufferKind::Param || b.kind == BufferKind::Grad) {
        std::optional<size_t> i = indexOf(state.params, b.name);
        if (!i)
          return makeError("kernel buffer ", bufferKindName(b.kind), " '", b.name,
                           "' names no parameter");
        binding.index = *i;
      } else if (b.kind == BufferKind::State) {
        std::optional<size_t> i = indexOf(state.states, b.name);
        if (!i)
          return makeError("kernel buffer state '", b.name, "' names no optimizer state");
        binding.index = *i;
      } else if (b.kind == BufferKind::ExpertLoad) {
        binding.index = static_cast<size_t>(std::count_if(
            out.begin(), out.end(), [](const BufferBinding &o) { return o.kind == BufferKind::ExpertLoad; }));
      }
      out.push_back(binding);
    }
  return Error::success();
}

/// The buffer kinds each function may take, and that the optimizer takes every parameter
/// and state exactly once: it updates them in place.
Error checkTrainingBindings(const StepBindings &b, const KernelLibrary &kernels,
                            const TrainingState &state) {
  auto inputsOf = [](const LoadedKernel &k) { return k.function->inputs.size(); };
  for (size_t i = 0; i < b.forwardBackward.size(); ++i) {
    BufferKind kind = b.forwardBackward[i].kind;
    bool input = i < inputsOf(kernels.forwardBackward());
    if (input ? kind != BufferKind::Input && kind != BufferKind::Param
              : kind != BufferKind::Loss && kind != BufferKind::Grad &&
                    kind != BufferKind::ExpertLoad)
      return makeError("forward_backward: unexpected ", input ? "input" : "output", " buffer of kind ",
                       bufferKindName(kind));
  }
  std::vector<int> paramUpdates(state.params.size()), stateUpdates(state.states.size());
  for (size_t i = 0; i < b.optimizerStep.size(); ++i) {
    const BufferBinding &o = b.optimizerStep[i];
    bool input = i < inputsOf(kernels.optimizerStep());
    bool ok = input ? o.kind == BufferKind::Step || o.kind == BufferKind::GradScale ||
                          o.kind == BufferKind::Grad || o.kind == BufferKind::Param ||
                          o.kind == BufferKind::State
                    : o.kind == BufferKind::GradNorm || o.kind == BufferKind::Lr;
    if (!ok)
      return makeError("optimizer_step: unexpected ", input ? "input" : "output",
                       " buffer of kind ", bufferKindName(o.kind),
                       input ? "" : " (it updates the parameters and states in place)");
    if (o.kind == BufferKind::Param)
      ++paramUpdates[o.index];
    if (o.kind == BufferKind::State)
      ++stateUpdates[o.index];
  }
  for (size_t i = 0; i < paramUpdates.size(); ++i)
    if (paramUpdates[i] != 1)
      return makeError("optimizer_step takes parameter '", state.params[i].name, "' ",
                       paramUpdates[i], " times (expected once)");
  for (size_t i = 0; i < stateUpdates.size(); ++i)
    if (stateUpdates[i] != 1)
      return makeError("optimizer_step takes state '", state.states[i].name, "' ",
                       stateUpdates[i], " times (expected once)");
  return Error::success();
}

/// Binds the plan's `forward` for evaluation: forward_backward's tokens and labels and the
/// parameters in, the loss out.
Error bindForward(const Plan &plan, const KernelLibrary &kernels, const TrainingState &state,
                  std::vector<BufferBinding> &out) {
  const LoadedKernel *forward = kernels.forward();
  if (!forward)
    return makeError(plan.dir.string(), ": the plan has no `forward` function to evaluate with");
  const KernelFunction &fn = *forward->function;
  const KernelFunction &fb = *kernels.forwardBackward().function;
  if (fn.inputs.size() < 2 || fn.inputs[0].kind != BufferKind::Input ||
      fn.inputs[1].kind != BufferKind::Input || fn.inputs[0].dims != fb.inputs[0].dims ||
      fn.inputs[1].dims != fb.inputs[1].dims)
    return makeError(plan.dir.string(),
                     ": forward does not take forward_backward's tokens and labels first");
  if (Error err = bindFunction(fn, state, out); !err.ok())
    return std::move(err).withContext(plan.dir.string());
  for (size_t i = 0; i < out.size(); ++i) {
    BufferKind kind = out[i].kind;
    bool input = i < fn.inputs.size();
    if (input ? kind != BufferKind::Input && kind != BufferKind::Param : kind != BufferKind::Loss)
      return makeError(plan.dir.string(), ": forward: unexpected ", input ? "input" : "output",
                       " buffer of kind ", bufferKindName(kind),
                       " (evaluation takes the loss only)");
  }
  if (fn.outputs.size() != 1)
    return makeError(plan.dir.string(), ": forward returns ", fn.outputs.size(),
                     " buffers (evaluation expects the loss alone)");
  return Error::success();
}

} // namespace

DataInput dataInputAt(int index, bool lossMask) {
  if (index == 0)
    return DataInput::Tokens;
  if (index == 1)
    return DataInput::Labels;
  return index == 2 && lossMask ? DataInput::LossMask : DataInput::PositionIds;
}

std::vector<ExpertLoad> ExpertLoad::forOutputs(const KernelFunction &forwardBackward) {
  std::vector<ExpertLoad> loads;
  for (const KernelBuffer &b : forwardBackward.outputs)
    if (b.kind == BufferKind::ExpertLoad) {
      ExpertLoad load{b.dims[0].size, b.dims[1].size, {}, {}};
      load.counts.resize(static_cast<size_t>(b.numElements()));
      load.sum.resize(load.counts.size());
      loads.push_back(std::move(load));
    }
  return loads;
}

std::vector<std::vector<int64_t>> ExpertLoad::rows(const std::vector<ExpertLoad> &loads) {
  std::vector<std::vector<int64_t>> rows;
  for (const ExpertLoad &load : loads)
    for (int64_t layer = 0; layer < load.layers; ++layer)
      rows.emplace_back(load.sum.begin() + layer * load.experts,
                        load.sum.begin() + (layer + 1) * load.experts);
  return rows;
}

void ExpertLoad::addCounts() {
  for (size_t i = 0; i < sum.size(); ++i)
    sum[i] += counts[i];
}

Expected<StepBindings> StepBindings::create(const Plan &plan, const KernelLibrary &kernels,
                                            const TrainingState &state, bool withForward) {
  StepBindings b;
  if (Error err = bindFunction(*kernels.forwardBackward().function, state, b.forwardBackward);
      !err.ok())
    return std::move(err).withContext(plan.dir.string());
  if (Error err = bindFunction(*kernels.optimizerStep().function, state, b.optimizerStep);
      !err.ok())
    return std::move(err).withContext(plan.dir.string());
  if (Error err = checkTrainingBindings(b, kernels, state); !err.ok())
    return std::move(err).withContext(plan.dir.string());
  if (withForward)
    if (Error err = bindForward(plan, kernels, state, b.forward); !err.ok())
      return err;
  return b;
}

std::vector<void *> optimizerStepCall(const std::vector<BufferBinding> &bindings,
                                      const OptimizerStepBuffers &where) {
  std::vector<void *> buffers;
  buffers.reserve(bindings.size());
  for (const BufferBinding &b : bindings) {
    switch (b.kind) {
    case BufferKind::Step:
      buffers.push_back(where.step);
      break;
    case BufferKind::GradScale:
      buffers.push_back(where.gradScale);
      break;
    case BufferKind::Grad:
      buffers.push_back(where.grad(b.index));
      break;
    case BufferKind::Param:
      buffers.push_back(where.param(b.index));
      break;
    case BufferKind::State:
      buffers.push_back(where.state(b.index));
      break;
    case BufferKind::GradNorm:
      buffers.push_back(where.gradNorm);
      break;
    default: // the learning rate (StepBindings allows nothing else)
      buffers.push_back(where.lr);
      break;
    }
  }
  return buffers;
}

} // namespace mtc::rt
