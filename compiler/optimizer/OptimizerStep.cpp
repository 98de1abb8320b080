//===- OptimizerStep.cpp - AdamW / SGD, clipping, LR schedules ------------===//

#include "compiler/optimizer/Passes.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/TensorBuilder.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"

#include <numbers>

namespace mtc::optimizer {
#define GEN_PASS_DEF_MTOPTIMIZERPASS
#include "compiler/optimizer/Passes.h.inc"
} // namespace mtc::optimizer

using namespace mlir;
using namespace mtc;
using mt::TensorBuilder;

namespace {

/// The settings the step needs, read from the module's `#mt.train` (whose verifier checks
/// the values; the defaults stand for absent fields).
struct Settings {
  mt::OptimizerKind kind = mt::OptimizerKind::AdamW;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.01;
  double momentum = 0;
  mt::LrScheduleKind schedule = mt::LrScheduleKind::Constant;
  double warmup = 0, minLr = 0, decaySteps = 0;
  double clipGrad = 0;
};

double valueOr(FloatAttr value, double fallback) {
  return value ? value.getValueAsDouble() : fallback;
}

FailureOr<Settings> readSettings(ModuleOp module) {
  Settings s;
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

class OptimizerPass : public mtc::optimizer::impl::MTOptimizerPassBase<OptimizerPass> {
public:
  void runOnOperation() override;

private:
  Value learningRate(TensorBuilder &t, const Settings &s, Value step);
};

/// lr(step): warm-up from lr/warmup to lr over `warmup` steps, then the decay.
Value OptimizerPass::learningRate(TensorBuilder &t, const Settings &s, Value step) {
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

void OptimizerPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (module.lookupSymbol("optimizer_step")) {
    module.emitError("module already has an optimizer step");
    return signalPassFailure();
  }
  FailureOr<Settings> settings = readSettings(module);
  if (failed(settings))
    return signalPassFailure();
  const Settings &s = *settings;

  // Storage types: a layer parameter is stored (and updated) with all its instances.
  llvm::StringMap<int64_t> instances;
  module.walk([&](mt::RepeatOp repeat) {
    if (auto callee = module.lookupSymbol<func::FuncOp>(repeat.getCallee()))
      if (std::optional<StringRef> layer = mt::MTDialect::getLayerOf(callee);
          layer && *layer == repeat.getCallee())
        instances[*layer] += repeat.getCount();
  });
  SmallVector<mt::ParamOp> params = llvm::to_vector(module.getOps<mt::ParamOp>());
  SmallVector<Type> storage;
  // Weight decay applies to weights and embeddings, the parameters some mt.contract or
  // mt.gather reads; gains and biases (read by elementwise ops) are not decayed. The choice
  // is recorded on the parameter for the plan.
  llvm::StringSet<> contracted;
  module.walk([&](mt::ParamRefOp ref) {
    for (Operation *user : ref->getUsers())
      if (isa<mt::ContractOp, mt::GatherOp>(user))
        contracted.insert(ref.getParam());
  });
  for (mt::ParamOp param : params) {
    if (s.weightDecay > 0 && contracted.contains(param.getSymName()))
      param->setAttr(mt::MTDialect::kWeightDecayAttrName, UnitAttr::get(&getContext()));
    mt::NamedTensorType type = param.getTensorType();
    if (std::optional<StringRef> layer = param.getLayer()) {
      SmallVector<mt::NamedDim> dims = {
          {StringAttr::get(&getContext(), "layers"), instances.lookup(*layer)}};
      llvm::append_range(dims, type.getDims());
      type = type.withDims(dims);
    }
    storage.push_back(type);
  }

  OpBuilder builder(module.getBodyRegion());
  builder.setInsertionPointToEnd(module.getBody());
  Location loc = module.getLoc();
  MLIRContext *context = &getContext();
  Type f32 = builder.getF32Type();
  auto scalarType = mt::NamedTensorType::getScalar(f32);

  // Optimizer state, declared next to the parameters it belongs to.
  SmallVector<StringRef> stateRoles;
  if (s.kind == mt::OptimizerKind::AdamW)
    stateRoles = {"exp_avg", "exp_avg_sq"};
  else if (s.momentum > 0)
    stateRoles = {"momentum_buffer"};
  for (auto [param, type] : llvm::zip(params, storage)) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointAfter(param);
    for (StringRef role : stateRoles)
      mt::StateOp::create(builder, param.getLoc(),
                          builder.getStringAttr(param.getSymName() + "." + role),
                          FlatSymbolRefAttr::get(param.getSymNameAttr()), TypeAttr::get(type));
  }

  SmallVector<Type> inputs = {scalarType, scalarType};
  llvm::append_range(inputs, storage);
  auto step = func::FuncOp::create(builder, loc, "optimizer_step",
                                   builder.getFunctionType(inputs, {scalarType, scalarType}));
  SmallVector<Attribute> symbols;
  for (mt::ParamOp param : params)
    symbols.push_back(FlatSymbolRefAttr::get(param.getSymNameAttr()));
  step->setAttr("mt.grads", builder.getArrayAttr(symbols));
  Block *body = step.addEntryBlock();
  builder.setInsertionPointToStart(body);
  TensorBuilder t(builder, loc);
  Value stepValue = body->getArgument(0), gradScale = body->getArgument(1);
  auto c = [&](double v) { return t.scalar(v, stepValue); };

  // Scalars of the step are f32; each parameter is updated in its own element type.
  auto like = [&](Value scalar, Value tensor) {
    return t.transposeTo(scalar, mt::NamedTensorType::getScalar(
                                     t.typeOf(tensor).getElementType()));
  };
  SmallVector<Value> grads;
  for (BlockArgument grad : body->getArguments().drop_front(2))
    grads.push_back(t.mul(grad, like(gradScale, grad)));

  // Global norm over every gradient element, counted once, accumulated in f32.
  Value squares;
  for (Value grad : grads) {
    Value sum = like(t.sumAll(t.mul(grad, grad)), stepValue);
    squares = squares ? t.add(squares, sum) : sum;
  }
  Value norm = squares ? t.sqrt(squares) : c(0.0);
  if (s.clipGrad > 0) {
    // min(1, clip / (norm + 1e-6)) without a division by zero.
    Value coef = t.div(c(s.clipGrad), t.max(t.add(norm, c(1e-6)), c(s.clipGrad)));
    for (Value &grad : grads)
      grad = t.mul(grad, like(coef, grad));
  }
  Value lr = learningRate(t, s, stepValue);

  auto read = [&](StringRef symbol, Type type) -> Value {
    return mt::ParamRefOp::create(builder, loc, type, FlatSymbolRefAttr::get(context, symbol));
  };
  auto write = [&](StringRef symbol, Value value) {
    mt::AssignOp::create(builder, loc, FlatSymbolRefAttr::get(context, symbol), value);
  };
  Value stepsTaken = t.add(stepValue, c(1.0));
  Value correction1 = t.sub(c(1.0), t.pow(c(s.beta1), stepsTaken));
  Value correction2 = t.sub(c(1.0), t.pow(c(s.beta2), stepsTaken));
  for (auto [param, type, grad] : llvm::zip(params, storage, grads)) {
    StringRef name = param.getSymName();
    Value p = read(name, type);
    // Constants and step scalars in the parameter's element type.
    auto c = [&](double v) { return t.scalar(v, p); };
    Value lrP = like(lr, p), correction1P = like(correction1, p), correction2P = like(correction2, p);
    bool decays = param->hasAttr(mt::MTDialect::kWeightDecayAttrName);
    Value update;
    if (s.kind == mt::OptimizerKind::AdamW) {
      Value m = read((name + ".exp_avg").str(), type);
      Value v = read((name + ".exp_avg_sq").str(), type);
      Value m2 = t.add(t.mul(c(s.beta1), m), t.mul(c(1 - s.beta1), grad));
      Value v2 = t.add(t.mul(c(s.beta2), v), t.mul(c(1 - s.beta2), t.mul(grad, grad)));
      write((name + ".exp_avg").str(), m2);
      write((name + ".exp_avg_sq").str(), v2);
      update = t.div(t.div(m2, correction1P), t.add(t.sqrt(t.div(v2, correction2P)), c(s.eps)));
      if (decays)
        update = t.add(update, t.mul(c(s.weightDecay), p));
    } else {
      update = decays ? t.add(grad, t.mul(c(s.weightDecay), p)) : grad;
      if (s.momentum > 0) {
        Value buffer = read((name + ".momentum_buffer").str(), type);
        update = t.add(t.mul(c(s.momentum), buffer), update);
        write((name + ".momentum_buffer").str(), update);
      }
    }
    write(name, t.transposeTo(t.sub(p, t.mul(lrP, update)), cast<mt::NamedTensorType>(type)));
  }
  func::ReturnOp::create(builder, loc, ValueRange{norm, lr});
}

} // namespace
