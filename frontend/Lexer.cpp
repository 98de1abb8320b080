//===- Lexer.cpp - Tokens of the .mtl language ----------------------------===//

#include "frontend/Lexer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mtc::frontend;

llvm::StringRef mtc::frontend::getTokenKindSpelling(TokenKind kind) {
  switch (kind) {
  case TokenKind::Eof:
    return "end of file";
  case TokenKind::Error:
    return "invalid token";
  case TokenKind::Name:
    return "name";
  case TokenKind::Number:
    return "number";
  case TokenKind::LBrace:
    return "'{'";
  case TokenKind::RBrace:
    return "'}'";
  case TokenKind::LParen:
    return "'('";
  case TokenKind::RParen:
    return "')'";
  case TokenKind::LBracket:
    return "'['";
  case TokenKind::RBracket:
    return "']'";
  case TokenKind::Comma:
    return "','";
  case TokenKind::Equal:
    return "'='";
  case TokenKind::Colon:
    return "':'";
  case TokenKind::Arrow:
    return "'->'";
  case TokenKind::Plus:
    return "'+'";
  case TokenKind::Minus:
    return "'-'";
  case TokenKind::Star:
    return "'*'";
  case TokenKind::Slash:
    return "'/'";
  case TokenKind::StarStar:
    return "'**'";
  }
  return "token";
}

// Character classes are spelled out in ASCII on purpose: <cctype> depends on the locale and
// is undefined for negative `char`s, and bytes >= 0x80 must never count as letters.
static bool isIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool isDigitChar(char c) { return c >= '0' && c <= '9'; }
static bool isIdentChar(char c) { return isIdentStart(c) || isDigitChar(c); }

/// Numbers longer than this are rejected before conversion: no real value needs it, and it
/// keeps APFloat's decimal conversion from doing quadratic work on fuzzer-sized inputs.
static constexpr size_t kMaxNumberLength = 64;
/// Integers must be exact in a double (dims sizes, seeds, step counts are integers).
static constexpr double kMaxExactInteger = 9007199254740992.0; // 2^53

Lexer::Lexer(Diagnostics &diags) : diags(diags), buffer(diags.getBuffer()) {}

SourceLoc Lexer::locAt(size_t offset) const {
  // Tokens never span lines, so every offset asked for is on the current line.
  SourceLoc loc;
  loc.line = line;
  loc.col = static_cast<unsigned>(offset - lineStart + 1);
  loc.offset = offset;
  return loc;
}

Token Lexer::makeToken(TokenKind kind, size_t begin, size_t end) const {
  Token tok;
  tok.kind = kind;
  tok.text = buffer.slice(begin, end);
  tok.range = SourceRange{locAt(begin), locAt(end)};
  return tok;
}

void Lexer::skipWhitespaceAndComments() {
  while (pos < buffer.size()) {
    char c = buffer[pos];
    if (c == '\n') {
      ++pos;
      ++line;
      lineStart = pos;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ++pos;
    } else if (c == '#') {
      // The newline itself is left for the loop so line counting stays in one place.
      while (pos < buffer.size() && buffer[pos] != '\n')
        ++pos;
    } else {
      return;
    }
  }
}

Token Lexer::lex() {
  skipWhitespaceAndComments();
  size_t start = pos;
  if (pos >= buffer.size())
    return makeToken(TokenKind::Eof, start, start);

  char c = buffer[pos];
  if (isIdentStart(c))
    return lexName(start);
  if (isDigitChar(c))
    return lexNumber(start);

  auto single = [&](TokenKind kind) {
    pos = start + 1;
    return makeToken(kind, start, pos);
  };
  switch (c) {
  case '{':
    return single(TokenKind::LBrace);
  case '}':
    return single(TokenKind::RBrace);
  case '(':
    return single(TokenKind::LParen);
  case ')':
    return single(TokenKind::RParen);
  case '[':
    return single(TokenKind::LBracket);
  case ']':
    return single(TokenKind::RBracket);
  case ',':
    return single(TokenKind::Comma);
  case '=':
    return single(TokenKind::Equal);
  case ':':
    return single(TokenKind::Colon);
  case '+':
    return single(TokenKind::Plus);
  case '/':
    return single(TokenKind::Slash);
  case '-':
    if (peekChar(start + 1) == '>') {
      pos = start + 2;
      return makeToken(TokenKind::Arrow, start, pos);
    }
    return single(TokenKind::Minus);
  case '*':
    if (peekChar(start + 1) == '*') {
      pos = start + 2;
      return makeToken(TokenKind::StarStar, start, pos);
    }
    return single(TokenKind::Star);
  case '.':
    // `.5`: clearly meant as a number; say how to write it instead of "invalid '.'".
    if (isDigitChar(peekChar(start + 1)))
      return malformedNumber(start, start + 1, "write a digit before '.', as in '0.5'");
    break;
  default:
    break;
  }
  return lexInvalid(start);
}

Token Lexer::lexName(size_t start) {
  size_t p = start;
  while (isIdentChar(peekChar(p)))
    ++p;
  // Dotted names (`ln1.g`) are one token: a '.' glued to a following identifier.
  while (peekChar(p) == '.' && isIdentStart(peekChar(p + 1))) {
    p += 2;
    while (isIdentChar(peekChar(p)))
      ++p;
  }
  pos = p;
  return makeToken(TokenKind::Name, start, p);
}

/// True if `[eE][+-]?[0-9]` starts at `p`.
static bool startsExponent(llvm::StringRef buffer, size_t p) {
  auto at = [&](size_t i) { return i < buffer.size() ? buffer[i] : '\0'; };
  if (at(p) != 'e' && at(p) != 'E')
    return false;
  if (isDigitChar(at(p + 1)))
    return true;
  return (at(p + 1) == '+' || at(p + 1) == '-') && isDigitChar(at(p + 2));
}

Token Lexer::malformedNumber(size_t start, size_t end, const llvm::Twine &why) {
  // Swallow the rest of the run (`1.2.3`, `3.x`) so one mistake gives one error.
  while (end < buffer.size() && (isIdentChar(buffer[end]) || buffer[end] == '.'))
    ++end;
  pos = end;
  Token tok = makeToken(TokenKind::Number, start, end);
  std::string msg = ("malformed number '" + tok.text + "'").str();
  if (!why.isTriviallyEmpty())
    msg += (": " + why).str();
  diags.error(tok.range, msg);
  return tok;
}

Token Lexer::lexNumber(size_t start) {
  size_t p = start;
  while (isDigitChar(peekChar(p)))
    ++p;

  // Letters glued to the digits: an exponent (`1e5`, `3e-4`) or a word like `1f1b`.
  size_t runEnd = p;
  while (isIdentChar(peekChar(runEnd)))
    ++runEnd;
  if (runEnd > p && !startsExponent(buffer, p)) {
    char c = peekChar(p);
    if ((c == 'e' || c == 'E') && runEnd == p + 1) {
      size_t end = p + 1;
      if (peekChar(end) == '+' || peekChar(end) == '-')
        ++end;
      return malformedNumber(start, end, "expected digits in the exponent");
    }
    Token tok = lexName(start);
    tok.isWord = true;
    return tok;
  }

  bool isInteger = true;
  if (peekChar(p) == '.') {
    if (!isDigitChar(peekChar(p + 1)))
      return malformedNumber(start, p + 1, "expected a digit after '.'");
    p += 1;
    while (isDigitChar(peekChar(p)))
      ++p;
    isInteger = false;
  }
  if (startsExponent(buffer, p)) {
    p += 1;
    if (peekChar(p) == '+' || peekChar(p) == '-')
      ++p;
    while (isDigitChar(peekChar(p)))
      ++p;
    isInteger = false;
  } else if (peekChar(p) == 'e' || peekChar(p) == 'E') {
    size_t end = p + 1;
    if (peekChar(end) == '+' || peekChar(end) == '-')
      ++end;
    return malformedNumber(start, end, "expected digits in the exponent");
  }
  if (isIdentChar(peekChar(p)) || peekChar(p) == '.')
    return malformedNumber(start, p, "");

  pos = p;
  Token tok = makeToken(TokenKind::Number, start, p);
  tok.isInteger = isInteger;
  if (tok.text.size() > kMaxNumberLength) {
    diags.error(tok.range, llvm::formatv("number literal is too long (more than {0} characters)",
                                         kMaxNumberLength));
    return tok;
  }
  double value = 0;
  if (tok.text.getAsDouble(value, /*AllowInexact=*/true) || !std::isfinite(value)) {
    diags.error(tok.range, "number literal is out of range");
    return tok;
  }
  // Compare the digits, not the double: 2^53 + 1 rounds to 2^53 and would slip through.
  uint64_t exact = 0;
  if (isInteger && (tok.text.getAsInteger(10, exact) ||
                    exact > static_cast<uint64_t>(kMaxExactInteger))) {
    diags.error(tok.range, "integer literal is too large (the limit is 2^53)");
    return tok;
  }
  tok.number = value;
  return tok;
}

/// Length of the well-formed UTF-8 sequence starting at `p` (2 to 4), or 0 if the bytes there
/// are not valid UTF-8 (stray continuation byte, overlong form, surrogate, truncated).
static size_t validUtf8Length(llvm::StringRef buffer, size_t p, uint32_t &codePoint) {
  auto byte = [&](size_t i) -> unsigned {
    return i < buffer.size() ? static_cast<unsigned char>(buffer[i]) : 0u;
  };
  unsigned b0 = byte(p);
  size_t len;
  unsigned lo = 0x80, hi = 0xBF; // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    codePoint = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    codePoint = b0 & 0x0F;
    if (b0 == 0xE0)
      lo = 0xA0; // overlong
    if (b0 == 0xED)
      hi = 0x9F; // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    codePoint = b0 & 0x07;
    if (b0 == 0xF0)
      lo = 0x90; // overlong
    if (b0 == 0xF4)
      hi = 0x8F; // above U+10FFFF
  } else {
    return 0;
  }
  if (p + len > buffer.size())
    return 0;
  for (size_t i = 1; i < len; ++i) {
    unsigned b = byte(p + i);
    unsigned min = i == 1 ? lo : 0x80, max = i == 1 ? hi : 0xBF;
    if (b < min || b > max)
      return 0;
    codePoint = (codePoint << 6) | (b & 0x3F);
  }
  return len;
}

Token Lexer::lexInvalid(size_t start) {
  unsigned char c = static_cast<unsigned char>(buffer[start]);
  if (c < 0x80) {
    pos = start + 1;
    Token tok = makeToken(TokenKind::Error, start, pos);
    if (llvm::isPrint(c))
      diags.error(tok.range, llvm::Twine("invalid character '") + tok.text + "'");
    else
      diags.error(tok.range, llvm::formatv("invalid character 0x{0:X-2}", unsigned(c)));
    return tok;
  }
  uint32_t codePoint = 0;
  size_t len = validUtf8Length(buffer, start, codePoint);
  if (len == 0) {
    pos = start + 1;
    Token tok = makeToken(TokenKind::Error, start, pos);
    diags.error(tok.range, llvm::formatv("invalid UTF-8 byte 0x{0:X-2}", unsigned(c)));
    return tok;
  }
  pos = start + len;
  Token tok = makeToken(TokenKind::Error, start, pos);
  diags.error(tok.range, llvm::formatv("invalid character '{0}' (U+{1:X-4})", tok.text, codePoint));
  return tok;
}

std::vector<Token> Lexer::lexAll() {
  std::vector<Token> tokens;
  do {
    tokens.push_back(lex());
  } while (!tokens.back().is(TokenKind::Eof));
  return tokens;
}
