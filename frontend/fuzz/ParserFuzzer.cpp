//===- ParserFuzzer.cpp - libFuzzer target for the .mtl parser ------------===//
//
// Feeds arbitrary bytes to the lexer and parser (diagnostics printed to a null stream, so the
// SourceMgr formatting path is exercised too) and then checks invariants of the returned
// AST that later passes rely on: every source range lies inside the buffer with begin <= end,
// no kept expression is null, and expression trees respect the nesting limit. A violation
// traps, which libFuzzer records as a crash. See docs/fuzzing.md.
//
//===----------------------------------------------------------------------===//

#include "frontend/AST.h"
#include "frontend/Diagnostics.h"
#include "frontend/Parser.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>

using namespace mtc::frontend;

namespace {

struct Checker {
  size_t bufferSize;
  bool hadErrors;

  void check(bool condition) {
    if (!condition)
      __builtin_trap();
  }

  void range(const SourceRange &r) {
    check(r.begin.offset <= r.end.offset);
    check(r.end.offset <= bufferSize);
    check(r.begin.line >= 1 && r.begin.col >= 1);
  }

  void expr(const ExprPtr &e, unsigned depth) {
    check(e != nullptr);
    check(depth <= kMaxExprNesting);
    range(e->range);
    switch (e->kind) {
    case Expr::Kind::Unary:
      expr(e->lhs, depth + 1);
      break;
    case Expr::Kind::Binary:
      expr(e->lhs, depth + 1);
      expr(e->rhs, depth + 1);
      break;
    case Expr::Kind::Repeat:
      expr(e->lhs, depth + 1);
      [[fallthrough]];
    case Expr::Kind::Call:
    case Expr::Kind::Tuple:
      for (const ExprPtr &arg : e->args)
        expr(arg, depth + 1);
      for (const KeywordArg &kwarg : e->kwargs) {
        range(kwarg.nameRange);
        expr(kwarg.value, depth + 1);
      }
      break;
    case Expr::Kind::Number:
    case Expr::Kind::Name:
      break;
    }
  }

  void sig(const TensorSig &s) {
    check(s.dims.size() == s.dimRanges.size());
    range(s.range);
  }

  void fn(const FnDecl &f) {
    range(f.range);
    for (const FnArg &arg : f.args)
      sig(arg.sig);
    check(f.returnsLoss == f.results.empty());
    for (const Stmt &stmt : f.body) {
      range(stmt.range);
      check(stmt.targets.size() == stmt.targetRanges.size());
      check(stmt.kind == Stmt::Kind::Return || !stmt.targets.empty());
      expr(stmt.value, 1);
    }
  }

  void param(const ParamDecl &p) {
    range(p.range);
    sig(p.sig);
    if (p.init)
      for (const ExprPtr &arg : p.init->args)
        expr(arg, 1);
  }

  void module(const Module &m) {
    for (const Binding &b : m.dims)
      expr(b.value, 1);
    for (const ModelDecl &model : m.models) {
      range(model.range);
      for (const Binding &b : model.args)
        expr(b.value, 1);
      for (const ParamDecl &p : model.params)
        param(p);
      for (const LayerDecl &layer : model.layers) {
        range(layer.range);
        for (const ParamDecl &p : layer.params)
          param(p);
        for (const FnDecl &f : layer.fns)
          fn(f);
      }
      for (const FnDecl &f : model.fns)
        fn(f);
    }
    for (const std::optional<ConfigBlock> *block : {&m.train, &m.parallel}) {
      if (!*block)
        continue;
      range((*block)->range);
      for (const ConfigEntry &entry : (*block)->entries) {
        range(entry.range);
        check(entry.layout.size() == entry.layoutRanges.size());
        if (entry.value)
          expr(entry.value, 1);
      }
    }
    // An empty module from a non-empty, error-free file would mean input was dropped
    // silently.
    if (!hadErrors)
      check(!m.models.empty() || !m.dimsBlockRanges.empty() || m.train || m.parallel);
  }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::SourceMgr sourceMgr;
  llvm::StringRef input(reinterpret_cast<const char *>(data), size);
  unsigned bufferId = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(input, "fuzz.mtl"), llvm::SMLoc());
  Diagnostics diags(sourceMgr, bufferId, llvm::nulls());
  std::unique_ptr<Module> module = parseModule(sourceMgr, bufferId, diags);
  if (!module)
    __builtin_trap();
  Checker checker{size, diags.numErrors() > 0};
  checker.module(*module);
  return 0;
}
