//===- Gpt2BpeTokenizer.cpp - GPT-2's byte-level BPE ----------------------===//

#include "runtime/data/Gpt2BpeTokenizer.h"

#include "runtime/support/Json.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <limits>

namespace mtc::rt {

namespace {

/// Unicode's White_Space, which is what Python's `regex` module (used by every reference
/// implementation) means by \s; PCRE2's \s under PCRE2_UCP also matches U+180E.
constexpr std::string_view kWhiteSpace = R"(\t-\r\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a})"
                                         R"(\x{2028}\x{2029}\x{202f}\x{205f}\x{3000})";

std::string gpt2Pattern() {
  const std::string ws(kWhiteSpace);
  return concat(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^)", ws, R"(\p{L}\p{N}]+|[)", ws,
                "]+(?![^", ws, "])|[", ws, "]+");
}

void appendUtf8(std::string &out, char32_t c) {
  if (c < 0x80) {
    out.push_back(char(c));
  } else if (c < 0x800) {
    out.push_back(char(0xc0 | (c >> 6)));
    out.push_back(char(0x80 | (c & 0x3f)));
  } else if (c < 0x10000) {
    out.push_back(char(0xe0 | (c >> 12)));
    out.push_back(char(0x80 | ((c >> 6) & 0x3f)));
    out.push_back(char(0x80 | (c & 0x3f)));
  } else {
    out.push_back(char(0xf0 | (c >> 18)));
    out.push_back(char(0x80 | ((c >> 12) & 0x3f)));
    out.push_back(char(0x80 | ((c >> 6) & 0x3f)));
    out.push_back(char(0x80 | (c & 0x3f)));
  }
}

/// The bytes a vocab.json key or merges.txt symbol spells through the byte-to-unicode table,
/// or nullopt if it holds a character outside the table. The table's characters are all
/// below U+0144, two UTF-8 bytes at most, so anything longer is outside it.
std::optional<std::string> spelledBytes(std::string_view symbol) {
  static const std::array<int16_t, 0x144> byteOf = [] {
    std::array<int16_t, 0x144> table;
    table.fill(-1);
    for (int b = 0; b < 256; ++b)
      table[gpt2ByteToUnicode()[b]] = int16_t(b);
    return table;
  }();
  std::string bytes;
  for (size_t i = 0; i < symbol.size();) {
    auto c0 = static_cast<unsigned char>(symbol[i]);
    char32_t c;
    if (c0 < 0x80) {
      c = c0;
      i += 1;
    } else if ((c0 & 0xe0) == 0xc0 && i + 1 < symbol.size() &&
               (static_cast<unsigned char>(symbol[i + 1]) & 0xc0) == 0x80) {
      c = char32_t(c0 & 0x1f) << 6 | (static_cast<unsigned char>(symbol[i + 1]) & 0x3f);
      i += 2;
    } else {
      return std::nullopt;
    }
    if (c >= byteOf.size() || byteOf[c] < 0)
      return std::nullopt;
    bytes.push_back(char(byteOf[c]));
  }
  return bytes;
}

/// `bytes` written as vocab.json writes them, for messages.
std::string spelled(std::string_view bytes) {
  std::string out;
  for (char b : bytes)
    appendUtf8(out, gpt2ByteToUnicode()[static_cast<unsigned char>(b)]);
  return out;
}

/// Cached pieces at most: a corpus has unboundedly many distinct words, and the cache is
/// only worth the common ones, which come back soon after it is cleared.
constexpr size_t kCacheEntries = size_t(1) << 18;

} // namespace

const std::array<char32_t, 256> &gpt2ByteToUnicode() {
  // The bytes that are printable Latin-1 characters stand for themselves; the others (controls,
  // space, DEL, the C1 block, no-break space and soft hyphen), in byte order, for U+0100 on.
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
      t[b] = printable ? char32_t(b) : next++;
    }
    return t;
  }();
  return table;
}

//===----------------------------------------------------------------------===//
// Gpt2Pretokenizer
//===----------------------------------------------------------------------===//

struct Gpt2Pretokenizer::Impl {
  pcre2_code *code = nullptr;
  pcre2_match_data *match = nullptr;
  ~Impl() {
    pcre2_match_data_free(match);
    pcre2_code_free(code);
  }
};

namespace {
std::string pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  int n = pcre2_get_error_message(code, buffer, sizeof buffer);
  return n < 0 ? concat("PCRE2 error ", code) : std::string(reinterpret_cast<char *>(buffer));
}
} // namespace

Gpt2Pretokenizer::Gpt2Pretokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Gpt2Pretokenizer::Gpt2Pretokenizer(Gpt2Pretokenizer &&) noexcept = default;
Gpt2Pretokenizer &Gpt2Pretokenizer::operator=(Gpt2Pretokenizer &&) noexcept = default;
Gpt2Pretokenizer::~Gpt2Pretokenizer() = default;

Expected<Gpt2Pretokenizer> Gpt2Pretokenizer::create() {
  auto impl = std::make_unique<Impl>();
  const std::string pattern = gpt2Pattern();
  int code = 0;
  PCRE2_SIZE offset = 0;
  // UCP: \p{L} and \p{N} by Unicode's categories. MATCH_INVALID_UTF: bytes that are not UTF-8
  // match nothing (instead of failing the whole match), so split() can keep them as pieces.
  impl->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &offset, nullptr);
  if (!impl->code)
    return makeError("cannot compile GPT-2's pattern with PCRE2 (at offset ", offset,
                     "): ", pcre2Message(code));
  // The JIT is several times faster; where the platform has none, matching interprets.
  (void)pcre2_jit_compile(impl->code, PCRE2_JIT_COMPLETE);
  impl->match = pcre2_match_data_create_from_pattern(impl->code, nullptr);
  if (!impl->match)
    return makeError("out of memory for PCRE2's match data");
  return Gpt2Pretokenizer(std::move(impl));
}

Error Gpt2Pretokenizer::split(std::string_view text, std::vector<std::string_view> &pieces) {
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0;
  while (at < text.size()) {
    int rc = pcre2_match(impl_->code, subject, text.size(), at, 0, impl_->match, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) {
      pieces.push_back(text.substr(at)); // bytes that are not UTF-8, up to the end
      break;
    }
    if (rc < 0)
      return makeError("GPT-2's pattern at byte ", at, ": ", pcre2Message(rc));
    const PCRE2_SIZE *match = pcre2_get_ovector_pointer(impl_->match);
    // Every alternative takes at least one character; an empty match would loop forever.
    if (match[1] <= match[0])
      return makeError("GPT-2's pattern matched nothing at byte ", match[0]);
    if (match[0] > at)
      pieces.push_back(text.substr(at, match[0] - at)); // bytes that are not UTF-8
    pieces.push_back(text.substr(match[0], match[1] - match[0]));
    at = match[1];
  }
  return Error::success();
}

//===----------------------------------------------------------------------===//
// Gpt2BpeTokenizer
//===----------------------------------------------------------------------===//

Gpt2BpeTokenizer::Gpt2BpeTokenizer(Gpt2Pretokenizer pretokenizer)
    : pretokenizer_(std::move(pretokenizer)) {}

Expected<std::unique_ptr<Gpt2BpeTokenizer>> Gpt2BpeTokenizer::create(std::string_view vocabJson,
                                                                     std::string_view merges,
                                                                     std::string_view vocabName,
                                                                     std::string_view mergesName) {
  Expected<Gpt2Pretokenizer> pretokenizer = Gpt2Pretokenizer::create();
  if (!pretokenizer)
    return pretokenizer.takeError();
  std::unique_ptr<Gpt2BpeTokenizer> t(new Gpt2BpeTokenizer(std::move(*pretokenizer)));

  // vocab.json: {"token": id, ...}.
  Expected<JsonValue> json = parseJson(vocabJson);
  if (!json)
    return json.takeError().withContext(vocabName);
  const JsonObject *entries = json->getObject();
  if (!entries)
    return makeError(vocabName, ": a JSON ", jsonKindName(json->kind()),
                     ", not an object of tokens and their ids");
  int64_t maxId = -1;
  for (const auto &[key, value] : *entries) {
    std::optional<int64_t> id = value.isInt() ? value.getInt() : std::nullopt;
    if (!id || *id < 0 || *id >= std::numeric_limits<int32_t>::max())
      return makeError(vocabName, ": the id of \"", key, "\" is not an integer from 0 to ",
                       std::numeric_limits<int32_t>::max() - 1);
    maxId = std::max(maxId, *id);
  }
  t->vocabSize_ = maxId + 1;
  t->bytes_.resize(size_t(t->vocabSize_));
  std::vector<const std::string *> keyOf(size_t(t->vocabSize_), nullptr);
  for (const auto &[key, value] : *entries) {
    auto id = size_t(*value.getInt());
    if (keyOf[id])
      return makeError(vocabName, ": \"", *keyOf[id], "\" and \"", key, "\" have the same id ", id);
    keyOf[id] = &key;
    t->bytes_[id] = spelledBytes(key);
    if (t->bytes_[id])
      t->ids_.emplace(*t->bytes_[id], int32_t(id));
  }
  for (int b = 0; b < 256; ++b) {
    auto it = t->ids_.find(std::string(1, char(b)));
    if (it == t->ids_.end())
      return makeError(vocabName, ": no token for the byte ", b, " (\"",
                       spelled(std::string(1, char(b))),
                       "\"): a byte-level vocabulary has one for each of the 256");
    t->byteIds_[b] = it->second;
  }
  const JsonValue *eod = entries->find("<|endoftext|>");
  if (!eod)
    return makeError(vocabName, ": no \"<|endoftext|>\" token, GPT-2's end of document");
  t->eod_ = *eod->getInt();

  // merges.txt: a "#version" line, then one merge "left right" a line, by rank.
  size_t lineNumber = 0;
  for (size_t begin = 0; begin < merges.size();) {
    size_t end = std::min(merges.find('\n', begin), merges.size());
    std::string_view line = merges.substr(begin, end - begin);
    begin = end + 1;
    ++lineNumber;
    if (lineNumber == 1 && line.starts_with("#version"))
      continue;
    constexpr std::string_view kSpace = " \t\r\v\f";
    std::vector<std::string_view> symbols;
    for (size_t i = line.find_first_not_of(kSpace); i != std::string_view::npos;
         i = line.find_first_not_of(kSpace, i)) {
      size_t j = std::min(line.find_first_of(kSpace, i), line.size());
      symbols.push_back(line.substr(i, j - i));
      i = j;
    }
    if (symbols.empty())
      continue; // the blank line the file ends with
    auto where = [&] { return concat(mergesName, ":", lineNumber); };
    if (symbols.size() != 2)
      return makeError(where(), ": expected two symbols separated by a space, got \"", line, "\"");
    int32_t parts[2];
    std::string joined;
    for (int k = 0; k < 2; ++k) {
      std::optional<std::string> bytes = spelledBytes(symbols[k]);
      if (!bytes)
        return makeError(where(), ": \"", symbols[k],
                         "\" is not written with GPT-2's byte-to-unicode characters");
      auto it = t->ids_.find(*bytes);
      if (it == t->ids_.end())
        return makeError(where(), ": \"", symbols[k], "\" is not a token of ", vocabName);
      parts[k] = it->second;
      joined += *bytes;
    }
    auto result = t->ids_.find(joined);
    if (result == t->ids_.end())
      return makeError(where(), ": the merge of \"", symbols[0], "\" and \"", symbols[1], "\", \"",
                       spelled(joined), "\", is not a token of ", vocabName);
    uint64_t pair = uint64_t(uint32_t(parts[0])) << 32 | uint32_t(parts[1]);
    auto rank = int32_t(t->merges_.size());
    if (!t->merges_.emplace(pair, Merge{rank, result->second}).second)
      return makeError(where(), ": the merge of \"", symbols[0], "\" and \"", symbols[1],
                       "\" repeats an earlier line");
  }
  return t;
}

void Gpt2BpeTokenizer::encodePiece(std::string_view piece, std::vector<int64_t> &ids) {
  auto cached = cache_.find(std::string(piece));
  if (cached != cache_.end()) {
    ids.insert(ids.end(), cached->second.begin(), cached->second.end());
    return;
  }
  word_.clear();
  for (char b : piece)
    word_.push_back(byteIds_[static_cast<unsigned char>(b)]);
  for (;;) {
    // The adjacent pair of lowest rank; ranks are unique, so there are no ties.
    const Merge *best = nullptr;
    int32_t left = 0, right = 0;
    for (size_t i = 0; i + 1 < word_.size(); ++i) {
      auto it = merges_.find(uint64_t(uint32_t(word_[i])) << 32 | uint32_t(word_[i + 1]));
      if (it != merges_.end() && (!best || it->second.rank < best->rank)) {
        best = &it->second;
        left = word_[i];
        right = word_[i + 1];
      }
    }
    if (!best)
      break;
    // Every occurrence, left to right: in "a a a" the merge of "a a" gives "aa a".
    merged_.clear();
    for (size_t i = 0; i < word_.size(); ++i) {
      if (i + 1 < word_.size() && word_[i] == left && word_[i + 1] == right) {
        merged_.push_back(best->result);
        ++i;
      } else {
        merged_.push_back(word_[i]);
      }
    }
    word_.swap(merged_);
  }
  ids.insert(ids.end(), word_.begin(), word_.end());
  if (cache_.size() >= kCacheEntries)
    cache_.clear();
  cache_.emplace(piece, word_);
}

Error Gpt2BpeTokenizer::encode(std::string_view text, std::vector<int64_t> &ids) {
  pieces_.clear();
  if (Error err = pretokenizer_.split(text, pieces_); !err.ok())
    return err;
  for (std::string_view piece : pieces_)
    encodePiece(piece, ids);
  return Error::success();
}

Error Gpt2BpeTokenizer::decode(std::span<const int64_t> ids, std::string &text) {
  for (int64_t id : ids) {
    if (id < 0 || id >= vocabSize_ || !bytes_[size_t(id)])
      return id < 0 || id >= vocabSize_
                 ? makeError("token id ", id, " is outside the vocabulary of ", vocabSize_)
                 : makeError("token id ", id, " is not a byte-level token of the vocabulary");
    text += *bytes_[size_t(id)];
  }
  return Error::success();
}

} // namespace mtc::rt
