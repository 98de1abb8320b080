//===- FunctionCostTest.cpp - what one call of a step function computes ---===//
//
// computeFunctionCosts counts, per call of each function the runtime calls, the matrix
// products by FLOPs (2 x the product of every distinct dimension), the bytes the other ops'
// kernels move, fused as mtc-fuse-elementwise fuses them, and the kernel count, a layer
// scan once per repeat; views and casts count nothing.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/FunctionCost.h"
#include "compiler/codegen/ToLinalg/Passes.h"
#include "compiler/fusion/Passes.h"
#include "compiler/lowering/Passes.h"
#include "compiler/registration/Registration.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <iterator>
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
  // Each add reads one [4, 16] f32 tensor (both operands are the same value: the kernel
  // reads it once) and writes one.
  EXPECT_EQ(step.trafficBytes, 3 * 2 * 4 * 16 * 4);
  EXPECT_EQ(step.ops, 3 * 2 + 1);
  const FunctionCost &optimizer = costs.at("optimizer_step");
  EXPECT_TRUE(optimizer.gemms.empty());
  EXPECT_EQ(optimizer.trafficBytes, 2 * 10 * 4);
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
  // The mul: two [2, 8] f32 tensors (x read once, y written), batched; the add: two [8]
  // ones, not.
  EXPECT_EQ(cost.trafficBytes, 2 * 2 * 8 * 4 + 2 * 8 * 4);
  EXPECT_EQ(cost.batchTrafficBytes, 2 * 2 * 8 * 4);
  // [h, f] x [h, f] over f: 2 x 8 x 4 FLOPs without the batch.
  EXPECT_EQ(cost.unbatchedGemmFlops, 2 * 8 * 4);
  EXPECT_EQ(cost.ops, 4);
  // The mul alone.
  mlir::Operation *mul = &module->lookupSymbol<mlir::func::FuncOp>("forward_backward")
                              .getBody()
                              .front()
                              .front();
  FunctionCost one = computeOpCost(*module, mul);
  EXPECT_EQ(one.trafficBytes, 2 * 2 * 8 * 4);
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

// Fusion: an elementwise chain (add, gelu, mul) is one kernel that reads its external
// inputs once and writes its result; a reduction fed by an elementwise op is one kernel;
// what the fusion does not merge stays apart: a reduction feeding a broadcast (a reduction
// is never fused into its consumer), an op whose result has two uses, a value returned.
constexpr llvm::StringLiteral kFusion = R"mlir(
func.func @chain(%x: !mt.tensor<[b=4, h=8], f32>, %y: !mt.tensor<[b=4, h=8], f32>) -> !mt.tensor<[b=4, h=8], f32> {
  %a = mt.add %x, %y : !mt.tensor<[b=4, h=8], f32>, !mt.tensor<[b=4, h=8], f32> -> !mt.tensor<[b=4, h=8], f32>
  %g = mt.gelu %a : !mt.tensor<[b=4, h=8], f32>
  %r = mt.rename %g h to k : !mt.tensor<[b=4, h=8], f32> -> !mt.tensor<[b=4, k=8], f32>
  %s = mt.rename %r k to h : !mt.tensor<[b=4, k=8], f32> -> !mt.tensor<[b=4, h=8], f32>
  %m = mt.mul %s, %x : !mt.tensor<[b=4, h=8], f32>, !mt.tensor<[b=4, h=8], f32> -> !mt.tensor<[b=4, h=8], f32>
  return %m : !mt.tensor<[b=4, h=8], f32>
}
func.func @sum_of_squares(%x: !mt.tensor<[b=4, h=8], f32>) -> !mt.tensor<[b=4], f32> {
  %q = mt.mul %x, %x : !mt.tensor<[b=4, h=8], f32>, !mt.tensor<[b=4, h=8], f32> -> !mt.tensor<[b=4, h=8], f32>
  %s = mt.reduce_sum %q over [h] : !mt.tensor<[b=4, h=8], f32> -> !mt.tensor<[b=4], f32>
  return %s : !mt.tensor<[b=4], f32>
}
func.func @centre(%x: !mt.tensor<[b=4, h=8], f32>) -> !mt.tensor<[b=4, h=8], f32> {
  %s = mt.reduce_sum %x over [h] : !mt.tensor<[b=4, h=8], f32> -> !mt.tensor<[b=4], f32>
  %t = mt.broadcast %s : !mt.tensor<[b=4], f32> to !mt.tensor<[b=4, h=8], f32>
  %d = mt.sub %x, %t : !mt.tensor<[b=4, h=8], f32>, !mt.tensor<[b=4, h=8], f32> -> !mt.tensor<[b=4, h=8], f32>
  return %d : !mt.tensor<[b=4, h=8], f32>
}
func.func @shared(%x: !mt.tensor<[b=4, h=8], f32>, %y: !mt.tensor<[b=4, h=8], f32>) -> (!mt.tensor<[b=4, h=8], f32>, !mt.tensor<[b=4, h=8], f32>) {
  %e = mt.exp %x : !mt.tensor<[b=4, h=8], f32>
  %u = mt.mul %e, %y : !mt.tensor<[b=4, h=8], f32>, !mt.tensor<[b=4, h=8], f32> -> !mt.tensor<[b=4, h=8], f32>
  %v = mt.add %e, %y : !mt.tensor<[b=4, h=8], f32>, !mt.tensor<[b=4, h=8], f32> -> !mt.tensor<[b=4, h=8], f32>
  return %u, %v : !mt.tensor<[b=4, h=8], f32>, !mt.tensor<[b=4, h=8], f32>
}
)mlir";

constexpr int64_t kMatrix = 4 * 8 * 4, kRow = 4 * 4;

TEST(FunctionCostTest, FusedKernelsMoveTheirExternalInputsAndOutputsOnly) {
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(kFusion, &context);
  ASSERT_TRUE(module);
  // x and y read once each (x by the add and the mul), m written: one kernel, where the
  // three ops unfused moved 8 matrices.
  FunctionCost chain = computeFunctionCost(*module, "chain");
  EXPECT_EQ(chain.ops, 1);
  EXPECT_EQ(chain.trafficBytes, 3 * kMatrix);
  // x read once, the row sums written.
  FunctionCost squares = computeFunctionCost(*module, "sum_of_squares");
  EXPECT_EQ(squares.ops, 1);
  EXPECT_EQ(squares.trafficBytes, kMatrix + kRow);
  // Not merged: the sum reads x and writes its rows; the broadcast is fused into the sub,
  // which reads the rows and x again and writes d.
  FunctionCost centre = computeFunctionCost(*module, "centre");
  EXPECT_EQ(centre.ops, 2);
  EXPECT_EQ(centre.trafficBytes, kMatrix + kRow + kRow + kMatrix + kMatrix);
  // exp has two users: written once, read by each of them.
  FunctionCost shared = computeFunctionCost(*module, "shared");
  EXPECT_EQ(shared.ops, 3);
  EXPECT_EQ(shared.trafficBytes, 2 * kMatrix + 2 * 3 * kMatrix);
  // One op alone: the kernel is counted at its root, the op that writes it.
  mlir::Block &body = module->lookupSymbol<mlir::func::FuncOp>("chain").getBody().front();
  EXPECT_EQ(computeOpCost(*module, &body.front()).ops, 0);
  EXPECT_EQ(computeOpCost(*module, body.getTerminator()->getOperand(0).getDefiningOp())
                .trafficBytes,
            3 * kMatrix);
}

// The cost model's kernels are those mt-to-linalg and mtc-fuse-elementwise make: on
// decomposed norms, softmax, rope, dropout and a mean (no products, whose operand
// transposes are kernels the cost model prices with the GEMM), as many kernels as
// `linalg.generic` ops remain after the fusion.
constexpr llvm::StringLiteral kKernels = R"mlir(
func.func @forward_backward(%x: !mt.tensor<[batch=2, seq=4, hidden=8], f32>, %g: !mt.tensor<[hidden=8], f32>, %b: !mt.tensor<[hidden=8], f32>, %q: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>, %a: !mt.tensor<[heads=2, seq=4, kv_seq=4], f32>) -> (!mt.tensor<[batch=2, seq=4, hidden=8], f32>, !mt.tensor<[batch=2, seq=4, hidden=8], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>, !mt.tensor<[heads=2, seq=4, kv_seq=4], f32>, !mt.tensor<[batch=2, seq=4], f32>) {
  %n = mt.layer_norm %x, %g, %b over hidden : <[batch=2, seq=4, hidden=8], f32>, <[hidden=8], f32>, !mt.tensor<[hidden=8], f32> -> <[batch=2, seq=4, hidden=8], f32>
  %r = mt.rms_norm %x, %g over hidden : <[batch=2, seq=4, hidden=8], f32>, <[hidden=8], f32> -> <[batch=2, seq=4, hidden=8], f32>
  %e = mt.gelu %r : !mt.tensor<[batch=2, seq=4, hidden=8], f32>
  %d = mt.dropout %e rate 0.1 stream 0 : <[batch=2, seq=4, hidden=8], f32>
  %p = mt.mul %q, %q : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32> -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>
  %o = mt.rope %p over head_dim position seq : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>
  %s = mt.softmax %a over kv_seq : !mt.tensor<[heads=2, seq=4, kv_seq=4], f32>
  %m = mt.reduce_mean %d over [hidden] : !mt.tensor<[batch=2, seq=4, hidden=8], f32> -> !mt.tensor<[batch=2, seq=4], f32>
  return %n, %d, %o, %s, %m : !mt.tensor<[batch=2, seq=4, hidden=8], f32>, !mt.tensor<[batch=2, seq=4, hidden=8], f32>, !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>, !mt.tensor<[heads=2, seq=4, kv_seq=4], f32>, !mt.tensor<[batch=2, seq=4], f32>
}
)mlir";

TEST(FunctionCostTest, KernelsAreThoseTheFusionMakes) {
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(kKernels, &context);
  ASSERT_TRUE(module);
  mlir::PassManager decompose(&context);
  decompose.addPass(lowering::createMTDecomposePass());
  ASSERT_TRUE(mlir::succeeded(decompose.run(*module)));
  FunctionCost cost = computeFunctionCost(*module, "forward_backward");
  ASSERT_TRUE(cost.gemms.empty());

  mlir::PassManager lower(&context);
  lower.addPass(codegen::createMTToLinalgPass());
  lower.addPass(fusion::createFuseElementwisePass());
  lower.addPass(mlir::createCanonicalizerPass());
  ASSERT_TRUE(mlir::succeeded(lower.run(*module)));
  int64_t generics = 0;
  module->walk([&](mlir::linalg::GenericOp) { ++generics; });
  // Unfused, the decomposition is several times as many ops.
  EXPECT_GT(generics, 5);
  EXPECT_EQ(cost.ops, generics);
}

// A rope, then two factors per position broadcast over the rest: exp (costly) and neg
// (cheap).
constexpr llvm::StringLiteral kBroadcasts = R"mlir(
func.func @forward_backward(%x: !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>, %s: !mt.tensor<[seq=4], f32>) -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32> {
  %r = mt.rope %x over head_dim position seq : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>
  %e = mt.exp %s : !mt.tensor<[seq=4], f32>
  %m = mt.mul %r, %e : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>, !mt.tensor<[seq=4], f32> -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>
  %n = mt.neg %s : !mt.tensor<[seq=4], f32>
  %k = mt.mul %m, %n : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>, !mt.tensor<[seq=4], f32> -> !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>
  return %k : !mt.tensor<[batch=2, seq=4, heads=2, head_dim=8], f32>
}
)mlir";

// Rope's cos and sin tables are a kernel of their own, which its kernel reads; a costly
// producer read broadcast (exp per position, read for every batch row, head and index) is
// not fused, a cheap one (neg) is: as many kernels as mtc-fuse-elementwise leaves generics.
TEST(FunctionCostTest, CostlyProducersAreNotRecomputedPerElement) {
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(kBroadcasts, &context);
  ASSERT_TRUE(module);
  constexpr int64_t kTensor = 2 * 4 * 2 * 8 * 4, kRow = 4 * 4;
  // 4 pairs x 4 positions, f64, cos and sin.
  constexpr int64_t kTables = 2 * 4 * 4 * 8;
  mlir::Block &body =
      module->lookupSymbol<mlir::func::FuncOp>("forward_backward").getBody().front();
  auto opAt = [&](unsigned index) { return &*std::next(body.begin(), index); };
  FunctionCost exp = computeOpCost(*module, opAt(1));
  EXPECT_EQ(exp.ops, 1);
  EXPECT_EQ(exp.trafficBytes, 2 * kRow);
  EXPECT_EQ(computeOpCost(*module, opAt(3)).ops, 0);
  // The tables' kernel, and one kernel of rope, both products and neg: x, the exponentials,
  // s (for neg) read, the result written, the tables written and read.
  FunctionCost root = computeOpCost(*module, opAt(4));
  EXPECT_EQ(root.ops, 2);
  EXPECT_EQ(root.trafficBytes, kTensor + kRow + kRow + kTensor + 2 * kTables);
  FunctionCost cost = computeFunctionCost(*module, "forward_backward");
  EXPECT_EQ(cost.ops, 3);

  mlir::PassManager lower(&context);
  lower.addPass(codegen::createMTToLinalgPass());
  lower.addPass(fusion::createFuseElementwisePass());
  lower.addPass(mlir::createCanonicalizerPass());
  ASSERT_TRUE(mlir::succeeded(lower.run(*module)));
  int64_t generics = 0;
  module->walk([&](mlir::linalg::GenericOp) { ++generics; });
  EXPECT_EQ(cost.ops, generics);
}

} // namespace
