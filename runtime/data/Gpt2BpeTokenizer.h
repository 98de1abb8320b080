//===- Gpt2BpeTokenizer.h - GPT-2's byte-level BPE --------------*- C++ -*-===//
//
// GPT-2's tokenizer from its `vocab.json` and `merges.txt`, giving the ids of OpenAI's
// encoder.py, Hugging Face's GPT2Tokenizer and Megatron's GPT2BPETokenizer:
//
// 1. The text is cut into pieces by GPT-2's pattern
//      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//    (PCRE2 with Unicode properties; \s is Unicode's White_Space, as in Python's `regex`
//    module, which PCRE2's own \s is not: it adds U+180E). The contractions are lowercase
//    only: "IT'S" is "IT", "'", "S".
// 2. Each piece's UTF-8 bytes are merged by BPE: starting from single bytes, the adjacent
//    pair of lowest rank (line in merges.txt) is merged, every occurrence left to right,
//    until no pair has a rank. Pieces and their ids are cached.
// 3. Each resulting symbol's id is its entry in vocab.json, whose keys spell bytes through
//    GPT-2's byte-to-unicode table (printable Latin-1 bytes as themselves, the other 68 as
//    U+0100 upwards: space is "Ġ", newline "Ċ").
//
// The end of document is the id of "<|endoftext|>". As Megatron (but not Hugging Face's
// GPT2Tokenizer), "<|endoftext|>" written in the text is encoded as text. Bytes that are not
// UTF-8 match no part of the pattern; each run of them is one piece of its own, so every
// byte string encodes and decode(encode(x)) == x (the Python implementations take only
// Unicode text). Letters and digits assigned after the Unicode version of the PCRE2 linked
// (Unicode 14 for Debian 12's 10.42) count as neither.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_GPT2BPETOKENIZER_H
#define MTC_RUNTIME_DATA_GPT2BPETOKENIZER_H

#include "runtime/data/Tokenizer.h"

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mtc::rt {

/// GPT-2's byte-to-unicode table: the code point each byte is written as in vocab.json and
/// merges.txt.
const std::array<char32_t, 256> &gpt2ByteToUnicode();

/// GPT-2's pattern (step 1 above), compiled once.
class Gpt2Pretokenizer {
public:
  static Expected<Gpt2Pretokenizer> create();
  Gpt2Pretokenizer(Gpt2Pretokenizer &&) noexcept;
  Gpt2Pretokenizer &operator=(Gpt2Pretokenizer &&) noexcept;
  ~Gpt2Pretokenizer();

  /// Cuts `text` into pieces, the matches of the pattern in order and each run of bytes that
  /// are not UTF-8; they concatenate to `text`.
  Error split(std::string_view text, std::vector<std::string_view> &pieces);

private:
  struct Impl;
  explicit Gpt2Pretokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class Gpt2BpeTokenizer final : public Tokenizer {
public:
  /// The tokenizer of vocab.json's and merges.txt's contents; errors name the files as
  /// `vocabName` and `mergesName` and, in merges.txt, the line.
  static Expected<std::unique_ptr<Gpt2BpeTokenizer>> create(std::string_view vocabJson,
                                                            std::string_view merges,
                                                            std::string_view vocabName,
                                                            std::string_view mergesName);

  std::string_view name() const override { return "GPT2BPETokenizer"; }
  int64_t vocabSize() const override { return vocabSize_; }
  int64_t eod() const override { return eod_; }
  Error encode(std::string_view text, std::vector<int64_t> &ids) override;
  Error decode(std::span<const int64_t> ids, std::string &text) override;

  /// Number of merges (lines of merges.txt after the header).
  size_t numMerges() const { return merges_.size(); }

private:
  explicit Gpt2BpeTokenizer(Gpt2Pretokenizer pretokenizer);
  /// Appends the ids of one piece, by BPE.
  void encodePiece(std::string_view piece, std::vector<int64_t> &ids);

  Gpt2Pretokenizer pretokenizer_;
  /// The bytes each id stands for; nullopt for a vocab.json key that is not written in
  /// GPT-2's byte table (no merge produces it, and decoding it is an error).
  std::vector<std::optional<std::string>> bytes_;
  std::unordered_map<std::string, int32_t> ids_; // by bytes
  std::array<int32_t, 256> byteIds_{};
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  std::unordered_map<uint64_t, Merge> merges_; // by (left id << 32 | right id)
  std::unordered_map<std::string, std::vector<int32_t>> cache_;
  std::vector<std::string_view> pieces_;
  std::vector<int32_t> word_, merged_;
  int64_t vocabSize_ = 0;
  int64_t eod_ = 0;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_GPT2BPETOKENIZER_H
