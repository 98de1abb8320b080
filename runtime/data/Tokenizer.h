//===- Tokenizer.h - Text to token ids for preprocessing --------*- C++ -*-===//
//
// What `mtc-data preprocess` turns text into. One implementation so far, the byte-level
// tokenizer (token = byte of the UTF-8 text, vocabulary 256, end of document 0, as
// Megatron's ByteLevelTokenizer's default end-of-sequence id); GPT-2's BPE and SentencePiece
// models are to come as further implementations of the same interface, chosen by name.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_TOKENIZER_H
#define MTC_RUNTIME_DATA_TOKENIZER_H

#include "runtime/support/Error.h"

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace mtc::rt {

class Tokenizer {
public:
  virtual ~Tokenizer() = default;
  /// The name it is chosen by ("bytes").
  virtual std::string_view name() const = 0;
  /// Token ids are below this.
  virtual int64_t vocabSize() const = 0;
  /// The end-of-document id `--append-eod` appends (Megatron's tokenizer.eod).
  virtual int64_t eod() const = 0;
  /// Appends the ids of `text` (one document, or one sentence of it) to `ids`.
  virtual Error encode(std::string_view text, std::vector<int64_t> &ids) const = 0;
};

/// Token = byte: ids 0-255, end of document 0 (the NUL byte, which text does not contain).
class ByteTokenizer final : public Tokenizer {
public:
  std::string_view name() const override { return "bytes"; }
  int64_t vocabSize() const override { return 256; }
  int64_t eod() const override { return 0; }
  Error encode(std::string_view text, std::vector<int64_t> &ids) const override;
};

/// The tokenizer called `name`; the message of an unknown name lists the known ones.
Expected<std::unique_ptr<Tokenizer>> makeTokenizer(std::string_view name);

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_TOKENIZER_H
