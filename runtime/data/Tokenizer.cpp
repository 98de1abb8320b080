//===- Tokenizer.cpp - Text to token ids and back -------------------------===//

#include "runtime/data/Tokenizer.h"

#include "runtime/data/Gpt2BpeTokenizer.h"
#include "runtime/data/SentencePieceTokenizer.h"
#include "runtime/support/RegularFile.h"

namespace mtc::rt {

Error ByteTokenizer::encode(std::string_view text, std::vector<int64_t> &ids) {
  ids.reserve(ids.size() + text.size());
  for (char c : text)
    ids.push_back(static_cast<unsigned char>(c));
  return Error::success();
}

Error ByteTokenizer::decode(std::span<const int64_t> ids, std::string &text) {
  for (int64_t id : ids) {
    if (id < 0 || id > 255)
      return makeError("token id ", id, " is outside the vocabulary of 256");
    text.push_back(static_cast<char>(id));
  }
  return Error::success();
}

Expected<TokenizerOptions> tokenizerOptions(const CommandLine &line) {
  TokenizerOptions options;
  Expected<int64_t> extraIds =
      parseInteger(line.value("--vocab-extra-ids"), "--vocab-extra-ids", 0, 0, kMaxVocabExtraIds);
  if (!extraIds)
    return extraIds.takeError();
  options.vocabExtraIds = *extraIds;
  options.type = line.value("--tokenizer-type").value_or(options.type);
  options.vocabFile = line.value("--vocab-file").value_or("");
  options.mergeFile = line.value("--merge-file").value_or("");
  options.tokenizerModel = line.value("--tokenizer-model").value_or("");
  return options;
}

Expected<std::unique_ptr<Tokenizer>> makeTokenizer(const TokenizerOptions &options) {
  using Flavor = SentencePieceTokenizer::Flavor;
  const std::string &type = options.type;
  const bool gpt2 = type == "GPT2BPETokenizer";
  std::optional<Flavor> flavor;
  if (type == "SentencePieceTokenizer")
    flavor = Flavor::Megatron;
  else if (type == "GPTSentencePieceTokenizer")
    flavor = Flavor::Gpt;
  else if (type == "Llama2Tokenizer")
    flavor = Flavor::Llama2;
  if (type != "bytes" && !gpt2 && !flavor)
    return makeError("unknown tokenizer type '", type,
                     "' (known: bytes, GPT2BPETokenizer, SentencePieceTokenizer, "
                     "GPTSentencePieceTokenizer, Llama2Tokenizer)");
  // A file given to a tokenizer that does not read it most likely means a mistaken type.
  const std::pair<const std::filesystem::path *, std::string_view> files[] = {
      {&options.vocabFile, "--vocab-file"},
      {&options.mergeFile, "--merge-file"},
      {&options.tokenizerModel, "--tokenizer-model"}};
  for (const auto &[path, flag] : files) {
    bool reads = flag == "--tokenizer-model" ? flavor.has_value() : gpt2;
    if (!path->empty() && !reads)
      return makeError(flag, " does not apply to tokenizer type ", type);
  }

  if (options.vocabExtraIds > 0 && flavor != Flavor::Megatron)
    return makeError("--vocab-extra-ids adds T5's sentinels to tokenizer type "
                     "SentencePieceTokenizer only; Megatron gives ",
                     type, " none (it ignores the option)");

  if (gpt2) {
    if (options.vocabFile.empty() || options.mergeFile.empty())
      return makeError("tokenizer type GPT2BPETokenizer needs --vocab-file (vocab.json) and "
                       "--merge-file (merges.txt)");
    Expected<std::string> vocab = readInputFile(options.vocabFile);
    if (!vocab)
      return vocab.takeError().withContext("--vocab-file");
    Expected<std::string> merges = readInputFile(options.mergeFile);
    if (!merges)
      return merges.takeError().withContext("--merge-file");
    Expected<std::unique_ptr<Gpt2BpeTokenizer>> t = Gpt2BpeTokenizer::create(
        *vocab, *merges, concat(options.vocabFile), concat(options.mergeFile));
    if (!t)
      return t.takeError();
    return std::unique_ptr<Tokenizer>(std::move(*t));
  }
  if (flavor) {
    if (options.tokenizerModel.empty())
      return makeError("tokenizer type ", type, " needs --tokenizer-model (a SentencePiece model)");
    Expected<std::string> model = readInputFile(options.tokenizerModel);
    if (!model)
      return model.takeError().withContext("--tokenizer-model");
    Expected<std::unique_ptr<SentencePieceTokenizer>> t = SentencePieceTokenizer::create(
        *model, concat(options.tokenizerModel), *flavor, options.vocabExtraIds);
    if (!t)
      return t.takeError();
    return std::unique_ptr<Tokenizer>(std::move(*t));
  }
  return std::unique_ptr<Tokenizer>(std::make_unique<ByteTokenizer>());
}

} // namespace mtc::rt
