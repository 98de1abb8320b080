//===- InterpreterTestSupport.h - fixtures of the interpreter tests -*- C++ -*-===//
//
// Parsing small mt modules from strings, deterministic tensors, unwrapping llvm::Expected
// in tests, and the central-difference gradient check.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_TEST_UNITTESTS_COMPILER_INTERPRETER_INTERPRETERTESTSUPPORT_H
#define MTC_TEST_UNITTESTS_COMPILER_INTERPRETER_INTERPRETERTESTSUPPORT_H

#include "compiler/interpreter/Interpreter.h"

#include "dialects/mt/IR/MTOps.h"
#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

/// `auto name = *expr;` for an llvm::Expected `expr`, failing the test with its error.
#define MTC_ASSIGN_OR_FAIL(name, expr)                                                             \
  auto name##OrError = (expr);                                                                     \
  ASSERT_TRUE(static_cast<bool>(name##OrError)) << llvm::toString(name##OrError.takeError());      \
  auto name = std::move(*name##OrError)

namespace mtc::interp::testing {

/// splitmix64: the same numbers on every platform.
class Random {
public:
  explicit Random(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [low, high).
  double uniform(double low, double high) {
    return low + (high - low) * static_cast<double>(next() >> 11) * 0x1p-53;
  }

private:
  uint64_t state;
};

class InterpreterTest : public ::testing::Test {
protected:
  InterpreterTest() { context.loadDialect<mt::MTDialect, mlir::func::FuncDialect>(); }

  /// Parses and verifies `source`; fails the test (and returns null) on any diagnostic.
  mlir::ModuleOp parse(llvm::StringRef source) {
    std::string errors;
    mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
      llvm::raw_string_ostream(errors) << diag.getLocation() << ": " << diag << "\n";
      return mlir::success();
    });
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    if (!module || mlir::failed(mlir::verify(*module))) {
      ADD_FAILURE() << "invalid test module:\n" << errors;
      return nullptr;
    }
    modules.push_back(std::move(module));
    return *modules.back();
  }

  /// The type `!mt.tensor<text>`, e.g. type("[b=2, h=3], f64").
  mt::NamedTensorType type(llvm::StringRef text) {
    std::string full = "!mt.tensor<" + text.str() + ">";
    auto parsed = llvm::dyn_cast_or_null<mt::NamedTensorType>(mlir::parseType(full, &context));
    EXPECT_TRUE(parsed) << "bad type " << full;
    return parsed;
  }

  Tensor tensor(llvm::StringRef typeText, std::vector<double> values) {
    return Tensor(type(typeText), std::move(values));
  }

  /// Uniform values in [low, high).
  Tensor random(llvm::StringRef typeText, double low = -1, double high = 1) {
    Tensor result(type(typeText));
    for (double &value : result.data)
      value = rng.uniform(low, high);
    return result;
  }

  /// Uniform integers in [0, bound).
  Tensor randomIndices(llvm::StringRef typeText, int64_t bound) {
    Tensor result(type(typeText));
    for (double &value : result.data)
      value = static_cast<double>(rng.next() % static_cast<uint64_t>(bound));
    return result;
  }

  mlir::MLIRContext context;
  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> modules;
  Random rng{1234};
};

/// |a - b| within `rel` of the larger magnitude, or within `abs` (near zero).
inline ::testing::AssertionResult near(double a, double b, double rel = 1e-12, double abs = 1e-12) {
  if (std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b)) + abs)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << a << " vs " << b << " (difference " << a - b << ")";
}

/// Checks `analytic`, claimed to be the gradient of L = sum_i sum_j outputWeights[i][j] *
/// forward(inputs)[i][j] with respect to inputs[which], against central differences of
/// `forward` run by `interp` (step 1e-6, relative tolerance 1e-6 with an absolute floor of
/// 1e-8 for entries that are zero up to rounding).
inline void expectGradient(Interpreter &interp, llvm::StringRef forward, std::vector<Tensor> inputs,
                           unsigned which, const std::vector<Tensor> &outputWeights,
                           const Tensor &analytic, double step = 1e-6, double rel = 1e-6,
                           double abs = 1e-8) {
  ASSERT_EQ(analytic.type, inputs[which].type);
  for (int64_t i = 0; i < analytic.getNumElements(); ++i) {
    double original = inputs[which].data[i];
    inputs[which].data[i] = original + step;
    MTC_ASSIGN_OR_FAIL(plus, interp.call(forward, inputs));
    inputs[which].data[i] = original - step;
    MTC_ASSIGN_OR_FAIL(minus, interp.call(forward, inputs));
    inputs[which].data[i] = original;
    ASSERT_EQ(plus.size(), outputWeights.size());
    double numeric = 0;
    for (size_t out = 0; out < plus.size(); ++out)
      for (int64_t j = 0; j < plus[out].getNumElements(); ++j)
        numeric += outputWeights[out].data[j] * (plus[out].data[j] - minus[out].data[j]);
    numeric /= 2 * step;
    EXPECT_TRUE(near(analytic.data[i], numeric, rel, abs))
        << "d/d input #" << which << " element " << i << ": analytic vs central difference";
  }
}

} // namespace mtc::interp::testing

#endif // MTC_TEST_UNITTESTS_COMPILER_INTERPRETER_INTERPRETERTESTSUPPORT_H
