//===- MoEOps.cpp - top-k, expert routing and the router losses -----------===//

#include "compiler/interpreter/OpEval.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace mlir;
using namespace mtc;
using namespace mtc::interp;
using namespace mtc::interp::eval;

//===----------------------------------------------------------------------===//
// Top-k
//===----------------------------------------------------------------------===//

/// Descending order, ties broken by the lower index; NaN sorts above every number.
static bool ranksAbove(const SmallVectorImpl<double> &lane, int64_t a, int64_t b) {
  double x = lane[a], y = lane[b];
  if (std::isnan(x) != std::isnan(y))
    return std::isnan(x);
  if (x != y && !std::isnan(x))
    return x > y;
  return a < b;
}

Expected<Results> eval::evalOp(mt::TopKOp op, Operands in) {
  const Tensor &input = *in[0];
  Tensor values(typeOf(op.getValues())), indices(typeOf(op.getIndices()));
  int64_t size = input.type.getDimSize(op.getDim());
  int64_t k = values.type.getDimSize(op.getKDim());
  Space lanes = Space::of(input.type, {op.getDim()});
  int64_t inStride = stridesAlong(input.type, Space().append(op.getDim(), size))[0];
  Space kSpace = Space().append(op.getKDim(), k);
  int64_t valueStride = stridesAlong(values.type, kSpace)[0];
  int64_t indexStride = stridesAlong(indices.type, kSpace)[0];
  SmallVector<double> lane(size);
  SmallVector<int64_t> order(size);
  forEachPoint<3>(lanes,
                  {stridesAlong(input.type, lanes), stridesAlong(values.type, lanes),
                   stridesAlong(indices.type, lanes)},
                  [&](const std::array<int64_t, 3> &at) {
                    for (int64_t i = 0; i < size; ++i)
                      lane[i] = input.data[at[0] + i * inStride];
                    std::iota(order.begin(), order.end(), 0);
                    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                                      [&](int64_t a, int64_t b) { return ranksAbove(lane, a, b); });
                    for (int64_t c = 0; c < k; ++c) {
                      values.data[at[1] + c * valueStride] = lane[order[c]];
                      indices.data[at[2] + c * indexStride] = static_cast<double>(order[c]);
                    }
                  });
  return Results{std::move(values), std::move(indices)};
}

/// Adds each value gradient at the position its index chose (a zero tensor elsewhere).
Expected<Results> eval::evalOp(mt::TopKGradOp op, Operands in) {
  const Tensor &grad = *in[0], &indices = *in[1];
  Tensor result(typeOf(op.getResult()));
  int64_t size = result.type.getDimSize(op.getDim());
  int64_t k = grad.type.getDimSize(op.getKDim());
  Space lanes = Space::of(grad.type, {op.getKDim()});
  Space kSpace = Space().append(op.getKDim(), k);
  int64_t gradStride = stridesAlong(grad.type, kSpace)[0];
  int64_t indexStride = stridesAlong(indices.type, kSpace)[0];
  int64_t outStride = stridesAlong(result.type, Space().append(op.getDim(), size))[0];
  llvm::Error error = llvm::Error::success();
  forEachPoint<3>(lanes,
                  {stridesAlong(grad.type, lanes), stridesAlong(indices.type, lanes),
                   stridesAlong(result.type, lanes)},
                  [&](const std::array<int64_t, 3> &at) {
                    for (int64_t c = 0; c < k && !error; ++c) {
                      Expected<int64_t> index =
                          readIndex(op, indices.data[at[1] + c * indexStride], size, "index");
                      if (!index) {
                        error = index.takeError();
                        return;
                      }
                      result.data[at[2] + *index * outStride] += grad.data[at[0] + c * gradStride];
                    }
                  });
  if (error)
    return std::move(error);
  return Results{std::move(result)};
}

//===----------------------------------------------------------------------===//
// Routing: the one slot assignment of dispatch, combine and combine_grad
//===----------------------------------------------------------------------===//

/// True when `type` has exactly the dimensions (names and sizes) of `space`, in any order.
static bool hasExactDims(mt::NamedTensorType type, const Space &space) {
  if (type.getRank() != space.names.size())
    return false;
  for (auto [name, size] : llvm::zip(space.names, space.sizes))
    if (!type.hasDim(name) || type.getDimSize(name) != size)
      return false;
  return true;
}

namespace {

/// Which expert slot each routing choice occupies. Tokens are the indices' dimensions
/// without `k`, iterated row-major in the indices' order; choice c of token t is entry
/// t * k + c. Each expert fills slots 0..capacity-1 in that order (token-major, then k),
/// first come first served; later choices of a full expert are dropped (slot -1).
struct Routing {
  Space tokens;
  int64_t k;
  SmallVector<int64_t> expert, slot;

  static Expected<Routing> compute(Operation *op, const Tensor &indices, StringRef kDim,
                                   int64_t experts, int64_t capacity) {
    Routing routing;
    routing.tokens = Space::of(indices.type, {kDim});
    routing.k = indices.type.getDimSize(kDim);
    Space choices = routing.tokens;
    choices.append(kDim, routing.k);
    SmallVector<int64_t> filled(experts, 0);
    for (int64_t offset : offsetsOf(indices.type, choices)) {
      Expected<int64_t> expert = readIndex(op, indices.data[offset], experts, "expert index");
      if (!expert)
        return expert.takeError();
      routing.expert.push_back(*expert);
      routing.slot.push_back(filled[*expert] < capacity ? filled[*expert]++ : -1);
    }
    return routing;
  }

  int64_t numTokens() const { return tokens.getNumElements(); }
};

/// Where combine and combine_grad find things, with the checks of mt.combine's verifier
/// (combine_grad's verifier only checks its result types).
struct CombineLayout {
  Routing routing;
  Space features;
  int64_t expertStride, capacityStride;
  /// Offsets in the expert buffer of each feature element.
  SmallVector<int64_t> inputFeatures;
  /// Offsets in the weights of each choice (entry t * k + c).
  SmallVector<int64_t> weightChoices;

  template <typename CombineLikeOp>
  static Expected<CombineLayout> compute(CombineLikeOp op, const Tensor &input,
                                         const Tensor &indices, const Tensor &weights) {
    StringRef kDim = op.getKDim(), expertDim = op.getExpertDim(), capacityDim = op.getCapacityDim();
    if (!hasIntegerElements(indices.type) || !indices.type.hasDim(kDim))
      return opError(op, llvm::formatv("indices {0} must be integers with the dimension '{1}'",
                                       indices.type, kDim));
    if (expertDim == capacityDim || !input.type.hasDim(expertDim) ||
        !input.type.hasDim(capacityDim))
      return opError(op, llvm::formatv("input {0} needs distinct expert '{1}' and capacity "
                                       "'{2}' dimensions",
                                       input.type.dimsToString(), expertDim, capacityDim));
    if (!hasExactDims(indices.type, Space::of(weights.type)))
      return opError(op, llvm::formatv("weights {0} must have the dimensions of the indices {1}",
                                       weights.type.dimsToString(), indices.type.dimsToString()));
    int64_t experts = input.type.getDimSize(expertDim);
    int64_t capacity = input.type.getDimSize(capacityDim);
    Expected<Routing> routing = Routing::compute(op, indices, kDim, experts, capacity);
    if (!routing)
      return routing.takeError();
    CombineLayout layout{
        std::move(*routing), Space::of(input.type, {expertDim, capacityDim}), 0, 0, {}, {}};
    for (StringRef name : layout.features.names)
      if (indices.type.hasDim(name))
        return opError(op, llvm::formatv("feature dimension '{0}' of the input is also a "
                                         "dimension of the indices",
                                         name));
    Strides strides =
        stridesAlong(input.type, Space().append(expertDim, experts).append(capacityDim, capacity));
    layout.expertStride = strides[0];
    layout.capacityStride = strides[1];
    layout.inputFeatures = offsetsOf(input.type, layout.features);
    Space choices = layout.routing.tokens;
    choices.append(kDim, layout.routing.k);
    layout.weightChoices = offsetsOf(weights.type, choices);
    return layout;
  }

  /// The space of a token-side tensor (combine's result): tokens, then features.
  Space tokenSide() const {
    Space space = routing.tokens;
    return space.append(features);
  }

  /// Offset of choice `choice`'s expert slot in the expert buffer (slot must be >= 0).
  int64_t slotOffset(int64_t choice) const {
    return routing.expert[choice] * expertStride + routing.slot[choice] * capacityStride;
  }
};

} // namespace

/// Copies each token's features into the slot of each of its accepted choices.
Expected<Results> eval::evalOp(mt::DispatchOp op, Operands in) {
  const Tensor &input = *in[0], &indices = *in[1];
  Tensor result(typeOf(op.getResult()));
  int64_t experts = result.type.getDimSize(op.getExpertDim());
  int64_t capacity = result.type.getDimSize(op.getCapacityDim());
  Expected<Routing> routing = Routing::compute(op, indices, op.getKDim(), experts, capacity);
  if (!routing)
    return routing.takeError();
  Space features = Space::of(input.type, routing->tokens.names);
  SmallVector<int64_t> inputTokens = offsetsOf(input.type, routing->tokens);
  SmallVector<int64_t> inputFeatures = offsetsOf(input.type, features);
  SmallVector<int64_t> resultFeatures = offsetsOf(result.type, features);
  Strides strides = stridesAlong(
      result.type,
      Space().append(op.getExpertDim(), experts).append(op.getCapacityDim(), capacity));
  for (int64_t token = 0; token < routing->numTokens(); ++token) {
    for (int64_t c = 0; c < routing->k; ++c) {
      int64_t choice = token * routing->k + c;
      if (routing->slot[choice] < 0)
        continue;
      int64_t slot = routing->expert[choice] * strides[0] + routing->slot[choice] * strides[1];
      for (auto [from, to] : llvm::zip_equal(inputFeatures, resultFeatures))
        result.data[slot + to] = input.data[inputTokens[token] + from];
    }
  }
  return Results{std::move(result)};
}

/// Counts every choice, before any capacity: the routing without a capacity limit.
Expected<Results> eval::evalOp(mt::ExpertLoadOp op, Operands in) {
  Tensor result(typeOf(op.getResult()));
  int64_t experts = result.type.getDimSize(op.getExpertDim());
  Expected<Routing> routing = Routing::compute(op, *in[0], op.getKDim(), experts,
                                               std::numeric_limits<int64_t>::max());
  if (!routing)
    return routing.takeError();
  for (int64_t expert : routing->expert)
    result.data[expert] += 1;
  return Results{std::move(result)};
}

/// Each token's output: the sum over its accepted choices of weight * expert slot.
Expected<Results> eval::evalOp(mt::CombineOp op, Operands in) {
  const Tensor &input = *in[0], &indices = *in[1], &weights = *in[2];
  Expected<CombineLayout> layout = CombineLayout::compute(op, input, indices, weights);
  if (!layout)
    return layout.takeError();
  Tensor result(typeOf(op.getResult()));
  SmallVector<int64_t> resultTokens = offsetsOf(result.type, layout->routing.tokens);
  SmallVector<int64_t> resultFeatures = offsetsOf(result.type, layout->features);
  const Routing &routing = layout->routing;
  for (int64_t token = 0; token < routing.numTokens(); ++token) {
    for (int64_t c = 0; c < routing.k; ++c) {
      int64_t choice = token * routing.k + c;
      if (routing.slot[choice] < 0)
        continue;
      double weight = weights.data[layout->weightChoices[choice]];
      int64_t slot = layout->slotOffset(choice);
      for (auto [from, to] : llvm::zip_equal(layout->inputFeatures, resultFeatures))
        result.data[resultTokens[token] + to] += weight * input.data[slot + from];
    }
  }
  return Results{std::move(result)};
}

/// d input[slot] += weight * d out[token];  d weight[choice] = d out[token] . input[slot];
/// both zero for dropped choices.
Expected<Results> eval::evalOp(mt::CombineGradOp op, Operands in) {
  const Tensor &input = *in[0], &indices = *in[1], &weights = *in[2], &outGrad = *in[3];
  Expected<CombineLayout> layout = CombineLayout::compute(op, input, indices, weights);
  if (!layout)
    return layout.takeError();
  if (!hasExactDims(outGrad.type, layout->tokenSide()))
    return opError(op, llvm::formatv("result gradient {0} must have the dimensions of "
                                     "mt.combine's result, the tokens and the features",
                                     outGrad.type.dimsToString()));
  Tensor inputGrad(input.type), weightsGrad(weights.type);
  SmallVector<int64_t> gradTokens = offsetsOf(outGrad.type, layout->routing.tokens);
  SmallVector<int64_t> gradFeatures = offsetsOf(outGrad.type, layout->features);
  const Routing &routing = layout->routing;
  for (int64_t token = 0; token < routing.numTokens(); ++token) {
    for (int64_t c = 0; c < routing.k; ++c) {
      int64_t choice = token * routing.k + c;
      if (routing.slot[choice] < 0)
        continue;
      double weight = weights.data[layout->weightChoices[choice]];
      int64_t slot = layout->slotOffset(choice);
      double dot = 0;
      for (auto [from, to] : llvm::zip_equal(layout->inputFeatures, gradFeatures)) {
        double g = outGrad.data[gradTokens[token] + to];
        inputGrad.data[slot + from] += weight * g;
        dot += g * input.data[slot + from];
      }
      weightsGrad.data[layout->weightChoices[choice]] = dot;
    }
  }
  return Results{std::move(inputGrad), std::move(weightsGrad)};
}

//===----------------------------------------------------------------------===//
// Load-balancing loss
//===----------------------------------------------------------------------===//

namespace {

/// The router statistics: probabilities p[t * E + e] = softmax over experts of token t's
/// logits (the operand itself when it holds `probabilities`), f[e] = fraction of the
/// (token, k) choices that picked e, with tokens in the logits' order. Checks what
/// load_balancing_loss_grad's verifier does not.
struct RouterStats {
  int64_t tokens, experts;
  SmallVector<int64_t> logitTokens;
  int64_t expertStride;
  SmallVector<double> p, f;

  template <typename LoadBalancingLossLikeOp>
  static Expected<RouterStats> compute(LoadBalancingLossLikeOp op, const Tensor &logits,
                                       const Tensor &indices) {
    StringRef expertDim = op.getExpertDim(), kDim = op.getKDim();
    if (!logits.type.hasDim(expertDim) || !hasIntegerElements(indices.type) ||
        !indices.type.hasDim(kDim))
      return opError(op, llvm::formatv("logits {0} need the dimension '{1}' and integer "
                                       "indices {2} the dimension '{3}'",
                                       logits.type.dimsToString(), expertDim,
                                       indices.type.dimsToString(), kDim));
    Space tokenSpace = Space::of(logits.type, {expertDim});
    if (!hasExactDims(indices.type, Space(tokenSpace).append(kDim, indices.type.getDimSize(kDim))))
      return opError(op, llvm::formatv("logits {0} and indices {1} must route the same tokens",
                                       logits.type.dimsToString(), indices.type.dimsToString()));
    RouterStats stats;
    stats.tokens = tokenSpace.getNumElements();
    stats.experts = logits.type.getDimSize(expertDim);
    stats.logitTokens = offsetsOf(logits.type, tokenSpace);
    stats.expertStride = stridesAlong(logits.type, Space().append(expertDim, stats.experts))[0];
    stats.p.resize(stats.tokens * stats.experts);
    for (int64_t t = 0; t < stats.tokens; ++t) {
      double *row = &stats.p[t * stats.experts];
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t e = 0; e < stats.experts; ++e)
        max = std::max(max, row[e] = logits.data[stats.logitTokens[t] + e * stats.expertStride]);
      if (op.getProbabilities())
        continue;
      double sum = 0;
      for (int64_t e = 0; e < stats.experts; ++e)
        sum += row[e] = std::exp(row[e] - max);
      for (int64_t e = 0; e < stats.experts; ++e)
        row[e] /= sum;
    }
    stats.f.assign(stats.experts, 0.0);
    for (double index : indices.data) {
      Expected<int64_t> expert = readIndex(op, index, stats.experts, "expert index");
      if (!expert)
        return expert.takeError();
      stats.f[*expert] += 1;
    }
    for (double &count : stats.f)
      count /= static_cast<double>(indices.getNumElements());
    return stats;
  }
};

} // namespace

/// E * sum_e f_e * P_e with P_e the mean over tokens of p[t, e].
Expected<Results> eval::evalOp(mt::LoadBalancingLossOp op, Operands in) {
  Expected<RouterStats> stats = RouterStats::compute(op, *in[0], *in[1]);
  if (!stats)
    return stats.takeError();
  double loss = 0;
  for (int64_t t = 0; t < stats->tokens; ++t)
    for (int64_t e = 0; e < stats->experts; ++e)
      loss += stats->f[e] * stats->p[t * stats->experts + e];
  loss *= static_cast<double>(stats->experts) / static_cast<double>(stats->tokens);
  return Results{Tensor(typeOf(op.getResult()), {loss})};
}

/// f is piecewise constant, so d loss / d logit[t, e] = loss_grad * E / T *
/// p[t, e] * (f_e - sum_e' f_e' p[t, e']), and d loss / d p[t, e] = loss_grad * E / T * f_e
/// when the op took the probabilities.
Expected<Results> eval::evalOp(mt::LoadBalancingLossGradOp op, Operands in) {
  Expected<RouterStats> stats = RouterStats::compute(op, *in[0], *in[1]);
  if (!stats)
    return stats.takeError();
  double factor =
      in[2]->data[0] * static_cast<double>(stats->experts) / static_cast<double>(stats->tokens);
  Tensor result(typeOf(op.getResult()));
  for (int64_t t = 0; t < stats->tokens; ++t) {
    if (op.getProbabilities()) {
      for (int64_t e = 0; e < stats->experts; ++e)
        result.data[stats->logitTokens[t] + e * stats->expertStride] = factor * stats->f[e];
      continue;
    }
    const double *row = &stats->p[t * stats->experts];
    double mean = 0;
    for (int64_t e = 0; e < stats->experts; ++e)
      mean += stats->f[e] * row[e];
    for (int64_t e = 0; e < stats->experts; ++e)
      result.data[stats->logitTokens[t] + e * stats->expertStride] =
          factor * row[e] * (stats->f[e] - mean);
  }
  return Results{std::move(result)};
}

//===----------------------------------------------------------------------===//
// Router z-loss
//===----------------------------------------------------------------------===//

/// Mean over the positions of logsumexp(logits over dim)^2, the log-sum-exp stable.
Expected<Results> eval::evalOp(mt::ZLossOp op, Operands in) {
  const Tensor &logits = *in[0];
  int64_t size = logits.type.getDimSize(op.getDim());
  int64_t stride = stridesAlong(logits.type, Space().append(op.getDim(), size))[0];
  Space positions = Space::of(logits.type, {op.getDim()});
  double total = 0;
  forEachPoint<1>(positions, {stridesAlong(logits.type, positions)},
                  [&](const std::array<int64_t, 1> &at) {
                    double lse = logSumExp(logits, at[0], stride, size);
                    total += lse * lse;
                  });
  return Results{Tensor(typeOf(op.getResult()),
                        {total / static_cast<double>(positions.getNumElements())})};
}
