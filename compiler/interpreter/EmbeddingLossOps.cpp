//===- EmbeddingLossOps.cpp - gather, scatter-add and cross-entropy -------===//

#include "compiler/interpreter/OpEval.h"

#include <cmath>
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

/// Calls fn(base, stride, label) for each label position: the logits of that position are
/// base + c * stride for c < classes, and `label` has been checked to be a class.
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
                    double value = labels.data[next++];
                    if (error)
                      return;
                    Expected<int64_t> label = readIndex(op, value, classes, "label");
                    if (!label) {
                      error = label.takeError();
                      return;
                    }
                    fn(at[0], stride, *label);
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

/// mean over positions of logsumexp(logits) - logits[label].
Expected<Results> eval::evalOp(mt::CrossEntropyOp op, Operands in) {
  const Tensor &logits = *in[0], &labels = *in[1];
  int64_t classes = logits.type.getDimSize(op.getDim());
  double total = 0;
  if (llvm::Error error = forEachPosition(
          op, logits, labels, op.getDim(), [&](int64_t base, int64_t stride, int64_t label) {
            total += logSumExp(logits, base, stride, classes) - logits.data[base + label * stride];
          }))
    return std::move(error);
  double positions = static_cast<double>(labels.getNumElements());
  return Results{Tensor(typeOf(op.getResult()), {total / positions})};
}

/// (softmax(logits) - onehot(label)) * loss_grad / positions.
Expected<Results> eval::evalOp(mt::CrossEntropyGradOp op, Operands in) {
  const Tensor &logits = *in[0], &labels = *in[1];
  double lossGrad = in[2]->data[0];
  int64_t classes = logits.type.getDimSize(op.getDim());
  double factor = lossGrad / static_cast<double>(labels.getNumElements());
  Tensor result(typeOf(op.getResult()));
  if (llvm::Error error = forEachPosition(
          op, logits, labels, op.getDim(), [&](int64_t base, int64_t stride, int64_t label) {
            double lse = logSumExp(logits, base, stride, classes);
            for (int64_t c = 0; c < classes; ++c) {
              int64_t at = base + c * stride;
              result.data[at] = (std::exp(logits.data[at] - lse) - (c == label)) * factor;
            }
          }))
    return std::move(error);
  return Results{std::move(result)};
}
