//===- FunctionCostTest.cpp - what one call of a step function computes ---===//
//
// computeFunctionCosts counts, per call of each function the runtime calls, the matrix
// products by FLOPs (2 x the product of every distinct dimension), the bytes of the other
// computing ops and the op count, a layer scan once per repeat; views and casts count
// nothing.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/FunctionCost.h"
#include "compiler/lowering/Passes.h"
#include "compiler/registration/Registration.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <string>

#include <gtest/gtest.h>

using namespace mtc;

namespace {

// A layer of one product ([b=4, h=8] x [h=8, f=16]) and one add, run 3 times, then one more
// product of another size and a rename (a view).
constexpr llvm::StringLiteral kModule = R"mlir(
func.func @layer(%x: !mt.tensor<[b=4, h=8], f32>, %w: !mt.tensor<[h=8, f=16], f32>) -> !mt.tensor<[b=4, f=16], f32> {
  %y = mt.contract %x, %w over [h] : !mt.tensor<[b=4, h=8], f32>, !mt.tensor<[h=8, f=16], f32> -> !mt.tensor<[b=4, f=16], f32>
  %z = mt.add %y, %y : !mt.tensor<[b=4, f=16], f32>, !mt.tensor<[b=4, f=16], f32> -> !mt.tensor<[b=4, f=16], f32>
  return %z : !mt.tensor<[b=4, f=16], f32>
}
func.func @forward_backward(%x: !mt.tensor<[b=4, h=8], f32>, %w: !mt.tensor<[h=8, f=16], f32>, %v: !mt.tensor<[f=16, h=8], f32>) -> !mt.tensor<[b=4, h=8], f32> {
  %y = func.call @layer(%x, %w) : (!mt.tensor<[b=4, h=8], f32>, !mt.tensor<[h=8, f=16], f32>) -> !mt.tensor<[b=4, f=16], f32>
  %z = func.call @layer(%x, %w) : (!mt.tensor<[b=4, h=8], f32>, !mt.tensor<[h=8, f=16], f32>) -> !mt.tensor<[b=4, f=16], f32>
  %s = func.call @layer(%x, %w) : (!mt.tensor<[b=4, h=8], f32>, !mt.tensor<[h=8, f=16], f32>) -> !mt.tensor<[b=4, f=16], f32>
  %o = mt.contract %s, %v over [f] : !mt.tensor<[b=4, f=16], f32>, !mt.tensor<[f=16, h=8], f32> -> !mt.tensor<[b=4, h=8], f32>
  return %o : !mt.tensor<[b=4, h=8], f32>
}
func.func @optimizer_step(%x: !mt.tensor<[n=10], f32>) -> !mt.tensor<[n=10], f32> {
  %y = mt.mul %x, %x : !mt.tensor<[n=10], f32>, !mt.tensor<[n=10], f32> -> !mt.tensor<[n=10], f32>
  return %y : !mt.tensor<[n=10], f32>
}
func.func @helper(%x: !mt.tensor<[n=10], f32>) -> !mt.tensor<[n=10], f32> {
  return %x : !mt.tensor<[n=10], f32>
}
)mlir";

TEST(FunctionCostTest, CountsProductsTrafficAndOps) {
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(kModule, &context);
  ASSERT_TRUE(module);
  std::map<std::string, FunctionCost> costs = computeFunctionCosts(*module);
  // Only the functions the runtime calls.
  ASSERT_EQ(costs.size(), 2u);
  const FunctionCost &step = costs.at("forward_backward");
  // 2 x 4 x 8 x 16 = 1024 FLOPs three times (the layer), and the last product once: the
  // same size, merged.
  ASSERT_EQ(step.gemms.size(), 1u);
  EXPECT_EQ(step.gemms[0].flops, 1024);
  EXPECT_EQ(step.gemms[0].count, 4);
  // Each add reads two [4, 16] f32 tensors and writes one.
  EXPECT_EQ(step.trafficBytes, 3 * 3 * 4 * 16 * 4);
  EXPECT_EQ(step.ops, 3 * 2 + 1);
  const FunctionCost &optimizer = costs.at("optimizer_step");
  EXPECT_TRUE(optimizer.gemms.empty());
  EXPECT_EQ(optimizer.trafficBytes, 3 * 10 * 4);
  EXPECT_EQ(optimizer.ops, 1);
}

// A micro-batch dimension (`batch`) in some operands: the traffic that grows with it is
// counted apart, a product without it as FLOPs that do not grow, and one op alone through
// computeOpCost.
constexpr llvm::StringLiteral kBatched = R"mlir(
func.func @forward_backward(%x: !mt.tensor<[batch=2, h=8], f32>, %g: !mt.tensor<[h=8], f32>, %w: !mt.tensor<[h=8, f=4], f32>) -> !mt.tensor<[h=8], f32> {
  %y = mt.mul %x, %x : !mt.tensor<[batch=2, h=8], f32>, !mt.tensor<[batch=2, h=8], f32> -> !mt.tensor<[batch=2, h=8], f32>
  %a = mt.add %g, %g : !mt.tensor<[h=8], f32>, !mt.tensor<[h=8], f32> -> !mt.tensor<[h=8], f32>
  %p = mt.contract %y, %w over [h] : !mt.tensor<[batch=2, h=8], f32>, !mt.tensor<[h=8, f=4], f32> -> !mt.tensor<[batch=2, f=4], f32>
  %q = mt.contract %w, %w over [f] : !mt.tensor<[h=8, f=4], f32>, !mt.tensor<[h=8, f=4], f32> -> !mt.tensor<[h=8], f32>
  return %a : !mt.tensor<[h=8], f32>
}
)mlir";

TEST(FunctionCostTest, SeparatesWhatGrowsWithTheMicroBatch) {
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(kBatched, &context);
  ASSERT_TRUE(module);
  FunctionCost cost = computeFunctionCost(*module, "forward_backward");
  // The mul: three [2, 8] f32 tensors, batched; the add: three [8] ones, not.
  EXPECT_EQ(cost.trafficBytes, 3 * 2 * 8 * 4 + 3 * 8 * 4);
  EXPECT_EQ(cost.batchTrafficBytes, 3 * 2 * 8 * 4);
  // [h, f] x [h, f] over f: 2 x 8 x 4 FLOPs without the batch.
  EXPECT_EQ(cost.unbatchedGemmFlops, 2 * 8 * 4);
  EXPECT_EQ(cost.ops, 4);
  // The mul alone.
  mlir::Operation *mul = &module->lookupSymbol<mlir::func::FuncOp>("forward_backward")
                              .getBody()
                              .front()
                              .front();
  FunctionCost one = computeOpCost(*module, mul);
  EXPECT_EQ(one.trafficBytes, 3 * 2 * 8 * 4);
  EXPECT_EQ(one.batchTrafficBytes, one.trafficBytes);
  EXPECT_EQ(one.ops, 1);
  // No such function: nothing.
  EXPECT_EQ(computeFunctionCost(*module, "absent").ops, 0);
}

// A layer's composite ops (a layer norm, causal attention and its backward) in the element
// type ELT, decomposed by mt-decompose as the cost model counts them.
constexpr llvm::StringLiteral kComposite = R"mlir(
func.func @forward_backward(%x: !mt.tensor<[batch=2, seq=64, hidden=16], ELT>, %g: !mt.tensor<[hidden=16], ELT>, %b: !mt.tensor<[hidden=16], ELT>, %q: !mt.tensor<[batch=2, seq=64, heads=2, head_dim=8], ELT>, %d: !mt.tensor<[batch=2, seq=64, heads=2, head_dim=8], ELT>) -> (!mt.tensor<[batch=2, seq=64, hidden=16], ELT>, !mt.tensor<[batch=2, seq=64, heads=2, head_dim=8], ELT>, !mt.tensor<[batch=2, seq=64, heads=2, head_dim=8], ELT>, !mt.tensor<[batch=2, seq=64, heads=2, head_dim=8], ELT>, !mt.tensor<[batch=2, seq=64, heads=2, head_dim=8], ELT>) {
  %n = mt.layer_norm %x, %g, %b over hidden : <[batch=2, seq=64, hidden=16], ELT>, <[hidden=16], ELT>, !mt.tensor<[hidden=16], ELT> -> <[batch=2, seq=64, hidden=16], ELT>
  %o = mt.attention %q, %q, %q dims(seq, heads, heads, head_dim) causal scale 0.35 : <[batch=2, seq=64, heads=2, head_dim=8], ELT>, <[batch=2, seq=64, heads=2, head_dim=8], ELT>, <[batch=2, seq=64, heads=2, head_dim=8], ELT>
  %dq, %dk, %dv = mt.attention_grad %q, %q, %q, %d dims(seq, heads, heads, head_dim) causal scale 0.35 : <[batch=2, seq=64, heads=2, head_dim=8], ELT>, <[batch=2, seq=64, heads=2, head_dim=8], ELT>, <[batch=2, seq=64, heads=2, head_dim=8], ELT>, <[batch=2, seq=64, heads=2, head_dim=8], ELT> -> <[batch=2, seq=64, heads=2, head_dim=8], ELT>, <[batch=2, seq=64, heads=2, head_dim=8], ELT>, <[batch=2, seq=64, heads=2, head_dim=8], ELT>
  return %n, %o, %dq, %dk, %dv : !mt.tensor<[batch=2, seq=64, hidden=16], ELT>, !mt.tensor<[batch=2, seq=64, heads=2, head_dim=8], ELT>, !mt.tensor<[batch=2, seq=64, heads=2, head_dim=8], ELT>, !mt.tensor<[batch=2, seq=64, heads=2, head_dim=8], ELT>, !mt.tensor<[batch=2, seq=64, heads=2, head_dim=8], ELT>
}
)mlir";

FunctionCost decomposedCost(mlir::MLIRContext &context, llvm::StringRef elementType) {
  std::string text = kComposite.str();
  for (size_t at = text.find("ELT"); at != std::string::npos; at = text.find("ELT", at))
    text.replace(at, 3, elementType.str());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  EXPECT_TRUE(module);
  if (!module)
    return {};
  mlir::PassManager pm(&context);
  pm.addPass(lowering::createMTDecomposePass());
  EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
  return computeFunctionCost(*module, "forward_backward");
}

// Mixed precision decomposes a bf16 composite op in f32 (the statistics, the scores, the
// softmax and the products), as a fused kernel computes in registers; between kernels the
// tensors are bf16. The cost model counts such an op's tensors at 2 bytes and its casts to
// f32 and back as nothing: the bf16 layer moves exactly half the bytes of the f32 one, in
// as many kernels, with the same products. (Counted in f32 with the casts, a bf16 layer
// cost more than an f32 one, and the Megatron-LM table fell by a third: bench/README.md.)
TEST(FunctionCostTest, LowPrecisionCompositeOpsAreStoredInTheLowType) {
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  FunctionCost wide = decomposedCost(context, "f32");
  FunctionCost low = decomposedCost(context, "bf16");
  ASSERT_GT(wide.trafficBytes, 0);
  // The attention matrices ([2, 64, 2, 64] per score tensor) dominate: several of them.
  EXPECT_GT(wide.trafficBytes, 8 * 2 * 64 * 2 * 64 * 4);
  EXPECT_EQ(2 * low.trafficBytes, wide.trafficBytes);
  EXPECT_EQ(2 * low.batchTrafficBytes, wide.batchTrafficBytes);
  EXPECT_EQ(low.ops, wide.ops);
  ASSERT_EQ(low.gemms.size(), wide.gemms.size());
  for (size_t i = 0; i < low.gemms.size(); ++i) {
    EXPECT_EQ(low.gemms[i].flops, wide.gemms[i].flops);
    EXPECT_EQ(low.gemms[i].count, wide.gemms[i].count);
  }
  // f16 alike.
  EXPECT_EQ(2 * decomposedCost(context, "f16").trafficBytes, wide.trafficBytes);
}

} // namespace
