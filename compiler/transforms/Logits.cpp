//===- Logits.cpp - the model's logits as an entry function ---------------===//
//
// Generation needs the next token's scores, which the training entry points never return:
// `forward` ends in the loss. The logits function is `forward` cut before its loss rather
// than a function the frontend writes, so every model that trains on token ids can
// generate without a change to its source, and it is the training forward's computation
// op for op (greedy decoding is the argmax of what training computes). Passes.td describes
// the contract.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"
#include "compiler/transforms/ResetDocuments.h"

#include "dialects/mt/IR/MTDialect.h"
#include "dialects/mt/IR/MTOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"

namespace mtc::transforms {
#define GEN_PASS_DEF_MTLOGITSPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace mtc::transforms

using namespace mlir;
using namespace mtc;
using mt::NamedTensorType;

namespace {

/// The buffer kind the plan gives the result (CallingConvention.cpp).
constexpr StringLiteral kLogitsBuffer = "logits";

/// The loss of `forward` if the function can be cut before it: tokens and labels first, one
/// cross-entropy in the body, whose labels are the labels argument and its only use, and
/// whose mask, if any, is the argument after the labels and its only use (mt-loss-mask).
mt::CrossEntropyOp findLoss(func::FuncOp forward) {
  if (forward.getNumArguments() < 2 || !forward.getBody().hasOneBlock())
    return nullptr;
  SmallVector<mt::CrossEntropyOp> losses(forward.getBody().front().getOps<mt::CrossEntropyOp>());
  if (losses.size() != 1)
    return nullptr;
  Value labels = forward.getArgument(1);
  if (losses.front().getLabels() != labels || !labels.hasOneUse())
    return nullptr;
  if (Value mask = losses.front().getMask();
      mask && (forward.getNumArguments() < 3 || mask != forward.getArgument(2) ||
               !mask.hasOneUse()))
    return nullptr;
  return losses.front();
}

/// `logits` with the dimensions of `tokens` first, in their order, then the class
/// dimension: the layout the runtime reads a position's scores from.
Value inTokenOrder(OpBuilder &b, Value logits, Value tokens, StringRef classDim) {
  auto type = cast<NamedTensorType>(logits.getType());
  auto tokensType = cast<NamedTensorType>(tokens.getType());
  SmallVector<mt::NamedDim> dims = tokensType.getDims();
  dims.push_back({b.getStringAttr(classDim), type.getDimSize(classDim)});
  NamedTensorType ordered = type.withDims(dims);
  if (ordered == type)
    return logits;
  return mt::TransposeOp::create(b, logits.getLoc(), ordered, logits);
}

/// Makes `repeat` (in `logits`) run the layer without its invariant operand `operand`, the
/// position ids, when the layer reads them only as rope's positions and attention's
/// document positions: generation reads one document, where rope at the ids 0, 1, ... is
/// rope at the index and attention within it is plain causal attention. The variant
/// `@<layer>.generate` (`mt.layer_of` the layer, as autodiff's are) is the plain layer, so
/// mt-kv-cache caches it. Returns false (nothing changed) for another layer.
bool runLayerWithoutIds(SymbolTable &symbols, mt::RepeatOp repeat, unsigned operand) {
  unsigned first = repeat.getNumOperands() - repeat.getNumInvariant();
  auto layer = symbols.lookup<func::FuncOp>(repeat.getCallee());
  if (operand < first || !layer || !layer.getBody().hasOneBlock() ||
      layer.getNumArguments() != repeat.getNumOperands())
    return false;
  for (OpOperand &use : layer.getArgument(operand).getUses()) {
    auto rope = dyn_cast<mt::RopeOp>(use.getOwner());
    auto attention = dyn_cast<mt::AttentionOp>(use.getOwner());
    if (!(rope && rope.getPositions() == use.get()) &&
        !(attention && attention.getPositions() == use.get()))
      return false;
  }
  std::string name = (layer.getSymName() + ".generate").str();
  auto variant = symbols.lookup<func::FuncOp>(name);
  if (!variant) {
    variant = cast<func::FuncOp>(layer->clone());
    variant.setSymName(name);
    symbols.insert(variant, std::next(layer->getIterator()));
    BlockArgument ids = variant.getArgument(operand);
    for (OpOperand &use : llvm::make_early_inc_range(ids.getUses())) {
      if (auto rope = dyn_cast<mt::RopeOp>(use.getOwner()))
        rope.getPositionsMutable().clear();
      else
        cast<mt::AttentionOp>(use.getOwner()).getPositionsMutable().clear();
    }
    (void)variant.eraseArgument(operand);
    if (!variant->hasAttr(mt::MTDialect::kLayerOfAttrName)) {
      variant->removeAttr(mt::MTDialect::kLayerAttrName);
      variant->setAttr(mt::MTDialect::kLayerOfAttrName,
                       FlatSymbolRefAttr::get(layer.getSymNameAttr()));
    }
  }
  repeat.setCallee(variant.getSymName());
  repeat->eraseOperand(operand);
  unsigned invariant = repeat.getNumInvariant() - 1;
  if (invariant)
    repeat.setInvariant(invariant);
  else
    repeat.removeInvariantAttr();
  return true;
}

struct LogitsPass : transforms::impl::MTLogitsPassBase<LogitsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    auto forward = symbols.lookup<func::FuncOp>("forward");
    if (!forward || symbols.lookup(kLogitsBuffer) || !findLoss(forward))
      return;

    auto logits = cast<func::FuncOp>(forward->clone());
    logits.setSymName(kLogitsBuffer);
    symbols.insert(logits, std::next(forward->getIterator()));
    mt::CrossEntropyOp loss = findLoss(logits);
    bool masked = static_cast<bool>(loss.getMask());
    auto ret = cast<func::ReturnOp>(logits.getBody().front().getTerminator());
    OpBuilder b(ret);
    Value result = inTokenOrder(b, loss.getLogits(), logits.getArgument(0), loss.getDim());
    // Sampling reads f32: mixed-precision logits are widened, the values the loss reads.
    auto resultType = cast<NamedTensorType>(result.getType());
    if (!resultType.getElementType().isF32())
      result = mt::CastOp::create(b, result.getLoc(),
                                  resultType.withElementType(b.getF32Type()), result);
    ret->setOperands(result);
    // The loss and whatever fed only the loss (an auxiliary loss) go; the labels and the
    // loss mask with them.
    IRRewriter rewriter(b);
    (void)runRegionDCE(rewriter, logits.getBody());
    logits.removeResAttrsAttr();
    logits.setFunctionType(b.getFunctionType(logits.getArgumentTypes(), {result.getType()}));
    logits.setResultAttr(0, mt::MTDialect::kBufferAttrName, b.getStringAttr(kLogitsBuffer));
    // Generation reads one document: a position table read at the position ids
    // (mt-reset-documents) is read whole again, at the positions of the tokens; rope and
    // the layers (mt.repeat's invariant operand) read the positions 0, 1, ... instead (a
    // layer reading them only as rope's and attention's positions is run as the plain
    // layer), and attention masked to the documents is plain causal attention.
    for (unsigned index = logits.getNumArguments(); index-- > 0;) {
      auto name = logits.getArgAttrOfType<StringAttr>(index, transforms::kInputNameAttrName);
      if (!name || name.getValue() != transforms::kPositionIdsInput)
        continue;
      BlockArgument ids = logits.getArgument(index);
      Value positions;
      for (OpOperand &use : llvm::make_early_inc_range(ids.getUses())) {
        // Attention masked to the documents (--reset-attention-mask) sees the one document
        // as plain causal attention does.
        if (auto attention = dyn_cast<mt::AttentionOp>(use.getOwner())) {
          attention.getPositionsMutable().clear();
          continue;
        }
        if (!isa<mt::RopeOp, mt::RepeatOp>(use.getOwner()))
          continue;
        if (auto repeat = dyn_cast<mt::RepeatOp>(use.getOwner());
            repeat && runLayerWithoutIds(symbols, repeat, use.getOperandNumber()))
          continue;
        if (!positions) {
          // The positions run along attention's sequence dimension, which the ids have
          // (mt-reset-documents).
          auto type = cast<NamedTensorType>(ids.getType());
          StringAttr seq;
          module.walk([&](mt::AttentionOp attention) { seq = attention.getSeqDimAttr(); });
          if (!seq || !type.hasDim(seq.getValue())) {
            use.getOwner()->emitError() << "mt-logits: the position ids " << type.dimsToString()
                                        << " have no attention sequence dimension to count along";
            return signalPassFailure();
          }
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(&logits.getBody().front());
          auto iota = mt::IotaOp::create(
              b, ids.getLoc(),
              type.withDims({mt::NamedDim{seq, type.getDimSize(seq.getValue())}}), seq);
          positions = mt::BroadcastOp::create(b, ids.getLoc(), type, iota);
        }
        use.set(positions);
      }
      for (Operation *user : llvm::make_early_inc_range(ids.getUsers())) {
        auto rows = dyn_cast<mt::GatherOp>(user);
        if (!rows || rows.getIndices() != ids) {
          user->emitError() << "mt-logits reads the position table whole, but the position ids "
                               "feed something other than a gather's indices, rope or layers";
          return signalPassFailure();
        }
        // The table, renamed by mt-reset-documents (its rows are positions).
        auto renamed = rows.getTable().getDefiningOp<mt::RenameOp>();
        rows.getResult().replaceAllUsesWith(renamed ? renamed.getInput() : rows.getTable());
        rows.erase();
        if (renamed && renamed->use_empty())
          renamed.erase();
      }
      (void)logits.eraseArgument(index);
    }
    if (masked)
      (void)logits.eraseArgument(2);
    (void)logits.eraseArgument(1);
  }
};

} // namespace
