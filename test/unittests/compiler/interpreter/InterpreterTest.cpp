//===- InterpreterTest.cpp - forward semantics of the mt interpreter ------===//
//
// Each op against values computed by hand or by a naive loop over named coordinates;
// mt.repeat with carried, stacked and layer-parameter values; errors.
//
//===----------------------------------------------------------------------===//

#include "InterpreterTestSupport.h"

#include <cmath>
#include <numbers>

using namespace mtc;
using namespace mtc::interp;
using namespace mtc::interp::testing;

namespace {

//===----------------------------------------------------------------------===//
// Tensor helpers
//===----------------------------------------------------------------------===//

TEST_F(InterpreterTest, TensorIndexesByNamedCoordinatesRowMajor) {
  Tensor t = tensor("[a=2, b=3], f32", {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(t.at({{"a", 1}, {"b", 2}}), 5);
  EXPECT_EQ(t.at({{"b", 1}, {"a", 0}}), 1);
  EXPECT_EQ(t.offsetOf({{"a", 1}, {"b", 0}}), 3);
  EXPECT_FALSE(t.offsetOf({{"a", 2}, {"b", 0}}));
  EXPECT_FALSE(t.offsetOf({{"a", 0}}));
  EXPECT_FALSE(t.offsetOf({{"a", 0}, {"a", 1}}));
  EXPECT_FALSE(t.offsetOf({{"a", 0}, {"c", 1}}));
  EXPECT_EQ(t.coordsOf(4), (llvm::SmallVector<int64_t>{1, 1}));
  EXPECT_EQ(t.getStrides(), (llvm::SmallVector<int64_t>{3, 1}));

  MTC_ASSIGN_OR_FAIL(r, reorder(t, type("[b=3, a=2], f32")));
  EXPECT_EQ(r.data, (std::vector<double>{0, 3, 1, 4, 2, 5}));
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      EXPECT_EQ(r.at({{"a", a}, {"b", b}}), t.at({{"a", a}, {"b", b}}));
  EXPECT_FALSE(static_cast<bool>(reorder(t, type("[b=3, c=2], f32"))));
  llvm::consumeError(reorder(t, type("[b=3, c=2], f32")).takeError());
}

//===----------------------------------------------------------------------===//
// Contraction and broadcasting
//===----------------------------------------------------------------------===//

TEST_F(InterpreterTest, ContractIsMatmul) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @f(%a: !mt.tensor<[m=2, k=3], f32>, %b: !mt.tensor<[k=3, n=2], f32>)
        -> !mt.tensor<[m=2, n=2], f32> {
      %0 = mt.contract %a, %b over [k] : !mt.tensor<[m=2, k=3], f32>,
          !mt.tensor<[k=3, n=2], f32> -> !mt.tensor<[m=2, n=2], f32>
      return %0 : !mt.tensor<[m=2, n=2], f32>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  MTC_ASSIGN_OR_FAIL(out, interp.call("f", {tensor("[m=2, k=3], f32", {1, 2, 3, 4, 5, 6}),
                                            tensor("[k=3, n=2], f32", {7, 8, 9, 10, 11, 12})}));
  EXPECT_EQ(out[0].data, (std::vector<double>{58, 64, 139, 154}));
}

TEST_F(InterpreterTest, ContractWithBatchDimsAndTwoContractedDims) {
  // b is a batch dimension (in both, not contracted); k1 and k2 are contracted; the
  // operands list their dimensions in different orders.
  mlir::ModuleOp module = parse(R"mlir(
    func.func @f(%a: !mt.tensor<[b=2, i=3, k1=2, k2=3], f64>,
                 %c: !mt.tensor<[k2=3, j=4, b=2, k1=2], f64>)
        -> !mt.tensor<[b=2, i=3, j=4], f64> {
      %0 = mt.contract %a, %c over [k1, k2] : !mt.tensor<[b=2, i=3, k1=2, k2=3], f64>,
          !mt.tensor<[k2=3, j=4, b=2, k1=2], f64> -> !mt.tensor<[b=2, i=3, j=4], f64>
      return %0 : !mt.tensor<[b=2, i=3, j=4], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  Tensor a = random("[b=2, i=3, k1=2, k2=3], f64"), c = random("[k2=3, j=4, b=2, k1=2], f64");
  MTC_ASSIGN_OR_FAIL(out, interp.call("f", {a, c}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        double sum = 0;
        for (int64_t k1 = 0; k1 < 2; ++k1)
          for (int64_t k2 = 0; k2 < 3; ++k2)
            sum += a.at({{"b", b}, {"i", i}, {"k1", k1}, {"k2", k2}}) *
                   c.at({{"k2", k2}, {"j", j}, {"b", b}, {"k1", k1}});
        EXPECT_TRUE(near(out[0].at({{"b", b}, {"i", i}, {"j", j}}), sum));
      }
}

TEST_F(InterpreterTest, BinaryOpsBroadcastByName) {
  // Result dims: the lhs's (a, b), then the rhs-only c; b is shared but in another place.
  mlir::ModuleOp module = parse(R"mlir(
    func.func @f(%x: !mt.tensor<[a=2, b=3], f64>, %y: !mt.tensor<[c=4, b=3], f64>)
        -> (!mt.tensor<[a=2, b=3, c=4], f64>, !mt.tensor<[a=2, b=3, c=4], f64>,
            !mt.tensor<[c=4, b=3, a=2], f64>, !mt.tensor<[a=2, b=3, c=4], f64>,
            !mt.tensor<[a=2, b=3, c=4], f64>, !mt.tensor<[a=2, b=3], f64>) {
      %0 = mt.sub %x, %y : !mt.tensor<[a=2, b=3], f64>, !mt.tensor<[c=4, b=3], f64>
          -> !mt.tensor<[a=2, b=3, c=4], f64>
      %1 = mt.div %x, %y : !mt.tensor<[a=2, b=3], f64>, !mt.tensor<[c=4, b=3], f64>
          -> !mt.tensor<[a=2, b=3, c=4], f64>
      %2 = mt.pow %y, %x : !mt.tensor<[c=4, b=3], f64>, !mt.tensor<[a=2, b=3], f64>
          -> !mt.tensor<[c=4, b=3, a=2], f64>
      %3 = mt.max %x, %y : !mt.tensor<[a=2, b=3], f64>, !mt.tensor<[c=4, b=3], f64>
          -> !mt.tensor<[a=2, b=3, c=4], f64>
      %4 = mt.greater %x, %y : !mt.tensor<[a=2, b=3], f64>, !mt.tensor<[c=4, b=3], f64>
          -> !mt.tensor<[a=2, b=3, c=4], f64>
      %s = mt.constant 2.5 : !mt.tensor<[], f64>
      %5 = mt.mul %x, %s : !mt.tensor<[a=2, b=3], f64>, !mt.tensor<[], f64>
          -> !mt.tensor<[a=2, b=3], f64>
      return %0, %1, %2, %3, %4, %5 : !mt.tensor<[a=2, b=3, c=4], f64>,
          !mt.tensor<[a=2, b=3, c=4], f64>, !mt.tensor<[c=4, b=3, a=2], f64>,
          !mt.tensor<[a=2, b=3, c=4], f64>, !mt.tensor<[a=2, b=3, c=4], f64>,
          !mt.tensor<[a=2, b=3], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  Tensor x = random("[a=2, b=3], f64", 0.5, 2), y = random("[c=4, b=3], f64", 0.5, 2);
  MTC_ASSIGN_OR_FAIL(out, interp.call("f", {x, y}));
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b) {
      double xv = x.at({{"a", a}, {"b", b}});
      EXPECT_EQ(out[5].at({{"a", a}, {"b", b}}), xv * 2.5);
      for (int64_t c = 0; c < 4; ++c) {
        double yv = y.at({{"c", c}, {"b", b}});
        std::initializer_list<NamedIndex> at = {{"a", a}, {"b", b}, {"c", c}};
        EXPECT_EQ(out[0].at(at), xv - yv);
        EXPECT_EQ(out[1].at(at), xv / yv);
        EXPECT_EQ(out[2].at(at), std::pow(yv, xv));
        EXPECT_EQ(out[3].at(at), std::max(xv, yv));
        EXPECT_EQ(out[4].at(at), xv > yv ? 1.0 : 0.0);
      }
    }
}

//===----------------------------------------------------------------------===//
// Elementwise and casts
//===----------------------------------------------------------------------===//

TEST_F(InterpreterTest, UnaryOpsInFloat64) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @f(%x: !mt.tensor<[n=5], bf16>) -> (
        !mt.tensor<[n=5], bf16>, !mt.tensor<[n=5], bf16>, !mt.tensor<[n=5], bf16>,
        !mt.tensor<[n=5], bf16>, !mt.tensor<[n=5], bf16>, !mt.tensor<[n=5], bf16>,
        !mt.tensor<[n=5], bf16>, !mt.tensor<[n=5], bf16>, !mt.tensor<[n=5], bf16>,
        !mt.tensor<[n=5], bf16>) {
      %0 = mt.neg %x : !mt.tensor<[n=5], bf16>
      %1 = mt.exp %x : !mt.tensor<[n=5], bf16>
      %2 = mt.tanh %x : !mt.tensor<[n=5], bf16>
      %3 = mt.sigmoid %x : !mt.tensor<[n=5], bf16>
      %4 = mt.relu %x : !mt.tensor<[n=5], bf16>
      %5 = mt.silu %x : !mt.tensor<[n=5], bf16>
      %6 = mt.gelu %x : !mt.tensor<[n=5], bf16>
      %7 = mt.gelu %x approximate : !mt.tensor<[n=5], bf16>
      %8 = mt.exp %x : !mt.tensor<[n=5], bf16>
      %9 = mt.log %8 : !mt.tensor<[n=5], bf16>
      return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9 : !mt.tensor<[n=5], bf16>,
          !mt.tensor<[n=5], bf16>, !mt.tensor<[n=5], bf16>, !mt.tensor<[n=5], bf16>,
          !mt.tensor<[n=5], bf16>, !mt.tensor<[n=5], bf16>, !mt.tensor<[n=5], bf16>,
          !mt.tensor<[n=5], bf16>, !mt.tensor<[n=5], bf16>, !mt.tensor<[n=5], bf16>
    }
    func.func @roots(%x: !mt.tensor<[n=3], f32>)
        -> (!mt.tensor<[n=3], f32>, !mt.tensor<[n=3], f32>, !mt.tensor<[n=3], f32>) {
      %0 = mt.sqrt %x : !mt.tensor<[n=3], f32>
      %1 = mt.rsqrt %x : !mt.tensor<[n=3], f32>
      %2 = mt.cos %x : !mt.tensor<[n=3], f32>
      return %0, %1, %2 : !mt.tensor<[n=3], f32>, !mt.tensor<[n=3], f32>, !mt.tensor<[n=3], f32>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  // 1 + 2^-20 is not a bf16 (nor f32) value: the oracle keeps it exactly.
  std::vector<double> xs = {-2.5, -0.3, 0, 1 + 0x1p-20, 3};
  MTC_ASSIGN_OR_FAIL(out, interp.call("f", {tensor("[n=5], bf16", xs)}));
  for (size_t i = 0; i < xs.size(); ++i) {
    double x = xs[i], sig = 1 / (1 + std::exp(-x));
    EXPECT_EQ(out[0].data[i], -x);
    EXPECT_TRUE(near(out[1].data[i], std::exp(x)));
    EXPECT_TRUE(near(out[2].data[i], std::tanh(x)));
    EXPECT_TRUE(near(out[3].data[i], sig));
    EXPECT_EQ(out[4].data[i], x > 0 ? x : 0);
    EXPECT_TRUE(near(out[5].data[i], x * sig));
    EXPECT_TRUE(near(out[6].data[i], 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)))));
    EXPECT_TRUE(near(
        out[7].data[i],
        0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)))));
    EXPECT_TRUE(near(out[9].data[i], x, 1e-15, 1e-15));
  }
  MTC_ASSIGN_OR_FAIL(roots, interp.call("roots", {tensor("[n=3], f32", {4, 2, 0.25})}));
  EXPECT_EQ(roots[0].data, (std::vector<double>{2, std::sqrt(2.0), 0.5}));
  EXPECT_TRUE(near(roots[1].data[1], 1 / std::sqrt(2.0)));
  EXPECT_EQ(roots[1].data[2], 2);
  EXPECT_EQ(roots[2].data[1], std::cos(2.0));
}

TEST_F(InterpreterTest, CastTruncatesTowardZeroAndChecksRange) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @to_int(%x: !mt.tensor<[n=4], f32>) -> !mt.tensor<[n=4], i32> {
      %0 = mt.cast %x : !mt.tensor<[n=4], f32> to !mt.tensor<[n=4], i32>
      return %0 : !mt.tensor<[n=4], i32>
    }
    func.func @to_i8(%x: !mt.tensor<[n=1], f32>) -> !mt.tensor<[n=1], i8> {
      %0 = mt.cast %x : !mt.tensor<[n=1], f32> to !mt.tensor<[n=1], i8>
      return %0 : !mt.tensor<[n=1], i8>
    }
    func.func @to_bf16(%x: !mt.tensor<[n=1], f32>) -> !mt.tensor<[n=1], bf16> {
      %0 = mt.cast %x : !mt.tensor<[n=1], f32> to !mt.tensor<[n=1], bf16>
      return %0 : !mt.tensor<[n=1], bf16>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  MTC_ASSIGN_OR_FAIL(ints, interp.call("to_int", {tensor("[n=4], f32", {2.7, -2.7, 0.5, -7})}));
  EXPECT_EQ(ints[0].data, (std::vector<double>{2, -2, 0, -7}));
  MTC_ASSIGN_OR_FAIL(small, interp.call("to_i8", {tensor("[n=1], f32", {-128.9})}));
  EXPECT_EQ(small[0].data[0], -128);
  llvm::Expected<std::vector<Tensor>> overflow =
      interp.call("to_i8", {tensor("[n=1], f32", {128})});
  ASSERT_FALSE(static_cast<bool>(overflow));
  EXPECT_NE(llvm::toString(overflow.takeError()).find("does not fit in i8"), std::string::npos);
  MTC_ASSIGN_OR_FAIL(kept, interp.call("to_bf16", {tensor("[n=1], f32", {1 + 0x1p-30})}));
  EXPECT_EQ(kept[0].data[0], 1 + 0x1p-30);
}

//===----------------------------------------------------------------------===//
// Layouts and reductions
//===----------------------------------------------------------------------===//

TEST_F(InterpreterTest, LayoutOps) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @f(%x: !mt.tensor<[a=2, b=3, c=4], f64>) -> (
        !mt.tensor<[c=4, a=2, b=3], f64>, !mt.tensor<[b=3, m=8], f64>,
        !mt.tensor<[a=2, x=3, y=1, c=4], f64>, !mt.tensor<[a=2, z=3, c=4], f64>,
        !mt.tensor<[d=2, c=4, a=2, b=3], f64>) {
      %0 = mt.transpose %x : !mt.tensor<[a=2, b=3, c=4], f64> to !mt.tensor<[c=4, a=2, b=3], f64>
      %1 = mt.merge %x [c, a] into m : !mt.tensor<[a=2, b=3, c=4], f64>
          -> !mt.tensor<[b=3, m=8], f64>
      %2 = mt.split %x b into [x, y] : !mt.tensor<[a=2, b=3, c=4], f64>
          -> !mt.tensor<[a=2, x=3, y=1, c=4], f64>
      %3 = mt.rename %x b to z : !mt.tensor<[a=2, b=3, c=4], f64>
          -> !mt.tensor<[a=2, z=3, c=4], f64>
      %4 = mt.broadcast %x : !mt.tensor<[a=2, b=3, c=4], f64>
          to !mt.tensor<[d=2, c=4, a=2, b=3], f64>
      return %0, %1, %2, %3, %4 : !mt.tensor<[c=4, a=2, b=3], f64>,
          !mt.tensor<[b=3, m=8], f64>, !mt.tensor<[a=2, x=3, y=1, c=4], f64>,
          !mt.tensor<[a=2, z=3, c=4], f64>, !mt.tensor<[d=2, c=4, a=2, b=3], f64>
    }
    func.func @split2(%x: !mt.tensor<[a=2, m=6], f64>) -> !mt.tensor<[a=2, p=2, q=3], f64> {
      %0 = mt.split %x m into [p, q] : !mt.tensor<[a=2, m=6], f64>
          -> !mt.tensor<[a=2, p=2, q=3], f64>
      return %0 : !mt.tensor<[a=2, p=2, q=3], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  Tensor x = random("[a=2, b=3, c=4], f64");
  MTC_ASSIGN_OR_FAIL(out, interp.call("f", {x}));
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 4; ++c) {
        double v = x.at({{"a", a}, {"b", b}, {"c", c}});
        EXPECT_EQ(out[0].at({{"a", a}, {"b", b}, {"c", c}}), v);
        // merge [c, a]: row-major in the listed order, c slower.
        EXPECT_EQ(out[1].at({{"b", b}, {"m", c * 2 + a}}), v);
        EXPECT_EQ(out[2].at({{"a", a}, {"x", b}, {"y", 0}, {"c", c}}), v);
        EXPECT_EQ(out[3].at({{"a", a}, {"z", b}, {"c", c}}), v);
        for (int64_t d = 0; d < 2; ++d)
          EXPECT_EQ(out[4].at({{"d", d}, {"a", a}, {"b", b}, {"c", c}}), v);
      }
  Tensor y = random("[a=2, m=6], f64");
  MTC_ASSIGN_OR_FAIL(split, interp.call("split2", {y}));
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t p = 0; p < 2; ++p)
      for (int64_t q = 0; q < 3; ++q)
        EXPECT_EQ(split[0].at({{"a", a}, {"p", p}, {"q", q}}), y.at({{"a", a}, {"m", p * 3 + q}}));
}

TEST_F(InterpreterTest, IotaCountsAlongItsDimension) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @f() -> (!mt.tensor<[seq=5], f32>, !mt.tensor<[n=3], i32>,
                       !mt.tensor<[seq=5, n=3], bf16>) {
      %0 = mt.iota dim seq : !mt.tensor<[seq=5], f32>
      %1 = mt.iota dim n : !mt.tensor<[n=3], i32>
      %2 = mt.iota dim seq : !mt.tensor<[seq=5], bf16>
      %3 = mt.iota dim n : !mt.tensor<[n=3], bf16>
      %4 = mt.mul %2, %3 : !mt.tensor<[seq=5], bf16>, !mt.tensor<[n=3], bf16>
          -> !mt.tensor<[seq=5, n=3], bf16>
      return %0, %1, %4 : !mt.tensor<[seq=5], f32>, !mt.tensor<[n=3], i32>,
          !mt.tensor<[seq=5, n=3], bf16>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  MTC_ASSIGN_OR_FAIL(out, interp.call("f", {}));
  EXPECT_EQ(out[0].data, (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(out[1].data, (std::vector<double>{0, 1, 2}));
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 3; ++j)
      EXPECT_EQ(out[2].at({{"seq", i}, {"n", j}}), static_cast<double>(i * j));
}

TEST_F(InterpreterTest, Reductions) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @f(%x: !mt.tensor<[a=2, b=3, c=4], f32>) -> (
        !mt.tensor<[b=3], f32>, !mt.tensor<[a=2, c=4], f32>, !mt.tensor<[a=2, b=3], f32>) {
      %0 = mt.reduce_sum %x over [c, a] : !mt.tensor<[a=2, b=3, c=4], f32>
          -> !mt.tensor<[b=3], f32>
      %1 = mt.reduce_mean %x over [b] : !mt.tensor<[a=2, b=3, c=4], f32>
          -> !mt.tensor<[a=2, c=4], f32>
      %2 = mt.reduce_max %x over [c] : !mt.tensor<[a=2, b=3, c=4], f32>
          -> !mt.tensor<[a=2, b=3], f32>
      return %0, %1, %2 : !mt.tensor<[b=3], f32>, !mt.tensor<[a=2, c=4], f32>,
          !mt.tensor<[a=2, b=3], f32>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  Tensor x = random("[a=2, b=3, c=4], f32");
  MTC_ASSIGN_OR_FAIL(out, interp.call("f", {x}));
  auto v = [&](int64_t a, int64_t b, int64_t c) { return x.at({{"a", a}, {"b", b}, {"c", c}}); };
  for (int64_t b = 0; b < 3; ++b) {
    double sum = 0;
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t c = 0; c < 4; ++c)
        sum += v(a, b, c);
    EXPECT_TRUE(near(out[0].at({{"b", b}}), sum));
  }
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t c = 0; c < 4; ++c)
      EXPECT_TRUE(
          near(out[1].at({{"a", a}, {"c", c}}), (v(a, 0, c) + v(a, 1, c) + v(a, 2, c)) / 3));
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      EXPECT_EQ(out[2].at({{"a", a}, {"b", b}}),
                std::max({v(a, b, 0), v(a, b, 1), v(a, b, 2), v(a, b, 3)}));
}

//===----------------------------------------------------------------------===//
// Softmax and norms
//===----------------------------------------------------------------------===//

TEST_F(InterpreterTest, SoftmaxAndNormsMatchTheirFormulas) {
  // The normalised dimension h is not the innermost one.
  mlir::ModuleOp module = parse(R"mlir(
    func.func @f(%x: !mt.tensor<[t=3, h=4, u=2], f64>, %g: !mt.tensor<[h=4], f64>,
                 %b: !mt.tensor<[h=4], f64>) -> (!mt.tensor<[t=3, h=4, u=2], f64>,
        !mt.tensor<[t=3, h=4, u=2], f64>, !mt.tensor<[t=3, h=4, u=2], f64>,
        !mt.tensor<[t=3, h=4, u=2], f64>) {
      %0 = mt.softmax %x over h : !mt.tensor<[t=3, h=4, u=2], f64>
      %1 = mt.layer_norm %x, %g, %b over h {epsilon = 0.01 : f64}
          : !mt.tensor<[t=3, h=4, u=2], f64>, !mt.tensor<[h=4], f64>, !mt.tensor<[h=4], f64>
          -> !mt.tensor<[t=3, h=4, u=2], f64>
      %2 = mt.layer_norm %x, %g over h : !mt.tensor<[t=3, h=4, u=2], f64>,
          !mt.tensor<[h=4], f64> -> !mt.tensor<[t=3, h=4, u=2], f64>
      %3 = mt.rms_norm %x, %g over h : !mt.tensor<[t=3, h=4, u=2], f64>,
          !mt.tensor<[h=4], f64> -> !mt.tensor<[t=3, h=4, u=2], f64>
      return %0, %1, %2, %3 : !mt.tensor<[t=3, h=4, u=2], f64>,
          !mt.tensor<[t=3, h=4, u=2], f64>, !mt.tensor<[t=3, h=4, u=2], f64>,
          !mt.tensor<[t=3, h=4, u=2], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  // Large logits: a softmax that exponentiates without subtracting the maximum overflows.
  Tensor x = random("[t=3, h=4, u=2], f64", -3, 3);
  x.at({{"t", 0}, {"h", 1}, {"u", 1}}) = 800;
  Tensor g = random("[h=4], f64"), b = random("[h=4], f64");
  MTC_ASSIGN_OR_FAIL(out, interp.call("f", {x, g, b}));
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t u = 0; u < 2; ++u) {
      auto xs = [&](int64_t h) { return x.at({{"t", t}, {"h", h}, {"u", u}}); };
      double max = std::max({xs(0), xs(1), xs(2), xs(3)});
      double sumExp = 0, mean = 0, meanSquare = 0;
      for (int64_t h = 0; h < 4; ++h) {
        sumExp += std::exp(xs(h) - max);
        mean += xs(h) / 4;
        meanSquare += xs(h) * xs(h) / 4;
      }
      double var = 0;
      for (int64_t h = 0; h < 4; ++h)
        var += (xs(h) - mean) * (xs(h) - mean) / 4;
      for (int64_t h = 0; h < 4; ++h) {
        std::initializer_list<NamedIndex> at = {{"t", t}, {"h", h}, {"u", u}};
        double gh = g.data[h], bh = b.data[h];
        EXPECT_TRUE(near(out[0].at(at), std::exp(xs(h) - max) / sumExp));
        EXPECT_TRUE(
            near(out[1].at(at), (xs(h) - mean) / std::sqrt(var + 0.01) * gh + bh, 1e-12, 1e-12));
        EXPECT_TRUE(near(out[2].at(at), (xs(h) - mean) / std::sqrt(var + 1e-5) * gh, 1e-12, 1e-12));
        EXPECT_TRUE(near(out[3].at(at), xs(h) / std::sqrt(meanSquare + 1e-6) * gh));
      }
    }
}

//===----------------------------------------------------------------------===//
// Rotary position embedding
//===----------------------------------------------------------------------===//

TEST_F(InterpreterTest, RopeRotatesPairsAndInverseUndoesIt) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @f(%x: !mt.tensor<[d=4, s=3, h=2], f64>) -> (!mt.tensor<[d=4, s=3, h=2], f64>,
        !mt.tensor<[d=4, s=3, h=2], f64>) {
      %0 = mt.rope %x over d position s : !mt.tensor<[d=4, s=3, h=2], f64>
      %1 = mt.rope %0 over d position s inverse : !mt.tensor<[d=4, s=3, h=2], f64>
      return %0, %1 : !mt.tensor<[d=4, s=3, h=2], f64>, !mt.tensor<[d=4, s=3, h=2], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  Tensor x = random("[d=4, s=3, h=2], f64");
  MTC_ASSIGN_OR_FAIL(out, interp.call("f", {x}));
  for (size_t i = 0; i < x.data.size(); ++i)
    EXPECT_TRUE(near(out[1].data[i], x.data[i], 1e-14, 1e-14));
  // Position s=2: pair 0 turns by 2 * 10000^0, pair 1 by 2 * 10000^(-2/4) = 0.02.
  for (int64_t h = 0; h < 2; ++h) {
    for (auto [pair, angle] : {std::pair<int64_t, double>{0, 2.0}, {1, 0.02}}) {
      double x0 = x.at({{"d", 2 * pair}, {"s", 2}, {"h", h}});
      double x1 = x.at({{"d", 2 * pair + 1}, {"s", 2}, {"h", h}});
      EXPECT_TRUE(near(out[0].at({{"d", 2 * pair}, {"s", 2}, {"h", h}}),
                       x0 * std::cos(angle) - x1 * std::sin(angle)));
      EXPECT_TRUE(near(out[0].at({{"d", 2 * pair + 1}, {"s", 2}, {"h", h}}),
                       x0 * std::sin(angle) + x1 * std::cos(angle)));
    }
    // Position 0 is not rotated.
    for (int64_t d = 0; d < 4; ++d)
      EXPECT_EQ(out[0].at({{"d", d}, {"s", 0}, {"h", h}}), x.at({{"d", d}, {"s", 0}, {"h", h}}));
  }
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// softmax(scale q.k [causal]) v for query head h reading kv head h / (H / KV), by loops
/// over named coordinates. `kvHeadsDim` names the key/value heads dimension.
static Tensor naiveAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                             llvm::StringRef kvHeadsDim, bool causal, double scale) {
  Tensor out(q.type);
  int64_t batch = q.type.getDimSize("batch"), seq = q.type.getDimSize("seq");
  int64_t heads = q.type.getDimSize("heads"), dim = q.type.getDimSize("head_dim");
  int64_t kvSeq = k.type.getDimSize("seq"), kvHeads = k.type.getDimSize(kvHeadsDim);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      int64_t g = h / (heads / kvHeads);
      for (int64_t i = 0; i < seq; ++i) {
        std::vector<double> s(kvSeq, -INFINITY);
        double max = -INFINITY;
        for (int64_t j = 0; j < kvSeq; ++j) {
          if (causal && j > i)
            continue;
          double dot = 0;
          for (int64_t d = 0; d < dim; ++d)
            dot += q.at({{"batch", b}, {"seq", i}, {"heads", h}, {"head_dim", d}}) *
                   k.at({{"batch", b}, {"seq", j}, {kvHeadsDim, g}, {"head_dim", d}});
          s[j] = scale * dot;
          max = std::max(max, s[j]);
        }
        double sum = 0;
        for (double &value : s)
          sum += value = std::exp(value - max);
        for (int64_t d = 0; d < dim; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < kvSeq; ++j)
            acc += s[j] / sum * v.at({{"batch", b}, {"seq", j}, {kvHeadsDim, g}, {"head_dim", d}});
          out.at({{"batch", b}, {"seq", i}, {"heads", h}, {"head_dim", d}}) = acc;
        }
      }
    }
  return out;
}

TEST_F(InterpreterTest, CausalGroupedQueryAttentionMatchesNaiveLoop) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @f(%q: !mt.tensor<[batch=2, seq=4, heads=4, head_dim=3], f32>,
                 %k: !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=3], f32>,
                 %v: !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=3], f32>)
        -> !mt.tensor<[batch=2, seq=4, heads=4, head_dim=3], f32> {
      %0 = mt.attention %q, %k, %v dims(seq, heads, kv_heads, head_dim) causal scale 0.5
          : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=3], f32>,
            !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=3], f32>,
            !mt.tensor<[batch=2, seq=4, kv_heads=2, head_dim=3], f32>
      return %0 : !mt.tensor<[batch=2, seq=4, heads=4, head_dim=3], f32>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  Tensor q = random("[batch=2, seq=4, heads=4, head_dim=3], f32", -2, 2);
  Tensor k = random("[batch=2, seq=4, kv_heads=2, head_dim=3], f32", -2, 2);
  Tensor v = random("[batch=2, seq=4, kv_heads=2, head_dim=3], f32", -2, 2);
  MTC_ASSIGN_OR_FAIL(out, interp.call("f", {q, k, v}));
  Tensor expected = naiveAttention(q, k, v, "kv_heads", /*causal=*/true, 0.5);
  for (size_t i = 0; i < expected.data.size(); ++i)
    EXPECT_TRUE(near(out[0].data[i], expected.data[i])) << "element " << i;
  // The first query position sees only the first key: its output is that value row.
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t d = 0; d < 3; ++d)
      EXPECT_TRUE(near(out[0].at({{"batch", 1}, {"seq", 0}, {"heads", h}, {"head_dim", d}}),
                       v.at({{"batch", 1}, {"seq", 0}, {"kv_heads", h / 2}, {"head_dim", d}})));
}

TEST_F(InterpreterTest, NonCausalAttentionWithOtherLayoutsMatchesNaiveLoop) {
  // Multi-head (kv_heads == heads), a longer key sequence, dimensions in unusual orders.
  mlir::ModuleOp module = parse(R"mlir(
    func.func @f(%q: !mt.tensor<[heads=2, head_dim=2, seq=3, batch=2], f64>,
                 %k: !mt.tensor<[seq=5, batch=2, head_dim=2, heads=2], f64>,
                 %v: !mt.tensor<[seq=5, batch=2, head_dim=2, heads=2], f64>)
        -> !mt.tensor<[heads=2, head_dim=2, seq=3, batch=2], f64> {
      %0 = mt.attention %q, %k, %v dims(seq, heads, heads, head_dim) scale 0.7
          : !mt.tensor<[heads=2, head_dim=2, seq=3, batch=2], f64>,
            !mt.tensor<[seq=5, batch=2, head_dim=2, heads=2], f64>,
            !mt.tensor<[seq=5, batch=2, head_dim=2, heads=2], f64>
      return %0 : !mt.tensor<[heads=2, head_dim=2, seq=3, batch=2], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  Tensor q = random("[heads=2, head_dim=2, seq=3, batch=2], f64", -2, 2);
  Tensor k = random("[seq=5, batch=2, head_dim=2, heads=2], f64", -2, 2);
  Tensor v = random("[seq=5, batch=2, head_dim=2, heads=2], f64", -2, 2);
  MTC_ASSIGN_OR_FAIL(out, interp.call("f", {q, k, v}));
  Tensor expected = naiveAttention(q, k, v, "heads", /*causal=*/false, 0.7);
  for (size_t i = 0; i < expected.data.size(); ++i)
    EXPECT_TRUE(near(out[0].data[i], expected.data[i])) << "element " << i;
}

//===----------------------------------------------------------------------===//
// Embedding and loss
//===----------------------------------------------------------------------===//

TEST_F(InterpreterTest, GatherAndCrossEntropy) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @gather(%t: !mt.tensor<[h=2, v=4], f32>, %i: !mt.tensor<[b=2, s=2], i32>)
        -> !mt.tensor<[b=2, s=2, h=2], f32> {
      %0 = mt.gather %t, %i over v : !mt.tensor<[h=2, v=4], f32>, !mt.tensor<[b=2, s=2], i32>
          -> !mt.tensor<[b=2, s=2, h=2], f32>
      return %0 : !mt.tensor<[b=2, s=2, h=2], f32>
    }
    func.func @loss(%x: !mt.tensor<[v=3, p=2], f64>, %l: !mt.tensor<[p=2], i64>)
        -> !mt.tensor<[], f64> {
      %0 = mt.cross_entropy %x, %l over v : !mt.tensor<[v=3, p=2], f64>,
          !mt.tensor<[p=2], i64> -> !mt.tensor<[], f64>
      return %0 : !mt.tensor<[], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  Tensor table = tensor("[h=2, v=4], f32", {0, 1, 2, 3, 10, 11, 12, 13});
  MTC_ASSIGN_OR_FAIL(rows, interp.call("gather", {table, tensor("[b=2, s=2], i32", {3, 0, 1, 3})}));
  EXPECT_EQ(rows[0].data, (std::vector<double>{3, 13, 0, 10, 1, 11, 3, 13}));

  Tensor logits = tensor("[v=3, p=2], f64", {1, 0, 2, 0, 3, 1000});
  MTC_ASSIGN_OR_FAIL(loss, interp.call("loss", {logits, tensor("[p=2], i64", {0, 2})}));
  double first = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 1;
  double second = 0; // logits (0, 0, 1000) with label 2: log(1 + 2 e^-1000) ~ 0
  EXPECT_TRUE(near(loss[0].data[0], (first + second) / 2));
}

TEST_F(InterpreterTest, MaskedCrossEntropyIsTheMeanOverTheUnmaskedPositions) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @loss(%x: !mt.tensor<[v=3, p=3], f64>, %l: !mt.tensor<[p=3], i64>,
                    %m: !mt.tensor<[p=3], f64>) -> !mt.tensor<[], f64> {
      %0 = mt.cross_entropy %x, %l mask %m over v : !mt.tensor<[v=3, p=3], f64>,
          !mt.tensor<[p=3], i64>, !mt.tensor<[p=3], f64> -> !mt.tensor<[], f64>
      return %0 : !mt.tensor<[], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  // Positions 0 and 2 count; position 1 (whatever its loss) does not.
  Tensor logits = tensor("[v=3, p=3], f64", {1, 5, 0, 2, -5, 0, 3, 9, 0});
  Tensor labels = tensor("[p=3], i64", {0, 1, 2});
  double first = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 1;
  double third = std::log(3.0);
  MTC_ASSIGN_OR_FAIL(loss, interp.call("loss", {logits, labels, tensor("[p=3], f64", {1, 0, 1})}));
  EXPECT_TRUE(near(loss[0].data[0], (first + third) / 2));
  // Every position masked: the loss is 0 (the mask's sum taken as 1).
  MTC_ASSIGN_OR_FAIL(none, interp.call("loss", {logits, labels, tensor("[p=3], f64", {0, 0, 0})}));
  EXPECT_EQ(none[0].data[0], 0.0);
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

TEST_F(InterpreterTest, TopKIsDescendingWithTiesToTheLowerIndex) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @f(%x: !mt.tensor<[e=4, t=2], f32>)
        -> (!mt.tensor<[k=2, t=2], f32>, !mt.tensor<[k=2, t=2], i32>) {
      %v, %i = mt.topk %x over e k k : !mt.tensor<[e=4, t=2], f32>
          -> !mt.tensor<[k=2, t=2], f32>, !mt.tensor<[k=2, t=2], i32>
      return %v, %i : !mt.tensor<[k=2, t=2], f32>, !mt.tensor<[k=2, t=2], i32>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  // Token 0: (3, 1, 3, 2); token 1: (0, 5, 1, 4).
  MTC_ASSIGN_OR_FAIL(out, interp.call("f", {tensor("[e=4, t=2], f32", {3, 0, 1, 5, 3, 1, 2, 4})}));
  EXPECT_EQ(out[0].data, (std::vector<double>{3, 5, 3, 4}));
  EXPECT_EQ(out[1].data, (std::vector<double>{0, 1, 2, 3}));
}

/// Four tokens, two choices each, three experts of capacity ceil(0.75 * 4 * 2 / 3) = 2.
static constexpr llvm::StringLiteral kRoutingModule = R"mlir(
  func.func @dispatch(%x: !mt.tensor<[t=4, h=2], f64>, %i: !mt.tensor<[t=4, choice=2], i32>)
      -> !mt.tensor<[experts=3, slot=2, h=2], f64> {
    %0 = mt.dispatch %x, %i k choice to experts capacity slot factor 0.75
        : !mt.tensor<[t=4, h=2], f64>, !mt.tensor<[t=4, choice=2], i32>
        -> !mt.tensor<[experts=3, slot=2, h=2], f64>
    return %0 : !mt.tensor<[experts=3, slot=2, h=2], f64>
  }
  func.func @combine(%e: !mt.tensor<[experts=3, slot=2, h=2], f64>,
                     %i: !mt.tensor<[t=4, choice=2], i32>, %w: !mt.tensor<[t=4, choice=2], f64>)
      -> !mt.tensor<[t=4, h=2], f64> {
    %0 = mt.combine %e, %i, %w k choice from experts capacity slot
        : !mt.tensor<[experts=3, slot=2, h=2], f64>, !mt.tensor<[t=4, choice=2], i32>,
          !mt.tensor<[t=4, choice=2], f64> -> !mt.tensor<[t=4, h=2], f64>
    return %0 : !mt.tensor<[t=4, h=2], f64>
  }
)mlir";

TEST_F(InterpreterTest, DispatchAndCombineDropOverflowingChoices) {
  mlir::ModuleOp module = parse(kRoutingModule);
  ASSERT_TRUE(module);
  Interpreter interp(module);
  Tensor x = tensor("[t=4, h=2], f64", {0, 1, 10, 11, 20, 21, 30, 31});
  // Expert 0 is chosen by tokens 0, 1, 2 (k=0) and 3 (k=1): tokens 2 and 3 overflow it.
  // Expert 1: tokens 0 and 2 (k=1). Expert 2: token 1 (k=1) and token 3 (k=0).
  Tensor indices = tensor("[t=4, choice=2], i32", {0, 1, 0, 2, 0, 1, 2, 0});
  MTC_ASSIGN_OR_FAIL(buffers, interp.call("dispatch", {x, indices}));
  EXPECT_EQ(buffers[0].data, (std::vector<double>{0, 1, 10, 11,      // expert 0: t0, t1
                                                  0, 1, 20, 21,      // expert 1: t0, t2
                                                  10, 11, 30, 31})); // expert 2: t1, t3
  Tensor w = tensor("[t=4, choice=2], f64", {0.5, 0.25, 2, 3, 7, 0.125, 0.75, 100});
  MTC_ASSIGN_OR_FAIL(out, interp.call("combine", {buffers[0], indices, w}));
  // Token 2 keeps only its second choice, token 3 only its first.
  EXPECT_EQ(out[0].data, (std::vector<double>{0, 0.75, 50, 55, 2.5, 2.625, 22.5, 23.25}));

  // Unused slots stay zero.
  Tensor sparse = tensor("[t=4, choice=2], i32", {0, 1, 0, 1, 0, 1, 0, 1});
  MTC_ASSIGN_OR_FAIL(half, interp.call("dispatch", {x, sparse}));
  EXPECT_EQ(half[0].data, (std::vector<double>{0, 1, 10, 11, 0, 1, 10, 11, 0, 0, 0, 0}));
}

TEST_F(InterpreterTest, LoadBalancingLossByHand) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @f(%x: !mt.tensor<[t=2, e=2], f64>, %i: !mt.tensor<[t=2, k=1], i32>)
        -> !mt.tensor<[], f64> {
      %0 = mt.load_balancing_loss %x, %i over e k k : !mt.tensor<[t=2, e=2], f64>,
          !mt.tensor<[t=2, k=1], i32> -> !mt.tensor<[], f64>
      return %0 : !mt.tensor<[], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  // p = (0.5, 0.5) and (0.75, 0.25); both tokens pick expert 0: f = (1, 0),
  // P = (0.625, 0.375), loss = 2 * (1 * 0.625) = 1.25.
  MTC_ASSIGN_OR_FAIL(out, interp.call("f", {tensor("[t=2, e=2], f64", {0, 0, std::log(3.0), 0}),
                                            tensor("[t=2, k=1], i32", {0, 0})}));
  EXPECT_TRUE(near(out[0].data[0], 1.25));
}

TEST_F(InterpreterTest, LoadBalancingLossFromProbabilitiesByHand) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @f(%p: !mt.tensor<[t=2, e=3], f64>, %i: !mt.tensor<[t=2, k=2], i32>,
                 %g: !mt.tensor<[], f64>) -> (!mt.tensor<[], f64>, !mt.tensor<[t=2, e=3], f64>) {
      %0 = mt.load_balancing_loss %p, %i over e k k probabilities
          : !mt.tensor<[t=2, e=3], f64>, !mt.tensor<[t=2, k=2], i32> -> !mt.tensor<[], f64>
      %1 = mt.load_balancing_loss_grad %p, %i, %g over e k k probabilities
          : !mt.tensor<[t=2, e=3], f64>, !mt.tensor<[t=2, k=2], i32>, !mt.tensor<[], f64>
          -> !mt.tensor<[t=2, e=3], f64>
      return %0, %1 : !mt.tensor<[], f64>, !mt.tensor<[t=2, e=3], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  // Megatron's convention takes the probabilities as given (a softmax of them would give
  // another value): choices (2, 1) and (0, 1) give counts (1, 2, 1), f = counts / (T * k) =
  // (0.25, 0.5, 0.25); P = (0.4, 0.3, 0.3); loss = 3 * (0.1 + 0.15 + 0.075) = 0.975. The
  // gradient is loss_grad * E / T * f_e for every token: 2 * 1.5 * f.
  Tensor probabilities = tensor("[t=2, e=3], f64", {0.2, 0.3, 0.5, 0.6, 0.3, 0.1});
  MTC_ASSIGN_OR_FAIL(out, interp.call("f", {probabilities, tensor("[t=2, k=2], i32", {2, 1, 0, 1}),
                                            tensor("[], f64", {2})}));
  EXPECT_TRUE(near(out[0].data[0], 0.975));
  std::vector<double> grad = {0.75, 1.5, 0.75, 0.75, 1.5, 0.75};
  for (size_t i = 0; i < grad.size(); ++i)
    EXPECT_TRUE(near(out[1].data[i], grad[i])) << "element " << i;
}

TEST_F(InterpreterTest, ZLossByHand) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @f(%x: !mt.tensor<[e=3, t=2], f64>) -> !mt.tensor<[], f64> {
      %0 = mt.z_loss %x over e : !mt.tensor<[e=3, t=2], f64> -> !mt.tensor<[], f64>
      return %0 : !mt.tensor<[], f64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  // Token 0: logits (0, 0, 0), logsumexp = ln 3. Token 1: (1000, 1000 + ln 2, 1000),
  // logsumexp = 1000 + ln 4 (exp(1000) overflows: only the stable form gets it).
  // z = ((ln 3)^2 + (1000 + ln 4)^2) / 2.
  double big = 1000;
  MTC_ASSIGN_OR_FAIL(out, interp.call("f", {tensor("[e=3, t=2], f64",
                                                   {0, big, 0, big + std::log(2.0), 0, big})}));
  double lse0 = std::log(3.0), lse1 = big + std::log(4.0);
  EXPECT_TRUE(near(out[0].data[0], (lse0 * lse0 + lse1 * lse1) / 2));
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

TEST_F(InterpreterTest, DropoutModes) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @f(%x: !mt.tensor<[a=2, b=3], f32>) -> !mt.tensor<[a=2, b=3], f32> {
      %0 = mt.dropout %x rate 0.75 stream 7 : !mt.tensor<[a=2, b=3], f32>
      return %0 : !mt.tensor<[a=2, b=3], f32>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  Tensor x = tensor("[a=2, b=3], f32", {1, 2, 3, 4, 5, 6});
  MTC_ASSIGN_OR_FAIL(same, interp.call("f", {x}));
  EXPECT_EQ(same[0].data, x.data);

  interp.setDropoutMode(DropoutMode::DeterministicMasks, [](int64_t stream, int64_t element) {
    EXPECT_EQ(stream, 7);
    return element % 2 == 0;
  });
  MTC_ASSIGN_OR_FAIL(masked, interp.call("f", {x}));
  EXPECT_EQ(masked[0].data, (std::vector<double>{4, 0, 12, 0, 20, 0}));

  interp.setDropoutMode(DropoutMode::DeterministicMasks);
  llvm::Expected<std::vector<Tensor>> noMask = interp.call("f", {x});
  ASSERT_FALSE(static_cast<bool>(noMask));
  EXPECT_NE(llvm::toString(noMask.takeError()).find("keep-mask"), std::string::npos);
}

//===----------------------------------------------------------------------===//
// Layers
//===----------------------------------------------------------------------===//

/// y = x * w + s: carried x, stacked s, layer parameter w; the stacked result is 2 y.
static constexpr llvm::StringLiteral kRepeatModule = R"mlir(
  mt.param @layer.w layer @layer : !mt.tensor<[h=2], f64> init ones
  mt.param @bias : !mt.tensor<[h=2], f64> init zeros
  func.func @layer(%x: !mt.tensor<[h=2], f64>, %s: !mt.tensor<[h=2], f64>)
      -> (!mt.tensor<[h=2], f64>, !mt.tensor<[h=2], f64>) attributes {mt.layer} {
    %w = mt.param_ref @layer.w : !mt.tensor<[h=2], f64>
    %0 = mt.mul %x, %w : !mt.tensor<[h=2], f64>, !mt.tensor<[h=2], f64> -> !mt.tensor<[h=2], f64>
    %1 = mt.add %0, %s : !mt.tensor<[h=2], f64>, !mt.tensor<[h=2], f64> -> !mt.tensor<[h=2], f64>
    %2 = mt.add %1, %1 : !mt.tensor<[h=2], f64>, !mt.tensor<[h=2], f64> -> !mt.tensor<[h=2], f64>
    return %1, %2 : !mt.tensor<[h=2], f64>, !mt.tensor<[h=2], f64>
  }
  // Derived from the layer: reads the same instances; only a carried value.
  func.func @layer.scale(%x: !mt.tensor<[h=2], f64>) -> !mt.tensor<[h=2], f64>
      attributes {mt.layer_of = @layer} {
    %w = mt.param_ref @layer.w : !mt.tensor<[h=2], f64>
    %0 = mt.mul %x, %w : !mt.tensor<[h=2], f64>, !mt.tensor<[h=2], f64> -> !mt.tensor<[h=2], f64>
    return %0 : !mt.tensor<[h=2], f64>
  }
  func.func @forward(%x: !mt.tensor<[h=2], f64>, %s: !mt.tensor<[layers=3, h=2], f64>)
      -> (!mt.tensor<[h=2], f64>, !mt.tensor<[layers=3, h=2], f64>) {
    %b = mt.param_ref @bias : !mt.tensor<[h=2], f64>
    %x0 = mt.add %x, %b : !mt.tensor<[h=2], f64>, !mt.tensor<[h=2], f64> -> !mt.tensor<[h=2], f64>
    %y, %ys = mt.repeat @layer(%x0, %s) count 3 {carried = 1 : i64}
        : (!mt.tensor<[h=2], f64>, !mt.tensor<[layers=3, h=2], f64>)
        -> (!mt.tensor<[h=2], f64>, !mt.tensor<[layers=3, h=2], f64>)
    return %y, %ys : !mt.tensor<[h=2], f64>, !mt.tensor<[layers=3, h=2], f64>
  }
  func.func @backward(%x: !mt.tensor<[h=2], f64>, %s: !mt.tensor<[steps=3, h=2], f64>)
      -> (!mt.tensor<[h=2], f64>, !mt.tensor<[steps=3, h=2], f64>) {
    %y, %ys = mt.repeat @layer(%x, %s) count 3 {carried = 1 : i64, reverse, stack_dim = "steps"}
        : (!mt.tensor<[h=2], f64>, !mt.tensor<[steps=3, h=2], f64>)
        -> (!mt.tensor<[h=2], f64>, !mt.tensor<[steps=3, h=2], f64>)
    return %y, %ys : !mt.tensor<[h=2], f64>, !mt.tensor<[steps=3, h=2], f64>
  }
  func.func @scale(%x: !mt.tensor<[h=2], f64>) -> !mt.tensor<[h=2], f64> {
    %0 = mt.repeat @layer.scale(%x) count 3 {reverse}
        : (!mt.tensor<[h=2], f64>) -> !mt.tensor<[h=2], f64>
    return %0 : !mt.tensor<[h=2], f64>
  }
)mlir";

TEST_F(InterpreterTest, RepeatThreadsCarriedSlicesStackedAndReadsInstanceI) {
  mlir::ModuleOp module = parse(kRepeatModule);
  ASSERT_TRUE(module);
  Interpreter interp(module);
  EXPECT_EQ(interp.getLayerInstances("layer"), 3);
  MTC_ASSIGN_OR_FAIL(wType, interp.getParamValueType("layer.w"));
  EXPECT_EQ(wType, type("[layers=3, h=2], f64"));
  // Instance i: w = (i + 2, 10 (i + 2)).
  ASSERT_FALSE(static_cast<bool>(
      interp.setParam("layer.w", tensor("[layers=3, h=2], f64", {2, 20, 3, 30, 4, 40}))));
  ASSERT_FALSE(static_cast<bool>(interp.setParam("bias", tensor("[h=2], f64", {0, 0}))));

  Tensor x = tensor("[h=2], f64", {1, -1});
  std::vector<double> s = {0.5, 5, 0.25, 25, 0.125, 125};
  // Forward: calls 0, 1, 2 in order.
  {
    MTC_ASSIGN_OR_FAIL(out, interp.call("forward", {x, tensor("[layers=3, h=2], f64", s)}));
    double a = 1, b = -1;
    std::vector<double> stacked;
    for (int i = 0; i < 3; ++i) {
      a = a * (i + 2) + s[2 * i];
      b = b * 10 * (i + 2) + s[2 * i + 1];
      stacked.insert(stacked.end(), {2 * a, 2 * b});
    }
    EXPECT_EQ(out[0].data, (std::vector<double>{a, b}));
    EXPECT_EQ(out[1].data, stacked);
  }
  // Reverse: calls 2, 1, 0, each reading its own slice and instance and writing its slice.
  {
    MTC_ASSIGN_OR_FAIL(out, interp.call("backward", {x, tensor("[steps=3, h=2], f64", s)}));
    double a = 1, b = -1;
    std::vector<double> stacked(6);
    for (int i = 2; i >= 0; --i) {
      a = a * (i + 2) + s[2 * i];
      b = b * 10 * (i + 2) + s[2 * i + 1];
      stacked[2 * i] = 2 * a;
      stacked[2 * i + 1] = 2 * b;
    }
    EXPECT_EQ(out[0].data, (std::vector<double>{a, b}));
    EXPECT_EQ(out[1].data, stacked);
  }
  // A function derived from the layer reads the layer's instances.
  MTC_ASSIGN_OR_FAIL(scaled, interp.call("scale", {x}));
  EXPECT_EQ(scaled[0].data, (std::vector<double>{24, -24000}));
  // One instance run directly.
  MTC_ASSIGN_OR_FAIL(one, interp.callLayer("layer.scale", 1, {x}));
  EXPECT_EQ(one[0].data, (std::vector<double>{3, -30}));
}

TEST_F(InterpreterTest, OptimizerStateAndAssignment) {
  // An update outside the layers: layer parameters and their state are read and written
  // with all instances stacked; state reads as zeros until written.
  mlir::ModuleOp module = parse(R"mlir(
    mt.param @w : !mt.tensor<[h=2], f64> init zeros
    mt.param @layer.g layer @layer : !mt.tensor<[h=2], f64> init ones
    mt.state @w.m of @w : !mt.tensor<[h=2], f64>
    mt.state @layer.g.m of @layer.g : !mt.tensor<[layers=2, h=2], f64>
    func.func @layer(%x: !mt.tensor<[h=2], f64>) -> !mt.tensor<[h=2], f64> attributes {mt.layer} {
      %g = mt.param_ref @layer.g : !mt.tensor<[h=2], f64>
      %0 = mt.mul %x, %g : !mt.tensor<[h=2], f64>, !mt.tensor<[h=2], f64> -> !mt.tensor<[h=2], f64>
      return %0 : !mt.tensor<[h=2], f64>
    }
    func.func @forward(%x: !mt.tensor<[h=2], f64>) -> !mt.tensor<[h=2], f64> {
      %0 = mt.repeat @layer(%x) count 2 : (!mt.tensor<[h=2], f64>) -> !mt.tensor<[h=2], f64>
      return %0 : !mt.tensor<[h=2], f64>
    }
    func.func @step(%gw: !mt.tensor<[h=2], f64>, %gg: !mt.tensor<[layers=2, h=2], f64>) {
      %w = mt.param_ref @w : !mt.tensor<[h=2], f64>
      %m = mt.param_ref @w.m : !mt.tensor<[h=2], f64>
      %m1 = mt.add %m, %gw : !mt.tensor<[h=2], f64>, !mt.tensor<[h=2], f64>
          -> !mt.tensor<[h=2], f64>
      mt.assign @w.m, %m1 : !mt.tensor<[h=2], f64>
      %w1 = mt.sub %w, %m1 : !mt.tensor<[h=2], f64>, !mt.tensor<[h=2], f64>
          -> !mt.tensor<[h=2], f64>
      mt.assign @w, %w1 : !mt.tensor<[h=2], f64>
      %g = mt.param_ref @layer.g : !mt.tensor<[layers=2, h=2], f64>
      %gm = mt.param_ref @layer.g.m : !mt.tensor<[layers=2, h=2], f64>
      %gm1 = mt.add %gm, %gg : !mt.tensor<[layers=2, h=2], f64>, !mt.tensor<[layers=2, h=2], f64>
          -> !mt.tensor<[layers=2, h=2], f64>
      mt.assign @layer.g.m, %gm1 : !mt.tensor<[layers=2, h=2], f64>
      %g1 = mt.sub %g, %gm1 : !mt.tensor<[layers=2, h=2], f64>, !mt.tensor<[layers=2, h=2], f64>
          -> !mt.tensor<[layers=2, h=2], f64>
      mt.assign @layer.g, %g1 : !mt.tensor<[layers=2, h=2], f64>
      return
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  MTC_ASSIGN_OR_FAIL(stateType, interp.getParamValueType("layer.g.m"));
  EXPECT_EQ(stateType, type("[layers=2, h=2], f64"));
  ASSERT_FALSE(static_cast<bool>(interp.setParam("w", tensor("[h=2], f64", {1, 2}))));
  ASSERT_FALSE(
      static_cast<bool>(interp.setParam("layer.g", tensor("[layers=2, h=2], f64", {1, 2, 3, 4}))));
  Tensor gw = tensor("[h=2], f64", {0.5, 0.25});
  Tensor gg = tensor("[layers=2, h=2], f64", {0.5, 1, 1.5, 2});
  for (int step = 0; step < 2; ++step) {
    MTC_ASSIGN_OR_FAIL(none, interp.call("step", {gw, gg}));
    EXPECT_TRUE(none.empty());
  }
  // m = g + g; after two steps w = w0 - g - 2 g.
  EXPECT_EQ(interp.getParam("w.m")->data, (std::vector<double>{1, 0.5}));
  EXPECT_EQ(interp.getParam("w")->data, (std::vector<double>{-0.5, 1.25}));
  EXPECT_EQ(interp.getParam("layer.g.m")->data, (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(interp.getParam("layer.g")->data, (std::vector<double>{-0.5, -1, -1.5, -2}));
  // The layer reads the updated instances.
  MTC_ASSIGN_OR_FAIL(out, interp.call("forward", {tensor("[h=2], f64", {1, 1})}));
  EXPECT_EQ(out[0].data, (std::vector<double>{0.75, 2}));
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// The message of a failed call, or "" (with a test failure) when it succeeded.
static std::string errorOf(llvm::Expected<std::vector<Tensor>> result) {
  if (result) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return llvm::toString(result.takeError());
}

static bool contains(const std::string &text, llvm::StringRef part) {
  return llvm::StringRef(text).contains(part);
}

TEST_F(InterpreterTest, ExpertLoadCountsEveryChoiceBeforeCapacity) {
  mlir::ModuleOp module = parse(R"mlir(
    func.func @load(%i: !mt.tensor<[t=4, choice=2], i32>) -> !mt.tensor<[experts=3], i64> {
      %0 = mt.expert_load %i k choice to experts
          : !mt.tensor<[t=4, choice=2], i32> -> !mt.tensor<[experts=3], i64>
      return %0 : !mt.tensor<[experts=3], i64>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  // The choices of DispatchAndCombineDropOverflowingChoices: expert 0 is named 4 times (a
  // dispatch of capacity 2 drops two of them), experts 1 and 2 twice each.
  MTC_ASSIGN_OR_FAIL(out, interp.call("load", {tensor("[t=4, choice=2], i32",
                                                       {0, 1, 0, 2, 0, 1, 2, 0})}));
  EXPECT_EQ(out[0].data, (std::vector<double>{4, 2, 2}));
  // An index naming no expert is an error, as for dispatch.
  std::string outOfRange =
      errorOf(interp.call("load", {tensor("[t=4, choice=2], i32", {0, 1, 0, 3, 0, 1, 2, 0})}));
  EXPECT_TRUE(contains(outOfRange, "expert index")) << outOfRange;
}

TEST_F(InterpreterTest, ErrorsAreReturnedNotCrashes) {
  context.allowUnregisteredDialects();
  mlir::ModuleOp module = parse(R"mlir(
    mt.param @table : !mt.tensor<[v=3, h=2], f32> init zeros
    func.func @gather(%i: !mt.tensor<[n=2], i32>) -> !mt.tensor<[n=2, h=2], f32> {
      %t = mt.param_ref @table : !mt.tensor<[v=3, h=2], f32>
      %0 = mt.gather %t, %i over v : !mt.tensor<[v=3, h=2], f32>, !mt.tensor<[n=2], i32>
          -> !mt.tensor<[n=2, h=2], f32>
      return %0 : !mt.tensor<[n=2, h=2], f32>
    }
    func.func @scatter(%i: !mt.tensor<[n=2], i32>, %g: !mt.tensor<[n=2, h=2], f32>)
        -> !mt.tensor<[v=3, h=2], f32> {
      %0 = mt.embedding_grad %i, %g over v : !mt.tensor<[n=2], i32>,
          !mt.tensor<[n=2, h=2], f32> -> !mt.tensor<[v=3, h=2], f32>
      return %0 : !mt.tensor<[v=3, h=2], f32>
    }
    func.func @loss(%x: !mt.tensor<[n=2, v=3], f32>, %l: !mt.tensor<[n=2], i32>)
        -> !mt.tensor<[], f32> {
      %0 = mt.cross_entropy %x, %l over v : !mt.tensor<[n=2, v=3], f32>,
          !mt.tensor<[n=2], i32> -> !mt.tensor<[], f32>
      return %0 : !mt.tensor<[], f32>
    }
    func.func @unknown(%x: !mt.tensor<[n=2], f32>) -> !mt.tensor<[n=2], f32> {
      %0 = "test.mystery"(%x) : (!mt.tensor<[n=2], f32>) -> !mt.tensor<[n=2], f32>
      return %0 : !mt.tensor<[n=2], f32>
    }
  )mlir");
  ASSERT_TRUE(module);
  Interpreter interp(module);
  Tensor indices = tensor("[n=2], i32", {1, 3});

  std::string missing = errorOf(interp.call("gather", {indices}));
  EXPECT_TRUE(contains(missing, "'mt.param_ref'")) << missing;
  EXPECT_TRUE(contains(missing, "'@table' has no value")) << missing;
  EXPECT_TRUE(contains(missing, "-:4:12")) << missing;

  ASSERT_FALSE(static_cast<bool>(interp.setParam("table", Tensor(type("[v=3, h=2], f32")))));
  std::string gather = errorOf(interp.call("gather", {indices}));
  EXPECT_TRUE(contains(gather, "-:5:12: 'mt.gather': index 3 is out of range [0, 3)")) << gather;

  std::string scatter = errorOf(
      interp.call("scatter", {tensor("[n=2], i32", {-1, 0}), Tensor(type("[n=2, h=2], f32"))}));
  EXPECT_TRUE(contains(scatter, "'mt.embedding_grad': index -1 is out of range")) << scatter;

  std::string label =
      errorOf(interp.call("loss", {Tensor(type("[n=2, v=3], f32")), tensor("[n=2], i32", {0, 7})}));
  EXPECT_TRUE(contains(label, "'mt.cross_entropy': label 7 is out of range [0, 3)")) << label;

  std::string unknown = errorOf(interp.call("unknown", {Tensor(type("[n=2], f32"))}));
  EXPECT_TRUE(contains(unknown, "'test.mystery': unknown op")) << unknown;

  std::string argType = errorOf(interp.call("gather", {tensor("[n=2], i64", {0, 1})}));
  EXPECT_TRUE(contains(argType, "argument #0 of '@gather' must be a tensor of")) << argType;
  std::string argCount = errorOf(interp.call("gather", {}));
  EXPECT_TRUE(contains(argCount, "takes 1 arguments, got 0")) << argCount;
  std::string noFunc = errorOf(interp.call("nothing", {}));
  EXPECT_TRUE(contains(noFunc, "no function '@nothing'")) << noFunc;

  llvm::Error badParam = interp.setParam("table", Tensor(type("[h=2, v=3], f32")));
  ASSERT_TRUE(static_cast<bool>(badParam));
  EXPECT_TRUE(contains(llvm::toString(std::move(badParam)), "must be a tensor of"));
  llvm::Error noParam = interp.setParam("nope", Tensor(type("[h=2], f32")));
  ASSERT_TRUE(static_cast<bool>(noParam));
  EXPECT_TRUE(contains(llvm::toString(std::move(noParam)), "no parameter or state '@nope'"));
}

TEST_F(InterpreterTest, LayerErrors) {
  mlir::ModuleOp module = parse(kRepeatModule);
  ASSERT_TRUE(module);
  Interpreter interp(module);
  Tensor x = tensor("[h=2], f64", {1, 2});
  std::string missing = errorOf(interp.call("scale", {x}));
  EXPECT_TRUE(contains(missing, "in call 2 of '@layer.scale'")) << missing;
  EXPECT_TRUE(contains(missing, "'@layer.w' has no value")) << missing;
  ASSERT_FALSE(static_cast<bool>(
      interp.setParam("layer.w", tensor("[layers=3, h=2], f64", {1, 1, 1, 1, 1, 1}))));
  std::string outside = errorOf(interp.call("layer.scale", {x}));
  EXPECT_TRUE(contains(outside, "accessed outside a call of its layer")) << outside;
  std::string range = errorOf(interp.callLayer("layer.scale", 3, {x}));
  EXPECT_TRUE(contains(range, "instance 3 of layer '@layer' is out of range [0, 3)")) << range;
  std::string notLayer = errorOf(interp.callLayer("scale", 0, {x}));
  EXPECT_TRUE(contains(notLayer, "is not a layer")) << notLayer;
}

} // namespace
