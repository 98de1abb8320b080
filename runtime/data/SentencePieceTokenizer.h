//===- SentencePieceTokenizer.h - SentencePiece models ----------*- C++ -*-===//
//
// A SentencePiece model (`--tokenizer-model`, Llama's tokenizer.model) through the
// sentencepiece library, wrapped as each of Megatron's three tokenizer types wraps it:
//
//   SentencePieceTokenizer     Megatron's general wrapper. It adds the tokens <CLS>, <SEP>,
//                              <EOD>, <MASK> and the model's pad, BOS and EOS pieces (named
//                              <PAD>, <BOS>, <EOS> where the model has none) to the
//                              vocabulary, those it lacks after its pieces in that order; those
//                              tokens written in the text are encoded as themselves, the text
//                              between them by the model. End of document: <EOD>. With
//                              --vocab-extra-ids N, T5's sentinels <extra_id_0> ...
//                              <extra_id_{N-1}> are added after them, the same way.
//   GPTSentencePieceTokenizer  the model alone; end of document: its EOS.
//   Llama2Tokenizer            the model with its BOS before every text encoded (every
//                              sentence of a document); end of document: its EOS.
//
// Decoding is the model's, except that SentencePieceTokenizer writes each added token as
// " TOKEN " between the decoded runs around it, as Megatron's detokenize does.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_SENTENCEPIECETOKENIZER_H
#define MTC_RUNTIME_DATA_SENTENCEPIECETOKENIZER_H

#include "runtime/data/Tokenizer.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mtc::rt {

class SentencePieceTokenizer final : public Tokenizer {
public:
  enum class Flavor { Megatron, Gpt, Llama2 };

  /// The tokenizer of a model file's contents, named `modelName` in errors; the flavors that
  /// need a BOS or EOS piece refuse a model without one. `extraIds` sentinels are added to
  /// Megatron's flavor (the others refuse any).
  static Expected<std::unique_ptr<SentencePieceTokenizer>>
  create(std::string_view model, std::string_view modelName, Flavor flavor, int64_t extraIds = 0);
  ~SentencePieceTokenizer() override;

  std::string_view name() const override;
  int64_t vocabSize() const override { return vocabSize_; }
  int64_t eod() const override { return eod_; }
  Error encode(std::string_view text, std::vector<int64_t> &ids) override;
  Error decode(std::span<const int64_t> ids, std::string &text) override;

  /// The model's own pieces (the ids below it are the model's).
  int64_t numPieces() const { return numPieces_; }
  /// Megatron's flavor: the added tokens and their ids, in the order it searches them.
  const std::vector<std::pair<std::string, int64_t>> &specialTokens() const { return special_; }

private:
  struct Impl;
  SentencePieceTokenizer(std::unique_ptr<Impl> impl, Flavor flavor);
  Error encodeModel(std::string_view text, std::vector<int64_t> &ids);
  Error decodeModel(std::span<const int64_t> ids, std::string &text);

  std::unique_ptr<Impl> impl_;
  Flavor flavor_;
  int64_t numPieces_ = 0;
  int64_t vocabSize_ = 0;
  int64_t eod_ = 0;
  int64_t bos_ = -1;
  std::vector<std::pair<std::string, int64_t>> special_;
  std::vector<int> scratch_;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_SENTENCEPIECETOKENIZER_H
