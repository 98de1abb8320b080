//===- ElementwiseOps.cpp - constants, elementwise ops and casts ----------===//

#include "compiler/interpreter/OpEval.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <numbers>

using namespace mlir;
using namespace mtc;
using namespace mtc::interp;
using namespace mtc::interp::eval;

Expected<Results> eval::evalOp(mt::ConstantOp op, Operands) {
  return Results{Tensor(typeOf(op.getResult()), {op.getValue().convertToDouble()})};
}

Expected<Results> eval::evalOp(mt::LossScaleOp op, Operands) {
  return Results{Tensor(typeOf(op.getResult()), {1.0})};
}

//===----------------------------------------------------------------------===//
// Binary ops with named broadcasting
//===----------------------------------------------------------------------===//

/// `fn(lhs, rhs)` at every element of the result, whose dimensions are the lhs's then the
/// rhs-only ones; each operand is read through its strides along the result's dimensions.
template <typename Fn> static Results binary(Operation *op, Operands in, Fn fn) {
  Tensor result(typeOf(op->getResult(0)));
  Space space = Space::of(result.type);
  const Tensor &lhs = *in[0], &rhs = *in[1];
  double *out = result.data.data();
  forEachPoint<2>(
      space, {stridesAlong(lhs.type, space), stridesAlong(rhs.type, space)},
      [&](const std::array<int64_t, 2> &at) { *out++ = fn(lhs.data[at[0]], rhs.data[at[1]]); });
  return Results{std::move(result)};
}

Expected<Results> eval::evalOp(mt::AddOp op, Operands in) {
  return binary(op, in, [](double a, double b) { return a + b; });
}
Expected<Results> eval::evalOp(mt::SubOp op, Operands in) {
  return binary(op, in, [](double a, double b) { return a - b; });
}
Expected<Results> eval::evalOp(mt::MulOp op, Operands in) {
  return binary(op, in, [](double a, double b) { return a * b; });
}

/// Integer division truncates toward zero; dividing an integer by zero is an error.
Expected<Results> eval::evalOp(mt::DivOp op, Operands in) {
  if (!hasIntegerElements(typeOf(op.getResult())))
    return binary(op, in, [](double a, double b) { return a / b; });
  bool byZero = false;
  Results results = binary(op, in, [&](double a, double b) {
    byZero = byZero || b == 0;
    return b == 0 ? 0.0 : std::trunc(a / b);
  });
  if (byZero)
    return opError(op, "integer division by zero");
  return results;
}

/// NaN wins, as in IEEE maximum.
Expected<Results> eval::evalOp(mt::MaxOp op, Operands in) {
  return binary(op, in, [](double a, double b) { return a > b || std::isnan(a) ? a : b; });
}
Expected<Results> eval::evalOp(mt::PowOp op, Operands in) {
  return binary(op, in, [](double a, double b) { return std::pow(a, b); });
}
Expected<Results> eval::evalOp(mt::GreaterOp op, Operands in) {
  return binary(op, in, [](double a, double b) { return a > b ? 1.0 : 0.0; });
}

//===----------------------------------------------------------------------===//
// Unary ops
//===----------------------------------------------------------------------===//

template <typename Fn> static Results unary(Operation *op, Operands in, Fn fn) {
  Tensor result(typeOf(op->getResult(0)));
  for (auto [out, value] : llvm::zip_equal(result.data, in[0]->data))
    out = fn(value);
  return Results{std::move(result)};
}

static double sigmoid(double x) {
  // Never evaluates exp of a large positive number.
  if (x >= 0)
    return 1 / (1 + std::exp(-x));
  double e = std::exp(x);
  return e / (1 + e);
}

/// sqrt(2 / pi) and the cubic coefficient of GPT-2's tanh approximation.
static constexpr double kGeluTanhScale = 0.7978845608028654;
static constexpr double kGeluTanhCubic = 0.044715;

static double gelu(double x, bool approximate) {
  if (approximate)
    return 0.5 * x * (1 + std::tanh(kGeluTanhScale * (x + kGeluTanhCubic * x * x * x)));
  return 0.5 * x * (1 + std::erf(x / std::numbers::sqrt2));
}

/// d gelu / dx. Exact form: Phi(x) + x phi(x). Tanh form, with u = c (x + a x^3) and
/// t = tanh(u): 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2).
static double geluGrad(double x, bool approximate) {
  if (approximate) {
    double t = std::tanh(kGeluTanhScale * (x + kGeluTanhCubic * x * x * x));
    return 0.5 * (1 + t) +
           0.5 * x * (1 - t * t) * kGeluTanhScale * (1 + 3 * kGeluTanhCubic * x * x);
  }
  double cdf = 0.5 * (1 + std::erf(x / std::numbers::sqrt2));
  double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
  return cdf + x * pdf;
}

Expected<Results> eval::evalOp(mt::NegOp op, Operands in) {
  return unary(op, in, [](double x) { return -x; });
}
Expected<Results> eval::evalOp(mt::ExpOp op, Operands in) {
  return unary(op, in, [](double x) { return std::exp(x); });
}
Expected<Results> eval::evalOp(mt::LogOp op, Operands in) {
  return unary(op, in, [](double x) { return std::log(x); });
}
Expected<Results> eval::evalOp(mt::SqrtOp op, Operands in) {
  return unary(op, in, [](double x) { return std::sqrt(x); });
}
Expected<Results> eval::evalOp(mt::RsqrtOp op, Operands in) {
  return unary(op, in, [](double x) { return 1 / std::sqrt(x); });
}
Expected<Results> eval::evalOp(mt::TanhOp op, Operands in) {
  return unary(op, in, [](double x) { return std::tanh(x); });
}
Expected<Results> eval::evalOp(mt::SigmoidOp op, Operands in) { return unary(op, in, sigmoid); }
Expected<Results> eval::evalOp(mt::CosOp op, Operands in) {
  return unary(op, in, [](double x) { return std::cos(x); });
}
Expected<Results> eval::evalOp(mt::ReluOp op, Operands in) {
  return unary(op, in, [](double x) { return x > 0 ? x : 0.0; });
}
Expected<Results> eval::evalOp(mt::SiluOp op, Operands in) {
  return unary(op, in, [](double x) { return x * sigmoid(x); });
}
Expected<Results> eval::evalOp(mt::GeluOp op, Operands in) {
  bool approximate = op.getApproximate();
  return unary(op, in, [&](double x) { return gelu(x, approximate); });
}
Expected<Results> eval::evalOp(mt::GeluGradOp op, Operands in) {
  bool approximate = op.getApproximate();
  return unary(op, in, [&](double x) { return geluGrad(x, approximate); });
}

//===----------------------------------------------------------------------===//
// Casts
//===----------------------------------------------------------------------===//

/// The value is preserved (floats are not rounded to the narrower type, which is the point
/// of the oracle); converting to an integer type truncates toward zero, and a value the
/// integer type cannot hold (or NaN) is an error. i1 holds 0 and 1.
Expected<Results> eval::evalOp(mt::CastOp op, Operands in) {
  Tensor result(typeOf(op.getResult()), in[0]->data);
  auto intType = dyn_cast<IntegerType>(result.type.getElementType());
  if (!intType)
    return Results{std::move(result)};
  unsigned width = intType.getWidth();
  // [low, end): both bounds are exact powers of two in double.
  double low = width == 1 ? 0 : -std::ldexp(1.0, width - 1);
  double end = width == 1 ? 2 : std::ldexp(1.0, width - 1);
  for (double &value : result.data) {
    double truncated = std::trunc(value);
    if (!(truncated >= low && truncated < end))
      return opError(op, llvm::formatv("value {0} does not fit in {1}", value, intType));
    value = truncated;
  }
  return Results{std::move(result)};
}
