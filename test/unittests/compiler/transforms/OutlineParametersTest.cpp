//===- OutlineParametersTest.cpp - outlined training step, numerically ----===//
//
// -mt-outline-parameters must not change what the training step computes. Each test
// compiles a model through the frontend and the training pipeline, sets random parameter
// and optimizer-state values in the float64 reference interpreter, and evaluates
// `forward`, `forward_backward` and `optimizer_step` (step 0, grad_scale 1) reading and
// writing them as module state. It then runs the pass and evaluates the outlined
// functions with the same values passed as arguments: the loss, every gradient, the
// gradient norm, the learning rate and every new parameter and state value must agree
// (bitwise in practice: the arithmetic is the same; 1e-12 relative is allowed).
//
//===----------------------------------------------------------------------===//

#include "../interpreter/InterpreterTestSupport.h"
#include "test/unittests/support/LowerExample.h"

#include "compiler/pipelines/Pipelines.h"
#include "compiler/registration/Registration.h"
#include "compiler/transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <string>
#include <vector>

using namespace mtc;
using namespace mtc::interp;
using namespace mtc::interp::testing;

namespace {

/// Relative agreement required (the arithmetic is the same, so equality is expected).
constexpr double kRelative = 1e-12;

/// A model whose layer reads a model parameter (`scale`): the outlined repeats receive it
/// broadcast along `layers`. SGD with momentum, so the optimizer reads and writes a state.
constexpr llvm::StringLiteral kSharedScaleModel = R"mtl(
dims { vocab = 16, seq = 4, hidden = 8, ffn = 12 }

model shared(layers = 3) {
  param wte[vocab, hidden] init normal(0.02)
  param scale[hidden] init ones
  param lnf.g[hidden] init ones

  layer block {
    param ln.g[hidden] init ones
    param w1[hidden, ffn] init normal(0.02)
    param w2[ffn, hidden] init normal(0.02)

    fn (x[batch, seq, hidden]) -> [batch, seq, hidden] {
      h = gelu(contract(rms_norm(x, ln.g) * scale, w1, over = hidden))
      return x + contract(h, w2, over = ffn)
    }
  }

  fn forward(tokens: i32[batch, seq], labels: i32[batch, seq]) -> loss {
    x = repeat(layers) block(gather(wte, tokens))
    logits = contract(rms_norm(x, lnf.g), wte, over = hidden)
    return cross_entropy(logits, labels, over = vocab)
  }
}

train {
  optimizer sgd(lr = 0.1, momentum = 0.9, weight_decay = 0.01)
  global_batch 2  micro_batch 2  steps 10  clip_grad 1.0  precision fp32  seed 7
}
)mtl";

class OutlineParametersTest : public InterpreterTest {
protected:
  OutlineParametersTest() {
    mlir::DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
  }

  /// `.mtl` text lowered to mt, then through the training pipeline; null on failure.
  mlir::ModuleOp compileSource(llvm::StringRef source) {
    std::string errors;
    llvm::SourceMgr sourceMgr;
    unsigned bufferId = sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(source, "test.mtl"), llvm::SMLoc());
    llvm::raw_string_ostream os(errors);
    frontend::Diagnostics diags(sourceMgr, bufferId, os);
    std::unique_ptr<frontend::Module> ast = frontend::parseModule(sourceMgr, bufferId, diags);
    mlir::OwningOpRef<mlir::ModuleOp> module;
    if (ast && diags.numErrors() == 0)
      module = frontend::lowerToMT(*ast, context, diags);
    if (!module) {
      ADD_FAILURE() << "cannot lower the test model:\n" << errors;
      return nullptr;
    }
    return train(std::move(module));
  }

  /// `examples/<file>` through the frontend and the training pipeline; null on failure.
  mlir::ModuleOp compileExample(llvm::StringRef file) {
    std::string errors;
    mlir::OwningOpRef<mlir::ModuleOp> module = mtc::testing::lowerExample(context, file, errors);
    if (!module) {
      ADD_FAILURE() << "cannot lower " << file.str() << ":\n" << errors;
      return nullptr;
    }
    return train(std::move(module));
  }

  mlir::ModuleOp train(mlir::OwningOpRef<mlir::ModuleOp> module) {
    mlir::PassManager pm(&context);
    buildTrainingPipeline(pm, TrainingPipelineOptions());
    if (mlir::failed(pm.run(*module))) {
      ADD_FAILURE() << "the training pipeline failed";
      return nullptr;
    }
    modules.push_back(std::move(module));
    return *modules.back();
  }

  /// Runs -mt-outline-parameters; checks that no parameter access is left.
  void outline(mlir::ModuleOp module) {
    mlir::PassManager pm(&context);
    pm.addPass(transforms::createMTOutlineParametersPass());
    ASSERT_TRUE(mlir::succeeded(pm.run(module)));
    EXPECT_TRUE(module->hasAttr(transforms::kOutlinedAttrName));
    module.walk([](mlir::Operation *op) {
      EXPECT_FALSE((llvm::isa<mt::ParamRefOp, mt::AssignOp>(op)))
          << "left after outlining: " << op->getName().getStringRef().str();
    });
  }

  /// Random values for every parameter and state: parameters in [-0.2, 0.2), states in
  /// [0.001, 0.01) (positive: Adam takes the square root of its second moment).
  llvm::StringMap<Tensor> randomValues(Interpreter &interp, mlir::ModuleOp module) {
    llvm::StringMap<Tensor> values;
    for (mlir::Operation &op : module.getBody()->getOperations()) {
      bool isState = llvm::isa<mt::StateOp>(op);
      if (!isState && !llvm::isa<mt::ParamOp>(op))
        continue;
      llvm::StringRef name = mlir::SymbolTable::getSymbolName(&op).getValue();
      llvm::Expected<mt::NamedTensorType> type = interp.getParamValueType(name);
      if (!type) {
        ADD_FAILURE() << llvm::toString(type.takeError());
        continue;
      }
      Tensor value(*type);
      for (double &x : value.data)
        x = isState ? rng.uniform(0.001, 0.01) : rng.uniform(-0.2, 0.2);
      values[name] = std::move(value);
    }
    return values;
  }

  /// Token ids (and labels) in [0, vocab) for every argument of `func`.
  std::vector<Tensor> randomIds(mlir::func::FuncOp func, mlir::ModuleOp module) {
    auto dims = module->getAttrOfType<mlir::DictionaryAttr>(mt::MTDialect::kDimsAttrName);
    int64_t vocab = dims.getAs<mlir::IntegerAttr>("vocab").getInt();
    std::vector<Tensor> args;
    for (mlir::Type argType : func.getArgumentTypes()) {
      Tensor ids(llvm::cast<mt::NamedTensorType>(argType));
      for (double &id : ids.data)
        id = static_cast<double>(rng.next() % static_cast<uint64_t>(vocab));
      args.push_back(std::move(ids));
    }
    return args;
  }

  /// The symbol an outlined argument or result holds, from its mt.param / mt.state
  /// attribute; empty if it has none.
  static llvm::StringRef symbolOf(mlir::DictionaryAttr attrs) {
    if (!attrs)
      return {};
    for (llvm::StringRef name : {transforms::kParamAttrName, transforms::kStateAttrName})
      if (auto ref = attrs.getAs<mlir::FlatSymbolRefAttr>(name))
        return ref.getValue();
    return {};
  }

  /// Position of every parameter and state in the module.
  static llvm::StringMap<unsigned> symbolOrder(mlir::ModuleOp module) {
    llvm::StringMap<unsigned> order;
    for (mlir::Operation &op : module.getBody()->getOperations())
      if (llvm::isa<mt::ParamOp, mt::StateOp>(op))
        order[mlir::SymbolTable::getSymbolName(&op).getValue()] = order.size();
    return order;
  }

  /// `args` followed by the values of the symbols `func` gained as arguments, which must
  /// all be marked and come in module symbol order.
  std::vector<Tensor> withSymbols(mlir::ModuleOp module, llvm::StringRef name,
                                  std::vector<Tensor> args, const llvm::StringMap<Tensor> &values) {
    auto func = module.lookupSymbol<mlir::func::FuncOp>(name);
    EXPECT_TRUE(func) << name.str();
    if (!func)
      return {};
    llvm::StringMap<unsigned> order = symbolOrder(module);
    int previous = -1;
    for (unsigned i = args.size(); i < func.getNumArguments(); ++i) {
      llvm::StringRef symbol = symbolOf(func.getArgAttrDict(i));
      EXPECT_FALSE(symbol.empty()) << "argument #" << i << " of @" << name.str() << " is unmarked";
      auto it = values.find(symbol);
      if (symbol.empty() || it == values.end()) {
        ADD_FAILURE() << "no value for '" << symbol.str() << "'";
        return {};
      }
      EXPECT_LT(previous, static_cast<int>(order.lookup(symbol)))
          << "@" << name.str() << " takes '" << symbol.str() << "' out of symbol order";
      previous = static_cast<int>(order.lookup(symbol));
      args.push_back(it->second);
    }
    return args;
  }

  static void expectSame(const Tensor &expected, const Tensor &actual, const std::string &what) {
    ASSERT_EQ(expected.type, actual.type) << what;
    int failures = 0;
    for (int64_t j = 0; j < expected.getNumElements() && failures < 5; ++j) {
      bool ok = near(actual.data[j], expected.data[j], kRelative, 0);
      EXPECT_TRUE(ok) << what << " element " << j << ": "
                      << near(actual.data[j], expected.data[j], kRelative, 0).message();
      failures += !ok;
    }
  }

  static std::vector<Tensor> call(Interpreter &interp, llvm::StringRef func,
                                  const std::vector<Tensor> &args) {
    llvm::Expected<std::vector<Tensor>> out = interp.call(func, args);
    if (!out) {
      ADD_FAILURE() << "@" << func.str() << ": " << llvm::toString(out.takeError());
      return {};
    }
    return std::move(*out);
  }

  /// The whole check described in the file comment, on a trained (not outlined) module.
  void checkTrainingStep(mlir::ModuleOp module) {
    ASSERT_TRUE(module);
    auto forwardBackward = module.lookupSymbol<mlir::func::FuncOp>("forward_backward");
    auto step = module.lookupSymbol<mlir::func::FuncOp>("optimizer_step");
    ASSERT_TRUE(forwardBackward && step);
    std::vector<Tensor> ids = randomIds(forwardBackward, module);
    // The loss, the gradients (`mt.grads`), then an MoE model's tokens per expert.
    unsigned numGrads =
        forwardBackward->getAttrOfType<mlir::ArrayAttr>(mt::MTDialect::kGradsAttrName).size();
    mlir::ArrayRef<mlir::Type> stepTypes = step.getArgumentTypes();
    std::vector<Tensor> scalars = {Tensor(llvm::cast<mt::NamedTensorType>(stepTypes[0]), {0.0}),
                                   Tensor(llvm::cast<mt::NamedTensorType>(stepTypes[1]), {1.0})};

    // Parameters and states as module state.
    llvm::StringMap<Tensor> values, updated;
    std::vector<Tensor> loss, gradients, stepped;
    {
      Interpreter interp(module);
      values = randomValues(interp, module);
      for (const auto &entry : values)
        ASSERT_FALSE(static_cast<bool>(interp.setParam(entry.getKey(), entry.getValue())));
      loss = call(interp, "forward", ids);
      gradients = call(interp, "forward_backward", ids);
      ASSERT_EQ(loss.size(), 1u);
      ASSERT_EQ(gradients.size(), forwardBackward.getNumResults());
      EXPECT_TRUE(std::isfinite(loss[0].data[0]));
      std::vector<Tensor> stepArgs = scalars;
      stepArgs.insert(stepArgs.end(), gradients.begin() + 1, gradients.begin() + 1 + numGrads);
      stepped = call(interp, "optimizer_step", stepArgs);
      ASSERT_EQ(stepped.size(), 2u);
      for (const auto &entry : values) {
        const Tensor *value = interp.getParam(entry.getKey());
        ASSERT_NE(value, nullptr) << entry.getKey().str();
        updated[entry.getKey()] = *value;
      }
    }

    // Parameters and states as arguments and results; the interpreter holds none.
    outline(module);
    Interpreter interp(module);
    std::vector<Tensor> outlinedLoss =
        call(interp, "forward", withSymbols(module, "forward", ids, values));
    ASSERT_EQ(outlinedLoss.size(), 1u);
    expectSame(loss[0], outlinedLoss[0], "loss of forward");

    std::vector<Tensor> outlinedGradients =
        call(interp, "forward_backward", withSymbols(module, "forward_backward", ids, values));
    ASSERT_EQ(outlinedGradients.size(), gradients.size());
    for (size_t i = 0; i < gradients.size(); ++i)
      expectSame(gradients[i], outlinedGradients[i],
                 i == 0             ? std::string("loss of forward_backward")
                 : i <= numGrads    ? "gradient #" + std::to_string(i)
                                    : "tokens per expert #" + std::to_string(i - numGrads));

    std::vector<Tensor> stepArgs = scalars;
    stepArgs.insert(stepArgs.end(), gradients.begin() + 1, gradients.begin() + 1 + numGrads);
    std::vector<Tensor> outlinedStep =
        call(interp, "optimizer_step", withSymbols(module, "optimizer_step", stepArgs, values));
    step = module.lookupSymbol<mlir::func::FuncOp>("optimizer_step");
    ASSERT_EQ(outlinedStep.size(), step.getNumResults());
    ASSERT_EQ(outlinedStep.size(), 2 + values.size()) << "every parameter and state is written";
    expectSame(stepped[0], outlinedStep[0], "gradient norm");
    expectSame(stepped[1], outlinedStep[1], "learning rate");
    llvm::StringMap<unsigned> order = symbolOrder(module);
    int previous = -1;
    for (unsigned i = 2; i < outlinedStep.size(); ++i) {
      llvm::StringRef symbol = symbolOf(step.getResultAttrDict(i));
      ASSERT_FALSE(symbol.empty()) << "result #" << i << " of @optimizer_step is unmarked";
      EXPECT_LT(previous, static_cast<int>(order.lookup(symbol))) << "results out of symbol order";
      previous = static_cast<int>(order.lookup(symbol));
      ASSERT_TRUE(updated.count(symbol)) << symbol.str();
      expectSame(updated[symbol], outlinedStep[i], "new value of '" + symbol.str() + "'");
    }
  }
};

//===----------------------------------------------------------------------===//
// Whole training steps
//===----------------------------------------------------------------------===//

class OutlineExamplesTest : public OutlineParametersTest,
                            public ::testing::WithParamInterface<const char *> {};

TEST_P(OutlineExamplesTest, TrainingStepIsUnchanged) {
  checkTrainingStep(compileExample(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Tiny, OutlineExamplesTest,
                         ::testing::Values("gpt-tiny.mtl", "llama-gqa-tiny.mtl",
                                           "mixtral-tiny.mtl"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                           std::string name = llvm::StringRef(info.param).drop_back(4).str();
                           for (char &c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c)))
                               c = '_';
                           return name;
                         });

TEST_F(OutlineParametersTest, ModelParameterReadInsideALayerIsBroadcast) {
  mlir::ModuleOp module = compileSource(kSharedScaleModel);
  ASSERT_TRUE(module);
  checkTrainingStep(module);
  // @scale reached both layer functions as a broadcast stacked operand.
  unsigned broadcasts = 0;
  module.walk([&](mt::RepeatOp repeat) {
    for (mlir::Value input : repeat.getInputs())
      if (auto broadcast = input.getDefiningOp<mt::BroadcastOp>()) {
        auto arg = llvm::dyn_cast<mlir::BlockArgument>(broadcast.getInput());
        ASSERT_TRUE(arg);
        auto func = llvm::cast<mlir::func::FuncOp>(arg.getOwner()->getParentOp());
        EXPECT_EQ(symbolOf(func.getArgAttrDict(arg.getArgNumber())), "scale");
        ++broadcasts;
      }
  });
  EXPECT_EQ(broadcasts, 4u)
      << "forward's and logits' repeats, and forward_backward's fwd and bwd repeats";
}

//===----------------------------------------------------------------------===//
// Signatures
//===----------------------------------------------------------------------===//

TEST_F(OutlineParametersTest, ReadAfterAssignUsesTheAssignedValue) {
  mlir::ModuleOp module = parse(R"mlir(
    module {
      mt.param @w : !mt.tensor<[h=2], f64> init zeros
      mt.state @w.m of @w : !mt.tensor<[h=2], f64>
      func.func @step(%g: !mt.tensor<[h=2], f64>) -> !mt.tensor<[h=2], f64> {
        %w = mt.param_ref @w : !mt.tensor<[h=2], f64>
        %w1 = mt.add %w, %g : !mt.tensor<[h=2], f64>, !mt.tensor<[h=2], f64> -> !mt.tensor<[h=2], f64>
        mt.assign @w, %w1 : !mt.tensor<[h=2], f64>
        %w2 = mt.param_ref @w : !mt.tensor<[h=2], f64>
        %w3 = mt.mul %w2, %w2 : !mt.tensor<[h=2], f64>, !mt.tensor<[h=2], f64> -> !mt.tensor<[h=2], f64>
        mt.assign @w.m, %w3 : !mt.tensor<[h=2], f64>
        %m = mt.param_ref @w.m : !mt.tensor<[h=2], f64>
        return %m : !mt.tensor<[h=2], f64>
      }
    }
  )mlir");
  ASSERT_TRUE(module);
  Tensor w = tensor("[h=2], f64", {1, 2}), m = tensor("[h=2], f64", {5, 6}),
         g = tensor("[h=2], f64", {0.5, -3});
  std::vector<Tensor> expected;
  {
    Interpreter interp(module);
    ASSERT_FALSE(static_cast<bool>(interp.setParam("w", w)));
    ASSERT_FALSE(static_cast<bool>(interp.setParam("w.m", m)));
    expected = call(interp, "step", {g});
    ASSERT_EQ(expected.size(), 1u);
    expected.push_back(*interp.getParam("w"));
    expected.push_back(*interp.getParam("w.m"));
  }
  outline(module);
  auto step = module.lookupSymbol<mlir::func::FuncOp>("step");
  // @w.m is only read after its assign: no argument for it.
  ASSERT_EQ(step.getNumArguments(), 2u);
  EXPECT_EQ(symbolOf(step.getArgAttrDict(1)), "w");
  ASSERT_EQ(step.getNumResults(), 3u);
  EXPECT_EQ(symbolOf(step.getResultAttrDict(1)), "w");
  EXPECT_EQ(symbolOf(step.getResultAttrDict(2)), "w.m");
  EXPECT_TRUE(step.getResultAttrDict(2).get(transforms::kStateAttrName));
  Interpreter interp(module);
  std::vector<Tensor> actual = call(interp, "step", {g, w});
  ASSERT_EQ(actual.size(), 3u);
  for (unsigned i = 0; i < 3; ++i)
    expectSame(expected[i], actual[i], "result #" + std::to_string(i));
  // 1.5 and -1 squared.
  EXPECT_EQ(actual[0].data, (std::vector<double>{2.25, 1}));
}

TEST_F(OutlineParametersTest, SecondRunFails) {
  mlir::ModuleOp module = parse(R"mlir(
    module {
      mt.param @w : !mt.tensor<[h=2], f64> init zeros
      func.func @f() -> !mt.tensor<[h=2], f64> {
        %w = mt.param_ref @w : !mt.tensor<[h=2], f64>
        return %w : !mt.tensor<[h=2], f64>
      }
    }
  )mlir");
  ASSERT_TRUE(module);
  outline(module);
  std::string errors;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    llvm::raw_string_ostream(errors) << diag << "\n";
    return mlir::success();
  });
  mlir::PassManager pm(&context);
  pm.addPass(transforms::createMTOutlineParametersPass());
  EXPECT_TRUE(mlir::failed(pm.run(module)));
  EXPECT_NE(errors.find("module is already outlined"), std::string::npos) << errors;
}

} // namespace
