//===- Decompose.cpp - composite mt ops into the core ops -----------------===//
//
// Softmax, the norms, attention and its backward, cross-entropy and its backward become
// reductions, elementwise ops (with named broadcasting), contractions and the dimension
// manipulations (rename, split, merge, transpose), with mt.iota for the positions of the
// causal mask, so that kernel generation only needs the core ops. The formulas are those
// of the reference interpreter; the unit tests check each rewrite against it.
//
//===----------------------------------------------------------------------===//

#include "compiler/lowering/Decomposer.h"
#include "compiler/lowering/Passes.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/FusedAttention.h"
#include "dialects/mt/Utils/TensorSize.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mtc::lowering {
#define GEN_PASS_DEF_MTDECOMPOSEPASS
#include "compiler/lowering/Passes.h.inc"
} // namespace mtc::lowering

using namespace mlir;
using namespace mtc;
using mt::NamedTensorType;
using mt::TensorBuilder;
using lowering::Decomposer;
using lowering::DimNames;

namespace {

//===----------------------------------------------------------------------===//
// Softmax and norms
//===----------------------------------------------------------------------===//

SmallVector<Value> decompose(Decomposer &d, mt::SoftmaxOp op) {
  return {d.softmax(op.getInput(), op.getDim())};
}

SmallVector<Value> decompose(Decomposer &d, mt::LayerNormOp op) {
  TensorBuilder &t = d.tensors();
  Value x = op.getInput();
  StringRef dim = op.getDim();
  Value centred = t.sub(x, t.reduceMean(x, {dim}));
  Value variance = t.reduceMean(t.mul(centred, centred), {dim});
  Value inverse = t.rsqrt(t.add(variance, t.scalar(op.getEpsilon().convertToDouble(), x)));
  Value y = t.mul(t.mul(centred, inverse), op.getScale());
  if (Value bias = op.getBias())
    y = t.add(y, bias);
  return {d.conform(y, op.getType())};
}

SmallVector<Value> decompose(Decomposer &d, mt::RMSNormOp op) {
  TensorBuilder &t = d.tensors();
  Value x = op.getInput();
  Value meanSquare = t.reduceMean(t.mul(x, x), {op.getDim()});
  Value inverse = t.rsqrt(t.add(meanSquare, t.scalar(op.getEpsilon().convertToDouble(), x)));
  return {d.conform(t.mul(t.mul(x, inverse), op.getScale()), op.getType())};
}

//===----------------------------------------------------------------------===//
// Attention (Decomposer.cpp: ring attention's partition rule builds its block steps from the
// same pieces)
//===----------------------------------------------------------------------===//

SmallVector<Value> decompose(Decomposer &d, mt::AttentionOp op) {
  return lowering::decomposeAttention(d, op);
}

SmallVector<Value> decompose(Decomposer &d, mt::AttentionGradOp op) {
  return lowering::decomposeAttentionGrad(d, op);
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

/// `value` in the element type of `like`.
Value inElementTypeOf(Decomposer &d, Value value, Value like) {
  return d.conform(value, Decomposer::typeOf(value).withElementType(
                              Decomposer::typeOf(like).getElementType()));
}

/// The weight sum of a masked loss, in the type of `like`: sum(mask), at least 1 (a
/// micro-batch whose every position is masked has the loss 0, not 0 / 0).
Value maskSum(Decomposer &d, Value mask, Value like) {
  TensorBuilder &t = d.tensors();
  Value sum = t.sumAll(inElementTypeOf(d, mask, like));
  return t.max(sum, t.scalar(1.0, sum));
}

SmallVector<Value> decompose(Decomposer &d, mt::CrossEntropyOp op) {
  TensorBuilder &t = d.tensors();
  Value x = op.getLogits();
  StringRef dim = op.getDim();
  Value logSumExp = t.logSumExp(x, dim);
  Value picked = t.reduceSum(t.mul(x, d.oneHot(x, op.getLabels(), dim)), {dim});
  Value loss = t.sub(logSumExp, picked);
  Value mask = op.getMask();
  if (!mask)
    return {d.conform(d.meanOverPositions(loss), op.getType())};
  Value masked = t.sumAll(t.mul(loss, inElementTypeOf(d, mask, loss)));
  return {d.conform(t.div(masked, maskSum(d, mask, masked)), op.getType())};
}

SmallVector<Value> decompose(Decomposer &d, mt::CrossEntropyGradOp op) {
  TensorBuilder &t = d.tensors();
  Value x = op.getLogits();
  StringRef dim = op.getDim();
  Value lossGrad = inElementTypeOf(d, op.getLossGrad(), x);
  // The weight of each position: loss_grad / positions, or mask * loss_grad / sum(mask).
  Value factor;
  if (Value mask = op.getMask()) {
    factor = t.mul(inElementTypeOf(d, mask, x), t.div(lossGrad, maskSum(d, mask, x)));
  } else {
    double positions = static_cast<double>(Decomposer::typeOf(op.getLabels()).getNumElements());
    factor = t.div(lossGrad, t.scalar(positions, x));
  }
  Value delta = t.sub(d.softmax(x, dim), d.oneHot(x, op.getLabels(), dim));
  return {d.conform(t.mul(delta, factor), op.getType())};
}

//===----------------------------------------------------------------------===//
// Router z-loss
//===----------------------------------------------------------------------===//

SmallVector<Value> decompose(Decomposer &d, mt::ZLossOp op) {
  TensorBuilder &t = d.tensors();
  Value logSumExp = t.logSumExp(op.getLogits(), op.getDim());
  return {d.conform(d.meanOverPositions(t.mul(logSumExp, logSumExp)), op.getType())};
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

/// The ops a builder inserts.
struct InsertedOps : OpBuilder::Listener {
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    ops.push_back(op);
  }
  SmallVector<Operation *> ops;
};

/// The low float type (bf16, f16) of `op`'s first operand or result that has one.
Type lowElementType(Operation *op) {
  for (Type type : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()))
    if (lowering::widenedType(type))
      return cast<NamedTensorType>(type).getElementType();
  return {};
}

/// Whether attention (or its backward) `op` has queries and keys of one sequence length.
bool hasEqualSequences(Operation *op) {
  auto lengthOf = [&](Value value, StringRef dim) {
    auto type = cast<NamedTensorType>(value.getType());
    return type.getDimSizes()[*type.getDimIndex(dim)];
  };
  if (auto attention = dyn_cast<mt::AttentionOp>(op))
    return lengthOf(attention.getQuery(), attention.getSeqDim()) ==
           lengthOf(attention.getKey(), attention.getSeqDim());
  auto grad = cast<mt::AttentionGradOp>(op);
  return lengthOf(grad.getQuery(), grad.getSeqDim()) == lengthOf(grad.getKey(), grad.getSeqDim());
}

class DecomposePass : public mtc::lowering::impl::MTDecomposePassBase<DecomposePass> {
public:
  void runOnOperation() override;
};

void DecomposePass::runOnOperation() {
  ModuleOp module = getOperation();
  DimNames names(module);
  // Under ring attention attention stays whole: its partition rule builds the block steps
  // (compiler/sharding/AttentionPartition.cpp).
  mt::ParallelAttr parallel = mt::ParallelAttr::lookup(module);
  bool ringAttention = parallel && parallel.usesRingAttention();
  // Fused attention (mtc compile --fused-attention) stays whole too: mt-to-linalg lowers it
  // to FlashAttention-2's block loops. Context parallelism splits attention's sequence,
  // which its loops do not (yet) exchange.
  bool fusedAttention = mt::getFusedAttentionBlock(module).has_value();
  if (fusedAttention && parallel && parallel.getDegree("cp") > 1) {
    module.emitError() << "fused attention (--fused-attention) does not support context "
                          "parallelism (cp "
                       << parallel.getDegree("cp")
                       << "): compile without --fused-attention or with cp 1";
    return signalPassFailure();
  }
  SmallVector<Operation *> composite;
  SmallVector<Operation *> fused;
  for (auto func : module.getOps<func::FuncOp>())
    func.walk([&](Operation *op) {
      if (ringAttention && isa<mt::AttentionOp, mt::AttentionGradOp>(op))
        return;
      // (Attention of queries over keys of another length, as mt-opt may be given, is
      // decomposed: the block loops pair query and key blocks of one length.)
      if (fusedAttention && isa<mt::AttentionOp, mt::AttentionGradOp>(op) &&
          hasEqualSequences(op)) {
        fused.push_back(op);
        return;
      }
      if (isa<mt::SoftmaxOp, mt::LayerNormOp, mt::RMSNormOp, mt::AttentionOp, mt::AttentionGradOp,
              mt::CrossEntropyOp, mt::CrossEntropyGradOp, mt::ZLossOp>(op))
        composite.push_back(op);
    });
  // A fused attention of bf16/f16 tensors computes in f32, as its decomposition would: its
  // widened copy stays whole between the casts.
  for (Operation *op : fused) {
    OpBuilder builder(op);
    InsertedOps inserted;
    builder.setListener(&inserted);
    Operation *wide = lowering::widenedClone(builder, op);
    if (!wide)
      continue;
    builder.setInsertionPointAfter(wide);
    for (auto [result, wideResult] : llvm::zip_equal(op->getResults(), wide->getResults())) {
      Value replacement = wideResult;
      if (wideResult.getType() != result.getType())
        replacement = mt::CastOp::create(builder, op->getLoc(), result.getType(), wideResult);
      result.replaceAllUsesWith(replacement);
    }
    auto stored = TypeAttr::get(lowElementType(op));
    for (Operation *created : inserted.ops)
      created->setAttr(mt::kStoredTypeAttrName, stored);
    op->erase();
  }
  for (Operation *op : composite) {
    OpBuilder builder(op);
    InsertedOps inserted;
    builder.setListener(&inserted);
    Operation *wide = lowering::widenedClone(builder, op);
    Operation *target = wide ? wide : op;
    Decomposer d(builder, op->getLoc(), names);
    SmallVector<Value> replacements =
        TypeSwitch<Operation *, SmallVector<Value>>(target)
            .Case<mt::SoftmaxOp, mt::LayerNormOp, mt::RMSNormOp, mt::AttentionOp,
                  mt::AttentionGradOp, mt::CrossEntropyOp, mt::CrossEntropyGradOp,
                  mt::ZLossOp>(
                [&](auto concrete) { return decompose(d, concrete); });
    for (auto [result, replacement] : llvm::zip_equal(target->getResults(), replacements))
      if (result.getType() != replacement.getType()) {
        op->emitOpError() << "decomposition produced " << replacement.getType() << " in place of "
                          << result.getType();
        return signalPassFailure();
      }
    if (wide) {
      // Back to the low type at the op's results.
      for (auto [result, replacement] : llvm::zip_equal(op->getResults(), replacements))
        if (replacement.getType() != result.getType())
          replacement = mt::CastOp::create(builder, op->getLoc(), result.getType(), replacement);
      // What the f32 computation is stored as between kernels, for the cost model (the
      // constants and positions compute nothing: left alone, as before).
      auto stored = TypeAttr::get(lowElementType(op));
      for (Operation *created : inserted.ops)
        if (created != wide && !created->hasTrait<mt::OpTrait::CallConstant>())
          created->setAttr(mt::kStoredTypeAttrName, stored);
      wide->erase();
    }
    op->replaceAllUsesWith(replacements);
    op->erase();
  }
}

} // namespace
