//===- DiagnosticCollector.h - diagnostics of a backend step as an Error -*- C++ -*-===//
//
// The backends return llvm::Error from their in-process steps (a pass pipeline run, the
// translation to LLVM IR): this collects the diagnostics emitted meanwhile, notes included,
// so the error says what went wrong where.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_CODEGEN_COMMON_DIAGNOSTICCOLLECTOR_H
#define MTC_COMPILER_CODEGEN_COMMON_DIAGNOSTICCOLLECTOR_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mtc::codegen {

class DiagnosticCollector {
public:
  explicit DiagnosticCollector(mlir::MLIRContext *context)
      : handler(context, [this](mlir::Diagnostic &diag) {
          llvm::raw_string_ostream os(text);
          os << diag.getLocation() << ": " << diag << "\n";
          for (const mlir::Diagnostic &note : diag.getNotes())
            os << note.getLocation() << ": note: " << note << "\n";
          return mlir::success();
        }) {}

  /// `what`, then every diagnostic collected so far.
  llvm::Error error(const llvm::Twine &what) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), what + ":\n" + text);
  }

private:
  std::string text;
  mlir::ScopedDiagnosticHandler handler;
};

} // namespace mtc::codegen

#endif // MTC_COMPILER_CODEGEN_COMMON_DIAGNOSTICCOLLECTOR_H
