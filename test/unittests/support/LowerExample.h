//===- LowerExample.h - an example model through the frontend ---*- C++ -*-===//
//
// Tests that run whole models (interpreter, decomposition, outlining) start from the
// examples/ files lowered to `mt` by the frontend library, as `mtc compile --emit=mt` does.
// Header-only: the including test links MTCFrontend and defines MTC_SOURCE_DIR.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_TEST_UNITTESTS_SUPPORT_LOWEREXAMPLE_H
#define MTC_TEST_UNITTESTS_SUPPORT_LOWEREXAMPLE_H

#include "frontend/Diagnostics.h"
#include "frontend/MLIRGen.h"
#include "frontend/Parser.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mtc::testing {

/// `examples/<file>` lowered to mt in `context`; null with the diagnostics in `errors`.
inline mlir::OwningOpRef<mlir::ModuleOp>
lowerExample(mlir::MLIRContext &context, llvm::StringRef file, std::string &errors) {
  std::string path = std::string(MTC_SOURCE_DIR "/examples/") + file.str();
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    errors = "cannot read " + path;
    return nullptr;
  }
  llvm::SourceMgr sourceMgr;
  unsigned bufferId = sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  llvm::raw_string_ostream os(errors);
  frontend::Diagnostics diags(sourceMgr, bufferId, os);
  std::unique_ptr<frontend::Module> ast = frontend::parseModule(sourceMgr, bufferId, diags);
  if (!ast || diags.numErrors() != 0)
    return nullptr;
  return frontend::lowerToMT(*ast, context, diags);
}

} // namespace mtc::testing

#endif // MTC_TEST_UNITTESTS_SUPPORT_LOWEREXAMPLE_H
