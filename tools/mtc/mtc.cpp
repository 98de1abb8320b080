//===- mtc.cpp - the mtc compiler driver ----------------------------------===//
//
// `mtc compile model.mtl`: parse, check and lower a .mtl model to the `mt` dialect, and
// print it or its statistics. Later stages (autodiff, sharding, pipelining, codegen, the
// plan) hang off the same subcommand.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/ModelStats.h"
#include "compiler/registration/Registration.h"
#include "frontend/Diagnostics.h"
#include "frontend/MLIRGen.h"
#include "frontend/Parser.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

namespace {

cl::OptionCategory compileCategory("Compile options");

cl::SubCommand compileCommand("compile", "Compile a .mtl model");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mtl>"), cl::Required,
                               cl::sub(compileCommand), cl::cat(compileCategory));

cl::opt<std::string> outputFile("o", cl::desc("Output file ('-' for stdout)"),
                                cl::value_desc("path"), cl::init("-"), cl::sub(compileCommand),
                                cl::cat(compileCategory));

enum class EmitKind { MT };
cl::opt<EmitKind> emitKind(
    "emit", cl::desc("What to write to the output"), cl::init(EmitKind::MT),
    cl::values(clEnumValN(EmitKind::MT, "mt", "the global graph in the mt dialect")),
    cl::sub(compileCommand), cl::cat(compileCategory));

cl::opt<bool> printStats("stats",
                         cl::desc("Print parameter counts per tensor and in total, and FLOPs "
                                  "per token, instead of the IR"),
                         cl::sub(compileCommand), cl::cat(compileCategory));

cl::opt<bool> debugInfo("mlir-print-debuginfo",
                        cl::desc("Print source locations (file:line:col) on every op"),
                        cl::sub(compileCommand), cl::cat(compileCategory));

int compile() {
  std::string errorMessage;
  std::unique_ptr<MemoryBuffer> input = mlir::openInputFile(inputFile, &errorMessage);
  if (!input) {
    WithColor::error(errs(), "mtc") << errorMessage << "\n";
    return 1;
  }
  SourceMgr sourceMgr;
  unsigned bufferId = sourceMgr.AddNewSourceBuffer(std::move(input), SMLoc());
  mtc::frontend::Diagnostics diags(sourceMgr, bufferId);

  std::unique_ptr<mtc::frontend::Module> ast =
      mtc::frontend::parseModule(sourceMgr, bufferId, diags);
  if (!ast || diags.numErrors() != 0)
    return 1;

  mlir::DialectRegistry registry;
  mtc::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  // Verifier failures (a frontend bug, not a user error) still print as file:line:col.
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  mlir::OwningOpRef<mlir::ModuleOp> module = mtc::frontend::lowerToMT(*ast, context, diags);
  if (!module)
    return 1;

  std::unique_ptr<ToolOutputFile> output = mlir::openOutputFile(outputFile, &errorMessage);
  if (!output) {
    WithColor::error(errs(), "mtc") << errorMessage << "\n";
    return 1;
  }
  if (printStats) {
    FailureOr<mtc::ModelStats> stats = mtc::computeModelStats(*module);
    if (failed(stats))
      return 1;
    mtc::printModelStats(*stats, output->os());
  } else {
    mlir::OpPrintingFlags flags;
    if (debugInfo)
      flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
    module->print(output->os(), flags);
  }
  output->keep();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "mtc " << MTC_VERSION << " (LLVM/MLIR " << LLVM_VERSION_STRING << ")\n";
  });
  cl::HideUnrelatedOptions(compileCategory, compileCommand);
  cl::HideUnrelatedOptions(compileCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "mtc: compiler for parallel transformer training\n\n"
      "  Compiles a model written in the .mtl language (docs/dsl.md) to the mt dialect.\n\n"
      "  mtc compile model.mtl [--emit=mt] [-o out.mlir]   print the global graph\n"
      "  mtc compile model.mtl --stats                     parameter counts and FLOPs\n");
  if (compileCommand)
    return compile();
  errs() << "mtc: no subcommand given; see 'mtc --help'\n";
  return 1;
}
