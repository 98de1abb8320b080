//===- AST.h - Abstract syntax tree of the .mtl language ------------------===//
//
// The parser produces this tree; MLIRGen lowers it to the `mt` dialect. The tree is
// plain C++ (no MLIR), owned through unique_ptr, and keeps a source range on every node so
// that every later error can point at the offending span.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_FRONTEND_AST_H
#define MTC_FRONTEND_AST_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mtc::frontend {

/// A position in a source buffer: 1-based line and column, and the 0-based byte offset.
struct SourceLoc {
  unsigned line = 0;
  unsigned col = 0;
  size_t offset = 0;
};

/// A half-open byte range [begin, end) in the source buffer.
struct SourceRange {
  SourceLoc begin;
  SourceLoc end;
};

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

/// `name = value` inside a call's argument list.
struct KeywordArg {
  std::string name;
  SourceRange nameRange;
  ExprPtr value;
};

struct Expr {
  enum class Kind {
    Number, // 3, 0.02, 3e-4
    Name,   // x, ln1.g, hidden (dotted names are one Name)
    Unary,  // -x
    Binary, // a + b, a - b, a * b, a / b, a ** b
    Call,   // f(a, b, over = hidden)
    Tuple,  // (a, b)       -- only as a call argument or in `train {}` values;
            // [3, 1]       -- a list of numbers as a setting's value
    Repeat, // repeat(n) block(x)
  };

  Kind kind;
  SourceRange range;

  // Number
  double number = 0;
  bool isInteger = false; // written without '.', exponent or fraction

  // Name; Call callee; Repeat layer name
  std::string name;
  SourceRange nameRange;

  // Unary / Binary: op is one of "-", "+", "*", "/", "**"
  std::string op;
  ExprPtr lhs; // Unary operand, Binary lhs; Repeat count
  ExprPtr rhs;

  // Call / Tuple / Repeat arguments
  std::vector<ExprPtr> args;
  std::vector<KeywordArg> kwargs;

  explicit Expr(Kind kind) : kind(kind) {}
};

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

/// A tensor signature `[batch, seq, hidden]`, optionally typed `i32[batch, seq]`.
struct TensorSig {
  std::string elementType; // "" (the model's float type), "f32", "bf16", "i32", ...
  SourceRange elementTypeRange;
  std::vector<std::string> dims;
  std::vector<SourceRange> dimRanges;
  SourceRange range;
};

/// `init normal(0.02)`, `init zeros`, ...; absent init means `zeros`.
struct InitSpec {
  std::string kind; // "zeros", "ones", "normal", "uniform", "constant"
  std::vector<ExprPtr> args;
  SourceRange range;
};

/// `param ln1.g[hidden] init ones`
struct ParamDecl {
  std::string name;
  SourceRange nameRange;
  TensorSig sig;
  std::optional<InitSpec> init;
  SourceRange range;
};

struct FnArg {
  std::string name;
  SourceRange nameRange;
  TensorSig sig;
};

struct Stmt {
  enum class Kind { Assign, Return };
  Kind kind;
  std::vector<std::string> targets; // Assign: `a = ...` or `w, idx = topk(...)`
  std::vector<SourceRange> targetRanges;
  /// The assigned or returned value; `return a, b` returns a Tuple.
  ExprPtr value;
  SourceRange range;
  explicit Stmt(Kind kind) : kind(kind) {}
};

/// `fn name(args) -> result { stmts }`; inside a layer the name is optional.
struct FnDecl {
  std::string name; // "" for a layer's anonymous fn
  SourceRange nameRange;
  std::vector<FnArg> args;
  /// The declared results: tensor signatures (`-> [batch, seq, hidden], []`), or the keyword
  /// `loss` (a scalar) with `results` empty. A layer body may return several values, e.g.
  /// its hidden state and a running auxiliary loss.
  std::vector<TensorSig> results;
  bool returnsLoss = false;
  SourceRange resultRange;
  std::vector<Stmt> body;
  SourceRange range;
};

/// `layer block { params...; fn (...) -> [...] { ... } }`
struct LayerDecl {
  std::string name;
  SourceRange nameRange;
  std::vector<ParamDecl> params;
  std::vector<FnDecl> fns; // exactly one is valid; checked by MLIRGen
  SourceRange range;
};

/// `name = expr` in `dims {}` or in a model's argument list `model gpt(layers = 4)`.
struct Binding {
  std::string name;
  SourceRange nameRange;
  ExprPtr value;
  SourceRange range;
};

struct ModelDecl {
  std::string name;
  SourceRange nameRange;
  std::vector<Binding> args;
  std::vector<ParamDecl> params;
  std::vector<LayerDecl> layers;
  std::vector<FnDecl> fns;
  SourceRange range;
};

/// One entry of `train {}` / `parallel {}`: `key value` where value is a number, a word
/// (`fp32`, `on`, `1f1b`), or a call-like `adamw(lr = 3e-4, betas = (0.9, 0.95))`.
/// `layout { heads: tp, ffn: tp }` is an entry whose `layout` holds the pairs.
struct ConfigEntry {
  std::string key;
  SourceRange keyRange;
  ExprPtr value; // Number, Name, Call or Tuple (a list); null for `layout {}`
  std::vector<std::pair<std::string, std::string>> layout;
  std::vector<SourceRange> layoutRanges;
  SourceRange range;
};

struct ConfigBlock {
  std::string kind; // "train" or "parallel"
  std::vector<ConfigEntry> entries;
  bool isAuto = false; // `parallel auto`
  SourceRange range;
};

/// A whole .mtl file.
struct Module {
  std::vector<Binding> dims;
  std::vector<SourceRange> dimsBlockRanges;
  std::vector<ModelDecl> models; // exactly one is valid; checked by MLIRGen
  std::optional<ConfigBlock> train;
  std::optional<ConfigBlock> parallel;
};

} // namespace mtc::frontend

#endif // MTC_FRONTEND_AST_H
