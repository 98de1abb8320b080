//===- Parser.cpp - Parser of the .mtl language ---------------------------===//
//
// Recovery strategy: every parse function reports the first error it meets, at the
// offending token, and returns failure; the enclosing list (statements of a fn, items of a
// model or layer, entries of a block, top-level items) then skips to the next token that can
// start one of its elements. Skipping jumps over balanced (), [] and {} groups (an unclosed
// ( or [ ends at the next brace or declaration keyword, which cannot occur inside one),
// never stops before the token where the error was reported (so no error is reported
// twice), and always consumes at least one token, so every loop terminates.
//
// Constructs that opened a `{` always finish themselves (returning success even after
// errors inside), so the caller's recovery never has to guess brace depth.
//
//===----------------------------------------------------------------------===//

#include "frontend/Parser.h"

#include "frontend/Lexer.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <deque>

using namespace mtc::frontend;

namespace {

/// An expression and the height of its tree (a leaf has height 1). Heights are tracked so
/// that long operator chains (`a + a + ... + a`), which the parser builds iteratively, are
/// bounded like nesting is: later passes walk Expr trees recursively.
struct Parsed {
  ExprPtr expr;
  unsigned height = 0;
  explicit operator bool() const { return expr != nullptr; }
};

/// Counts how deep the recursive descent currently is.
class NestingScope {
public:
  explicit NestingScope(unsigned &depth) : depth(depth) { ++depth; }
  ~NestingScope() { --depth; }
  NestingScope(const NestingScope &) = delete;
  NestingScope &operator=(const NestingScope &) = delete;

private:
  unsigned &depth;
};

class Parser {
public:
  explicit Parser(Diagnostics &diags) : diags(diags), lexer(diags) {}

  std::unique_ptr<Module> parseFile();

private:
  //===--------------------------------------------------------------------===//
  // Tokens
  //===--------------------------------------------------------------------===//

  /// Token `i` of the file, lexed on demand (so lexer errors interleave with parser errors
  /// in source order). A std::deque keeps references stable while the buffer grows.
  const Token &tok(size_t i) {
    while (tokens.size() <= i) {
      if (!tokens.empty() && tokens.back().is(TokenKind::Eof))
        return tokens.back();
      tokens.push_back(lexer.lex());
    }
    return tokens[i];
  }
  const Token &cur() { return tok(pos); }
  const Token &peek(size_t n = 1) { return tok(pos + n); }
  void consume() {
    if (!cur().is(TokenKind::Eof))
      ++pos;
  }
  bool consumeIf(TokenKind kind) {
    if (!cur().is(kind))
      return false;
    consume();
    return true;
  }
  /// The range from the start of token `first` to the end of token `last`.
  SourceRange rangeOf(size_t first, size_t last) {
    return SourceRange{tok(first).range.begin, tok(last).range.end};
  }
  static std::string describe(const Token &t) {
    if (t.is(TokenKind::Eof))
      return "end of file";
    return ("'" + t.text + "'").str();
  }

  //===--------------------------------------------------------------------===//
  // Errors and recovery
  //===--------------------------------------------------------------------===//

  void errorAt(size_t at, const llvm::Twine &msg) { errorAt(at, tok(at).range, msg); }
  void errorAt(size_t at, SourceRange range, const llvm::Twine &msg) {
    lastErrorPos = std::max(lastErrorPos, at);
    // The lexer already reported the bytes of an Error token; saying "expected ..." about
    // them again would only add noise.
    lastErrorEmitted = !tok(at).is(TokenKind::Error);
    if (lastErrorEmitted)
      diags.error(range, msg);
  }
  void noteAt(SourceRange range, const llvm::Twine &msg) {
    if (lastErrorEmitted)
      diags.note(range, msg);
  }
  void unterminated(size_t open, llvm::StringRef what) {
    errorAt(pos, "unterminated block: expected '}' to close '" + what + "' opened here");
    noteAt(tok(open).range, "'" + what + "' block opened here");
  }

  void skipOne();
  template <typename StopFn> void recover(size_t from, StopFn stop);

  bool isTopLevelStart(size_t i);
  bool isItemStart(size_t i);
  bool isStmtStart(size_t i);

  //===--------------------------------------------------------------------===//
  // Declarations
  //===--------------------------------------------------------------------===//

  bool parseDims(Module &module);
  bool parseBinding(std::vector<Binding> &out, llvm::StringRef what);
  bool parseModel(Module &module);
  bool parseLayer(std::vector<LayerDecl> &out);
  bool parseParam(std::vector<ParamDecl> &out);
  bool parseInit(InitSpec &init);
  bool parseTensorSig(TensorSig &sig);
  bool parseDimList(TensorSig &sig, size_t first);
  bool parseFn(std::vector<FnDecl> &out);
  bool parseFnArg(FnArg &arg);
  bool parseStmt(std::vector<Stmt> &out);
  bool parseConfig(Module &module);
  bool parseConfigEntry(ConfigBlock &block);
  bool parseLayout(ConfigEntry &entry);

  //===--------------------------------------------------------------------===//
  // Expressions
  //===--------------------------------------------------------------------===//

  Parsed parseExpr();
  Parsed parseAdditive();
  Parsed parseMultiplicative();
  Parsed parseBinaryLevel(TokenKind first, llvm::StringRef firstOp, TokenKind second,
                          llvm::StringRef secondOp, Parsed (Parser::*operand)());
  Parsed parseUnary();
  Parsed parsePower();
  Parsed parsePrimary();
  Parsed parseCall();
  Parsed parseRepeat();
  bool parseArgs(Expr &call, unsigned &height);
  Parsed makeBinary(Parsed lhs, llvm::StringRef op, Parsed rhs, size_t opPos);
  bool checkHeight(unsigned height, size_t at);

  Diagnostics &diags;
  Lexer lexer;
  std::deque<Token> tokens;
  size_t pos = 0;
  /// The furthest token an error was reported at; recovery never stops before it.
  size_t lastErrorPos = 0;
  /// Whether the last error was printed (notes attach to it only then).
  bool lastErrorEmitted = false;
  unsigned nesting = 0;
};

} // namespace

//===----------------------------------------------------------------------===//
// Recovery
//===----------------------------------------------------------------------===//

void Parser::skipOne() {
  TokenKind kind = cur().kind;
  if (kind == TokenKind::LBrace) {
    unsigned depth = 0;
    do {
      if (cur().is(TokenKind::LBrace))
        ++depth;
      else if (cur().is(TokenKind::RBrace))
        --depth;
      consume();
    } while (depth > 0 && !cur().is(TokenKind::Eof));
    return;
  }
  if (kind == TokenKind::LParen || kind == TokenKind::LBracket) {
    // Parentheses and brackets only ever hold expressions and names, so a brace or the
    // start of a declaration inside one means it was never closed: stop there and let the
    // enclosing recovery see it.
    unsigned depth = 0;
    do {
      TokenKind k = cur().kind;
      if (k == TokenKind::LParen || k == TokenKind::LBracket)
        ++depth;
      else if (k == TokenKind::RParen || k == TokenKind::RBracket)
        --depth;
      consume();
    } while (depth > 0 && !cur().is(TokenKind::Eof) && !cur().is(TokenKind::LBrace) &&
             !cur().is(TokenKind::RBrace) && !isItemStart(pos) && !isTopLevelStart(pos));
    return;
  }
  consume();
}

template <typename StopFn> void Parser::recover(size_t from, StopFn stop) {
  // Restarting from the construct's first token (rather than from the error) lets the skip
  // see the parentheses the construct opened, so `f(x, over = $)` does not stop at the
  // keyword argument `over =` as if it began a statement.
  pos = from;
  skipOne();
  while (!cur().is(TokenKind::Eof) && !(pos >= lastErrorPos && stop()))
    skipOne();
}

bool Parser::isTopLevelStart(size_t i) {
  const Token &t = tok(i);
  if (!t.is(TokenKind::Name))
    return false;
  const Token &next = tok(i + 1);
  if (t.text == "dims" || t.text == "train")
    return next.is(TokenKind::LBrace);
  if (t.text == "model")
    return next.isIdentifier();
  if (t.text == "parallel")
    return next.is(TokenKind::LBrace) || next.isName("auto");
  return false;
}

bool Parser::isItemStart(size_t i) {
  const Token &t = tok(i);
  const Token &next = tok(i + 1);
  if (t.isName("param") || t.isName("layer"))
    return next.isIdentifier();
  if (t.isName("fn"))
    return next.isIdentifier() || next.is(TokenKind::LParen);
  return false;
}

bool Parser::isStmtStart(size_t i) {
  const Token &t = tok(i);
  const Token &next = tok(i + 1);
  if (t.isIdentifier() && (next.is(TokenKind::Equal) || next.is(TokenKind::Comma)))
    return true;
  return t.isName("return");
}

//===----------------------------------------------------------------------===//
// Top level
//===----------------------------------------------------------------------===//

std::unique_ptr<Module> Parser::parseFile() {
  auto module = std::make_unique<Module>();
  if (cur().is(TokenKind::Eof)) {
    errorAt(pos, "empty file: expected a 'model' declaration");
    return module;
  }
  while (!cur().is(TokenKind::Eof) && !diags.reachedErrorLimit()) {
    size_t start = pos;
    const Token &t = cur();
    bool ok;
    if (t.isName("dims")) {
      ok = parseDims(*module);
    } else if (t.isName("model")) {
      ok = parseModel(*module);
    } else if (t.isName("train") || t.isName("parallel")) {
      ok = parseConfig(*module);
    } else {
      errorAt(pos, "unexpected " + describe(t) +
                       " at top level; expected 'dims', 'model', 'train' or 'parallel'");
      ok = false;
    }
    if (!ok)
      recover(start, [&] { return isTopLevelStart(pos); });
    if (pos == start)
      skipOne();
  }
  return module;
}

//===----------------------------------------------------------------------===//
// dims and bindings
//===----------------------------------------------------------------------===//

bool Parser::parseDims(Module &module) {
  size_t kw = pos;
  consume();
  if (!cur().is(TokenKind::LBrace)) {
    errorAt(pos, "expected '{' after 'dims'");
    return false;
  }
  size_t open = pos;
  consume();
  while (true) {
    if (consumeIf(TokenKind::RBrace))
      break;
    if (cur().is(TokenKind::Eof) || isTopLevelStart(pos)) {
      unterminated(open, "dims");
      break;
    }
    size_t start = pos;
    if (parseBinding(module.dims, "a dimension")) {
      consumeIf(TokenKind::Comma);
      continue;
    }
    recover(start, [&] {
      return cur().is(TokenKind::RBrace) || (cur().isIdentifier() && peek().is(TokenKind::Equal)) ||
             isTopLevelStart(pos);
    });
  }
  module.dimsBlockRanges.push_back(rangeOf(kw, pos - 1));
  return true;
}

bool Parser::parseBinding(std::vector<Binding> &out, llvm::StringRef what) {
  if (!cur().isIdentifier()) {
    errorAt(pos, "expected " + what + " name");
    return false;
  }
  Binding binding;
  binding.name = cur().text.str();
  binding.nameRange = cur().range;
  consume();
  if (!cur().is(TokenKind::Equal)) {
    errorAt(pos, "expected '=' in binding");
    return false;
  }
  consume();
  Parsed value = parseExpr();
  if (!value)
    return false;
  binding.range = SourceRange{binding.nameRange.begin, value.expr->range.end};
  binding.value = std::move(value.expr);
  out.push_back(std::move(binding));
  return true;
}

//===----------------------------------------------------------------------===//
// model, layer, param
//===----------------------------------------------------------------------===//

bool Parser::parseModel(Module &module) {
  size_t kw = pos;
  consume();
  ModelDecl model;
  if (cur().isIdentifier()) {
    model.name = cur().text.str();
    model.nameRange = cur().range;
    consume();
  } else {
    errorAt(pos, "expected a model name after 'model'");
    // Keep going when the rest looks like a model: its body may hold more errors worth
    // reporting in this run.
    if (!cur().is(TokenKind::LParen) && !cur().is(TokenKind::LBrace))
      return false;
  }

  if (cur().is(TokenKind::LParen)) {
    size_t open = pos;
    consume();
    if (!consumeIf(TokenKind::RParen)) {
      while (true) {
        if (!parseBinding(model.args, "an argument")) {
          pos = open;
          skipOne();
          break;
        }
        if (consumeIf(TokenKind::Comma))
          continue;
        if (consumeIf(TokenKind::RParen))
          break;
        errorAt(pos, "expected ',' or ')' after model argument");
        pos = open;
        skipOne();
        break;
      }
    }
  }

  if (!cur().is(TokenKind::LBrace)) {
    errorAt(pos, "expected '{' to begin the body of the model");
    return false;
  }
  size_t open = pos;
  consume();
  while (true) {
    if (consumeIf(TokenKind::RBrace))
      break;
    if (cur().is(TokenKind::Eof) || isTopLevelStart(pos)) {
      unterminated(open, "model");
      break;
    }
    size_t start = pos;
    const Token &t = cur();
    bool ok;
    if (t.isName("param")) {
      ok = parseParam(model.params);
    } else if (t.isName("layer")) {
      ok = parseLayer(model.layers);
    } else if (t.isName("fn")) {
      ok = parseFn(model.fns);
    } else {
      errorAt(pos,
              "unexpected " + describe(t) + " in model; expected 'param', 'layer', 'fn' or '}'");
      ok = false;
    }
    if (!ok)
      recover(start, [&] {
        return cur().is(TokenKind::RBrace) || isItemStart(pos) || isTopLevelStart(pos);
      });
  }
  model.range = rangeOf(kw, pos - 1);
  module.models.push_back(std::move(model));
  return true;
}

bool Parser::parseLayer(std::vector<LayerDecl> &out) {
  size_t kw = pos;
  consume();
  LayerDecl layer;
  if (cur().isIdentifier()) {
    layer.name = cur().text.str();
    layer.nameRange = cur().range;
    consume();
  } else {
    errorAt(pos, "expected a layer name after 'layer'");
    if (!cur().is(TokenKind::LBrace))
      return false;
  }
  if (!cur().is(TokenKind::LBrace)) {
    errorAt(pos, "expected '{' to begin the body of the layer");
    return false;
  }
  size_t open = pos;
  consume();
  while (true) {
    if (consumeIf(TokenKind::RBrace))
      break;
    // Layers do not nest, so `layer x` here almost always means this layer's '}' is missing.
    if (cur().is(TokenKind::Eof) || isTopLevelStart(pos) ||
        (cur().isName("layer") && peek().isIdentifier())) {
      unterminated(open, "layer");
      break;
    }
    size_t start = pos;
    const Token &t = cur();
    bool ok;
    if (t.isName("param")) {
      ok = parseParam(layer.params);
    } else if (t.isName("fn")) {
      ok = parseFn(layer.fns);
    } else {
      errorAt(pos, "unexpected " + describe(t) + " in layer; expected 'param', 'fn' or '}'");
      ok = false;
    }
    if (!ok)
      recover(start, [&] {
        return cur().is(TokenKind::RBrace) || isItemStart(pos) || isTopLevelStart(pos);
      });
  }
  layer.range = rangeOf(kw, pos - 1);
  out.push_back(std::move(layer));
  return true;
}

bool Parser::parseParam(std::vector<ParamDecl> &out) {
  size_t kw = pos;
  consume();
  ParamDecl param;
  if (!cur().isIdentifier()) {
    errorAt(pos, "expected a parameter name after 'param'");
    return false;
  }
  param.name = cur().text.str();
  param.nameRange = cur().range;
  consume();
  if (!parseTensorSig(param.sig))
    return false;
  if (cur().isName("init")) {
    consume();
    InitSpec init;
    if (!parseInit(init))
      return false;
    param.init = std::move(init);
  }
  param.range = rangeOf(kw, pos - 1);
  out.push_back(std::move(param));
  return true;
}

bool Parser::parseInit(InitSpec &init) {
  if (!cur().isIdentifier()) {
    errorAt(pos, "expected an initializer after 'init', such as 'zeros', 'ones' or "
                 "'normal(0.02)'");
    return false;
  }
  size_t first = pos;
  init.kind = cur().text.str();
  consume();
  if (cur().is(TokenKind::LParen)) {
    size_t open = pos;
    consume();
    while (true) {
      if (cur().isIdentifier() && peek().is(TokenKind::Equal)) {
        errorAt(pos, "initializer arguments are positional; remove '" + cur().text + " ='");
        return false;
      }
      Parsed arg = parseExpr();
      if (!arg)
        return false;
      init.args.push_back(std::move(arg.expr));
      if (consumeIf(TokenKind::Comma))
        continue;
      if (consumeIf(TokenKind::RParen))
        break;
      errorAt(pos, "expected ',' or ')' in initializer arguments");
      noteAt(tok(open).range, "to match this '('");
      return false;
    }
  }
  init.range = rangeOf(first, pos - 1);
  return true;
}

bool Parser::parseTensorSig(TensorSig &sig) {
  size_t first = pos;
  if (cur().isIdentifier() && peek().is(TokenKind::LBracket)) {
    sig.elementType = cur().text.str();
    sig.elementTypeRange = cur().range;
    consume();
  }
  if (!cur().is(TokenKind::LBracket)) {
    errorAt(pos, "expected '[' to begin the dimension list");
    return false;
  }
  return parseDimList(sig, first);
}

bool Parser::parseDimList(TensorSig &sig, size_t first) {
  consume(); // '['
  if (!cur().is(TokenKind::RBracket)) {
    while (true) {
      if (!cur().isIdentifier()) {
        if (cur().is(TokenKind::Number))
          errorAt(pos, "expected a dimension name; dimensions are named, with their sizes "
                       "declared in 'dims {}'");
        else
          errorAt(pos, "expected a dimension name");
        return false;
      }
      sig.dims.push_back(cur().text.str());
      sig.dimRanges.push_back(cur().range);
      consume();
      if (consumeIf(TokenKind::Comma))
        continue;
      if (cur().is(TokenKind::RBracket))
        break;
      errorAt(pos, "expected ']' after dimension list");
      return false;
    }
  }
  consume(); // ']'
  sig.range = rangeOf(first, pos - 1);
  return true;
}

//===----------------------------------------------------------------------===//
// fn and statements
//===----------------------------------------------------------------------===//

bool Parser::parseFn(std::vector<FnDecl> &out) {
  size_t kw = pos;
  consume();
  FnDecl fn;
  if (cur().isIdentifier()) {
    fn.name = cur().text.str();
    fn.nameRange = cur().range;
    consume();
  }
  if (!cur().is(TokenKind::LParen)) {
    errorAt(pos, fn.name.empty() ? "expected a function name or '(' after 'fn'"
                                 : "expected '(' after the function name");
    return false;
  }
  consume();
  if (!consumeIf(TokenKind::RParen)) {
    while (true) {
      FnArg arg;
      if (!parseFnArg(arg))
        return false;
      fn.args.push_back(std::move(arg));
      if (consumeIf(TokenKind::Comma))
        continue;
      if (consumeIf(TokenKind::RParen))
        break;
      errorAt(pos, "expected ',' or ')' after function argument");
      return false;
    }
  }
  if (!consumeIf(TokenKind::Arrow)) {
    errorAt(pos, "expected '->' and the result type after the argument list");
    return false;
  }
  if (cur().isName("loss") && !peek().is(TokenKind::LBracket)) {
    fn.returnsLoss = true;
    fn.resultRange = cur().range;
    consume();
  } else {
    if (!cur().is(TokenKind::LBracket) &&
        !(cur().isIdentifier() && peek().is(TokenKind::LBracket))) {
      errorAt(pos, "expected 'loss' or a tensor type such as '[batch, seq, hidden]' after '->'");
      return false;
    }
    while (true) {
      TensorSig sig;
      if (!parseTensorSig(sig))
        return false;
      fn.resultRange = fn.results.empty() ? sig.range
                                          : SourceRange{fn.resultRange.begin, sig.range.end};
      fn.results.push_back(std::move(sig));
      if (!consumeIf(TokenKind::Comma))
        break;
    }
  }
  if (!cur().is(TokenKind::LBrace)) {
    errorAt(pos, "expected '{' to begin the function body");
    return false;
  }
  size_t open = pos;
  consume();
  while (true) {
    if (consumeIf(TokenKind::RBrace))
      break;
    if (cur().is(TokenKind::Eof) || isTopLevelStart(pos) ||
        (isItemStart(pos) && !isStmtStart(pos))) {
      unterminated(open, "fn");
      break;
    }
    size_t start = pos;
    if (!parseStmt(fn.body))
      recover(start, [&] {
        return cur().is(TokenKind::RBrace) || isStmtStart(pos) || isItemStart(pos) ||
               isTopLevelStart(pos);
      });
  }
  fn.range = rangeOf(kw, pos - 1);
  out.push_back(std::move(fn));
  return true;
}

bool Parser::parseFnArg(FnArg &arg) {
  if (!cur().isIdentifier()) {
    errorAt(pos, "expected an argument name");
    return false;
  }
  arg.name = cur().text.str();
  arg.nameRange = cur().range;
  consume();
  size_t first = pos;
  if (consumeIf(TokenKind::Colon)) {
    first = pos;
    if (!cur().isIdentifier()) {
      errorAt(pos, "expected an element type such as 'i32' after ':'");
      return false;
    }
    arg.sig.elementType = cur().text.str();
    arg.sig.elementTypeRange = cur().range;
    consume();
    if (!cur().is(TokenKind::LBracket)) {
      errorAt(pos, "expected '[' to begin the dimension list");
      return false;
    }
  } else if (!cur().is(TokenKind::LBracket)) {
    errorAt(pos, "expected '[' and the dimensions of argument '" + arg.name +
                     "', as in 'x[batch, seq, hidden]'");
    return false;
  }
  return parseDimList(arg.sig, first);
}

bool Parser::parseStmt(std::vector<Stmt> &out) {
  const Token &t = cur();
  // `return` is a keyword only where it cannot be an assignment target.
  if (t.isName("return") && !peek().is(TokenKind::Equal) && !peek().is(TokenKind::Comma)) {
    size_t kw = pos;
    consume();
    Parsed value = parseExpr();
    if (!value)
      return false;
    // `return a, b`: several results travel as one Tuple.
    if (cur().is(TokenKind::Comma)) {
      auto tuple = std::make_unique<Expr>(Expr::Kind::Tuple);
      tuple->args.push_back(std::move(value.expr));
      while (consumeIf(TokenKind::Comma)) {
        Parsed next = parseExpr();
        if (!next)
          return false;
        tuple->args.push_back(std::move(next.expr));
      }
      tuple->range = SourceRange{tuple->args.front()->range.begin, tuple->args.back()->range.end};
      value.expr = std::move(tuple);
    }
    Stmt stmt(Stmt::Kind::Return);
    stmt.range = SourceRange{tok(kw).range.begin, value.expr->range.end};
    stmt.value = std::move(value.expr);
    out.push_back(std::move(stmt));
    return true;
  }
  if (!t.isIdentifier()) {
    errorAt(pos, "expected a statement: 'name = expr' or 'return expr'");
    return false;
  }
  if (!peek().is(TokenKind::Equal) && !peek().is(TokenKind::Comma)) {
    if (peek().is(TokenKind::LParen))
      errorAt(pos, "the result of a call must be assigned ('y = f(...)') or returned");
    else
      errorAt(pos + 1, "expected '=' after '" + t.text + "'");
    return false;
  }
  Stmt stmt(Stmt::Kind::Assign);
  SourceLoc begin = t.range.begin;
  while (true) {
    stmt.targets.push_back(cur().text.str());
    stmt.targetRanges.push_back(cur().range);
    consume();
    if (!consumeIf(TokenKind::Comma))
      break;
    if (!cur().isIdentifier()) {
      errorAt(pos, "expected a name after ',' in assignment targets");
      return false;
    }
  }
  if (!consumeIf(TokenKind::Equal)) {
    errorAt(pos, "expected '=' after assignment targets");
    return false;
  }
  Parsed value = parseExpr();
  if (!value)
    return false;
  stmt.range = SourceRange{begin, value.expr->range.end};
  stmt.value = std::move(value.expr);
  out.push_back(std::move(stmt));
  return true;
}

//===----------------------------------------------------------------------===//
// train {} and parallel {}
//===----------------------------------------------------------------------===//

bool Parser::parseConfig(Module &module) {
  size_t kw = pos;
  std::string kind = cur().text.str();
  consume();
  std::optional<ConfigBlock> &slot = kind == "train" ? module.train : module.parallel;
  bool duplicate = slot.has_value();
  if (duplicate) {
    errorAt(kw, "duplicate '" + kind + "' block");
    noteAt(slot->range, "previous '" + kind + "' block is here");
  }
  ConfigBlock block;
  block.kind = kind;
  if (kind == "parallel" && cur().isName("auto")) {
    block.isAuto = true;
    consume();
  } else {
    if (!cur().is(TokenKind::LBrace)) {
      errorAt(pos, kind == "parallel" ? "expected '{' or 'auto' after 'parallel'"
                                      : "expected '{' after 'train'");
      return false;
    }
    size_t open = pos;
    consume();
    while (true) {
      if (consumeIf(TokenKind::RBrace))
        break;
      if (cur().is(TokenKind::Eof) || isTopLevelStart(pos)) {
        unterminated(open, kind);
        break;
      }
      size_t start = pos;
      if (!parseConfigEntry(block))
        recover(start, [&] {
          return cur().is(TokenKind::RBrace) || cur().is(TokenKind::Name) || isTopLevelStart(pos);
        });
    }
  }
  block.range = rangeOf(kw, pos - 1);
  if (!duplicate)
    slot = std::move(block);
  return true;
}

bool Parser::parseConfigEntry(ConfigBlock &block) {
  if (!cur().isIdentifier()) {
    errorAt(pos, "expected a setting name in '" + block.kind + "' block");
    return false;
  }
  size_t first = pos;
  ConfigEntry entry;
  entry.key = cur().text.str();
  entry.keyRange = cur().range;
  consume();

  if (entry.key == "layout" && cur().is(TokenKind::LBrace)) {
    if (!parseLayout(entry))
      return false;
  } else {
    if (cur().is(TokenKind::Equal) || cur().is(TokenKind::Colon)) {
      // A common slip from other config formats; say so and read the value anyway.
      errorAt(pos, "settings are written 'key value', without '" + cur().text + "'");
      consume();
    }
    const Token &value = cur();
    if (value.is(TokenKind::Number)) {
      auto e = std::make_unique<Expr>(Expr::Kind::Number);
      e->number = value.number;
      e->isInteger = value.isInteger;
      e->range = value.range;
      entry.value = std::move(e);
      consume();
    } else if (value.is(TokenKind::LBracket)) {
      // A list of numbers, `[3, 1]` (pipeline_layers), read as a Tuple.
      size_t open = pos;
      consume();
      auto list = std::make_unique<Expr>(Expr::Kind::Tuple);
      while (!cur().is(TokenKind::RBracket)) {
        if (!cur().is(TokenKind::Number)) {
          errorAt(pos, "expected a number in the list of '" + entry.key + "', as in [3, 1]");
          return false;
        }
        auto element = std::make_unique<Expr>(Expr::Kind::Number);
        element->number = cur().number;
        element->isInteger = cur().isInteger;
        element->range = cur().range;
        list->args.push_back(std::move(element));
        consume();
        if (!consumeIf(TokenKind::Comma) && !cur().is(TokenKind::RBracket)) {
          errorAt(pos, "expected ',' or ']' in the list of '" + entry.key + "'");
          return false;
        }
      }
      consume(); // ']'
      list->range = rangeOf(open, pos - 1);
      entry.value = std::move(list);
    } else if (value.isIdentifier() && peek().is(TokenKind::LParen)) {
      Parsed call = parseCall();
      if (!call)
        return false;
      entry.value = std::move(call.expr);
    } else if (value.is(TokenKind::Name)) {
      // Words may be hyphenated (`zero-bubble`) when written without spaces; elsewhere `-`
      // is subtraction, but config values are never expressions.
      size_t valueFirst = pos;
      consume();
      while (cur().is(TokenKind::Minus) &&
             cur().range.begin.offset == tok(pos - 1).range.end.offset &&
             peek().is(TokenKind::Name) && peek().range.begin.offset == cur().range.end.offset) {
        consume();
        consume();
      }
      auto e = std::make_unique<Expr>(Expr::Kind::Name);
      e->range = rangeOf(valueFirst, pos - 1);
      e->nameRange = e->range;
      e->name = diags.getBuffer().slice(e->range.begin.offset, e->range.end.offset).str();
      entry.value = std::move(e);
    } else {
      errorAt(pos, "expected a value after '" + entry.key + "'");
      return false;
    }
  }
  entry.range = rangeOf(first, pos - 1);
  block.entries.push_back(std::move(entry));
  return true;
}

bool Parser::parseLayout(ConfigEntry &entry) {
  size_t open = pos;
  consume(); // '{'
  while (true) {
    if (consumeIf(TokenKind::RBrace))
      return true;
    if (cur().is(TokenKind::Eof) || isTopLevelStart(pos)) {
      unterminated(open, "layout");
      return true;
    }
    if (!cur().isIdentifier()) {
      errorAt(pos, "expected a dimension name in 'layout'");
      return false;
    }
    size_t first = pos;
    std::string dim = cur().text.str();
    consume();
    if (!consumeIf(TokenKind::Colon)) {
      errorAt(pos, "expected ':' after '" + dim + "' in 'layout', as in 'heads: tp'");
      return false;
    }
    if (!cur().isIdentifier()) {
      errorAt(pos, "expected a mesh axis name after ':'");
      return false;
    }
    entry.layout.emplace_back(dim, cur().text.str());
    entry.layoutRanges.push_back(rangeOf(first, pos));
    consume();
    consumeIf(TokenKind::Comma);
  }
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

bool Parser::checkHeight(unsigned height, size_t at) {
  if (height <= kMaxExprNesting)
    return true;
  errorAt(at, "expression nested too deeply");
  return false;
}

Parsed Parser::makeBinary(Parsed lhs, llvm::StringRef op, Parsed rhs, size_t opPos) {
  unsigned height = 1 + std::max(lhs.height, rhs.height);
  if (!checkHeight(height, opPos))
    return {};
  auto e = std::make_unique<Expr>(Expr::Kind::Binary);
  e->op = op.str();
  e->range = SourceRange{lhs.expr->range.begin, rhs.expr->range.end};
  e->lhs = std::move(lhs.expr);
  e->rhs = std::move(rhs.expr);
  return {std::move(e), height};
}

Parsed Parser::parseExpr() {
  NestingScope scope(nesting);
  if (nesting > kMaxExprNesting) {
    errorAt(pos, "expression nested too deeply");
    return {};
  }
  return parseAdditive();
}

Parsed Parser::parseAdditive() {
  return parseBinaryLevel(TokenKind::Plus, "+", TokenKind::Minus, "-",
                          &Parser::parseMultiplicative);
}

Parsed Parser::parseMultiplicative() {
  return parseBinaryLevel(TokenKind::Star, "*", TokenKind::Slash, "/", &Parser::parseUnary);
}

/// One left-associative precedence level of two operators over `operand`.
Parsed Parser::parseBinaryLevel(TokenKind first, llvm::StringRef firstOp, TokenKind second,
                                llvm::StringRef secondOp, Parsed (Parser::*operand)()) {
  Parsed lhs = (this->*operand)();
  while (lhs && (cur().is(first) || cur().is(second))) {
    size_t opPos = pos;
    llvm::StringRef op = cur().is(first) ? firstOp : secondOp;
    consume();
    Parsed rhs = (this->*operand)();
    if (!rhs)
      return {};
    lhs = makeBinary(std::move(lhs), op, std::move(rhs), opPos);
  }
  return lhs;
}

Parsed Parser::parseUnary() {
  if (!cur().is(TokenKind::Minus))
    return parsePower();
  size_t opPos = pos;
  consume();
  NestingScope scope(nesting);
  if (nesting > kMaxExprNesting) {
    errorAt(opPos, "expression nested too deeply");
    return {};
  }
  Parsed operand = parseUnary();
  if (!operand)
    return {};
  unsigned height = operand.height + 1;
  if (!checkHeight(height, opPos))
    return {};
  auto e = std::make_unique<Expr>(Expr::Kind::Unary);
  e->op = "-";
  e->range = SourceRange{tok(opPos).range.begin, operand.expr->range.end};
  e->lhs = std::move(operand.expr);
  return {std::move(e), height};
}

Parsed Parser::parsePower() {
  Parsed base = parsePrimary();
  if (!base || !cur().is(TokenKind::StarStar))
    return base;
  size_t opPos = pos;
  consume();
  NestingScope scope(nesting);
  if (nesting > kMaxExprNesting) {
    errorAt(opPos, "expression nested too deeply");
    return {};
  }
  // The exponent is a unary expression: `2 ** -1` works and `a ** b ** c` is `a ** (b ** c)`.
  Parsed exponent = parseUnary();
  if (!exponent)
    return {};
  return makeBinary(std::move(base), "**", std::move(exponent), opPos);
}

Parsed Parser::parsePrimary() {
  const Token &t = cur();
  switch (t.kind) {
  case TokenKind::Number: {
    auto e = std::make_unique<Expr>(Expr::Kind::Number);
    e->number = t.number;
    e->isInteger = t.isInteger;
    e->range = t.range;
    consume();
    return {std::move(e), 1};
  }
  case TokenKind::Name: {
    if (t.isWord) {
      errorAt(pos, "'" + t.text + "' is neither a name nor a number");
      return {};
    }
    if (t.isName("repeat") && peek().is(TokenKind::LParen))
      return parseRepeat();
    if (peek().is(TokenKind::LParen))
      return parseCall();
    auto e = std::make_unique<Expr>(Expr::Kind::Name);
    e->name = t.text.str();
    e->nameRange = t.range;
    e->range = t.range;
    consume();
    return {std::move(e), 1};
  }
  case TokenKind::LParen: {
    size_t open = pos;
    consume();
    Parsed first = parseExpr();
    if (!first)
      return {};
    if (!cur().is(TokenKind::Comma)) {
      if (!cur().is(TokenKind::RParen)) {
        errorAt(pos, "expected ')'");
        noteAt(tok(open).range, "to match this '('");
        return {};
      }
      consume();
      // The parentheses belong to the expression's span: errors about `(a + b)` point at it.
      first.expr->range = rangeOf(open, pos - 1);
      return first;
    }
    auto tuple = std::make_unique<Expr>(Expr::Kind::Tuple);
    unsigned height = first.height;
    tuple->args.push_back(std::move(first.expr));
    while (consumeIf(TokenKind::Comma)) {
      Parsed element = parseExpr();
      if (!element)
        return {};
      height = std::max(height, element.height);
      tuple->args.push_back(std::move(element.expr));
    }
    if (!consumeIf(TokenKind::RParen)) {
      errorAt(pos, "expected ',' or ')' in tuple");
      noteAt(tok(open).range, "to match this '('");
      return {};
    }
    if (!checkHeight(height + 1, open))
      return {};
    tuple->range = rangeOf(open, pos - 1);
    return {std::move(tuple), height + 1};
  }
  default:
    errorAt(pos, "expected expression");
    return {};
  }
}

Parsed Parser::parseCall() {
  size_t first = pos;
  auto call = std::make_unique<Expr>(Expr::Kind::Call);
  call->name = cur().text.str();
  call->nameRange = cur().range;
  consume();
  unsigned height = 0;
  if (!parseArgs(*call, height))
    return {};
  if (!checkHeight(height + 1, first))
    return {};
  call->range = rangeOf(first, pos - 1);
  return {std::move(call), height + 1};
}

Parsed Parser::parseRepeat() {
  size_t first = pos;
  consume(); // 'repeat'
  size_t open = pos;
  consume(); // '('
  Parsed count = parseExpr();
  if (!count)
    return {};
  if (!consumeIf(TokenKind::RParen)) {
    errorAt(pos, "expected ')' after the repeat count");
    noteAt(tok(open).range, "to match this '('");
    return {};
  }
  if (!cur().isIdentifier()) {
    errorAt(pos, "expected a layer name after 'repeat(...)', as in 'repeat(layers) block(x)'");
    return {};
  }
  auto e = std::make_unique<Expr>(Expr::Kind::Repeat);
  e->name = cur().text.str();
  e->nameRange = cur().range;
  consume();
  if (!cur().is(TokenKind::LParen)) {
    errorAt(pos, "expected '(' and the arguments of layer '" + e->name + "'");
    return {};
  }
  unsigned height = count.height;
  if (!parseArgs(*e, height))
    return {};
  if (!checkHeight(height + 1, first))
    return {};
  e->lhs = std::move(count.expr);
  e->range = rangeOf(first, pos - 1);
  return {std::move(e), height + 1};
}

bool Parser::parseArgs(Expr &call, unsigned &height) {
  size_t open = pos;
  consume(); // '('
  if (consumeIf(TokenKind::RParen))
    return true;
  while (true) {
    if (cur().isIdentifier() && peek().is(TokenKind::Equal)) {
      size_t namePos = pos;
      KeywordArg kwarg;
      kwarg.name = cur().text.str();
      kwarg.nameRange = cur().range;
      consume();
      consume(); // '='
      Parsed value = parseExpr();
      if (!value)
        return false;
      height = std::max(height, value.height);
      for (const KeywordArg &previous : call.kwargs) {
        if (previous.name == kwarg.name) {
          errorAt(namePos, "duplicate keyword argument '" + kwarg.name + "'");
          noteAt(previous.nameRange, "previous value is here");
          break;
        }
      }
      kwarg.value = std::move(value.expr);
      call.kwargs.push_back(std::move(kwarg));
    } else {
      size_t argPos = pos;
      Parsed value = parseExpr();
      if (!value)
        return false;
      height = std::max(height, value.height);
      if (!call.kwargs.empty())
        errorAt(argPos, value.expr->range, "positional argument after keyword argument");
      call.args.push_back(std::move(value.expr));
    }
    if (consumeIf(TokenKind::Comma))
      continue;
    if (consumeIf(TokenKind::RParen))
      return true;
    errorAt(pos, "expected ',' or ')' in argument list");
    noteAt(tok(open).range, "to match this '('");
    return false;
  }
}

//===----------------------------------------------------------------------===//
// Entry point
//===----------------------------------------------------------------------===//

std::unique_ptr<Module> mtc::frontend::parseModule(llvm::SourceMgr &sourceMgr, unsigned bufferId,
                                                   Diagnostics &diags) {
  // The lexer reads the buffer `diags` reports on, so that token offsets and diagnostics can
  // never disagree; the arguments name that same buffer.
  (void)sourceMgr;
  (void)bufferId;
  Parser parser(diags);
  return parser.parseFile();
}
