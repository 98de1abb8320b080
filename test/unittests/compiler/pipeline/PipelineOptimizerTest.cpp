//===- PipelineOptimizerTest.cpp - stage optimizer steps against the whole one ===//
//
// The evidence that mt-pipeline-optimizer's per-stage functions compute the whole-model
// step: for example models cut into pipeline stages, with random gradients, parameters
// and optimizer states and gradients large enough that clipping is active, the float64
// interpreter must give (a) the sum over the stages of `grad_squares` equal to the
// square of the norm `@optimizer_step` returns (each gradient counted once, the tied
// embedding's on one stage only), and (b) with that norm as `grad_norm`, every stage's
// `optimizer_step` returning the learning rate and the updated parameters and states of
// the whole step, sliced to the stage's storage (its chunks' layers packed in chunk
// order); every parameter element is updated by some stage.
//
//===----------------------------------------------------------------------===//

#include "../interpreter/InterpreterTestSupport.h"

#include "PipelineTestSupport.h"

#include "compiler/lowering/Passes.h"
#include "compiler/pipeline/Passes.h"
#include "compiler/pipelines/Pipelines.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

using namespace mtc;
using namespace mtc::interp;
using namespace mtc::interp::testing;
using namespace mtc::pipeline::testing;

namespace {

class PipelineOptimizerTest : public PipelineTest {};

/// The symbol a `mt.param` / `mt.state` / `mt.grad` attribute names, or "".
std::string symbolOf(mlir::DictionaryAttr attrs, llvm::StringRef name) {
  auto symbol = attrs ? attrs.getAs<mlir::FlatSymbolRefAttr>(name) : nullptr;
  return symbol ? symbol.getValue().str() : "";
}

TEST_P(PipelineOptimizerTest, StagesComposeToTheWholeStep) {
  const Case &c = GetParam();
  std::string errors;
  mlir::OwningOpRef<mlir::ModuleOp> module = lower(c, errors);
  ASSERT_TRUE(module) << errors;
  mt::TrainAttr train = mt::TrainAttr::lookup(*module);
  ASSERT_TRUE(train && train.getClipGrad()) << "the example should clip gradients";
  double clip = train.getClipGrad().getValueAsDouble();

  mlir::PassManager pm(&context);
  buildTrainingPipeline(pm, TrainingPipelineOptions());
  pm.addPass(lowering::createMTDecomposePass());
  pm.addPass(transforms::createMTOutlineParametersPass());
  pm.addPass(pipeline::createMTPipelineChunksPass());
  pm.addPass(pipeline::createMTPipelineOptimizerPass());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));

  auto pipelineAttr = (*module)->getAttrOfType<mlir::DictionaryAttr>("mt.pipeline");
  ASSERT_TRUE(pipelineAttr);
  auto chunkLayers =
      mlir::cast<mlir::DenseI64ArrayAttr>(pipelineAttr.get("chunk_layers")).asArrayRef();
  auto chunkStages =
      mlir::cast<mlir::DenseI64ArrayAttr>(pipelineAttr.get("chunk_stages")).asArrayRef();
  int64_t numStages = mlir::cast<mlir::IntegerAttr>(pipelineAttr.get("stages")).getInt();
  // The global layers each stage stores, in its storage order (chunk order).
  std::vector<std::vector<int64_t>> stageLayers(numStages);
  for (int64_t chunk = 0, first = 0; chunk < static_cast<int64_t>(chunkLayers.size()); ++chunk) {
    for (int64_t layer = first; layer < first + chunkLayers[chunk]; ++layer)
      stageLayers[chunkStages[chunk]].push_back(layer);
    first += chunkLayers[chunk];
  }

  // The whole step on random gradients, parameters and states; grad_scale 0.5 and
  // gradients in [-1, 1) give a norm far above the clip.
  auto step = (*module).lookupSymbol<mlir::func::FuncOp>("optimizer_step");
  ASSERT_TRUE(step);
  Random rng(11);
  mlir::Type f32 = mlir::Float32Type::get(&context);
  const double stepIndex = 3, gradScale = 0.5;
  std::map<std::string, Tensor> inputs; // by "grad:<p>", "<p>" or "<state>"
  std::vector<Tensor> args = {Tensor::scalar(f32, stepIndex), Tensor::scalar(f32, gradScale)};
  for (auto [index, type] : llvm::enumerate(step.getArgumentTypes())) {
    if (index < 2)
      continue;
    Tensor value(mlir::cast<mt::NamedTensorType>(type));
    mlir::DictionaryAttr attrs = step.getArgAttrDict(index);
    std::string grad = symbolOf(attrs, "mt.grad");
    std::string state = symbolOf(attrs, "mt.state");
    for (double &x : value.data)
      x = !grad.empty() ? rng.uniform(-1, 1)
          : !state.empty() && llvm::StringRef(state).ends_with("exp_avg_sq") ? rng.uniform(0, 0.01)
                                                                              : rng.uniform(-0.1, 0.1);
    std::string key = !grad.empty() ? "grad:" + grad : !state.empty() ? state
                                                                       : symbolOf(attrs, "mt.param");
    ASSERT_FALSE(key.empty()) << "optimizer_step argument " << index;
    inputs[key] = value;
    args.push_back(std::move(value));
  }
  MTC_ASSIGN_OR_FAIL(whole, Interpreter(*module).call("optimizer_step", args));
  double norm = whole[0].data.at(0), lr = whole[1].data.at(0);
  ASSERT_GT(norm, 10 * clip) << "clipping must be active";
  std::map<std::string, Tensor> expected;
  for (auto [index, value] : llvm::enumerate(whole)) {
    mlir::DictionaryAttr attrs = step.getResultAttrDict(index);
    std::string symbol = symbolOf(attrs, "mt.param");
    if (symbol.empty())
      symbol = symbolOf(attrs, "mt.state");
    if (!symbol.empty())
      expected[symbol] = value;
  }

  // `whole` in the storage of stage `stage` (type `type`): a stacked tensor's layers of
  // the stage, in its order.
  auto slice = [&](const Tensor &value, mt::NamedTensorType type, int64_t stage) {
    if (value.type == type)
      return value;
    int64_t inner = value.getNumElements() / value.type.getDims().front().size;
    std::vector<double> data;
    for (int64_t layer : stageLayers[stage])
      data.insert(data.end(), value.data.begin() + layer * inner,
                  value.data.begin() + (layer + 1) * inner);
    return Tensor(type, std::move(data));
  };
  auto stageFunction = [&](int64_t stage, llvm::StringRef name) {
    return (*module).lookupSymbol<mlir::func::FuncOp>("stage" + std::to_string(stage) + "." +
                                                      name.str());
  };
  // Arguments of a stage function from the whole step's inputs.
  auto stageArgs = [&](mlir::func::FuncOp func, int64_t stage, double gradNorm) {
    std::vector<Tensor> values;
    for (auto [index, type] : llvm::enumerate(func.getArgumentTypes())) {
      auto tensorType = mlir::cast<mt::NamedTensorType>(type);
      mlir::DictionaryAttr attrs = func.getArgAttrDict(index);
      auto kind = attrs ? attrs.getAs<mlir::StringAttr>("mt.buffer") : nullptr;
      if (kind) {
        double scalar = kind.getValue() == "step"         ? stepIndex
                        : kind.getValue() == "grad_scale" ? gradScale
                                                          : gradNorm;
        EXPECT_TRUE(kind.getValue() == "step" || kind.getValue() == "grad_scale" ||
                    kind.getValue() == "grad_norm")
            << kind.getValue().str();
        values.push_back(Tensor::scalar(f32, scalar));
        continue;
      }
      std::string grad = symbolOf(attrs, "mt.grad");
      std::string key = !grad.empty() ? "grad:" + grad : symbolOf(attrs, "mt.param");
      if (key.empty())
        key = symbolOf(attrs, "mt.state");
      values.push_back(slice(inputs.at(key), tensorType, stage));
    }
    return values;
  };

  // (a) The stages' squares sum to the square of the whole step's norm.
  double squares = 0;
  for (int64_t stage = 0; stage < numStages; ++stage) {
    auto func = stageFunction(stage, "grad_squares");
    ASSERT_TRUE(func) << "stage " << stage;
    MTC_ASSIGN_OR_FAIL(result, Interpreter(*module).call(func.getSymName(),
                                                          stageArgs(func, stage, 0)));
    ASSERT_EQ(result.size(), 1u);
    squares += result[0].data.at(0);
  }
  EXPECT_TRUE(near(squares, norm * norm, 1e-6)) << squares << " vs " << norm * norm;

  // (b) Each stage's step with the global norm gives the whole step's values, sliced.
  std::map<std::string, std::vector<bool>> covered;
  for (const auto &[symbol, value] : expected)
    covered[symbol].assign(value.data.size(), false);
  for (int64_t stage = 0; stage < numStages; ++stage) {
    auto func = stageFunction(stage, "optimizer_step");
    ASSERT_TRUE(func) << "stage " << stage;
    MTC_ASSIGN_OR_FAIL(results, Interpreter(*module).call(func.getSymName(),
                                                           stageArgs(func, stage, std::sqrt(squares))));
    ASSERT_EQ(results.size(), func.getNumResults());
    EXPECT_TRUE(near(results[0].data.at(0), lr, 1e-6, 1e-12)) << "lr of stage " << stage;
    for (auto [index, value] : llvm::enumerate(results)) {
      if (index == 0)
        continue;
      mlir::DictionaryAttr attrs = func.getResultAttrDict(index);
      std::string symbol = symbolOf(attrs, "mt.param");
      if (symbol.empty())
        symbol = symbolOf(attrs, "mt.state");
      ASSERT_TRUE(expected.count(symbol)) << "stage " << stage << " result " << index;
      Tensor want = slice(expected.at(symbol), value.type, stage);
      ASSERT_EQ(want.data.size(), value.data.size()) << symbol;
      for (size_t i = 0; i < value.data.size(); ++i)
        ASSERT_TRUE(near(value.data[i], want.data[i], 1e-6, 1e-9))
            << "stage " << stage << ": " << symbol << "[" << i << "] " << value.data[i]
            << " vs " << want.data[i];
      // Which elements of the whole tensor this stage updated.
      const Tensor &full = expected.at(symbol);
      int64_t inner = value.type == full.type
                          ? full.getNumElements()
                          : full.getNumElements() / full.type.getDims().front().size;
      std::vector<bool> &seen = covered[symbol];
      if (value.type == full.type)
        seen.assign(seen.size(), true);
      else
        for (int64_t layer : stageLayers[stage])
          std::fill(seen.begin() + layer * inner, seen.begin() + (layer + 1) * inner, true);
    }
  }
  for (const auto &[symbol, seen] : covered)
    EXPECT_TRUE(llvm::all_of(seen, [](bool b) { return b; }))
        << symbol << " is not updated whole by the stages";
}

INSTANTIATE_TEST_SUITE_P(
    Cuts, PipelineOptimizerTest,
    ::testing::Values(Case{"gpt-tiny.mtl", 2, 2, 1, {}},              // pp2, tied embedding
                      Case{"llama-gqa-tiny.mtl", 4, 2, 2, {}},        // interleaved pp2 v2
                      Case{"gpt-tiny.mtl", 4, 2, 2, {}, "zb-v"},      // wte twice on stage 0
                      Case{"gpt-tiny.mtl", 3, 2, 1, {2, 1}},          // uneven cut
                      Case{"llama-gqa-tiny.mtl", 3, 3, 1, {}}));      // untied head, 3 stages

} // namespace
