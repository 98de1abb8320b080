//===- OptimizerStep.cpp - AdamW / SGD, clipping, LR schedules ------------===//

#include "compiler/optimizer/OptimizerUpdate.h"
#include "compiler/optimizer/Passes.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/TensorBuilder.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"

namespace mtc::optimizer {
#define GEN_PASS_DEF_MTOPTIMIZERPASS
#include "compiler/optimizer/Passes.h.inc"
} // namespace mtc::optimizer

using namespace mlir;
using namespace mtc;
using namespace mtc::optimizer;
using mt::TensorBuilder;

namespace {

class OptimizerPass : public mtc::optimizer::impl::MTOptimizerPassBase<OptimizerPass> {
public:
  void runOnOperation() override;
};

void OptimizerPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (module.lookupSymbol("optimizer_step")) {
    module.emitError("module already has an optimizer step");
    return signalPassFailure();
  }
  FailureOr<OptimizerSettings> settings = readOptimizerSettings(module);
  if (failed(settings))
    return signalPassFailure();
  const OptimizerSettings &s = *settings;

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
          {StringAttr::get(&getContext(), mt::MTDialect::kLayersDimName), instances.lookup(*layer)}};
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
  SmallVector<StringRef> roles = stateRoles(s);
  for (auto [param, type] : llvm::zip(params, storage)) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointAfter(param);
    for (StringRef role : roles)
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
  step->setAttr(mt::MTDialect::kGradsAttrName, builder.getArrayAttr(symbols));
  step->setAttr(kOptimizerAttrName, builder.getUnitAttr());
  for (auto [index, symbol] : llvm::enumerate(symbols))
    step.setArgAttr(2 + index, mt::MTDialect::kGradAttrName, symbol);
  // The results say what they are: codegen guards the update with the norm
  // (mtc-update-in-place), the plan names both.
  step.setResultAttr(0, mt::MTDialect::kBufferAttrName, builder.getStringAttr("grad_norm"));
  step.setResultAttr(1, mt::MTDialect::kBufferAttrName, builder.getStringAttr("lr"));
  Block *body = step.addEntryBlock();
  builder.setInsertionPointToStart(body);
  TensorBuilder t(builder, loc);
  Value stepValue = body->getArgument(0), gradScale = body->getArgument(1);

  // Scalars of the step are f32; each parameter is updated in its own element type.
  SmallVector<Value> grads;
  for (BlockArgument grad : body->getArguments().drop_front(2))
    grads.push_back(scaleBy(t, grad, gradScale));
  // The global norm over every gradient element, counted once, accumulated in f32.
  Value norm = t.sqrt(sumOfSquares(t, grads, stepValue));
  if (Value coef = clipCoefficient(t, s, norm))
    for (Value &grad : grads)
      grad = scaleBy(t, grad, coef);
  StepScalars scalars = buildStepScalars(t, s, stepValue);

  auto read = [&](StringRef symbol, Type type) -> Value {
    return mt::ParamRefOp::create(builder, loc, type, FlatSymbolRefAttr::get(context, symbol));
  };
  auto write = [&](StringRef symbol, Value value) {
    mt::AssignOp::create(builder, loc, FlatSymbolRefAttr::get(context, symbol), value);
  };
  for (auto [param, type, grad] : llvm::zip(params, storage, grads)) {
    StringRef name = param.getSymName();
    Value p = read(name, type);
    SmallVector<Value> states;
    for (StringRef role : roles)
      states.push_back(read((name + "." + role).str(), type));
    UpdatedParameter updated =
        updateParameter(t, s, scalars, p, grad, states,
                        param->hasAttr(mt::MTDialect::kWeightDecayAttrName));
    for (auto [role, state] : llvm::zip_equal(roles, updated.states))
      write((name + "." + role).str(), state);
    write(name, updated.param);
  }
  func::ReturnOp::create(builder, loc, ValueRange{norm, scalars.lr});
}

} // namespace
