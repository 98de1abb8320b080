//===- mt-gradcheck.cpp - autodiff against central differences -----------===//
//
// Differentiates an `mt` module (mt-autodiff) and compares every parameter's gradient
// from `@forward_backward` with central finite differences of `@forward`, both evaluated
// by the float64 reference interpreter. Exits non-zero when any checked element's error
// exceeds the tolerance, so a lit test is one RUN line.
//
//   mtc compile model.mtl | mt-gradcheck - --recompute=full --tolerance=1e-6
//
// Numeric derivative: Richardson extrapolation of central differences,
// (4 D(h/2) - D(h)) / 3, whose truncation error is O(h^4): with h = 1e-3 both truncation and
// float64 rounding stay far below the 1e-6 tolerance.
//
// Error measure: |analytic - numeric| / max(|analytic|, |numeric|, floor), where floor is
// the larger of 1e-3 x the parameter's largest gradient magnitude and 1e-4 x the largest
// of all parameters (so elements whose gradient is tiny next to the others, or a parameter
// whose gradient is zero in exact arithmetic, such as a key bias under softmax, are judged
// on an absolute scale, not on noise).
//
//===----------------------------------------------------------------------===//

#include "compiler/autodiff/Passes.h"
#include "compiler/interpreter/Interpreter.h"
#include "compiler/registration/Registration.h"

#include "dialects/mt/IR/MTOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"

#include <algorithm>
#include <cmath>
#include <random>

using namespace llvm;
using namespace mlir;
using namespace mtc;

namespace {

cl::OptionCategory category("Gradient check options");
cl::opt<std::string> inputFile(cl::Positional, cl::desc("<module.mlir>"), cl::init("-"),
                               cl::cat(category));
cl::opt<std::string> recompute("recompute", cl::desc("Recompute policy of the layer backwards"),
                               cl::init("none"), cl::cat(category));
cl::opt<double> tolerance("tolerance", cl::desc("Largest accepted error"), cl::init(1e-6),
                          cl::cat(category));
cl::opt<double> step("step", cl::desc("Finite-difference step h (the estimate combines "
                                      "central differences at h and h/2)"),
                     cl::init(1e-3), cl::cat(category));
cl::opt<unsigned> samples("samples",
                          cl::desc("Elements checked per parameter besides its largest "
                                   "gradient (every element when it has fewer)"),
                          cl::init(6), cl::cat(category));
cl::opt<unsigned> seed("seed", cl::desc("Seed of the parameter and input values"),
                       cl::init(1234), cl::cat(category));
cl::opt<double> paramStd("param-std", cl::desc("Standard deviation of parameter values"),
                         cl::init(0.5), cl::cat(category));
cl::opt<bool> withDropout("dropout",
                          cl::desc("Apply dropout with fixed pseudo-random masks instead of "
                                   "the identity"),
                          cl::cat(category));

void fail(const Twine &message) {
  WithColor::error(errs(), "mt-gradcheck") << message << "\n";
}

/// A fixed pseudo-random keep decision per (stream, element), ~80% kept.
bool keepElement(int64_t stream, int64_t element) {
  uint64_t x = static_cast<uint64_t>(stream) * 0x9E3779B97F4A7C15ULL ^
               static_cast<uint64_t>(element) * 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 29;
  return (x % 10) >= 2;
}

/// Random values for `forward`'s arguments: token-like integers below the `vocab`
/// dimension's size, normal floats.
Expected<std::vector<interp::Tensor>> makeArguments(ModuleOp module, func::FuncOp forward,
                                                    std::mt19937_64 &rng) {
  int64_t bound = 0;
  if (auto dims = module->getAttrOfType<DictionaryAttr>(mt::MTDialect::kDimsAttrName))
    if (auto vocab = dims.getAs<IntegerAttr>("vocab"))
      bound = vocab.getInt();
  std::vector<interp::Tensor> args;
  std::normal_distribution<double> normal(0.0, 1.0);
  for (auto [index, type] : llvm::enumerate(forward.getArgumentTypes())) {
    interp::Tensor tensor(cast<mt::NamedTensorType>(type));
    if (isa<IntegerType>(tensor.type.getElementType())) {
      if (auto range = forward.getArgAttrOfType<IntegerAttr>(index, "mt.range"))
        bound = range.getInt();
      if (bound <= 0)
        return createStringError("integer argument #%zu needs a 'vocab' dimension in mt.dims "
                                 "or an 'mt.range' argument attribute",
                                 index);
      std::uniform_int_distribution<int64_t> pick(0, bound - 1);
      for (double &x : tensor.data)
        x = static_cast<double>(pick(rng));
    } else {
      for (double &x : tensor.data)
        x = normal(rng);
    }
    args.push_back(std::move(tensor));
  }
  return args;
}

int run(MLIRContext &context) {
  std::string error;
  auto file = openInputFile(inputFile, &error);
  if (!file) {
    fail(error);
    return 1;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), SMLoc());
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  PassManager pm(&context);
  autodiff::MTAutodiffPassOptions options;
  options.recompute = recompute;
  pm.addPass(autodiff::createMTAutodiffPass(options));
  if (failed(pm.run(*module)))
    return 1;

  auto forward = module->lookupSymbol<func::FuncOp>("forward");
  auto step_ = module->lookupSymbol<func::FuncOp>("forward_backward");
  auto gradSymbols = step_->getAttrOfType<ArrayAttr>(mt::MTDialect::kGradsAttrName);

  interp::Interpreter interpreter(*module);
  if (withDropout)
    interpreter.setDropoutMode(interp::DropoutMode::DeterministicMasks, keepElement);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, paramStd);
  for (auto param : module->getOps<mt::ParamOp>()) {
    Expected<mt::NamedTensorType> type = interpreter.getParamValueType(param.getSymName());
    if (!type) {
      fail(toString(type.takeError()));
      return 1;
    }
    interp::Tensor value(*type);
    for (double &x : value.data)
      x = normal(rng);
    if (Error err = interpreter.setParam(param.getSymName(), std::move(value))) {
      fail(toString(std::move(err)));
      return 1;
    }
  }
  Expected<std::vector<interp::Tensor>> args = makeArguments(*module, forward, rng);
  if (!args) {
    fail(toString(args.takeError()));
    return 1;
  }

  Expected<std::vector<interp::Tensor>> analytic = interpreter.call("forward_backward", *args);
  if (!analytic) {
    fail(toString(analytic.takeError()));
    return 1;
  }
  auto loss = [&]() -> Expected<double> {
    Expected<std::vector<interp::Tensor>> out = interpreter.call("forward", *args);
    if (!out)
      return out.takeError();
    return out->front().data.front();
  };
  Expected<double> baseline = loss();
  if (!baseline) {
    fail(toString(baseline.takeError()));
    return 1;
  }
  double lossGap = std::fabs(*baseline - (*analytic)[0].data[0]);
  outs() << formatv("loss {0:e} (forward_backward differs by {1:e})\n", *baseline, lossGap);
  bool ok = lossGap <= tolerance * std::max(1.0, std::fabs(*baseline));

  double globalLargest = 0;
  for (const interp::Tensor &grad : llvm::drop_begin(*analytic))
    for (double g : grad.data)
      globalLargest = std::max(globalLargest, std::fabs(g));

  double worst = 0;
  for (auto [index, symbol] : llvm::enumerate(gradSymbols.getAsRange<FlatSymbolRefAttr>())) {
    StringRef name = symbol.getValue();
    const interp::Tensor &grad = (*analytic)[index + 1];
    Expected<mt::NamedTensorType> storage = interpreter.getParamValueType(name);
    if (!storage || *storage != grad.type) {
      if (!storage)
        consumeError(storage.takeError());
      fail("gradient of '" + name + "' does not have the parameter's storage type");
      return 1;
    }
    // The elements to check: all of a small tensor, else the largest gradient and samples.
    std::vector<int64_t> elements;
    int64_t count = grad.getNumElements();
    if (count <= static_cast<int64_t>(samples) + 1) {
      for (int64_t e = 0; e < count; ++e)
        elements.push_back(e);
    } else {
      elements.push_back(std::max_element(grad.data.begin(), grad.data.end(),
                                          [](double a, double b) {
                                            return std::fabs(a) < std::fabs(b);
                                          }) -
                         grad.data.begin());
      std::uniform_int_distribution<int64_t> pick(0, count - 1);
      for (unsigned i = 0; i < samples; ++i)
        elements.push_back(pick(rng));
    }
    double largest = 0;
    for (double g : grad.data)
      largest = std::max(largest, std::fabs(g));
    double floor = std::max({1e-3 * largest, 1e-4 * globalLargest, 1e-12});

    double paramWorst = 0;
    for (int64_t element : elements) {
      interp::Tensor value = *interpreter.getParam(name);
      double original = value.data[element];
      // Loss at original + offset.
      auto at = [&](double offset) -> Expected<double> {
        value.data[element] = original + offset;
        if (Error err = interpreter.setParam(name, value))
          return std::move(err);
        return loss();
      };
      double central[2];
      for (int half = 0; half < 2; ++half) {
        double h = half ? step / 2 : step;
        Expected<double> plus = at(h);
        Expected<double> minus = plus ? at(-h) : Expected<double>(plus.takeError());
        if (!minus) {
          fail(toString(minus.takeError()));
          return 1;
        }
        central[half] = (*plus - *minus) / (2 * h);
      }
      value.data[element] = original;
      cantFail(interpreter.setParam(name, value));
      double numeric = (4 * central[1] - central[0]) / 3;
      double a = grad.data[element];
      double err = std::fabs(a - numeric) / std::max({std::fabs(a), std::fabs(numeric), floor});
      paramWorst = std::max(paramWorst, err);
    }
    worst = std::max(worst, paramWorst);
    outs() << formatv("{0,-24} {1,4} elements  max error {2:e}{3}\n", name, elements.size(),
                      paramWorst, paramWorst > tolerance ? "  FAIL" : "");
  }
  ok &= worst <= tolerance;
  outs() << formatv("max relative error {0:e} (tolerance {1:e}): {2}\n", worst,
                    static_cast<double>(tolerance), ok ? "ok" : "FAIL");
  return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "mt-gradcheck: autodiff against central finite differences of "
                              "the float64 reference interpreter\n");
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  return run(context);
}
