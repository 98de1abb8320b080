//===- MTPOps.cpp - mtp dialect operations --------------------------------===//
//
// Each collective changes one fact of its operand's layout (see the dialect description);
// the verifiers build the layout the result must have and compare.
//
//===----------------------------------------------------------------------===//

#include "dialects/mtp/IR/MTPOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mtc::mtp;

/// The `max` of `reduction = max` (written only when not the default sum).
static ParseResult parseReduction(OpAsmParser &parser, ReductionAttr &reduction) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef name;
  if (parser.parseKeyword(&name))
    return failure();
  std::optional<Reduction> kind = symbolizeReduction(name);
  if (!kind)
    return parser.emitError(loc) << "unknown reduction '" << name
                                 << "' (expected sum, max or min)";
  reduction = ReductionAttr::get(parser.getContext(), *kind);
  return success();
}

static void printReduction(OpAsmPrinter &printer, Operation *, ReductionAttr reduction) {
  printer << stringifyReduction(reduction.getValue());
}

#include "dialects/mtp/IR/MTPInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "dialects/mtp/IR/MTPOps.cpp.inc"

SmallVector<StringRef> mtc::mtp::axisNames(StringAttr over) { return {over.getValue()}; }

SmallVector<StringRef> mtc::mtp::axisNames(ArrayAttr over) {
  return llvm::to_vector(
      llvm::map_range(over.getAsRange<StringAttr>(), [](StringAttr a) { return a.getValue(); }));
}

LogicalResult mtc::mtp::detail::verifyCollective(Operation *op) {
  auto collective = cast<CollectiveOpInterface>(op);
  MeshAttr mesh = collective.getLaidOutType().getMesh();
  for (StringRef axis : collective.getMeshAxes())
    if (!mesh.getAxisSize(axis))
      return op->emitOpError() << "the mesh has no axis '" << axis << "'";
  return success();
}

namespace {

/// The result must be `expected` (the operand's type with the op's one change).
LogicalResult checkResult(Operation *op, ShardedTensorType expected, Type result) {
  if (result != expected)
    return op->emitOpError() << "result type must be " << expected << ", found " << result;
  return success();
}

SmallVector<StringRef> without(ArrayRef<StringRef> axes, StringRef axis) {
  SmallVector<StringRef> rest;
  for (StringRef a : axes)
    if (a != axis)
      rest.push_back(a);
  return rest;
}

/// `dim` must be a dimension of `type`.
LogicalResult checkDim(Operation *op, ShardedTensorType type, StringRef dim) {
  if (!type.getGlobal().hasDim(dim))
    return op->emitOpError() << "the tensor " << type.getGlobal().dimsToString()
                             << " has no dimension '" << dim << "'";
  return success();
}

/// `dim` of `type` must have `axis` as its innermost split axis.
LogicalResult checkSplitLast(Operation *op, ShardedTensorType type, StringRef dim,
                             StringRef axis) {
  SmallVector<StringRef> axes = type.getSplitAxes(dim);
  if (axes.empty() || axes.back() != axis)
    return op->emitOpError() << "dimension '" << dim << "' is not split over '" << axis
                             << "' (innermost) in the operand";
  return success();
}

/// `dim` of `type` must divide into the product of `axes`' sizes (the split a collective
/// creates; the type verifier checks the splits a type already has).
LogicalResult checkDivisible(Operation *op, ShardedTensorType type, StringRef dim,
                             ArrayRef<StringRef> axes) {
  int64_t parts = 1;
  for (StringRef a : axes)
    parts *= *type.getMesh().getAxisSize(a);
  int64_t size = type.getGlobal().getDimSize(dim);
  if (size % parts != 0)
    return op->emitOpError() << "dimension '" << dim << "' of size " << size
                             << " cannot be split into " << parts << " equal parts";
  return success();
}

LogicalResult checkPointToPoint(Operation *op, ShardedTensorType type, StringRef axis,
                                int64_t shift) {
  int64_t size = *type.getMesh().getAxisSize(axis);
  if (shift == 0 || shift >= size || -shift >= size)
    return op->emitOpError() << "shift " << shift << " is not a step to another rank along '"
                             << axis << "' of size " << size;
  return success();
}

} // namespace

LogicalResult AllReduceOp::verify() {
  auto type = cast<ShardedTensorType>(getInput().getType());
  SmallVector<StringRef> partial = type.getPartialAxes();
  for (Attribute attr : getOver()) {
    StringRef axis = cast<StringAttr>(attr).getValue();
    if (!type.isPartialOver(axis))
      return emitOpError() << "the operand is not partial over '" << axis
                           << "': there is nothing to sum";
    partial = without(partial, axis);
  }
  if (getOver().empty())
    return emitOpError() << "needs at least one axis";
  return checkResult(*this, type.withPartial(partial), getResult().getType());
}

LogicalResult ReduceScatterOp::verify() {
  auto type = cast<ShardedTensorType>(getInput().getType());
  StringRef axis = getOver(), dim = getAlong();
  if (failed(checkDim(*this, type, dim)))
    return failure();
  if (!type.isPartialOver(axis))
    return emitOpError() << "the operand is not partial over '" << axis << "'";
  SmallVector<StringRef> axes = type.getSplitAxes(dim);
  axes.push_back(axis);
  if (failed(checkDivisible(*this, type, dim, axes)))
    return failure();
  return checkResult(*this, type.withPartial(without(type.getPartialAxes(), axis)).withSplit(dim, axes),
                     getResult().getType());
}

LogicalResult AllGatherOp::verify() {
  auto type = cast<ShardedTensorType>(getInput().getType());
  StringRef axis = getOver(), dim = getAlong();
  if (failed(checkDim(*this, type, dim)) ||
      failed(checkSplitLast(*this, type, dim, axis)))
    return failure();
  SmallVector<StringRef> axes = type.getSplitAxes(dim);
  axes.pop_back();
  return checkResult(*this, type.withSplit(dim, axes), getResult().getType());
}

LogicalResult AllSliceOp::verify() {
  auto type = cast<ShardedTensorType>(getInput().getType());
  StringRef axis = getOver(), dim = getAlong();
  if (failed(checkDim(*this, type, dim)))
    return failure();
  if (type.isPartialOver(axis))
    return emitOpError() << "the operand is partial over '" << axis
                         << "': sum it before slicing";
  for (NamedAttribute entry : type.getSplit())
    if (llvm::is_contained(type.getSplitAxes(entry.getName()), axis))
      return emitOpError() << "'" << axis << "' already splits dimension '"
                           << entry.getName().getValue() << "'";
  SmallVector<StringRef> axes = type.getSplitAxes(dim);
  axes.push_back(axis);
  if (failed(checkDivisible(*this, type, dim, axes)))
    return failure();
  return checkResult(*this, type.withSplit(dim, axes), getResult().getType());
}

LogicalResult ToPartialOp::verify() {
  auto type = cast<ShardedTensorType>(getInput().getType());
  StringRef axis = getOver();
  if (type.isPartialOver(axis))
    return emitOpError() << "the operand is already partial over '" << axis << "'";
  for (NamedAttribute entry : type.getSplit())
    if (llvm::is_contained(type.getSplitAxes(entry.getName()), axis))
      return emitOpError() << "'" << axis << "' splits dimension '"
                           << entry.getName().getValue() << "': the operand is not whole over it";
  SmallVector<StringRef> partial = type.getPartialAxes();
  partial.push_back(axis);
  return checkResult(*this, type.withPartial(partial), getResult().getType());
}

LogicalResult AllToAllOp::verify() {
  auto type = cast<ShardedTensorType>(getInput().getType());
  StringRef axis = getOver(), from = getFrom(), to = getTo();
  if (failed(checkDim(*this, type, from)) ||
      failed(checkDim(*this, type, to)) || failed(checkSplitLast(*this, type, from, axis)))
    return failure();
  if (from == to)
    return emitOpError() << "moves the split of '" << axis << "' from '" << from
                         << "' to itself";
  SmallVector<StringRef> fromAxes = type.getSplitAxes(from);
  fromAxes.pop_back();
  SmallVector<StringRef> toAxes = type.getSplitAxes(to);
  toAxes.push_back(axis);
  if (failed(checkDivisible(*this, type, to, toAxes)))
    return failure();
  if (Value filled = getFilled()) {
    auto counts = cast<mt::NamedTensorType>(filled.getType());
    auto element = dyn_cast<IntegerType>(counts.getElementType());
    mt::NamedTensorType global = type.getGlobal();
    StringRef experts = counts.getRank() == 1 ? counts.getDimNames().front().getValue() : "";
    if (!element || element.getWidth() != 64 || (experts != from && experts != to) ||
        counts.getDimSizes().front() != global.getDimSize(experts))
      return emitOpError() << "filled counts " << counts
                           << " must be i64 over the whole expert dimension, '" << from
                           << "' or '" << to << "'";
    // The runtime moves blocks [slots, experts, row] or [experts, slots, row].
    SmallVector<mt::NamedDim> dims = global.getDims();
    if (dims.size() < 2 || !llvm::is_contained({from, to}, dims[0].name.getValue()) ||
        !llvm::is_contained({from, to}, dims[1].name.getValue()))
      return emitOpError() << "with filled counts moves expert slots, which lead the operand: "
                           << global.dimsToString() << " does not start with '" << from
                           << "' and '" << to << "'";
  }
  return checkResult(*this, type.withSplit(from, fromAxes).withSplit(to, toAxes),
                     getResult().getType());
}

LogicalResult ShiftOp::verify() {
  return checkPointToPoint(*this, cast<ShardedTensorType>(getInput().getType()), getOver(),
                           getOffset());
}

LogicalResult SendOp::verify() {
  return checkPointToPoint(*this, cast<ShardedTensorType>(getInput().getType()), getOver(),
                           getShift());
}

LogicalResult RecvOp::verify() {
  return checkPointToPoint(*this, cast<ShardedTensorType>(getResult().getType()), getOver(),
                           getShift());
}

/// `local` must be what one rank holds of `sharded`.
static LogicalResult checkLocal(Operation *op, ShardedTensorType sharded,
                                mtc::mt::NamedTensorType local) {
  if (local != sharded.getLocalType())
    return op->emitOpError() << "the local tensor of " << sharded << " is "
                             << sharded.getLocalType() << ", not " << local;
  return success();
}

LogicalResult FromLocalOp::verify() {
  return checkLocal(*this, cast<ShardedTensorType>(getResult().getType()), getInput().getType());
}

LogicalResult ToLocalOp::verify() {
  return checkLocal(*this, cast<ShardedTensorType>(getInput().getType()), getResult().getType());
}
