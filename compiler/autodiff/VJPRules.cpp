//===- VJPRules.cpp - vector-Jacobian products of the mt ops --------------===//
//
// One `vjp` overload per differentiable op, attached as an external model of
// DifferentiableOpInterface. Each writes the textbook gradient as mt ops; ops whose
// gradient is more than a few elementwise steps (attention, cross-entropy, embedding,
// MoE routing) get a fused backward op of the dialect instead.
//
//===----------------------------------------------------------------------===//

#include "compiler/autodiff/DifferentiableOpInterface.h"
#include "dialects/mt/Utils/TensorBuilder.h"

#include "dialects/mt/IR/MTOps.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::autodiff;
using mtc::mt::TensorBuilder;

#include "compiler/autodiff/DifferentiableOpInterface.cpp.inc"

namespace {

using Grads = SmallVectorImpl<Value>;

SmallVector<StringRef> names(ArrayAttr dims) {
  return llvm::to_vector(llvm::map_range(dims.getAsRange<StringAttr>(),
                                         [](StringAttr s) { return s.getValue(); }));
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult vjp(mt::AddOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  out.assign({t.sumTo(g[0], t.typeOf(op.getLhs())), t.sumTo(g[0], t.typeOf(op.getRhs()))});
  return success();
}

LogicalResult vjp(mt::SubOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  out.assign({t.sumTo(g[0], t.typeOf(op.getLhs())), t.sumTo(t.neg(g[0]), t.typeOf(op.getRhs()))});
  return success();
}

LogicalResult vjp(mt::MulOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  out.assign({t.sumTo(t.mul(g[0], op.getRhs()), t.typeOf(op.getLhs())),
         t.sumTo(t.mul(g[0], op.getLhs()), t.typeOf(op.getRhs()))});
  return success();
}

LogicalResult vjp(mt::DivOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  // d(a/b)/db = -(a/b)/b
  Value dLhs = t.div(g[0], op.getRhs());
  Value dRhs = t.neg(t.mul(dLhs, op.getResult()));
  out.assign({t.sumTo(dLhs, t.typeOf(op.getLhs())), t.sumTo(dRhs, t.typeOf(op.getRhs()))});
  return success();
}

LogicalResult vjp(mt::MaxOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  // Ties send the gradient to the lhs.
  Value rhsWins = t.greater(op.getRhs(), op.getLhs());
  Value lhsWins = t.sub(t.scalar(1.0, rhsWins), rhsWins);
  out.assign({t.sumTo(t.mul(g[0], lhsWins), t.typeOf(op.getLhs())),
         t.sumTo(t.mul(g[0], rhsWins), t.typeOf(op.getRhs()))});
  return success();
}

LogicalResult vjp(mt::PowOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  // d(a^b)/da = b a^(b-1); d(a^b)/db = a^b log a
  Value exponent = t.sub(op.getRhs(), t.scalar(1.0, op.getRhs()));
  Value dLhs = t.mul(g[0], t.mul(op.getRhs(), t.pow(op.getLhs(), exponent)));
  Value dRhs = t.mul(g[0], t.mul(op.getResult(), t.log(op.getLhs())));
  out.assign({t.sumTo(dLhs, t.typeOf(op.getLhs())), t.sumTo(dRhs, t.typeOf(op.getRhs()))});
  return success();
}

LogicalResult vjp(mt::GreaterOp, TensorBuilder &, ValueRange, Grads &out) {
  out.assign({Value(), Value()}); // a step function: zero almost everywhere
  return success();
}

LogicalResult vjp(mt::NegOp, TensorBuilder &t, ValueRange g, Grads &out) {
  out.assign({t.neg(g[0])});
  return success();
}

LogicalResult vjp(mt::ExpOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  out.assign({t.mul(g[0], op.getResult())});
  return success();
}

LogicalResult vjp(mt::LogOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  out.assign({t.div(g[0], op.getInput())});
  return success();
}

LogicalResult vjp(mt::SqrtOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  out.assign({t.div(t.mul(g[0], t.scalar(0.5, g[0])), op.getResult())});
  return success();
}

LogicalResult vjp(mt::RsqrtOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  // d x^(-1/2) = -1/2 x^(-3/2) = -1/2 y^3
  Value y = op.getResult();
  out.assign({t.mul(t.mul(g[0], t.scalar(-0.5, y)), t.mul(y, t.mul(y, y)))});
  return success();
}

LogicalResult vjp(mt::TanhOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  Value y = op.getResult();
  out.assign({t.mul(g[0], t.sub(t.scalar(1.0, y), t.mul(y, y)))});
  return success();
}

LogicalResult vjp(mt::SigmoidOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  Value y = op.getResult();
  out.assign({t.mul(g[0], t.mul(y, t.sub(t.scalar(1.0, y), y)))});
  return success();
}

LogicalResult vjp(mt::ReluOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  Value x = op.getInput();
  out.assign({t.mul(g[0], t.greater(x, t.scalar(0.0, x)))});
  return success();
}

LogicalResult vjp(mt::SiluOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  // d x s(x) = s (1 + x (1 - s))
  Value x = op.getInput();
  Value s = t.sigmoid(x);
  Value one = t.scalar(1.0, x);
  out.assign({t.mul(g[0], t.mul(s, t.add(one, t.mul(x, t.sub(one, s)))))});
  return success();
}

LogicalResult vjp(mt::GeluOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  Value derivative =
      mt::GeluGradOp::create(t.builder(), t.location(), op.getInput(), op.getApproximate());
  out.assign({t.mul(g[0], derivative)});
  return success();
}

LogicalResult vjp(mt::CastOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  out.assign({t.transposeTo(g[0], t.typeOf(op.getInput()))});
  return success();
}

LogicalResult vjp(mt::TransposeOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  out.assign({t.transposeTo(g[0], t.typeOf(op.getInput()))});
  return success();
}

LogicalResult vjp(mt::BroadcastOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  out.assign({t.sumTo(g[0], t.typeOf(op.getInput()))});
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions and reductions
//===----------------------------------------------------------------------===//

/// The gradient of one contraction operand: contract the output gradient with the other
/// operand over that operand's own dimensions (those neither side of `target` has).
Value contractOperandGrad(TensorBuilder &t, Value grad, Value other, mt::NamedTensorType target) {
  SmallVector<StringRef> over;
  for (StringAttr name : t.typeOf(other).getDimNames())
    if (!target.hasDim(name) && t.typeOf(grad).hasDim(name))
      over.push_back(name.getValue());
  Value partial = over.empty() ? t.mul(grad, other) : t.contract(grad, other, over);
  return t.sumTo(partial, target);
}

LogicalResult vjp(mt::ContractOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  out.assign({contractOperandGrad(t, g[0], op.getRhs(), t.typeOf(op.getLhs())),
         contractOperandGrad(t, g[0], op.getLhs(), t.typeOf(op.getRhs()))});
  return success();
}

LogicalResult vjp(mt::ReduceSumOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  out.assign({t.broadcastTo(g[0], t.typeOf(op.getInput()))});
  return success();
}

LogicalResult vjp(mt::ReduceMeanOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  mt::NamedTensorType input = t.typeOf(op.getInput());
  int64_t count = input.getNumElements() / t.typeOf(op.getResult()).getNumElements();
  Value scaled = t.div(g[0], t.scalar(static_cast<double>(count), g[0]));
  out.assign({t.broadcastTo(scaled, input)});
  return success();
}

LogicalResult vjp(mt::ReduceMaxOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  // Every position equal to the maximum receives the gradient.
  mt::NamedTensorType input = t.typeOf(op.getInput());
  Value max = t.broadcastTo(op.getResult(), input);
  Value below = t.greater(max, op.getInput());
  Value isMax = t.sub(t.scalar(1.0, below), below);
  out.assign({t.mul(t.broadcastTo(g[0], input), isMax)});
  return success();
}

//===----------------------------------------------------------------------===//
// Normalisation and attention
//===----------------------------------------------------------------------===//

LogicalResult vjp(mt::SoftmaxOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  // y (g - sum(g y))
  Value y = op.getResult();
  Value dot = t.reduceSum(t.mul(g[0], y), {op.getDim()});
  out.assign({t.transposeTo(t.mul(y, t.sub(g[0], dot)), t.typeOf(y))});
  return success();
}

/// Shared by layer_norm and rms_norm: with xhat the normalised input, r = 1/sqrt(var + eps)
/// and gh = g * scale, dx = r * (gh - mean(gh) - xhat * mean(gh * xhat)), where the
/// mean(gh) term exists only when the mean was subtracted.
Value normInputGrad(TensorBuilder &t, Value gh, Value xhat, Value r, StringRef dim,
                    bool centred, mt::NamedTensorType inputType) {
  Value inner = t.sub(gh, t.mul(xhat, t.reduceMean(t.mul(gh, xhat), {dim})));
  if (centred)
    inner = t.sub(inner, t.reduceMean(gh, {dim}));
  return t.transposeTo(t.mul(r, inner), inputType);
}

LogicalResult vjp(mt::LayerNormOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  Value x = op.getInput();
  StringRef dim = op.getDim();
  Value centred = t.sub(x, t.reduceMean(x, {dim}));
  Value variance = t.reduceMean(t.mul(centred, centred), {dim});
  Value eps = t.scalar(op.getEpsilon().convertToDouble(), x);
  Value r = t.rsqrt(t.add(variance, eps));
  Value xhat = t.transposeTo(t.mul(centred, r), t.typeOf(x));
  Value gh = t.mul(g[0], op.getScale());
  out.assign({normInputGrad(t, gh, xhat, r, dim, /*centred=*/true, t.typeOf(x)),
         t.sumTo(t.mul(g[0], xhat), t.typeOf(op.getScale()))});
  if (op.getBias())
    out.push_back(t.sumTo(g[0], t.typeOf(op.getBias())));
  return success();
}

LogicalResult vjp(mt::RMSNormOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  Value x = op.getInput();
  StringRef dim = op.getDim();
  Value eps = t.scalar(op.getEpsilon().convertToDouble(), x);
  Value r = t.rsqrt(t.add(t.reduceMean(t.mul(x, x), {dim}), eps));
  Value xhat = t.transposeTo(t.mul(x, r), t.typeOf(x));
  Value gh = t.mul(g[0], op.getScale());
  out.assign({normInputGrad(t, gh, xhat, r, dim, /*centred=*/false, t.typeOf(x)),
         t.sumTo(t.mul(g[0], xhat), t.typeOf(op.getScale()))});
  return success();
}

LogicalResult vjp(mt::RopeOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  // A rotation's adjoint is the rotation by the opposite angle, at the same positions (the
  // integer position ids have no gradient).
  auto inverse = mt::RopeOp::create(t.builder(), t.location(), g[0], op.getDimAttr(),
                                    op.getPositionAttr(), op.getThetaAttr(),
                                    op.getInverse() ? UnitAttr() : t.builder().getUnitAttr(),
                                    op.getPositions());
  if (op.getPositions())
    out.assign({inverse.getResult(), Value()});
  else
    out.assign({inverse.getResult()});
  return success();
}

LogicalResult vjp(mt::AttentionOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  // A forward that saved its log-sum-exp hands it and its output to the backward.
  SmallVector<Value> saved;
  if (op.getLse())
    saved = {op.getResult(), op.getLse()};
  auto grad = mt::AttentionGradOp::create(
      t.builder(), t.location(), op.getQuery(), op.getKey(), op.getValue(), g[0], saved,
      op.getPositions(), op.getSeqDimAttr(), op.getHeadsDimAttr(), op.getKvHeadsDimAttr(),
      op.getHeadDimAttr(), op.getCausalAttr(), op.getScaleAttr());
  // The integer document positions have no gradient.
  if (op.getPositions())
    out.assign({grad.getQueryGrad(), grad.getKeyGrad(), grad.getValueGrad(), Value()});
  else
    out.assign({grad.getQueryGrad(), grad.getKeyGrad(), grad.getValueGrad()});
  return success();
}

//===----------------------------------------------------------------------===//
// Embedding, loss, regularisation
//===----------------------------------------------------------------------===//

LogicalResult vjp(mt::GatherOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  Value table = mt::EmbeddingGradOp::create(t.builder(), t.location(), op.getTable().getType(),
                                            op.getIndices(), g[0], op.getDimAttr());
  out.assign({table, Value()});
  return success();
}

LogicalResult vjp(mt::CrossEntropyOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  // The labels and the mask (an input of the step) have no gradient.
  Value logits = mt::CrossEntropyGradOp::create(t.builder(), t.location(), op.getLogits(),
                                                op.getLabels(), g[0], op.getMask(),
                                                op.getDimAttr());
  out.assign(op->getNumOperands(), Value());
  out[0] = logits;
  return success();
}

LogicalResult vjp(mt::DropoutOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  // The mask is a function of (seed, stream, element, step): the same one applies again.
  out.assign({mt::DropoutOp::create(t.builder(), t.location(), g[0], op.getRateAttr(),
                               op.getStreamAttr())
             .getResult()});
  return success();
}

//===----------------------------------------------------------------------===//
// Dimension manipulation
//===----------------------------------------------------------------------===//

LogicalResult vjp(mt::SplitOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  // Merging the parts back, where the first of them is, gives the input's type.
  auto merged = mt::MergeOp::create(t.builder(), t.location(), g[0], op.getInto(), op.getDimAttr());
  out.assign({merged.getResult()});
  return success();
}

LogicalResult vjp(mt::MergeOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  // Splitting puts the parts where the merged dimension is; reorder to the input's layout.
  mt::NamedTensorType input = t.typeOf(op.getInput());
  SmallVector<mt::NamedDim> dims;
  for (const mt::NamedDim &dim : t.typeOf(g[0]).getDims()) {
    if (dim.name != op.getIntoAttr()) {
      dims.push_back(dim);
      continue;
    }
    for (StringRef part : names(op.getDims()))
      dims.push_back({t.builder().getStringAttr(part), input.getDimSize(part)});
  }
  auto split = mt::SplitOp::create(t.builder(), t.location(), input.withDims(dims), g[0],
                                   op.getIntoAttr(), op.getDims());
  out.assign({t.transposeTo(split, input)});
  return success();
}

LogicalResult vjp(mt::RenameOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  auto back =
      mt::RenameOp::create(t.builder(), t.location(), g[0], op.getToAttr(), op.getDimAttr());
  out.assign({back.getResult()});
  return success();
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

LogicalResult vjp(mt::TopKOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  if (!g[0]) {
    out.assign({Value()}); // only the indices are used: routing is not differentiable
    return success();
  }
  out.assign({mt::TopKGradOp::create(t.builder(), t.location(), op.getInput().getType(), g[0],
                                op.getIndices(), op.getDimAttr(), op.getKDimAttr())
             .getResult()});
  return success();
}

LogicalResult vjp(mt::DispatchOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  // Dispatch copies each token into its experts' slots; its adjoint sums the slots back,
  // which is combine with unit weights.
  mt::NamedTensorType indices = t.typeOf(op.getIndices());
  Value ones = t.broadcastTo(t.scalar(1.0, op.getInput()),
                             indices.withElementType(t.typeOf(op.getInput()).getElementType()));
  // Combine gives the token dimensions, then the features: reorder to the input's layout.
  auto combined =
      mt::CombineOp::create(t.builder(), t.location(), g[0], op.getIndices(), ones,
                            op.getKDimAttr(), op.getExpertDimAttr(), op.getCapacityDimAttr());
  out.assign({t.transposeTo(combined, t.typeOf(op.getInput())), Value()});
  return success();
}

LogicalResult vjp(mt::CombineOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  auto grad = mt::CombineGradOp::create(t.builder(), t.location(), op.getInput(), op.getIndices(),
                                        op.getWeights(), g[0], op.getKDimAttr(),
                                        op.getExpertDimAttr(), op.getCapacityDimAttr());
  out.assign({grad.getInputGrad(), Value(), grad.getWeightsGrad()});
  return success();
}

LogicalResult vjp(mt::LoadBalancingLossOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  out.assign({mt::LoadBalancingLossGradOp::create(t.builder(), t.location(), op.getLogits(),
                                                  op.getIndices(), g[0], op.getExpertDimAttr(),
                                                  op.getKDimAttr(), op.getProbabilitiesAttr())
                  .getResult(),
              Value()});
  return success();
}

LogicalResult vjp(mt::ZLossOp op, TensorBuilder &t, ValueRange g, Grads &out) {
  // d mean(lse^2) / dx = 2 * lse * softmax(x) / positions.
  Value logits = op.getLogits();
  mt::NamedTensorType type = t.typeOf(logits);
  double positions =
      static_cast<double>(type.getNumElements() / type.getDimSize(op.getDim()));
  Value scale = t.mul(t.logSumExp(logits, op.getDim()), t.div(g[0], t.scalar(positions / 2, g[0])));
  Value softmax = mt::SoftmaxOp::create(t.builder(), t.location(), logits, op.getDimAttr());
  out.assign({t.transposeTo(t.mul(softmax, scale), type)});
  return success();
}

/// Routes the interface to the `vjp` overload of the concrete op.
template <typename OpTy>
struct VJPModel : DifferentiableOpInterface::ExternalModel<VJPModel<OpTy>, OpTy> {
  LogicalResult buildVJP(Operation *op, OpBuilder &builder, ValueRange resultGrads,
                         SmallVectorImpl<Value> &operandGrads) const {
    TensorBuilder t(builder, op->getLoc());
    // Single-result ops see a gradient for their one result; multi-result ops handle nulls.
    if (op->getNumResults() == 1 && !resultGrads[0])
      return op->emitOpError("VJP requested without a result gradient");
    return vjp(cast<OpTy>(op), t, resultGrads, operandGrads);
  }
};

template <typename... OpTys>
void attach(MLIRContext *context) {
  (OpTys::template attachInterface<VJPModel<OpTys>>(*context), ...);
}

} // namespace

void mtc::autodiff::registerVJPRules(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, mt::MTDialect *) {
    attach<mt::AddOp, mt::SubOp, mt::MulOp, mt::DivOp, mt::MaxOp, mt::PowOp, mt::GreaterOp,
           mt::NegOp, mt::ExpOp, mt::LogOp, mt::SqrtOp, mt::RsqrtOp, mt::TanhOp, mt::SigmoidOp,
           mt::ReluOp, mt::SiluOp, mt::GeluOp, mt::CastOp, mt::TransposeOp, mt::BroadcastOp,
           mt::ContractOp, mt::ReduceSumOp, mt::ReduceMeanOp, mt::ReduceMaxOp, mt::SoftmaxOp,
           mt::LayerNormOp, mt::RMSNormOp, mt::RopeOp, mt::AttentionOp, mt::GatherOp,
           mt::CrossEntropyOp, mt::DropoutOp, mt::SplitOp, mt::MergeOp, mt::RenameOp,
           mt::TopKOp, mt::DispatchOp, mt::CombineOp, mt::LoadBalancingLossOp,
           mt::ZLossOp>(context);
  });
}
