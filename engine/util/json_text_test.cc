// JSON text helpers: exact microseconds, integers, doubles, string escaping with UTF-8 repair,
// and the re-writer of stored JSON argument objects.
#include "engine/util/json_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>

namespace tracedb::engine::json {
namespace {

std::string Micros(int64_t ns) {
  char buf[kMaxMicros];
  return std::string(buf, WriteMicros(buf, ns));
}
std::string Uint(uint64_t v) {
  char buf[20];
  return std::string(buf, WriteUint(buf, v));
}
std::string Int(int64_t v) {
  char buf[20];
  return std::string(buf, WriteInt(buf, v));
}
std::string Double(double v) {
  char buf[kMaxDouble];
  return std::string(buf, WriteDouble(buf, v));
}
std::string Str(std::string_view s) {
  std::string out;
  AppendString(&out, s);
  return out;
}
std::string Members(std::string_view text, bool* ok, size_t* n = nullptr) {
  std::string out = "prefix";
  size_t members = 99;
  *ok = AppendObjectMembers(&out, text, &members);
  if (n) *n = members;
  if (!*ok) {
    EXPECT_EQ(out, "prefix");
  }
  return out.substr(6);
}

// A strict UTF-8 check (no surrogates, no overlong forms, nothing past U+10FFFF).
bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    for (int k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    const uint32_t min[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += static_cast<size_t>(n) + 1;
  }
  return true;
}

TEST(JsonText, MicrosecondsAreExactWithTheNanosecondDigits) {
  EXPECT_EQ(Micros(0), "0");
  EXPECT_EQ(Micros(1), "0.001");
  EXPECT_EQ(Micros(10), "0.01");
  EXPECT_EQ(Micros(999), "0.999");
  EXPECT_EQ(Micros(1000), "1");
  EXPECT_EQ(Micros(1234567), "1234.567");
  EXPECT_EQ(Micros(1234560), "1234.56");
  EXPECT_EQ(Micros(1234500), "1234.5");
  EXPECT_EQ(Micros(1234007), "1234.007");
  EXPECT_EQ(Micros(1234000), "1234");
  EXPECT_EQ(Micros(-1500), "-1.5");
  EXPECT_EQ(Micros(-1), "-0.001");
  EXPECT_EQ(Micros(1700000000123456789), "1700000000123456.789");
  EXPECT_EQ(Micros(INT64_MAX), "9223372036854775.807");
  EXPECT_EQ(Micros(INT64_MIN), "-9223372036854775.808");
  // Every value reads back to the same ns.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const auto ns = static_cast<int64_t>(rng());
    const std::string s = Micros(ns);
    const size_t dot = s.find('.');
    std::string digits = s;
    int decimals = 0;
    if (dot != std::string::npos) {
      decimals = static_cast<int>(s.size() - dot - 1);
      ASSERT_LE(decimals, 3) << s;
      ASSERT_NE(s.back(), '0') << s;
      digits.erase(dot, 1);
    }
    digits.append(static_cast<size_t>(3 - decimals), '0');
    // "-0001" style leading zeros from "-0.001" parse fine with strtoll.
    ASSERT_EQ(std::strtoll(digits.c_str(), nullptr, 10), ns) << s;
  }
}

TEST(JsonText, Integers) {
  EXPECT_EQ(Uint(0), "0");
  EXPECT_EQ(Uint(9), "9");
  EXPECT_EQ(Uint(10), "10");
  EXPECT_EQ(Uint(99), "99");
  EXPECT_EQ(Uint(100), "100");
  EXPECT_EQ(Uint(1000000007), "1000000007");
  EXPECT_EQ(Uint(UINT64_MAX), "18446744073709551615");
  EXPECT_EQ(Int(-7), "-7");
  EXPECT_EQ(Int(INT64_MIN), "-9223372036854775808");
  EXPECT_EQ(Int(INT64_MAX), "9223372036854775807");
  std::mt19937_64 rng(3);
  for (int i = 0; i < 10000; ++i) {
    const uint64_t v = rng() >> (rng() % 64);
    ASSERT_EQ(Uint(v), std::to_string(v));
  }
}

TEST(JsonText, DoublesRoundTrip) {
  EXPECT_EQ(Double(0.25), "0.25");
  EXPECT_EQ(Double(3), "3");
  EXPECT_EQ(Double(-2.5), "-2.5");
  EXPECT_EQ(Double(1e-7), "1e-07");
  EXPECT_EQ(Double(-0.0), "0");
  EXPECT_EQ(Double(1e300), "1e+300");
  std::mt19937_64 rng(5);
  for (int i = 0; i < 10000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, 8);
    if (!std::isfinite(d)) continue;
    const std::string s = Double(d);
    ASSERT_EQ(std::strtod(s.c_str(), nullptr), d) << s;
  }
}

TEST(JsonText, StringsAreEscaped) {
  EXPECT_EQ(Str(""), "\"\"");
  EXPECT_EQ(Str("plain text"), "\"plain text\"");
  EXPECT_EQ(Str("a\"b\\c/d"), R"("a\"b\\c/d")");
  EXPECT_EQ(Str("\n\r\t\b\f"), R"("\n\r\t\b\f")");
  EXPECT_EQ(Str(std::string("\x00\x01\x1f\x7f", 4)), "\"\\u0000\\u0001\\u001f\x7f\"");
  EXPECT_EQ(Str("caf\xc3\xa9 \xf0\x9f\x98\x80 \xe2\x82\xac"),
            "\"caf\xc3\xa9 \xf0\x9f\x98\x80 \xe2\x82\xac\"");
}

TEST(JsonText, IllFormedUtf8IsReplacedPerMaximalSubpart) {
  const std::string r = "\xef\xbf\xbd";
  EXPECT_EQ(Str("\x80"), "\"" + r + "\"");
  EXPECT_EQ(Str("\xe2\x82"
                "A"),
            "\"" + r + "A\"");                                      // truncated, then ASCII
  EXPECT_EQ(Str("\xc0\xaf"), "\"" + r + r + "\"");                  // overlong
  EXPECT_EQ(Str("\xed\xa0\x80"), "\"" + r + r + r + "\"");          // a surrogate
  EXPECT_EQ(Str("\xf4\x90\x80\x80"), "\"" + r + r + r + r + "\"");  // past U+10FFFF
  EXPECT_EQ(Str("\xf0\x9f\x98"), "\"" + r + "\"");                  // truncated at the end
  EXPECT_EQ(Str("\xf0\x9f\x98\xf0\x9f\x98\x80"), "\"" + r + "\xf0\x9f\x98\x80\"");
  EXPECT_EQ(Str("\xff\xfe"), "\"" + r + r + "\"");
  // Random bytes always give valid UTF-8 with nothing left unescaped.
  std::mt19937_64 rng(11);
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 24, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    const std::string out = Str(s);
    ASSERT_TRUE(ValidUtf8(out));
    ASSERT_EQ(out.front(), '"');
    ASSERT_EQ(out.back(), '"');
    ASSERT_LE(out.size(), MaxStringLiteral(s.size()));
    for (size_t k = 1; k + 1 < out.size(); ++k) {
      const auto c = static_cast<unsigned char>(out[k]);
      ASSERT_GE(c, 0x20);
      if (c == '\\') {
        ++k;  // the escaped character
        ASSERT_NE(std::string("\"\\nrtbfu").find(out[k]), std::string::npos);
      } else {
        ASSERT_NE(c, '"');
      }
    }
  }
}

TEST(JsonText, ObjectMembersAreRewrittenCompactly) {
  bool ok;
  size_t n;
  EXPECT_EQ(Members("{}", &ok, &n), "");
  EXPECT_TRUE(ok);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(Members(" { \"a\" : 1 , \"b\":[ true,false , null ] }\n", &ok, &n),
            R"("a":1,"b":[true,false,null])");
  EXPECT_TRUE(ok);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(Members(R"({"n": {"x": -0.5e+10, "y": [], "z": {}}, "s": "q\"\u00e9\/"})", &ok),
            R"("n":{"x":-0.5e+10,"y":[],"z":{}},"s":"q\"\u00e9\/")");
  EXPECT_TRUE(ok);
  // Raw control characters and ill-formed UTF-8 inside strings are repaired.
  EXPECT_EQ(Members("{\"c\": \"a\x01\tb\", \"\xff\": \"\xe2\x82\"}", &ok),
            "\"c\":\"a\\u0001\\tb\",\"\xef\xbf\xbd\":\"\xef\xbf\xbd\"");
  EXPECT_TRUE(ok);
  const std::string deep63 = "{\"d\":" + std::string(63, '[') + std::string(63, ']') + "}";
  Members(deep63, &ok);
  EXPECT_TRUE(ok);
  const std::string deep65 = "{\"d\":" + std::string(65, '[') + std::string(65, ']') + "}";
  Members(deep65, &ok);
  EXPECT_FALSE(ok);
}

TEST(JsonText, NonObjectsAreRejected) {
  for (const char* bad : {"",
                          " ",
                          "[]",
                          "1",
                          "\"s\"",
                          "{",
                          "}",
                          "{\"a\"}",
                          "{\"a\":}",
                          "{\"a\":1,}",
                          "{,}",
                          "{\"a\":1} x",
                          "{\"a\":1}{}",
                          "{'a':1}",
                          "{a:1}",
                          "{\"a\":NaN}",
                          "{\"a\":Infinity}",
                          "{\"a\":01}",
                          "{\"a\":1.}",
                          "{\"a\":.5}",
                          "{\"a\":-}",
                          "{\"a\":1e}",
                          "{\"a\":tru}",
                          "{\"a\":\"x}",
                          "{\"a\":\"\\x\"}",
                          "{\"a\":\"\\u12g4\"}",
                          "{\"a\":[1,]}",
                          "{\"a\":[1 2]}",
                          "{\"a\" 1}",
                          "{\"a\":1 \"b\":2}"}) {
    bool ok = true;
    Members(bad, &ok);
    EXPECT_FALSE(ok) << bad;
  }
  // Random mutations of a valid object never crash and either fail or give valid UTF-8.
  const std::string base = R"({"shape":[1,2,{"k":null}],"dtype":"f\u00e9","ok":true,"v":-1.5e3})";
  std::mt19937_64 rng(13);
  for (int i = 0; i < 20000; ++i) {
    std::string s = base;
    for (int m = 0; m < 3; ++m) s[rng() % s.size()] = static_cast<char>(rng());
    bool ok;
    const std::string out = Members(s, &ok);
    if (ok) {
      ASSERT_TRUE(ValidUtf8(out)) << s;
    }
  }
}

// The shell's and reports' numbers: exact, whole numbers in digits, non-finite as null (JSON)
// or nan/inf (text).
TEST(JsonNumber, ExactShortestAndNonFinite) {
  auto num = [](double v) {
    std::string s;
    AppendNumber(&s, v);
    return s;
  };
  EXPECT_EQ(num(0.1), "0.1");
  EXPECT_EQ(num(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(num(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(num(1e6), "1000000");
  EXPECT_EQ(num(-3), "-3");
  EXPECT_EQ(num(9007199254740992.0), "9007199254740992");
  EXPECT_EQ(num(2.5e-9), "2.5e-09");
  EXPECT_EQ(num(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(num(-std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(num(std::nan("")), "null");
  EXPECT_EQ(DoubleText(std::nan("")), "nan");
  EXPECT_EQ(DoubleText(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(DoubleText(0.1 + 0.2), "0.30000000000000004");
  // Every finite double reads back exactly.
  std::mt19937_64 rng(11);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t bits = rng();
    double v;
    std::memcpy(&v, &bits, sizeof(v));
    if (!std::isfinite(v)) continue;
    const std::string t = num(v);
    EXPECT_EQ(std::strtod(t.c_str(), nullptr), v) << t;
  }
}

}  // namespace
}  // namespace tracedb::engine::json
