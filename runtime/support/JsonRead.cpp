//===- JsonRead.cpp - Typed JSON reads naming the path --------------------===//

#include "runtime/support/JsonRead.h"

#include <algorithm>
#include <optional>

namespace mtc::rt::jsonread {

void fail(const std::string &path, std::string_view what) {
  throw JsonReadError{path.empty() ? std::string(what) : concat(path, ": ", what)};
}

std::string member(const std::string &path, std::string_view key) {
  return path.empty() ? std::string(key) : concat(path, '.', key);
}

std::string element(const std::string &path, size_t index) { return concat(path, '[', index, ']'); }

std::string quoteForMessage(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "'";
  size_t shown = std::min<size_t>(text.size(), 80);
  for (size_t i = 0; i < shown; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      out.append("\\x");
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  out.push_back('\'');
  if (shown < text.size())
    out.append("...");
  return out;
}

std::string kindWithArticle(const JsonValue &v) {
  switch (v.kind()) {
  case JsonValue::Kind::Null:
    return "null";
  case JsonValue::Kind::Bool:
    return v.getBool().value_or(false) ? "true" : "false";
  case JsonValue::Kind::Int:
    return concat("the integer ", *v.getInt());
  case JsonValue::Kind::Double:
    return concat("the number ", *v.getNumber());
  case JsonValue::Kind::String:
    return concat("the string ", quoteForMessage(*v.getString()));
  case JsonValue::Kind::Array:
    return "an array";
  case JsonValue::Kind::Object:
    return "an object";
  }
  return "a value";
}

std::string kindAndText(const JsonValue &v) {
  std::string text = v.serialize();
  if (text.size() > 40)
    text = text.substr(0, 37) + "...";
  return concat(jsonKindName(v.kind()), ' ', text);
}

void typeError(const std::string &path, std::string_view expected, const JsonValue &found,
               DescribeValue describe) {
  fail(path, concat("expected ", expected, ", found ", describe(found)));
}

const JsonValue &get(const JsonObject &o, const std::string &path, std::string_view key) {
  if (const JsonValue *v = o.find(key))
    return *v;
  fail(path, concat("missing key '", key, "'"));
}

const JsonObject &asObject(const JsonValue &v, const std::string &path, DescribeValue describe) {
  if (const JsonObject *o = v.getObject())
    return *o;
  typeError(path, "an object", v, describe);
}

const JsonArray &asArray(const JsonValue &v, const std::string &path, DescribeValue describe) {
  if (const JsonArray *a = v.getArray())
    return *a;
  typeError(path, "an array", v, describe);
}

const std::string &asString(const JsonValue &v, const std::string &path, DescribeValue describe) {
  if (const std::string *s = v.getString())
    return *s;
  typeError(path, "a string", v, describe);
}

double asNumber(const JsonValue &v, const std::string &path, DescribeValue describe) {
  std::optional<double> d = v.getNumber();
  if (!d)
    typeError(path, "a number", v, describe);
  return *d;
}

bool asBool(const JsonValue &v, const std::string &path, DescribeValue describe) {
  std::optional<bool> b = v.getBool();
  if (!b)
    typeError(path, "true or false", v, describe);
  return *b;
}

int64_t asInt(const JsonValue &v, const std::string &path, int64_t min, std::string_view expected,
              DescribeValue describe) {
  std::optional<int64_t> i = v.getInt();
  if (!i || *i < min)
    typeError(path, expected, v, describe);
  return *i;
}

int64_t asInt(const JsonValue &v, const std::string &path, int64_t min, int64_t max,
              DescribeValue describe) {
  std::optional<int64_t> i = v.isInt() ? v.getInt() : std::nullopt;
  if (!i || *i < min || *i > max)
    typeError(path, concat("an integer from ", min, " to ", max), v, describe);
  return *i;
}

} // namespace mtc::rt::jsonread
