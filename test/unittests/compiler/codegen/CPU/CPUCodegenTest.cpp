//===- CPUCodegenTest.cpp - generated x86 kernels against the interpreter -===//
//
// Each test lowers small mt functions with mtc-to-linalg-pipeline and mtc-cpu-pipeline,
// compiles them to a shared object with compileToSharedObject, loads it with dlopen and calls
// `_mlir_ciface_<func>` (with a kernel context holding the dropout key) on deterministic inputs;
// every result must match the float64 reference interpreter within 1e-5 relative (f32). A few
// values are also checked against formulas written here.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CPU/CPUCodegen.h"
#include "compiler/interpreter/Interpreter.h"
#include "compiler/lowering/Passes.h"
#include "compiler/pipelines/Pipelines.h"
#include "compiler/registration/Registration.h"
#include "compiler/transforms/Passes.h"
#include "runtime/exec/DropoutKey.h"
#include "runtime/support/Philox.h"
#include "test/unittests/support/LowerExample.h"

#include "dialects/mt/IR/MTOps.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <numbers>
#include <numeric>
#include <utility>
#include <optional>
#include <string>
#include <vector>

using namespace mtc;

namespace {

/// The seed and step of the dropout key the compiled kernels get from the runtime in these
/// tests (runtime/exec/DropoutKey.h; the counter's step word is the step + 1).
constexpr uint64_t kDropoutSeed = 0x5eed1234abcdULL;
constexpr int64_t kDropoutStep = 6;

/// Whether dropout keeps `element` of the site with tensor id `tensorId` at `rate`:
/// Philox's decision under the test's key, shared by the compiled code (through the
/// runtime's mtc_dropout_key) and the interpreter's DeterministicMasks mode.
bool dropoutKeeps(int64_t tensorId, int64_t element, double rate) {
  return mtc_dropout_keep(kDropoutSeed, static_cast<uint32_t>(tensorId),
                          static_cast<uint64_t>(element), static_cast<uint32_t>(kDropoutStep + 1),
                          static_cast<float>(1.0 - rate)) != 0;
}

} // namespace

namespace {

/// The C interface passes one pointer per memref to `{T *allocated, T *aligned, int64_t
/// offset, int64_t sizes[rank], int64_t strides[rank]}`; a rank-generic descriptor is that
/// many 64-bit words.
static_assert(sizeof(StridedMemRefType<float, 2>) == 7 * sizeof(int64_t));
static_assert(sizeof(StridedMemRefType<double, 3>) == 9 * sizeof(int64_t));
static_assert(sizeof(void *) == sizeof(int64_t));

/// A row-major buffer of one tensor and its memref descriptor.
class Buffer {
public:
  explicit Buffer(mt::NamedTensorType type) : type(type) {
    int64_t count = type.getNumElements();
    bytes.assign(count * byteWidth(), std::byte{0});
    unsigned rank = type.getRank();
    descriptor.assign(3 + 2 * rank, 0);
    descriptor[0] = descriptor[1] = reinterpret_cast<int64_t>(bytes.data());
    int64_t stride = 1;
    for (int i = static_cast<int>(rank) - 1; i >= 0; --i) {
      descriptor[3 + i] = type.getDimSizes()[i];
      descriptor[3 + rank + i] = stride;
      stride *= type.getDimSizes()[i];
    }
  }

  void set(const std::vector<double> &values) {
    mlir::Type element = type.getElementType();
    for (size_t i = 0; i < values.size(); ++i) {
      if (element.isF32())
        store<float>(i, static_cast<float>(values[i]));
      else if (element.isF64())
        store<double>(i, values[i]);
      else if (auto floatType = mlir::dyn_cast<mlir::FloatType>(element))
        store<uint16_t>(i, static_cast<uint16_t>(
                               toFloat(values[i], floatType).bitcastToAPInt().getZExtValue()));
      else if (element.isInteger(32))
        store<int32_t>(i, static_cast<int32_t>(values[i]));
      else
        store<int64_t>(i, static_cast<int64_t>(values[i]));
    }
  }

  double get(size_t i) const {
    mlir::Type element = type.getElementType();
    if (element.isF32())
      return load<float>(i);
    if (element.isF64())
      return load<double>(i);
    if (auto floatType = mlir::dyn_cast<mlir::FloatType>(element))
      return llvm::APFloat(floatType.getFloatSemantics(), llvm::APInt(16, load<uint16_t>(i)))
          .convertToDouble();
    if (element.isInteger(32))
      return load<int32_t>(i);
    return static_cast<double>(load<int64_t>(i));
  }

  /// `value` rounded to the nearest `type` value.
  static llvm::APFloat toFloat(double value, mlir::FloatType type) {
    llvm::APFloat result(value);
    bool lost;
    result.convert(type.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven, &lost);
    return result;
  }

  void *descriptorPointer() { return descriptor.data(); }

private:
  size_t byteWidth() const { return (type.getElementType().getIntOrFloatBitWidth() + 7) / 8; }
  template <typename T> void store(size_t i, T value) {
    std::memcpy(bytes.data() + i * sizeof(T), &value, sizeof(T));
  }
  template <typename T> T load(size_t i) const {
    T value;
    std::memcpy(&value, bytes.data() + i * sizeof(T), sizeof(T));
    return value;
  }

  mt::NamedTensorType type;
  std::vector<std::byte> bytes;
  std::vector<int64_t> descriptor;
};

/// Calls `fn`, a function of N pointers, with the N pointers of `args`.
template <size_t... I> void callWithN(void *fn, void *const *args, std::index_sequence<I...>) {
  using Fn = void (*)(decltype(static_cast<void>(I), static_cast<void *>(nullptr))...);
  reinterpret_cast<Fn>(fn)(args[I]...);
}

/// Calls `fn` with `args.size()` pointer arguments (at most kMaxPointers).
constexpr size_t kMaxPointers = 64;
template <size_t N = 1> void callWithPointers(void *fn, const std::vector<void *> &args) {
  if (args.size() == N)
    return callWithN(fn, args.data(), std::make_index_sequence<N>{});
  if constexpr (N < kMaxPointers)
    return callWithPointers<N + 1>(fn, args);
  else
    FAIL() << "too many arguments for the test harness: " << args.size();
}

/// splitmix64, so inputs are the same everywhere.
class Random {
public:
  explicit Random(uint64_t seed) : state(seed) {}
  double uniform(double low, double high) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return low + (high - low) * static_cast<double>(z >> 11) * 0x1p-53;
  }

private:
  uint64_t state;
};

bool haveLinker() {
  for (const char *name : {"cc", "ld.lld-22", "ld.lld"})
    if (llvm::sys::findProgramByName(name))
      return true;
  return false;
}

class CPUCodegenTest : public ::testing::Test {
protected:
  CPUCodegenTest() { context.loadDialect<mt::MTDialect, mlir::func::FuncDialect>(); }

  void SetUp() override {
    if (!haveLinker())
      GTEST_SKIP() << "no linker (cc, ld.lld-22 or ld.lld) on PATH: cannot build shared objects";
    std::string pattern =
        (std::filesystem::temp_directory_path() / "mtc-codegen-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << "mkdtemp failed";
    directory = pattern;
    kernelContext = mtc_kernel_context(nullptr, &dropout, nullptr, 0);
  }

  void TearDown() override {
    if (library)
      ::dlclose(library);
    std::error_code ec;
    if (!directory.empty())
      std::filesystem::remove_all(directory, ec);
  }

  /// Parses `source` (the mt functions), lowers a copy with mt-to-linalg, compiles it to a
  /// shared object and loads it. Fails the test on any diagnostic or error.
  void compile(llvm::StringRef source) {
    std::string errors;
    mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
      llvm::raw_string_ostream(errors) << diag.getLocation() << ": " << diag << "\n";
      return mlir::success();
    });
    mlir::OwningOpRef<mlir::ModuleOp> parsed =
        mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    ASSERT_TRUE(parsed && mlir::succeeded(mlir::verify(*parsed))) << errors;
    compileModule(std::move(parsed));
  }

  /// Takes `mtModule` as the module under test, lowers a copy to the LLVM dialect
  /// (mtc-to-linalg-pipeline, mtc-cpu-pipeline), compiles it with `options` and loads it.
  void compileModule(mlir::OwningOpRef<mlir::ModuleOp> mtModule,
                     const codegen::CPUCodegenOptions &options = {}) {
    std::string errors;
    mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
      llvm::raw_string_ostream(errors) << diag.getLocation() << ": " << diag << "\n";
      return mlir::success();
    });
    module = std::move(mtModule);
    mlir::DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    mlir::OwningOpRef<mlir::ModuleOp> lowered(module->clone());
    mlir::PassManager pm(&context);
    buildToLinalgPipeline(pm);
    buildCPUPipeline(pm);
    ASSERT_TRUE(mlir::succeeded(pm.run(*lowered))) << errors;

    std::string path = (std::filesystem::path(directory) / "kernels.so").string();
    llvm::Error error = codegen::compileToSharedObject(*lowered, path, options);
    ASSERT_FALSE(static_cast<bool>(error)) << llvm::toString(std::move(error));
    library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(library, nullptr) << ::dlerror();
  }

  /// How compiled results are compared with the interpreter's.
  struct Tolerance {
    /// Relative bound: |compiled - reference| <= relative * max(|reference|, floor).
    double relative = 1e-5;
    /// The floor is 0.1, or with `ofTensorMax` the largest |reference| of the result (for
    /// long chains of f32 arithmetic whose small elements are differences of large ones).
    bool ofTensorMax = false;
    /// Added to the bound: for results that are zero in exact arithmetic, where f32 leaves
    /// rounding noise.
    double absolute = 0;
  };

  /// Runs `func` compiled and in the interpreter on the same inputs, uniform in
  /// [low, high), and returns the compiled results (after comparing them).
  std::vector<std::vector<double>> runAndCompare(llvm::StringRef funcName, double low = -2,
                                                 double high = 2, uint64_t seed = 1) {
    return runAndCompareIn(
        funcName, [&](mt::NamedTensorType) { return std::pair(low, high); }, seed);
  }

  /// runAndCompare with the range of each argument given by `rangeOf(its type)`.
  std::vector<std::vector<double>>
  runAndCompareIn(llvm::StringRef funcName,
                  llvm::function_ref<std::pair<double, double>(mt::NamedTensorType)> rangeOf,
                  uint64_t seed = 1, std::optional<Tolerance> given = std::nullopt) {
    std::vector<std::vector<double>> compiled;
    auto func = module->lookupSymbol<mlir::func::FuncOp>(funcName);
    EXPECT_TRUE(func) << "no function " << funcName.str();
    if (!func)
      return compiled;

    Random random(seed);
    std::vector<interp::Tensor> inputs;
    std::vector<Buffer> buffers;
    for (mlir::Type type : func.getArgumentTypes()) {
      auto tensorType = mlir::cast<mt::NamedTensorType>(type);
      auto [low, high] = rangeOf(tensorType);
      std::vector<double> values(tensorType.getNumElements());
      for (double &value : values) {
        // Rounded to the element type first, so that both sides see the same numbers.
        value = static_cast<float>(random.uniform(low, high));
        mlir::Type element = tensorType.getElementType();
        if (mlir::isa<mlir::IntegerType>(element))
          value = std::round(value);
        else if (auto floatType = mlir::dyn_cast<mlir::FloatType>(element))
          value = Buffer::toFloat(value, floatType).convertToDouble();
      }
      inputs.emplace_back(tensorType, values);
      buffers.emplace_back(tensorType);
      buffers.back().set(values);
    }
    for (mlir::Type type : func.getResultTypes())
      buffers.emplace_back(mlir::cast<mt::NamedTensorType>(type));

    void *fn = ::dlsym(library, ("_mlir_ciface_" + funcName).str().c_str());
    EXPECT_NE(fn, nullptr) << "no symbol _mlir_ciface_" << funcName.str();
    if (!fn)
      return compiled;
    std::vector<void *> pointers = {&kernelContext};
    for (Buffer &buffer : buffers)
      pointers.push_back(buffer.descriptorPointer());
    callWithPointers(fn, pointers);

    interp::Interpreter interpreter(*module);
    if (dropoutKeep)
      interpreter.setDropoutMode(interp::DropoutMode::DeterministicMasks, dropoutKeep);
    llvm::Expected<std::vector<interp::Tensor>> expected = interpreter.call(funcName, inputs);
    EXPECT_TRUE(static_cast<bool>(expected)) << llvm::toString(expected.takeError());
    if (!expected)
      return compiled;

    // f32: 1e-5 relative (the acceptance bound). A function with f16 or bf16 values rounds
    // at every step of those: allow a few units in their last place.
    Tolerance tolerance = given.value_or(Tolerance());
    for (mlir::Type type : llvm::concat<const mlir::Type>(func.getArgumentTypes(),
                                                          func.getResultTypes())) {
      mlir::Type element = mlir::cast<mt::NamedTensorType>(type).getElementType();
      if (element.isF16())
        tolerance.relative = std::max(tolerance.relative, 4e-3);
      if (element.isBF16())
        tolerance.relative = std::max(tolerance.relative, 3e-2);
    }
    for (unsigned r = 0; r < func.getNumResults(); ++r) {
      const interp::Tensor &want = (*expected)[r];
      const Buffer &got = buffers[func.getNumArguments() + r];
      std::vector<double> values;
      bool isFloat = mlir::isa<mlir::FloatType>(want.type.getElementType());
      double floor = 0.1;
      if (tolerance.ofTensorMax) {
        floor = 0;
        for (double reference : want.data)
          floor = std::max(floor, std::abs(reference));
      }
      for (int64_t i = 0; i < want.getNumElements(); ++i) {
        double value = got.get(i), reference = want.data[i];
        values.push_back(value);
        if (isFloat)
          EXPECT_NEAR(value, reference,
                      tolerance.relative * std::max(std::abs(reference), floor) +
                          tolerance.absolute)
              << funcName.str() << " result " << r << " element " << i;
        else
          EXPECT_EQ(value, reference) << funcName.str() << " result " << r << " element " << i;
      }
      compiled.push_back(std::move(values));
    }
    return compiled;
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::string directory;
  void *library = nullptr;
  /// The key the runtime hands the kernels while a test runs (the first micro-batch), in
  /// the kernel context every call gets (no mesh; no workspace: each function's from the
  /// heap).
  rt::DropoutCall dropout{rt::DropoutKey{kDropoutSeed, kDropoutStep, 0}};
  MtcKernelContext kernelContext{};
  /// Compiles the training step of an example model and checks `forward_backward` (see the
  /// definition).
  void expectTrainingStepMatches(llvm::StringRef file, int64_t vocab);

  /// When set, the interpreter runs dropout with these masks.
  interp::DropoutKeepFn dropoutKeep;
};

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// The kernel ABI's GEMM descriptor (runtime/exec/KernelABI.h) is the descriptor the object
// passes: MLIR's StridedMemRefType<float, 3>.
TEST(KernelABILayoutTest, GemmDescriptorIsMLIRsRank3Descriptor) {
  using Descriptor = StridedMemRefType<float, 3>;
  EXPECT_EQ(sizeof(MtcMemRef3F32), sizeof(Descriptor));
  EXPECT_EQ(offsetof(MtcMemRef3F32, aligned), offsetof(Descriptor, data));
  EXPECT_EQ(offsetof(MtcMemRef3F32, offset), offsetof(Descriptor, offset));
  EXPECT_EQ(offsetof(MtcMemRef3F32, sizes), offsetof(Descriptor, sizes));
  EXPECT_EQ(offsetof(MtcMemRef3F32, strides), offsetof(Descriptor, strides));
}

TEST_F(CPUCodegenTest, BinaryOpsBroadcastByName) {
  // The rhs has the lhs's dimensions in another order, or a subset, or others entirely.
  compile(R"mlir(
    func.func @arith(%x: !mt.tensor<[batch=2, seq=3, hidden=4], f32>,
                     %y: !mt.tensor<[hidden=4, seq=3], f32>)
        -> !mt.tensor<[batch=2, seq=3, hidden=4], f32> {
      %half = mt.constant 0.5 : !mt.tensor<[], f32>
      %a = mt.add %x, %y : !mt.tensor<[batch=2, seq=3, hidden=4], f32>,
          !mt.tensor<[hidden=4, seq=3], f32> -> !mt.tensor<[batch=2, seq=3, hidden=4], f32>
      %m = mt.mul %a, %y : !mt.tensor<[batch=2, seq=3, hidden=4], f32>,
          !mt.tensor<[hidden=4, seq=3], f32> -> !mt.tensor<[batch=2, seq=3, hidden=4], f32>
      %d = mt.div %m, %half : !mt.tensor<[batch=2, seq=3, hidden=4], f32>,
          !mt.tensor<[], f32> -> !mt.tensor<[batch=2, seq=3, hidden=4], f32>
      %s = mt.sub %d, %x : !mt.tensor<[batch=2, seq=3, hidden=4], f32>,
          !mt.tensor<[batch=2, seq=3, hidden=4], f32> -> !mt.tensor<[batch=2, seq=3, hidden=4], f32>
      %mx = mt.max %s, %y : !mt.tensor<[batch=2, seq=3, hidden=4], f32>,
          !mt.tensor<[hidden=4, seq=3], f32> -> !mt.tensor<[batch=2, seq=3, hidden=4], f32>
      %g = mt.greater %mx, %x : !mt.tensor<[batch=2, seq=3, hidden=4], f32>,
          !mt.tensor<[batch=2, seq=3, hidden=4], f32> -> !mt.tensor<[batch=2, seq=3, hidden=4], f32>
      %r = mt.add %mx, %g : !mt.tensor<[batch=2, seq=3, hidden=4], f32>,
          !mt.tensor<[batch=2, seq=3, hidden=4], f32> -> !mt.tensor<[batch=2, seq=3, hidden=4], f32>
      return %r : !mt.tensor<[batch=2, seq=3, hidden=4], f32>
    }
    func.func @outer(%v: !mt.tensor<[seq=3], f32>, %w: !mt.tensor<[hidden=4], f32>)
        -> !mt.tensor<[seq=3, hidden=4], f32> {
      %0 = mt.mul %v, %w : !mt.tensor<[seq=3], f32>, !mt.tensor<[hidden=4], f32>
          -> !mt.tensor<[seq=3, hidden=4], f32>
      return %0 : !mt.tensor<[seq=3, hidden=4], f32>
    }
    func.func @pow(%x: !mt.tensor<[a=5], f32>, %p: !mt.tensor<[a=5], f32>)
        -> !mt.tensor<[a=5], f32> {
      %0 = mt.exp %x : !mt.tensor<[a=5], f32>
      %1 = mt.pow %0, %p : !mt.tensor<[a=5], f32>, !mt.tensor<[a=5], f32> -> !mt.tensor<[a=5], f32>
      return %1 : !mt.tensor<[a=5], f32>
    }
  )mlir");
  runAndCompare("arith");
  std::vector<std::vector<double>> outer = runAndCompare("outer", -2, 2, /*seed=*/7);
  runAndCompare("pow");

  // outer[s, h] = v[s] * w[h], checked by hand too.
  Random random(7);
  double v[3], w[4];
  for (double &x : v)
    x = static_cast<float>(random.uniform(-2, 2));
  for (double &x : w)
    x = static_cast<float>(random.uniform(-2, 2));
  ASSERT_EQ(outer.size(), 1u);
  for (int s = 0; s < 3; ++s)
    for (int h = 0; h < 4; ++h)
      EXPECT_NEAR(outer[0][s * 4 + h], v[s] * w[h], 1e-6);
}

TEST_F(CPUCodegenTest, UnaryOps) {
  compile(R"mlir(
    func.func @unary(%x: !mt.tensor<[a=3, b=5], f32>)
        -> (!mt.tensor<[a=3, b=5], f32>, !mt.tensor<[a=3, b=5], f32>,
            !mt.tensor<[a=3, b=5], f32>, !mt.tensor<[a=3, b=5], f32>) {
      %n = mt.neg %x : !mt.tensor<[a=3, b=5], f32>
      %e = mt.exp %n : !mt.tensor<[a=3, b=5], f32>
      %sq = mt.mul %x, %x : !mt.tensor<[a=3, b=5], f32>, !mt.tensor<[a=3, b=5], f32>
          -> !mt.tensor<[a=3, b=5], f32>
      %c = mt.constant 0.25 : !mt.tensor<[], f32>
      %pos = mt.add %sq, %c : !mt.tensor<[a=3, b=5], f32>, !mt.tensor<[], f32>
          -> !mt.tensor<[a=3, b=5], f32>
      %l = mt.log %pos : !mt.tensor<[a=3, b=5], f32>
      %s = mt.sqrt %pos : !mt.tensor<[a=3, b=5], f32>
      %r = mt.rsqrt %pos : !mt.tensor<[a=3, b=5], f32>
      return %e, %l, %s, %r : !mt.tensor<[a=3, b=5], f32>, !mt.tensor<[a=3, b=5], f32>,
          !mt.tensor<[a=3, b=5], f32>, !mt.tensor<[a=3, b=5], f32>
    }
    func.func @unary2(%x: !mt.tensor<[a=3, b=5], f32>)
        -> (!mt.tensor<[a=3, b=5], f32>, !mt.tensor<[a=3, b=5], f32>,
            !mt.tensor<[a=3, b=5], f32>, !mt.tensor<[a=3, b=5], f32>,
            !mt.tensor<[a=3, b=5], f32>) {
      %t = mt.tanh %x : !mt.tensor<[a=3, b=5], f32>
      %sg = mt.sigmoid %x : !mt.tensor<[a=3, b=5], f32>
      %re = mt.relu %x : !mt.tensor<[a=3, b=5], f32>
      %si = mt.silu %x : !mt.tensor<[a=3, b=5], f32>
      %co = mt.cos %x : !mt.tensor<[a=3, b=5], f32>
      return %t, %sg, %re, %si, %co : !mt.tensor<[a=3, b=5], f32>, !mt.tensor<[a=3, b=5], f32>,
          !mt.tensor<[a=3, b=5], f32>, !mt.tensor<[a=3, b=5], f32>, !mt.tensor<[a=3, b=5], f32>
    }
  )mlir");
  runAndCompare("unary");
  runAndCompare("unary2", -6, 6);
}

TEST_F(CPUCodegenTest, GeluBothForms) {
  compile(R"mlir(
    func.func @gelu(%x: !mt.tensor<[n=64], f32>)
        -> (!mt.tensor<[n=64], f32>, !mt.tensor<[n=64], f32>,
            !mt.tensor<[n=64], f32>, !mt.tensor<[n=64], f32>) {
      %erf = mt.gelu %x : !mt.tensor<[n=64], f32>
      %tanh = mt.gelu %x approximate : !mt.tensor<[n=64], f32>
      %derf = mt.gelu_grad %x : !mt.tensor<[n=64], f32>
      %dtanh = mt.gelu_grad %x approximate : !mt.tensor<[n=64], f32>
      return %erf, %tanh, %derf, %dtanh : !mt.tensor<[n=64], f32>, !mt.tensor<[n=64], f32>,
          !mt.tensor<[n=64], f32>, !mt.tensor<[n=64], f32>
    }
  )mlir");
  // The tanh form's derivative cancels in 1 + tanh(u) for x near -3, which scales the few
  // ulp of the kernels' polynomial tanh (mtc-approximate-math) by up to 20: 2e-5, not 1e-5.
  Tolerance tolerance;
  tolerance.relative = 2e-5;
  std::vector<std::vector<double>> results = runAndCompareIn(
      "gelu", [](mt::NamedTensorType) { return std::pair(-5.0, 5.0); }, /*seed=*/3, tolerance);
  ASSERT_EQ(results.size(), 4u);

  // The formulas, written out here.
  Random random(3);
  for (int i = 0; i < 64; ++i) {
    double x = static_cast<float>(random.uniform(-5, 5));
    double exact = 0.5 * x * (1 + std::erf(x / std::numbers::sqrt2));
    double tanhForm =
        0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(results[0][i], exact, 1e-5 * std::max(std::abs(exact), 0.1)) << x;
    EXPECT_NEAR(results[1][i], tanhForm, 1e-5 * std::max(std::abs(tanhForm), 0.1)) << x;
  }
  // gelu_grad is the derivative of gelu: compare with a central difference of the formula.
  random = Random(3);
  for (int i = 0; i < 64; ++i) {
    double x = static_cast<float>(random.uniform(-5, 5)), h = 1e-5;
    auto exact = [](double t) { return 0.5 * t * (1 + std::erf(t / std::numbers::sqrt2)); };
    EXPECT_NEAR(results[2][i], (exact(x + h) - exact(x - h)) / (2 * h), 1e-5) << x;
  }
}

/// The f32 transcendental functions are polynomial approximations in the kernels
/// (mtc-approximate-math), not libm calls: they stay within a few units in the last place of
/// the correctly rounded value over their whole range, including the causal mask's -3.4e38
/// that softmax exponentiates and arguments that overflow, underflow or saturate.
TEST_F(CPUCodegenTest, TranscendentalsMatchLibmOverTheirRange) {
  constexpr int64_t n = 4096;
  compile(R"mlir(
    func.func @transcendentals(%x: !mt.tensor<[n=4096], f32>, %p: !mt.tensor<[n=4096], f32>)
        -> (!mt.tensor<[n=4096], f32>, !mt.tensor<[n=4096], f32>, !mt.tensor<[n=4096], f32>) {
      %e = mt.exp %x : !mt.tensor<[n=4096], f32>
      %t = mt.tanh %x : !mt.tensor<[n=4096], f32>
      %l = mt.log %p : !mt.tensor<[n=4096], f32>
      return %e, %t, %l : !mt.tensor<[n=4096], f32>, !mt.tensor<[n=4096], f32>,
          !mt.tensor<[n=4096], f32>
    }
  )mlir");
  auto type = mlir::cast<mt::NamedTensorType>(
      module->lookupSymbol<mlir::func::FuncOp>("transcendentals").getArgumentTypes()[0]);
  std::vector<double> x, p;
  Random random(7);
  for (int64_t i = 0; i < n; ++i) {
    // Dense near 0 where tanh and exp vary most, spread to the overflow of exp, and the
    // extremes: the mask value, 0, the smallest normal.
    double wide = random.uniform(-90, 90), near = random.uniform(-4, 4);
    x.push_back(static_cast<float>(i % 2 ? wide : near));
    p.push_back(static_cast<float>(std::exp(random.uniform(-80, 80))));
  }
  x[0] = -std::numeric_limits<float>::max();
  x[1] = 0;
  x[2] = 1e-30;
  p[0] = std::numeric_limits<float>::min();
  p[1] = 1;
  std::vector<Buffer> buffers;
  buffers.reserve(5);
  for (int i = 0; i < 5; ++i)
    buffers.emplace_back(type);
  buffers[0].set(x);
  buffers[1].set(p);
  void *fn = ::dlsym(library, "_mlir_ciface_transcendentals");
  ASSERT_NE(fn, nullptr);
  std::vector<void *> pointers = {&kernelContext};
  for (Buffer &buffer : buffers)
    pointers.push_back(buffer.descriptorPointer());
  callWithPointers(fn, pointers);

  // Units in the last place of the f32 value next to `reference` (computed in double).
  auto ulps = [](double got, double reference) {
    double ulp = std::nextafter(static_cast<float>(std::abs(reference)),
                                std::numeric_limits<float>::infinity()) -
                 static_cast<float>(std::abs(reference));
    return std::abs(got - reference) / std::max(ulp, double(std::numeric_limits<float>::denorm_min()));
  };
  for (int64_t i = 0; i < n; ++i) {
    double exp = std::exp(x[i]), got = buffers[2].get(i);
    if (exp > std::numeric_limits<float>::max())
      EXPECT_EQ(got, std::numeric_limits<float>::infinity()) << "exp(" << x[i] << ")";
    else if (exp < std::numeric_limits<float>::min())
      EXPECT_NEAR(got, 0, std::numeric_limits<float>::min()) << "exp(" << x[i] << ")";
    else
      EXPECT_LE(ulps(got, exp), 4) << "exp(" << x[i] << ") = " << got << ", not " << exp;
    // tanh: a few ulp, or 1e-7 absolute near 0 where its ulp is tiny.
    double tanh = std::tanh(x[i]);
    EXPECT_TRUE(ulps(buffers[3].get(i), tanh) <= 4 || std::abs(buffers[3].get(i) - tanh) < 1e-7)
        << "tanh(" << x[i] << ") = " << buffers[3].get(i) << ", not " << tanh;
    double log = std::log(p[i]);
    EXPECT_LE(ulps(buffers[4].get(i), log), 3)
        << "log(" << p[i] << ") = " << buffers[4].get(i) << ", not " << log;
  }
}

//===----------------------------------------------------------------------===//
// Layout ops and casts
//===----------------------------------------------------------------------===//

TEST_F(CPUCodegenTest, TransposeBroadcastCast) {
  compile(R"mlir(
    func.func @layout(%x: !mt.tensor<[a=2, b=3, c=4], f32>)
        -> (!mt.tensor<[c=4, a=2, b=3], f32>, !mt.tensor<[b=3, d=5, a=2, c=4], f32>,
            !mt.tensor<[a=2, b=3, c=4], f64>, !mt.tensor<[a=2, b=3, c=4], i32>) {
      %t = mt.transpose %x : !mt.tensor<[a=2, b=3, c=4], f32> to !mt.tensor<[c=4, a=2, b=3], f32>
      %b = mt.broadcast %x : !mt.tensor<[a=2, b=3, c=4], f32>
          to !mt.tensor<[b=3, d=5, a=2, c=4], f32>
      %d = mt.cast %x : !mt.tensor<[a=2, b=3, c=4], f32> to !mt.tensor<[a=2, b=3, c=4], f64>
      %i = mt.cast %x : !mt.tensor<[a=2, b=3, c=4], f32> to !mt.tensor<[a=2, b=3, c=4], i32>
      return %t, %b, %d, %i : !mt.tensor<[c=4, a=2, b=3], f32>,
          !mt.tensor<[b=3, d=5, a=2, c=4], f32>, !mt.tensor<[a=2, b=3, c=4], f64>,
          !mt.tensor<[a=2, b=3, c=4], i32>
    }
  )mlir");
  // Float -> int truncates toward zero: inputs in (-10, 10) cover both signs.
  runAndCompare("layout", -10, 10);
}

TEST_F(CPUCodegenTest, ReturnsArgumentsAndConstants) {
  // Results that are function arguments or constants are copied/filled into the
  // caller's out-parameters.
  compile(R"mlir(
    func.func @passthrough(%x: !mt.tensor<[a=3], f32>)
        -> (!mt.tensor<[a=3], f32>, !mt.tensor<[], f32>, !mt.tensor<[a=3], f32>,
            !mt.tensor<[a=3], f32>) {
      %c = mt.constant 2.5 : !mt.tensor<[], f32>
      %n = mt.neg %x : !mt.tensor<[a=3], f32>
      return %x, %c, %n, %n : !mt.tensor<[a=3], f32>, !mt.tensor<[], f32>,
          !mt.tensor<[a=3], f32>, !mt.tensor<[a=3], f32>
    }
  )mlir");
  std::vector<std::vector<double>> results = runAndCompare("passthrough");
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[1][0], 2.5);
  EXPECT_EQ(results[2], results[3]);
}

TEST_F(CPUCodegenTest, SplitMergeRenameIota) {
  // merge [head_dim, heads] needs a transpose first; merge [seq, heads] does not.
  compile(R"mlir(
    func.func @shape(%x: !mt.tensor<[seq=4, hidden=6], f32>)
        -> (!mt.tensor<[seq=4, heads=2, head_dim=3], f32>, !mt.tensor<[hd=6, s=4], f32>,
            !mt.tensor<[sh=8, head_dim=3], f32>, !mt.tensor<[pos=5], f32>,
            !mt.tensor<[pos=5], i32>) {
      %0 = mt.split %x hidden into [heads, head_dim]
          : !mt.tensor<[seq=4, hidden=6], f32> -> !mt.tensor<[seq=4, heads=2, head_dim=3], f32>
      %1 = mt.merge %0 [head_dim, heads] into hd
          : !mt.tensor<[seq=4, heads=2, head_dim=3], f32> -> !mt.tensor<[seq=4, hd=6], f32>
      %2 = mt.rename %1 seq to s : !mt.tensor<[seq=4, hd=6], f32> -> !mt.tensor<[s=4, hd=6], f32>
      %3 = mt.transpose %2 : !mt.tensor<[s=4, hd=6], f32> to !mt.tensor<[hd=6, s=4], f32>
      %4 = mt.merge %0 [seq, heads] into sh
          : !mt.tensor<[seq=4, heads=2, head_dim=3], f32> -> !mt.tensor<[sh=8, head_dim=3], f32>
      %5 = mt.iota dim pos : !mt.tensor<[pos=5], f32>
      %6 = mt.iota dim pos : !mt.tensor<[pos=5], i32>
      return %0, %3, %4, %5, %6 : !mt.tensor<[seq=4, heads=2, head_dim=3], f32>,
          !mt.tensor<[hd=6, s=4], f32>, !mt.tensor<[sh=8, head_dim=3], f32>,
          !mt.tensor<[pos=5], f32>, !mt.tensor<[pos=5], i32>
    }
    func.func @merge_middle(%x: !mt.tensor<[a=2, b=3, c=4, d=5], f32>)
        -> !mt.tensor<[a=2, m=20, b=3], f32> {
      %0 = mt.merge %x [c, d] into m
          : !mt.tensor<[a=2, b=3, c=4, d=5], f32> -> !mt.tensor<[a=2, b=3, m=20], f32>
      %1 = mt.rename %0 b to e
          : !mt.tensor<[a=2, b=3, m=20], f32> -> !mt.tensor<[a=2, e=3, m=20], f32>
      %2 = mt.rename %1 e to b
          : !mt.tensor<[a=2, e=3, m=20], f32> -> !mt.tensor<[a=2, b=3, m=20], f32>
      %3 = mt.transpose %2 : !mt.tensor<[a=2, b=3, m=20], f32> to !mt.tensor<[a=2, m=20, b=3], f32>
      return %3 : !mt.tensor<[a=2, m=20, b=3], f32>
    }
  )mlir");
  std::vector<std::vector<double>> results = runAndCompare("shape");
  ASSERT_EQ(results.size(), 5u);
  EXPECT_EQ(results[3], (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(results[4], (std::vector<double>{0, 1, 2, 3, 4}));
  runAndCompare("merge_middle");
}

TEST_F(CPUCodegenTest, GatherAndEmbeddingGrad) {
  // Inputs in [0, 4.4): the indices round to 0..4, every row of the 5-row table, with
  // repeats (embedding_grad accumulates them). The table dimension is not the leading one
  // of embedding_grad's result.
  compile(R"mlir(
    func.func @gather(%t: !mt.tensor<[vocab=5, hidden=3], f32>,
                      %ids: !mt.tensor<[batch=2, seq=4], i32>)
        -> !mt.tensor<[batch=2, seq=4, hidden=3], f32> {
      %0 = mt.gather %t, %ids over vocab : !mt.tensor<[vocab=5, hidden=3], f32>,
          !mt.tensor<[batch=2, seq=4], i32> -> !mt.tensor<[batch=2, seq=4, hidden=3], f32>
      return %0 : !mt.tensor<[batch=2, seq=4, hidden=3], f32>
    }
    func.func @embedding_grad(%ids: !mt.tensor<[batch=2, seq=4], i64>,
                              %g: !mt.tensor<[batch=2, seq=4, hidden=3], f32>)
        -> !mt.tensor<[hidden=3, vocab=5], f32> {
      %0 = mt.embedding_grad %ids, %g over vocab : !mt.tensor<[batch=2, seq=4], i64>,
          !mt.tensor<[batch=2, seq=4, hidden=3], f32> -> !mt.tensor<[hidden=3, vocab=5], f32>
      return %0 : !mt.tensor<[hidden=3, vocab=5], f32>
    }
    func.func @scalar_index(%t: !mt.tensor<[vocab=5], f32>, %id: !mt.tensor<[], i32>)
        -> (!mt.tensor<[], f32>, !mt.tensor<[vocab=5], f32>) {
      %0 = mt.gather %t, %id over vocab
          : !mt.tensor<[vocab=5], f32>, !mt.tensor<[], i32> -> !mt.tensor<[], f32>
      %1 = mt.embedding_grad %id, %0 over vocab
          : !mt.tensor<[], i32>, !mt.tensor<[], f32> -> !mt.tensor<[vocab=5], f32>
      return %0, %1 : !mt.tensor<[], f32>, !mt.tensor<[vocab=5], f32>
    }
  )mlir");
  runAndCompare("gather", 0, 4.4);
  std::vector<std::vector<double>> grad = runAndCompare("embedding_grad", 0, 4.4, /*seed=*/5);
  runAndCompare("scalar_index", 0, 4.4, /*seed=*/9);

  // Every gradient element lands in exactly one table row: the sums agree.
  Random random(5);
  double total = 0;
  for (int i = 0; i < 2 * 4; ++i)
    random.uniform(0, 4.4);
  for (int i = 0; i < 2 * 4 * 3; ++i)
    total += static_cast<float>(random.uniform(0, 4.4));
  ASSERT_EQ(grad.size(), 1u);
  double sum = 0;
  for (double value : grad[0])
    sum += value;
  EXPECT_NEAR(sum, total, 1e-4);
}

//===----------------------------------------------------------------------===//
// Rotary embeddings and dropout
//===----------------------------------------------------------------------===//

TEST_F(CPUCodegenTest, Rope) {
  // The rotated dimension first or last, the position dimension anywhere; inverse undoes
  // the rotation.
  compile(R"mlir(
    func.func @rope(%x: !mt.tensor<[seq=6, heads=2, head_dim=8], f32>)
        -> (!mt.tensor<[seq=6, heads=2, head_dim=8], f32>,
            !mt.tensor<[seq=6, heads=2, head_dim=8], f32>,
            !mt.tensor<[seq=6, heads=2, head_dim=8], f32>) {
      %0 = mt.rope %x over head_dim position seq : !mt.tensor<[seq=6, heads=2, head_dim=8], f32>
      %1 = mt.rope %x over head_dim position seq inverse {theta = 500.0 : f64}
          : !mt.tensor<[seq=6, heads=2, head_dim=8], f32>
      %2 = mt.rope %0 over head_dim position seq inverse
          : !mt.tensor<[seq=6, heads=2, head_dim=8], f32>
      return %0, %1, %2 : !mt.tensor<[seq=6, heads=2, head_dim=8], f32>,
          !mt.tensor<[seq=6, heads=2, head_dim=8], f32>,
          !mt.tensor<[seq=6, heads=2, head_dim=8], f32>
    }
    func.func @rope_leading(%x: !mt.tensor<[rot=4, batch=2, pos=5], f64>)
        -> !mt.tensor<[rot=4, batch=2, pos=5], f64> {
      %0 = mt.rope %x over rot position pos : !mt.tensor<[rot=4, batch=2, pos=5], f64>
      return %0 : !mt.tensor<[rot=4, batch=2, pos=5], f64>
    }
  )mlir");
  std::vector<std::vector<double>> results = runAndCompare("rope");
  runAndCompare("rope_leading");

  // rope then its inverse gives the input back.
  ASSERT_EQ(results.size(), 3u);
  Random random(1);
  for (size_t i = 0; i < results[2].size(); ++i) {
    double x = static_cast<float>(random.uniform(-2, 2));
    EXPECT_NEAR(results[2][i], x, 1e-5) << i;
  }
}

TEST_F(CPUCodegenTest, RopeAtPositionIds) {
  // Position ids per batch row and position (packed documents: they restart), ids shared
  // by the batch, and the ids 0, 1, ... (the plain rotation, compared exactly).
  compile(R"mlir(
    func.func @rope_ids(%x: !mt.tensor<[batch=2, seq=6, heads=2, head_dim=8], f32>,
                        %ids: !mt.tensor<[batch=2, seq=6], i32>)
        -> (!mt.tensor<[batch=2, seq=6, heads=2, head_dim=8], f32>,
            !mt.tensor<[batch=2, seq=6, heads=2, head_dim=8], f32>) {
      %0 = mt.rope %x over head_dim position seq at %ids : !mt.tensor<[batch=2, seq=6], i32>
          : !mt.tensor<[batch=2, seq=6, heads=2, head_dim=8], f32>
      %1 = mt.rope %0 over head_dim position seq at %ids : !mt.tensor<[batch=2, seq=6], i32>
          inverse : !mt.tensor<[batch=2, seq=6, heads=2, head_dim=8], f32>
      return %0, %1 : !mt.tensor<[batch=2, seq=6, heads=2, head_dim=8], f32>,
          !mt.tensor<[batch=2, seq=6, heads=2, head_dim=8], f32>
    }
    func.func @rope_shared_ids(%x: !mt.tensor<[rot=4, batch=2, pos=5], f64>,
                               %ids: !mt.tensor<[pos=5], i32>)
        -> !mt.tensor<[rot=4, batch=2, pos=5], f64> {
      %0 = mt.rope %x over rot position pos at %ids : !mt.tensor<[pos=5], i32>
          : !mt.tensor<[rot=4, batch=2, pos=5], f64>
      return %0 : !mt.tensor<[rot=4, batch=2, pos=5], f64>
    }
    func.func @rope_index_ids(%x: !mt.tensor<[seq=6, head_dim=8], f32>)
        -> (!mt.tensor<[seq=6, head_dim=8], f32>, !mt.tensor<[seq=6, head_dim=8], f32>) {
      %ids = mt.iota dim seq : !mt.tensor<[seq=6], i32>
      %0 = mt.rope %x over head_dim position seq at %ids : !mt.tensor<[seq=6], i32>
          : !mt.tensor<[seq=6, head_dim=8], f32>
      %1 = mt.rope %x over head_dim position seq : !mt.tensor<[seq=6, head_dim=8], f32>
      return %0, %1 : !mt.tensor<[seq=6, head_dim=8], f32>, !mt.tensor<[seq=6, head_dim=8], f32>
    }
  )mlir");
  // Ids anywhere in [0, 5) (rounded): the tables cover the sequence's positions.
  auto idsIn = [](mt::NamedTensorType type) {
    return mlir::isa<mlir::IntegerType>(type.getElementType()) ? std::pair(0.0, 4.49)
                                                               : std::pair(-2.0, 2.0);
  };
  std::vector<std::vector<double>> results = runAndCompareIn("rope_ids", idsIn);
  runAndCompareIn("rope_shared_ids", idsIn);
  // The inverse at the same ids gives the input back.
  ASSERT_EQ(results.size(), 2u);
  Random random(1);
  for (size_t i = 0; i < results[1].size(); ++i) {
    double x = static_cast<float>(random.uniform(-2, 2));
    EXPECT_NEAR(results[1][i], x, 1e-5) << i;
  }
  std::vector<std::vector<double>> index = runAndCompare("rope_index_ids");
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index[0], index[1]);
}

TEST_F(CPUCodegenTest, DropoutMatchesPhiloxMasks) {
  compile(R"mlir(
    func.func @dropout(%x: !mt.tensor<[batch=2, seq=8, hidden=16], f32>,
                       %h: !mt.tensor<[n=64], f16>)
        -> (!mt.tensor<[batch=2, seq=8, hidden=16], f32>, !mt.tensor<[n=64], f16>,
            !mt.tensor<[batch=2, seq=8, hidden=16], f32>) {
      %0 = mt.dropout %x rate 0.25 stream 3 : !mt.tensor<[batch=2, seq=8, hidden=16], f32>
      %1 = mt.dropout %h rate 0.5 stream 4 : !mt.tensor<[n=64], f16>
      %2 = mt.dropout %x rate 0.0 stream 5 : !mt.tensor<[batch=2, seq=8, hidden=16], f32>
      return %0, %1, %2 : !mt.tensor<[batch=2, seq=8, hidden=16], f32>,
          !mt.tensor<[n=64], f16>, !mt.tensor<[batch=2, seq=8, hidden=16], f32>
    }
  )mlir");
  auto rates = [](int64_t stream) { return stream == 3 ? 0.25 : stream == 4 ? 0.5 : 0.0; };
  dropoutKeep = [&](int64_t stream, int64_t element) {
    return dropoutKeeps(stream, element, rates(stream));
  };
  // Inputs in [1, 2): a dropped element (0) is never confused with a kept one.
  std::vector<std::vector<double>> results = runAndCompare("dropout", 1, 2);
  ASSERT_EQ(results.size(), 3u);
  // The counter of element i: its sample (batch coordinate, 128 elements each) in the high
  // bits, its offset in the sample below; without `batch` (%h) the offset alone.
  int64_t kept = 0;
  for (size_t i = 0; i < results[0].size(); ++i) {
    auto e = static_cast<int64_t>(i);
    EXPECT_EQ(results[0][i] != 0,
              dropoutKeeps(3, e / 128 * MTC_DROPOUT_SAMPLE_STRIDE + e % 128, 0.25))
        << i;
    kept += results[0][i] != 0;
  }
  for (size_t i = 0; i < results[1].size(); ++i)
    EXPECT_EQ(results[1][i] != 0, dropoutKeeps(4, static_cast<int64_t>(i), 0.5)) << i;
  // 256 elements at keep probability 0.75: far from all or none.
  EXPECT_GT(kept, 150);
  EXPECT_LT(kept, 240);
  for (double value : results[2])
    EXPECT_NE(value, 0);
}

//===----------------------------------------------------------------------===//
// Top-k
//===----------------------------------------------------------------------===//

TEST_F(CPUCodegenTest, TopKOrderTiesNaNAndGrad) {
  // The ranked dimension leading or trailing; ties (inputs truncated to integers) go to the
  // lower position, NaN (log of a negative number) ranks above every number: only the
  // indices are compared there, NaN values never compare equal.
  compile(R"mlir(
    func.func @topk(%x: !mt.tensor<[experts=6, tokens=4], f32>)
        -> (!mt.tensor<[k=3, tokens=4], f32>, !mt.tensor<[k=3, tokens=4], i64>) {
      %v, %i = mt.topk %x over experts k k : !mt.tensor<[experts=6, tokens=4], f32>
          -> !mt.tensor<[k=3, tokens=4], f32>, !mt.tensor<[k=3, tokens=4], i64>
      return %v, %i : !mt.tensor<[k=3, tokens=4], f32>, !mt.tensor<[k=3, tokens=4], i64>
    }
    func.func @ties_and_nan(%x: !mt.tensor<[t=5, e=8], f32>)
        -> (!mt.tensor<[t=5, k=8], i32>, !mt.tensor<[t=5, k=4], i32>) {
      %n = mt.cast %x : !mt.tensor<[t=5, e=8], f32> to !mt.tensor<[t=5, e=8], i32>
      %f = mt.cast %n : !mt.tensor<[t=5, e=8], i32> to !mt.tensor<[t=5, e=8], f32>
      %v, %i = mt.topk %f over e k k : !mt.tensor<[t=5, e=8], f32>
          -> !mt.tensor<[t=5, k=8], f32>, !mt.tensor<[t=5, k=8], i32>
      %l = mt.log %x : !mt.tensor<[t=5, e=8], f32>
      %w, %j = mt.topk %l over e k k : !mt.tensor<[t=5, e=8], f32>
          -> !mt.tensor<[t=5, k=4], f32>, !mt.tensor<[t=5, k=4], i32>
      return %i, %j : !mt.tensor<[t=5, k=8], i32>, !mt.tensor<[t=5, k=4], i32>
    }
    func.func @grad(%x: !mt.tensor<[tokens=4, experts=6], f32>,
                    %g: !mt.tensor<[tokens=4, k=2], f32>)
        -> !mt.tensor<[tokens=4, experts=6], f32> {
      %v, %i = mt.topk %x over experts k k : !mt.tensor<[tokens=4, experts=6], f32>
          -> !mt.tensor<[tokens=4, k=2], f32>, !mt.tensor<[tokens=4, k=2], i32>
      %t = mt.transpose %i : !mt.tensor<[tokens=4, k=2], i32> to !mt.tensor<[k=2, tokens=4], i32>
      %r = mt.topk_grad %g, %t over experts k k : !mt.tensor<[tokens=4, k=2], f32>,
          !mt.tensor<[k=2, tokens=4], i32> -> !mt.tensor<[tokens=4, experts=6], f32>
      return %r : !mt.tensor<[tokens=4, experts=6], f32>
    }
  )mlir");
  runAndCompare("topk");
  std::vector<std::vector<double>> ranked = runAndCompare("ties_and_nan", -3, 3);
  ASSERT_EQ(ranked.size(), 2u);
  // Each lane of the full sort is a permutation of 0..7.
  for (int t = 0; t < 5; ++t) {
    std::vector<double> lane(ranked[0].begin() + t * 8, ranked[0].begin() + (t + 1) * 8);
    std::sort(lane.begin(), lane.end());
    for (int e = 0; e < 8; ++e)
      EXPECT_EQ(lane[e], e);
  }
  runAndCompare("grad");
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

TEST_F(CPUCodegenTest, RoutingAndLoadBalancing) {
  // Capacity 2 for 6 tokens x 2 choices over 4 experts: at least 4 choices are dropped, so
  // the first-come-first-served order matters. @moe_layouts has two token dimensions, k
  // leading the indices and the features between the token dimensions of the input.
  compile(R"mlir(
    func.func @moe(%x: !mt.tensor<[tokens=6, hidden=4], f32>,
                   %logits: !mt.tensor<[tokens=6, experts=4], f32>,
                   %w: !mt.tensor<[tokens=6, k=2], f32>, %g: !mt.tensor<[tokens=6, hidden=4], f32>,
                   %ls: !mt.tensor<[], f32>)
        -> (!mt.tensor<[experts=4, capacity=2, hidden=4], f32>,
            !mt.tensor<[tokens=6, hidden=4], f32>,
            !mt.tensor<[experts=4, capacity=2, hidden=4], f32>, !mt.tensor<[tokens=6, k=2], f32>,
            !mt.tensor<[], f32>, !mt.tensor<[tokens=6, experts=4], f32>) {
      %v, %i = mt.topk %logits over experts k k : !mt.tensor<[tokens=6, experts=4], f32>
          -> !mt.tensor<[tokens=6, k=2], f32>, !mt.tensor<[tokens=6, k=2], i32>
      %d = mt.dispatch %x, %i k k to experts capacity capacity factor 0.5
          : !mt.tensor<[tokens=6, hidden=4], f32>, !mt.tensor<[tokens=6, k=2], i32>
          -> !mt.tensor<[experts=4, capacity=2, hidden=4], f32>
      %c = mt.combine %d, %i, %w k k from experts capacity capacity
          : !mt.tensor<[experts=4, capacity=2, hidden=4], f32>, !mt.tensor<[tokens=6, k=2], i32>,
            !mt.tensor<[tokens=6, k=2], f32> -> !mt.tensor<[tokens=6, hidden=4], f32>
      %ig, %wg = mt.combine_grad %d, %i, %w, %g k k from experts capacity capacity
          : !mt.tensor<[experts=4, capacity=2, hidden=4], f32>, !mt.tensor<[tokens=6, k=2], i32>,
            !mt.tensor<[tokens=6, k=2], f32>, !mt.tensor<[tokens=6, hidden=4], f32>
          -> !mt.tensor<[experts=4, capacity=2, hidden=4], f32>, !mt.tensor<[tokens=6, k=2], f32>
      %l = mt.load_balancing_loss %logits, %i over experts k k
          : !mt.tensor<[tokens=6, experts=4], f32>, !mt.tensor<[tokens=6, k=2], i32>
          -> !mt.tensor<[], f32>
      %lg = mt.load_balancing_loss_grad %logits, %i, %ls over experts k k
          : !mt.tensor<[tokens=6, experts=4], f32>, !mt.tensor<[tokens=6, k=2], i32>,
            !mt.tensor<[], f32> -> !mt.tensor<[tokens=6, experts=4], f32>
      return %d, %c, %ig, %wg, %l, %lg : !mt.tensor<[experts=4, capacity=2, hidden=4], f32>,
          !mt.tensor<[tokens=6, hidden=4], f32>,
          !mt.tensor<[experts=4, capacity=2, hidden=4], f32>, !mt.tensor<[tokens=6, k=2], f32>,
          !mt.tensor<[], f32>, !mt.tensor<[tokens=6, experts=4], f32>
    }
    func.func @moe_layouts(%x: !mt.tensor<[batch=2, hidden=3, seq=3], f32>,
                           %logits: !mt.tensor<[batch=2, seq=3, experts=4], f32>,
                           %w: !mt.tensor<[seq=3, k=2, batch=2], f32>)
        -> (!mt.tensor<[experts=4, capacity=3, hidden=3], f32>,
            !mt.tensor<[batch=2, seq=3, hidden=3], f32>, !mt.tensor<[], f32>) {
      %v, %i = mt.topk %logits over experts k k : !mt.tensor<[batch=2, seq=3, experts=4], f32>
          -> !mt.tensor<[batch=2, seq=3, k=2], f32>, !mt.tensor<[batch=2, seq=3, k=2], i64>
      %t = mt.transpose %i : !mt.tensor<[batch=2, seq=3, k=2], i64>
          to !mt.tensor<[k=2, batch=2, seq=3], i64>
      %d = mt.dispatch %x, %t k k to experts capacity capacity factor 0.75
          : !mt.tensor<[batch=2, hidden=3, seq=3], f32>, !mt.tensor<[k=2, batch=2, seq=3], i64>
          -> !mt.tensor<[experts=4, capacity=3, hidden=3], f32>
      %c = mt.combine %d, %t, %w k k from experts capacity capacity
          : !mt.tensor<[experts=4, capacity=3, hidden=3], f32>,
            !mt.tensor<[k=2, batch=2, seq=3], i64>, !mt.tensor<[seq=3, k=2, batch=2], f32>
          -> !mt.tensor<[batch=2, seq=3, hidden=3], f32>
      %l = mt.load_balancing_loss %logits, %t over experts k k
          : !mt.tensor<[batch=2, seq=3, experts=4], f32>, !mt.tensor<[k=2, batch=2, seq=3], i64>
          -> !mt.tensor<[], f32>
      return %d, %c, %l : !mt.tensor<[experts=4, capacity=3, hidden=3], f32>,
          !mt.tensor<[batch=2, seq=3, hidden=3], f32>, !mt.tensor<[], f32>
    }
  )mlir");
  std::vector<std::vector<double>> results = runAndCompare("moe");
  ASSERT_EQ(results.size(), 6u);
  // 8 slots for 12 choices: every slot is filled, 4 choices are dropped.
  for (size_t slot = 0; slot < 8; ++slot) {
    bool filled = false;
    for (size_t f = 0; f < 4; ++f)
      filled |= results[0][slot * 4 + f] != 0;
    EXPECT_TRUE(filled) << "slot " << slot;
  }
  runAndCompare("moe_layouts", -2, 2, /*seed=*/4);
}

TEST_F(CPUCodegenTest, ExpertLoadCountsEveryChoice) {
  // 6 tokens x 2 choices over 4 experts: the counts add up to the 12 choices whatever a
  // dispatch's capacity would drop. @tied (zero logits) puts every token on experts 0 and 1;
  // @layouts counts i64 indices with k leading and two token dimensions.
  compile(R"mlir(
    func.func @load(%logits: !mt.tensor<[tokens=6, experts=4], f32>)
        -> !mt.tensor<[experts=4], i64> {
      %v, %i = mt.topk %logits over experts k k : !mt.tensor<[tokens=6, experts=4], f32>
          -> !mt.tensor<[tokens=6, k=2], f32>, !mt.tensor<[tokens=6, k=2], i32>
      %n = mt.expert_load %i k k to experts
          : !mt.tensor<[tokens=6, k=2], i32> -> !mt.tensor<[experts=4], i64>
      return %n : !mt.tensor<[experts=4], i64>
    }
    func.func @tied(%logits: !mt.tensor<[tokens=6, experts=4], f32>)
        -> !mt.tensor<[experts=4], i64> {
      %zero = mt.sub %logits, %logits : !mt.tensor<[tokens=6, experts=4], f32>,
          !mt.tensor<[tokens=6, experts=4], f32> -> !mt.tensor<[tokens=6, experts=4], f32>
      %v, %i = mt.topk %zero over experts k k : !mt.tensor<[tokens=6, experts=4], f32>
          -> !mt.tensor<[tokens=6, k=2], f32>, !mt.tensor<[tokens=6, k=2], i32>
      %n = mt.expert_load %i k k to experts
          : !mt.tensor<[tokens=6, k=2], i32> -> !mt.tensor<[experts=4], i64>
      return %n : !mt.tensor<[experts=4], i64>
    }
    func.func @layouts(%logits: !mt.tensor<[batch=2, seq=3, experts=4], f32>)
        -> !mt.tensor<[experts=4], i64> {
      %v, %i = mt.topk %logits over experts k k : !mt.tensor<[batch=2, seq=3, experts=4], f32>
          -> !mt.tensor<[batch=2, seq=3, k=2], f32>, !mt.tensor<[batch=2, seq=3, k=2], i64>
      %t = mt.transpose %i : !mt.tensor<[batch=2, seq=3, k=2], i64>
          to !mt.tensor<[k=2, batch=2, seq=3], i64>
      %n = mt.expert_load %t k k to experts
          : !mt.tensor<[k=2, batch=2, seq=3], i64> -> !mt.tensor<[experts=4], i64>
      return %n : !mt.tensor<[experts=4], i64>
    }
  )mlir");
  for (llvm::StringRef name : {"load", "layouts"}) {
    std::vector<std::vector<double>> counts = runAndCompare(name, -2, 2, /*seed=*/3);
    ASSERT_EQ(counts.size(), 1u);
    EXPECT_EQ(std::accumulate(counts[0].begin(), counts[0].end(), 0.0), 12) << name.str();
  }
  std::vector<std::vector<double>> tied = runAndCompare("tied");
  ASSERT_EQ(tied.size(), 1u);
  EXPECT_EQ(tied[0], (std::vector<double>{6, 6, 0, 0}));
}

TEST_F(CPUCodegenTest, LoadBalancingFromProbabilities) {
  // Megatron's convention: the operand is the probabilities (here sigmoid scores, not
  // normalised), with no softmax in the kernel; the indices lead with k and list the token
  // dimensions in another order than the probabilities.
  compile(R"mlir(
    func.func @megatron(%x: !mt.tensor<[batch=2, experts=4, seq=3], f32>,
                        %ls: !mt.tensor<[], f32>)
        -> (!mt.tensor<[], f32>, !mt.tensor<[batch=2, experts=4, seq=3], f32>) {
      %p = mt.sigmoid %x : !mt.tensor<[batch=2, experts=4, seq=3], f32>
      %v, %i = mt.topk %x over experts k k : !mt.tensor<[batch=2, experts=4, seq=3], f32>
          -> !mt.tensor<[batch=2, k=2, seq=3], f32>, !mt.tensor<[batch=2, k=2, seq=3], i32>
      %t = mt.transpose %i : !mt.tensor<[batch=2, k=2, seq=3], i32>
          to !mt.tensor<[k=2, seq=3, batch=2], i32>
      %l = mt.load_balancing_loss %p, %t over experts k k probabilities
          : !mt.tensor<[batch=2, experts=4, seq=3], f32>, !mt.tensor<[k=2, seq=3, batch=2], i32>
          -> !mt.tensor<[], f32>
      %lg = mt.load_balancing_loss_grad %p, %t, %ls over experts k k probabilities
          : !mt.tensor<[batch=2, experts=4, seq=3], f32>, !mt.tensor<[k=2, seq=3, batch=2], i32>,
            !mt.tensor<[], f32> -> !mt.tensor<[batch=2, experts=4, seq=3], f32>
      return %l, %lg : !mt.tensor<[], f32>, !mt.tensor<[batch=2, experts=4, seq=3], f32>
    }
  )mlir");
  std::vector<std::vector<double>> results = runAndCompare("megatron", -2, 2, /*seed=*/6);
  ASSERT_EQ(results.size(), 2u);
  // The gradient E / T * f_e * loss_grad is the same for every token: compare the two
  // batch rows of each (expert, seq) lane.
  for (size_t at = 0; at < 12; ++at)
    EXPECT_EQ(results[1][at], results[1][12 + at]) << "element " << at;
}

TEST_F(CPUCodegenTest, DroplessRoutingKeepsEveryChoice) {
  // Zero logits tie everywhere, so top-2 sends all 6 tokens to experts 0 and 1: the most
  // uneven routing. Dropless capacity is the token count, so both experts take all 6 and no
  // choice is dropped; @random_routing checks the same ops under ordinary routing.
  compile(R"mlir(
    func.func @tied(%x: !mt.tensor<[tokens=6, hidden=4], f32>,
                    %logits: !mt.tensor<[tokens=6, experts=4], f32>,
                    %w: !mt.tensor<[tokens=6, k=2], f32>, %g: !mt.tensor<[tokens=6, hidden=4], f32>)
        -> (!mt.tensor<[experts=4, capacity=6, hidden=4], f32>,
            !mt.tensor<[tokens=6, hidden=4], f32>,
            !mt.tensor<[experts=4, capacity=6, hidden=4], f32>, !mt.tensor<[tokens=6, k=2], f32>) {
      %zero = mt.sub %logits, %logits : !mt.tensor<[tokens=6, experts=4], f32>,
          !mt.tensor<[tokens=6, experts=4], f32> -> !mt.tensor<[tokens=6, experts=4], f32>
      %v, %i = mt.topk %zero over experts k k : !mt.tensor<[tokens=6, experts=4], f32>
          -> !mt.tensor<[tokens=6, k=2], f32>, !mt.tensor<[tokens=6, k=2], i32>
      %d = mt.dispatch %x, %i k k to experts capacity capacity dropless
          : !mt.tensor<[tokens=6, hidden=4], f32>, !mt.tensor<[tokens=6, k=2], i32>
          -> !mt.tensor<[experts=4, capacity=6, hidden=4], f32>
      %c = mt.combine %d, %i, %w k k from experts capacity capacity
          : !mt.tensor<[experts=4, capacity=6, hidden=4], f32>, !mt.tensor<[tokens=6, k=2], i32>,
            !mt.tensor<[tokens=6, k=2], f32> -> !mt.tensor<[tokens=6, hidden=4], f32>
      %ig, %wg = mt.combine_grad %d, %i, %w, %g k k from experts capacity capacity
          : !mt.tensor<[experts=4, capacity=6, hidden=4], f32>, !mt.tensor<[tokens=6, k=2], i32>,
            !mt.tensor<[tokens=6, k=2], f32>, !mt.tensor<[tokens=6, hidden=4], f32>
          -> !mt.tensor<[experts=4, capacity=6, hidden=4], f32>, !mt.tensor<[tokens=6, k=2], f32>
      return %d, %c, %ig, %wg : !mt.tensor<[experts=4, capacity=6, hidden=4], f32>,
          !mt.tensor<[tokens=6, hidden=4], f32>,
          !mt.tensor<[experts=4, capacity=6, hidden=4], f32>, !mt.tensor<[tokens=6, k=2], f32>
    }
    func.func @random_routing(%x: !mt.tensor<[tokens=6, hidden=4], f32>,
                              %logits: !mt.tensor<[tokens=6, experts=4], f32>,
                              %w: !mt.tensor<[tokens=6, k=2], f32>)
        -> (!mt.tensor<[experts=4, capacity=6, hidden=4], f32>,
            !mt.tensor<[tokens=6, hidden=4], f32>) {
      %v, %i = mt.topk %logits over experts k k : !mt.tensor<[tokens=6, experts=4], f32>
          -> !mt.tensor<[tokens=6, k=2], f32>, !mt.tensor<[tokens=6, k=2], i32>
      %d = mt.dispatch %x, %i k k to experts capacity capacity dropless
          : !mt.tensor<[tokens=6, hidden=4], f32>, !mt.tensor<[tokens=6, k=2], i32>
          -> !mt.tensor<[experts=4, capacity=6, hidden=4], f32>
      %c = mt.combine %d, %i, %w k k from experts capacity capacity
          : !mt.tensor<[experts=4, capacity=6, hidden=4], f32>, !mt.tensor<[tokens=6, k=2], i32>,
            !mt.tensor<[tokens=6, k=2], f32> -> !mt.tensor<[tokens=6, hidden=4], f32>
      return %d, %c : !mt.tensor<[experts=4, capacity=6, hidden=4], f32>,
          !mt.tensor<[tokens=6, hidden=4], f32>
    }
  )mlir");
  std::vector<std::vector<double>> results = runAndCompare("tied");
  ASSERT_EQ(results.size(), 4u);
  // Experts 0 and 1 hold every token (slot t is token t), experts 2 and 3 none.
  for (size_t expert = 0; expert < 4; ++expert) {
    for (size_t slot = 0; slot < 6; ++slot) {
      bool filled = false;
      for (size_t f = 0; f < 4; ++f)
        filled |= results[0][(expert * 6 + slot) * 4 + f] != 0;
      EXPECT_EQ(filled, expert < 2) << "expert " << expert << " slot " << slot;
    }
  }
  // Every choice is kept, so every weight has a gradient.
  for (double weightGrad : results[3])
    EXPECT_NE(weightGrad, 0);
  runAndCompare("random_routing", -2, 2, /*seed=*/5);
}

//===----------------------------------------------------------------------===//
// Layers
//===----------------------------------------------------------------------===//

TEST_F(CPUCodegenTest, RepeatForwardAndReverse) {
  // A residual tanh layer with a stacked weight operand and a stacked result, run over two
  // instances in both orders (the orders give different results), and a layer with only
  // carried values.
  compile(R"mlir(
    func.func @block(%x: !mt.tensor<[seq=3, hidden=4], f32>,
                     %w: !mt.tensor<[hidden=4, ffn=4], f32>)
        -> (!mt.tensor<[seq=3, hidden=4], f32>, !mt.tensor<[seq=3, ffn=4], f32>)
        attributes {mt.layer} {
      %h = mt.contract %x, %w over [hidden] : !mt.tensor<[seq=3, hidden=4], f32>,
          !mt.tensor<[hidden=4, ffn=4], f32> -> !mt.tensor<[seq=3, ffn=4], f32>
      %t = mt.tanh %h : !mt.tensor<[seq=3, ffn=4], f32>
      %r = mt.rename %t ffn to hidden
          : !mt.tensor<[seq=3, ffn=4], f32> -> !mt.tensor<[seq=3, hidden=4], f32>
      %y = mt.add %x, %r : !mt.tensor<[seq=3, hidden=4], f32>,
          !mt.tensor<[seq=3, hidden=4], f32> -> !mt.tensor<[seq=3, hidden=4], f32>
      return %y, %t : !mt.tensor<[seq=3, hidden=4], f32>, !mt.tensor<[seq=3, ffn=4], f32>
    }
    func.func @forward(%x: !mt.tensor<[seq=3, hidden=4], f32>,
                       %w: !mt.tensor<[layers=2, hidden=4, ffn=4], f32>)
        -> (!mt.tensor<[seq=3, hidden=4], f32>, !mt.tensor<[layers=2, seq=3, ffn=4], f32>) {
      %y, %hs = mt.repeat @block(%x, %w) count 2 {carried = 1 : i64}
          : (!mt.tensor<[seq=3, hidden=4], f32>, !mt.tensor<[layers=2, hidden=4, ffn=4], f32>)
          -> (!mt.tensor<[seq=3, hidden=4], f32>, !mt.tensor<[layers=2, seq=3, ffn=4], f32>)
      return %y, %hs : !mt.tensor<[seq=3, hidden=4], f32>, !mt.tensor<[layers=2, seq=3, ffn=4], f32>
    }
    func.func @reverse(%x: !mt.tensor<[seq=3, hidden=4], f32>,
                       %w: !mt.tensor<[layers=2, hidden=4, ffn=4], f32>)
        -> (!mt.tensor<[seq=3, hidden=4], f32>, !mt.tensor<[layers=2, seq=3, ffn=4], f32>) {
      %y, %hs = mt.repeat @block(%x, %w) count 2 {carried = 1 : i64, reverse}
          : (!mt.tensor<[seq=3, hidden=4], f32>, !mt.tensor<[layers=2, hidden=4, ffn=4], f32>)
          -> (!mt.tensor<[seq=3, hidden=4], f32>, !mt.tensor<[layers=2, seq=3, ffn=4], f32>)
      return %y, %hs : !mt.tensor<[seq=3, hidden=4], f32>, !mt.tensor<[layers=2, seq=3, ffn=4], f32>
    }
    func.func @scale(%x: !mt.tensor<[n=4], f32>, %s: !mt.tensor<[], f32>)
        -> (!mt.tensor<[n=4], f32>, !mt.tensor<[], f32>) attributes {mt.layer} {
      %y = mt.mul %x, %s : !mt.tensor<[n=4], f32>, !mt.tensor<[], f32> -> !mt.tensor<[n=4], f32>
      %t = mt.add %s, %s : !mt.tensor<[], f32>, !mt.tensor<[], f32> -> !mt.tensor<[], f32>
      return %y, %t : !mt.tensor<[n=4], f32>, !mt.tensor<[], f32>
    }
    func.func @carried_only(%x: !mt.tensor<[n=4], f32>, %s: !mt.tensor<[], f32>)
        -> (!mt.tensor<[n=4], f32>, !mt.tensor<[], f32>) {
      %y, %t = mt.repeat @scale(%x, %s) count 3
          : (!mt.tensor<[n=4], f32>, !mt.tensor<[], f32>)
          -> (!mt.tensor<[n=4], f32>, !mt.tensor<[], f32>)
      return %y, %t : !mt.tensor<[n=4], f32>, !mt.tensor<[], f32>
    }
  )mlir");
  std::vector<std::vector<double>> forward = runAndCompare("forward");
  std::vector<std::vector<double>> reverse = runAndCompare("reverse");
  ASSERT_EQ(forward.size(), 2u);
  ASSERT_EQ(reverse.size(), 2u);
  EXPECT_NE(forward[0], reverse[0]);
  // The first call of each direction sees x itself, with instance 0 forward and instance 1
  // in reverse: its stacked results (slice 0 and slice 1) differ.
  std::vector<double> forwardFirst(forward[1].begin(), forward[1].begin() + 12);
  std::vector<double> reverseFirst(reverse[1].begin() + 12, reverse[1].end());
  EXPECT_NE(forwardFirst, reverseFirst);
  std::vector<std::vector<double>> scaled = runAndCompare("carried_only", 0.5, 1.5);
  ASSERT_EQ(scaled.size(), 2u);
}

//===----------------------------------------------------------------------===//
// Whole training steps
//===----------------------------------------------------------------------===//

/// The training step of `examples/<file>` as the backends receive it: the frontend, the
/// training pipeline, mt-decompose and mt-outline-parameters (parameters and optimizer
/// state become arguments and results). Null, with a test failure, on any error.
mlir::OwningOpRef<mlir::ModuleOp> outlinedTrainingStep(mlir::MLIRContext &context,
                                                       llvm::StringRef file) {
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  context.appendDialectRegistry(registry);
  std::string errors;
  mlir::OwningOpRef<mlir::ModuleOp> module = mtc::testing::lowerExample(context, file, errors);
  if (!module) {
    ADD_FAILURE() << "cannot lower " << file.str() << ":\n" << errors;
    return nullptr;
  }
  mlir::PassManager pm(&context);
  buildTrainingPipeline(pm, TrainingPipelineOptions());
  pm.addPass(lowering::createMTDecomposePass());
  pm.addPass(transforms::createMTOutlineParametersPass());
  if (mlir::failed(pm.run(*module))) {
    ADD_FAILURE() << "the passes before codegen failed on " << file.str();
    return nullptr;
  }
  return module;
}

/// Runs `forward_backward` of the outlined training step of `file` compiled and in the
/// interpreter: token ids and labels in [0, vocab), parameters in [-0.5, 0.5), dropout
/// with the Philox masks. The loss and every gradient must agree within 1e-5 of the
/// largest element of each, plus 1e-8 (f32 through two layers, attention and the
/// vocabulary softmax, against float64: the small elements of a gradient are differences
/// of large terms, and gradients that are zero in exact arithmetic, like the key bias's,
/// are f32 rounding noise around 1e-10).
void CPUCodegenTest::expectTrainingStepMatches(llvm::StringRef file, int64_t vocab) {
  mlir::OwningOpRef<mlir::ModuleOp> step = outlinedTrainingStep(context, file);
  ASSERT_TRUE(step);
  llvm::DenseMap<int64_t, double> rates;
  step->walk([&](mt::DropoutOp op) { rates[op.getStream()] = op.getRate().convertToDouble(); });
  // The tensor id holds the site's stream in its low 20 bits (mtc_dropout_tensor_id).
  dropoutKeep = [rates](int64_t tensorId, int64_t element) {
    return dropoutKeeps(tensorId, element, rates.lookup(tensorId & 0xFFFFF));
  };
  // -O1 compiles the whole step several times faster than -O3 and is as exact.
  codegen::CPUCodegenOptions options;
  options.optLevel = 1;
  ASSERT_NO_FATAL_FAILURE(compileModule(std::move(step), options));
  auto range = [&](mt::NamedTensorType type) {
    return mlir::isa<mlir::IntegerType>(type.getElementType())
               ? std::pair(0.0, static_cast<double>(vocab) - 0.6)
               : std::pair(-0.5, 0.5);
  };
  std::vector<std::vector<double>> results = runAndCompareIn(
      "forward_backward", range, /*seed=*/3,
      Tolerance{/*relative=*/1e-5, /*ofTensorMax=*/true, /*absolute=*/1e-8});
  ASSERT_FALSE(results.empty());
  // The loss of random logits over the vocabulary is near log(vocab).
  EXPECT_NEAR(results[0][0], std::log(static_cast<double>(vocab)), 1.0);
}

TEST_F(CPUCodegenTest, WholeTrainingStepGptTiny) {
  expectTrainingStepMatches("gpt-tiny.mtl", /*vocab=*/256);
}

TEST_F(CPUCodegenTest, WholeTrainingStepLlamaGqaTiny) {
  expectTrainingStepMatches("llama-gqa-tiny.mtl", /*vocab=*/256);
}

TEST_F(CPUCodegenTest, WholeTrainingStepMixtralTiny) {
  expectTrainingStepMatches("mixtral-tiny.mtl", /*vocab=*/256);
}

//===----------------------------------------------------------------------===//
// Reductions and contractions
//===----------------------------------------------------------------------===//

TEST_F(CPUCodegenTest, Reductions) {
  compile(R"mlir(
    func.func @reduce(%x: !mt.tensor<[batch=2, seq=3, hidden=8], f32>)
        -> (!mt.tensor<[batch=2, hidden=8], f32>, !mt.tensor<[batch=2, seq=3], f32>,
            !mt.tensor<[seq=3], f32>, !mt.tensor<[], f32>) {
      %s = mt.reduce_sum %x over [seq] : !mt.tensor<[batch=2, seq=3, hidden=8], f32>
          -> !mt.tensor<[batch=2, hidden=8], f32>
      %m = mt.reduce_mean %x over [hidden] : !mt.tensor<[batch=2, seq=3, hidden=8], f32>
          -> !mt.tensor<[batch=2, seq=3], f32>
      %mx = mt.reduce_max %x over [batch, hidden] : !mt.tensor<[batch=2, seq=3, hidden=8], f32>
          -> !mt.tensor<[seq=3], f32>
      %all = mt.reduce_mean %x over [batch, seq, hidden]
          : !mt.tensor<[batch=2, seq=3, hidden=8], f32> -> !mt.tensor<[], f32>
      return %s, %m, %mx, %all : !mt.tensor<[batch=2, hidden=8], f32>,
          !mt.tensor<[batch=2, seq=3], f32>, !mt.tensor<[seq=3], f32>, !mt.tensor<[], f32>
    }
  )mlir");
  runAndCompare("reduce");
}

TEST_F(CPUCodegenTest, ContractionWithBatchDimension) {
  compile(R"mlir(
    func.func @bmm(%a: !mt.tensor<[batch=2, seq=3, hidden=8], f32>,
                   %b: !mt.tensor<[hidden=8, batch=2, ffn=5], f32>)
        -> !mt.tensor<[batch=2, seq=3, ffn=5], f32> {
      %0 = mt.contract %a, %b over [hidden] : !mt.tensor<[batch=2, seq=3, hidden=8], f32>,
          !mt.tensor<[hidden=8, batch=2, ffn=5], f32> -> !mt.tensor<[batch=2, seq=3, ffn=5], f32>
      return %0 : !mt.tensor<[batch=2, seq=3, ffn=5], f32>
    }
    func.func @two_dims(%a: !mt.tensor<[seq=4, heads=2, head_dim=3], f32>,
                        %w: !mt.tensor<[heads=2, head_dim=3, hidden=6], f32>)
        -> !mt.tensor<[seq=4, hidden=6], f32> {
      %0 = mt.contract %a, %w over [heads, head_dim]
          : !mt.tensor<[seq=4, heads=2, head_dim=3], f32>,
            !mt.tensor<[heads=2, head_dim=3, hidden=6], f32> -> !mt.tensor<[seq=4, hidden=6], f32>
      return %0 : !mt.tensor<[seq=4, hidden=6], f32>
    }
  )mlir");
  std::vector<std::vector<double>> bmm = runAndCompare("bmm", -1, 1, /*seed=*/11);
  runAndCompare("two_dims");

  // bmm[b, s, f] = sum_h a[b, s, h] * w[h, b, f], by hand.
  Random random(11);
  std::vector<double> a(2 * 3 * 8), w(8 * 2 * 5);
  for (double &x : a)
    x = static_cast<float>(random.uniform(-1, 1));
  for (double &x : w)
    x = static_cast<float>(random.uniform(-1, 1));
  ASSERT_EQ(bmm.size(), 1u);
  for (int b = 0; b < 2; ++b)
    for (int s = 0; s < 3; ++s)
      for (int f = 0; f < 5; ++f) {
        double sum = 0;
        for (int h = 0; h < 8; ++h)
          sum += a[(b * 3 + s) * 8 + h] * w[(h * 2 + b) * 5 + f];
        EXPECT_NEAR(bmm[0][(b * 3 + s) * 5 + f], sum, 1e-5);
      }
}

TEST_F(CPUCodegenTest, FusedMLPBlock) {
  // gelu(x w + b), then its mean: several kernels and intermediate buffers in one function.
  compile(R"mlir(
    func.func @mlp(%x: !mt.tensor<[batch=2, seq=4, hidden=8], f32>,
                   %w: !mt.tensor<[hidden=8, ffn=16], f32>, %b: !mt.tensor<[ffn=16], f32>)
        -> (!mt.tensor<[batch=2, seq=4, ffn=16], f32>, !mt.tensor<[], f32>) {
      %xw = mt.contract %x, %w over [hidden] : !mt.tensor<[batch=2, seq=4, hidden=8], f32>,
          !mt.tensor<[hidden=8, ffn=16], f32> -> !mt.tensor<[batch=2, seq=4, ffn=16], f32>
      %h = mt.add %xw, %b : !mt.tensor<[batch=2, seq=4, ffn=16], f32>,
          !mt.tensor<[ffn=16], f32> -> !mt.tensor<[batch=2, seq=4, ffn=16], f32>
      %g = mt.gelu %h : !mt.tensor<[batch=2, seq=4, ffn=16], f32>
      %m = mt.reduce_mean %g over [batch, seq, ffn] : !mt.tensor<[batch=2, seq=4, ffn=16], f32>
          -> !mt.tensor<[], f32>
      return %g, %m : !mt.tensor<[batch=2, seq=4, ffn=16], f32>, !mt.tensor<[], f32>
    }
  )mlir");
  runAndCompare("mlp", -1, 1);
}

TEST_F(CPUCodegenTest, IntegerElementwise) {
  compile(R"mlir(
    func.func @ints(%x: !mt.tensor<[a=3, b=4], i32>, %y: !mt.tensor<[b=4], i32>)
        -> (!mt.tensor<[a=3, b=4], i32>, !mt.tensor<[a=3, b=4], f32>) {
      %0 = mt.mul %x, %y : !mt.tensor<[a=3, b=4], i32>, !mt.tensor<[b=4], i32>
          -> !mt.tensor<[a=3, b=4], i32>
      %1 = mt.sub %0, %x : !mt.tensor<[a=3, b=4], i32>, !mt.tensor<[a=3, b=4], i32>
          -> !mt.tensor<[a=3, b=4], i32>
      %2 = mt.max %1, %y : !mt.tensor<[a=3, b=4], i32>, !mt.tensor<[b=4], i32>
          -> !mt.tensor<[a=3, b=4], i32>
      %3 = mt.add %2, %x : !mt.tensor<[a=3, b=4], i32>, !mt.tensor<[a=3, b=4], i32>
          -> !mt.tensor<[a=3, b=4], i32>
      %4 = mt.cast %3 : !mt.tensor<[a=3, b=4], i32> to !mt.tensor<[a=3, b=4], f32>
      return %3, %4 : !mt.tensor<[a=3, b=4], i32>, !mt.tensor<[a=3, b=4], f32>
    }
  )mlir");
  runAndCompare("ints", -20, 20);
}

TEST_F(CPUCodegenTest, SizesThatAreNotVectorMultiples) {
  // Odd sizes exercise the vectorised loops' remainders.
  compile(R"mlir(
    func.func @odd(%x: !mt.tensor<[rows=37, cols=131], f32>, %b: !mt.tensor<[cols=131], f32>,
                   %w: !mt.tensor<[cols=131, out=5], f32>)
        -> (!mt.tensor<[rows=37], f32>, !mt.tensor<[rows=37, out=5], f32>) {
      %0 = mt.add %x, %b : !mt.tensor<[rows=37, cols=131], f32>, !mt.tensor<[cols=131], f32>
          -> !mt.tensor<[rows=37, cols=131], f32>
      %1 = mt.tanh %0 : !mt.tensor<[rows=37, cols=131], f32>
      %2 = mt.reduce_sum %1 over [cols] : !mt.tensor<[rows=37, cols=131], f32>
          -> !mt.tensor<[rows=37], f32>
      %3 = mt.contract %1, %w over [cols] : !mt.tensor<[rows=37, cols=131], f32>,
          !mt.tensor<[cols=131, out=5], f32> -> !mt.tensor<[rows=37, out=5], f32>
      return %2, %3 : !mt.tensor<[rows=37], f32>, !mt.tensor<[rows=37, out=5], f32>
    }
  )mlir");
  // Positive inputs: no cancellation in the 131-term sums, whose f32 error is then well
  // within 1e-5 relative (sequential f32 sums against float64).
  runAndCompare("odd", 0, 1);
}

TEST_F(CPUCodegenTest, HalfPrecision) {
  // f16 and bf16 arithmetic; their transcendental functions are computed in f32.
  compile(R"mlir(
    func.func @half(%x: !mt.tensor<[a=4, b=8], f16>, %y: !mt.tensor<[b=8], f16>)
        -> (!mt.tensor<[a=4, b=8], f16>, !mt.tensor<[a=4], f16>) {
      %0 = mt.mul %x, %y : !mt.tensor<[a=4, b=8], f16>, !mt.tensor<[b=8], f16>
          -> !mt.tensor<[a=4, b=8], f16>
      %1 = mt.gelu %0 approximate : !mt.tensor<[a=4, b=8], f16>
      %2 = mt.reduce_max %1 over [b] : !mt.tensor<[a=4, b=8], f16> -> !mt.tensor<[a=4], f16>
      return %1, %2 : !mt.tensor<[a=4, b=8], f16>, !mt.tensor<[a=4], f16>
    }
    func.func @brain(%x: !mt.tensor<[a=16], bf16>) -> (!mt.tensor<[a=16], bf16>,
                                                       !mt.tensor<[a=16], f32>) {
      %0 = mt.silu %x : !mt.tensor<[a=16], bf16>
      %1 = mt.cast %0 : !mt.tensor<[a=16], bf16> to !mt.tensor<[a=16], f32>
      return %0, %1 : !mt.tensor<[a=16], bf16>, !mt.tensor<[a=16], f32>
    }
  )mlir");
  runAndCompare("half");
  runAndCompare("brain");
}

TEST_F(CPUCodegenTest, Float64) {
  compile(R"mlir(
    func.func @f(%x: !mt.tensor<[a=4, b=3], f64>, %y: !mt.tensor<[b=3], f64>)
        -> !mt.tensor<[a=4], f64> {
      %0 = mt.mul %x, %y : !mt.tensor<[a=4, b=3], f64>, !mt.tensor<[b=3], f64>
          -> !mt.tensor<[a=4, b=3], f64>
      %1 = mt.gelu %0 : !mt.tensor<[a=4, b=3], f64>
      %2 = mt.reduce_sum %1 over [b] : !mt.tensor<[a=4, b=3], f64> -> !mt.tensor<[a=4], f64>
      return %2 : !mt.tensor<[a=4], f64>
    }
  )mlir");
  runAndCompare("f");
}

} // namespace
