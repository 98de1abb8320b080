//===- MTFolders.cpp - folders of the mt operations -----------------------===//
//
// The identities `-canonicalize` removes: reorderings and renamings that change nothing,
// inverse split/merge pairs, reductions over no dimension, casts to the same type, and
// arithmetic with an `mt.constant` 0 or 1. Each folder returns an existing value (or
// updates its op in place); none creates constants, so the dialect needs no constant
// materializer.
//
//===----------------------------------------------------------------------===//

#include "dialects/mt/IR/MTOps.h"

using namespace mlir;
using namespace mtc::mt;

/// Whether `value` is an `mt.constant` equal to `expected` (a scalar, so it broadcasts).
static bool isConstant(Value value, double expected) {
  auto constant = value.getDefiningOp<ConstantOp>();
  return constant && constant.getValue().convertToDouble() == expected;
}

/// `x op c` folds to `x` where `c` is the identity constant of `op` on the right (and
/// also on the left for commutative ops) and `x` already has the result type.
template <typename BinaryOp>
static OpFoldResult foldIdentity(BinaryOp op, double identity, bool commutative) {
  Type type = op.getResult().getType();
  if (isConstant(op.getRhs(), identity) && op.getLhs().getType() == type)
    return op.getLhs();
  if (commutative && isConstant(op.getLhs(), identity) && op.getRhs().getType() == type)
    return op.getRhs();
  return {};
}

// Adding +0 changes -0 to +0 (the exact identity is -0); the graph never tells them apart.
OpFoldResult AddOp::fold(FoldAdaptor) { return foldIdentity(*this, 0.0, /*commutative=*/true); }
OpFoldResult SubOp::fold(FoldAdaptor) { return foldIdentity(*this, 0.0, /*commutative=*/false); }
OpFoldResult MulOp::fold(FoldAdaptor) { return foldIdentity(*this, 1.0, /*commutative=*/true); }
OpFoldResult DivOp::fold(FoldAdaptor) { return foldIdentity(*this, 1.0, /*commutative=*/false); }

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  return {};
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  // The outer order is all that counts: read the inner transpose's operand directly.
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    getInputMutable().assign(inner.getInput());
    if (getInput().getType() == getResult().getType())
      return getInput();
    return getResult();
  }
  if (getInput().getType() == getResult().getType())
    return getInput();
  return {};
}

template <typename ReduceOp> static OpFoldResult foldEmptyReduce(ReduceOp op) {
  if (op.getOver().empty())
    return op.getInput();
  return {};
}

OpFoldResult ReduceSumOp::fold(FoldAdaptor) { return foldEmptyReduce(*this); }
OpFoldResult ReduceMeanOp::fold(FoldAdaptor) { return foldEmptyReduce(*this); }
OpFoldResult ReduceMaxOp::fold(FoldAdaptor) { return foldEmptyReduce(*this); }

OpFoldResult RenameOp::fold(FoldAdaptor) {
  if (getDim() == getTo())
    return getInput();
  return {};
}

OpFoldResult SplitOp::fold(FoldAdaptor) {
  // split(merge(x, dims into d), d into dims) is x when the merge put `d` where the split
  // takes it apart again, i.e. when the types agree.
  auto merge = getInput().getDefiningOp<MergeOp>();
  if (merge && merge.getInto() == getDim() && merge.getDims() == getInto() &&
      merge.getInput().getType() == getResult().getType())
    return merge.getInput();
  return {};
}

OpFoldResult MergeOp::fold(FoldAdaptor) {
  // merge(split(x, d into dims), dims into d) is x when the split dimensions are still
  // together in their order, i.e. when the types agree.
  auto split = getInput().getDefiningOp<SplitOp>();
  if (split && split.getDim() == getInto() && split.getInto() == getDims() &&
      split.getInput().getType() == getResult().getType())
    return split.getInput();
  return {};
}
