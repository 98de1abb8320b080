//===- LogitsFunction.cpp - The plan's logits of a token sequence ---------===//

#include "runtime/generate/LogitsFunction.h"

#include <algorithm>
#include <new>

namespace mtc::rt {

Expected<LogitsFunction> LogitsFunction::create(const Plan &plan, const KernelLibrary &kernels,
                                                const TrainingState &state,
                                                const MeshContext *mesh) {
  const LoadedKernel *kernel = kernels.logits();
  if (!kernel)
    return makeError(plan.dir.string(),
                     ": the plan has no `logits` function to generate with "
                     "(recompile it with this mtc; a model whose forward has no cross_entropy "
                     "over token ids has no logits)");
  Expected<PlanMesh> planMesh = PlanMesh::create(plan, mesh, "its logits function");
  if (!planMesh)
    return planMesh.takeError();
  LogitsFunction f(*kernel, std::move(*planMesh));
  // The loader checked the shapes: tokens [batch, seq] then parameters in, logits
  // [batch, seq, padded vocabulary] out.
  const KernelFunction &fn = *kernel->function;
  f.batch_ = fn.inputs[0].dims[0].size;
  f.window_ = fn.inputs[0].dims[1].size;
  f.paddedVocabulary_ = fn.outputs[0].dims[2].size;
  f.vocabulary_ = plan.vocabularyRealSize;
  try {
    f.tokens_.resize(size_t(f.batch_ * f.window_));
    f.logits_.resize(size_t(fn.outputs[0].numElements()));
  } catch (const std::bad_alloc &) {
    return makeError("out of memory allocating the logits of a batch");
  }
  f.buffers_.push_back(f.tokens_.data());
  for (size_t i = 1; i < fn.inputs.size(); ++i) {
    auto found =
        std::find_if(state.params.begin(), state.params.end(),
                     [&](const TrainingState::Tensor &t) { return t.name == fn.inputs[i].name; });
    if (found == state.params.end())
      return makeError(plan.dir.string(), ": logits takes parameter '", fn.inputs[i].name,
                       "', which the training state does not hold");
    if (static_cast<int64_t>(found->values.size()) != fn.inputs[i].numElements())
      return makeError(plan.dir.string(), ": parameter '", found->name, "' has ",
                       found->values.size(), " values, but logits takes ",
                       formatDims(fn.inputs[i].dims));
    // An input: the kernel reads it only.
    f.buffers_.push_back(const_cast<float *>(found->values.data()));
  }
  f.buffers_.push_back(f.logits_.data());
  return f;
}

Error LogitsFunction::run(std::span<const int64_t> ids) {
  if (ids.empty() || static_cast<int64_t>(ids.size()) > window_)
    return makeError("cannot score ", ids.size(), " tokens in a window of ", window_);
  for (int64_t id : ids)
    if (id < 0 || id >= vocabulary_)
      return makeError("token id ", id, " is outside the model's vocabulary of ", vocabulary_);
  for (int64_t row = 0; row < batch_; ++row) {
    int32_t *out = tokens_.data() + row * window_;
    std::fill(out, out + window_, 0);
    std::transform(ids.begin(), ids.end(), out, [](int64_t id) { return int32_t(id); });
  }
  // No DropoutCall: the kernels keep every element (evaluation without dropout).
  return callInMesh(*kernel_, buffers_, mesh_.context(), nullptr).withContext("logits");
}

std::span<const float> LogitsFunction::at(int64_t position) const {
  return std::span(logits_).subspan(size_t(position * paddedVocabulary_), size_t(vocabulary_));
}

} // namespace mtc::rt
