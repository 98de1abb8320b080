//===- TrainingState.cpp - Parameters, optimizer state and the step count -===//

#include "runtime/exec/TrainingState.h"

#include "runtime/plan/Sharding.h"

#include <new>

namespace mtc::rt {

Expected<TrainingState> TrainingState::initialize(const Plan &plan, unsigned threads) {
  Expected<HostParams> params = HostParams::initialize(plan, threads);
  if (!params)
    return params.takeError().withContext("initialising the parameters");
  TrainingState state;
  state.params = std::move(*params).release();
  try {
    for (const StateInfo &s : plan.states)
      state.states.push_back(
          Tensor{s.name, dimSizes(s.dims), std::vector<float>(size_t(s.numElements()), 0.0f)});
  } catch (const std::bad_alloc &) {
    return makeError("out of memory allocating the optimizer state");
  }
  return state;
}

Expected<TrainingState> TrainingState::initializeShards(const Plan &plan,
                                                        const std::vector<int64_t> &coordinates,
                                                        unsigned threads) {
  Expected<HostParams> params = HostParams::initializeShards(plan, coordinates, threads);
  if (!params)
    return params.takeError().withContext("initialising the parameters");
  TrainingState state;
  state.params = std::move(*params).release();
  Expected<std::vector<Tensor>> states = zeroStates(plan, coordinates);
  if (!states)
    return states.takeError();
  state.states = std::move(*states);
  return state;
}

Expected<std::vector<TrainingState::Tensor>>
TrainingState::zeroStates(const Plan &plan, const std::vector<int64_t> &coordinates) {
  std::vector<Tensor> states;
  try {
    for (const StateInfo &s : plan.states) {
      ShardBox box = optimizerShardBox(plan, plan.params[s.paramIndex], coordinates);
      states.push_back(
          Tensor{s.name, box.localShape, std::vector<float>(size_t(box.localElements()), 0.0f)});
    }
  } catch (const std::bad_alloc &) {
    return makeError("out of memory allocating the optimizer state");
  }
  return states;
}

std::vector<TensorRef> TrainingState::paramRefs() const {
  std::vector<TensorRef> refs;
  for (const Tensor &t : params)
    refs.push_back(makeTensorRef(t.name, t.shape, t.values));
  return refs;
}

int64_t TrainingState::bytes() const {
  int64_t n = 0;
  for (const auto *table : {&params, &states})
    for (const Tensor &t : *table)
      n += static_cast<int64_t>(t.values.size() * sizeof(float));
  return n;
}

} // namespace mtc::rt
