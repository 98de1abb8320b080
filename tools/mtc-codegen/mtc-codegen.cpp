//===- mtc-codegen.cpp - mt functions to an x86 shared object or PTX ------===//
//
//   mtc-codegen kernels.mlir --target=x86 -o kernels.so
//   mtc-codegen kernels.mlir --target=sm_90 -o kernels.ptx
//   mtc-codegen kernels.mlir --emit=linalg
//
// Runs mtc-to-linalg-pipeline on every function of the input, then the chosen backend:
// for x86 mtc-cpu-pipeline and compiler/codegen/CPU/CPUCodegen.h, for sm_NN
// compiler/codegen/GPU/GPUCodegen.h (compiler/pipelines/Pipelines.h). Input already on
// builtin tensors and linalg passes through mt-to-linalg unchanged.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CPU/CPUCodegen.h"
#include "compiler/codegen/GPU/GPUCodegen.h"
#include "compiler/pipelines/Pipelines.h"
#include "compiler/registration/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

namespace {

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input.mlir>"), cl::init("-"));

cl::opt<std::string> outputFile("o", cl::desc("Output file ('-' for stdout; PTX and IR only)"),
                                cl::value_desc("path"), cl::init("-"));

cl::opt<std::string> target("target",
                            cl::desc("x86 (a shared object) or an NVIDIA architecture "
                                     "such as sm_80 or sm_90 (PTX)"),
                            cl::value_desc("x86|sm_NN"), cl::init("x86"));

enum class EmitKind { Binary, Linalg };
cl::opt<EmitKind> emitKind(
    "emit", cl::desc("What to produce"), cl::init(EmitKind::Binary),
    cl::values(clEnumValN(EmitKind::Binary, "binary",
                          "the shared object (x86) or the PTX (sm_NN); the default"),
               clEnumValN(EmitKind::Linalg, "linalg", "the module after mt-to-linalg")));

cl::opt<std::string> cpu("cpu",
                         cl::desc("x86 target CPU: native (default) or an LLVM CPU name "
                                  "such as x86-64-v3"),
                         cl::init("native"));

cl::opt<int64_t> blockSize("block-size", cl::desc("GPU threads per block (default 256)"),
                           cl::init(256));

int fail(const Twine &message) {
  WithColor::error(errs(), "mtc-codegen") << message << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "mtc kernel code generator\n");

  mlir::DialectRegistry registry;
  mtc::registerAllDialects(registry);
  mlir::MLIRContext context(registry);

  std::string error;
  std::unique_ptr<MemoryBuffer> input = mlir::openInputFile(inputFile, &error);
  if (!input)
    return fail(error);
  SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), SMLoc());
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  mlir::PassManager pm(&context);
  mtc::buildToLinalgPipeline(pm);
  if (mlir::failed(pm.run(*module)))
    return 1;

  bool isX86 = target == "x86";
  if (emitKind == EmitKind::Linalg || !isX86) {
    std::string text;
    if (emitKind == EmitKind::Linalg) {
      raw_string_ostream os(text);
      module->print(os);
    } else {
      mtc::codegen::GPUCodegenOptions options;
      options.blockSize = blockSize;
      Expected<std::string> ptx = mtc::codegen::compileToPTX(*module, target, options);
      if (!ptx)
        return fail(toString(ptx.takeError()));
      text = std::move(*ptx);
    }
    std::unique_ptr<ToolOutputFile> output = mlir::openOutputFile(outputFile, &error);
    if (!output)
      return fail(error);
    output->os() << text;
    output->keep();
    return 0;
  }

  if (outputFile == "-")
    return fail("--target=x86 writes a shared object: give its path with -o");
  mlir::PassManager cpuPipeline(&context);
  mtc::buildCPUPipeline(cpuPipeline);
  if (mlir::failed(cpuPipeline.run(*module)))
    return 1;
  mtc::codegen::CPUCodegenOptions options;
  options.cpu = cpu;
  if (Error err = mtc::codegen::compileToSharedObject(*module, outputFile, options))
    return fail(toString(std::move(err)));
  return 0;
}
