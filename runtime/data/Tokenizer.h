//===- Tokenizer.h - Text to token ids and back -----------------*- C++ -*-===//
//
// What `mtc-data preprocess` turns text into, and what generation turns ids back into. The
// tokenizers are chosen by Megatron-LM's `--tokenizer-type` names and read the files Megatron
// reads (`--vocab-file`, `--merge-file`, `--tokenizer-model`):
//
//   bytes                      token = byte of the text, vocabulary 256, end of document 0
//                              (Megatron's ByteLevelTokenizer's default end-of-sequence id)
//   GPT2BPETokenizer           GPT-2's byte-level BPE (Gpt2BpeTokenizer.h)
//   SentencePieceTokenizer     a SentencePiece model with Megatron's added special tokens,
//   GPTSentencePieceTokenizer  plain, or with a BOS before every text as Llama's
//   Llama2Tokenizer            (SentencePieceTokenizer.h)
//
// A tokenizer caches and keeps scratch state for speed: one object serves one thread.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_TOKENIZER_H
#define MTC_RUNTIME_DATA_TOKENIZER_H

#include "runtime/support/CommandLine.h"
#include "runtime/support/Error.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mtc::rt {

class Tokenizer {
public:
  virtual ~Tokenizer() = default;
  /// The name it is chosen by ("bytes", "GPT2BPETokenizer", ...).
  virtual std::string_view name() const = 0;
  /// Token ids are below this (for a vocabulary whose ids are 0..n-1, its size n).
  virtual int64_t vocabSize() const = 0;
  /// The end-of-document id `--append-eod` appends (Megatron's tokenizer.eod).
  virtual int64_t eod() const = 0;
  /// Appends the ids of `text` (one document, or one sentence of it) to `ids`.
  virtual Error encode(std::string_view text, std::vector<int64_t> &ids) = 0;
  /// Appends the text `ids` stand for to `text`: bytes, which need not be valid UTF-8 when
  /// the ids end inside a character (Megatron decodes them with replacement characters).
  virtual Error decode(std::span<const int64_t> ids, std::string &text) = 0;
};

/// Token = byte: ids 0-255, end of document 0 (the NUL byte, which text does not contain).
class ByteTokenizer final : public Tokenizer {
public:
  std::string_view name() const override { return "bytes"; }
  int64_t vocabSize() const override { return 256; }
  int64_t eod() const override { return 0; }
  Error encode(std::string_view text, std::vector<int64_t> &ids) override;
  Error decode(std::span<const int64_t> ids, std::string &text) override;
};

/// Which tokenizer and its files, as Megatron's command line names them.
struct TokenizerOptions {
  std::string type = "bytes";           // --tokenizer-type
  std::filesystem::path vocabFile;      // --vocab-file (GPT2BPETokenizer's vocab.json)
  std::filesystem::path mergeFile;      // --merge-file (GPT2BPETokenizer's merges.txt)
  std::filesystem::path tokenizerModel; // --tokenizer-model (a SentencePiece .model)
  /// --vocab-extra-ids: T5's sentinels <extra_id_0> ... <extra_id_{N-1}>, added to the
  /// vocabulary of SentencePieceTokenizer (SentencePieceTokenizer.h), the one type that takes
  /// them in Megatron (BERT's WordPiece aside); refused for the others, which Megatron gives
  /// no sentinels without saying so.
  int64_t vocabExtraIds = 0;
};

/// The most sentinels --vocab-extra-ids adds (T5 uses 100).
inline constexpr int64_t kMaxVocabExtraIds = 1 << 20;

/// The command-line options that choose a tokenizer (mtc-data, mtrun generate), and the
/// TokenizerOptions a command line gives them (the defaults for those not given; an error for
/// a --vocab-extra-ids that is not an integer in [0, kMaxVocabExtraIds]).
inline constexpr std::string_view kTokenizerFlags[] = {
    "--tokenizer-type", "--vocab-file", "--merge-file", "--tokenizer-model", "--vocab-extra-ids"};
Expected<TokenizerOptions> tokenizerOptions(const CommandLine &line);

/// The tokenizer `options` describe. An unknown type lists the known ones; a file the type
/// needs and is not given, or one given that it does not read, is an error, as are
/// --vocab-extra-ids for another type than SentencePieceTokenizer.
Expected<std::unique_ptr<Tokenizer>> makeTokenizer(const TokenizerOptions &options);

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_TOKENIZER_H
