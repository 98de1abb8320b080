//===- Tokenizer.cpp - Text to token ids for preprocessing ----------------===//

#include "runtime/data/Tokenizer.h"

namespace mtc::rt {

Error ByteTokenizer::encode(std::string_view text, std::vector<int64_t> &ids) const {
  ids.reserve(ids.size() + text.size());
  for (char c : text)
    ids.push_back(static_cast<unsigned char>(c));
  return Error::success();
}

Expected<std::unique_ptr<Tokenizer>> makeTokenizer(std::string_view name) {
  if (name == "bytes")
    return std::unique_ptr<Tokenizer>(std::make_unique<ByteTokenizer>());
  return makeError("unknown tokenizer '", name, "' (known: bytes)");
}

} // namespace mtc::rt
