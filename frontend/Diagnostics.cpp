//===- Diagnostics.cpp - Error reporting for .mtl sources -----------------===//

#include "frontend/Diagnostics.h"

#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>

using namespace mtc::frontend;

Diagnostics::Diagnostics(llvm::SourceMgr &sourceMgr, unsigned bufferId, llvm::raw_ostream &os)
    : sourceMgr(sourceMgr), bufferId(bufferId), os(os) {}

llvm::StringRef Diagnostics::getBuffer() const {
  return sourceMgr.getMemoryBuffer(bufferId)->getBuffer();
}

llvm::SMLoc Diagnostics::toSMLoc(SourceLoc loc) const {
  // Clamp rather than assert: a location is user-derived data, and the end of the buffer is
  // a valid place to point at (SourceMgr knows it as the last line).
  llvm::StringRef buffer = getBuffer();
  size_t offset = std::min(loc.offset, buffer.size());
  return llvm::SMLoc::getFromPointer(buffer.data() + offset);
}

llvm::SMRange Diagnostics::toSMRange(SourceRange range) const {
  llvm::SMLoc begin = toSMLoc(range.begin);
  llvm::SMLoc end = toSMLoc(range.end);
  if (end.getPointer() < begin.getPointer())
    end = begin;
  return llvm::SMRange(begin, end);
}

void Diagnostics::print(SourceRange range, llvm::SourceMgr::DiagKind kind, const llvm::Twine &msg) {
  llvm::SMRange smRange = toSMRange(range);
  // An empty range would print a lone `~`-less caret anyway; passing it would make SourceMgr
  // draw nothing useful, so only real spans are underlined.
  llvm::SmallVector<llvm::SMRange, 1> ranges;
  if (smRange.Start.getPointer() != smRange.End.getPointer())
    ranges.push_back(smRange);
  sourceMgr.PrintMessage(os, smRange.Start, kind, msg, ranges);
}

void Diagnostics::error(SourceRange range, const llvm::Twine &msg) {
  ++errorCount;
  if (errorCount <= kErrorLimit) {
    print(range, llvm::SourceMgr::DK_Error, msg);
    lastErrorPrinted = true;
    return;
  }
  lastErrorPrinted = false;
  if (errorCount == kErrorLimit + 1)
    print(SourceRange{range.begin, range.begin}, llvm::SourceMgr::DK_Error,
          "too many errors emitted, stopping now");
}

void Diagnostics::note(SourceRange range, const llvm::Twine &msg) {
  if (!lastErrorPrinted)
    return;
  print(range, llvm::SourceMgr::DK_Note, msg);
}
