//===- SplitBackward.cpp - B/W split of layer backwards -------------------===//
//
// See the pass description in Passes.td. The split is a partition of the backward's ops:
// B is the backward slice of the input-gradient results; W is the backward slice of the
// parameter-gradient results without B. Values of B that W reads (or returns) become B's
// extra results and W's extra arguments.
//
//===----------------------------------------------------------------------===//

#include "compiler/autodiff/Passes.h"
#include "compiler/autodiff/SplitBackward.h"

#include "dialects/mt/IR/MTDialect.h"
#include "dialects/mt/IR/MTOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace mtc::autodiff {
#define GEN_PASS_DEF_MTSPLITBACKWARDPASS
#include "compiler/autodiff/Passes.h.inc"
} // namespace mtc::autodiff

using namespace mlir;

namespace {

constexpr StringLiteral kParamGradsAttr = "mt.param_grads";
constexpr StringLiteral kBackwardPartAttr = "mt.backward_part";

/// Adds to `slice` every op of `body` that `roots` depend on (ops nested in regions count
/// as their top-level ancestor in `body`).
void addBackwardSlice(Block &body, ValueRange roots, llvm::SmallPtrSetImpl<Operation *> &slice) {
  SmallVector<Value> worklist(roots.begin(), roots.end());
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    Operation *def = value.getDefiningOp();
    if (!def)
      continue;
    def = body.findAncestorOpInBlock(*def);
    if (!def || !slice.insert(def).second)
      continue;
    def->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        worklist.push_back(operand);
    });
  }
}

struct MTSplitBackwardPass
    : mtc::autodiff::impl::MTSplitBackwardPassBase<MTSplitBackwardPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> backwards;
    for (auto func : module.getOps<func::FuncOp>())
      if (func->hasAttr(kParamGradsAttr) && func->hasAttr(mtc::mt::MTDialect::kLayerOfAttrName) &&
          !func->hasAttr(kBackwardPartAttr))
        backwards.push_back(func);
    // The invariant operands of the repeats of each backward (position ids), which W
    // takes last.
    llvm::DenseMap<StringRef, unsigned> invariant;
    module.walk([&](mtc::mt::RepeatOp repeat) {
      invariant[repeat.getCallee()] = repeat.getNumInvariant();
    });
    for (func::FuncOp backward : backwards)
      if (failed(mtc::autodiff::splitLayerBackward(backward,
                                                   invariant.lookup(backward.getSymName()))))
        return signalPassFailure();
  }
};

} // namespace

FailureOr<mtc::autodiff::BackwardParts>
mtc::autodiff::splitLayerBackward(func::FuncOp backward, unsigned numInvariant) {
  if (!backward.getBody().hasOneBlock())
    return backward.emitOpError() << "a layer backward must have one block to be split";
  Block &body = backward.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  auto paramGrads = backward->getAttrOfType<ArrayAttr>(kParamGradsAttr);
  unsigned numResults = ret.getNumOperands();
  if (paramGrads.size() > numResults)
    return backward.emitOpError() << "lists " << paramGrads.size()
                                  << " parameter gradients but returns " << numResults
                                  << " values";
  unsigned numInputGrads = numResults - paramGrads.size();
  // The leading arguments are the gradients of the layer's results.
  auto layer = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      backward, backward->getAttrOfType<FlatSymbolRefAttr>(mtc::mt::MTDialect::kLayerOfAttrName));
  if (!layer || layer.getNumResults() > backward.getNumArguments())
    return backward.emitOpError() << "is not the backward of a layer function";
  unsigned numResultGrads = layer.getNumResults();
  ValueRange inputGrads = ret.getOperands().take_front(numInputGrads);
  ValueRange weightGrads = ret.getOperands().drop_front(numInputGrads);

  llvm::SmallPtrSet<Operation *, 32> inB, inW;
  addBackwardSlice(body, inputGrads, inB);
  addBackwardSlice(body, weightGrads, inW);
  for (Operation *op : inB)
    inW.erase(op);

  // The stash: values B defines that W reads or returns, and the result gradients W reads,
  // in program order. A repeat of W carries nothing, so each call can only get its layer's
  // result gradient stacked, from B's repeat.
  llvm::SetVector<Value> stash;
  auto needFromB = [&](Value value) {
    Operation *def = value.getDefiningOp();
    auto arg = dyn_cast<BlockArgument>(value);
    if ((def && inB.contains(body.findAncestorOpInBlock(*def))) ||
        (arg && arg.getOwner() == &body && arg.getArgNumber() < numResultGrads))
      stash.insert(value);
  };
  for (Operation &op : body.without_terminator())
    if (inW.contains(&op))
      op.walk([&](Operation *nested) {
        for (Value operand : nested->getOperands())
          needFromB(operand);
      });
  for (Value grad : weightGrads)
    needFromB(grad);

  OpBuilder builder(backward);
  builder.setInsertionPointAfter(backward);
  MLIRContext *context = backward.getContext();
  auto copyAttrs = [&](func::FuncOp to, StringRef part) {
    to->setAttr(mtc::mt::MTDialect::kLayerOfAttrName,
                backward->getAttr(mtc::mt::MTDialect::kLayerOfAttrName));
    to->setAttr(kBackwardPartAttr, StringAttr::get(context, part));
    to.setVisibility(backward.getVisibility());
  };
  TypeRange argTypes = backward.getArgumentTypes();
  // Clones the ops of `part` (in program order) into `fn`, whose arguments `map` already
  // maps, and returns the copies of `results` (a value the part does not compute, an
  // argument or a stashed value, maps through `map` as well).
  auto fillPart = [&](func::FuncOp fn, IRMapping &map,
                      const llvm::SmallPtrSetImpl<Operation *> &part, ValueRange results) {
    OpBuilder b = OpBuilder::atBlockEnd(&fn.getBody().front());
    for (Operation &op : body.without_terminator())
      if (part.contains(&op))
        b.clone(op, map);
    SmallVector<Value> returned;
    for (Value value : results)
      returned.push_back(map.lookupOrDefault(value));
    func::ReturnOp::create(b, ret.getLoc(), returned);
  };

  // B: the original arguments -> input gradients, then the stash.
  SmallVector<Type> bResults(TypeRange(inputGrads).begin(), TypeRange(inputGrads).end());
  for (Value value : stash)
    bResults.push_back(value.getType());
  auto inputPart = func::FuncOp::create(builder, backward.getLoc(),
                                        (backward.getSymName() + ".input").str(),
                                        FunctionType::get(context, argTypes, bResults));
  copyAttrs(inputPart, "input");
  {
    IRMapping map;
    map.map(body.getArguments(), inputPart.addEntryBlock()->getArguments());
    SmallVector<Value> results(inputGrads.begin(), inputGrads.end());
    llvm::append_range(results, stash);
    fillPart(inputPart, map, inB, results);
  }

  // W: the original arguments but the result gradients, the stash, then the invariant
  // arguments (a repeat passes those last) -> parameter gradients.
  SmallVector<Type> wArgs(argTypes.drop_front(numResultGrads).drop_back(numInvariant));
  for (Value value : stash)
    wArgs.push_back(value.getType());
  llvm::append_range(wArgs, argTypes.take_back(numInvariant));
  auto weightPart = func::FuncOp::create(
      builder, backward.getLoc(), (backward.getSymName() + ".weight").str(),
      FunctionType::get(context, wArgs, TypeRange(weightGrads)));
  copyAttrs(weightPart, "weight");
  weightPart->setAttr(kParamGradsAttr, paramGrads);
  {
    IRMapping map;
    Block *entry = weightPart.addEntryBlock();
    unsigned numKept = body.getNumArguments() - numResultGrads - numInvariant;
    map.map(body.getArguments().drop_front(numResultGrads).drop_back(numInvariant),
            entry->getArguments().take_front(numKept));
    for (auto [value, arg] : llvm::zip_equal(
             stash, entry->getArguments().drop_front(numKept).drop_back(numInvariant)))
      map.map(value, arg);
    map.map(body.getArguments().take_back(numInvariant),
            entry->getArguments().take_back(numInvariant));
    fillPart(weightPart, map, inW, weightGrads);
  }
  return BackwardParts{inputPart, weightPart, numResultGrads};
}
