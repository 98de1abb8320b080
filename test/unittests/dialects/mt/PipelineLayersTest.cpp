//===- PipelineLayersTest.cpp - the layers of each pipeline chunk ---------===//
//
// ParallelAttr::getPipelineLayers (what the stage cut reads) and splitPipelineLayers (what
// mtc's Megatron-style split flags compute): even splits, explicit ones, virtual stages in
// Megatron's interleaved order, first/last stage layers, and what does not divide.
//
//===----------------------------------------------------------------------===//

#include "dialects/mt/IR/MTOps.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mtc::mt;

namespace {

class PipelineLayersTest : public ::testing::Test {
protected:
  PipelineLayersTest() { context.loadDialect<MTDialect>(); }

  ParallelAttr parallel(StringRef text) {
    return cast<ParallelAttr>(parseAttribute(text, &context));
  }

  SmallVector<int64_t> split(int64_t layers, int64_t stages, int64_t chunks,
                             std::optional<int64_t> first = std::nullopt,
                             std::optional<int64_t> last = std::nullopt) {
    llvm::Expected<SmallVector<int64_t>> result =
        splitPipelineLayers(layers, stages, chunks, first, last);
    if (!result) {
      error = llvm::toString(result.takeError());
      return {};
    }
    return *result;
  }

  MLIRContext context;
  std::string error;
};

TEST_F(PipelineLayersTest, EvenSplitWithoutAnExplicitOne) {
  EXPECT_EQ(parallel("#mt.parallel<pp = 4>").getPipelineLayers(12),
            (SmallVector<int64_t>{3, 3, 3, 3}));
  EXPECT_EQ(parallel("#mt.parallel<>").getPipelineLayers(5), (SmallVector<int64_t>{5}));
  // Interleaved: pp x v chunks; zb-v: two chunks per stage without virtual_stages.
  EXPECT_EQ(parallel("#mt.parallel<pp = 2, virtual_stages = 3>").getPipelineLayers(12),
            (SmallVector<int64_t>{2, 2, 2, 2, 2, 2}));
  EXPECT_EQ(parallel("#mt.parallel<pp = 2, schedule = \"zb-v\">").getPipelineLayers(8),
            (SmallVector<int64_t>{2, 2, 2, 2}));
}

TEST_F(PipelineLayersTest, UnevenWithoutAnExplicitSplitIsEmpty) {
  EXPECT_TRUE(parallel("#mt.parallel<pp = 3>").getPipelineLayers(4).empty());
  EXPECT_TRUE(parallel("#mt.parallel<pp = 4>").getPipelineLayers(2).empty());
}

TEST_F(PipelineLayersTest, ExplicitSplitIsReturnedAsGiven) {
  ParallelAttr attr = parallel("#mt.parallel<pp = 2, pipeline_layers = [3, 1]>");
  EXPECT_EQ(attr.getPipelineLayers(4), (SmallVector<int64_t>{3, 1}));
  EXPECT_EQ(attr.getScheduleOrDefault(), PipelineSchedule::OneFOneB);
  EXPECT_EQ(parallel("#mt.parallel<pp = 2, virtual_stages = 2>").getScheduleOrDefault(),
            PipelineSchedule::Interleaved);
}

TEST_F(PipelineLayersTest, ModuleAccessorCountsTheForwardLayerStack) {
  const char *source = R"(
    module attributes {mt.parallel = #mt.parallel<pp = 2>} {
      func.func @block(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> attributes {mt.layer} {
        return %x : !mt.tensor<[hidden=4], f32>
      }
      func.func @forward(%x: !mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32> {
        %0 = mt.repeat @block(%x) count 6 : (!mt.tensor<[hidden=4], f32>) -> !mt.tensor<[hidden=4], f32>
        return %0 : !mt.tensor<[hidden=4], f32>
      }
    })";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
  ASSERT_TRUE(module);
  EXPECT_EQ(countLayers(*module), 6);
  FailureOr<SmallVector<int64_t>> layers = getPipelineLayers(*module);
  ASSERT_TRUE(succeeded(layers));
  EXPECT_EQ(*layers, (SmallVector<int64_t>{3, 3}));
}

TEST_F(PipelineLayersTest, MegatronFirstAndLastStageLayers) {
  EXPECT_EQ(split(12, 5, 1, 4), (SmallVector<int64_t>{4, 2, 2, 2, 2}));
  EXPECT_EQ(split(12, 4, 1, std::nullopt, 6), (SmallVector<int64_t>{2, 2, 2, 6}));
  EXPECT_EQ(split(6, 2, 1, 5, 1), (SmallVector<int64_t>{5, 1}));
  // Virtual stages: each stage's layers over its chunks, chunk c on stage c mod pp.
  EXPECT_EQ(split(12, 4, 2, 2, 2), (SmallVector<int64_t>{1, 2, 2, 1, 1, 2, 2, 1}));
}

TEST_F(PipelineLayersTest, WhatDoesNotDivideIsAnError) {
  EXPECT_TRUE(split(12, 5, 1).empty());
  EXPECT_EQ(error, "12 layers do not split evenly into 5 pipeline stages");
  EXPECT_TRUE(split(12, 2, 1, 12).empty());
  EXPECT_EQ(error, "12 layers leave 0 for the 1 other pipeline stages, which need at least 1 "
                   "each");
  EXPECT_TRUE(split(12, 2, 1, 5, 5).empty());
  EXPECT_EQ(error, "the first and last pipeline stages take 10 of the 12 layers");
  EXPECT_TRUE(split(12, 4, 2, 3, 3).empty());
  EXPECT_EQ(error, "pipeline stage 0 holds 3 layers, which its 2 virtual stages cannot share "
                   "evenly");
  EXPECT_TRUE(split(4, 1, 1, 2, 2).empty());
  EXPECT_EQ(error, "with one pipeline stage, the first stage is the last: give the layers of "
                   "only one of them");
  EXPECT_TRUE(split(4, 2, 1, 0).empty());
  EXPECT_EQ(error, "the first pipeline stage needs at least 1 layer, not 0");
}

TEST_F(PipelineLayersTest, ExplicitSplitMustCoverTheLayers) {
  EXPECT_FALSE(llvm::errorToBool(checkPipelineLayers({3, 1}, 4)));
  llvm::Error error = checkPipelineLayers({3, 2}, 4);
  ASSERT_TRUE(static_cast<bool>(error));
  EXPECT_EQ(llvm::toString(std::move(error)), "the split sums to 5 layers; the model has 4");
}

} // namespace
