//===- Diagnostics.h - Error reporting for .mtl sources ---------*- C++ -*-===//
//
// Every error the frontend reports about a .mtl file goes through this class, so that they
// all look like LLVM's: `file:line:col: error: message`, the source line, and a caret with
// `~` under the offending span. Formatting is delegated to llvm::SourceMgr so the output is
// exactly what clang and mlir-opt users are used to.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_FRONTEND_DIAGNOSTICS_H
#define MTC_FRONTEND_DIAGNOSTICS_H

#include "frontend/AST.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

namespace mtc::frontend {

class Diagnostics {
public:
  /// Errors past this many are counted but not printed; the first suppressed one prints a
  /// single "too many errors emitted, stopping now" instead, so that a binary file or a
  /// runaway cascade does not flood the terminal.
  static constexpr unsigned kErrorLimit = 20;

  Diagnostics(llvm::SourceMgr &sourceMgr, unsigned bufferId, llvm::raw_ostream &os = llvm::errs());

  /// Reports an error at `range` (caret at its begin, `~` under the rest).
  void error(SourceRange range, const llvm::Twine &msg);
  /// Attaches a note to the last error; dropped when that error was suppressed.
  void note(SourceRange range, const llvm::Twine &msg);

  /// All errors reported so far, including those past the limit that were not printed.
  unsigned numErrors() const { return errorCount; }
  /// True once the error limit has been passed: callers may stop early.
  bool reachedErrorLimit() const { return errorCount > kErrorLimit; }

  llvm::SMLoc toSMLoc(SourceLoc loc) const;
  llvm::SMRange toSMRange(SourceRange range) const;

  llvm::SourceMgr &getSourceMgr() const { return sourceMgr; }
  unsigned getBufferId() const { return bufferId; }
  /// The text of the diagnosed buffer (what the lexer reads).
  llvm::StringRef getBuffer() const;

private:
  void print(SourceRange range, llvm::SourceMgr::DiagKind kind, const llvm::Twine &msg);

  llvm::SourceMgr &sourceMgr;
  unsigned bufferId;
  llvm::raw_ostream &os;
  unsigned errorCount = 0;
  bool lastErrorPrinted = false;
};

} // namespace mtc::frontend

#endif // MTC_FRONTEND_DIAGNOSTICS_H
