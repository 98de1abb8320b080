//===- GradientCheckTest.cpp - backward ops against central differences ---===//
//
// Each fused backward op of mt must be the vector-Jacobian product of its forward op: for
// a random output weighting r, the op's result equals the gradient of sum(r * forward),
// which the test estimates by central differences of the forward op run by the same
// interpreter (step 1e-6, relative tolerance 1e-6).
//
//===----------------------------------------------------------------------===//

#include "InterpreterTestSupport.h"

using namespace mtc;
using namespace mtc::interp;
using namespace mtc::interp::testing;

namespace {

class GradientCheckTest : public InterpreterTest {};

TEST_F(GradientCheckTest, CausalGroupedQueryAttentionGrad) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @fwd(%q: !mt.tensor<[batch=2, seq=3, heads=4, head_dim=2], f64>,
                   %k: !mt.tensor<[batch=2, seq=3, kv_heads=2, head_dim=2], f64>,
                   %v: !mt.tensor<[batch=2, seq=3, kv_heads=2, head_dim=2], f64>)
        -> !mt.tensor<[batch=2, seq=3, heads=4, head_dim=2], f64> {
      %0 = mt.attention %q, %k, %v dims(seq, heads, kv_heads, head_dim) causal scale 0.5
          : !mt.tensor<[batch=2, seq=3, heads=4, head_dim=2], f64>,
            !mt.tensor<[batch=2, seq=3, kv_heads=2, head_dim=2], f64>,
            !mt.tensor<[batch=2, seq=3, kv_heads=2, head_dim=2], f64>
      return %0 : !mt.tensor<[batch=2, seq=3, heads=4, head_dim=2], f64>
    }
    func.func @bwd(%q: !mt.tensor<[batch=2, seq=3, heads=4, head_dim=2], f64>,
                   %k: !mt.tensor<[batch=2, seq=3, kv_heads=2, head_dim=2], f64>,
                   %v: !mt.tensor<[batch=2, seq=3, kv_heads=2, head_dim=2], f64>,
                   %do: !mt.tensor<[batch=2, seq=3, heads=4, head_dim=2], f64>)
        -> (!mt.tensor<[batch=2, seq=3, heads=4, head_dim=2], f64>,
            !mt.tensor<[batch=2, seq=3, kv_heads=2, head_dim=2], f64>,
            !mt.tensor<[batch=2, seq=3, kv_heads=2, head_dim=2], f64>) {
      %dq, %dk, %dv = mt.attention_grad %q, %k, %v, %do dims(seq, heads, kv_heads, head_dim)
          causal scale 0.5
          : !mt.tensor<[batch=2, seq=3, heads=4, head_dim=2], f64>,
            !mt.tensor<[batch=2, seq=3, kv_heads=2, head_dim=2], f64>,
            !mt.tensor<[batch=2, seq=3, kv_heads=2, head_dim=2], f64>,
            !mt.tensor<[batch=2, seq=3, heads=4, head_dim=2], f64>
          -> !mt.tensor<[batch=2, seq=3, heads=4, head_dim=2], f64>,
             !mt.tensor<[batch=2, seq=3, kv_heads=2, head_dim=2], f64>,
             !mt.tensor<[batch=2, seq=3, kv_heads=2, head_dim=2], f64>
      return %dq, %dk, %dv : !mt.tensor<[batch=2, seq=3, heads=4, head_dim=2], f64>,
          !mt.tensor<[batch=2, seq=3, kv_heads=2, head_dim=2], f64>,
          !mt.tensor<[batch=2, seq=3, kv_heads=2, head_dim=2], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  std::vector<Tensor> inputs = {random("[batch=2, seq=3, heads=4, head_dim=2], f64", -2, 2),
                                random("[batch=2, seq=3, kv_heads=2, head_dim=2], f64", -2, 2),
                                random("[batch=2, seq=3, kv_heads=2, head_dim=2], f64", -2, 2)};
  Tensor outGrad = random("[batch=2, seq=3, heads=4, head_dim=2], f64");
  MTC_ASSIGN_OR_FAIL(grads, interp.call("bwd", {inputs[0], inputs[1], inputs[2], outGrad}));
  for (unsigned which = 0; which < 3; ++which)
    expectGradient(interp, "fwd", inputs, which, {outGrad}, grads[which]);
}

TEST_F(GradientCheckTest, AttentionGradWithinDocuments) {
  // Document positions (--reset-attention-mask): sample 0 holds documents of 2 and 2
  // tokens, sample 1 one of 4; the positions' dimensions are ordered unlike the query's.
  mlir::ModuleOp module = parse(R"mlir(
    func.func @fwd(%q: !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f64>,
                   %k: !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f64>,
                   %v: !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f64>,
                   %ids: !mt.tensor<[seq=4, batch=2], i32>)
        -> !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f64> {
      %0 = mt.attention %q, %k, %v positions %ids dims(seq, heads, kv_heads, head_dim) causal
          scale 0.5
          : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f64>,
            !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f64>,
            !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f64>,
            !mt.tensor<[seq=4, batch=2], i32>
      return %0 : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f64>
    }
    func.func @bwd(%q: !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f64>,
                   %k: !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f64>,
                   %v: !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f64>,
                   %ids: !mt.tensor<[seq=4, batch=2], i32>,
                   %do: !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f64>)
        -> (!mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f64>,
            !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f64>,
            !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f64>) {
      %dq, %dk, %dv = mt.attention_grad %q, %k, %v, %do positions %ids
          : !mt.tensor<[seq=4, batch=2], i32> dims(seq, heads, kv_heads, head_dim) causal
          scale 0.5
          : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f64>,
            !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f64>,
            !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f64>,
            !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f64>
          -> !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f64>,
             !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f64>,
             !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f64>
      return %dq, %dk, %dv : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=2], f64>,
          !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f64>,
          !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  Tensor ids = tensor("[seq=4, batch=2], i32", {0, 0, 1, 1, 0, 2, 1, 3});
  std::vector<Tensor> inputs = {random("[batch=2, seq=4, heads=4, head_dim=2], f64", -2, 2),
                                random("[batch=2, seq=4, kv_heads=2, head_dim=2], f64", -2, 2),
                                random("[batch=2, seq=4, kv_heads=2, head_dim=2], f64", -2, 2),
                                ids};
  Tensor outGrad = random("[batch=2, seq=4, heads=4, head_dim=2], f64");
  MTC_ASSIGN_OR_FAIL(grads,
                     interp.call("bwd", {inputs[0], inputs[1], inputs[2], ids, outGrad}));
  for (unsigned which = 0; which < 3; ++which)
    expectGradient(interp, "fwd", inputs, which, {outGrad}, grads[which]);
  // The keys of sample 0's first document get no gradient from its second document's
  // queries: with only those queries weighted, they get none at all.
  Tensor secondOnly = outGrad;
  for (int64_t s = 0; s < 2; ++s)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t d = 0; d < 2; ++d)
        secondOnly.at({{"batch", 0}, {"seq", s}, {"heads", h}, {"head_dim", d}}) = 0;
  MTC_ASSIGN_OR_FAIL(masked,
                     interp.call("bwd", {inputs[0], inputs[1], inputs[2], ids, secondOnly}));
  for (int64_t s = 0; s < 2; ++s)
    for (int64_t g = 0; g < 2; ++g)
      for (int64_t d = 0; d < 2; ++d)
        EXPECT_EQ(masked[1].at({{"batch", 0}, {"seq", s}, {"kv_heads", g}, {"head_dim", d}}), 0);
}

TEST_F(GradientCheckTest, NonCausalAttentionGradWithOtherLayouts) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @fwd(%q: !mt.tensor<[head_dim=3, heads=2, seq=2, batch=2], f64>,
                   %k: !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>,
                   %v: !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>)
        -> !mt.tensor<[head_dim=3, heads=2, seq=2, batch=2], f64> {
      %0 = mt.attention %q, %k, %v dims(seq, heads, heads, head_dim) scale 0.8
          : !mt.tensor<[head_dim=3, heads=2, seq=2, batch=2], f64>,
            !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>,
            !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>
      return %0 : !mt.tensor<[head_dim=3, heads=2, seq=2, batch=2], f64>
    }
    func.func @bwd(%q: !mt.tensor<[head_dim=3, heads=2, seq=2, batch=2], f64>,
                   %k: !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>,
                   %v: !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>,
                   %do: !mt.tensor<[head_dim=3, heads=2, seq=2, batch=2], f64>)
        -> (!mt.tensor<[head_dim=3, heads=2, seq=2, batch=2], f64>,
            !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>,
            !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>) {
      %dq, %dk, %dv = mt.attention_grad %q, %k, %v, %do dims(seq, heads, heads, head_dim)
          scale 0.8
          : !mt.tensor<[head_dim=3, heads=2, seq=2, batch=2], f64>,
            !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>,
            !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>,
            !mt.tensor<[head_dim=3, heads=2, seq=2, batch=2], f64>
          -> !mt.tensor<[head_dim=3, heads=2, seq=2, batch=2], f64>,
             !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>,
             !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>
      return %dq, %dk, %dv : !mt.tensor<[head_dim=3, heads=2, seq=2, batch=2], f64>,
          !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>,
          !mt.tensor<[seq=4, heads=2, batch=2, head_dim=3], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  std::vector<Tensor> inputs = {random("[head_dim=3, heads=2, seq=2, batch=2], f64", -2, 2),
                                random("[seq=4, heads=2, batch=2, head_dim=3], f64", -2, 2),
                                random("[seq=4, heads=2, batch=2, head_dim=3], f64", -2, 2)};
  Tensor outGrad = random("[head_dim=3, heads=2, seq=2, batch=2], f64");
  MTC_ASSIGN_OR_FAIL(grads, interp.call("bwd", {inputs[0], inputs[1], inputs[2], outGrad}));
  for (unsigned which = 0; which < 3; ++which)
    expectGradient(interp, "fwd", inputs, which, {outGrad}, grads[which]);
}

TEST_F(GradientCheckTest, CrossEntropyGrad) {
  // Labels list the position dimensions in another order than the logits.
  mlir::ModuleOp module = parse(R"mlir(
    func.func @fwd(%x: !mt.tensor<[b=2, v=5, s=3], f64>, %l: !mt.tensor<[s=3, b=2], i32>)
        -> !mt.tensor<[], f64> {
      %0 = mt.cross_entropy %x, %l over v : !mt.tensor<[b=2, v=5, s=3], f64>,
          !mt.tensor<[s=3, b=2], i32> -> !mt.tensor<[], f64>
      return %0 : !mt.tensor<[], f64>
    }
    func.func @bwd(%x: !mt.tensor<[b=2, v=5, s=3], f64>, %l: !mt.tensor<[s=3, b=2], i32>,
                   %g: !mt.tensor<[], f64>) -> !mt.tensor<[b=2, v=5, s=3], f64> {
      %0 = mt.cross_entropy_grad %x, %l, %g over v : !mt.tensor<[b=2, v=5, s=3], f64>,
          !mt.tensor<[s=3, b=2], i32>, !mt.tensor<[], f64> -> !mt.tensor<[b=2, v=5, s=3], f64>
      return %0 : !mt.tensor<[b=2, v=5, s=3], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  std::vector<Tensor> inputs = {random("[b=2, v=5, s=3], f64", -3, 3),
                                randomIndices("[s=3, b=2], i32", 5)};
  Tensor lossGrad = tensor("[], f64", {1.7});
  MTC_ASSIGN_OR_FAIL(grad, interp.call("bwd", {inputs[0], inputs[1], lossGrad}));
  expectGradient(interp, "fwd", inputs, 0, {lossGrad}, grad[0]);
}

TEST_F(GradientCheckTest, MaskedCrossEntropyGrad) {
  // The loss mask of Megatron's --eod-mask-loss: the masked positions have no gradient.
  mlir::ModuleOp module = parse(R"mlir(
    func.func @fwd(%x: !mt.tensor<[b=2, v=5, s=3], f64>, %l: !mt.tensor<[b=2, s=3], i32>,
                   %m: !mt.tensor<[b=2, s=3], f64>) -> !mt.tensor<[], f64> {
      %0 = mt.cross_entropy %x, %l mask %m over v : !mt.tensor<[b=2, v=5, s=3], f64>,
          !mt.tensor<[b=2, s=3], i32>, !mt.tensor<[b=2, s=3], f64> -> !mt.tensor<[], f64>
      return %0 : !mt.tensor<[], f64>
    }
    func.func @bwd(%x: !mt.tensor<[b=2, v=5, s=3], f64>, %l: !mt.tensor<[b=2, s=3], i32>,
                   %m: !mt.tensor<[b=2, s=3], f64>, %g: !mt.tensor<[], f64>)
        -> !mt.tensor<[b=2, v=5, s=3], f64> {
      %0 = mt.cross_entropy_grad %x, %l, %g mask %m over v : !mt.tensor<[b=2, v=5, s=3], f64>,
          !mt.tensor<[b=2, s=3], i32>, !mt.tensor<[], f64>, !mt.tensor<[b=2, s=3], f64>
          -> !mt.tensor<[b=2, v=5, s=3], f64>
      return %0 : !mt.tensor<[b=2, v=5, s=3], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  std::vector<Tensor> inputs = {random("[b=2, v=5, s=3], f64", -3, 3),
                                randomIndices("[b=2, s=3], i32", 5),
                                tensor("[b=2, s=3], f64", {1, 0, 1, 1, 1, 0})};
  Tensor lossGrad = tensor("[], f64", {1.7});
  MTC_ASSIGN_OR_FAIL(grad, interp.call("bwd", {inputs[0], inputs[1], inputs[2], lossGrad}));
  expectGradient(interp, "fwd", inputs, 0, {lossGrad}, grad[0]);
  // Position (b=0, s=1) is masked: its logits' gradient is zero.
  for (int64_t v = 0; v < 5; ++v)
    EXPECT_EQ(grad[0].data[v * 3 + 1], 0.0) << "v = " << v;
}

TEST_F(GradientCheckTest, EmbeddingGradIsTheAdjointOfGather) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @fwd(%t: !mt.tensor<[h=3, v=4], f64>, %i: !mt.tensor<[n=5], i32>)
        -> !mt.tensor<[n=5, h=3], f64> {
      %0 = mt.gather %t, %i over v : !mt.tensor<[h=3, v=4], f64>, !mt.tensor<[n=5], i32>
          -> !mt.tensor<[n=5, h=3], f64>
      return %0 : !mt.tensor<[n=5, h=3], f64>
    }
    func.func @bwd(%i: !mt.tensor<[n=5], i32>, %g: !mt.tensor<[n=5, h=3], f64>)
        -> !mt.tensor<[h=3, v=4], f64> {
      %0 = mt.embedding_grad %i, %g over v : !mt.tensor<[n=5], i32>,
          !mt.tensor<[n=5, h=3], f64> -> !mt.tensor<[h=3, v=4], f64>
      return %0 : !mt.tensor<[h=3, v=4], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  // Row 2 is selected twice (its gradients add up), row 0 never (zero gradient).
  std::vector<Tensor> inputs = {random("[h=3, v=4], f64"), tensor("[n=5], i32", {2, 1, 3, 2, 1})};
  Tensor outGrad = random("[n=5, h=3], f64");
  MTC_ASSIGN_OR_FAIL(grad, interp.call("bwd", {inputs[1], outGrad}));
  expectGradient(interp, "fwd", inputs, 0, {outGrad}, grad[0]);
  for (int64_t h = 0; h < 3; ++h)
    EXPECT_EQ(grad[0].at({{"h", h}, {"v", 0}}), 0);
}

TEST_F(GradientCheckTest, TopKGrad) {
  // The value gradient and the indices list their dimensions in different orders.
  mlir::ModuleOp module = parse(R"mlir(
    func.func @fwd(%x: !mt.tensor<[e=5, t=3], f64>) -> !mt.tensor<[kk=2, t=3], f64> {
      %v, %i = mt.topk %x over e k kk : !mt.tensor<[e=5, t=3], f64>
          -> !mt.tensor<[kk=2, t=3], f64>, !mt.tensor<[kk=2, t=3], i32>
      return %v : !mt.tensor<[kk=2, t=3], f64>
    }
    func.func @bwd(%x: !mt.tensor<[e=5, t=3], f64>, %r: !mt.tensor<[kk=2, t=3], f64>)
        -> !mt.tensor<[e=5, t=3], f64> {
      %v, %i = mt.topk %x over e k kk : !mt.tensor<[e=5, t=3], f64>
          -> !mt.tensor<[kk=2, t=3], f64>, !mt.tensor<[kk=2, t=3], i32>
      %it = mt.transpose %i : !mt.tensor<[kk=2, t=3], i32> to !mt.tensor<[t=3, kk=2], i32>
      %0 = mt.topk_grad %r, %it over e k kk : !mt.tensor<[kk=2, t=3], f64>,
          !mt.tensor<[t=3, kk=2], i32> -> !mt.tensor<[e=5, t=3], f64>
      return %0 : !mt.tensor<[e=5, t=3], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  std::vector<Tensor> inputs = {random("[e=5, t=3], f64")};
  Tensor outGrad = random("[kk=2, t=3], f64");
  MTC_ASSIGN_OR_FAIL(grad, interp.call("bwd", {inputs[0], outGrad}));
  expectGradient(interp, "fwd", inputs, 0, {outGrad}, grad[0]);
}

TEST_F(GradientCheckTest, CombineGradWithDroppedChoices) {
  // Tokens are (s, b) in the indices' order; the expert buffers list the feature first;
  // three experts of two slots for eight choices, so some are dropped.
  mlir::ModuleOp module = parse(R"mlir(
    func.func @fwd(%e: !mt.tensor<[h=2, slot=2, experts=3], f64>,
                   %w: !mt.tensor<[b=2, s=2, choice=2], f64>,
                   %i: !mt.tensor<[s=2, choice=2, b=2], i32>)
        -> !mt.tensor<[s=2, b=2, h=2], f64> {
      %0 = mt.combine %e, %i, %w k choice from experts capacity slot
          : !mt.tensor<[h=2, slot=2, experts=3], f64>, !mt.tensor<[s=2, choice=2, b=2], i32>,
            !mt.tensor<[b=2, s=2, choice=2], f64> -> !mt.tensor<[s=2, b=2, h=2], f64>
      return %0 : !mt.tensor<[s=2, b=2, h=2], f64>
    }
    func.func @bwd(%e: !mt.tensor<[h=2, slot=2, experts=3], f64>,
                   %w: !mt.tensor<[b=2, s=2, choice=2], f64>,
                   %i: !mt.tensor<[s=2, choice=2, b=2], i32>,
                   %g: !mt.tensor<[s=2, b=2, h=2], f64>)
        -> (!mt.tensor<[h=2, slot=2, experts=3], f64>, !mt.tensor<[b=2, s=2, choice=2], f64>) {
      %de, %dw = mt.combine_grad %e, %i, %w, %g k choice from experts capacity slot
          : !mt.tensor<[h=2, slot=2, experts=3], f64>, !mt.tensor<[s=2, choice=2, b=2], i32>,
            !mt.tensor<[b=2, s=2, choice=2], f64>, !mt.tensor<[s=2, b=2, h=2], f64>
          -> !mt.tensor<[h=2, slot=2, experts=3], f64>, !mt.tensor<[b=2, s=2, choice=2], f64>
      return %de, %dw : !mt.tensor<[h=2, slot=2, experts=3], f64>,
          !mt.tensor<[b=2, s=2, choice=2], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  // Every token's first choice is expert 0, which takes only tokens (s0, b0) and (s0, b1).
  Tensor indices(type("[s=2, choice=2, b=2], i32"));
  for (int64_t s = 0; s < 2; ++s)
    for (int64_t b = 0; b < 2; ++b) {
      indices.at({{"s", s}, {"choice", 0}, {"b", b}}) = 0;
      indices.at({{"s", s}, {"choice", 1}, {"b", b}}) = 1 + b;
    }
  std::vector<Tensor> inputs = {random("[h=2, slot=2, experts=3], f64"),
                                random("[b=2, s=2, choice=2], f64"), indices};
  Tensor outGrad = random("[s=2, b=2, h=2], f64");
  MTC_ASSIGN_OR_FAIL(grads, interp.call("bwd", {inputs[0], inputs[1], inputs[2], outGrad}));
  expectGradient(interp, "fwd", inputs, 0, {outGrad}, grads[0]);
  expectGradient(interp, "fwd", inputs, 1, {outGrad}, grads[1]);
  // Dropped choices get no weight gradient.
  EXPECT_EQ(grads[1].at({{"b", 0}, {"s", 1}, {"choice", 0}}), 0);
  EXPECT_EQ(grads[1].at({{"b", 1}, {"s", 1}, {"choice", 0}}), 0);
  EXPECT_NE(grads[1].at({{"b", 1}, {"s", 0}, {"choice", 0}}), 0);
}

TEST_F(GradientCheckTest, LoadBalancingLossGrad) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @fwd(%x: !mt.tensor<[e=4, t=3], f64>, %i: !mt.tensor<[kk=2, t=3], i32>)
        -> !mt.tensor<[], f64> {
      %0 = mt.load_balancing_loss %x, %i over e k kk : !mt.tensor<[e=4, t=3], f64>,
          !mt.tensor<[kk=2, t=3], i32> -> !mt.tensor<[], f64>
      return %0 : !mt.tensor<[], f64>
    }
    func.func @bwd(%x: !mt.tensor<[e=4, t=3], f64>, %i: !mt.tensor<[kk=2, t=3], i32>,
                   %g: !mt.tensor<[], f64>) -> !mt.tensor<[e=4, t=3], f64> {
      %0 = mt.load_balancing_loss_grad %x, %i, %g over e k kk : !mt.tensor<[e=4, t=3], f64>,
          !mt.tensor<[kk=2, t=3], i32>, !mt.tensor<[], f64> -> !mt.tensor<[e=4, t=3], f64>
      return %0 : !mt.tensor<[e=4, t=3], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  std::vector<Tensor> inputs = {random("[e=4, t=3], f64", -2, 2),
                                tensor("[kk=2, t=3], i32", {0, 0, 3, 1, 2, 0})};
  Tensor lossGrad = tensor("[], f64", {0.9});
  MTC_ASSIGN_OR_FAIL(grad, interp.call("bwd", {inputs[0], inputs[1], lossGrad}));
  expectGradient(interp, "fwd", inputs, 0, {lossGrad}, grad[0]);
}

TEST_F(GradientCheckTest, LoadBalancingLossGradFromProbabilities) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @fwd(%p: !mt.tensor<[e=4, t=3], f64>, %i: !mt.tensor<[kk=2, t=3], i32>)
        -> !mt.tensor<[], f64> {
      %0 = mt.load_balancing_loss %p, %i over e k kk probabilities
          : !mt.tensor<[e=4, t=3], f64>, !mt.tensor<[kk=2, t=3], i32> -> !mt.tensor<[], f64>
      return %0 : !mt.tensor<[], f64>
    }
    func.func @bwd(%p: !mt.tensor<[e=4, t=3], f64>, %i: !mt.tensor<[kk=2, t=3], i32>,
                   %g: !mt.tensor<[], f64>) -> !mt.tensor<[e=4, t=3], f64> {
      %0 = mt.load_balancing_loss_grad %p, %i, %g over e k kk probabilities
          : !mt.tensor<[e=4, t=3], f64>, !mt.tensor<[kk=2, t=3], i32>, !mt.tensor<[], f64>
          -> !mt.tensor<[e=4, t=3], f64>
      return %0 : !mt.tensor<[e=4, t=3], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  std::vector<Tensor> inputs = {random("[e=4, t=3], f64", 0, 1),
                                tensor("[kk=2, t=3], i32", {0, 0, 3, 1, 2, 0})};
  Tensor lossGrad = tensor("[], f64", {0.9});
  MTC_ASSIGN_OR_FAIL(grad, interp.call("bwd", {inputs[0], inputs[1], lossGrad}));
  expectGradient(interp, "fwd", inputs, 0, {lossGrad}, grad[0]);
}

TEST_F(GradientCheckTest, GeluGradBothForms) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @exact(%x: !mt.tensor<[n=9], f32>) -> !mt.tensor<[n=9], f32> {
      %0 = mt.gelu %x : !mt.tensor<[n=9], f32>
      return %0 : !mt.tensor<[n=9], f32>
    }
    func.func @exact_grad(%x: !mt.tensor<[n=9], f32>) -> !mt.tensor<[n=9], f32> {
      %0 = mt.gelu_grad %x : !mt.tensor<[n=9], f32>
      return %0 : !mt.tensor<[n=9], f32>
    }
    func.func @tanh(%x: !mt.tensor<[n=9], f32>) -> !mt.tensor<[n=9], f32> {
      %0 = mt.gelu %x approximate : !mt.tensor<[n=9], f32>
      return %0 : !mt.tensor<[n=9], f32>
    }
    func.func @tanh_grad(%x: !mt.tensor<[n=9], f32>) -> !mt.tensor<[n=9], f32> {
      %0 = mt.gelu_grad %x approximate : !mt.tensor<[n=9], f32>
      return %0 : !mt.tensor<[n=9], f32>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  // Elementwise: with weights of one, the gradient of sum(gelu(x)) is gelu'(x).
  std::vector<Tensor> inputs = {tensor("[n=9], f32", {-4, -2, -1, -0.5, 0, 0.3, 1, 2.5, 4})};
  Tensor ones = tensor("[n=9], f32", std::vector<double>(9, 1.0));
  for (auto [forward, backward] : {std::pair{"exact", "exact_grad"}, {"tanh", "tanh_grad"}}) {
    SCOPED_TRACE(forward);
    MTC_ASSIGN_OR_FAIL(grad, interp.call(backward, inputs));
    expectGradient(interp, forward, inputs, 0, {ones}, grad[0]);
  }
}

} // namespace
