//===- DiagnosticsTest.cpp - Tests of .mtl error reporting ----------------===//

#include "frontend/Diagnostics.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <string>

using namespace mtc::frontend;

namespace {

class DiagnosticsTest : public ::testing::Test {
protected:
  void load(llvm::StringRef source) {
    bufferId = sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(source, "model.mtl"), llvm::SMLoc());
    diags = std::make_unique<Diagnostics>(sourceMgr, bufferId, os);
  }

  /// A range on one line, from 1-based column `col` spanning `length` bytes.
  static SourceRange span(unsigned line, unsigned col, size_t offset, size_t length) {
    return SourceRange{SourceLoc{line, col, offset},
                       SourceLoc{line, static_cast<unsigned>(col + length), offset + length}};
  }

  llvm::SourceMgr sourceMgr;
  unsigned bufferId = 0;
  std::string output;
  llvm::raw_string_ostream os{output};
  std::unique_ptr<Diagnostics> diags;
};

TEST_F(DiagnosticsTest, ErrorWithCaretAndRange) {
  load("dims { seq = 256 }\nmodel gpt { param w[sq] }\n");
  // `sq` is at line 2, column 21, offset 19 + 20.
  diags->error(span(2, 21, 39, 2), "unknown dimension 'sq'");
  EXPECT_EQ(output, "model.mtl:2:21: error: unknown dimension 'sq'\n"
                    "model gpt { param w[sq] }\n"
                    "                    ^~\n");
  EXPECT_EQ(diags->numErrors(), 1u);
}

TEST_F(DiagnosticsTest, SingleCharacterRangeIsJustACaret) {
  load("a + b");
  diags->error(span(1, 3, 2, 1), "bad operator");
  EXPECT_EQ(output, "model.mtl:1:3: error: bad operator\na + b\n  ^\n");
}

TEST_F(DiagnosticsTest, NoteFollowsItsError) {
  load("model m {\n  x\n");
  diags->error(span(3, 1, 14, 0), "expected '}'");
  diags->note(span(1, 9, 8, 1), "'model' block opened here");
  EXPECT_EQ(output, "model.mtl:3:1: error: expected '}'\n"
                    "\n"
                    "^\n"
                    "model.mtl:1:9: note: 'model' block opened here\n"
                    "model m {\n"
                    "        ^\n");
  EXPECT_EQ(diags->numErrors(), 1u); // notes are not errors
}

TEST_F(DiagnosticsTest, RangeSpanningLinesIsClippedToTheFirstLine) {
  load("abc def\nghi\n");
  diags->error(span(1, 5, 4, 7), "spans two lines");
  EXPECT_EQ(output, "model.mtl:1:5: error: spans two lines\n"
                    "abc def\n"
                    "    ^~~\n");
}

TEST_F(DiagnosticsTest, OutOfBoundsLocationsAreClamped) {
  load("x");
  SourceRange wild{SourceLoc{9, 9, 1000}, SourceLoc{1, 1, 0}};
  llvm::SMRange r = diags->toSMRange(wild);
  llvm::StringRef buffer = sourceMgr.getMemoryBuffer(bufferId)->getBuffer();
  EXPECT_EQ(r.Start.getPointer(), buffer.end());
  EXPECT_EQ(r.End.getPointer(), buffer.end()); // end never precedes begin
  EXPECT_EQ(diags->toSMLoc(SourceLoc{1, 1, 0}).getPointer(), buffer.begin());
  diags->error(wild, "still printable");
  EXPECT_NE(output.find("model.mtl:1:2: error: still printable"), std::string::npos) << output;
}

TEST_F(DiagnosticsTest, TooManyErrors) {
  load("a b c\n");
  for (unsigned i = 0; i < Diagnostics::kErrorLimit + 5; ++i) {
    diags->error(span(1, 1, 0, 1), "error number " + llvm::Twine(i));
    diags->note(span(1, 3, 2, 1), "note number " + llvm::Twine(i));
  }
  EXPECT_EQ(diags->numErrors(), Diagnostics::kErrorLimit + 5);
  EXPECT_TRUE(diags->reachedErrorLimit());
  EXPECT_NE(output.find("error number 19\n"), std::string::npos);
  EXPECT_NE(output.find("note number 19\n"), std::string::npos);
  EXPECT_EQ(output.find("error number 20"), std::string::npos);
  EXPECT_EQ(output.find("note number 20"), std::string::npos);
  // Exactly one "too many errors", last.
  llvm::StringRef line = "model.mtl:1:1: error: too many errors emitted, stopping now\n";
  size_t tooMany = output.find(line.str());
  ASSERT_NE(tooMany, std::string::npos) << output;
  EXPECT_EQ(output.find("too many errors", tooMany + line.size()), std::string::npos);
  EXPECT_EQ(output.find("error number", tooMany), std::string::npos);
}

TEST_F(DiagnosticsTest, UnderTheLimitNothingIsSuppressed) {
  load("x\n");
  for (unsigned i = 0; i < Diagnostics::kErrorLimit; ++i)
    diags->error(span(1, 1, 0, 1), "e");
  EXPECT_FALSE(diags->reachedErrorLimit());
  EXPECT_EQ(output.find("too many"), std::string::npos);
}

TEST_F(DiagnosticsTest, NonAsciiSourceLinesPrint) {
  // The source line is printed as is; the caret column counts bytes before it.
  load(llvm::StringRef("a \xff\0 b", 6));
  diags->error(span(1, 6, 5, 1), "after junk");
  EXPECT_NE(output.find("model.mtl:1:6: error: after junk"), std::string::npos) << output;
}

} // namespace
