//===- OptimizerUpdate.cpp - the optimizer's math built from values -------===//

#include "compiler/optimizer/OptimizerUpdate.h"

#include <numbers>

using namespace mlir;
using namespace mtc;
using namespace mtc::optimizer;
using mt::TensorBuilder;

static double valueOr(FloatAttr value, double fallback) {
  return value ? value.getValueAsDouble() : fallback;
}

FailureOr<OptimizerSettings> optimizer::readOptimizerSettings(ModuleOp module) {
  OptimizerSettings s;
  mt::TrainAttr train = mt::TrainAttr::lookup(module);
  if (!train)
    return s;
  if (mt::OptimizerAttr optimizer = train.getOptimizer()) {
    s.kind = optimizer.getKind();
    if (s.kind == mt::OptimizerKind::SGD)
      s.weightDecay = 0;
    s.lr = valueOr(optimizer.getLr(), s.lr);
    s.eps = valueOr(optimizer.getEps(), s.eps);
    s.weightDecay = valueOr(optimizer.getWeightDecay(), s.weightDecay);
    s.momentum = valueOr(optimizer.getMomentum(), 0);
    if (DenseF64ArrayAttr betas = optimizer.getBetas()) {
      s.beta1 = betas[0];
      s.beta2 = betas[1];
    }
  }
  if (mt::LrScheduleAttr lr = train.getLr()) {
    s.schedule = lr.getKind();
    s.warmup = static_cast<double>(lr.getWarmup().value_or(0));
    s.minLr = valueOr(lr.getMin(), 0);
    s.decaySteps = static_cast<double>(lr.getDecaySteps().value_or(train.getSteps().value_or(0)));
    if (s.schedule != mt::LrScheduleKind::Constant && s.decaySteps <= s.warmup)
      return module.emitError("the ")
                 << mt::stringifyLrScheduleKind(s.schedule)
                 << " learning-rate schedule decays over 'decay_steps' (or train { steps }), "
                    "which must exceed the warm-up of "
                 << s.warmup << " steps",
             failure();
  }
  s.clipGrad = valueOr(train.getClipGrad(), 0);
  return s;
}

SmallVector<StringRef> optimizer::stateRoles(const OptimizerSettings &s) {
  if (s.kind == mt::OptimizerKind::AdamW)
    return {"exp_avg", "exp_avg_sq"};
  if (s.momentum > 0)
    return {"momentum_buffer"};
  return {};
}

Value optimizer::scaleBy(TensorBuilder &t, Value tensor, Value scalar) {
  return t.mul(tensor, t.transposeTo(scalar, mt::NamedTensorType::getScalar(
                                                 t.typeOf(tensor).getElementType())));
}

/// `scalar` as an f32 scalar like `f32Scalar`.
static Value toF32(TensorBuilder &t, Value scalar, Value f32Scalar) {
  return t.transposeTo(scalar, TensorBuilder::typeOf(f32Scalar));
}

Value optimizer::sumOfSquares(TensorBuilder &t, ArrayRef<Value> grads, Value f32Scalar) {
  Value squares;
  for (Value grad : grads) {
    Value sum = toF32(t, t.sumAll(t.mul(grad, grad)), f32Scalar);
    squares = squares ? t.add(squares, sum) : sum;
  }
  return squares ? squares : t.scalar(0.0, f32Scalar);
}

Value optimizer::clipCoefficient(TensorBuilder &t, const OptimizerSettings &s, Value norm) {
  if (s.clipGrad <= 0)
    return nullptr;
  auto c = [&](double v) { return t.scalar(v, norm); };
  // min(1, clip / (norm + 1e-6)) without a division by zero.
  return t.div(c(s.clipGrad), t.max(t.add(norm, c(1e-6)), c(s.clipGrad)));
}

/// lr(step): warm-up from lr/warmup to lr over `warmup` steps, then the decay.
static Value learningRate(TensorBuilder &t, const OptimizerSettings &s, Value step) {
  auto c = [&](double v) { return t.scalar(v, step); };
  Value peak = c(s.lr);
  Value decayed = peak;
  if (s.schedule != mt::LrScheduleKind::Constant) {
    Value progress = t.div(t.sub(step, c(s.warmup)), c(s.decaySteps - s.warmup));
    progress = t.min(t.max(progress, c(0.0)), c(1.0));
    Value fraction = s.schedule == mt::LrScheduleKind::Cosine
                         ? t.mul(c(0.5), t.add(c(1.0), t.cos(t.mul(c(std::numbers::pi), progress))))
                         : t.sub(c(1.0), progress);
    decayed = t.add(c(s.minLr), t.mul(c(s.lr - s.minLr), fraction));
  }
  if (s.warmup <= 0)
    return decayed;
  Value warm = t.mul(peak, t.div(t.add(step, c(1.0)), c(s.warmup)));
  Value warming = t.greater(c(s.warmup), step); // 1 while step < warmup
  return t.add(t.mul(warming, warm), t.mul(t.sub(c(1.0), warming), decayed));
}

StepScalars optimizer::buildStepScalars(TensorBuilder &t, const OptimizerSettings &s,
                                        Value step) {
  auto c = [&](double v) { return t.scalar(v, step); };
  StepScalars scalars;
  scalars.lr = learningRate(t, s, step);
  Value stepsTaken = t.add(step, c(1.0));
  scalars.correction1 = t.sub(c(1.0), t.pow(c(s.beta1), stepsTaken));
  scalars.correction2 = t.sub(c(1.0), t.pow(c(s.beta2), stepsTaken));
  return scalars;
}

UpdatedParameter optimizer::updateParameter(TensorBuilder &t, const OptimizerSettings &s,
                                            const StepScalars &scalars, Value p, Value grad,
                                            ValueRange states, bool decays) {
  // Constants and step scalars in the parameter's element type.
  auto c = [&](double v) { return t.scalar(v, p); };
  auto like = [&](Value scalar) {
    return t.transposeTo(scalar,
                         mt::NamedTensorType::getScalar(t.typeOf(p).getElementType()));
  };
  Value lrP = like(scalars.lr), correction1P = like(scalars.correction1),
        correction2P = like(scalars.correction2);
  UpdatedParameter updated;
  Value update;
  if (s.kind == mt::OptimizerKind::AdamW) {
    Value m = states[0], v = states[1];
    Value m2 = t.add(t.mul(c(s.beta1), m), t.mul(c(1 - s.beta1), grad));
    Value v2 = t.add(t.mul(c(s.beta2), v), t.mul(c(1 - s.beta2), t.mul(grad, grad)));
    updated.states = {m2, v2};
    update = t.div(t.div(m2, correction1P), t.add(t.sqrt(t.div(v2, correction2P)), c(s.eps)));
    if (decays)
      update = t.add(update, t.mul(c(s.weightDecay), p));
  } else {
    update = decays ? t.add(grad, t.mul(c(s.weightDecay), p)) : grad;
    if (s.momentum > 0) {
      update = t.add(t.mul(c(s.momentum), states[0]), update);
      updated.states = {update};
    }
  }
  updated.param = t.transposeTo(t.sub(p, t.mul(lrP, update)), t.typeOf(p));
  return updated;
}
