//===- SentencePieceTokenizer.cpp - SentencePiece models ------------------===//

#include "runtime/data/SentencePieceTokenizer.h"

#include <sentencepiece_processor.h>

#include <unordered_map>

namespace mtc::rt {

struct SentencePieceTokenizer::Impl {
  sentencepiece::SentencePieceProcessor processor;
};

SentencePieceTokenizer::SentencePieceTokenizer(std::unique_ptr<Impl> impl, Flavor flavor)
    : impl_(std::move(impl)), flavor_(flavor) {}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::string_view SentencePieceTokenizer::name() const {
  switch (flavor_) {
  case Flavor::Megatron:
    return "SentencePieceTokenizer";
  case Flavor::Gpt:
    return "GPTSentencePieceTokenizer";
  case Flavor::Llama2:
    return "Llama2Tokenizer";
  }
  return "";
}

Expected<std::unique_ptr<SentencePieceTokenizer>>
SentencePieceTokenizer::create(std::string_view model, std::string_view modelName, Flavor flavor,
                               int64_t extraIds) {
  if (extraIds < 0 || (extraIds > 0 && flavor != Flavor::Megatron))
    return makeError("--vocab-extra-ids ", extraIds,
                     ": only SentencePieceTokenizer takes T5's sentinels (a count from 0)");
  auto impl = std::make_unique<Impl>();
  if (auto status = impl->processor.LoadFromSerializedProto(model); !status.ok())
    return makeError(modelName, ": not a SentencePiece model (sentencepiece: ", status.ToString(),
                     ")");
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer(std::move(impl), flavor));
  const sentencepiece::SentencePieceProcessor &sp = t->impl_->processor;
  t->numPieces_ = sp.GetPieceSize();
  t->vocabSize_ = t->numPieces_;
  if (flavor != Flavor::Megatron) {
    if (sp.eos_id() < 0)
      return makeError(modelName, ": the model has no end-of-sentence piece, which ", t->name(),
                       " ends documents with");
    t->eod_ = sp.eos_id();
    if (flavor == Flavor::Llama2) {
      if (sp.bos_id() < 0)
        return makeError(modelName, ": the model has no beginning-of-sentence piece, which ",
                         t->name(), " starts every text with");
      t->bos_ = sp.bos_id();
    }
    return t;
  }

  // Megatron's vocabulary: the pieces, then each added token the pieces lack.
  std::unordered_map<std::string, int64_t> vocab;
  for (int id = 0; id < sp.GetPieceSize(); ++id)
    vocab[sp.IdToPiece(id)] = id;
  auto add = [&](const std::string &token) {
    auto [it, added] = vocab.emplace(token, t->vocabSize_);
    if (added)
      ++t->vocabSize_;
    for (const auto &[known, id] : t->special_)
      if (known == token)
        return it->second;
    t->special_.emplace_back(token, it->second);
    return it->second;
  };
  auto piece = [&](int id, const char *fallback) {
    return id >= 0 && id < sp.GetPieceSize() ? sp.IdToPiece(id) : std::string(fallback);
  };
  add("<CLS>");
  add("<SEP>");
  t->eod_ = add("<EOD>");
  add("<MASK>");
  add(piece(sp.pad_id(), "<PAD>"));
  add(piece(sp.bos_id(), "<BOS>"));
  add(piece(sp.eos_id(), "<EOS>"));
  // T5's sentinels (Megatron's --vocab-extra-ids), after the others, as any added token.
  for (int64_t i = 0; i < extraIds; ++i)
    add(concat("<extra_id_", i, ">"));
  return t;
}

Error SentencePieceTokenizer::encodeModel(std::string_view text, std::vector<int64_t> &ids) {
  scratch_.clear();
  if (auto status = impl_->processor.Encode(text, &scratch_); !status.ok())
    return makeError("SentencePiece cannot encode the text: ", status.ToString());
  ids.insert(ids.end(), scratch_.begin(), scratch_.end());
  return Error::success();
}

Error SentencePieceTokenizer::decodeModel(std::span<const int64_t> ids, std::string &text) {
  scratch_.clear();
  for (int64_t id : ids) {
    // The library indexes its pieces unchecked.
    if (id < 0 || id >= numPieces_)
      return makeError("token id ", id, " is outside the vocabulary of ", vocabSize_);
    scratch_.push_back(int(id));
  }
  std::string decoded;
  if (auto status = impl_->processor.Decode(scratch_, &decoded); !status.ok())
    return makeError("SentencePiece cannot decode the ids: ", status.ToString());
  text += decoded;
  return Error::success();
}

Error SentencePieceTokenizer::encode(std::string_view text, std::vector<int64_t> &ids) {
  if (flavor_ == Flavor::Llama2)
    ids.push_back(bos_);
  if (flavor_ != Flavor::Megatron)
    return encodeModel(text, ids);
  // The added tokens in the text are themselves: repeatedly the earliest one (the first in
  // the list where two start at the same byte), the text before it by the model.
  for (;;) {
    size_t at = std::string_view::npos;
    const std::pair<std::string, int64_t> *found = nullptr;
    for (const auto &special : special_) {
      if (special.first.empty())
        continue; // found everywhere, and nothing to remove
      size_t pos = text.find(special.first);
      if (pos < at) {
        at = pos;
        found = &special;
      }
    }
    if (!found)
      return encodeModel(text, ids);
    if (Error err = encodeModel(text.substr(0, at), ids); !err.ok())
      return err;
    ids.push_back(found->second);
    text.remove_prefix(at + found->first.size());
  }
}

Error SentencePieceTokenizer::decode(std::span<const int64_t> ids, std::string &text) {
  if (flavor_ != Flavor::Megatron)
    return decodeModel(ids, text);
  size_t run = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    for (const auto &[token, id] : special_) {
      if (id != ids[i])
        continue;
      if (Error err = decodeModel(ids.subspan(run, i - run), text); !err.ok())
        return err;
      text += concat(" ", token, " ");
      run = i + 1;
      break;
    }
  }
  return decodeModel(ids.subspan(run), text);
}

} // namespace mtc::rt
