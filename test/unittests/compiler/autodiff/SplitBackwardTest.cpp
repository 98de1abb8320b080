//===- SplitBackwardTest.cpp - B/W split against the whole backward -------===//
//
// For the layers of whole example models (GPT, Llama; Mixtral's routing backward needs valid
// expert indices among its saved values, which random arguments are not): -mt-split-backward's `@L.bwd.input` followed by
// `@L.bwd.weight` (fed B's stash, which holds the result gradients it reads) must compute exactly what `@L.bwd` computes (the same ops
// on the same values, in the float64 interpreter), and every op of `@L.bwd` must land in
// exactly one part.
//
//===----------------------------------------------------------------------===//

#include "../interpreter/InterpreterTestSupport.h"
#include "test/unittests/support/LowerExample.h"

#include "compiler/autodiff/Passes.h"
#include "compiler/pipelines/Pipelines.h"
#include "compiler/registration/Registration.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"

#include <string>
#include <vector>

using namespace mtc;
using namespace mtc::interp;
using namespace mtc::interp::testing;

namespace {

class SplitBackwardTest : public ::testing::TestWithParam<const char *> {
protected:
  SplitBackwardTest() {
    mlir::DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
  }

  mlir::MLIRContext context;
};

size_t countOps(mlir::func::FuncOp func) {
  size_t n = 0;
  func.walk([&](mlir::Operation *op) { n += !mlir::isa<mlir::func::FuncOp, mlir::func::ReturnOp>(op); });
  return n;
}

TEST_P(SplitBackwardTest, InputThenWeightEqualsTheWholeBackward) {
  std::string errors;
  mlir::OwningOpRef<mlir::ModuleOp> module = mtc::testing::lowerExample(context, GetParam(), errors);
  ASSERT_TRUE(module) << errors;
  mlir::PassManager pm(&context);
  buildTrainingPipeline(pm, TrainingPipelineOptions());
  pm.addPass(autodiff::createMTSplitBackwardPass());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));

  Interpreter interp(*module);
  Random rng(42);
  for (auto param : module->getOps<mt::ParamOp>()) {
    llvm::Expected<mt::NamedTensorType> type = interp.getParamValueType(param.getSymName());
    ASSERT_TRUE(static_cast<bool>(type)) << llvm::toString(type.takeError());
    Tensor value(*type);
    for (double &x : value.data)
      x = rng.uniform(-0.5, 0.5);
    ASSERT_FALSE(static_cast<bool>(interp.setParam(param.getSymName(), std::move(value))));
  }

  int split = 0;
  for (auto backward : module->getOps<mlir::func::FuncOp>()) {
    if (!backward->hasAttr("mt.param_grads") || backward->hasAttr("mt.backward_part"))
      continue;
    std::string name = backward.getSymName().str();
    auto input = module->lookupSymbol<mlir::func::FuncOp>(name + ".input");
    auto weight = module->lookupSymbol<mlir::func::FuncOp>(name + ".weight");
    ASSERT_TRUE(input && weight) << "no split of " << name;
    EXPECT_EQ(countOps(input) + countOps(weight), countOps(backward)) << name;

    std::vector<Tensor> args;
    for (mlir::Type type : backward.getArgumentTypes()) {
      Tensor value(mlir::cast<mt::NamedTensorType>(type));
      for (double &x : value.data)
        x = rng.uniform(-1.0, 1.0);
      args.push_back(std::move(value));
    }
    // The last instance: a backward scan starts there.
    int64_t instance = interp.getLayerInstances(
                           backward->getAttrOfType<mlir::FlatSymbolRefAttr>("mt.layer_of").getValue()) -
                       1;
    llvm::Expected<std::vector<Tensor>> whole = interp.callLayer(name, instance, args);
    ASSERT_TRUE(static_cast<bool>(whole)) << llvm::toString(whole.takeError());
    llvm::Expected<std::vector<Tensor>> b = interp.callLayer(name + ".input", instance, args);
    ASSERT_TRUE(static_cast<bool>(b)) << llvm::toString(b.takeError());
    size_t numInputGrads = whole->size() - weight.getNumResults();
    // W takes @L.bwd's arguments but the gradients of the layer's results (it reads those
    // it needs from the stash), then the stash.
    auto layer = module->lookupSymbol<mlir::func::FuncOp>(
        backward->getAttrOfType<mlir::FlatSymbolRefAttr>("mt.layer_of"));
    ASSERT_TRUE(layer);
    std::vector<Tensor> wArgs(args.begin() + layer.getNumResults(), args.end());
    wArgs.insert(wArgs.end(), b->begin() + numInputGrads, b->end());
    llvm::Expected<std::vector<Tensor>> w = interp.callLayer(name + ".weight", instance, wArgs);
    ASSERT_TRUE(static_cast<bool>(w)) << llvm::toString(w.takeError());

    ASSERT_EQ(numInputGrads + w->size(), whole->size());
    for (size_t i = 0; i < numInputGrads; ++i)
      EXPECT_EQ((*b)[i].data, (*whole)[i].data) << name << " input gradient " << i;
    for (size_t i = 0; i < w->size(); ++i)
      EXPECT_EQ((*w)[i].data, (*whole)[numInputGrads + i].data) << name << " parameter gradient " << i;
    ++split;
  }
  EXPECT_GT(split, 0) << "the model has no layer backward";
}

INSTANTIATE_TEST_SUITE_P(Examples, SplitBackwardTest,
                         ::testing::Values("gpt-tiny.mtl", "llama-gqa-tiny.mtl"));

} // namespace
