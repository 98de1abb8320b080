//===- UpdateInPlace.cpp - optimizer steps that update their inputs -------===//
//
// mtc-update-in-place (on tensors) and mtc-drop-in-place-results (on buffers): an
// optimizer step writes each parameter and state it updates into the buffer it read it
// from, so a rank holds one copy of them, and a step whose gradient norm is not finite
// writes nothing (Passes.td gives the contract).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Common/UpdateInPlace.h"
#include "compiler/codegen/Common/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SetVector.h"

#include <limits>

namespace mtc::codegen {
#define GEN_PASS_DEF_UPDATEINPLACEPASS
#define GEN_PASS_DEF_DROPINPLACERESULTSPASS
#include "compiler/codegen/Common/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;

namespace {

/// The `mt.param` or `mt.state` entry of a buffer's attributes: which model buffer it is.
std::optional<NamedAttribute> heldBuffer(DictionaryAttr attrs) {
  if (!attrs)
    return std::nullopt;
  for (StringRef name : {"mt.param", "mt.state"})
    if (std::optional<NamedAttribute> entry = attrs.getNamed(name))
      return entry;
  return std::nullopt;
}

} // namespace

SmallVector<std::pair<unsigned, unsigned>> mtc::codegen::updatedArguments(func::FuncOp func) {
  DenseMap<std::pair<Attribute, Attribute>, unsigned> argumentOf;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (std::optional<NamedAttribute> held = heldBuffer(func.getArgAttrDict(i)))
      argumentOf.try_emplace({held->getName(), held->getValue()}, i);
  SmallVector<std::pair<unsigned, unsigned>> updates;
  for (unsigned r = 0; r < func.getNumResults(); ++r)
    if (std::optional<NamedAttribute> held = heldBuffer(func.getResultAttrDict(r)))
      if (auto it = argumentOf.find({held->getName(), held->getValue()}); it != argumentOf.end())
        updates.push_back({r, it->second});
  return updates;
}

namespace {

/// The step's gradient norm: a result or argument of kind `grad_norm`.
Value gradNorm(func::FuncOp func, func::ReturnOp ret) {
  auto isNorm = [](DictionaryAttr attrs) {
    auto kind = attrs ? attrs.getAs<StringAttr>("mt.buffer") : nullptr;
    return kind && kind.getValue() == "grad_norm";
  };
  for (unsigned r = 0; r < func.getNumResults(); ++r)
    if (isNorm(func.getResultAttrDict(r)))
      return ret.getOperand(r);
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (isNorm(func.getArgAttrDict(i)))
      return func.getArgument(i);
  return nullptr;
}

LogicalResult updateInPlace(func::FuncOp func) {
  if (func.isExternal())
    return success();
  SmallVector<std::pair<unsigned, unsigned>> updates = mtc::codegen::updatedArguments(func);
  if (updates.empty())
    return success();
  if (!func.getBody().hasOneBlock())
    return func.emitOpError("updates its arguments in place but has several blocks");
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  Value norm = gradNorm(func, ret);
  auto normType = norm ? dyn_cast<RankedTensorType>(norm.getType()) : nullptr;
  if (!normType || normType.getRank() != 0 || !normType.getElementType().isF32())
    return func.emitOpError("updates parameters or states in place but has no f32 scalar "
                            "grad_norm to skip a non-finite step with");

  // ok = the norm is finite (an ordered comparison is false for NaN).
  Location loc = func.getLoc();
  OpBuilder b(ret);
  Value n = tensor::ExtractOp::create(b, loc, norm, ValueRange{});
  Value inf = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(std::numeric_limits<float>::infinity()));
  Value ok = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, n, inf);

  // What the other results and the condition need stays where it is; what only the new
  // values need, and whatever uses it, moves under the condition (in program order).
  llvm::SmallDenseSet<unsigned> updatedResults;
  for (auto [result, argument] : updates)
    updatedResults.insert(result);
  BackwardSliceOptions options;
  options.inclusive = true;
  options.omitBlockArguments = true;
  llvm::SetVector<Operation *> kept, updating;
  for (OpOperand &operand : ret->getOpOperands())
    (void)getBackwardSlice(operand.get(),
                           updatedResults.contains(operand.getOperandNumber()) ? &updating : &kept,
                           options);
  (void)getBackwardSlice(ok, &kept, options);
  SmallVector<Operation *> moved;
  llvm::SmallPtrSet<Operation *, 32> movedSet;
  for (Operation &op : func.getBody().front().without_terminator()) {
    bool uses = llvm::any_of(op.getOperands(), [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && movedSet.contains(def);
    });
    // What the other results need is never downstream of what moves (their slices are
    // closed under operands), so a value both need stays outside.
    if (kept.contains(&op))
      continue;
    if (uses || updating.contains(&op)) {
      moved.push_back(&op);
      movedSet.insert(&op);
    }
  }

  SmallVector<Type> types;
  SmallVector<Value> newValues, oldValues;
  for (auto [result, argument] : updates) {
    types.push_back(ret.getOperand(result).getType());
    newValues.push_back(ret.getOperand(result));
    oldValues.push_back(func.getArgument(argument));
  }
  auto ifOp = scf::IfOp::create(b, loc, types, ok, /*withElseRegion=*/true);
  OpBuilder thenBuilder = ifOp.getThenBodyBuilder();
  auto thenYield = scf::YieldOp::create(thenBuilder, loc, newValues);
  for (Operation *op : moved)
    op->moveBefore(thenYield);
  OpBuilder elseBuilder = ifOp.getElseBodyBuilder();
  scf::YieldOp::create(elseBuilder, loc, oldValues);

  for (auto [index, update] : llvm::enumerate(updates)) {
    auto [result, argument] = update;
    Value written = bufferization::MaterializeInDestinationOp::create(
        b, loc, ifOp.getResult(index), func.getArgument(argument)).getResult();
    ret.setOperand(result, written);
  }
  return success();
}

struct UpdateInPlacePass
    : public mtc::codegen::impl::UpdateInPlacePassBase<UpdateInPlacePass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(updateInPlace(func)))
        return signalPassFailure();
  }
};

struct DropInPlaceResultsPass
    : public mtc::codegen::impl::DropInPlaceResultsPassBase<DropInPlaceResultsPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      SmallVector<std::pair<unsigned, unsigned>> updates = mtc::codegen::updatedArguments(func);
      if (updates.empty())
        continue;
      auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
      llvm::BitVector erased(func.getNumResults());
      for (auto [result, argument] : updates) {
        // The plan lists no output for it (describeCallingConvention): the value must be
        // where the caller looks.
        if (ret.getOperand(result) != func.getArgument(argument)) {
          func.emitOpError("returns the new value of argument ")
              << argument << " in another buffer (run mtc-update-in-place before bufferizing)";
          return signalPassFailure();
        }
        erased.set(result);
      }
      ret->eraseOperands(erased);
      if (failed(func.eraseResults(erased)))
        return signalPassFailure();
    }
  }
};

} // namespace
