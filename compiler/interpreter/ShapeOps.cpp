//===- ShapeOps.cpp - positions, layouts, contractions and reductions -----===//

#include "compiler/interpreter/OpEval.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mtc;
using namespace mtc::interp;
using namespace mtc::interp::eval;

static SmallVector<StringRef> namesOf(ArrayAttr dims) {
  return llvm::to_vector(
      llvm::map_range(dims.getAsRange<StringAttr>(), [](StringAttr s) { return s.getValue(); }));
}

/// The result read element by element from `input` along `space`, a row-major walk of the
/// result's elements in which each point names dimensions of the input (or dimensions the
/// input lacks, along which it is repeated).
static Results readAlong(Operation *op, const Tensor &input, const Space &space) {
  Tensor result(typeOf(op->getResult(0)));
  double *out = result.data.data();
  forEachPoint<1>(space, {stridesAlong(input.type, space)},
                  [&](const std::array<int64_t, 1> &at) { *out++ = input.data[at[0]]; });
  return Results{std::move(result)};
}

//===----------------------------------------------------------------------===//
// Positions
//===----------------------------------------------------------------------===//

/// Element i of the one dimension is i.
Expected<Results> eval::evalOp(mt::IotaOp op, Operands) {
  Tensor result(typeOf(op.getResult()));
  for (size_t i = 0; i < result.data.size(); ++i)
    result.data[i] = static_cast<double>(i);
  return Results{std::move(result)};
}

//===----------------------------------------------------------------------===//
// Layouts
//===----------------------------------------------------------------------===//

Expected<Results> eval::evalOp(mt::TransposeOp op, Operands in) {
  return readAlong(op, *in[0], Space::of(typeOf(op.getResult())));
}

Expected<Results> eval::evalOp(mt::BroadcastOp op, Operands in) {
  return readAlong(op, *in[0], Space::of(typeOf(op.getResult())));
}

/// The `into` dimensions take the place of `dim` and split it row-major, so the elements
/// keep their order: only the type changes.
Expected<Results> eval::evalOp(mt::SplitOp op, Operands in) {
  return Results{Tensor(typeOf(op.getResult()), in[0]->data)};
}

Expected<Results> eval::evalOp(mt::RenameOp op, Operands in) {
  return Results{Tensor(typeOf(op.getResult()), in[0]->data)};
}

/// The result's elements in order are those of the result's dimensions with `into`
/// expanded back into the merged dimensions (row-major in the listed order), which are
/// dimensions of the input.
Expected<Results> eval::evalOp(mt::MergeOp op, Operands in) {
  mt::NamedTensorType resultType = typeOf(op.getResult());
  mt::NamedTensorType inputType = in[0]->type;
  Space expanded;
  for (const mt::NamedDim &dim : resultType.getDims()) {
    if (dim.name != op.getIntoAttr()) {
      expanded.append(dim.name.getValue(), dim.size);
      continue;
    }
    for (StringRef merged : namesOf(op.getDims()))
      expanded.append(merged, inputType.getDimSize(merged));
  }
  return readAlong(op, *in[0], expanded);
}

//===----------------------------------------------------------------------===//
// Contraction
//===----------------------------------------------------------------------===//

/// Walks the result's dimensions then the contracted ones, so each result element
/// accumulates its products in one run of the innermost loops.
Expected<Results> eval::evalOp(mt::ContractOp op, Operands in) {
  const Tensor &lhs = *in[0], &rhs = *in[1];
  Tensor result(typeOf(op.getResult()));
  Space space = Space::of(result.type);
  for (StringRef name : namesOf(op.getOver()))
    space.append(name, lhs.type.getDimSize(name));
  forEachPoint<3>(space,
                  {stridesAlong(lhs.type, space), stridesAlong(rhs.type, space),
                   stridesAlong(result.type, space)},
                  [&](const std::array<int64_t, 3> &at) {
                    result.data[at[2]] += lhs.data[at[0]] * rhs.data[at[1]];
                  });
  return Results{std::move(result)};
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Folds every input element into the result element it reduces to, starting from `init`.
template <typename Fn>
static Results reduce(Operation *op, const Tensor &input, double init, Fn fn) {
  mt::NamedTensorType resultType = typeOf(op->getResult(0));
  Tensor result(resultType, std::vector<double>(resultType.getNumElements(), init));
  Space space = Space::of(input.type);
  forEachPoint<2>(space, {stridesAlong(input.type, space), stridesAlong(resultType, space)},
                  [&](const std::array<int64_t, 2> &at) {
                    double &acc = result.data[at[1]];
                    acc = fn(acc, input.data[at[0]]);
                  });
  return Results{std::move(result)};
}

Expected<Results> eval::evalOp(mt::ReduceSumOp op, Operands in) {
  return reduce(op, *in[0], 0.0, [](double acc, double x) { return acc + x; });
}

Expected<Results> eval::evalOp(mt::ReduceMeanOp op, Operands in) {
  Results results = reduce(op, *in[0], 0.0, [](double acc, double x) { return acc + x; });
  double count = static_cast<double>(in[0]->getNumElements()) /
                 static_cast<double>(results[0].getNumElements());
  for (double &value : results[0].data)
    value /= count;
  return results;
}

Expected<Results> eval::evalOp(mt::ReduceMaxOp op, Operands in) {
  return reduce(op, *in[0], -std::numeric_limits<double>::infinity(),
                [](double acc, double x) { return x > acc || std::isnan(x) ? x : acc; });
}
