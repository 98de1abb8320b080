//===- KVCache.cpp - Generation with the plan's prefill and decode_step ---===//

#include "runtime/generate/KVCache.h"

#include <algorithm>
#include <new>

namespace mtc::rt {

//===----------------------------------------------------------------------===//
// CachedSequence
//===----------------------------------------------------------------------===//

CachedSequence::Action CachedSequence::next(std::span<const int64_t> ids) const {
  if (!ids_.empty() && ids.size() == ids_.size() + 1 &&
      std::equal(ids_.begin(), ids_.end(), ids.begin()))
    return {false, static_cast<int64_t>(ids_.size())};
  return {true, 0};
}

void CachedSequence::prefilled(std::span<const int64_t> ids, std::span<const float> rows) {
  ids_.assign(ids.begin(), ids.end());
  logits_.assign(rows.begin(), rows.begin() + static_cast<ptrdiff_t>(ids.size() * vocabulary_));
}

void CachedSequence::stepped(int64_t id, std::span<const float> row) {
  ids_.push_back(id);
  logits_.insert(logits_.end(), row.begin(), row.begin() + vocabulary_);
}

std::span<const float> CachedSequence::at(int64_t position) const {
  return std::span(logits_).subspan(size_t(position * vocabulary_), size_t(vocabulary_));
}

//===----------------------------------------------------------------------===//
// KVCacheBuffers
//===----------------------------------------------------------------------===//

Expected<KVCacheBuffers> KVCacheBuffers::create(int64_t keyElements, int64_t valueElements) {
  if (keyElements <= 0 || valueElements <= 0)
    return makeError("the cache of keys and values has no elements (", keyElements, " keys, ",
                     valueElements, " values)");
  KVCacheBuffers buffers;
  try {
    for (int i = 0; i < 2; ++i) {
      buffers.keys_[i].assign(size_t(keyElements), 0.0f);
      buffers.values_[i].assign(size_t(valueElements), 0.0f);
    }
  } catch (const std::bad_alloc &) {
    return makeError("out of memory allocating the cache of keys and values (",
                     2 * (keyElements + valueElements) * int64_t(sizeof(float)), " bytes)");
  }
  return buffers;
}

//===----------------------------------------------------------------------===//
// CachedLogits
//===----------------------------------------------------------------------===//

namespace {

/// The parameters `fn` takes from its input `first` on, by name from `state`.
Expected<std::vector<void *>> bindParams(const Plan &plan, const KernelFunction &fn, size_t first,
                                         const TrainingState &state, std::string_view name) {
  std::vector<void *> params;
  for (size_t i = first; i < fn.inputs.size(); ++i) {
    auto found =
        std::find_if(state.params.begin(), state.params.end(),
                     [&](const TrainingState::Tensor &t) { return t.name == fn.inputs[i].name; });
    if (found == state.params.end())
      return makeError(plan.dir.string(), ": ", name, " takes parameter '", fn.inputs[i].name,
                       "', which the training state does not hold");
    if (static_cast<int64_t>(found->values.size()) != fn.inputs[i].numElements())
      return makeError(plan.dir.string(), ": parameter '", found->name, "' has ",
                       found->values.size(), " values, but ", name, " takes ",
                       formatDims(fn.inputs[i].dims));
    // An input: the kernel reads it only.
    params.push_back(const_cast<float *>(found->values.data()));
  }
  return params;
}

} // namespace

Expected<CachedLogits> CachedLogits::create(const Plan &plan, const KernelLibrary &kernels,
                                            const TrainingState &state, const MeshContext *mesh) {
  const LoadedKernel *prefill = kernels.prefill(), *step = kernels.decodeStep();
  if (!prefill || !step)
    return makeError(plan.dir.string(),
                     ": the plan has no `prefill` and `decode_step` functions for cached "
                     "generation (recompile it with this mtc, without pp, cp, ep or ZeRO-3; "
                     "or use --no-kv-cache)");
  Expected<PlanMesh> planMesh = PlanMesh::create(plan, mesh, "its cached generation");
  if (!planMesh)
    return planMesh.takeError();
  // The plan loader checked the functions (checkCachedGeneration): prefill(tokens, params)
  // -> (logits, keys, values); decode_step(token, position, keys, values, params) -> the same.
  const KernelFunction &pf = *prefill->function, &sf = *step->function;
  Expected<KVCacheBuffers> cache =
      KVCacheBuffers::create(pf.outputs[1].numElements(), pf.outputs[2].numElements());
  if (!cache)
    return cache.takeError();
  CachedLogits f(*prefill, *step, std::move(*cache), plan.vocabularyRealSize, std::move(*planMesh));
  f.window_ = pf.inputs[0].numElements();
  f.vocabulary_ = plan.vocabularyRealSize;
  f.paddedVocabulary_ = pf.outputs[0].dims.back().size;
  Expected<std::vector<void *>> prefillParams = bindParams(plan, pf, 1, state, "prefill");
  if (!prefillParams)
    return prefillParams.takeError();
  Expected<std::vector<void *>> stepParams = bindParams(plan, sf, 4, state, "decode_step");
  if (!stepParams)
    return stepParams.takeError();
  f.prefillParams_ = std::move(*prefillParams);
  f.stepParams_ = std::move(*stepParams);
  try {
    f.tokens_.resize(size_t(f.window_));
    f.token_.resize(1);
    f.position_.resize(1);
    f.windowLogits_.resize(size_t(pf.outputs[0].numElements()));
    f.stepLogits_.resize(size_t(sf.outputs[0].numElements()));
  } catch (const std::bad_alloc &) {
    return makeError("out of memory allocating the logits of a window");
  }
  return f;
}

Error CachedLogits::runPrefill(std::span<const int64_t> ids) {
  std::fill(tokens_.begin(), tokens_.end(), 0);
  std::transform(ids.begin(), ids.end(), tokens_.begin(), [](int64_t id) { return int32_t(id); });
  buffers_.assign({tokens_.data()});
  buffers_.insert(buffers_.end(), prefillParams_.begin(), prefillParams_.end());
  buffers_.insert(buffers_.end(), {windowLogits_.data(), cache_.keys(), cache_.values()});
  // No DropoutCall: evaluation without dropout, as the window path.
  if (Error err = callInMesh(*prefill_, buffers_, mesh_.context(), nullptr); !err.ok())
    return std::move(err).withContext("prefill");
  // The rows of the real vocabulary, one per id.
  std::vector<float> rows;
  rows.reserve(ids.size() * size_t(vocabulary_));
  for (size_t t = 0; t < ids.size(); ++t) {
    auto row = windowLogits_.begin() + static_cast<ptrdiff_t>(t * size_t(paddedVocabulary_));
    rows.insert(rows.end(), row, row + vocabulary_);
  }
  sequence_.prefilled(ids, rows);
  return Error::success();
}

Error CachedLogits::runStep(int64_t id, int64_t position) {
  token_[0] = int32_t(id);
  position_[0] = int32_t(position);
  buffers_.assign({token_.data(), position_.data(), cache_.keys(), cache_.values()});
  buffers_.insert(buffers_.end(), stepParams_.begin(), stepParams_.end());
  buffers_.insert(buffers_.end(), {stepLogits_.data(), cache_.nextKeys(), cache_.nextValues()});
  if (Error err = callInMesh(*step_, buffers_, mesh_.context(), nullptr); !err.ok())
    return std::move(err).withContext("decode_step");
  cache_.swap();
  sequence_.stepped(id, stepLogits_);
  return Error::success();
}

Expected<std::span<const float>> CachedLogits::logitsOfLast(std::span<const int64_t> ids) {
  if (ids.empty() || static_cast<int64_t>(ids.size()) > window_)
    return makeError("cannot score ", ids.size(), " tokens in a window of ", window_);
  for (int64_t id : ids)
    if (id < 0 || id >= vocabulary_)
      return makeError("token id ", id, " is outside the model's vocabulary of ", vocabulary_);
  CachedSequence::Action action = sequence_.next(ids);
  Error err = action.prefill ? runPrefill(ids) : runStep(ids.back(), action.position);
  if (!err.ok()) {
    sequence_.reset();
    return err;
  }
  return sequence_.at(static_cast<int64_t>(ids.size()) - 1);
}

} // namespace mtc::rt
