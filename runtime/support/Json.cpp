//===- Json.cpp - A small strict JSON value, parser and writer ------------===//

#include "runtime/support/Json.h"

#include <charconv>
#include <cmath>
#include <unordered_set>

namespace mtc::rt {

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

std::optional<bool> JsonValue::getBool() const {
  if (const bool *b = std::get_if<bool>(&v_))
    return *b;
  return std::nullopt;
}

std::optional<int64_t> JsonValue::getInt() const {
  if (const int64_t *i = std::get_if<int64_t>(&v_))
    return *i;
  if (const double *d = std::get_if<double>(&v_)) {
    // [-2^63, 2^63): both bounds are exact doubles.
    if (std::isfinite(*d) && std::trunc(*d) == *d && *d >= -9223372036854775808.0 &&
        *d < 9223372036854775808.0)
      return static_cast<int64_t>(*d);
  }
  return std::nullopt;
}

std::optional<double> JsonValue::getNumber() const {
  if (const int64_t *i = std::get_if<int64_t>(&v_))
    return static_cast<double>(*i);
  if (const double *d = std::get_if<double>(&v_))
    return *d;
  return std::nullopt;
}

std::string_view jsonKindName(JsonValue::Kind kind) {
  switch (kind) {
  case JsonValue::Kind::Null:
    return "null";
  case JsonValue::Kind::Bool:
    return "bool";
  case JsonValue::Kind::Int:
    return "integer";
  case JsonValue::Kind::Double:
    return "number";
  case JsonValue::Kind::String:
    return "string";
  case JsonValue::Kind::Array:
    return "array";
  case JsonValue::Kind::Object:
    return "object";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// UTF-8
//===----------------------------------------------------------------------===//

namespace {

/// Length of the well-formed UTF-8 sequence at p (Unicode table 3-7: no overlong forms, no
/// surrogates, nothing above U+10FFFF), or 0 if the bytes there are not one.
size_t utf8SequenceLength(const unsigned char *p, size_t avail) {
  auto cont = [&](size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return i < avail && p[i] >= lo && p[i] <= hi;
  };
  unsigned char c = p[0];
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    return cont(1) ? 2 : 0;
  if (c == 0xE0)
    return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF)
    return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xED)
    return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (c == 0xF0)
    return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3)
    return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4)
    return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

void appendUtf8(std::string &out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string describeByte(unsigned char c) {
  if (c >= 0x20 && c < 0x7F)
    return concat("'", static_cast<char>(c), "'");
  const char *hex = "0123456789abcdef";
  return concat("byte 0x", hex[c >> 4], hex[c & 15]);
}

} // namespace

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

namespace detail {

class JsonParser {
public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  Expected<JsonValue> parseDocument() {
    JsonValue v;
    if (!parseValue(v, 0))
      return std::move(error_);
    skipWhitespace();
    if (pos_ < text_.size()) {
      fail(concat("unexpected ", describeByte(byte(pos_)), " after the JSON value"));
      return std::move(error_);
    }
    return v;
  }

private:
  unsigned char byte(size_t i) const { return static_cast<unsigned char>(text_[i]); }
  bool atEnd() const { return pos_ >= text_.size(); }

  // Records an error at `at` (default: the current position); returns false for chaining.
  bool fail(std::string_view what, size_t at = std::string::npos) {
    if (at == std::string::npos)
      at = pos_;
    if (at > text_.size())
      at = text_.size();
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at; ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    error_ = makeError("json: ", what, " at byte ", at, " (line ", line, ", column ", column, ")");
    return false;
  }

  void skipWhitespace() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
        break;
      ++pos_;
    }
  }

  bool parseValue(JsonValue &out, int depth) {
    skipWhitespace();
    if (atEnd())
      return fail("unexpected end of input, expected a value");
    switch (text_[pos_]) {
    case '{':
      return parseObject(out, depth + 1);
    case '[':
      return parseArray(out, depth + 1);
    case '"': {
      std::string s;
      if (!parseString(s))
        return false;
      out = JsonValue(std::move(s));
      return true;
    }
    case 't':
      return parseLiteral("true", JsonValue(true), out);
    case 'f':
      return parseLiteral("false", JsonValue(false), out);
    case 'n':
      return parseLiteral("null", JsonValue(), out);
    default:
      if (text_[pos_] == '-' || (text_[pos_] >= '0' && text_[pos_] <= '9'))
        return parseNumber(out);
      return fail(concat("unexpected ", describeByte(byte(pos_)), ", expected a value"));
    }
  }

  bool parseLiteral(std::string_view word, JsonValue value, JsonValue &out) {
    if (text_.substr(pos_, word.size()) != word)
      return fail(concat("invalid literal, expected '", word, "'"));
    pos_ += word.size();
    out = std::move(value);
    return true;
  }

  bool parseArray(JsonValue &out, int depth) {
    if (depth > kMaxJsonDepth)
      return fail(concat("nesting deeper than ", kMaxJsonDepth));
    ++pos_; // '['
    JsonArray elements;
    skipWhitespace();
    if (!atEnd() && text_[pos_] == ']') {
      ++pos_;
      out = JsonValue(std::move(elements));
      return true;
    }
    for (;;) {
      JsonValue element;
      if (!parseValue(element, depth))
        return false;
      elements.push_back(std::move(element));
      skipWhitespace();
      if (atEnd())
        return fail("unexpected end of input in array, expected ',' or ']'");
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == ']') {
        ++pos_;
        out = JsonValue(std::move(elements));
        return true;
      }
      return fail(
          concat("unexpected ", describeByte(byte(pos_)), " in array, expected ',' or ']'"));
    }
  }

  bool parseObject(JsonValue &out, int depth) {
    if (depth > kMaxJsonDepth)
      return fail(concat("nesting deeper than ", kMaxJsonDepth));
    ++pos_; // '{'
    JsonObject object;
    // Keys seen so far, for the duplicate check once an object is too big for linear scans.
    std::unordered_set<std::string> keys;
    skipWhitespace();
    if (!atEnd() && text_[pos_] == '}') {
      ++pos_;
      out = JsonValue(std::move(object));
      return true;
    }
    for (;;) {
      skipWhitespace();
      if (atEnd())
        return fail("unexpected end of input in object, expected a string key");
      if (text_[pos_] != '"')
        return fail(
            concat("unexpected ", describeByte(byte(pos_)), " in object, expected a string key"));
      size_t keyAt = pos_;
      std::string key;
      if (!parseString(key))
        return false;
      bool duplicate;
      if (object.members_.size() < 16) {
        duplicate = object.find(key) != nullptr;
      } else {
        if (keys.empty())
          for (const JsonObject::Member &m : object.members_)
            keys.insert(m.first);
        duplicate = !keys.insert(key).second;
      }
      if (duplicate)
        return fail(concat("duplicate key \"", key, "\""), keyAt);
      skipWhitespace();
      if (atEnd())
        return fail("unexpected end of input in object, expected ':'");
      if (text_[pos_] != ':')
        return fail(concat("unexpected ", describeByte(byte(pos_)), " in object, expected ':'"));
      ++pos_;
      JsonValue value;
      if (!parseValue(value, depth))
        return false;
      object.members_.push_back(JsonMember{std::move(key), std::move(value)});
      skipWhitespace();
      if (atEnd())
        return fail("unexpected end of input in object, expected ',' or '}'");
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == '}') {
        ++pos_;
        out = JsonValue(std::move(object));
        return true;
      }
      return fail(
          concat("unexpected ", describeByte(byte(pos_)), " in object, expected ',' or '}'"));
    }
  }

  // Reads 4 hex digits at pos_ into cp.
  bool parseHex4(uint32_t &cp) {
    cp = 0;
    for (int i = 0; i < 4; ++i) {
      if (atEnd())
        return fail("unexpected end of input in \\u escape");
      char c = text_[pos_];
      uint32_t d;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      else
        return fail(concat("invalid hex digit ", describeByte(byte(pos_)), " in \\u escape"));
      cp = cp * 16 + d;
      ++pos_;
    }
    return true;
  }

  bool parseString(std::string &out) {
    size_t start = pos_;
    ++pos_; // '"'
    for (;;) {
      if (atEnd())
        return fail("unterminated string", start);
      unsigned char c = byte(pos_);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20)
        return fail(concat("unescaped control character ", describeByte(c), " in string"));
      if (c == '\\') {
        size_t escapeAt = pos_;
        ++pos_;
        if (atEnd())
          return fail("unterminated string", start);
        char e = text_[pos_++];
        switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          uint32_t cp;
          if (!parseHex4(cp))
            return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF)
            return fail("unpaired low surrogate in \\u escape", escapeAt);
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (text_.substr(pos_, 2) != "\\u")
              return fail("high surrogate not followed by a low surrogate escape", escapeAt);
            size_t lowAt = pos_;
            pos_ += 2;
            uint32_t lo;
            if (!parseHex4(lo))
              return false;
            if (lo < 0xDC00 || lo > 0xDFFF)
              return fail("high surrogate not followed by a low surrogate escape", lowAt);
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          appendUtf8(out, cp);
          break;
        }
        default:
          return fail(concat("invalid escape character ",
                             describeByte(static_cast<unsigned char>(e)), " after '\\'"),
                      escapeAt);
        }
        continue;
      }
      if (c < 0x80) {
        out.push_back(static_cast<char>(c));
        ++pos_;
        continue;
      }
      size_t n = utf8SequenceLength(reinterpret_cast<const unsigned char *>(text_.data()) + pos_,
                                    text_.size() - pos_);
      if (n == 0)
        return fail("invalid UTF-8 in string");
      out.append(text_.substr(pos_, n));
      pos_ += n;
    }
  }

  bool parseNumber(JsonValue &out) {
    size_t start = pos_;
    auto digit = [&] { return !atEnd() && text_[pos_] >= '0' && text_[pos_] <= '9'; };
    bool integral = true;
    if (text_[pos_] == '-')
      ++pos_;
    if (!digit())
      return fail("expected a digit in number");
    if (text_[pos_] == '0') {
      ++pos_;
      if (digit())
        return fail("leading zero in number", start);
    } else {
      while (digit())
        ++pos_;
    }
    if (!atEnd() && text_[pos_] == '.') {
      integral = false;
      ++pos_;
      if (!digit())
        return fail("expected a digit after the decimal point");
      while (digit())
        ++pos_;
    }
    if (!atEnd() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (!atEnd() && (text_[pos_] == '+' || text_[pos_] == '-'))
        ++pos_;
      if (!digit())
        return fail("expected a digit in the exponent");
      while (digit())
        ++pos_;
    }
    const char *first = text_.data() + start;
    const char *last = text_.data() + pos_;
    if (integral) {
      int64_t i;
      auto r = std::from_chars(first, last, i);
      if (r.ec == std::errc() && r.ptr == last) {
        out = JsonValue(i);
        return true;
      }
      // Too big for int64: fall through to a double.
    }
    double d;
    auto r = std::from_chars(first, last, d);
    if (r.ec == std::errc::result_out_of_range) {
      // Underflow (tiny magnitude) rounds to zero; overflow is an error.
      bool negativeExponent = false;
      for (const char *p = first; p != last; ++p)
        if ((*p == 'e' || *p == 'E') && p + 1 != last && p[1] == '-')
          negativeExponent = true;
      if (!negativeExponent)
        return fail("number out of range", start);
      out = JsonValue(*first == '-' ? -0.0 : 0.0);
      return true;
    }
    if (r.ec != std::errc() || r.ptr != last)
      return fail("invalid number", start);
    out = JsonValue(d);
    return true;
  }

  std::string_view text_;
  size_t pos_ = 0;
  Error error_;
};

} // namespace detail

Expected<JsonValue> parseJson(std::string_view text) {
  return detail::JsonParser(text).parseDocument();
}

//===----------------------------------------------------------------------===//
// Writer
//===----------------------------------------------------------------------===//

void appendJsonString(std::string &out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  const auto *p = reinterpret_cast<const unsigned char *>(s.data());
  size_t n = s.size();
  for (size_t i = 0; i < n;) {
    unsigned char c = p[i];
    if (c >= 0x80) {
      size_t len = utf8SequenceLength(p + i, n - i);
      if (len == 0) {
        out.append("\xEF\xBF\xBD"); // U+FFFD
        ++i;
      } else {
        out.append(reinterpret_cast<const char *>(p + i), len);
        i += len;
      }
      continue;
    }
    switch (c) {
    case '"':
      out.append("\\\"");
      break;
    case '\\':
      out.append("\\\\");
      break;
    case '\b':
      out.append("\\b");
      break;
    case '\f':
      out.append("\\f");
      break;
    case '\n':
      out.append("\\n");
      break;
    case '\r':
      out.append("\\r");
      break;
    case '\t':
      out.append("\\t");
      break;
    default:
      if (c < 0x20) {
        out.append("\\u00");
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 15]);
      } else {
        out.push_back(static_cast<char>(c));
      }
    }
    ++i;
  }
  out.push_back('"');
}

namespace {

void appendDouble(std::string &out, double d) {
  if (!std::isfinite(d)) {
    out.append("null");
    return;
  }
  // Shortest round-trip digits, positional for 1e-4 <= |d| < 1e16 (and 0), else scientific:
  // the same text as Python's repr() and json.dumps.
  char buf[64];
  double a = std::fabs(d);
  auto format =
      a == 0 || (a >= 1e-4 && a < 1e16) ? std::chars_format::fixed : std::chars_format::scientific;
  auto r = std::to_chars(buf, buf + sizeof buf, d, format);
  std::string_view s(buf, r.ptr - buf);
  out.append(s);
  if (s.find_first_of(".e") == std::string_view::npos)
    out.append(".0");
}

void newline(std::string &out, int indent, int level) {
  out.push_back('\n');
  out.append(static_cast<size_t>(indent) * level, ' ');
}

void write(std::string &out, const JsonValue &v, int indent, int level) {
  switch (v.kind()) {
  case JsonValue::Kind::Null:
    out.append("null");
    return;
  case JsonValue::Kind::Bool:
    out.append(*v.getBool() ? "true" : "false");
    return;
  case JsonValue::Kind::Int: {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, *v.getInt());
    out.append(buf, r.ptr);
    return;
  }
  case JsonValue::Kind::Double:
    appendDouble(out, *v.getNumber());
    return;
  case JsonValue::Kind::String:
    appendJsonString(out, *v.getString());
    return;
  case JsonValue::Kind::Array: {
    const JsonArray &a = *v.getArray();
    out.push_back('[');
    for (size_t i = 0; i < a.size(); ++i) {
      if (i)
        out.push_back(',');
      if (indent >= 0)
        newline(out, indent, level + 1);
      write(out, a[i], indent, level + 1);
    }
    if (indent >= 0 && !a.empty())
      newline(out, indent, level);
    out.push_back(']');
    return;
  }
  case JsonValue::Kind::Object: {
    const JsonObject &o = *v.getObject();
    out.push_back('{');
    bool first = true;
    for (const auto &[key, value] : o) {
      if (!first)
        out.push_back(',');
      first = false;
      if (indent >= 0)
        newline(out, indent, level + 1);
      appendJsonString(out, key);
      out.push_back(':');
      if (indent >= 0)
        out.push_back(' ');
      write(out, value, indent, level + 1);
    }
    if (indent >= 0 && !o.empty())
      newline(out, indent, level);
    out.push_back('}');
    return;
  }
  }
}

} // namespace

std::string JsonValue::serialize(int indent) const {
  std::string out;
  write(out, *this, indent, 0);
  return out;
}

} // namespace mtc::rt
