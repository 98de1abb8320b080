//===- Lexer.h - Tokens of the .mtl language --------------------*- C++ -*-===//
//
// Turns a .mtl buffer into tokens. Keywords are not tokens of their own: the language's
// keywords are contextual (`loss`, `init`, `layout`, `auto` are also ordinary names), so the
// lexer produces Name tokens and the parser decides from context.
//
// The lexer never reads past the buffer (it does not rely on a NUL terminator, so embedded
// NUL bytes are ordinary invalid characters), reports each bad character once with its exact
// location, and keeps going so the parser can report more than one error per run.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_FRONTEND_LEXER_H
#define MTC_FRONTEND_LEXER_H

#include "frontend/AST.h"
#include "frontend/Diagnostics.h"

#include "llvm/ADT/StringRef.h"

#include <vector>

namespace mtc::frontend {

enum class TokenKind {
  Eof,
  /// Bytes the lexer already reported (invalid character, bad UTF-8). The parser treats it as
  /// a syntax error but does not report it a second time.
  Error,
  Name,   // hidden, ln1.g, and words such as 1f1b (see Token::isWord)
  Number, // 3, 0.02, 3e-4, 1.5E+3
  LBrace,
  RBrace,
  LParen,
  RParen,
  LBracket,
  RBracket,
  Comma,
  Equal,
  Colon,
  Arrow, // ->
  Plus,
  Minus,
  Star,
  Slash,
  StarStar, // **
};

/// How a token kind is written, for messages: "'{'", "'->'", "name", "end of file".
llvm::StringRef getTokenKindSpelling(TokenKind kind);

struct Token {
  TokenKind kind = TokenKind::Eof;
  /// The token's bytes in the source buffer (empty for Eof).
  llvm::StringRef text;
  SourceRange range;
  /// Number: the value; malformed numbers (already reported) read as 0.
  double number = 0;
  /// Number: written without '.' or exponent.
  bool isInteger = false;
  /// Name: starts with a digit, like `1f1b`. Only meaningful as a config value.
  bool isWord = false;

  bool is(TokenKind k) const { return kind == k; }
  /// A Name token spelled `name`; keywords are matched this way.
  bool isName(llvm::StringRef name) const { return kind == TokenKind::Name && text == name; }
  /// A Name that can be an identifier (not a word such as `1f1b`).
  bool isIdentifier() const { return kind == TokenKind::Name && !isWord; }
};

class Lexer {
public:
  /// Lexes the buffer that `diags` reports on, so token offsets and diagnostics agree.
  explicit Lexer(Diagnostics &diags);

  /// Returns the next token; after the end of the buffer, Eof forever.
  Token lex();

  /// Lexes the whole buffer; the last token is Eof.
  std::vector<Token> lexAll();

private:
  void skipWhitespaceAndComments();
  Token lexName(size_t start);
  Token lexNumber(size_t start);
  Token lexInvalid(size_t start);
  Token makeToken(TokenKind kind, size_t begin, size_t end) const;
  /// Reports a malformed number covering [start, the rest of its alphanumeric/dot run).
  Token malformedNumber(size_t start, size_t end, const llvm::Twine &why);

  SourceLoc locAt(size_t offset) const;
  char peekChar(size_t offset) const { return offset < buffer.size() ? buffer[offset] : '\0'; }

  Diagnostics &diags;
  llvm::StringRef buffer;
  size_t pos = 0;
  unsigned line = 1;
  size_t lineStart = 0;
};

} // namespace mtc::frontend

#endif // MTC_FRONTEND_LEXER_H
