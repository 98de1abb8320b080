//===- Json.h - A small strict JSON value, parser and writer ----*- C++ -*-===//
//
// Used for the plan manifest, checkpoint metadata, safetensors headers and metrics lines.
//
// - Values: null, bool, integer (int64), double, string (UTF-8), array, object. A number
//   literal without fraction or exponent that fits in int64 parses as an integer, any other
//   number as a double; `getNumber()` reads both.
// - Objects keep insertion order and never hold two members with the same key.
// - The parser is strict RFC 8259: one value surrounded only by whitespace (space, tab, LF,
//   CR); no comments, trailing commas, leading zeros, '+' signs, NaN/Infinity, numbers that
//   overflow a double, unescaped control characters, invalid UTF-8, lone surrogates (the
//   \uXXXX escapes of a surrogate pair combine), duplicate keys, or nesting deeper than
//   kMaxJsonDepth. Errors name the byte offset, line and column (1-based, in bytes).
// - The writer emits compact or indented UTF-8 JSON. Doubles are written in shortest
//   round-trip form and always with a '.' or an exponent, so they re-parse as doubles;
//   non-finite doubles (not representable in JSON) are written as null; invalid UTF-8 in a
//   string is written as U+FFFD. parse(write(v)) == v for every other value.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_SUPPORT_JSON_H
#define MTC_RUNTIME_SUPPORT_JSON_H

#include "runtime/support/Error.h"

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace mtc::rt {

class JsonValue;
namespace detail {
class JsonParser;
} // namespace detail

using JsonArray = std::vector<JsonValue>;

/// Maximum nesting of arrays and objects the parser accepts (a top-level array is depth 1).
inline constexpr int kMaxJsonDepth = 512;

struct JsonMember;

/// An insertion-ordered JSON object with unique keys. Lookups are linear scans, which is
/// right for the small objects of manifests and headers. Members are `JsonMember`s, so
/// `for (const auto &[key, value] : object)` works.
class JsonObject {
public:
  using Member = JsonMember;
  using iterator = std::vector<JsonMember>::iterator;
  using const_iterator = std::vector<JsonMember>::const_iterator;

  JsonObject();
  /// Later duplicates of a key replace earlier ones (as `set` does).
  JsonObject(std::initializer_list<JsonMember> members);
  JsonObject(const JsonObject &);
  JsonObject(JsonObject &&) noexcept;
  JsonObject &operator=(const JsonObject &);
  JsonObject &operator=(JsonObject &&) noexcept;
  ~JsonObject();

  size_t size() const;
  bool empty() const;
  const_iterator begin() const;
  const_iterator end() const;
  iterator begin();
  iterator end();

  /// The member's value, or nullptr.
  const JsonValue *find(std::string_view key) const;
  JsonValue *find(std::string_view key);
  bool contains(std::string_view key) const { return find(key) != nullptr; }

  /// Appends key: value unless the key exists; returns whether it was inserted.
  bool insert(std::string key, JsonValue value);
  /// Replaces the member's value, or appends key: value.
  void set(std::string key, JsonValue value);
  /// Removes the member; returns whether it existed.
  bool erase(std::string_view key);

  /// Same members with equal values, in any order (JSON objects are unordered).
  friend bool operator==(const JsonObject &a, const JsonObject &b);

private:
  friend class detail::JsonParser; // appends after its own duplicate check
  std::vector<JsonMember> members_;
};

class JsonValue {
public:
  enum class Kind { Null, Bool, Int, Double, String, Array, Object };

  JsonValue() = default;
  JsonValue(std::nullptr_t) {}
  JsonValue(bool b) : v_(b) {}
  /// Integers; unsigned values above INT64_MAX become doubles.
  template <std::integral I>
    requires(!std::same_as<I, bool>)
  JsonValue(I i) {
    if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(int64_t)) {
      if (i > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        v_ = static_cast<double>(i);
        return;
      }
    }
    v_ = static_cast<int64_t>(i);
  }
  template <std::floating_point F> JsonValue(F d) : v_(static_cast<double>(d)) {}
  JsonValue(const char *s) : v_(std::string(s)) {}
  JsonValue(std::string_view s) : v_(std::string(s)) {}
  JsonValue(std::string s) : v_(std::move(s)) {}
  JsonValue(JsonArray a) : v_(std::move(a)) {}
  JsonValue(JsonObject o) : v_(std::move(o)) {}

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool isNull() const { return kind() == Kind::Null; }
  bool isBool() const { return kind() == Kind::Bool; }
  bool isInt() const { return kind() == Kind::Int; }
  bool isDouble() const { return kind() == Kind::Double; }
  bool isNumber() const { return isInt() || isDouble(); }
  bool isString() const { return kind() == Kind::String; }
  bool isArray() const { return kind() == Kind::Array; }
  bool isObject() const { return kind() == Kind::Object; }

  std::optional<bool> getBool() const;
  /// Integers, and doubles with an integral value in int64's range.
  std::optional<int64_t> getInt() const;
  /// Integers (converted) and doubles.
  std::optional<double> getNumber() const;
  const std::string *getString() const { return std::get_if<std::string>(&v_); }
  const JsonArray *getArray() const { return std::get_if<JsonArray>(&v_); }
  JsonArray *getArray() { return std::get_if<JsonArray>(&v_); }
  const JsonObject *getObject() const { return std::get_if<JsonObject>(&v_); }
  JsonObject *getObject() { return std::get_if<JsonObject>(&v_); }

  /// Same kind and equal value (an Int never equals a Double; objects compare unordered).
  friend bool operator==(const JsonValue &a, const JsonValue &b) { return a.v_ == b.v_; }

  /// JSON text: compact for indent < 0, else one member/element per line indented by
  /// `indent` spaces per level.
  std::string serialize(int indent = -1) const;

private:
  std::variant<std::monostate, bool, int64_t, double, std::string, JsonArray, JsonObject> v_;
};

/// "null", "bool", "integer", "number", "string", "array" or "object".
std::string_view jsonKindName(JsonValue::Kind kind);

/// Parses one JSON document (strict; see the file comment). Errors read
/// "json: <what> at byte <offset> (line <l>, column <c>)".
Expected<JsonValue> parseJson(std::string_view text);

/// Appends `s` to `out` as a JSON string literal (quotes included).
void appendJsonString(std::string &out, std::string_view s);

//===----------------------------------------------------------------------===//
// JsonObject inline members (need the complete JsonValue)
//===----------------------------------------------------------------------===//

struct JsonMember {
  std::string first;
  JsonValue second;
};

inline JsonObject::JsonObject() = default;
inline JsonObject::JsonObject(const JsonObject &) = default;
inline JsonObject::JsonObject(JsonObject &&) noexcept = default;
inline JsonObject &JsonObject::operator=(const JsonObject &) = default;
inline JsonObject &JsonObject::operator=(JsonObject &&) noexcept = default;
inline JsonObject::~JsonObject() = default;

inline JsonObject::JsonObject(std::initializer_list<JsonMember> members) {
  for (const JsonMember &m : members)
    set(m.first, m.second);
}

inline size_t JsonObject::size() const { return members_.size(); }
inline bool JsonObject::empty() const { return members_.empty(); }
inline JsonObject::const_iterator JsonObject::begin() const { return members_.begin(); }
inline JsonObject::const_iterator JsonObject::end() const { return members_.end(); }
inline JsonObject::iterator JsonObject::begin() { return members_.begin(); }
inline JsonObject::iterator JsonObject::end() { return members_.end(); }

inline const JsonValue *JsonObject::find(std::string_view key) const {
  for (const Member &m : members_)
    if (m.first == key)
      return &m.second;
  return nullptr;
}

inline JsonValue *JsonObject::find(std::string_view key) {
  for (Member &m : members_)
    if (m.first == key)
      return &m.second;
  return nullptr;
}

inline bool JsonObject::insert(std::string key, JsonValue value) {
  if (find(key))
    return false;
  members_.push_back(JsonMember{std::move(key), std::move(value)});
  return true;
}

inline void JsonObject::set(std::string key, JsonValue value) {
  if (JsonValue *v = find(key)) {
    *v = std::move(value);
    return;
  }
  members_.push_back(JsonMember{std::move(key), std::move(value)});
}

inline bool JsonObject::erase(std::string_view key) {
  for (auto it = members_.begin(); it != members_.end(); ++it) {
    if (it->first == key) {
      members_.erase(it);
      return true;
    }
  }
  return false;
}

inline bool operator==(const JsonObject &a, const JsonObject &b) {
  if (a.size() != b.size())
    return false;
  for (const JsonObject::Member &m : a) {
    const JsonValue *other = b.find(m.first);
    if (!other || !(*other == m.second))
      return false;
  }
  return true;
}

} // namespace mtc::rt

#endif // MTC_RUNTIME_SUPPORT_JSON_H
