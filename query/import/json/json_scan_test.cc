#include "query/import/json/json_scan.h"

#include "engine/util/json_text.h"

#include <gtest/gtest.h>

#include <string>

namespace tracedb::query::json {
namespace {

int64_t Ns(std::string_view s) {
  int64_t v = -12345;
  EXPECT_TRUE(ParseMicrosToNanos(s, &v)) << s;
  return v;
}

TEST(JsonText, MicrosToNanosIsExact) {
  EXPECT_EQ(Ns("0"), 0);
  EXPECT_EQ(Ns("1234"), 1234000);
  EXPECT_EQ(Ns("1234.567"), 1234567);
  EXPECT_EQ(Ns("1234.5"), 1234500);
  EXPECT_EQ(Ns("68.0"), 68000);
  EXPECT_EQ(Ns("-5"), -5000);
  EXPECT_EQ(Ns("-0.001"), -1);
  EXPECT_EQ(Ns("1.5e3"), 1500000);
  EXPECT_EQ(Ns("15E-1"), 1500);
  EXPECT_EQ(Ns("2e-3"), 2);
  EXPECT_EQ(Ns("0.0000"), 0);
  // Kineto writes epoch µs with ns digits; doubles would lose the last digits.
  EXPECT_EQ(Ns("1682725898236567.123"), 1682725898236567123);
  EXPECT_EQ(Ns("1682725898236567"), 1682725898236567000);
  // Digits below the ns are rounded half away from zero.
  EXPECT_EQ(Ns("1.0004"), 1000);
  EXPECT_EQ(Ns("1.0005"), 1001);
  EXPECT_EQ(Ns("-1.0005"), -1001);
  EXPECT_EQ(Ns("0.0004"), 0);
  EXPECT_EQ(Ns("0.0006"), 1);
  EXPECT_EQ(Ns("1682725898236567.1234999999999999999999999"), 1682725898236567123);
  EXPECT_EQ(Ns("9223372036854775.807"), INT64_MAX);
}

TEST(JsonText, MicrosToNanosRejects) {
  int64_t v;
  for (const char* bad : {"", "-", ".", "1.", ".5", "1e", "1e+", "abc", "1x", "--1", "1.2.3",
                          "9223372036854775.808", "1e30", "99999999999999999999"}) {
    EXPECT_FALSE(ParseMicrosToNanos(bad, &v)) << bad;
  }
}

TEST(JsonText, DecodeStringEscapes) {
  std::string out;
  DecodeString(R"(a\"b\\c\/d\n\t\r\b\f)", &out);
  EXPECT_EQ(out, "a\"b\\c/d\n\t\r\b\f");
  DecodeString(R"(\u00e9\u20ac)", &out);
  EXPECT_EQ(out, "\xc3\xa9\xe2\x82\xac");  // é €
  DecodeString(R"(\ud83d\ude00)", &out);   // a surrogate pair: U+1F600
  EXPECT_EQ(out, "\xf0\x9f\x98\x80");
  DecodeString(R"(x\ud83dy)", &out);  // a lone high surrogate
  EXPECT_EQ(out, "x\xef\xbf\xbdy");
  DecodeString(R"(\ude00)", &out);  // a lone low surrogate
  EXPECT_EQ(out, "\xef\xbf\xbd");
  DecodeString(R"(\q\u12)", &out);  // unknown escape, short \u: kept as written
  EXPECT_EQ(out, "\\q\\u12");
  DecodeString("raw\ncontrol\x01", &out);  // Horovod's unescaped tensor names
  EXPECT_EQ(out, "raw\ncontrol\x01");
  DecodeString("trailing\\", &out);
  EXPECT_EQ(out, "trailing\\");
}

TEST(JsonText, FindStringEndReportsNeedMoreAndEscapes) {
  const std::string s = std::string(40, 'a') + "\\\"" + std::string(20, 'b') + "\"tail";
  const char* close;
  bool escaped;
  ASSERT_EQ(FindStringEnd(s.data(), s.data() + s.size(), &close, &escaped), Scan::kOk);
  EXPECT_TRUE(escaped);
  EXPECT_EQ(close - s.data(), 62);
  EXPECT_EQ(FindStringEnd(s.data(), s.data() + 41, &close, &escaped), Scan::kNeedMore);
  EXPECT_EQ(FindStringEnd(s.data(), s.data() + 42, &close, &escaped), Scan::kNeedMore);
}

TEST(JsonText, SkipValue) {
  auto skip = [](std::string_view v, size_t* used) {
    const char* after = nullptr;
    const Scan s = SkipValue(v.data(), v.data() + v.size(), &after);
    if (s == Scan::kOk) *used = static_cast<size_t>(after - v.data());
    return s;
  };
  size_t used = 0;
  EXPECT_EQ(skip(R"({"a": [1, {"b": "}"}], "c": null},)", &used), Scan::kOk);
  EXPECT_EQ(used, 33u);
  EXPECT_EQ(skip(R"([1, 2,],)", &used), Scan::kOk);  // a trailing comma
  EXPECT_EQ(skip(R"({"a": 1)", &used), Scan::kNeedMore);
  EXPECT_EQ(skip("123", &used), Scan::kNeedMore);  // the number may go on
  EXPECT_EQ(skip("123,", &used), Scan::kOk);
  EXPECT_EQ(skip("[1}", &used), Scan::kBad);
  EXPECT_EQ(skip("{1: 2}", &used), Scan::kBad);
  EXPECT_EQ(skip("{\"a\" 2}", &used), Scan::kBad);
  EXPECT_EQ(skip("tru,", &used), Scan::kBad);
  EXPECT_EQ(skip("NaN,", &used), Scan::kOk);
  EXPECT_EQ(skip(std::string(kMaxDepth + 1, '[') + std::string(kMaxDepth + 1, ']'), &used),
            Scan::kBad);
  EXPECT_EQ(skip(std::string(kMaxDepth, '[') + std::string(kMaxDepth, ']'), &used), Scan::kOk);
}

TEST(JsonText, CompactJson) {
  std::string out;
  ASSERT_TRUE(AppendCompactJson("{\n  \"dtype\": \"float32\",\n  \"shape\": [1, 2]\n}", &out));
  EXPECT_EQ(out, R"({"dtype":"float32","shape":[1,2]})");
  out.clear();
  // Raw control characters are escaped, valid escapes kept, bad ones made literal.
  ASSERT_TRUE(AppendCompactJson("{\"n\": \"a\tb\nc\x01\\u00e9\\q\"}", &out));
  EXPECT_EQ(out, R"({"n":"a\tb\nc\u0001\u00e9\\q"})");
  out.clear();
  ASSERT_TRUE(AppendCompactJson("{\"x\": NaN, \"y\": [1,],}", &out));
  EXPECT_EQ(out, R"({"x":null,"y":[1]})");
  out.clear();
  ASSERT_TRUE(AppendCompactJson(" 12.5 ", &out));
  EXPECT_EQ(out, "12.5");
  for (const char* bad : {"", "{", "{\"a\":}", "[1 2]", "12 13", "\"open", "nul"}) {
    out.clear();
    EXPECT_FALSE(AppendCompactJson(bad, &out)) << bad;
  }
}

// Text already compact is validated and copied whole (the fast path); anything it cannot vouch
// for by its bytes (trailing commas, NaN, escapes, non-ASCII, whitespace) takes the re-writing
// walk, and invalid text is refused by both alike.
TEST(JsonText, CompactJsonFastPathAgreesWithTheWalk) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"bytes":131072,"peer":1,"tag":0})", R"({"bytes":131072,"peer":1,"tag":0})"},
      {R"({"a":[1,[2,{}],[]],"b":{"c":null,"d":true}})",
       R"({"a":[1,[2,{}],[]],"b":{"c":null,"d":true}})"},
      {R"({"a":1,})", R"({"a":1})"},
      {R"({"a":[1,2,],"b":"x,}"})", R"({"a":[1,2],"b":"x,}"})"},
      {R"({"x":NaN,"y":-Infinity})", R"({"x":null,"y":null})"},
      {R"({"s":"\u0041\q"})", R"({"s":"\u0041\\q"})"},
      {R"({"n":1e999999,"m":-123456789012345678901234567890})",
       R"({"n":1e999999,"m":-123456789012345678901234567890})"},
  };
  for (const auto& [in, want] : cases) {
    std::string out = "prefix";
    ASSERT_TRUE(AppendCompactJson(in, &out)) << in;
    EXPECT_EQ(out, "prefix" + std::string(want)) << in;
  }
  std::string deep;  // deeper than kMaxDepth
  for (int i = 0; i < 600; ++i) deep += "[";
  deep += "1";
  for (int i = 0; i < 600; ++i) deep += "]";
  for (const std::string& bad :
       {std::string(R"({"a":1)"), std::string(R"({"a":tru})"), std::string(R"({"a":1}x)"),
        std::string(R"({"a":1}})"), std::string(R"({"a":-})"), std::string(R"({"a":"open})"),
        std::string(R"({"a",1})"), deep}) {
    std::string out;
    EXPECT_FALSE(AppendCompactJson(bad, &out)) << bad;
  }
}

// One policy on invalid UTF-8 for every JSON the project writes (engine/util/json_text.h):
// the importers' re-writer used to keep it byte for byte, the exporter replaced it; a stored
// argument object is now valid UTF-8 whatever the file held, each maximal ill-formed subpart one
// U+FFFD, as AppendString writes the same bytes.
TEST(JsonText, CompactJsonReplacesInvalidUtf8) {
  // é whole; E2 82 (a cut three-byte form): one U+FFFD; ED A0 80 (a surrogate): three; 😀 whole.
  const std::string value = "a\xc3\xa9\xe2\x82 \xed\xa0\x80 \xf0\x9f\x98\x80";
  const std::string fffd = "\xef\xbf\xbd";
  std::string out;
  ASSERT_TRUE(AppendCompactJson("{\"k\xff\": \"" + value + "\"}", &out));
  EXPECT_EQ(out, "{\"k" + fffd + "\":\"a\xc3\xa9" + fffd + " " + fffd + fffd + fffd +
                     " \xf0\x9f\x98\x80\"}");
  std::string writer;  // the one writer's string literal of the same bytes
  engine::json::AppendString(&writer, value);
  EXPECT_EQ(out.substr(out.find(':') + 1, writer.size()), writer);
}

TEST(JsonText, Members) {
  const std::string obj = R"({"name": "a\"b", "sort_index": 3, "nested": {"name": "no"},
                              "s": "44", "f": 1.5})";
  EXPECT_EQ(AsString(*FindMember(obj, "name")), "a\"b");
  EXPECT_EQ(AsInt(*FindMember(obj, "sort_index")), 3);
  EXPECT_EQ(AsInt(*FindMember(obj, "s")), 44);  // a string holding an integer
  EXPECT_FALSE(AsInt(*FindMember(obj, "f")).has_value());
  EXPECT_EQ(*FindMember(obj, "nested"), R"({"name": "no"})");
  EXPECT_FALSE(FindMember(obj, "missing").has_value());
  EXPECT_FALSE(FindMember("not an object", "name").has_value());
  int n = 0;
  EXPECT_TRUE(ForEachMember(obj, [&](std::string_view, std::string_view) { return ++n < 2; }));
  EXPECT_EQ(n, 2);
  std::vector<std::string> elems;
  EXPECT_TRUE(ForEachElement(R"([[2048, 1], [], "x"])", [&](std::string_view v) {
    elems.emplace_back(v);
    return true;
  }));
  EXPECT_EQ(elems, (std::vector<std::string>{"[2048, 1]", "[]", "\"x\""}));
  EXPECT_FALSE(ForEachElement("[1, {", [](std::string_view) { return true; }));
}

}  // namespace
}  // namespace tracedb::query::json
