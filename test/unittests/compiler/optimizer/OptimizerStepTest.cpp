//===- OptimizerStepTest.cpp - the compiled optimizer step, numerically ---===//
//
// Runs `@optimizer_step` in the float64 reference interpreter for several steps and
// compares parameters, states, the gradient norm and the learning rate with a direct C++
// implementation of the same update (PyTorch's AdamW and SGD formulas, global-norm
// clipping, warm-up then cosine decay).
//
//===----------------------------------------------------------------------===//

#include "compiler/interpreter/Interpreter.h"
#include "compiler/optimizer/Passes.h"

#include "dialects/mt/IR/MTOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

using namespace mlir;
using namespace mtc;

namespace {

/// A module with a contracted weight (decayed) and a bias (not decayed).
std::string model(const std::string &train) {
  return R"(module attributes {mt.train = )" + train + R"(} {
  mt.param @w : !mt.tensor<[hidden=3, ffn=2], f32> init normal(2.000000e-02)
  mt.param @b : !mt.tensor<[ffn=2], f32> init zeros
  func.func @forward(%x: !mt.tensor<[hidden=3], f32>) -> !mt.tensor<[], f32> {
    %w = mt.param_ref @w : !mt.tensor<[hidden=3, ffn=2], f32>
    %b = mt.param_ref @b : !mt.tensor<[ffn=2], f32>
    %h = mt.contract %x, %w over [hidden] : !mt.tensor<[hidden=3], f32>, !mt.tensor<[hidden=3, ffn=2], f32> -> !mt.tensor<[ffn=2], f32>
    %o = mt.add %h, %b : !mt.tensor<[ffn=2], f32>, !mt.tensor<[ffn=2], f32> -> !mt.tensor<[ffn=2], f32>
    %l = mt.reduce_sum %o over [ffn] : !mt.tensor<[ffn=2], f32> -> !mt.tensor<[], f32>
    return %l : !mt.tensor<[], f32>
  }
})";
}

struct Reference {
  std::vector<double> w, b, mW, vW, mB, vB;
};

class OptimizerStepTest : public ::testing::Test {
protected:
  OptimizerStepTest() { context.loadDialect<mt::MTDialect, func::FuncDialect>(); }

  /// Parses `source` and runs the optimizer pass; fails the test on any error.
  OwningOpRef<ModuleOp> build(const std::string &source) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &context);
    if (!module)
      return nullptr;
    PassManager pm(&context);
    pm.addPass(optimizer::createMTOptimizerPass());
    if (failed(pm.run(*module)))
      return nullptr;
    return module;
  }

  static interp::Tensor tensor(Type type, std::vector<double> values) {
    return interp::Tensor(cast<mt::NamedTensorType>(type), std::move(values));
  }

  MLIRContext context;
};

/// The learning rate of step `t` for lr 0.1, warm-up 2, cosine to 0.01 at step 10.
double cosineLr(double t) {
  if (t < 2)
    return 0.1 * (t + 1) / 2;
  double progress = std::min(1.0, std::max(0.0, (t - 2) / 8));
  return 0.01 + (0.1 - 0.01) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

TEST_F(OptimizerStepTest, AdamWWithClippingAndCosineScheduleMatchesTheFormulas) {
  OwningOpRef<ModuleOp> module = build(model(
      "#mt.train<optimizer = adamw(lr = 0.1, betas = (0.9, 0.99), eps = 1.0e-8, "
      "weight_decay = 0.1), lr = cosine(warmup = 2, min = 0.01), clip_grad = 0.5, "
      "steps = 10>"));
  ASSERT_TRUE(module);
  auto step = module->lookupSymbol<func::FuncOp>("optimizer_step");
  ASSERT_TRUE(step);
  ASSERT_TRUE(module->lookupSymbol<mt::ParamOp>("w")->hasAttr("mt.weight_decay"));
  ASSERT_FALSE(module->lookupSymbol<mt::ParamOp>("b")->hasAttr("mt.weight_decay"));

  interp::Interpreter interpreter(*module);
  Reference ref{{0.5, -0.25, 0.125, 1.0, -1.5, 0.75}, {0.1, -0.2}, {}, {}, {}, {}};
  ref.mW = ref.vW = std::vector<double>(6, 0.0);
  ref.mB = ref.vB = std::vector<double>(2, 0.0);
  Type wType = module->lookupSymbol<mt::ParamOp>("w").getType();
  Type bType = module->lookupSymbol<mt::ParamOp>("b").getType();
  ASSERT_FALSE(static_cast<bool>(interpreter.setParam("w", tensor(wType, ref.w))));
  ASSERT_FALSE(static_cast<bool>(interpreter.setParam("b", tensor(bType, ref.b))));

  // Gradients summed over 2 micro-batches, so grad_scale = 1/2; large enough to clip.
  std::vector<std::vector<double>> gradsW = {{2, -1, 0.5, 3, 1, -2}, {-1, 0.5, 0.25, 1, -3, 2}, {0.1, 0.2, 0.3, -0.1, -0.2, -0.3}};
  std::vector<std::vector<double>> gradsB = {{1, -1}, {0.5, 2}, {-0.05, 0.05}};
  const double beta1 = 0.9, beta2 = 0.99, eps = 1e-8, wd = 0.1, clip = 0.5, scale = 0.5;

  for (int t = 0; t < 3; ++t) {
    std::vector<double> gW = gradsW[t], gB = gradsB[t];
    double squares = 0;
    for (double &g : gW) {
      g *= scale;
      squares += g * g;
    }
    for (double &g : gB) {
      g *= scale;
      squares += g * g;
    }
    double norm = std::sqrt(squares);
    double coef = std::min(1.0, clip / (norm + 1e-6));
    double lr = cosineLr(t);
    auto adam = [&](std::vector<double> &p, std::vector<double> &m, std::vector<double> &v,
                    const std::vector<double> &g, bool decay) {
      for (size_t i = 0; i < p.size(); ++i) {
        double gi = g[i] * coef;
        m[i] = beta1 * m[i] + (1 - beta1) * gi;
        v[i] = beta2 * v[i] + (1 - beta2) * gi * gi;
        double mhat = m[i] / (1 - std::pow(beta1, t + 1));
        double vhat = v[i] / (1 - std::pow(beta2, t + 1));
        double update = mhat / (std::sqrt(vhat) + eps) + (decay ? wd * p[i] : 0.0);
        p[i] -= lr * update;
      }
    };
    adam(ref.w, ref.mW, ref.vW, gW, /*decay=*/true);
    adam(ref.b, ref.mB, ref.vB, gB, /*decay=*/false);

    auto results = interpreter.call(
        "optimizer_step", {interp::Tensor::scalar(Float32Type::get(&context), t),
                           interp::Tensor::scalar(Float32Type::get(&context), scale),
                           tensor(wType, gradsW[t]), tensor(bType, gradsB[t])});
    ASSERT_TRUE(static_cast<bool>(results)) << llvm::toString(results.takeError());
    ASSERT_EQ(results->size(), 2u);
    EXPECT_NEAR((*results)[0].data[0], norm, 1e-12) << "grad norm, step " << t;
    EXPECT_NEAR((*results)[1].data[0], lr, 1e-12) << "learning rate, step " << t;

    auto expectEqual = [&](const char *name, const std::vector<double> &expected) {
      const interp::Tensor *actual = interpreter.getParam(name);
      ASSERT_NE(actual, nullptr) << name;
      ASSERT_EQ(actual->data.size(), expected.size()) << name;
      for (size_t i = 0; i < expected.size(); ++i)
        EXPECT_NEAR(actual->data[i], expected[i], 1e-12 * std::max(1.0, std::fabs(expected[i])))
            << name << "[" << i << "] after step " << t;
    };
    expectEqual("w", ref.w);
    expectEqual("b", ref.b);
    expectEqual("w.exp_avg", ref.mW);
    expectEqual("w.exp_avg_sq", ref.vW);
    expectEqual("b.exp_avg", ref.mB);
    expectEqual("b.exp_avg_sq", ref.vB);
  }
}

TEST_F(OptimizerStepTest, SGDWithMomentumAndLinearScheduleMatchesTheFormulas) {
  OwningOpRef<ModuleOp> module = build(model(
      "#mt.train<optimizer = sgd(lr = 0.5, weight_decay = 0.01, momentum = 0.9), "
      "lr = linear(warmup = 0, min = 0.1), steps = 4>"));
  ASSERT_TRUE(module);
  ASSERT_TRUE(module->lookupSymbol<mt::StateOp>("w.momentum_buffer"));
  ASSERT_FALSE(module->lookupSymbol<mt::StateOp>("w.exp_avg"));
  interp::Interpreter interpreter(*module);
  Type wType = module->lookupSymbol<mt::ParamOp>("w").getType();
  Type bType = module->lookupSymbol<mt::ParamOp>("b").getType();
  std::vector<double> w = {1, 2, 3, 4, 5, 6}, b = {-1, 1}, bufW(6, 0.0), bufB(2, 0.0);
  ASSERT_FALSE(static_cast<bool>(interpreter.setParam("w", tensor(wType, w))));
  ASSERT_FALSE(static_cast<bool>(interpreter.setParam("b", tensor(bType, b))));
  std::vector<double> gW = {0.5, -0.5, 1, -1, 2, -2}, gB = {0.25, -0.75};
  for (int t = 0; t < 3; ++t) {
    double lr = 0.1 + (0.5 - 0.1) * (1 - std::min(1.0, t / 4.0));
    auto sgd = [&](std::vector<double> &p, std::vector<double> &buf,
                   const std::vector<double> &g, bool decay) {
      for (size_t i = 0; i < p.size(); ++i) {
        double d = g[i] + (decay ? 0.01 * p[i] : 0.0);
        buf[i] = 0.9 * buf[i] + d;
        p[i] -= lr * buf[i];
      }
    };
    sgd(w, bufW, gW, true);
    sgd(b, bufB, gB, false);
    auto results = interpreter.call(
        "optimizer_step", {interp::Tensor::scalar(Float32Type::get(&context), t),
                           interp::Tensor::scalar(Float32Type::get(&context), 1.0),
                           tensor(wType, gW), tensor(bType, gB)});
    ASSERT_TRUE(static_cast<bool>(results)) << llvm::toString(results.takeError());
    EXPECT_NEAR((*results)[1].data[0], lr, 1e-12);
    for (size_t i = 0; i < w.size(); ++i)
      EXPECT_NEAR(interpreter.getParam("w")->data[i], w[i], 1e-12) << "w[" << i << "]";
    for (size_t i = 0; i < b.size(); ++i)
      EXPECT_NEAR(interpreter.getParam("b")->data[i], b[i], 1e-12) << "b[" << i << "]";
    for (size_t i = 0; i < bufW.size(); ++i)
      EXPECT_NEAR(interpreter.getParam("w.momentum_buffer")->data[i], bufW[i], 1e-12);
  }
}

} // namespace
