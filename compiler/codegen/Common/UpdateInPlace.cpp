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
#include "compiler/transforms/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"
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
  for (StringRef name : {mtc::transforms::kParamAttrName, mtc::transforms::kStateAttrName})
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
    auto kind = attrs ? attrs.getAs<StringAttr>(mtc::mt::MTDialect::kBufferAttrName) : nullptr;
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

/// Whether the f32 `norm` is finite (an ordered comparison is false for NaN).
Value isFinite(OpBuilder &b, Location loc, Value norm) {
  Value inf =
      arith::ConstantOp::create(b, loc, b.getF32FloatAttr(std::numeric_limits<float>::infinity()));
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, norm, inf);
}

/// `value` written into `argument`'s buffer.
Value materialize(OpBuilder &b, Value value, BlockArgument argument) {
  return bufferization::MaterializeInDestinationOp::create(b, value.getLoc(), value, argument)
      .getResult();
}

/// The ops that may write `buffer`: its users with memory effects, followed through the
/// pure ops deriving values from it (a pointer taken as an index, cast to i64 for a call).
void collectWriters(Value buffer, SmallVectorImpl<Operation *> &writers) {
  for (Operation *user : buffer.getUsers()) {
    if (!isPure(user)) {
      writers.push_back(user);
      continue;
    }
    for (Value derived : user->getResults())
      collectWriters(derived, writers);
  }
}

/// The host decides: what only the new values need runs under `scf.if` (norm finite).
void branchAroundUpdate(func::FuncOp func, func::ReturnOp ret, Value norm,
                        ArrayRef<std::pair<unsigned, unsigned>> updates) {
  Location loc = func.getLoc();
  OpBuilder b(ret);
  Value ok = isFinite(b, loc, tensor::ExtractOp::create(b, loc, norm, ValueRange{}));

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
  // A collective writes its output buffer, which `bufferization.to_tensor` (or the next
  // collective, through its pointer) then reads: no def-use edge leads from the reader to
  // the call. Every buffer a kept op uses is kept with all that may write it (the gradient
  // norm's all-reduces over each mesh axis, and the squares they sum).
  SmallVector<Operation *> writers;
  auto collectFrom = [&](size_t first) {
    for (size_t i = first; i < kept.size(); ++i)
      for (Value result : kept[i]->getResults())
        if (isa<BaseMemRefType>(result.getType()))
          collectWriters(result, writers);
  };
  collectFrom(0);
  while (!writers.empty()) {
    Operation *writer = writers.pop_back_val();
    if (kept.contains(writer))
      continue;
    size_t first = kept.size();
    kept.insert(writer);
    for (Value operand : writer->getOperands())
      (void)getBackwardSlice(operand, &kept, options);
    collectFrom(first);
  }
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

  // Each new value goes into its argument's buffer (eliminate-empty-tensors then makes the
  // argument the output of the kernel computing it). After the branch, where one-shot
  // bufferization finds both branches' values in the argument's buffer: written in the
  // first, untouched in the second. A value computed into a buffer of its own (under the
  // distributed optimizer, a parameter's all-gathered output) is copied in there, so it is
  // held to the end of the update (materialized in the branch it would not be: upstream
  // then fails to keep it in the argument's buffer).
  b.setInsertionPointAfter(ifOp);
  for (auto [index, update] : llvm::enumerate(updates))
    ret.setOperand(update.first,
                   materialize(b, ifOp.getResult(index), func.getArgument(update.second)));
}

/// Each kernel decides: the generic producing a new value also reads the old one at the same
/// index, and yields it instead when the norm (one more, 0-d, input) is not finite.
LogicalResult selectInKernels(func::FuncOp func, func::ReturnOp ret, Value norm,
                              ArrayRef<std::pair<unsigned, unsigned>> updates) {
  // Per producing generic, [its result, the input holding the old value].
  llvm::MapVector<linalg::GenericOp, SmallVector<std::pair<unsigned, unsigned>>> guarded;
  for (auto [result, argument] : updates) {
    auto value = dyn_cast<OpResult>(ret.getOperand(result));
    auto generic = value ? dyn_cast<linalg::GenericOp>(value.getOwner()) : nullptr;
    std::optional<unsigned> old;
    if (generic) {
      AffineMap written = generic.getIndexingMapMatchingResult(value);
      for (OpOperand *input : generic.getDpsInputOperands())
        if (input->get() == func.getArgument(argument) &&
            generic.getMatchingIndexingMap(input) == written)
          old = input->getOperandNumber();
    }
    if (!old)
      return func.emitOpError("cannot guard the update of argument ")
             << argument << " in a kernel: its new value is not computed by a linalg.generic "
             << "reading the argument where it writes the value";
    guarded[generic].push_back({value.getResultNumber(), *old});
  }
  for (auto &[generic, yields] : guarded) {
    OpBuilder b(generic);
    Location loc = generic.getLoc();
    SmallVector<Value> inputs = generic.getDpsInputs();
    const unsigned normIndex = inputs.size();
    inputs.push_back(norm);
    SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
    maps.insert(maps.begin() + normIndex, AffineMap::get(generic.getNumLoops(), 0, b.getContext()));
    auto replacement =
        linalg::GenericOp::create(b, loc, generic.getResultTypes(), inputs, generic.getDpsInits(),
                                  maps, generic.getIteratorTypesArray());
    replacement.getRegion().takeBody(generic.getRegion());
    Block &body = replacement.getRegion().front();
    BlockArgument normElement = body.insertArgument(normIndex, b.getF32Type(), loc);
    auto yield = cast<linalg::YieldOp>(body.getTerminator());
    OpBuilder inner(yield);
    Value ok = isFinite(inner, loc, normElement);
    for (auto [result, old] : yields)
      yield.setOperand(result, arith::SelectOp::create(inner, loc, ok, yield.getOperand(result),
                                                       body.getArgument(old)));
    generic.replaceAllUsesWith(replacement.getResults());
    generic.erase();
  }
  OpBuilder b(ret);
  for (auto [result, argument] : updates)
    ret.setOperand(result, materialize(b, ret.getOperand(result), func.getArgument(argument)));
  return success();
}

LogicalResult updateInPlace(func::FuncOp func, bool inKernels) {
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
  if (inKernels)
    return selectInKernels(func, ret, norm, updates);
  branchAroundUpdate(func, ret, norm, updates);
  return success();
}

struct UpdateInPlacePass : public mtc::codegen::impl::UpdateInPlacePassBase<UpdateInPlacePass> {
  using UpdateInPlacePassBase::UpdateInPlacePassBase;
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(updateInPlace(func, selectInKernels)))
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
