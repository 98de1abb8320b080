//===- TokenizerTest.cpp - GPT-2 BPE, SentencePiece and byte tokenizers ---===//
//
// The pieces of GPT-2's tokenizer on hand-made cases (the byte table, the pattern's splits,
// BPE merges by rank), round trips of arbitrary bytes, and Megatron's SentencePiece wrappers
// on the small model of the mtc-data tests. The ids of whole texts are compared with the
// reference implementations in test/tools/mtc-data/tokenizers.test.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/Tokenizer.h"
#include "runtime/data/Gpt2BpeTokenizer.h"
#include "runtime/data/SentencePieceTokenizer.h"
#include "runtime/support/RegularFile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

using namespace mtc::rt;

namespace {

const std::filesystem::path kInputs = MTC_TOKENIZER_INPUTS;

std::string utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s.push_back(char(c));
  } else {
    s.push_back(char(0xc0 | (c >> 6)));
    s.push_back(char(0x80 | (c & 0x3f)));
  }
  return s;
}

/// `bytes` as vocab.json and merges.txt write them.
std::string spell(std::string_view bytes) {
  std::string s;
  for (char b : bytes)
    s += utf8(gpt2ByteToUnicode()[static_cast<unsigned char>(b)]);
  return s;
}

/// A vocabulary of the 256 bytes (id = byte), then the results of `merges` in order, then
/// "<|endoftext|>"; merges are given as byte strings "left right".
Expected<std::unique_ptr<Gpt2BpeTokenizer>>
handMade(const std::vector<std::pair<std::string, std::string>> &merges) {
  std::string vocab = "{";
  for (int b = 0; b < 256; ++b) {
    std::string key = spell(std::string(1, char(b)));
    if (key == "\"" || key == "\\")
      key = "\\" + key;
    vocab += concat(b ? ", " : "", "\"", key, "\": ", b);
  }
  std::string text = "#version: 0.2\n";
  int id = 256;
  for (const auto &[left, right] : merges) {
    vocab += concat(", \"", spell(left + right), "\": ", id++);
    text += concat(spell(left), " ", spell(right), "\n");
  }
  vocab += concat(", \"<|endoftext|>\": ", id, "}");
  return Gpt2BpeTokenizer::create(vocab, text, "vocab.json", "merges.txt");
}

std::vector<int64_t> encode(Tokenizer &t, std::string_view text) {
  std::vector<int64_t> ids;
  Error err = t.encode(text, ids);
  EXPECT_TRUE(err.ok()) << err.message();
  return ids;
}

std::string decode(Tokenizer &t, const std::vector<int64_t> &ids) {
  std::string text;
  Error err = t.decode(ids, text);
  EXPECT_TRUE(err.ok()) << err.message();
  return text;
}

std::vector<std::string> split(std::string_view text) {
  Expected<Gpt2Pretokenizer> p = Gpt2Pretokenizer::create();
  EXPECT_TRUE(p.ok()) << p.error().message();
  std::vector<std::string_view> pieces;
  Error err = p->split(text, pieces);
  EXPECT_TRUE(err.ok()) << err.message();
  return {pieces.begin(), pieces.end()};
}

using Pieces = std::vector<std::string>;

TEST(Gpt2ByteToUnicode, PrintableBytesAreThemselvesTheOthersFollowU0100) {
  const auto &table = gpt2ByteToUnicode();
  EXPECT_EQ(table['!'], U'!');
  EXPECT_EQ(table['~'], U'~');
  EXPECT_EQ(table[0xa1], U'\u00a1');
  EXPECT_EQ(table[0xff], U'\u00ff');
  EXPECT_EQ(table[0], U'\u0100');
  EXPECT_EQ(table['\n'], U'\u010a'); // "Ċ"
  EXPECT_EQ(table[' '], U'\u0120');  // "Ġ"
  EXPECT_EQ(table[0x7f], U'\u0121');
  EXPECT_EQ(table[0x80], U'\u0122');
  EXPECT_EQ(table[0xa0], U'\u0142');
  EXPECT_EQ(table[0xad], U'\u0143');
  std::set<char32_t> distinct(table.begin(), table.end());
  EXPECT_EQ(distinct.size(), 256u);
}

TEST(Gpt2Pretokenizer, WordsNumbersAndPunctuationTakeOneLeadingSpace) {
  EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("abc123 456!? x"), (Pieces{"abc", "123", " 456", "!?", " x"}));
  EXPECT_EQ(split("café naïve 日本語"), (Pieces{"café", " naïve", " 日本語"}));
  EXPECT_EQ(split("½ Ⅻ"), (Pieces{"½", " Ⅻ"})); // \p{N} is every number, not only digits
  EXPECT_EQ(split("a 😀👍"), (Pieces{"a", " 😀👍"}));
}

TEST(Gpt2Pretokenizer, OnlyLowercaseContractions) {
  EXPECT_EQ(split("I'm it's we're they've you'll she'd don't"),
            (Pieces{"I", "'m", " it", "'s", " we", "'re", " they", "'ve", " you", "'ll", " she",
                    "'d", " don", "'t"}));
  EXPECT_EQ(split("IT'S"), (Pieces{"IT", "'", "S"}));
  EXPECT_EQ(split("'s'tis"), (Pieces{"'s", "'t", "is"}));
  EXPECT_EQ(split("rock 'n' roll"), (Pieces{"rock", " '", "n", "'", " roll"}));
}

TEST(Gpt2Pretokenizer, WhitespaceRunsLeaveTheirLastCharacterToWhatFollows) {
  // Only a space joins the word after it; any other last character is a piece of its own.
  EXPECT_EQ(split("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(split("a\t\tb"), (Pieces{"a", "\t", "\t", "b"}));
  EXPECT_EQ(split("a  "), (Pieces{"a", "  "}));
  EXPECT_EQ(split("a\n\n\nb"), (Pieces{"a", "\n\n", "\n", "b"}));
  EXPECT_EQ(split("a \n b"), (Pieces{"a", " \n", " b"}));
  EXPECT_EQ(split("a\u00a0\u3000b"), (Pieces{"a", "\u00a0", "\u3000", "b"}));
}

TEST(Gpt2Pretokenizer, WhiteSpaceIsUnicodesNotPcre2s) {
  // U+180E is no White_Space (Python's `regex`), though PCRE2's \s takes it: with the space
  // before it, it is punctuation, not a whitespace run.
  EXPECT_EQ(split("x \u180e! y"), (Pieces{"x", " \u180e!", " y"}));
  EXPECT_EQ(split("x\x1c y"), (Pieces{"x", "\x1c", " y"}));
}

TEST(Gpt2Pretokenizer, BytesThatAreNotUtf8ArePiecesOfTheirOwn) {
  EXPECT_EQ(split("ab\xff\xfe cd"), (Pieces{"ab", "\xff\xfe", " cd"}));
  EXPECT_EQ(split("\xc3"), (Pieces{"\xc3"}));                         // cut character
  EXPECT_EQ(split("é\x80x"), (Pieces{"é", "\x80", "x"}));             // stray continuation byte
  EXPECT_EQ(split("\xed\xa0\x80 x"), (Pieces{"\xed\xa0\x80", " x"})); // a surrogate
  EXPECT_EQ(split(std::string_view("a\0b", 3)), (Pieces{"a", std::string("\0", 1), "b"}));
}

TEST(Gpt2BpeTokenizer, MergesTheLowestRankFirst) {
  auto bc = handMade({{"b", "c"}, {"a", "b"}});
  ASSERT_TRUE(bc.ok()) << bc.error().message();
  EXPECT_EQ(encode(**bc, "abc"), (std::vector<int64_t>{'a', 256}));
  auto ab = handMade({{"a", "b"}, {"b", "c"}});
  ASSERT_TRUE(ab.ok()) << ab.error().message();
  EXPECT_EQ(encode(**ab, "abc"), (std::vector<int64_t>{256, 'c'}));
  EXPECT_EQ((*ab)->eod(), 258);
  EXPECT_EQ((*ab)->vocabSize(), 259);
  EXPECT_EQ((*ab)->numMerges(), 2u);
}

TEST(Gpt2BpeTokenizer, MergesEveryOccurrenceLeftToRight) {
  auto t = handMade({{"a", "a"}, {"aa", "aa"}});
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(encode(**t, "aaa"), (std::vector<int64_t>{256, 'a'}));
  EXPECT_EQ(encode(**t, "aaaa"), (std::vector<int64_t>{257}));
  EXPECT_EQ(encode(**t, "aaaaa"), (std::vector<int64_t>{257, 'a'}));
  // Cached pieces give the same ids.
  EXPECT_EQ(encode(**t, "aaaaa aaaaa"), (std::vector<int64_t>{257, 'a', ' ', 257, 'a'}));
}

TEST(Gpt2BpeTokenizer, MergesBuildWordsAcrossTheLeadingSpace) {
  auto t = handMade({{" ", "l"}, {"o", "w"}, {" l", "ow"}});
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(encode(**t, "low low"), (std::vector<int64_t>{'l', 257, 258}));
  // Merges never cross pieces: "w" and " " are in different ones.
  EXPECT_EQ(encode(**t, "ow low"), (std::vector<int64_t>{257, 258}));
}

TEST(Gpt2BpeTokenizer, EndOfTextInTheTextIsText) {
  auto t = handMade({});
  ASSERT_TRUE(t.ok()) << t.error().message();
  std::vector<int64_t> ids = encode(**t, "<|endoftext|>");
  EXPECT_EQ(ids.size(), 13u);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), (*t)->eod()), 0);
  EXPECT_EQ(decode(**t, {(*t)->eod()}), "<|endoftext|>");
}

TEST(Gpt2BpeTokenizer, DecodeInvertsEncodeForAnyBytes) {
  Expected<std::string> vocab = readInputFile(kInputs / "gpt2-vocab.json");
  Expected<std::string> merges = readInputFile(kInputs / "gpt2-merges.txt");
  ASSERT_TRUE(vocab.ok() && merges.ok());
  auto t = Gpt2BpeTokenizer::create(*vocab, *merges, "vocab.json", "merges.txt");
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ((*t)->numMerges(), 1704u);
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {"a",    "e",  "the", " ",  "  ", "\n",    "\t",
                                             "'s",   "'S", "é",   "日", "😀", "\xff",  "\xc3",
                                             "\x80", "1",  "!",   "\0", "ℝ",  "\u180e"};
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    int n = int(rng() % 40);
    for (int i = 0; i < n; ++i) {
      if (rng() % 4 == 0)
        text.push_back(char(rng() % 256)); // any byte
      else
        text += alphabet[rng() % alphabet.size()];
    }
    std::vector<int64_t> ids = encode(**t, text);
    ASSERT_EQ(decode(**t, ids), text) << "round " << round;
    for (int64_t id : ids)
      ASSERT_TRUE(id >= 0 && id < (*t)->vocabSize());
  }
}

TEST(Gpt2BpeTokenizer, DecodeRefusesIdsOutsideTheVocabulary) {
  auto t = handMade({});
  ASSERT_TRUE(t.ok());
  std::string text;
  Error err = (*t)->decode(std::vector<int64_t>{97, 300}, text);
  EXPECT_EQ(err.message(), "token id 300 is outside the vocabulary of 257");
  err = (*t)->decode(std::vector<int64_t>{-1}, text);
  EXPECT_EQ(err.message(), "token id -1 is outside the vocabulary of 257");
}

TEST(Gpt2BpeTokenizer, MergesFileErrorsNameTheLine) {
  std::string vocab = "{";
  for (int b = 0; b < 256; ++b)
    vocab += concat(b ? ", " : "", "\"", b == '"' || b == '\\' ? "\\" : "",
                    spell(std::string(1, char(b))), "\": ", b);
  vocab += ", \"ab\": 256, \"<|endoftext|>\": 257, \"\u20ac\": 258}";
  auto t = Gpt2BpeTokenizer::create(vocab, "a b\n\n", "v", "m");
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ((*t)->numMerges(), 1u);
  // A vocab.json key outside the byte table cannot be decoded.
  std::string text;
  EXPECT_EQ((*t)->decode(std::vector<int64_t>{258}, text).message(),
            "token id 258 is not a byte-level token of the vocabulary");
  EXPECT_EQ(Gpt2BpeTokenizer::create(vocab, "#version: 0.2\na b c\n", "v", "m").error().message(),
            "m:2: expected two symbols separated by a space, got \"a b c\"");
  EXPECT_EQ(Gpt2BpeTokenizer::create(vocab, "a\n", "v", "m").error().message(),
            "m:1: expected two symbols separated by a space, got \"a\"");
  EXPECT_EQ(Gpt2BpeTokenizer::create(vocab, "ab a\n", "v", "m").error().message(),
            "m:1: the merge of \"ab\" and \"a\", \"aba\", is not a token of v");
  EXPECT_EQ(Gpt2BpeTokenizer::create(vocab, "x yy\n", "v", "m").error().message(),
            "m:1: \"yy\" is not a token of v");
}

std::unique_ptr<SentencePieceTokenizer> sentencePiece(SentencePieceTokenizer::Flavor flavor,
                                                      int64_t extraIds = 0) {
  Expected<std::string> model = readInputFile(kInputs / "spm.model");
  EXPECT_TRUE(model.ok()) << model.error().message();
  auto t = SentencePieceTokenizer::create(*model, "spm.model", flavor, extraIds);
  EXPECT_TRUE(t.ok()) << t.error().message();
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(SentencePieceTokenizer, MegatronAddsItsTokensAfterThePieces) {
  auto t = sentencePiece(SentencePieceTokenizer::Flavor::Megatron);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->name(), "SentencePieceTokenizer");
  EXPECT_EQ(t->numPieces(), 1000);
  // The model has <s> (1) and </s> (2) but no pad piece.
  using Tokens = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(t->specialTokens(), (Tokens{{"<CLS>", 1000},
                                        {"<SEP>", 1001},
                                        {"<EOD>", 1002},
                                        {"<MASK>", 1003},
                                        {"<PAD>", 1004},
                                        {"<s>", 1},
                                        {"</s>", 2}}));
  EXPECT_EQ(t->vocabSize(), 1005);
  EXPECT_EQ(t->eod(), 1002);
}

TEST(SentencePieceTokenizer, MegatronEncodesItsTokensInTheTextAsThemselves) {
  auto t = sentencePiece(SentencePieceTokenizer::Flavor::Megatron);
  auto plain = sentencePiece(SentencePieceTokenizer::Flavor::Gpt);
  ASSERT_TRUE(t && plain);
  std::vector<int64_t> expected = encode(*plain, "free");
  expected.push_back(1002);
  expected.push_back(1);
  std::vector<int64_t> rest = encode(*plain, " software");
  expected.insert(expected.end(), rest.begin(), rest.end());
  EXPECT_EQ(encode(*t, "free<EOD><s> software"), expected);
  // Decoding writes them between spaces, as Megatron's detokenize.
  EXPECT_EQ(decode(*t, expected), "free <EOD>  <s>  software");
}

// Megatron's --vocab-extra-ids: <extra_id_0> ... after the other added tokens, found in the
// text and decoded as they are.
TEST(SentencePieceTokenizer, VocabExtraIdsAddT5Sentinels) {
  auto t = sentencePiece(SentencePieceTokenizer::Flavor::Megatron, 12);
  auto plain = sentencePiece(SentencePieceTokenizer::Flavor::Gpt);
  ASSERT_TRUE(t && plain);
  EXPECT_EQ(t->vocabSize(), 1005 + 12);
  EXPECT_EQ(t->eod(), 1002);
  ASSERT_EQ(t->specialTokens().size(), 7u + 12u);
  EXPECT_EQ(t->specialTokens()[7], (std::pair<std::string, int64_t>{"<extra_id_0>", 1005}));
  EXPECT_EQ(t->specialTokens()[18], (std::pair<std::string, int64_t>{"<extra_id_11>", 1016}));
  // <extra_id_1> is not found inside <extra_id_11>: the closing '>' tells them apart.
  std::vector<int64_t> expected = encode(*plain, "the");
  expected.push_back(1016);
  std::vector<int64_t> rest = encode(*plain, "Program");
  expected.insert(expected.end(), rest.begin(), rest.end());
  expected.push_back(1006);
  EXPECT_EQ(encode(*t, "the<extra_id_11>Program<extra_id_1>"), expected);
  EXPECT_EQ(decode(*t, expected), "the <extra_id_11> Program <extra_id_1> ");
  // Past N a sentinel is text.
  EXPECT_EQ(encode(*t, "<extra_id_12>"), encode(*plain, "<extra_id_12>"));
  // Without the option, none.
  EXPECT_EQ(sentencePiece(SentencePieceTokenizer::Flavor::Megatron)->vocabSize(), 1005);
}

TEST(SentencePieceTokenizer, Llama2StartsEveryTextWithBos) {
  auto llama = sentencePiece(SentencePieceTokenizer::Flavor::Llama2);
  auto gpt = sentencePiece(SentencePieceTokenizer::Flavor::Gpt);
  ASSERT_TRUE(llama && gpt);
  EXPECT_EQ(encode(*llama, ""), (std::vector<int64_t>{1}));
  std::vector<int64_t> ids = encode(*gpt, "the Program");
  ids.insert(ids.begin(), 1);
  EXPECT_EQ(encode(*llama, "the Program"), ids);
  EXPECT_EQ(decode(*llama, ids), "the Program");
  EXPECT_EQ(llama->eod(), 2);
  EXPECT_EQ(gpt->eod(), 2);
  EXPECT_EQ(llama->vocabSize(), 1000);
  // Byte fallback: characters the model never saw round-trip through byte pieces.
  EXPECT_EQ(decode(*gpt, encode(*gpt, "日本 😀 x")), "日本 😀 x");
  std::string text;
  EXPECT_EQ(gpt->decode(std::vector<int64_t>{5, 1000}, text).message(),
            "token id 1000 is outside the vocabulary of 1000");
}

TEST(SentencePieceTokenizer, RefusesWhatIsNotAModel) {
  auto t =
      SentencePieceTokenizer::create("not a model", "x.model", SentencePieceTokenizer::Flavor::Gpt);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message().rfind("x.model: not a SentencePiece model (sentencepiece: ", 0), 0u)
      << t.error().message();
}

TEST(ByteTokenizer, RoundTripsAndRefusesIdsAbove255) {
  ByteTokenizer t;
  EXPECT_EQ(encode(t, "a\xff"), (std::vector<int64_t>{97, 255}));
  EXPECT_EQ(decode(t, {97, 255}), "a\xff");
  std::string text;
  EXPECT_EQ(t.decode(std::vector<int64_t>{256}, text).message(),
            "token id 256 is outside the vocabulary of 256");
}

TEST(MakeTokenizer, ChecksTheFilesForTheType) {
  TokenizerOptions options;
  EXPECT_EQ((*makeTokenizer(options))->name(), "bytes");
  options.type = "GPT2BPETokenizer";
  options.vocabFile = kInputs / "gpt2-vocab.json";
  EXPECT_EQ(makeTokenizer(options).error().message(),
            "tokenizer type GPT2BPETokenizer needs --vocab-file (vocab.json) and --merge-file "
            "(merges.txt)");
  options.mergeFile = kInputs / "gpt2-merges.txt";
  Expected<std::unique_ptr<Tokenizer>> gpt2 = makeTokenizer(options);
  ASSERT_TRUE(gpt2.ok()) << gpt2.error().message();
  EXPECT_EQ((*gpt2)->eod(), 1960);
  options.tokenizerModel = kInputs / "spm.model";
  EXPECT_EQ(makeTokenizer(options).error().message(),
            "--tokenizer-model does not apply to tokenizer type GPT2BPETokenizer");
  options.type = "Llama2Tokenizer";
  EXPECT_EQ(makeTokenizer(options).error().message(),
            "--vocab-file does not apply to tokenizer type Llama2Tokenizer");
  options.vocabFile.clear();
  options.mergeFile.clear();
  EXPECT_TRUE(makeTokenizer(options).ok());
}

TEST(MakeTokenizer, VocabExtraIdsOnlyForSentencePieceTokenizer) {
  TokenizerOptions options;
  options.vocabExtraIds = 3;
  EXPECT_EQ(makeTokenizer(options).error().message(),
            "--vocab-extra-ids adds T5's sentinels to tokenizer type SentencePieceTokenizer "
            "only; Megatron gives bytes none (it ignores the option)");
  options.tokenizerModel = kInputs / "spm.model";
  for (const char *type : {"GPTSentencePieceTokenizer", "Llama2Tokenizer"}) {
    options.type = type;
    EXPECT_EQ(makeTokenizer(options).error().message(),
              concat("--vocab-extra-ids adds T5's sentinels to tokenizer type "
                     "SentencePieceTokenizer only; Megatron gives ",
                     type, " none (it ignores the option)"));
  }
  options.type = "SentencePieceTokenizer";
  Expected<std::unique_ptr<Tokenizer>> t = makeTokenizer(options);
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ((*t)->vocabSize(), 1008);
}

TEST(TokenizerOptions, ReadsVocabExtraIds) {
  auto parse = [](std::vector<std::string> words) {
    std::vector<char *> argv{const_cast<char *>("tool")};
    for (std::string &w : words)
      argv.push_back(w.data());
    Expected<CommandLine> line =
        parseCommandLine(int(argv.size()), argv.data(), 1,
                         {{kTokenizerFlags[0], kTokenizerFlags[1], kTokenizerFlags[2],
                           kTokenizerFlags[3], kTokenizerFlags[4]},
                          {},
                          {},
                          ""});
    EXPECT_TRUE(line.ok()) << line.error().message();
    return tokenizerOptions(*line);
  };
  EXPECT_EQ(parse({})->vocabExtraIds, 0);
  EXPECT_EQ(parse({"--vocab-extra-ids", "100"})->vocabExtraIds, 100);
  EXPECT_FALSE(parse({"--vocab-extra-ids", "-1"}).ok());
  EXPECT_FALSE(parse({"--vocab-extra-ids", "x"}).ok());
  EXPECT_FALSE(parse({"--vocab-extra-ids", "2000000"}).ok());
}

} // namespace
