//===- FrontendFuzzer.cpp - libFuzzer target for the whole .mtl frontend ---===//
//
// What `mtc compile` does with a .mtl file before its passes run: parse, check and lower to
// `mt` (MLIRGen, the builtins, the train {} and parallel {} settings) and verify the module.
// The contract checked here is the one users rely on: every input either yields a verified
// module and no error, or at least one .mtl error and no module. A crash, a sanitizer report,
// a module without errors that the verifier rejects (the checks missed a rule, and users would
// see an op's name instead of a .mtl error), or errors with a module traps. See
// docs/fuzzing.md.
//
//===----------------------------------------------------------------------===//

#include "frontend/Diagnostics.h"
#include "frontend/MLIRGen.h"
#include "frontend/Parser.h"

#include "dialects/mt/IR/MTDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>

using namespace mtc::frontend;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::SourceMgr sourceMgr;
  llvm::StringRef input(reinterpret_cast<const char *>(data), size);
  unsigned bufferId = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(input, "fuzz.mtl"), llvm::SMLoc());
  Diagnostics diags(sourceMgr, bufferId, llvm::nulls());
  std::unique_ptr<Module> ast = parseModule(sourceMgr, bufferId, diags);
  if (!ast)
    __builtin_trap();
  // mtc stops after parse errors, so lowering only ever sees error-free ASTs.
  if (diags.numErrors() != 0)
    return 0;

  // A fresh context per input, as mtc has: one shared over millions of inputs would keep every
  // uniqued name and type the fuzzer ever made up.
  mlir::DialectRegistry registry;
  registry.insert<mtc::mt::MTDialect, mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  context.printOpOnDiagnostic(false);
  unsigned mlirErrors = 0;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Error)
      ++mlirErrors;
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module = lowerToMT(*ast, context, diags);
  bool hadErrors = diags.numErrors() != 0;
  if (module.get() == nullptr) {
    // No module: there must be a .mtl error explaining why, not only the verifier's message.
    if (!hadErrors)
      __builtin_trap();
    return 0;
  }
  if (hadErrors || mlirErrors != 0 || mlir::failed(mlir::verify(*module)))
    __builtin_trap();
  // The printer sees every attribute and type MLIRGen made (what --emit=mt prints).
  module->print(llvm::nulls());
  return 0;
}
