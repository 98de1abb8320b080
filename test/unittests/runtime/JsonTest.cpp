//===- JsonTest.cpp - The strict JSON parser and writer -------------------===//

#include "runtime/support/Json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

using namespace mtc::rt;

namespace {

JsonValue parseOk(std::string_view text) {
  Expected<JsonValue> v = parseJson(text);
  EXPECT_TRUE(v) << "parsing " << text << ": " << v.error().message();
  return v ? *v : JsonValue();
}

/// The error message for `text`, which must fail to parse.
std::string parseError(std::string_view text) {
  Expected<JsonValue> v = parseJson(text);
  EXPECT_FALSE(v) << "expected an error for: " << text;
  return v ? std::string() : v.error().message();
}

/// Checks that `text` fails with `what` at the given byte offset, line and column.
void expectError(std::string_view text, std::string_view what, size_t offset, size_t line,
                 size_t column) {
  std::string msg = parseError(text);
  EXPECT_NE(msg.find(what), std::string::npos) << "message: " << msg;
  std::string where = "at byte " + std::to_string(offset) + " (line " + std::to_string(line) +
                      ", column " + std::to_string(column) + ")";
  EXPECT_NE(msg.find(where), std::string::npos) << "message: " << msg << "\nexpected " << where;
  EXPECT_EQ(msg.rfind("json: ", 0), 0u) << msg;
}

TEST(JsonTest, Scalars) {
  EXPECT_TRUE(parseOk("null").isNull());
  EXPECT_EQ(parseOk("true").getBool(), true);
  EXPECT_EQ(parseOk(" false ").getBool(), false);
  EXPECT_EQ(parseOk("0").getInt(), 0);
  EXPECT_EQ(parseOk("-0").getInt(), 0);
  EXPECT_EQ(parseOk("42").getInt(), 42);
  EXPECT_EQ(parseOk("-17").getInt(), -17);
  EXPECT_EQ(parseOk("9223372036854775807").getInt(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(parseOk("-9223372036854775808").getInt(), std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(parseOk("42").isInt());
  EXPECT_TRUE(parseOk("42.0").isDouble());
  EXPECT_TRUE(parseOk("4e1").isDouble());
  EXPECT_EQ(parseOk("42.0").getInt(), 42); // integral doubles read as integers too
  EXPECT_EQ(parseOk("42.5").getInt(), std::nullopt);
  EXPECT_EQ(parseOk("1.5").getNumber(), 1.5);
  EXPECT_EQ(parseOk("-2.5e-3").getNumber(), -2.5e-3);
  EXPECT_EQ(parseOk("1E+2").getNumber(), 100.0);
  EXPECT_EQ(parseOk("0.1").getNumber(), 0.1);
  EXPECT_EQ(parseOk("7").getNumber(), 7.0);
  // Beyond int64: a double.
  JsonValue big = parseOk("9223372036854775808");
  EXPECT_TRUE(big.isDouble());
  EXPECT_EQ(big.getNumber(), 9223372036854775808.0);
  EXPECT_EQ(big.getInt(), std::nullopt);
  EXPECT_TRUE(parseOk("-99999999999999999999").isDouble());
  // Underflow rounds to zero; it is not an error.
  EXPECT_EQ(parseOk("1e-400").getNumber(), 0.0);
  EXPECT_EQ(parseOk("\"hi\"").getString() ? *parseOk("\"hi\"").getString() : "", "hi");
  // Wrong-kind accessors return nothing.
  EXPECT_EQ(parseOk("\"1\"").getInt(), std::nullopt);
  EXPECT_EQ(parseOk("1").getString(), nullptr);
  EXPECT_EQ(parseOk("1").getBool(), std::nullopt);
  EXPECT_EQ(parseOk("[]").getObject(), nullptr);
}

TEST(JsonTest, StringEscapes) {
  EXPECT_EQ(*parseOk(R"("a\"b\\c\/d\be\ff\ng\rh\ti")").getString(), "a\"b\\c/d\be\ff\ng\rh\ti");
  EXPECT_EQ(*parseOk(R"("\u0041\u00e9\u20AC")").getString(), "A\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(*parseOk(R"("\u0000")").getString(), std::string(1, '\0'));
  // Surrogate pair: U+1F600 (grinning face), upper- and lower-case hex.
  EXPECT_EQ(*parseOk(R"("\uD83D\uDE00")").getString(), "\xF0\x9F\x98\x80");
  EXPECT_EQ(*parseOk(R"("\ud83d\ude00")").getString(), "\xF0\x9F\x98\x80");
  // U+10FFFF, the last code point.
  EXPECT_EQ(*parseOk(R"("\uDBFF\uDFFF")").getString(), "\xF4\x8F\xBF\xBF");
  // Raw UTF-8 passes through.
  EXPECT_EQ(*parseOk("\"h\xC3\xA9llo \xF0\x9F\x98\x80\"").getString(),
            "h\xC3\xA9llo \xF0\x9F\x98\x80");
  EXPECT_EQ(*parseOk("\"\x7F\"").getString(), "\x7F"); // DEL is not a control character
}

TEST(JsonTest, ObjectsKeepInsertionOrder) {
  JsonValue v = parseOk(R"({"zeta": 1, "alpha": [true, null], "mid": {"x": "y"}})");
  const JsonObject *o = v.getObject();
  ASSERT_NE(o, nullptr);
  ASSERT_EQ(o->size(), 3u);
  std::vector<std::string> keys;
  for (const auto &[k, value] : *o)
    keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"zeta", "alpha", "mid"}));
  EXPECT_EQ(o->find("zeta")->getInt(), 1);
  EXPECT_EQ(o->find("alpha")->getArray()->size(), 2u);
  EXPECT_EQ(*o->find("mid")->getObject()->find("x")->getString(), "y");
  EXPECT_EQ(o->find("nope"), nullptr);
  EXPECT_EQ(v.serialize(), R"({"zeta":1,"alpha":[true,null],"mid":{"x":"y"}})");
}

TEST(JsonTest, ObjectEditing) {
  JsonObject o{{"a", 1}, {"b", "two"}};
  EXPECT_TRUE(o.insert("c", 3.5));
  EXPECT_FALSE(o.insert("a", 99)); // keys stay unique
  EXPECT_EQ(o.find("a")->getInt(), 1);
  o.set("a", 100);
  EXPECT_EQ(o.find("a")->getInt(), 100);
  EXPECT_TRUE(o.erase("b"));
  EXPECT_FALSE(o.erase("b"));
  EXPECT_EQ(JsonValue(o).serialize(), R"({"a":100,"c":3.5})");
  // Equality ignores member order but not kinds.
  JsonObject p{{"c", 3.5}, {"a", 100}};
  EXPECT_EQ(JsonValue(o), JsonValue(p));
  p.set("a", 100.0);
  EXPECT_NE(JsonValue(o), JsonValue(p));
}

TEST(JsonTest, WriterCompactAndIndented) {
  JsonValue v = JsonObject{{"name", "gpt"},        {"dims", JsonArray{1, 2, 3}},
                           {"empty", JsonArray{}}, {"none", JsonObject{}},
                           {"lr", 3e-4},           {"ok", true},
                           {"nothing", nullptr}};
  EXPECT_EQ(
      v.serialize(),
      R"({"name":"gpt","dims":[1,2,3],"empty":[],"none":{},"lr":0.0003,"ok":true,"nothing":null})");
  EXPECT_EQ(v.serialize(2), "{\n"
                            "  \"name\": \"gpt\",\n"
                            "  \"dims\": [\n"
                            "    1,\n"
                            "    2,\n"
                            "    3\n"
                            "  ],\n"
                            "  \"empty\": [],\n"
                            "  \"none\": {},\n"
                            "  \"lr\": 0.0003,\n"
                            "  \"ok\": true,\n"
                            "  \"nothing\": null\n"
                            "}");
}

TEST(JsonTest, WriterNumbers) {
  EXPECT_EQ(JsonValue(1.0).serialize(), "1.0"); // stays a double on re-parse
  EXPECT_EQ(JsonValue(-0.0).serialize(), "-0.0");
  EXPECT_EQ(JsonValue(0.1).serialize(), "0.1");
  EXPECT_EQ(JsonValue(1e300).serialize(), "1e+300");
  EXPECT_EQ(JsonValue(int64_t(-5)).serialize(), "-5");
  EXPECT_EQ(JsonValue(std::numeric_limits<int64_t>::min()).serialize(), "-9223372036854775808");
  EXPECT_EQ(JsonValue(uint64_t(1) << 63).serialize(), "9.223372036854776e+18");
  // Python's repr() rules: positional for 1e-4 <= |d| < 1e16.
  EXPECT_EQ(JsonValue(1e16).serialize(), "1e+16");
  EXPECT_EQ(JsonValue(123456789012345.0).serialize(), "123456789012345.0");
  EXPECT_EQ(JsonValue(9999999999999998.0).serialize(), "9999999999999998.0");
  EXPECT_EQ(JsonValue(0.0001).serialize(), "0.0001");
  EXPECT_EQ(JsonValue(0.00001).serialize(), "1e-05");
  EXPECT_EQ(JsonValue(-2.5e-10).serialize(), "-2.5e-10");
  EXPECT_EQ(JsonValue(5e-324).serialize(), "5e-324");
  EXPECT_EQ(JsonValue(0.0).serialize(), "0.0");
  EXPECT_EQ(JsonValue(std::nan("")).serialize(), "null");
  EXPECT_EQ(JsonValue(std::numeric_limits<double>::infinity()).serialize(), "null");
  EXPECT_EQ(JsonValue(1.0f / 3.0f).serialize(), "0.3333333432674408");
  EXPECT_TRUE(parseOk(JsonValue(2.0).serialize()).isDouble());
}

TEST(JsonTest, WriterStrings) {
  EXPECT_EQ(JsonValue("a\"b\\c\n\t\x01\x1f/").serialize(), R"("a\"b\\c\n\t\u0001\u001f/")");
  EXPECT_EQ(JsonValue(std::string("nul\0x", 5)).serialize(), R"("nul\u0000x")");
  EXPECT_EQ(JsonValue("\xC3\xA9").serialize(), "\"\xC3\xA9\"");
  // Invalid UTF-8 becomes U+FFFD, so the output always parses.
  EXPECT_EQ(JsonValue("a\xFF"
                      "b\xC3")
                .serialize(),
            "\"a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\"");
  EXPECT_TRUE(parseJson(JsonValue("\xED\xA0\x80").serialize())); // encoded surrogate
}

TEST(JsonTest, RoundTrips) {
  const char *docs[] = {
      "null",
      "[]",
      "{}",
      R"([1,-2,3.25,-0.5,1e-07,12345678901234,"s",true,false,null])",
      R"({"a":{"b":{"c":[[],[{}],[[1]]]}},"u":"\u0001é😀","k":"\"\\"})",
      R"({"plan":{"version":1,"mesh":{"dp":2,"tp":2},)"
      R"("params":[{"name":"wte","shape":[512,256],"init":{"normal":0.02}}]}})",
      R"([0.1,0.2,0.30000000000000004,1.7976931348623157e+308,5e-324,-1.0,123.0])",
  };
  for (const char *doc : docs) {
    JsonValue v = parseOk(doc);
    for (int indent : {-1, 0, 2, 4}) {
      std::string text = v.serialize(indent);
      Expected<JsonValue> again = parseJson(text);
      ASSERT_TRUE(again) << text << ": " << again.error().message();
      EXPECT_EQ(*again, v) << text;
      EXPECT_EQ(again->serialize(indent), text); // a fixed point
    }
  }
  // Compact output of a compact document is the document (modulo \u escapes of printables).
  EXPECT_EQ(parseOk(docs[3]).serialize(), docs[3]);
  EXPECT_EQ(parseOk(docs[5]).serialize(), docs[5]);
  EXPECT_EQ(parseOk(docs[6]).serialize(), docs[6]);
}

TEST(JsonTest, WhitespaceEverywhere) {
  JsonValue v = parseOk(" \t\r\n{ \"a\" \n:\t[ 1 , 2 ] ,\r\n\"b\" : { } } \n");
  EXPECT_EQ(v.serialize(), R"({"a":[1,2],"b":{}})");
}

TEST(JsonTest, DepthLimit) {
  std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parseJson(ok));
  std::string deep = std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  expectError(deep, "nesting deeper than 512", kMaxJsonDepth, 1, kMaxJsonDepth + 1);
  std::string objects;
  for (int i = 0; i <= kMaxJsonDepth; ++i)
    objects += "{\"a\":";
  objects += "1" + std::string(kMaxJsonDepth + 1, '}');
  EXPECT_NE(parseError(objects).find("nesting deeper"), std::string::npos);
  // Far deeper input fails cleanly instead of overflowing the stack.
  EXPECT_FALSE(parseJson(std::string(1000000, '[')));
}

TEST(JsonTest, SyntaxErrors) {
  expectError("", "unexpected end of input, expected a value", 0, 1, 1);
  expectError("   ", "unexpected end of input", 3, 1, 4);
  expectError("[1, 2", "unexpected end of input in array", 5, 1, 6);
  expectError("[1 2]", "unexpected '2' in array, expected ',' or ']'", 3, 1, 4);
  expectError("[1,]", "unexpected ']', expected a value", 3, 1, 4);
  expectError("{\"a\":1,}", "unexpected '}' in object, expected a string key", 7, 1, 8);
  expectError("{\"a\" 1}", "expected ':'", 5, 1, 6);
  expectError("{a:1}", "expected a string key", 1, 1, 2);
  expectError("{\"a\":1", "unexpected end of input in object", 6, 1, 7);
  expectError("{\"a\":1 \"b\":2}", "expected ',' or '}'", 7, 1, 8);
  expectError("{\"a\"", "expected ':'", 4, 1, 5);
  expectError("tru", "invalid literal, expected 'true'", 0, 1, 1);
  expectError("nul", "expected 'null'", 0, 1, 1);
  expectError("falsy", "expected 'false'", 0, 1, 1);
  expectError("True", "unexpected 'T', expected a value", 0, 1, 1);
  expectError("'a'", "unexpected ''', expected a value", 0, 1, 1);
  expectError("// c\n1", "unexpected '/'", 0, 1, 1);
}

TEST(JsonTest, TrailingGarbage) {
  expectError("1 2", "unexpected '2' after the JSON value", 2, 1, 3);
  expectError("{} x", "unexpected 'x' after the JSON value", 3, 1, 4);
  expectError("[]]", "unexpected ']' after the JSON value", 2, 1, 3);
  expectError("null\n\n  #", "after the JSON value", 8, 3, 3);
  expectError(std::string_view("0\0", 2), "unexpected byte 0x00 after the JSON value", 1, 1, 2);
  expectError("\"a\"\x0c", "unexpected byte 0x0c after", 3, 1, 4); // form feed is not whitespace
}

TEST(JsonTest, NumberErrors) {
  expectError("01", "leading zero in number", 0, 1, 1);
  expectError("-01", "leading zero in number", 0, 1, 1);
  expectError("+1", "unexpected '+', expected a value", 0, 1, 1);
  expectError("-", "expected a digit in number", 1, 1, 2);
  expectError("-a", "expected a digit in number", 1, 1, 2);
  expectError("1.", "expected a digit after the decimal point", 2, 1, 3);
  expectError("1.e5", "expected a digit after the decimal point", 2, 1, 3);
  expectError(".5", "unexpected '.', expected a value", 0, 1, 1);
  expectError("1e", "expected a digit in the exponent", 2, 1, 3);
  expectError("1e+", "expected a digit in the exponent", 3, 1, 4);
  expectError("[1e400]", "number out of range", 1, 1, 2);
  expectError("-1e400", "number out of range", 0, 1, 1);
  expectError("NaN", "unexpected 'N'", 0, 1, 1);
  expectError("Infinity", "unexpected 'I'", 0, 1, 1);
  expectError("0x10", "unexpected 'x' after the JSON value", 1, 1, 2);
}

TEST(JsonTest, StringErrors) {
  expectError("\"abc", "unterminated string", 0, 1, 1);
  expectError("[\"a\\", "unterminated string", 1, 1, 2);
  expectError("\"a\nb\"", "unescaped control character byte 0x0a in string", 2, 1, 3);
  expectError("\"\t\"", "unescaped control character byte 0x09", 1, 1, 2);
  expectError("\"\x1f\"", "unescaped control character byte 0x1f", 1, 1, 2);
  expectError(R"("\x")", "invalid escape character 'x'", 1, 1, 2);
  expectError(R"("\U0041")", "invalid escape character 'U'", 1, 1, 2);
  expectError(R"("\u12G4")", "invalid hex digit 'G' in \\u escape", 5, 1, 6);
  expectError(R"("\u12")", "invalid hex digit '\"'", 5, 1, 6);
  expectError("\"\\u1", "unexpected end of input in \\u escape", 4, 1, 5);
  // Surrogates.
  expectError(R"("\uDE00")", "unpaired low surrogate", 1, 1, 2);
  expectError(R"("\uD83D")", "high surrogate not followed by a low surrogate", 1, 1, 2);
  expectError(R"("\uD83Dx")", "high surrogate not followed by a low surrogate", 1, 1, 2);
  expectError(R"("\uD83D\u0041")", "high surrogate not followed by a low surrogate", 7, 1, 8);
  expectError(R"("\uD83D\uD83D")", "high surrogate not followed by a low surrogate", 7, 1, 8);
  // Invalid UTF-8: stray continuation, overlong, encoded surrogate, above U+10FFFF,
  // truncated sequence, and bytes that never occur.
  expectError("\"a\x80\"", "invalid UTF-8 in string", 2, 1, 3);
  expectError("\"\xC0\xAF\"", "invalid UTF-8", 1, 1, 2);
  expectError("\"\xE0\x80\xAF\"", "invalid UTF-8", 1, 1, 2);
  expectError("\"\xED\xA0\x80\"", "invalid UTF-8", 1, 1, 2);
  expectError("\"\xF4\x90\x80\x80\"", "invalid UTF-8", 1, 1, 2);
  expectError("\"\xE2\x82\"", "invalid UTF-8", 1, 1, 2);
  expectError("\"\xFF\"", "invalid UTF-8", 1, 1, 2);
  // Non-ASCII outside strings.
  expectError("\xC3\xA9", "unexpected byte 0xc3, expected a value", 0, 1, 1);
}

TEST(JsonTest, DuplicateKeys) {
  expectError(R"({"a":1,"a":2})", "duplicate key \"a\"", 7, 1, 8);
  expectError("{\"x\":{\"b\":1,\n \"b\":2}}", "duplicate key \"b\"", 14, 2, 2);
  // Same key in different objects is fine; the same escaped and unescaped key is a duplicate.
  EXPECT_TRUE(parseJson(R"({"a":{"a":1},"b":{"a":2}})"));
  expectError(R"({"a":1,"\u0061":2})", "duplicate key \"a\"", 7, 1, 8);
  // Large objects (hash-set path).
  std::string big = "{";
  for (int i = 0; i < 100; ++i)
    big += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  std::string unique = big.substr(0, big.size() - 1) + "}";
  JsonValue v = parseOk(unique);
  EXPECT_EQ(v.getObject()->size(), 100u);
  EXPECT_EQ(v.getObject()->find("k73")->getInt(), 73);
  std::string dup = big + "\"k5\":0}";
  EXPECT_NE(parseError(dup).find("duplicate key \"k5\""), std::string::npos);
}

TEST(JsonTest, LineAndColumnCountBytes) {
  // Line/column after multi-line input; columns count bytes (é is two).
  expectError("{\n  \"a\": 1,\n  \"\xC3\xA9\": x\n}", "unexpected 'x', expected a value", 20, 3, 9);
}

TEST(JsonTest, KindNames) {
  EXPECT_EQ(jsonKindName(JsonValue().kind()), "null");
  EXPECT_EQ(jsonKindName(JsonValue(1).kind()), "integer");
  EXPECT_EQ(jsonKindName(JsonValue(1.5).kind()), "number");
  EXPECT_EQ(jsonKindName(JsonValue("s").kind()), "string");
  EXPECT_EQ(jsonKindName(JsonValue(JsonArray{}).kind()), "array");
  EXPECT_EQ(jsonKindName(JsonValue(JsonObject{}).kind()), "object");
  EXPECT_EQ(jsonKindName(JsonValue(false).kind()), "bool");
}

} // namespace
