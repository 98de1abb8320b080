//===- PipelineChunksTest.cpp - chunk functions against the whole step ----===//
//
// The evidence that mt-pipeline-chunks cuts the step right before any runtime runs it:
// for example models with more layers than they ship with, every chunk's forward in
// order (the activation and the residuals handed on) and every chunk's backward in
// reverse (the activation gradient handed back) must give, in the float64 interpreter,
// the loss of @forward_backward and every one of its gradients: a layer parameter's
// from the chunks' slices put back at their `mt.chunk_layers` offsets, a parameter two
// chunks read (the tied embedding) as the sum of their parts; and the same with each
// backward run as its two halves (backward_input for all chunks, then backward_weight from
// the stash); an MoE model's tokens per expert from the chunk forwards' rows put back at
// their layers. Dropout is on: a chunk's
// layers must draw the masks of their global layer instances.
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

#include <map>
#include <string>
#include <vector>

using namespace mtc;
using namespace mtc::interp;
using namespace mtc::interp::testing;
using namespace mtc::pipeline::testing;

namespace {

class PipelineChunksTest : public PipelineTest {};

/// The slice of `whole`'s leading dimension that starts at `first`, typed `type`.
Tensor sliceOf(const Tensor &whole, mt::NamedTensorType type, int64_t first) {
  int64_t inner = type.getNumElements() / type.getDims().front().size;
  auto begin = whole.data.begin() + first * inner;
  return Tensor(type, std::vector<double>(begin, begin + type.getNumElements()));
}

TEST_P(PipelineChunksTest, ChunksComposeToTheWholeStep) {
  const Case &c = GetParam();
  std::string errors;
  mlir::OwningOpRef<mlir::ModuleOp> module = lower(c, errors);
  ASSERT_TRUE(module) << errors;

  mlir::PassManager pm(&context);
  buildTrainingPipeline(pm, TrainingPipelineOptions());
  pm.addPass(lowering::createMTDecomposePass());
  pm.addPass(transforms::createMTOutlineParametersPass());
  pm.addPass(pipeline::createMTPipelineChunksPass());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));

  auto step = module->lookupSymbol<mlir::func::FuncOp>("forward_backward");
  ASSERT_TRUE(step);
  Interpreter interp(*module);
  // Dropout on, with masks keyed by (site, layer instance) as the runtime keys them: a
  // chunk's layers must draw the masks of their global instances.
  interp.setDropoutMode(DropoutMode::DeterministicMasks, [](int64_t tensorId, int64_t element) {
    uint64_t h = static_cast<uint64_t>(tensorId) * 0x9e3779b97f4a7c15ULL ^
                 static_cast<uint64_t>(element) * 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 29;
    return h % 10 != 0;
  });
  Random rng(7);
  // The step's arguments: tokens and labels in [0, classes), parameters in [-0.5, 0.5).
  auto classes = static_cast<double>(
      mlir::cast<mt::NamedTensorType>(step.getArgumentTypes()[2]).getDims().front().size);
  std::vector<Tensor> args;
  std::map<std::string, Tensor> params;
  for (auto [index, type] : llvm::enumerate(step.getArgumentTypes())) {
    Tensor value(mlir::cast<mt::NamedTensorType>(type));
    auto param = step.getArgAttrOfType<mlir::FlatSymbolRefAttr>(index, "mt.param");
    for (double &x : value.data)
      x = param ? rng.uniform(-0.5, 0.5) : std::floor(rng.uniform(0, classes));
    if (param)
      params[param.getValue().str()] = value;
    args.push_back(std::move(value));
  }
  MTC_ASSIGN_OR_FAIL(whole, interp.call("forward_backward", args));

  auto pipelineAttr = (*module)->getAttrOfType<mlir::DictionaryAttr>("mt.pipeline");
  ASSERT_TRUE(pipelineAttr);
  int64_t numChunks =
      mlir::cast<mlir::DenseI64ArrayAttr>(pipelineAttr.get("chunk_layers")).size();
  ASSERT_EQ(numChunks, c.pp * c.virtualStages);

  // Forward through the chunks, then backward.
  auto argumentsOf = [&](mlir::func::FuncOp func, llvm::ArrayRef<int64_t> layers,
                         const std::vector<Tensor> &activation,
                         const std::vector<Tensor> &residuals, const std::vector<Tensor> &stash) {
    std::vector<Tensor> values;
    size_t nextActivation = 0;
    for (auto [index, type] : llvm::enumerate(func.getArgumentTypes())) {
      auto tensorType = mlir::cast<mt::NamedTensorType>(type);
      if (auto param = func.getArgAttrOfType<mlir::FlatSymbolRefAttr>(index, "mt.param")) {
        const Tensor &value = params.at(param.getValue().str());
        values.push_back(value.type == tensorType ? value
                                                  : sliceOf(value, tensorType, layers[0]));
        continue;
      }
      auto kind = func.getArgAttrOfType<mlir::StringAttr>(index, "mt.buffer").getValue();
      auto at = func.getArgAttrOfType<mlir::IntegerAttr>(index, "mt.index");
      // A data input, named as the step names it (mt.input): these models' tokens and labels.
      auto input = func.getArgAttrOfType<mlir::StringAttr>(index, "mt.input");
      if (kind == "input" && input && input.getValue() == "tokens")
        values.push_back(args[0]);
      else if (kind == "input" && input && input.getValue() == "labels")
        values.push_back(args[1]);
      else if (kind == "residual")
        values.push_back(residuals.at(at.getInt()));
      else if (kind == "stash")
        values.push_back(stash.at(at.getInt()));
      else
        values.push_back(activation.at(nextActivation++));
      EXPECT_EQ(values.back().type, tensorType) << func.getSymName().str() << " argument " << index;
    }
    return values;
  };
  auto lookup = [&](int64_t chunk, llvm::StringRef task) {
    return module->lookupSymbol<mlir::func::FuncOp>("chunk" + std::to_string(chunk) + "." +
                                                    task.str());
  };
  // An MoE model's tokens per expert (the step's expert_load results): the chunks' rows put
  // back at their layers must be the whole step's.
  std::vector<Tensor> expertLoads, chunkExpertLoads;
  for (auto [index, value] : llvm::enumerate(whole))
    if (auto kind = step.getResultAttrOfType<mlir::StringAttr>(index, "mt.buffer");
        kind && kind.getValue() == "expert_load") {
      expertLoads.push_back(value);
      chunkExpertLoads.push_back(Tensor(value.type));
    }
  EXPECT_EQ(expertLoads.empty(), !llvm::StringRef(c.example).starts_with("mixtral"));
  std::vector<std::vector<Tensor>> residuals(numChunks);
  std::vector<Tensor> activation;
  Tensor loss;
  for (int64_t chunk = 0; chunk < numChunks; ++chunk) {
    auto func = lookup(chunk, "forward");
    ASSERT_TRUE(func);
    auto layers = func->getAttrOfType<mlir::DenseI64ArrayAttr>("mt.chunk_layers").asArrayRef();
    MTC_ASSIGN_OR_FAIL(results, interp.call(func.getSymName(),
                                            argumentsOf(func, layers, activation, {}, {})));
    activation.clear();
    size_t nextExpertLoad = 0;
    for (auto [index, value] : llvm::enumerate(results)) {
      auto kind = func.getResultAttrOfType<mlir::StringAttr>(index, "mt.buffer").getValue();
      if (kind == "residual") {
        residuals[chunk].push_back(value);
      } else if (kind == "loss") {
        loss = value;
      } else if (kind == "expert_load") {
        ASSERT_LT(nextExpertLoad, chunkExpertLoads.size()) << func.getSymName().str();
        Tensor &into = chunkExpertLoads[nextExpertLoad++];
        size_t row = into.data.size() / into.type.getDims().front().size;
        ASSERT_EQ(value.data.size(), static_cast<size_t>(layers[1]) * row);
        std::copy(value.data.begin(), value.data.end(),
                  into.data.begin() + static_cast<ptrdiff_t>(layers[0] * row));
      } else {
        activation.push_back(value);
      }
    }
    EXPECT_EQ(nextExpertLoad, chunkExpertLoads.size()) << func.getSymName().str();
  }
  EXPECT_TRUE(near(loss.data.at(0), whole[0].data.at(0), 1e-12)) << "loss";
  for (size_t i = 0; i < expertLoads.size(); ++i)
    EXPECT_EQ(chunkExpertLoads[i].data, expertLoads[i].data) << "tokens per expert " << i;
  std::vector<Tensor> lastActivation = activation;

  // Adds gradient results of `func` (after its activation gradients) into `grads`.
  auto accumulate = [&](mlir::func::FuncOp func, llvm::ArrayRef<int64_t> layers,
                        llvm::ArrayRef<Tensor> results, std::map<std::string, Tensor> &grads) {
    auto gradSymbols = func->getAttrOfType<mlir::ArrayAttr>("mt.grads");
    for (auto [symbol, value] :
         llvm::zip(gradSymbols, results.drop_front(results.size() - gradSymbols.size()))) {
      std::string name = mlir::cast<mlir::FlatSymbolRefAttr>(symbol).getValue().str();
      const Tensor &param = params.at(name);
      auto [it, inserted] = grads.try_emplace(name, Tensor(param.type));
      size_t offset = 0;
      if (value.type != param.type)
        offset = static_cast<size_t>(layers[0]) *
                 (param.data.size() / param.type.getDims().front().size);
      for (size_t i = 0; i < value.data.size(); ++i)
        it->second.data[offset + i] += value.data[i];
    }
  };
  auto compare = [&](const std::map<std::string, Tensor> &grads, llvm::StringRef how) {
    auto stepGrads = step->getAttrOfType<mlir::ArrayAttr>("mt.grads");
    ASSERT_EQ(grads.size(), stepGrads.size()) << how.str() << ": a parameter has no gradient";
    for (auto [symbol, expected] : llvm::zip(stepGrads, llvm::drop_begin(whole))) {
      std::string name = mlir::cast<mlir::FlatSymbolRefAttr>(symbol).getValue().str();
      const Tensor &got = grads.at(name);
      ASSERT_EQ(got.data.size(), expected.data.size()) << name;
      for (size_t i = 0; i < got.data.size(); ++i)
        ASSERT_TRUE(near(got.data[i], expected.data[i], 1e-9, 1e-12))
            << how.str() << ": " << name << "[" << i << "]";
    }
  };

  // The whole backward of each chunk (BW).
  std::map<std::string, Tensor> grads;
  activation.clear();
  for (int64_t chunk = numChunks - 1; chunk >= 0; --chunk) {
    auto func = lookup(chunk, "backward");
    ASSERT_TRUE(func);
    auto layers = func->getAttrOfType<mlir::DenseI64ArrayAttr>("mt.chunk_layers").asArrayRef();
    MTC_ASSIGN_OR_FAIL(results, interp.call(func.getSymName(),
                                            argumentsOf(func, layers, activation, residuals[chunk], {})));
    size_t numGrads = func->getAttrOfType<mlir::ArrayAttr>("mt.grads").size();
    activation.assign(results.begin(), results.end() - numGrads);
    accumulate(func, layers, results, grads);
  }
  EXPECT_TRUE(activation.empty()) << "chunk 0 returned an input gradient";
  compare(grads, "backward");

  // The B/W split: every chunk's input gradient first (B), then the weight gradients (W)
  // from B's stash, in the order a zero-bubble schedule may run them.
  std::map<std::string, Tensor> splitGrads;
  std::vector<std::vector<Tensor>> stashes(numChunks);
  for (int64_t chunk = numChunks - 1; chunk >= 0; --chunk) {
    auto func = lookup(chunk, "backward_input");
    ASSERT_TRUE(func);
    auto layers = func->getAttrOfType<mlir::DenseI64ArrayAttr>("mt.chunk_layers").asArrayRef();
    MTC_ASSIGN_OR_FAIL(results, interp.call(func.getSymName(),
                                            argumentsOf(func, layers, activation, residuals[chunk], {})));
    activation.clear();
    for (auto [index, value] : llvm::enumerate(results)) {
      auto kind = func.getResultAttrOfType<mlir::StringAttr>(index, "mt.buffer").getValue();
      (kind == "stash" ? stashes[chunk] : activation).push_back(value);
    }
  }
  EXPECT_TRUE(activation.empty()) << "chunk 0's backward_input returned an input gradient";
  for (int64_t chunk = 0; chunk < numChunks; ++chunk) {
    auto func = lookup(chunk, "backward_weight");
    ASSERT_TRUE(func);
    auto layers = func->getAttrOfType<mlir::DenseI64ArrayAttr>("mt.chunk_layers").asArrayRef();
    MTC_ASSIGN_OR_FAIL(results, interp.call(func.getSymName(),
                                            argumentsOf(func, layers, {}, residuals[chunk], stashes[chunk])));
    accumulate(func, layers, results, splitGrads);
  }
  compare(splitGrads, "backward_input + backward_weight");
}

INSTANTIATE_TEST_SUITE_P(
    Cuts, PipelineChunksTest,
    ::testing::Values(Case{"gpt-tiny.mtl", 2, 2, 1, {}},        // even, tied embedding
                      Case{"gpt-tiny.mtl", 3, 2, 1, {2, 1}},    // uneven explicit split
                      Case{"gpt-tiny.mtl", 4, 2, 2, {}},        // interleaved: 4 chunks
                      Case{"llama-gqa-tiny.mtl", 3, 3, 1, {}},  // untied head, 3 stages
                      Case{"llama-gqa-tiny.mtl", 4, 2, 1, {1, 3}},
                      Case{"mixtral-tiny.mtl", 2, 2, 1, {}},    // MoE, aux loss
                      Case{"mixtral-tiny.mtl", 4, 2, 2, {}}));  // MoE interleaved

} // namespace
