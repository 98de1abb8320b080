//===- EmbeddingLossOps.cpp - gather, scatter-add and cross-entropy -------===//

#include "compiler/interpreter/OpEval.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

using namespace mlir;
using namespace mtc;
using namespace mtc::interp;
using namespace mtc::interp::eval;

//===----------------------------------------------------------------------===//
// Embedding lookup and its adjoint
//===----------------------------------------------------------------------===//

/// Index n of `indices` (row-major in its own order) selects the table row whose elements
/// become result elements [n * rowSize, (n + 1) * rowSize): the result has the indices'
/// dimensions, then the table's others.
Expected<Results> eval::evalOp(mt::GatherOp op, Operands in) {
  const Tensor &table = *in[0], &indices = *in[1];
  TableRows rows = TableRows::of(table.type, op.getDim());
  Tensor result(typeOf(op.getResult()));
  double *out = result.data.data();
  for (double index : indices.data) {
    Expected<int64_t> row = readIndex(op, index, rows.numRows, "index");
    if (!row)
      return row.takeError();
    for (int64_t offset : rows.rowOffsets)
      *out++ = table.data[*row * rows.rowStride + offset];
  }
  return Results{std::move(result)};
}

/// The transpose of gather: each row of `grad` is added to the table row its index selects.
Expected<Results> eval::evalOp(mt::EmbeddingGradOp op, Operands in) {
  const Tensor &indices = *in[0], &grad = *in[1];
  Tensor result(typeOf(op.getResult()));
  TableRows rows = TableRows::of(result.type, op.getDim());
  const double *gradRow = grad.data.data();
  for (double index : indices.data) {
    Expected<int64_t> row = readIndex(op, index, rows.numRows, "index");
    if (!row)
      return row.takeError();
    for (int64_t offset : rows.rowOffsets)
      result.data[*row * rows.rowStride + offset] += *gradRow++;
  }
  return Results{std::move(result)};
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

/// Calls fn(base, stride, label, position) for each label position, `position` its row-major
/// index in the labels (and in a mask, which has the labels' dimensions): the logits of that
/// position are base + c * stride for c < classes, and `label` has been checked to be a class.
template <typename Fn>
static llvm::Error forEachPosition(Operation *op, const Tensor &logits, const Tensor &labels,
                                   StringRef dim, Fn &&fn) {
  Space positions = Space::of(labels.type);
  int64_t classes = logits.type.getDimSize(dim);
  int64_t stride = stridesAlong(logits.type, Space().append(dim, classes))[0];
  llvm::Error error = llvm::Error::success();
  int64_t next = 0;
  forEachPoint<1>(positions, {stridesAlong(logits.type, positions)},
                  [&](const std::array<int64_t, 1> &at) {
                    int64_t position = next++;
                    if (error)
                      return;
                    Expected<int64_t> label =
                        readIndex(op, labels.data[position], classes, "label");
                    if (!label) {
                      error = label.takeError();
                      return;
                    }
                    fn(at[0], stride, *label, position);
                  });
  return error;
}

double eval::logSumExp(const Tensor &tensor, int64_t base, int64_t stride, int64_t size) {
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < size; ++c)
    max = std::max(max, tensor.data[base + c * stride]);
  double sum = 0;
  for (int64_t c = 0; c < size; ++c)
    sum += std::exp(tensor.data[base + c * stride] - max);
  return max + std::log(sum);
}

/// The weight of each label position (a mask's values, else 1) and their sum, at least 1
/// (mt.cross_entropy's mask).
static std::pair<std::function<double(int64_t)>, double> positionWeights(const Tensor &labels,
                                                                         const Tensor *mask) {
  if (!mask)
    return {[](int64_t) { return 1.0; }, static_cast<double>(labels.getNumElements())};
  double sum = 0;
  for (double weight : mask->data)
    sum += weight;
  return {[mask](int64_t position) { return mask->data[position]; }, std::max(sum, 1.0)};
}

/// The mean over positions of logsumexp(logits) - logits[label], weighted by the mask.
Expected<Results> eval::evalOp(mt::CrossEntropyOp op, Operands in) {
  const Tensor &logits = *in[0], &labels = *in[1];
  auto [weight, weightSum] = positionWeights(labels, op.getMask() ? in[2] : nullptr);
  int64_t classes = logits.type.getDimSize(op.getDim());
  double total = 0;
  if (llvm::Error error = forEachPosition(
          op, logits, labels, op.getDim(),
          [&](int64_t base, int64_t stride, int64_t label, int64_t position) {
            total += weight(position) * (logSumExp(logits, base, stride, classes) -
                                         logits.data[base + label * stride]);
          }))
    return std::move(error);
  return Results{Tensor(typeOf(op.getResult()), {total / weightSum})};
}

/// (softmax(logits) - onehot(label)) * weight * loss_grad / (sum of the weights).
Expected<Results> eval::evalOp(mt::CrossEntropyGradOp op, Operands in) {
  const Tensor &logits = *in[0], &labels = *in[1];
  double lossGrad = in[2]->data[0];
  auto [weight, weightSum] = positionWeights(labels, op.getMask() ? in[3] : nullptr);
  int64_t classes = logits.type.getDimSize(op.getDim());
  double factor = lossGrad / weightSum;
  Tensor result(typeOf(op.getResult()));
  if (llvm::Error error = forEachPosition(
          op, logits, labels, op.getDim(),
          [&](int64_t base, int64_t stride, int64_t label, int64_t position) {
            double lse = logSumExp(logits, base, stride, classes);
            for (int64_t c = 0; c < classes; ++c) {
              int64_t at = base + c * stride;
              result.data[at] =
                  (std::exp(logits.data[at] - lse) - (c == label)) * weight(position) * factor;
            }
          }))
    return std::move(error);
  return Results{std::move(result)};
}
