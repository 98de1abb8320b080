//===- Parser.h - Parser of the .mtl language -------------------*- C++ -*-===//
//
// Recursive-descent parser from tokens to the AST in frontend/AST.h. The grammar is in
// docs/dsl.md. The parser reports syntax errors through Diagnostics and recovers at the next
// statement, declaration or top-level item, so one run reports several independent errors.
// It never asserts on its input: nesting is bounded, every loop makes progress, and a
// Module is returned even when errors were reported (callers check Diagnostics::numErrors()).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_FRONTEND_PARSER_H
#define MTC_FRONTEND_PARSER_H

#include "frontend/AST.h"
#include "frontend/Diagnostics.h"

#include "llvm/Support/SourceMgr.h"

#include <memory>

namespace mtc::frontend {

/// Expression nesting (parentheses, calls, unary minus, operator chains) deeper than this is
/// an "expression nested too deeply" error, which bounds the parser's recursion and the
/// height of every Expr tree (so recursive walks over the AST are safe too).
constexpr unsigned kMaxExprNesting = 256;

/// Parses the buffer `bufferId` of `sourceMgr`; `diags` must report on the same buffer.
std::unique_ptr<Module> parseModule(llvm::SourceMgr &sourceMgr, unsigned bufferId,
                                    Diagnostics &diags);

} // namespace mtc::frontend

#endif // MTC_FRONTEND_PARSER_H
