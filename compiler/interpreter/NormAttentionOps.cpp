//===- NormAttentionOps.cpp - softmax, norms, rope and attention ----------===//

#include "compiler/interpreter/OpEval.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mtc;
using namespace mtc::interp;
using namespace mtc::interp::eval;

namespace {

/// The elements along one dimension at a time: lane elements are base + i * stride.
struct Lanes {
  Space others;
  int64_t size;
  int64_t stride;

  Lanes(mt::NamedTensorType type, StringRef dim)
      : others(Space::of(type, {dim})), size(type.getDimSize(dim)),
        stride(stridesAlong(type, Space().append(dim, size))[0]) {}

  /// Calls fn(base) for each lane.
  template <typename Fn> void forEach(mt::NamedTensorType type, Fn &&fn) const {
    forEachPoint<1>(others, {stridesAlong(type, others)},
                    [&](const std::array<int64_t, 1> &at) { fn(at[0]); });
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// Softmax and norms
//===----------------------------------------------------------------------===//

/// Subtracts the lane maximum before exponentiating.
Expected<Results> eval::evalOp(mt::SoftmaxOp op, Operands in) {
  const Tensor &input = *in[0];
  Tensor result(input.type);
  Lanes lanes(input.type, op.getDim());
  lanes.forEach(input.type, [&](int64_t base) {
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < lanes.size; ++i)
      max = std::max(max, input.data[base + i * lanes.stride]);
    double sum = 0;
    for (int64_t i = 0; i < lanes.size; ++i) {
      double &out = result.data[base + i * lanes.stride];
      out = std::exp(input.data[base + i * lanes.stride] - max);
      sum += out;
    }
    for (int64_t i = 0; i < lanes.size; ++i)
      result.data[base + i * lanes.stride] /= sum;
  });
  return Results{std::move(result)};
}

/// (x - mean) / sqrt(var + eps) * scale (+ bias), with the biased variance.
Expected<Results> eval::evalOp(mt::LayerNormOp op, Operands in) {
  const Tensor &input = *in[0], &scale = *in[1];
  const Tensor *bias = op.getBias() ? in[2] : nullptr;
  double eps = op.getEpsilon().convertToDouble();
  Tensor result(input.type);
  Lanes lanes(input.type, op.getDim());
  double n = static_cast<double>(lanes.size);
  lanes.forEach(input.type, [&](int64_t base) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < lanes.size; ++i)
      mean += input.data[base + i * lanes.stride];
    mean /= n;
    for (int64_t i = 0; i < lanes.size; ++i) {
      double centred = input.data[base + i * lanes.stride] - mean;
      var += centred * centred;
    }
    var /= n;
    double inverse = 1 / std::sqrt(var + eps);
    for (int64_t i = 0; i < lanes.size; ++i) {
      int64_t at = base + i * lanes.stride;
      result.data[at] =
          (input.data[at] - mean) * inverse * scale.data[i] + (bias ? bias->data[i] : 0.0);
    }
  });
  return Results{std::move(result)};
}

/// x / sqrt(mean(x^2) + eps) * scale.
Expected<Results> eval::evalOp(mt::RMSNormOp op, Operands in) {
  const Tensor &input = *in[0], &scale = *in[1];
  double eps = op.getEpsilon().convertToDouble();
  Tensor result(input.type);
  Lanes lanes(input.type, op.getDim());
  lanes.forEach(input.type, [&](int64_t base) {
    double squares = 0;
    for (int64_t i = 0; i < lanes.size; ++i) {
      double x = input.data[base + i * lanes.stride];
      squares += x * x;
    }
    double inverse = 1 / std::sqrt(squares / static_cast<double>(lanes.size) + eps);
    for (int64_t i = 0; i < lanes.size; ++i) {
      int64_t at = base + i * lanes.stride;
      result.data[at] = input.data[at] * inverse * scale.data[i];
    }
  });
  return Results{std::move(result)};
}

//===----------------------------------------------------------------------===//
// Rotary position embedding
//===----------------------------------------------------------------------===//

/// Rotates (x[2i], x[2i+1]) by position * theta^(-2i / size), negated with `inverse`.
Expected<Results> eval::evalOp(mt::RopeOp op, Operands in) {
  const Tensor &input = *in[0];
  Tensor result(input.type);
  Lanes lanes(input.type, op.getDim());
  double theta = op.getTheta().convertToDouble();
  double sign = op.getInverse() ? -1.0 : 1.0;
  // The second offset counts positions: the index along the position dimension, or the
  // offset of the element's id in the position ids (packed documents).
  const Tensor *ids = op.getPositions() ? in[1] : nullptr;
  forEachPoint<2>(
      lanes.others,
      {stridesAlong(input.type, lanes.others),
       ids ? stridesAlong(ids->type, lanes.others) : counterAlong(op.getPosition(), lanes.others)},
      [&](const std::array<int64_t, 2> &at) {
        int64_t base = at[0];
        double position = ids ? ids->data[at[1]] : static_cast<double>(at[1]);
        for (int64_t pair = 0; pair < lanes.size / 2; ++pair) {
          double frequency =
              std::pow(theta, -2.0 * static_cast<double>(pair) / static_cast<double>(lanes.size));
          double angle = sign * position * frequency;
          double c = std::cos(angle), s = std::sin(angle);
          int64_t even = base + 2 * pair * lanes.stride, odd = even + lanes.stride;
          double x0 = input.data[even], x1 = input.data[odd];
          result.data[even] = x0 * c - x1 * s;
          result.data[odd] = x0 * s + x1 * c;
        }
      });
  return Results{std::move(result)};
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace {

/// Where attention finds its dimensions in the query (and output) and in the key and value
/// (which share one type): the batch dimensions are the query's others, in its order.
struct AttentionLayout {
  Space batch;
  Strides queryBatch, kvBatch;
  int64_t querySeq, kvSeq, heads, kvHeads, headDim;
  int64_t qSeqStride, qHeadStride, qDimStride;
  int64_t kvSeqStride, kvHeadStride, kvDimStride;
  bool causal;
  double scale;

  template <typename AttentionLikeOp>
  AttentionLayout(AttentionLikeOp op, mt::NamedTensorType query, mt::NamedTensorType kv)
      : batch(Space::of(query, {op.getSeqDim(), op.getHeadsDim(), op.getHeadDim()})),
        queryBatch(stridesAlong(query, batch)), kvBatch(stridesAlong(kv, batch)),
        querySeq(query.getDimSize(op.getSeqDim())), kvSeq(kv.getDimSize(op.getSeqDim())),
        heads(query.getDimSize(op.getHeadsDim())), kvHeads(kv.getDimSize(op.getKvHeadsDim())),
        headDim(query.getDimSize(op.getHeadDim())), causal(op.getCausal()),
        scale(op.getScale().convertToDouble()) {
    Space dims = Space()
                     .append(op.getSeqDim(), 1)
                     .append(op.getHeadsDim(), 1)
                     .append(op.getKvHeadsDim(), 1)
                     .append(op.getHeadDim(), 1);
    Strides q = stridesAlong(query, dims), k = stridesAlong(kv, dims);
    qSeqStride = q[0];
    qHeadStride = q[1];
    qDimStride = q[3];
    kvSeqStride = k[0];
    kvHeadStride = k[2];
    kvDimStride = k[3];
  }

  /// Query head h reads key/value head h / (heads / kv_heads).
  int64_t kvHeadOf(int64_t head) const { return head / (heads / kvHeads); }

  /// Offsets of query position i of head h and of key position j of kv head g, from the
  /// batch offsets `qBase` and `kvBase`.
  int64_t queryAt(int64_t qBase, int64_t h, int64_t i) const {
    return qBase + h * qHeadStride + i * qSeqStride;
  }
  int64_t kvAt(int64_t kvBase, int64_t g, int64_t j) const {
    return kvBase + g * kvHeadStride + j * kvSeqStride;
  }

  /// Calls fn(qBase, kvBase, h) for every batch point and query head.
  template <typename Fn> void forEachHead(Fn &&fn) const {
    forEachPoint<2>(batch, {queryBatch, kvBatch}, [&](const std::array<int64_t, 2> &at) {
      for (int64_t h = 0; h < heads; ++h)
        fn(at[0], at[1], h);
    });
  }

  /// The first key query position i sees: with document `positions` (mt.attention's, or
  /// null) the first of its document, i - positions[i], read at the coordinates of the
  /// query element at offset `queryOffset`; else 0.
  static int64_t firstVisible(const Tensor *positions, const Tensor &query, int64_t queryOffset,
                              int64_t i) {
    if (!positions)
      return 0;
    SmallVector<NamedIndex> at;
    for (auto [dim, index] : llvm::zip(query.type.getDims(), query.coordsOf(queryOffset)))
      if (positions->type.hasDim(dim.name.getValue()))
        at.push_back({dim.name.getValue(), index});
    return std::max<int64_t>(0, i - static_cast<int64_t>(positions->at(at)));
  }

  /// The attention probabilities p[j] of query `q` (offset of its element 0) against the
  /// keys starting at `k`: softmax over j of scale * q.k_j, with keys after query position
  /// i masked out (probability 0) when causal and those before `first` (firstVisible).
  /// Returns the log-sum-exp of the scores.
  double probabilities(const double *q, const double *k, int64_t i, int64_t first,
                       SmallVectorImpl<double> &p) const {
    p.assign(kvSeq, 0.0);
    int64_t visible = causal ? std::min(i + 1, kvSeq) : kvSeq;
    first = std::min(first, visible - 1);
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t j = first; j < visible; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < headDim; ++d)
        dot += q[d * qDimStride] * k[j * kvSeqStride + d * kvDimStride];
      p[j] = scale * dot;
      max = std::max(max, p[j]);
    }
    double sum = 0;
    for (int64_t j = first; j < visible; ++j)
      sum += p[j] = std::exp(p[j] - max);
    for (int64_t j = first; j < visible; ++j)
      p[j] /= sum;
    return max + std::log(sum);
  }
};

} // namespace

Expected<Results> eval::evalOp(mt::AttentionOp op, Operands in) {
  const Tensor &query = *in[0], &key = *in[1], &value = *in[2];
  const Tensor *positions = op.getPositions() ? in[3] : nullptr;
  AttentionLayout layout(op, query.type, key.type);
  Tensor result(query.type);
  // The log-sum-exp of every query row (save_lse).
  std::optional<Tensor> logSumExp;
  if (op.getLse())
    logSumExp.emplace(cast<mt::NamedTensorType>(op.getLse().getType()));
  // The log-sum-exp's element of the query row through `queryOffset`: the same
  // coordinates without head_dim.
  auto rowOffset = [&](int64_t queryOffset) {
    SmallVector<NamedIndex> row;
    for (auto [dim, index] : llvm::zip(query.type.getDims(), query.coordsOf(queryOffset)))
      if (dim.name != op.getHeadDim())
        row.push_back({dim.name.getValue(), index});
    return *logSumExp->offsetOf(row);
  };
  SmallVector<double> p;
  layout.forEachHead([&](int64_t qBase, int64_t kvBase, int64_t h) {
    int64_t kvStart = layout.kvAt(kvBase, layout.kvHeadOf(h), 0);
    for (int64_t i = 0; i < layout.querySeq; ++i) {
      int64_t qStart = layout.queryAt(qBase, h, i);
      double lse = layout.probabilities(
          &query.data[qStart], &key.data[kvStart], i,
          AttentionLayout::firstVisible(positions, query, qStart, i), p);
      if (logSumExp)
        logSumExp->data[rowOffset(qStart)] = lse;
      for (int64_t d = 0; d < layout.headDim; ++d) {
        double sum = 0;
        for (int64_t j = 0; j < layout.kvSeq; ++j)
          sum += p[j] * value.data[kvStart + j * layout.kvSeqStride + d * layout.kvDimStride];
        result.data[qStart + d * layout.qDimStride] = sum;
      }
    }
  });
  if (logSumExp)
    return Results{std::move(result), std::move(*logSumExp)};
  return Results{std::move(result)};
}

/// With p = softmax(s), s_j = scale q.k_j, o = sum_j p_j v_j and the output gradient do:
///   dv_j += p_j do,   dp_j = do.v_j,   ds_j = p_j (dp_j - sum_l p_l dp_l),
///   dq = scale sum_j ds_j k_j,   dk_j += scale ds_j q.
/// Key and value gradients accumulate over the query heads sharing a key/value head.
Expected<Results> eval::evalOp(mt::AttentionGradOp op, Operands in) {
  const Tensor &query = *in[0], &key = *in[1], &value = *in[2], &outGrad = *in[3];
  const Tensor *positions = op.getPositions() ? in.back() : nullptr;
  AttentionLayout layout(op, query.type, key.type);
  Tensor queryGrad(query.type), keyGrad(key.type), valueGrad(value.type);
  SmallVector<double> p, dp;
  layout.forEachHead([&](int64_t qBase, int64_t kvBase, int64_t h) {
    int64_t kvStart = layout.kvAt(kvBase, layout.kvHeadOf(h), 0);
    auto kv = [&](int64_t j, int64_t d) {
      return kvStart + j * layout.kvSeqStride + d * layout.kvDimStride;
    };
    for (int64_t i = 0; i < layout.querySeq; ++i) {
      int64_t qStart = layout.queryAt(qBase, h, i);
      auto q = [&](int64_t d) { return qStart + d * layout.qDimStride; };
      layout.probabilities(&query.data[qStart], &key.data[kvStart], i,
                           AttentionLayout::firstVisible(positions, query, qStart, i), p);
      dp.assign(layout.kvSeq, 0.0);
      double weighted = 0;
      for (int64_t j = 0; j < layout.kvSeq; ++j) {
        if (p[j] == 0)
          continue;
        for (int64_t d = 0; d < layout.headDim; ++d) {
          dp[j] += outGrad.data[q(d)] * value.data[kv(j, d)];
          valueGrad.data[kv(j, d)] += p[j] * outGrad.data[q(d)];
        }
        weighted += p[j] * dp[j];
      }
      for (int64_t j = 0; j < layout.kvSeq; ++j) {
        double ds = p[j] * (dp[j] - weighted) * layout.scale;
        if (ds == 0)
          continue;
        for (int64_t d = 0; d < layout.headDim; ++d) {
          queryGrad.data[q(d)] += ds * key.data[kv(j, d)];
          keyGrad.data[kv(j, d)] += ds * query.data[q(d)];
        }
      }
    }
  });
  return Results{std::move(queryGrad), std::move(keyGrad), std::move(valueGrad)};
}
