//===- JsonRead.h - Typed JSON reads naming the path ------------*- C++ -*-===//
//
// The helpers shared by the runtime's readers of JSON documents (plan.json and its
// "pipeline" object). A reader walks a parsed `JsonValue`, names where it is with a JSON
// path ("pipeline.schedules[0].stages"), and on the first problem throws a `JsonReadError`
// whose message is "<path>: <what>". Each reader catches it at its entry point and returns
// an `Error`, so no exception leaves a reader.
//
// Messages name a value of the wrong type in one of two wordings, chosen per call:
// `kindWithArticle` ("the integer 3", "an array") or `kindAndText` ("integer 3", "array [1,2]").
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_SUPPORT_JSONREAD_H
#define MTC_RUNTIME_SUPPORT_JSONREAD_H

#include "runtime/support/Json.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace mtc::rt::jsonread {

/// Thrown by the helpers below and by the readers built on them.
struct JsonReadError {
  std::string message; // "<json path>: <what>", or "<what>" for the empty path
};

/// Throws a `JsonReadError` for the value at `path`.
[[noreturn]] void fail(const std::string &path, std::string_view what);

/// The paths of an object's member and of an array's element.
std::string member(const std::string &path, std::string_view key);
std::string element(const std::string &path, size_t index);

/// `text` for a message: quoted, at most 80 bytes, non-printable bytes as \xNN.
std::string quoteForMessage(std::string_view text);

/// How a message names the value it found.
using DescribeValue = std::string (*)(const JsonValue &);
/// "null", "true", "the integer 3", "the number 0.5", "the string 'x'", "an array", ...
std::string kindWithArticle(const JsonValue &v);
/// The kind and the value's JSON text, cut to 40 bytes: "integer 3", "string \"2\"", ...
std::string kindAndText(const JsonValue &v);

/// Fails with "expected <expected>, found <describe(found)>".
[[noreturn]] void typeError(const std::string &path, std::string_view expected,
                            const JsonValue &found, DescribeValue describe = kindWithArticle);

/// The member `key` of object `o` at `path` (required).
const JsonValue &get(const JsonObject &o, const std::string &path, std::string_view key);

/// Typed accessors; `path` names the value in messages.
const JsonObject &asObject(const JsonValue &v, const std::string &path,
                           DescribeValue describe = kindWithArticle);
const JsonArray &asArray(const JsonValue &v, const std::string &path,
                         DescribeValue describe = kindWithArticle);
const std::string &asString(const JsonValue &v, const std::string &path,
                            DescribeValue describe = kindWithArticle);
double asNumber(const JsonValue &v, const std::string &path,
                DescribeValue describe = kindWithArticle);
bool asBool(const JsonValue &v, const std::string &path, DescribeValue describe = kindWithArticle);
/// An integer (an integral number such as 2.0 too) of at least `min`; otherwise
/// "expected <expected>, found ...".
int64_t asInt(const JsonValue &v, const std::string &path, int64_t min, std::string_view expected,
              DescribeValue describe = kindWithArticle);
/// An integer literal (2.0 is refused) from `min` to `max`; otherwise
/// "expected an integer from <min> to <max>, found ...".
int64_t asInt(const JsonValue &v, const std::string &path, int64_t min, int64_t max,
              DescribeValue describe = kindWithArticle);

} // namespace mtc::rt::jsonread

#endif // MTC_RUNTIME_SUPPORT_JSONREAD_H
