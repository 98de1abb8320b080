//===- DecomposeTest.cpp - mt-decompose against the reference interpreter -===//
//
// Every composite op rewritten by -mt-decompose must compute what the op computed: each
// test runs a function on random inputs with the float64 interpreter, runs the pass, runs
// the function again and requires the results to agree within 1e-10 relative. The tiny
// example models are checked whole: the loss of `forward`, and the loss and every
// parameter gradient of `forward_backward` (after -mt-autodiff, whose backward uses
// attention_grad and cross_entropy_grad).
//
//===----------------------------------------------------------------------===//

#include "../interpreter/InterpreterTestSupport.h"
#include "test/unittests/support/LowerExample.h"

#include "compiler/autodiff/Passes.h"
#include "compiler/lowering/Passes.h"
#include "compiler/registration/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"

#include <cmath>
#include <string>

using namespace mtc;
using namespace mtc::interp;
using namespace mtc::interp::testing;

namespace {

/// Relative agreement required between the op and its decomposition. Elements that are
/// zero up to rounding are compared against the largest magnitude of their tensor.
constexpr double kRelative = 1e-10;

class DecomposeTest : public InterpreterTest {
protected:
  DecomposeTest() {
    mlir::DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
  }

  /// Runs -mt-decompose on `module` and checks that no composite op is left.
  void decompose(mlir::ModuleOp module) {
    mlir::PassManager pm(&context);
    pm.addPass(lowering::createMTDecomposePass());
    ASSERT_TRUE(mlir::succeeded(pm.run(module)));
    module.walk([](mlir::Operation *op) {
      EXPECT_FALSE((llvm::isa<mt::SoftmaxOp, mt::LayerNormOp, mt::RMSNormOp, mt::AttentionOp,
                              mt::AttentionGradOp, mt::CrossEntropyOp, mt::CrossEntropyGradOp,
                              mt::ZLossOp>(op)))
          << "left after decomposition: " << op->getName().getStringRef().str();
    });
  }

  /// Requires `actual` to match `expected` element by element within kRelative, or within
  /// `absolute` plus 1e-13 of the tensor's largest magnitude (for elements that are zero up to
  /// rounding).
  static void expectClose(const std::vector<Tensor> &expected, const std::vector<Tensor> &actual,
                          double absolute = 0) {
    ASSERT_EQ(expected.size(), actual.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(expected[i].type, actual[i].type) << "result #" << i;
      double largest = 0;
      for (double value : expected[i].data)
        largest = std::max(largest, std::fabs(value));
      int failures = 0;
      for (int64_t j = 0; j < expected[i].getNumElements() && failures < 5; ++j) {
        double floor = absolute + 1e-13 * largest;
        bool ok = near(actual[i].data[j], expected[i].data[j], kRelative, floor);
        EXPECT_TRUE(ok) << "result #" << i << " element " << j << ": "
                        << near(actual[i].data[j], expected[i].data[j], kRelative, floor).message();
        failures += !ok;
      }
    }
  }

  /// Evaluates `func` of `source` on `args` before and after the pass; the results must
  /// agree.
  void expectSameAfterDecompose(llvm::StringRef source, llvm::StringRef func,
                                const std::vector<Tensor> &args) {
    mlir::ModuleOp module = parse(source);
    ASSERT_TRUE(module);
    std::vector<Tensor> before;
    {
      Interpreter interp(module);
      MTC_ASSIGN_OR_FAIL(out, interp.call(func, args));
      before = std::move(out);
    }
    decompose(module);
    Interpreter interp(module);
    MTC_ASSIGN_OR_FAIL(after, interp.call(func, args));
    expectClose(before, after);
  }

  /// A module with @fwd (mt.attention) and @bwd (mt.attention_grad) for query type `q`,
  /// key and value type `kv` and dims(`dims`).
  static std::string attentionModule(llvm::StringRef q, llvm::StringRef kv, llvm::StringRef dims,
                                     bool causal, llvm::StringRef scale) {
    std::string qt = "!mt.tensor<" + q.str() + ">", kt = "!mt.tensor<" + kv.str() + ">";
    std::string attrs =
        "dims(" + dims.str() + ")" + (causal ? " causal" : "") + " scale " + scale.str();
    return "func.func @fwd(%q: " + qt + ", %k: " + kt + ", %v: " + kt + ") -> " + qt +
           " {\n  %0 = mt.attention %q, %k, %v " + attrs + " : " + qt + ", " + kt + ", " + kt +
           "\n  return %0 : " + qt + "\n}\n" + "func.func @bwd(%q: " + qt + ", %k: " + kt +
           ", %v: " + kt + ", %do: " + qt + ") -> (" + qt + ", " + kt + ", " + kt +
           ") {\n  %dq, %dk, %dv = mt.attention_grad %q, %k, %v, %do " + attrs + " : " + qt + ", " +
           kt + ", " + kt + ", " + qt + " -> " + qt + ", " + kt + ", " + kt +
           "\n  return %dq, %dk, %dv : " + qt + ", " + kt + ", " + kt + "\n}\n";
  }

  /// Checks the forward and the backward of one attention configuration.
  void checkAttention(llvm::StringRef q, llvm::StringRef kv, llvm::StringRef dims, bool causal,
                      llvm::StringRef scale) {
    std::string source = attentionModule(q, kv, dims, causal, scale);
    std::vector<Tensor> args = {random(q, -2, 2), random(kv, -2, 2), random(kv, -2, 2)};
    expectSameAfterDecompose(source, "fwd", args);
    args.push_back(random(q));
    expectSameAfterDecompose(source, "bwd", args);
  }
};

//===----------------------------------------------------------------------===//
// Softmax and norms
//===----------------------------------------------------------------------===//

TEST_F(DecomposeTest, Softmax) {
  llvm::StringRef source = R"mlir(
    func.func @f(%x: !mt.tensor<[a=2, n=5, c=3], f64>) -> !mt.tensor<[a=2, n=5, c=3], f64> {
      %0 = mt.softmax %x over n : !mt.tensor<[a=2, n=5, c=3], f64>
      return %0 : !mt.tensor<[a=2, n=5, c=3], f64>
    }
  )mlir";
  expectSameAfterDecompose(source, "f", {random("[a=2, n=5, c=3], f64", -20, 20)});
}

TEST_F(DecomposeTest, LayerNormWithBias) {
  llvm::StringRef source = R"mlir(
    func.func @f(%x: !mt.tensor<[b=3, h=6], f64>, %g: !mt.tensor<[h=6], f64>,
                 %c: !mt.tensor<[h=6], f64>) -> !mt.tensor<[b=3, h=6], f64> {
      %0 = mt.layer_norm %x, %g, %c over h {epsilon = 1.0e-3 : f64}
          : !mt.tensor<[b=3, h=6], f64>, !mt.tensor<[h=6], f64>, !mt.tensor<[h=6], f64>
          -> !mt.tensor<[b=3, h=6], f64>
      return %0 : !mt.tensor<[b=3, h=6], f64>
    }
  )mlir";
  expectSameAfterDecompose(
      source, "f", {random("[b=3, h=6], f64", -3, 3), random("[h=6], f64"), random("[h=6], f64")});
}

TEST_F(DecomposeTest, LayerNormWithoutBiasOverALeadingDim) {
  llvm::StringRef source = R"mlir(
    func.func @f(%x: !mt.tensor<[h=5, b=2, s=3], f32>, %g: !mt.tensor<[h=5], f32>)
        -> !mt.tensor<[h=5, b=2, s=3], f32> {
      %0 = mt.layer_norm %x, %g over h : !mt.tensor<[h=5, b=2, s=3], f32>,
          !mt.tensor<[h=5], f32> -> !mt.tensor<[h=5, b=2, s=3], f32>
      return %0 : !mt.tensor<[h=5, b=2, s=3], f32>
    }
  )mlir";
  expectSameAfterDecompose(source, "f",
                           {random("[h=5, b=2, s=3], f32", -3, 3), random("[h=5], f32")});
}

TEST_F(DecomposeTest, RMSNorm) {
  llvm::StringRef source = R"mlir(
    func.func @f(%x: !mt.tensor<[b=2, h=6, s=2], f64>, %g: !mt.tensor<[h=6], f64>)
        -> !mt.tensor<[b=2, h=6, s=2], f64> {
      %0 = mt.rms_norm %x, %g over h {epsilon = 1.0e-2 : f64}
          : !mt.tensor<[b=2, h=6, s=2], f64>, !mt.tensor<[h=6], f64>
          -> !mt.tensor<[b=2, h=6, s=2], f64>
      return %0 : !mt.tensor<[b=2, h=6, s=2], f64>
    }
  )mlir";
  expectSameAfterDecompose(source, "f",
                           {random("[b=2, h=6, s=2], f64", -3, 3), random("[h=6], f64")});
}

//===----------------------------------------------------------------------===//
// Attention and its backward
//===----------------------------------------------------------------------===//

TEST_F(DecomposeTest, MultiHeadAttentionNonCausal) {
  checkAttention("[batch=2, seq=4, heads=3, head_dim=2], f64",
                 "[batch=2, seq=4, heads=3, head_dim=2], f64", "seq, heads, heads, head_dim",
                 /*causal=*/false, "0.7");
}

TEST_F(DecomposeTest, MultiHeadAttentionCausal) {
  checkAttention("[batch=2, seq=5, heads=2, head_dim=3], f64",
                 "[batch=2, seq=5, heads=2, head_dim=3], f64", "seq, heads, heads, head_dim",
                 /*causal=*/true, "0.5");
}

TEST_F(DecomposeTest, NonCausalAttentionWithOtherLayoutsAndKeyLength) {
  // The key is longer than the query; every operand lists its dimensions differently.
  checkAttention("[head_dim=3, heads=2, seq=2, batch=2], f64",
                 "[seq=4, heads=2, batch=2, head_dim=3], f64", "seq, heads, heads, head_dim",
                 /*causal=*/false, "0.8");
}

TEST_F(DecomposeTest, GroupedQueryAttentionCausal) {
  checkAttention("[batch=2, seq=4, heads=6, head_dim=2], f64",
                 "[batch=2, seq=4, kv_heads=2, head_dim=2], f64", "seq, heads, kv_heads, head_dim",
                 /*causal=*/true, "0.6");
}

TEST_F(DecomposeTest, GroupedQueryAttentionNonCausalOtherLayouts) {
  checkAttention("[heads=4, seq=3, head_dim=2, batch=2], f64",
                 "[head_dim=2, batch=2, kv_heads=2, seq=5], f64", "seq, heads, kv_heads, head_dim",
                 /*causal=*/false, "0.9");
}

TEST_F(DecomposeTest, GroupedQueryAttentionWithDistinctEqualHeadCounts) {
  // kv_heads is another name with the same size: groups of one.
  checkAttention("[batch=1, seq=3, heads=2, head_dim=2], f64",
                 "[batch=1, seq=3, kv_heads=2, head_dim=2], f64", "seq, heads, kv_heads, head_dim",
                 /*causal=*/true, "1.0");
}

TEST_F(DecomposeTest, CausalAttentionInF32) {
  // The mask's large negative value is the f32 one; the interpreter computes in float64.
  checkAttention("[batch=2, seq=4, heads=4, head_dim=2], f32",
                 "[batch=2, seq=4, kv_heads=2, head_dim=2], f32", "seq, heads, kv_heads, head_dim",
                 /*causal=*/true, "0.5");
}

TEST_F(DecomposeTest, GroupedQueryAttentionSavingItsLogSumExp) {
  // save_lse: the interpreter's log-sum-exp of each query row (the query's layout without
  // head_dim, heads not first) against the decomposition's max + log(sum).
  llvm::StringRef source = R"mlir(
    func.func @f(%q: !mt.tensor<[seq=4, batch=2, heads=6, head_dim=2], f64>,
                 %k: !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f64>)
        -> (!mt.tensor<[seq=4, batch=2, heads=6, head_dim=2], f64>,
            !mt.tensor<[seq=4, batch=2, heads=6], f64>) {
      %o, %lse = mt.attention %q, %k, %k dims(seq, heads, kv_heads, head_dim) causal scale 0.7
          save_lse : !mt.tensor<[seq=4, batch=2, heads=6, head_dim=2], f64>,
          !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f64>,
          !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=2], f64>
      return %o, %lse : !mt.tensor<[seq=4, batch=2, heads=6, head_dim=2], f64>,
          !mt.tensor<[seq=4, batch=2, heads=6], f64>
    }
  )mlir";
  expectSameAfterDecompose(source, "f",
                           {random("[seq=4, batch=2, heads=6, head_dim=2], f64", -2, 2),
                            random("[batch=2, seq=4, kv_heads=2, head_dim=2], f64", -2, 2)});
}

TEST_F(DecomposeTest, AttentionWhoseDimsClashWithTheNewNames) {
  // The batch dimensions are called seq_kv and heads_group: the new dimensions must get
  // other names.
  checkAttention("[seq_kv=2, heads_group=2, seq=3, heads=4, head_dim=2], f64",
                 "[seq_kv=2, heads_group=2, seq=3, kv=2, head_dim=2], f64",
                 "seq, heads, kv, head_dim", /*causal=*/true, "0.5");
}

/// Grouped-query attention and its backward within documents (document positions, as
/// --reset-attention-mask gives them): the positions lie in [seq, batch] order, unlike the
/// query's, and mark several documents per sample.
constexpr llvm::StringLiteral kDocumentAttention = R"mlir(
  func.func @fwd(%q: !mt.tensor<[batch=2, seq=6, heads=4, head_dim=2], f64>,
                 %k: !mt.tensor<[batch=2, seq=6, kv_heads=2, head_dim=2], f64>,
                 %ids: !mt.tensor<[seq=6, batch=2], i32>)
      -> !mt.tensor<[batch=2, seq=6, heads=4, head_dim=2], f64> {
    %0 = mt.attention %q, %k, %k positions %ids dims(seq, heads, kv_heads, head_dim) causal
        scale 0.7 : !mt.tensor<[batch=2, seq=6, heads=4, head_dim=2], f64>,
        !mt.tensor<[batch=2, seq=6, kv_heads=2, head_dim=2], f64>,
        !mt.tensor<[batch=2, seq=6, kv_heads=2, head_dim=2], f64>, !mt.tensor<[seq=6, batch=2], i32>
    return %0 : !mt.tensor<[batch=2, seq=6, heads=4, head_dim=2], f64>
  }
  func.func @plain(%q: !mt.tensor<[batch=2, seq=6, heads=4, head_dim=2], f64>,
                   %k: !mt.tensor<[batch=2, seq=6, kv_heads=2, head_dim=2], f64>)
      -> !mt.tensor<[batch=2, seq=6, heads=4, head_dim=2], f64> {
    %0 = mt.attention %q, %k, %k dims(seq, heads, kv_heads, head_dim) causal
        scale 0.7 : !mt.tensor<[batch=2, seq=6, heads=4, head_dim=2], f64>,
        !mt.tensor<[batch=2, seq=6, kv_heads=2, head_dim=2], f64>,
        !mt.tensor<[batch=2, seq=6, kv_heads=2, head_dim=2], f64>
    return %0 : !mt.tensor<[batch=2, seq=6, heads=4, head_dim=2], f64>
  }
  func.func @bwd(%q: !mt.tensor<[batch=2, seq=6, heads=4, head_dim=2], f64>,
                 %k: !mt.tensor<[batch=2, seq=6, kv_heads=2, head_dim=2], f64>,
                 %ids: !mt.tensor<[seq=6, batch=2], i32>,
                 %do: !mt.tensor<[batch=2, seq=6, heads=4, head_dim=2], f64>)
      -> (!mt.tensor<[batch=2, seq=6, heads=4, head_dim=2], f64>,
          !mt.tensor<[batch=2, seq=6, kv_heads=2, head_dim=2], f64>) {
    %dq, %dk, %dv = mt.attention_grad %q, %k, %k, %do positions %ids
        : !mt.tensor<[seq=6, batch=2], i32> dims(seq, heads, kv_heads, head_dim) causal
        scale 0.7 : !mt.tensor<[batch=2, seq=6, heads=4, head_dim=2], f64>,
        !mt.tensor<[batch=2, seq=6, kv_heads=2, head_dim=2], f64>,
        !mt.tensor<[batch=2, seq=6, kv_heads=2, head_dim=2], f64>,
        !mt.tensor<[batch=2, seq=6, heads=4, head_dim=2], f64>
        -> !mt.tensor<[batch=2, seq=6, heads=4, head_dim=2], f64>,
        !mt.tensor<[batch=2, seq=6, kv_heads=2, head_dim=2], f64>,
        !mt.tensor<[batch=2, seq=6, kv_heads=2, head_dim=2], f64>
    return %dq, %dk : !mt.tensor<[batch=2, seq=6, heads=4, head_dim=2], f64>,
        !mt.tensor<[batch=2, seq=6, kv_heads=2, head_dim=2], f64>
  }
)mlir";

TEST_F(DecomposeTest, AttentionWithinDocuments) {
  // Sample 0: documents of 3, 2 and 1 tokens; sample 1: of 1 and 5 ([seq, batch] order).
  Tensor ids = tensor("[seq=6, batch=2], i32", {0, 0, 1, 0, 2, 1, 0, 2, 1, 3, 0, 4});
  std::vector<Tensor> args = {random("[batch=2, seq=6, heads=4, head_dim=2], f64", -2, 2),
                              random("[batch=2, seq=6, kv_heads=2, head_dim=2], f64", -2, 2),
                              ids};
  expectSameAfterDecompose(kDocumentAttention, "fwd", args);
  args.push_back(random("[batch=2, seq=6, heads=4, head_dim=2], f64"));
  expectSameAfterDecompose(kDocumentAttention, "bwd", args);
}

TEST_F(DecomposeTest, AttentionWithinOneDocumentIsCausalAttention) {
  // The interpreter's mask: positions 0, 1, ... (one document per sample) are plain causal
  // attention; documents change the first query of each document after the first.
  mlir::ModuleOp module = parse(kDocumentAttention);
  ASSERT_TRUE(module);
  Tensor q = random("[batch=2, seq=6, heads=4, head_dim=2], f64", -2, 2);
  Tensor k = random("[batch=2, seq=6, kv_heads=2, head_dim=2], f64", -2, 2);
  Interpreter interp(module);
  MTC_ASSIGN_OR_FAIL(plain, interp.call("plain", {q, k}));
  MTC_ASSIGN_OR_FAIL(one, interp.call("fwd", {q, k, tensor("[seq=6, batch=2], i32",
                                                           {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5})}));
  expectClose(plain, one);
  MTC_ASSIGN_OR_FAIL(documents, interp.call("fwd", {q, k, tensor("[seq=6, batch=2], i32",
                                                                 {0, 0, 1, 1, 2, 2, 0, 3, 1, 4,
                                                                  2, 5})}));
  // Batch 0, query 3 (its document's first token) sees itself only: its output is its
  // own value row, which causal attention over four keys does not give.
  Tensor v = k;
  int64_t differing = 0;
  for (int64_t i = 0; i < plain[0].getNumElements(); ++i)
    differing += plain[0].data[i] != documents[0].data[i];
  EXPECT_GT(differing, 0);
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t d = 0; d < 2; ++d)
      EXPECT_DOUBLE_EQ(documents[0].at({{"batch", 0}, {"seq", 3}, {"heads", h}, {"head_dim", d}}),
                       v.at({{"batch", 0}, {"seq", 3}, {"kv_heads", h / 2}, {"head_dim", d}}));
}

//===----------------------------------------------------------------------===//
// Cross-entropy and its backward
//===----------------------------------------------------------------------===//

TEST_F(DecomposeTest, CrossEntropyAndGrad) {
  // Labels list the position dimensions in another order than the logits.
  llvm::StringRef source = R"mlir(
    func.func @fwd(%x: !mt.tensor<[b=2, v=7, s=3], f64>, %l: !mt.tensor<[s=3, b=2], i32>)
        -> !mt.tensor<[], f64> {
      %0 = mt.cross_entropy %x, %l over v : !mt.tensor<[b=2, v=7, s=3], f64>,
          !mt.tensor<[s=3, b=2], i32> -> !mt.tensor<[], f64>
      return %0 : !mt.tensor<[], f64>
    }
    func.func @bwd(%x: !mt.tensor<[b=2, v=7, s=3], f64>, %l: !mt.tensor<[s=3, b=2], i32>,
                   %g: !mt.tensor<[], f64>) -> !mt.tensor<[b=2, v=7, s=3], f64> {
      %0 = mt.cross_entropy_grad %x, %l, %g over v : !mt.tensor<[b=2, v=7, s=3], f64>,
          !mt.tensor<[s=3, b=2], i32>, !mt.tensor<[], f64> -> !mt.tensor<[b=2, v=7, s=3], f64>
      return %0 : !mt.tensor<[b=2, v=7, s=3], f64>
    }
  )mlir";
  Tensor logits = random("[b=2, v=7, s=3], f64", -3, 3);
  Tensor labels = randomIndices("[s=3, b=2], i32", 7);
  expectSameAfterDecompose(source, "fwd", {logits, labels});
  expectSameAfterDecompose(source, "bwd", {logits, labels, tensor("[], f64", {1.7})});
}

TEST_F(DecomposeTest, MaskedCrossEntropyAndGrad) {
  // The loss mask of Megatron's --eod-mask-loss, an f32 mask on f64 logits, and a mask of
  // zeros only (whose sum is taken as 1).
  llvm::StringRef source = R"mlir(
    func.func @fwd(%x: !mt.tensor<[b=2, v=7, s=3], f64>, %l: !mt.tensor<[s=3, b=2], i32>,
                   %m: !mt.tensor<[s=3, b=2], f32>) -> !mt.tensor<[], f64> {
      %0 = mt.cross_entropy %x, %l mask %m over v : !mt.tensor<[b=2, v=7, s=3], f64>,
          !mt.tensor<[s=3, b=2], i32>, !mt.tensor<[s=3, b=2], f32> -> !mt.tensor<[], f64>
      return %0 : !mt.tensor<[], f64>
    }
    func.func @bwd(%x: !mt.tensor<[b=2, v=7, s=3], f64>, %l: !mt.tensor<[s=3, b=2], i32>,
                   %g: !mt.tensor<[], f64>, %m: !mt.tensor<[s=3, b=2], f32>)
        -> !mt.tensor<[b=2, v=7, s=3], f64> {
      %0 = mt.cross_entropy_grad %x, %l, %g mask %m over v : !mt.tensor<[b=2, v=7, s=3], f64>,
          !mt.tensor<[s=3, b=2], i32>, !mt.tensor<[], f64>, !mt.tensor<[s=3, b=2], f32>
          -> !mt.tensor<[b=2, v=7, s=3], f64>
      return %0 : !mt.tensor<[b=2, v=7, s=3], f64>
    }
  )mlir";
  Tensor logits = random("[b=2, v=7, s=3], f64", -3, 3);
  Tensor labels = randomIndices("[s=3, b=2], i32", 7);
  Tensor grad = tensor("[], f64", {1.7});
  for (const std::vector<double> &values :
       {std::vector<double>{1, 0, 1, 1, 0, 1}, std::vector<double>(6, 0.0)}) {
    Tensor mask = tensor("[s=3, b=2], f32", values);
    expectSameAfterDecompose(source, "fwd", {logits, labels, mask});
    expectSameAfterDecompose(source, "bwd", {logits, labels, grad, mask});
  }
}

TEST_F(DecomposeTest, CrossEntropyOfOnePosition) {
  // No position dimensions: the labels are a scalar and nothing is averaged.
  llvm::StringRef source = R"mlir(
    func.func @fwd(%x: !mt.tensor<[v=6], f32>, %l: !mt.tensor<[], i64>) -> !mt.tensor<[], f32> {
      %0 = mt.cross_entropy %x, %l over v : !mt.tensor<[v=6], f32>, !mt.tensor<[], i64>
          -> !mt.tensor<[], f32>
      return %0 : !mt.tensor<[], f32>
    }
    func.func @bwd(%x: !mt.tensor<[v=6], f32>, %l: !mt.tensor<[], i64>, %g: !mt.tensor<[], f32>)
        -> !mt.tensor<[v=6], f32> {
      %0 = mt.cross_entropy_grad %x, %l, %g over v : !mt.tensor<[v=6], f32>,
          !mt.tensor<[], i64>, !mt.tensor<[], f32> -> !mt.tensor<[v=6], f32>
      return %0 : !mt.tensor<[v=6], f32>
    }
  )mlir";
  Tensor logits = random("[v=6], f32", -3, 3);
  Tensor label = tensor("[], i64", {4});
  expectSameAfterDecompose(source, "fwd", {logits, label});
  expectSameAfterDecompose(source, "bwd", {logits, label, tensor("[], f32", {0.25})});
}

TEST_F(DecomposeTest, ZLoss) {
  // Logits of magnitude up to 300: exp overflows float64's range past ~709 only with the
  // maximum not subtracted, and the square of the log-sum-exp must keep every digit.
  llvm::StringRef source = R"mlir(
    func.func @f(%x: !mt.tensor<[b=2, e=5, s=3], f64>) -> !mt.tensor<[], f64> {
      %0 = mt.z_loss %x over e : !mt.tensor<[b=2, e=5, s=3], f64> -> !mt.tensor<[], f64>
      return %0 : !mt.tensor<[], f64>
    }
    func.func @one(%x: !mt.tensor<[e=4], f32>) -> !mt.tensor<[], f32> {
      %0 = mt.z_loss %x over e : !mt.tensor<[e=4], f32> -> !mt.tensor<[], f32>
      return %0 : !mt.tensor<[], f32>
    }
  )mlir";
  expectSameAfterDecompose(source, "f", {random("[b=2, e=5, s=3], f64", -300, 300)});
  expectSameAfterDecompose(source, "one", {random("[e=4], f32", -3, 3)});
}

//===----------------------------------------------------------------------===//
// Whole example models
//===----------------------------------------------------------------------===//

class DecomposeExamplesTest : public DecomposeTest,
                              public ::testing::WithParamInterface<const char *> {
protected:
  /// The example lowered to mt, or null (with a test failure).
  mlir::ModuleOp lower(llvm::StringRef file) {
    std::string errors;
    mlir::OwningOpRef<mlir::ModuleOp> module = mtc::testing::lowerExample(context, file, errors);
    if (!module) {
      ADD_FAILURE() << "cannot lower " << file.str() << ":\n" << errors;
      return nullptr;
    }
    modules.push_back(std::move(module));
    return *modules.back();
  }

  /// Random parameter values, larger than the initialisers' so that attention is far from
  /// uniform: gains near 1, biases near 0, normal(std) as uniform values of 5 x std.
  std::vector<std::pair<std::string, Tensor>> randomParams(Interpreter &interp,
                                                           mlir::ModuleOp module) {
    std::vector<std::pair<std::string, Tensor>> params;
    for (auto param : module.getOps<mt::ParamOp>()) {
      llvm::Expected<mt::NamedTensorType> type = interp.getParamValueType(param.getSymName());
      if (!type) {
        ADD_FAILURE() << llvm::toString(type.takeError());
        return {};
      }
      Tensor value(*type);
      mt::InitAttr init = param.getInit();
      llvm::ArrayRef<double> args = init.getArgs().asArrayRef();
      for (double &x : value.data) {
        double noise = rng.uniform(-1, 1);
        switch (init.getKind()) {
        case mt::InitKind::Zeros:
          x = 0.1 * noise;
          break;
        case mt::InitKind::Ones:
          x = 1 + 0.1 * noise;
          break;
        case mt::InitKind::Constant:
          x = args[0] * (1 + 0.1 * noise);
          break;
        case mt::InitKind::Normal:
          x = (args.size() > 1 ? args[1] : 0) + 5 * args[0] * std::sqrt(3.0) * noise;
          break;
        case mt::InitKind::Uniform:
          x = args[0] + (args[1] - args[0]) * (noise + 1) / 2;
          break;
        }
      }
      params.emplace_back(param.getSymName().str(), std::move(value));
    }
    return params;
  }

  /// Runs `func` of `module` with `params` and token ids (and labels) in [0, vocab).
  std::vector<Tensor> run(mlir::ModuleOp module, llvm::StringRef func,
                          const std::vector<std::pair<std::string, Tensor>> &params,
                          const std::vector<Tensor> &args) {
    Interpreter interp(module);
    for (const auto &[name, value] : params)
      if (llvm::Error error = interp.setParam(name, value)) {
        ADD_FAILURE() << llvm::toString(std::move(error));
        return {};
      }
    llvm::Expected<std::vector<Tensor>> out = interp.call(func, args);
    if (!out) {
      ADD_FAILURE() << llvm::toString(out.takeError());
      return {};
    }
    return std::move(*out);
  }

  std::vector<Tensor> randomIds(mlir::func::FuncOp forward, int64_t vocab) {
    std::vector<Tensor> args;
    for (mlir::Type argType : forward.getArgumentTypes()) {
      Tensor ids(llvm::cast<mt::NamedTensorType>(argType));
      for (double &id : ids.data)
        id = static_cast<double>(rng.next() % static_cast<uint64_t>(vocab));
      args.push_back(std::move(ids));
    }
    return args;
  }

  int64_t vocabOf(mlir::ModuleOp module) {
    auto dims = module->getAttrOfType<mlir::DictionaryAttr>(mt::MTDialect::kDimsAttrName);
    EXPECT_TRUE(dims && dims.getAs<mlir::IntegerAttr>("vocab"));
    return dims ? dims.getAs<mlir::IntegerAttr>("vocab").getInt() : 1;
  }
};

TEST_P(DecomposeExamplesTest, ForwardLossIsUnchanged) {
  mlir::ModuleOp module = lower(GetParam());
  ASSERT_TRUE(module);
  std::vector<std::pair<std::string, Tensor>> params;
  {
    Interpreter interp(module);
    params = randomParams(interp, module);
  }
  auto forward = module.lookupSymbol<mlir::func::FuncOp>("forward");
  ASSERT_TRUE(forward);
  std::vector<Tensor> args = randomIds(forward, vocabOf(module));
  std::vector<Tensor> before = run(module, "forward", params, args);
  ASSERT_EQ(before.size(), 1u);
  EXPECT_TRUE(std::isfinite(before[0].data[0]));
  decompose(module);
  std::vector<Tensor> after = run(module, "forward", params, args);
  expectClose(before, after);
}

TEST_P(DecomposeExamplesTest, LossAndGradientsAreUnchanged) {
  mlir::ModuleOp module = lower(GetParam());
  ASSERT_TRUE(module);
  mlir::PassManager pm(&context);
  pm.addPass(autodiff::createMTAutodiffPass());
  ASSERT_TRUE(mlir::succeeded(pm.run(module)));
  std::vector<std::pair<std::string, Tensor>> params;
  {
    Interpreter interp(module);
    params = randomParams(interp, module);
  }
  auto entry = module.lookupSymbol<mlir::func::FuncOp>("forward_backward");
  ASSERT_TRUE(entry);
  std::vector<Tensor> args = randomIds(entry, vocabOf(module));
  std::vector<Tensor> before = run(module, "forward_backward", params, args);
  ASSERT_EQ(before.size(), params.size() + 1);
  decompose(module);
  std::vector<Tensor> after = run(module, "forward_backward", params, args);
  // GPT's key bias shifts every score of a query equally, which softmax ignores: its
  // gradient is zero, and both sides hold rounding noise of about 1e-18 there. The floor is
  // below 1e-9 of the smallest other gradient element (about 4e-8).
  expectClose(before, after, /*absolute=*/1e-17);
}

INSTANTIATE_TEST_SUITE_P(Tiny, DecomposeExamplesTest,
                         ::testing::Values("gpt-tiny.mtl", "llama-gqa-tiny.mtl"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                           std::string name = llvm::StringRef(info.param).drop_back(4).str();
                           for (char &c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c)))
                               c = '_';
                           return name;
                         });

} // namespace
