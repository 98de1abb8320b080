//===- ResetDocuments.cpp - positions restarting at each document ---------===//
//
// Megatron's --reset-position-ids: documents are packed into samples, and the positions
// of each document count from 0. Which positions those are depends on the data, which the
// runtime reads: the step takes the position ids as an input rather than the
// end-of-document id, so that the plan does not depend on the tokenizer (as mt-loss-mask
// takes its mask). Passes.td describes the contract.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"

#include "compiler/transforms/ResetDocuments.h"
#include "dialects/mt/IR/MTDialect.h"
#include "dialects/mt/IR/MTOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mtc::transforms {
#define GEN_PASS_DEF_MTRESETDOCUMENTSPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace mtc::transforms

using namespace mlir;
using namespace mtc;
using mt::NamedTensorType;

namespace {

struct ResetDocumentsPass : transforms::impl::MTResetDocumentsPassBase<ResetDocumentsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module->hasAttr(transforms::kResetPositionIdsAttrName) &&
        !module->hasAttr(transforms::kResetAttentionMaskAttrName))
      return;
    if (failed(resetDocuments(module)))
      signalPassFailure();
  }

  /// What the model reads the position ids in: rope over the sequence (--reset-position-ids)
  /// and attention masked to the documents (--reset-attention-mask).
  struct Readers {
    SmallVector<mt::RopeOp> ropes;
    SmallVector<mt::AttentionOp> attentions;
  };

  LogicalResult resetDocuments(ModuleOp module) {
    bool positionIds = module->hasAttr(transforms::kResetPositionIdsAttrName);
    bool attentionMask = module->hasAttr(transforms::kResetAttentionMaskAttrName);
    // The setting errors name: reset_position_ids when given (what the model's positions
    // need), else reset_attention_mask.
    StringRef setting = positionIds ? "reset_position_ids" : "reset_attention_mask";
    // The document mask is built into attention's decomposition (mt-decompose), ring
    // attention's block steps (compiler/sharding/AttentionPartition.cpp) and fused
    // attention's block loops (compiler/codegen/ToLinalg/AttentionToLinalg.cpp).
    auto function = dyn_cast_or_null<func::FuncOp>(SymbolTable::lookupSymbolIn(module, "forward"));
    if (!function || function.getNumArguments() < 1)
      return module.emitError() << setting << " needs a 'forward' function taking the "
                                   "tokens first";
    // The sequence dimension is attention's: the positions a position table indexes.
    StringAttr seq;
    WalkResult walk = module.walk([&](mt::AttentionOp attention) {
      if (seq && seq != attention.getSeqDimAttr()) {
        attention.emitError() << setting << ": attention over '" << attention.getSeqDim()
                              << "', another over '" << seq.getValue()
                              << "': which dimension holds the positions is ambiguous";
        return WalkResult::interrupt();
      }
      seq = attention.getSeqDimAttr();
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    if (!seq)
      return function.emitError() << setting << " needs an attention (mt.attention): "
                                     "its sequence dimension holds the positions";
    auto tokens = dyn_cast<NamedTensorType>(function.getArgument(0).getType());
    if (!tokens || !isa<IntegerType>(tokens.getElementType()) || !tokens.hasDim(seq.getValue()))
      return function.emitError() << setting << " needs 'forward' to take the token ids "
                                     "over attention's sequence dimension '"
                                  << seq.getValue() << "' first";
    // Rope over the sequence and attention in a layer read the position ids, which the
    // layer's mt.repeat passes unchanged to every call (an invariant operand). Positions
    // read where the ids do not reach are refused rather than left at the token's place in
    // the sample, and attention there rather than left to cross documents.
    llvm::MapVector<func::FuncOp, Readers> layerReaders;
    for (auto layer : module.getOps<func::FuncOp>()) {
      if (layer == function)
        continue;
      WalkResult unreached = layer.walk([&](Operation *op) {
        auto rope = dyn_cast<mt::RopeOp>(op);
        if (rope && (!positionIds || rope.getPosition() != seq.getValue()))
          rope = nullptr;
        mt::AttentionOp attention =
            attentionMask ? dyn_cast<mt::AttentionOp>(op) : mt::AttentionOp();
        if (rope || attention) {
          if (!layer->hasAttr(mt::MTDialect::kLayerAttrName)) {
            op->emitError() << setting << " reaches " << (rope ? "rope" : "attention")
                            << " over '" << seq.getValue()
                            << "' in the entry and in layers (mt.layer), not in '"
                            << layer.getSymName() << "'; compile without it";
            return WalkResult::interrupt();
          }
          if (rope)
            layerReaders[layer].ropes.push_back(rope);
          else
            layerReaders[layer].attentions.push_back(attention);
          return WalkResult::advance();
        }
        if (auto ref = dyn_cast<mt::ParamRefOp>(op); positionIds && ref &&
            cast<NamedTensorType>(ref.getResult().getType()).hasDim(seq.getValue())) {
          ref.emitError() << "reset_position_ids does not reach the position table @"
                          << ref.getParam() << " read in '" << layer.getSymName()
                          << "' yet (a table read in a layer); compile without it";
          return WalkResult::interrupt();
        }
        return WalkResult::advance();
      });
      if (unreached.wasInterrupted())
        return failure();
    }
    SmallVector<mt::ParamRefOp> tables;
    Readers inEntry;
    function.walk([&](Operation *op) {
      if (auto rope = dyn_cast<mt::RopeOp>(op);
          positionIds && rope && rope.getPosition() == seq.getValue())
        inEntry.ropes.push_back(rope);
      if (auto attention = dyn_cast<mt::AttentionOp>(op); attentionMask && attention)
        inEntry.attentions.push_back(attention);
      if (auto ref = dyn_cast<mt::ParamRefOp>(op); positionIds && ref &&
          cast<NamedTensorType>(ref.getResult().getType()).hasDim(seq.getValue()))
        tables.push_back(ref);
    });
    bool layerRopes = llvm::any_of(layerReaders, [](const auto &entry) {
      return !entry.second.ropes.empty();
    });
    if (positionIds && tables.empty() && inEntry.ropes.empty() && !layerRopes)
      return function.emitError() << "reset_position_ids: the model reads no positions (no "
                                     "parameter with the sequence dimension '"
                                  << seq.getValue() << "' and no rope over it), so the setting "
                                     "would do nothing";

    NamedTensorType positionType = tokens.withElementType(IntegerType::get(&getContext(), 32));
    unsigned index = function.getNumArguments();
    OpBuilder b(&getContext());
    if (failed(function.insertArgument(
            index, positionType,
            b.getDictionaryAttr(b.getNamedAttr(transforms::kInputNameAttrName,
                                               b.getStringAttr(transforms::kPositionIdsInput))),
            function.getLoc())))
      return failure();
    BlockArgument positions = function.getArgument(index);
    if (failed(readIds(inEntry, positions)))
      return failure();
    for (auto &[layer, inLayer] : layerReaders)
      if (failed(passToLayer(module, layer, inLayer, positions, setting)))
        return failure();
    StringAttr positionDim = b.getStringAttr(seq.getValue() + "_position");
    for (mt::ParamRefOp ref : tables) {
      // The table was broadcast over the tokens' other dimensions; its rows at the position
      // ids have them, so every reader must keep them in its results.
      for (Operation *user : ref->getUsers())
        for (Type type : user->getResultTypes())
          if (auto result = dyn_cast<NamedTensorType>(type);
              !result || llvm::any_of(tokens.getDims(), [&](const mt::NamedDim &dim) {
                return !result.hasDim(dim.name.getValue());
              }))
            return user->emitError()
                   << "reset_position_ids reads the position table @" << ref.getParam()
                   << " at the position ids, but this reader's result lacks the tokens' "
                      "dimensions";
      // The table's rows are positions, not the tokens' sequence: renamed, so that the
      // partitioner does not split the table as it splits the sequence (over cp, where the
      // rows would be looked up as a vocabulary-parallel table's while each rank holds
      // other tokens' ids). Read through the rename, the table also keeps its weight decay
      // (mt-optimizer decays the parameters a gather or contract reads directly; a position
      // table added to the embeddings is not).
      b.setInsertionPointAfter(ref);
      auto table = mt::RenameOp::create(b, ref.getLoc(), ref.getResult(), seq, positionDim);
      auto rows = mt::GatherOp::create(b, ref.getLoc(), table.getResult(), positions,
                                       positionDim);
      ref.getResult().replaceAllUsesExcept(rows, table);
    }
    return success();
  }

  /// Rotates each of `ropes` at the position ids `ids` rather than at the index.
  static LogicalResult ropeAtIds(ArrayRef<mt::RopeOp> ropes, Value ids) {
    auto idsType = cast<NamedTensorType>(ids.getType());
    for (mt::RopeOp rope : ropes) {
      auto input = cast<NamedTensorType>(rope.getInput().getType());
      for (const mt::NamedDim &dim : idsType.getDims())
        if (!input.hasDim(dim.name.getValue()) ||
            input.getDimSize(dim.name.getValue()) != dim.size)
          return rope.emitError() << "reset_position_ids: rope's operand " << input.dimsToString()
                                  << " lacks the dimensions of the tokens "
                                  << idsType.dimsToString() << ", so the position ids cannot "
                                     "be read per element";
      rope.getPositionsMutable().assign(ids);
    }
    return success();
  }

  /// Masks each of `attentions` to the documents the position ids `ids` mark: a key is
  /// visible to the queries of its own document only (mt.attention's positions).
  static LogicalResult maskAtIds(ArrayRef<mt::AttentionOp> attentions, Value ids) {
    auto idsType = cast<NamedTensorType>(ids.getType());
    for (mt::AttentionOp attention : attentions) {
      if (!attention.getCausal())
        return attention.emitError() << "reset_attention_mask masks causal attention to the "
                                        "documents; this attention is not causal";
      auto query = cast<NamedTensorType>(attention.getQuery().getType());
      for (const mt::NamedDim &dim : idsType.getDims())
        if (!query.hasDim(dim.name.getValue()) ||
            query.getDimSize(dim.name.getValue()) != dim.size)
          return attention.emitError()
                 << "reset_attention_mask: attention's query " << query.dimsToString()
                 << " lacks the dimensions of the tokens " << idsType.dimsToString()
                 << ", so the documents cannot be read per query";
      attention.getPositionsMutable().assign(ids);
    }
    return success();
  }

  /// Makes `readers` read the position ids `ids`.
  static LogicalResult readIds(const Readers &readers, Value ids) {
    if (failed(ropeAtIds(readers.ropes, ids)))
      return failure();
    return maskAtIds(readers.attentions, ids);
  }

  /// Passes `ids` to `layer` as a trailing argument, through the mt.repeat applying it (an
  /// invariant operand: every layer reads the same ids), and makes its `readers` read them.
  static LogicalResult passToLayer(ModuleOp module, func::FuncOp layer, const Readers &readers,
                                   BlockArgument ids, StringRef setting) {
    auto entry = cast<func::FuncOp>(ids.getOwner()->getParentOp());
    SmallVector<mt::RepeatOp> repeats;
    WalkResult calls = module.walk([&](Operation *op) {
      if (auto repeat = dyn_cast<mt::RepeatOp>(op); repeat && repeat.getCallee() == layer.getSymName()) {
        repeats.push_back(repeat);
        return WalkResult::advance();
      }
      if (auto call = dyn_cast<func::CallOp>(op); call && call.getCallee() == layer.getSymName()) {
        call.emitError() << setting << " reaches layers applied by mt.repeat, not '"
                         << layer.getSymName() << "' called here; compile without it";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (calls.wasInterrupted())
      return failure();
    for (mt::RepeatOp repeat : repeats)
      if (repeat->getParentOp() != entry.getOperation())
        return repeat.emitError() << setting << " reaches the layers repeated in '"
                                  << entry.getSymName() << "', not '" << repeat.getCallee()
                                  << "' repeated elsewhere; compile without it";
    unsigned index = layer.getNumArguments();
    if (failed(layer.insertArgument(index, ids.getType(), DictionaryAttr(), layer.getLoc())))
      return failure();
    if (failed(readIds(readers, layer.getArgument(index))))
      return failure();
    OpBuilder b(module.getContext());
    for (mt::RepeatOp repeat : repeats) {
      unsigned carried = repeat.getNumCarried();
      repeat.getInputsMutable().append(ValueRange{ids});
      repeat.setCarriedAttr(b.getI64IntegerAttr(carried));
      repeat.setInvariantAttr(b.getI64IntegerAttr(repeat.getNumInvariant() + 1));
    }
    return success();
  }
};

} // namespace
