//===- GPUCodegenTest.cpp - the PTX backend's contract --------------------===//
//
// What compileToPTX promises without a GPU: PTX for each requested chip from one module,
// the input module left unchanged, one kernel per linalg op with bare-pointer parameters,
// and clear errors. (ptxas assembles the PTX in test/compiler/codegen/GPU/ptx.mlir.)
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CPU/CPUCodegen.h"
#include "compiler/codegen/GPU/GPUCodegen.h"
#include "compiler/pipelines/Pipelines.h"
#include "compiler/registration/Registration.h"

#include "dialects/mt/IR/MTOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "compiler/codegen/GPU/DropoutKeep.h"
#include "runtime/support/Philox.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <random>
#include <string>

using namespace mtc;

namespace {

/// Arithmetic only, so that no libdevice (no CUDA toolkit) is needed.
constexpr llvm::StringLiteral kSource = R"mlir(
  func.func @step(%x: !mt.tensor<[rows=3, cols=700], f32>, %g: !mt.tensor<[cols=700], f32>)
      -> (!mt.tensor<[rows=3, cols=700], f32>, !mt.tensor<[rows=3], f32>) {
    %0 = mt.mul %x, %g : !mt.tensor<[rows=3, cols=700], f32>, !mt.tensor<[cols=700], f32>
        -> !mt.tensor<[rows=3, cols=700], f32>
    %1 = mt.reduce_sum %0 over [cols] : !mt.tensor<[rows=3, cols=700], f32>
        -> !mt.tensor<[rows=3], f32>
    return %0, %1 : !mt.tensor<[rows=3, cols=700], f32>, !mt.tensor<[rows=3], f32>
  }
)mlir";

class GPUCodegenTest : public ::testing::Test {
protected:
  GPUCodegenTest() { context.loadDialect<mt::MTDialect, mlir::func::FuncDialect>(); }

  mlir::OwningOpRef<mlir::ModuleOp> lowered() {
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(kSource, &context);
    EXPECT_TRUE(module);
    mlir::PassManager pm(&context);
    buildToLinalgPipeline(pm);
    EXPECT_TRUE(module && mlir::succeeded(pm.run(*module)));
    return module;
  }

  static std::string print(mlir::ModuleOp module) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module.print(os);
    return text;
  }

  mlir::MLIRContext context;
};

TEST_F(GPUCodegenTest, OneModuleToBothChipsAndToX86) {
  mlir::OwningOpRef<mlir::ModuleOp> module = lowered();
  ASSERT_TRUE(module);
  std::string before = print(*module);

  for (llvm::StringRef chip : {"sm_80", "sm_90"}) {
    llvm::Expected<std::string> ptx = codegen::compileToPTX(*module, chip);
    ASSERT_TRUE(static_cast<bool>(ptx)) << llvm::toString(ptx.takeError());
    EXPECT_NE(ptx->find(".version 8.0"), std::string::npos);
    EXPECT_NE(ptx->find((".target " + chip).str()), std::string::npos);
    // The product (2100 elements: 9 blocks of 256 threads) and the row sums' fill and
    // reduction (3 threads each).
    EXPECT_NE(ptx->find(".visible .entry step_kernel_0(\n"
                        "\t.param .u64 .ptr .align 1 step_kernel_0_param_0,\n"
                        "\t.param .u64 .ptr .align 1 step_kernel_0_param_1,\n"
                        "\t.param .u64 .ptr .align 1 step_kernel_0_param_2\n"
                        ")\n"
                        ".maxntid 256, 1, 1"),
              std::string::npos)
        << *ptx;
    EXPECT_NE(ptx->find(".entry step_kernel_1("), std::string::npos);
    EXPECT_NE(ptx->find(".entry step_kernel_2("), std::string::npos);
    EXPECT_EQ(ptx->find(".entry step_kernel_3("), std::string::npos);
    EXPECT_NE(ptx->find(".maxntid 3, 1, 1"), std::string::npos);
  }
  EXPECT_EQ(print(*module), before);
  // The CPU backend accepts the same module.
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  context.appendDialectRegistry(registry);
  mlir::PassManager pm(&context);
  buildCPUPipeline(pm);
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  llvm::Expected<std::string> object = codegen::compileToObject(*module);
  ASSERT_TRUE(static_cast<bool>(object)) << llvm::toString(object.takeError());
  EXPECT_EQ(object->substr(0, 4), "\x7f" "ELF");
}

TEST_F(GPUCodegenTest, BlockSizeOption) {
  mlir::OwningOpRef<mlir::ModuleOp> module = lowered();
  ASSERT_TRUE(module);
  codegen::GPUCodegenOptions options;
  options.blockSize = 128;
  llvm::Expected<std::string> ptx = codegen::compileToPTX(*module, "sm_90", options);
  ASSERT_TRUE(static_cast<bool>(ptx)) << llvm::toString(ptx.takeError());
  EXPECT_NE(ptx->find(".maxntid 128, 1, 1"), std::string::npos);
  EXPECT_EQ(ptx->find(".maxntid 256, 1, 1"), std::string::npos);
}

TEST_F(GPUCodegenTest, Errors) {
  mlir::OwningOpRef<mlir::ModuleOp> module = lowered();
  ASSERT_TRUE(module);
  llvm::Expected<std::string> badChip = codegen::compileToPTX(*module, "gfx90a");
  ASSERT_FALSE(static_cast<bool>(badChip));
  EXPECT_EQ(llvm::toString(badChip.takeError()),
            "unknown CUDA architecture 'gfx90a'; expected one of sm_70, sm_75, sm_80, sm_86, "
            "sm_87, sm_89, sm_90");
  llvm::Expected<codegen::GPUStepKernels> badStepChip =
      codegen::compileStepKernels(*module, {"sm_80", "sm_100"});
  ASSERT_FALSE(static_cast<bool>(badStepChip));
  EXPECT_NE(llvm::toString(badStepChip.takeError()).find("'sm_100'"), std::string::npos);

  codegen::GPUCodegenOptions options;
  options.blockSize = 2048;
  llvm::Expected<std::string> badBlock = codegen::compileToPTX(*module, "sm_90", options);
  ASSERT_FALSE(static_cast<bool>(badBlock));
  EXPECT_NE(llvm::toString(badBlock.takeError()).find("between 1 and 1024"), std::string::npos);
}

/// The GPU kernels' dropout decision (DropoutKeep.cpp, arith ops) decides every element as
/// the runtime's Philox (runtime/support/Philox.h) does: compiled here for the CPU from the
/// same ops, under another name, and compared on many counters and keep probabilities.
TEST_F(GPUCodegenTest, DropoutDecisionMatchesPhilox) {
  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadDialect<mlir::gpu::GPUDialect, mlir::arith::ArithDialect, mlir::LLVM::LLVMDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    gpu.module @kernels {
      func.func private @mtc_dropout_keep_element(i64, i32, i64, i32, f32) -> i32
    }
  )mlir", &context);
  ASSERT_TRUE(module);
  auto kernels = *module->getOps<mlir::gpu::GPUModuleOp>().begin();
  ASSERT_TRUE(mlir::succeeded(codegen::defineDropoutKeep(kernels)));
  auto keep = *kernels.getOps<mlir::func::FuncOp>().begin();
  ASSERT_FALSE(keep.isExternal());

  // The definition on the host as `gpu_dropout_keep` (the CPU object links its own
  // mtc_dropout_keep_element).
  mlir::OwningOpRef<mlir::ModuleOp> host = mlir::ModuleOp::create(mlir::UnknownLoc::get(&context));
  auto copy = llvm::cast<mlir::func::FuncOp>(keep->clone());
  copy.setName("gpu_dropout_keep");
  copy.setPublic();
  host->push_back(copy);
  mlir::PassManager pm(&context);
  pm.addPass(mlir::createArithToLLVMConversionPass());
  pm.addPass(mlir::createConvertFuncToLLVMPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
  ASSERT_TRUE(mlir::succeeded(pm.run(*host)));
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("dropout-keep", "so", path));
  llvm::scope_exit remove([&] { llvm::sys::fs::remove(path); });
  llvm::Error error = codegen::compileToSharedObject(*host, path);
  ASSERT_FALSE(static_cast<bool>(error)) << llvm::toString(std::move(error));
  void *library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << ::dlerror();
  llvm::scope_exit close([&] { ::dlclose(library); });
  using KeepFunction = int32_t (*)(uint64_t, uint32_t, uint64_t, uint32_t, float);
  auto compiled = reinterpret_cast<KeepFunction>(::dlsym(library, "gpu_dropout_keep"));
  ASSERT_NE(compiled, nullptr) << ::dlerror();

  std::mt19937_64 random(7);
  const float probabilities[] = {0.0f, 0.1f, 0.5f, 0.9f, 1.0f};
  int kept = 0;
  for (int i = 0; i < 20000; ++i) {
    uint64_t seed = random(), index = random();
    auto tensor = static_cast<uint32_t>(random()), step = static_cast<uint32_t>(random());
    float probability = probabilities[i % 5];
    int32_t expected = mtc_dropout_keep(seed, tensor, index, step, probability);
    ASSERT_EQ(compiled(seed, tensor, index, step, probability), expected)
        << "seed " << seed << " tensor " << tensor << " index " << index << " step " << step
        << " keep " << probability;
    kept += expected;
  }
  // Both outcomes were compared: 0.1 to 0.9 keep some elements and drop others.
  EXPECT_GT(kept, 4000);
  EXPECT_LT(kept, 16000);
}

} // namespace
