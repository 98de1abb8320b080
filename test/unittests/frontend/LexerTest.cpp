//===- LexerTest.cpp - Tests of the .mtl lexer ----------------------------===//

#include "frontend/Lexer.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <string>
#include <vector>

using namespace mtc::frontend;

namespace {

/// Lexes `source` and keeps the buffer alive as long as the tokens (their text points into
/// it) and the printed diagnostics.
class Lexed {
public:
  explicit Lexed(llvm::StringRef source) : os(output) {
    unsigned id = sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(source, "test.mtl"), llvm::SMLoc());
    diags = std::make_unique<Diagnostics>(sourceMgr, id, os);
    Lexer lexer(*diags);
    tokens = lexer.lexAll();
  }

  std::vector<TokenKind> kinds() const {
    std::vector<TokenKind> result;
    for (const Token &t : tokens)
      result.push_back(t.kind);
    return result;
  }
  std::vector<std::string> texts() const {
    std::vector<std::string> result;
    for (const Token &t : tokens)
      if (!t.is(TokenKind::Eof))
        result.push_back(t.text.str());
    return result;
  }
  unsigned errors() const { return diags->numErrors(); }

  llvm::SourceMgr sourceMgr;
  std::string output;
  llvm::raw_string_ostream os;
  std::unique_ptr<Diagnostics> diags;
  std::vector<Token> tokens;
};

using K = TokenKind;

TEST(LexerTest, PunctuationAndOperators) {
  Lexed l("{ } ( ) [ ] , = : -> + - * / **");
  EXPECT_EQ(l.kinds(), (std::vector<K>{K::LBrace, K::RBrace, K::LParen, K::RParen, K::LBracket,
                                       K::RBracket, K::Comma, K::Equal, K::Colon, K::Arrow, K::Plus,
                                       K::Minus, K::Star, K::Slash, K::StarStar, K::Eof}));
  EXPECT_EQ(l.errors(), 0u);
}

TEST(LexerTest, OperatorsWithoutSpaces) {
  // `->` and `**` are maximal munch; `a-b` is three tokens, `x*-y` is four.
  Lexed l("a->b**c-d*-e");
  EXPECT_EQ(l.kinds(), (std::vector<K>{K::Name, K::Arrow, K::Name, K::StarStar, K::Name, K::Minus,
                                       K::Name, K::Star, K::Minus, K::Name, K::Eof}));
}

TEST(LexerTest, NamesAndKeywordsAreNames) {
  Lexed l("model gpt _x x_1 loss init layout auto return");
  for (size_t i = 0; i + 1 < l.tokens.size(); ++i) {
    EXPECT_EQ(l.tokens[i].kind, K::Name);
    EXPECT_FALSE(l.tokens[i].isWord);
  }
  EXPECT_EQ(l.texts(), (std::vector<std::string>{"model", "gpt", "_x", "x_1", "loss", "init",
                                                 "layout", "auto", "return"}));
  EXPECT_TRUE(l.tokens[4].isName("loss"));
}

TEST(LexerTest, DottedNames) {
  Lexed l("ln1.g lnf.b a.b.c x. y .z w.1");
  // `x.` (dot then space), `.z` and `w.1` are not dotted names.
  EXPECT_EQ(l.tokens[0].text, "ln1.g");
  EXPECT_EQ(l.tokens[1].text, "lnf.b");
  EXPECT_EQ(l.tokens[2].text, "a.b.c");
  EXPECT_EQ(l.tokens[3].text, "x");
  EXPECT_EQ(l.tokens[4].kind, K::Error); // '.'
  EXPECT_EQ(l.tokens[5].text, "y");
  EXPECT_GE(l.errors(), 3u);
}

TEST(LexerTest, IntegerAndFloatNumbers) {
  Lexed l("3 0.02 3e-4 1.5E+3 10 2e3");
  ASSERT_EQ(l.tokens.size(), 7u);
  struct Expected {
    double value;
    bool isInteger;
  } expected[] = {{3, true},      {0.02, false}, {3e-4, false},
                  {1.5e3, false}, {10, true},    {2e3, false}};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(l.tokens[i].kind, K::Number) << i;
    EXPECT_DOUBLE_EQ(l.tokens[i].number, expected[i].value) << i;
    EXPECT_EQ(l.tokens[i].isInteger, expected[i].isInteger) << i;
  }
  EXPECT_EQ(l.errors(), 0u);
}

TEST(LexerTest, ExponentIsPartOfTheNumber) {
  Lexed l("3e-4-1");
  EXPECT_EQ(l.kinds(), (std::vector<K>{K::Number, K::Minus, K::Number, K::Eof}));
  EXPECT_EQ(l.tokens[0].text, "3e-4");
}

TEST(LexerTest, WordsLike1f1b) {
  Lexed l("1f1b 2d 1ex 1f1b.x");
  ASSERT_EQ(l.tokens.size(), 5u);
  EXPECT_EQ(l.texts(), (std::vector<std::string>{"1f1b", "2d", "1ex", "1f1b.x"}));
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(l.tokens[i].kind, K::Name);
    EXPECT_TRUE(l.tokens[i].isWord);
    EXPECT_FALSE(l.tokens[i].isIdentifier());
  }
  EXPECT_EQ(l.errors(), 0u);
}

TEST(LexerTest, CommentsAndNewlinesAreWhitespace) {
  Lexed l("a # comment with $ and \xff bytes\n  b#another\n# only\nc");
  EXPECT_EQ(l.texts(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(l.errors(), 0u);
}

TEST(LexerTest, CommentAtEndOfFileWithoutNewline) {
  Lexed l("x # trailing");
  EXPECT_EQ(l.kinds(), (std::vector<K>{K::Name, K::Eof}));
}

TEST(LexerTest, LocationsAreLineColumnAndOffset) {
  Lexed l("a\n  bc = 1\n\tx");
  const Token &bc = l.tokens[1];
  EXPECT_EQ(bc.range.begin.line, 2u);
  EXPECT_EQ(bc.range.begin.col, 3u);
  EXPECT_EQ(bc.range.begin.offset, 4u);
  EXPECT_EQ(bc.range.end.col, 5u);
  EXPECT_EQ(bc.range.end.offset, 6u);
  const Token &x = l.tokens[4];
  EXPECT_EQ(x.range.begin.line, 3u);
  EXPECT_EQ(x.range.begin.col, 2u); // columns count bytes, like SourceMgr
  const Token &eof = l.tokens.back();
  EXPECT_EQ(eof.kind, K::Eof);
  EXPECT_EQ(eof.range.begin.offset, 13u);
}

TEST(LexerTest, EmptyInputIsJustEof) {
  Lexed l("");
  EXPECT_EQ(l.kinds(), (std::vector<K>{K::Eof}));
  Lexed l2(" \n\t\r\n # c");
  EXPECT_EQ(l2.kinds(), (std::vector<K>{K::Eof}));
}

TEST(LexerTest, InvalidCharacterNamed) {
  Lexed l("a $ b");
  EXPECT_EQ(l.kinds(), (std::vector<K>{K::Name, K::Error, K::Name, K::Eof}));
  EXPECT_EQ(l.errors(), 1u);
  EXPECT_EQ(l.output, "test.mtl:1:3: error: invalid character '$'\n"
                      "a $ b\n"
                      "  ^\n");
}

TEST(LexerTest, NonPrintableCharacterInHex) {
  Lexed l(llvm::StringRef("a\x01z", 3));
  EXPECT_EQ(l.errors(), 1u);
  EXPECT_NE(l.output.find("test.mtl:1:2: error: invalid character 0x01"), std::string::npos)
      << l.output;
}

TEST(LexerTest, EmbeddedNulIsAnInvalidCharacterNotTheEnd) {
  Lexed l(llvm::StringRef("a\0b", 3));
  EXPECT_EQ(l.kinds(), (std::vector<K>{K::Name, K::Error, K::Name, K::Eof}));
  EXPECT_NE(l.output.find("invalid character 0x00"), std::string::npos) << l.output;
}

TEST(LexerTest, InvalidUtf8Byte) {
  Lexed l("x \xff y \xc3");
  EXPECT_EQ(l.kinds(), (std::vector<K>{K::Name, K::Error, K::Name, K::Error, K::Eof}));
  EXPECT_EQ(l.errors(), 2u);
  EXPECT_NE(l.output.find("test.mtl:1:3: error: invalid UTF-8 byte 0xFF"), std::string::npos)
      << l.output;
  // A truncated sequence at the very end is reported without reading past the buffer.
  EXPECT_NE(l.output.find("test.mtl:1:7: error: invalid UTF-8 byte 0xC3"), std::string::npos)
      << l.output;
}

TEST(LexerTest, ValidUtf8CharacterIsNamed) {
  Lexed l("a \xc3\xa9 \xe2\x86\x92 b"); // é and →
  EXPECT_EQ(l.kinds(), (std::vector<K>{K::Name, K::Error, K::Error, K::Name, K::Eof}));
  EXPECT_EQ(l.tokens[1].text.size(), 2u);
  EXPECT_EQ(l.tokens[2].text.size(), 3u);
  EXPECT_NE(l.output.find("invalid character '\xc3\xa9' (U+00E9)"), std::string::npos) << l.output;
  EXPECT_NE(l.output.find("invalid character '\xe2\x86\x92' (U+2192)"), std::string::npos)
      << l.output;
}

TEST(LexerTest, OverlongAndSurrogateUtf8AreInvalid) {
  Lexed l("\xc0\xaf \xed\xa0\x80");
  // Every byte of an ill-formed sequence is its own error.
  EXPECT_EQ(l.errors(), 5u);
  EXPECT_NE(l.output.find("invalid UTF-8 byte 0xC0"), std::string::npos) << l.output;
  EXPECT_NE(l.output.find("invalid UTF-8 byte 0xED"), std::string::npos) << l.output;
}

TEST(LexerTest, MalformedExponent) {
  Lexed l("x = 1e + 2");
  EXPECT_EQ(l.errors(), 1u);
  EXPECT_EQ(l.output, "test.mtl:1:5: error: malformed number '1e': expected digits in the "
                      "exponent\n"
                      "x = 1e + 2\n"
                      "    ^~\n");
  // The bad number still yields a Number token so the parser does not cascade.
  EXPECT_EQ(l.tokens[2].kind, K::Number);
  EXPECT_EQ(l.tokens[3].kind, K::Plus);
}

TEST(LexerTest, MalformedExponentWithSign) {
  Lexed l("1e-x 2.5e");
  EXPECT_EQ(l.errors(), 2u);
  EXPECT_NE(l.output.find("malformed number '1e-x'"), std::string::npos) << l.output;
  EXPECT_NE(l.output.find("malformed number '2.5e'"), std::string::npos) << l.output;
}

TEST(LexerTest, MalformedDottedNumber) {
  Lexed l("a 1.2.3 b");
  EXPECT_EQ(l.kinds(), (std::vector<K>{K::Name, K::Number, K::Name, K::Eof}));
  EXPECT_EQ(l.tokens[1].text, "1.2.3");
  EXPECT_EQ(l.errors(), 1u);
  EXPECT_EQ(l.output, "test.mtl:1:3: error: malformed number '1.2.3'\n"
                      "a 1.2.3 b\n"
                      "  ^~~~~\n");
}

TEST(LexerTest, OtherMalformedNumbers) {
  Lexed l("3. 1.5x .5");
  EXPECT_EQ(l.errors(), 3u);
  EXPECT_NE(l.output.find("malformed number '3.': expected a digit after '.'"), std::string::npos)
      << l.output;
  EXPECT_NE(l.output.find("malformed number '1.5x'"), std::string::npos) << l.output;
  EXPECT_NE(l.output.find("malformed number '.5': write a digit before '.'"), std::string::npos)
      << l.output;
}

TEST(LexerTest, NumbersOutOfRange) {
  Lexed l("1e999 99999999999999999999 "
          "0.0000000000000000000000000000000000000000000000000000000000000000001");
  EXPECT_EQ(l.errors(), 3u);
  EXPECT_NE(l.output.find("number literal is out of range"), std::string::npos) << l.output;
  EXPECT_NE(l.output.find("integer literal is too large"), std::string::npos) << l.output;
  EXPECT_NE(l.output.find("number literal is too long"), std::string::npos) << l.output;
}

TEST(LexerTest, EofRepeats) {
  llvm::SourceMgr sm;
  unsigned id = sm.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy("x", "t"), {});
  Diagnostics diags(sm, id, llvm::nulls());
  Lexer lexer(diags);
  EXPECT_EQ(lexer.lex().kind, K::Name);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(lexer.lex().kind, K::Eof);
}

} // namespace
