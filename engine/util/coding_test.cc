#include "engine/util/coding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/util/crc32c.h"
#include "engine/util/lz4_codec.h"
#include "engine/util/parse_number.h"

namespace tracedb::engine {
namespace {

TEST(Coding, VarintRoundTripAtEveryLength) {
  std::string buf;
  std::vector<uint64_t> values;
  for (int bits = 0; bits <= 64; ++bits) {
    const uint64_t v = bits == 64 ? ~0ull : (1ull << bits) - 1;
    values.push_back(v);
    values.push_back(v + 1);
  }
  for (uint64_t v : values) PutVarint64(&buf, v);
  Reader r(buf);
  for (uint64_t v : values) {
    uint64_t got;
    ASSERT_TRUE(r.GetVarint64(&got));
    EXPECT_EQ(got, v);
    std::string one;
    PutVarint64(&one, v);
    EXPECT_EQ(VarintLength(v), static_cast<int>(one.size()));
  }
  EXPECT_TRUE(r.empty());
}

// The writers and the loop-free reader path (Reader::GetVarint64 with 8 bytes ahead) against a
// byte-at-a-time LEB128 written here: same bytes, same values, at every length, also
// non-canonical (padded) encodings and varints that end right at the span's end.
TEST(Coding, VarintPathsEqualByteAtATimeLeb128) {
  auto leb = [](uint64_t v) {
    std::string out;
    do {
      unsigned char b = v & 0x7f;
      v >>= 7;
      if (v) b |= 0x80;
      out.push_back(static_cast<char>(b));
    } while (v);
    return out;
  };
  std::mt19937_64 rng(12);
  std::vector<uint64_t> values;
  for (int bits = 0; bits <= 64; ++bits) {
    for (int i = 0; i < 50; ++i) {
      const uint64_t v = bits == 0 ? 0 : (rng() >> (64 - bits)) | (1ull << (bits - 1));
      values.push_back(v);
    }
  }
  std::string expect;
  ByteBuf wide;
  for (uint64_t v : values) {
    expect += leb(v);
    wide.Reserve(10);
    wide.PutVarint(v);
  }
  ASSERT_EQ(std::string(wide.view()), expect);
  // Decoding: every value with plenty of bytes after it, then each alone at a span's end.
  Reader r(expect);
  for (uint64_t v : values) {
    uint64_t got = 0;
    ASSERT_TRUE(r.GetVarint64(&got));
    ASSERT_EQ(got, v);
  }
  EXPECT_TRUE(r.empty());
  for (uint64_t v : values) {
    const std::string one = leb(v) + std::string(8, '\x7f');
    for (size_t tail : {size_t{0}, size_t{1}, size_t{7}, size_t{8}}) {
      const std::string bytes = one.substr(0, leb(v).size() + tail);
      Reader rr(bytes);
      uint64_t got = 0;
      ASSERT_TRUE(rr.GetVarint64(&got));
      ASSERT_EQ(got, v);
      EXPECT_EQ(rr.remaining(), tail);
    }
  }
  // A padded encoding (0x85 0x80 0x00 = 5) reads as its value, with and without bytes after.
  for (size_t tail : {size_t{0}, size_t{9}}) {
    std::string padded = std::string("\x85\x80\x00", 3) + std::string(tail, '\x01');
    Reader rr(padded);
    uint64_t got = 0;
    ASSERT_TRUE(rr.GetVarint64(&got));
    EXPECT_EQ(got, 5u);
    EXPECT_EQ(rr.remaining(), tail);
  }
  // Eight continuation bytes with no end among them: the slow path decides (here: truncated).
  const std::string no_end(8, '\xff');
  Reader rr(no_end);
  uint64_t got;
  EXPECT_FALSE(rr.GetVarint64(&got));
}

TEST(Coding, ZigZagRoundTrip) {
  for (int64_t v : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{63}, int64_t{-64},
                    std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    EXPECT_EQ(UnZigZag(ZigZag(v)), v);
  }
  EXPECT_EQ(ZigZag(-1), 1u);
  EXPECT_EQ(ZigZag(1), 2u);
}

TEST(Coding, TruncatedVarintFails) {
  std::string buf;
  PutVarint64(&buf, 1ull << 40);
  for (size_t n = 0; n < buf.size(); ++n) {
    Reader r(buf.data(), n);
    uint64_t v;
    EXPECT_FALSE(r.GetVarint64(&v)) << n;
  }
}

TEST(Coding, OverlongVarintFails) {
  std::string buf(11, '\xff');
  Reader r(buf);
  uint64_t v;
  EXPECT_FALSE(r.GetVarint64(&v));
  std::string ten(9, '\xff');
  ten.push_back('\x02');  // bit 64 set
  Reader r2(ten);
  EXPECT_FALSE(r2.GetVarint64(&v));
}

TEST(Coding, LengthPrefixedNeverOverReads) {
  std::string buf;
  PutVarint64(&buf, 100);
  buf += "short";
  Reader r(buf);
  std::string_view s;
  EXPECT_FALSE(r.GetLengthPrefixed(&s));
}

TEST(Coding, FixedWidthRoundTrip) {
  std::string buf;
  PutFixed16(&buf, 0xbeef);
  PutFixed32(&buf, 0xdeadbeef);
  PutFixed64(&buf, 0x0123456789abcdefull);
  Reader r(buf);
  uint16_t a;
  uint32_t b;
  uint64_t c;
  ASSERT_TRUE(r.GetFixed16(&a) && r.GetFixed32(&b) && r.GetFixed64(&c));
  EXPECT_EQ(a, 0xbeef);
  EXPECT_EQ(b, 0xdeadbeefu);
  EXPECT_EQ(c, 0x0123456789abcdefull);
  EXPECT_FALSE(r.GetU8(reinterpret_cast<uint8_t*>(&a)));
}

TEST(Crc32c, CombineEqualsTheCrcOfTheConcatenation) {
  std::mt19937 rng(7);
  std::string bytes(5000, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  for (size_t split :
       {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{1000}, size_t{4999}, size_t{5000}}) {
    const uint32_t a = Crc32c(bytes.data(), split);
    const uint32_t b = Crc32c(bytes.data() + split, bytes.size() - split);
    EXPECT_EQ(Crc32cCombine(a, b, bytes.size() - split), Crc32c(bytes.data(), bytes.size()))
        << split;
  }
}

// SaturatingAdd/Sub use the overflow flag; the reference is the sum in 128 bits, clamped.
TEST(SaturatingArithmetic, EqualsThe128BitSumClamped) {
  const int64_t values[] = {INT64_MIN, INT64_MIN + 1,    -(int64_t{1} << 62), -1000,    -1, 0, 1,
                            1000,      int64_t{1} << 62, INT64_MAX - 1,       INT64_MAX};
  for (int64_t a : values) {
    for (int64_t b : values) {
      EXPECT_EQ(SaturatingAdd(a, b), SaturateInt64(static_cast<__int128>(a) + b)) << a << " " << b;
      EXPECT_EQ(SaturatingSub(a, b), SaturateInt64(static_cast<__int128>(a) - b)) << a << " " << b;
    }
  }
  EXPECT_EQ(SaturatingSub(0, INT64_MIN), INT64_MAX);
  EXPECT_EQ(SaturatingAdd(INT64_MIN, -1), INT64_MIN);
}

TEST(WrapArithmetic, NeverOverflowsAndRoundTrips) {
  EXPECT_EQ(WrapAdd(INT64_MAX, 1), INT64_MIN);
  EXPECT_EQ(WrapSub(INT64_MIN, 1), INT64_MAX);
  EXPECT_EQ(WrapAdd(WrapSub(INT64_MIN, INT64_MAX), INT64_MAX), INT64_MIN);
  EXPECT_EQ(WrapMul(INT64_MIN, -1), INT64_MIN);
  EXPECT_EQ(SaturatingAdd(INT64_MAX, 5), INT64_MAX);
  EXPECT_EQ(SaturatingSub(INT64_MIN, 5), INT64_MIN);
  EXPECT_EQ(SaturatingAdd(-3, 5), 2);
  int64_t v = 0;
  EXPECT_TRUE(DoubleToInt64(-9223372036854775808.0, &v));
  EXPECT_EQ(v, INT64_MIN);
  EXPECT_TRUE(DoubleToInt64(-2.9, &v));
  EXPECT_EQ(v, -2);
  EXPECT_FALSE(DoubleToInt64(9223372036854775808.0, &v));
  EXPECT_FALSE(DoubleToInt64(1e300, &v));
  EXPECT_FALSE(DoubleToInt64(std::nan(""), &v));
  EXPECT_FALSE(DoubleToInt64(-std::numeric_limits<double>::infinity(), &v));
}

TEST(Crc32c, KnownVectors) {
  // RFC 3720 B.4 test vectors.
  std::string zeros(32, '\0');
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8a9136aau);
  std::string ones(32, '\xff');
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62a8ab43u);
  std::string inc(32, 0);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<char>(i);
  EXPECT_EQ(Crc32c(inc.data(), inc.size()), 0x46dd794eu);
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);
}

// Inputs of 12 KiB and more are summed as three interleaved streams: the same CRC as the
// bit-by-bit definition (reflected polynomial 0x82F63B78), around and across that size.
TEST(Crc32c, LargeInputsEqualTheBitwiseDefinition) {
  auto bitwise = [](const std::string& d) {
    uint32_t c = ~0u;
    for (unsigned char b : d) {
      c ^= b;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
  };
  std::mt19937 rng(3);
  std::string data(40000, 0);
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t n :
       {size_t{12287}, size_t{12288}, size_t{12289}, size_t{24576}, size_t{30001}, size_t{40000}}) {
    const std::string d = data.substr(0, n);
    EXPECT_EQ(Crc32c(d.data(), d.size()), bitwise(d)) << n;
    // Continued from a CRC of a prefix, as RangeCrc does.
    EXPECT_EQ(Crc32c(d.data() + 5, d.size() - 5, Crc32c(d.data(), 5)), bitwise(d)) << n;
  }
}

TEST(Crc32c, IncrementalEqualsOneShot) {
  std::mt19937 rng(1);
  std::string data(1000, 0);
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t split : {0, 1, 7, 8, 9, 500, 999, 1000}) {
    uint32_t a = Crc32c(data.data(), split);
    a = Crc32c(data.data() + split, data.size() - split, a);
    EXPECT_EQ(a, Crc32c(data.data(), data.size())) << split;
  }
}

TEST(Coding, BitFieldsRoundTripAtEveryWidthAndOffset) {
  // Every width 0..64 after every start offset 0..63, so fields straddle word boundaries.
  std::mt19937_64 rng(7);
  std::vector<std::pair<uint64_t, int>> fields;
  for (int offset = 0; offset < 64; ++offset) {
    fields.push_back({offset == 0 ? 0 : rng() & (~0ull >> (64 - offset)), offset});
    for (int bits = 0; bits <= 64; ++bits) {
      const uint64_t mask = bits == 0 ? 0 : ~0ull >> (64 - bits);
      fields.push_back({rng() & mask, bits});
      fields.push_back({mask, bits});
    }
  }
  std::string buf;
  BitWriter w(&buf);
  uint64_t total = 0;
  for (auto [v, bits] : fields) {
    w.Put(v, bits);
    total += static_cast<uint64_t>(bits);
  }
  w.Finish();
  ASSERT_EQ(buf.size(), (total + 7) / 8);
  BitReader r(buf);
  for (auto [v, bits] : fields) {
    uint64_t got;
    ASSERT_TRUE(r.Get(bits, &got));
    ASSERT_EQ(got, v) << bits;
  }
  EXPECT_TRUE(r.at_end());
  uint64_t x;
  EXPECT_FALSE(r.Get(8, &x));
}

TEST(Coding, BitReaderNeverReadsPastItsSpan) {
  const std::string three("\xff\xff\xff", 3);
  BitReader r(three);
  uint64_t v;
  EXPECT_FALSE(r.Get(25, &v));
  ASSERT_TRUE(r.Get(20, &v));
  EXPECT_EQ(v, 0xfffffu);
  EXPECT_FALSE(r.at_end());  // four set bits remain: not padding
  EXPECT_FALSE(r.Get(5, &v));
  ASSERT_TRUE(r.Get(4, &v));
  EXPECT_TRUE(r.at_end());
  BitReader empty{std::string_view()};
  EXPECT_TRUE(empty.Get(0, &v));
  EXPECT_FALSE(empty.Get(1, &v));
  EXPECT_TRUE(empty.at_end());
  EXPECT_EQ(BitLength(0), 0);
  EXPECT_EQ(BitLength(1), 1);
  EXPECT_EQ(BitLength(~0ull), 64);
}

// The one integer policy (engine/util/parse_number.h): whole decimal text within int64, nothing
// else; the strtoll copies it replaced took " 7" and "+7", and one wrapped on overflow.
TEST(ParseInt64, WholeDecimalTextOnly) {
  int64_t v = 42;
  EXPECT_TRUE(ParseInt64("0", &v));
  EXPECT_EQ(v, 0);
  EXPECT_TRUE(ParseInt64("-17", &v));
  EXPECT_EQ(v, -17);
  EXPECT_TRUE(ParseInt64("9223372036854775807", &v));
  EXPECT_EQ(v, std::numeric_limits<int64_t>::max());
  EXPECT_TRUE(ParseInt64("-9223372036854775808", &v));
  EXPECT_EQ(v, std::numeric_limits<int64_t>::min());
  v = 5;
  for (const char* bad : {"", " 7", "7 ", "+7", "0x10", "1e3", "7.0", "--7", "-",
                          "9223372036854775808", "-9223372036854775809", "12abc"}) {
    EXPECT_FALSE(ParseInt64(bad, &v)) << "'" << bad << "'";
    EXPECT_EQ(v, 5) << "'" << bad << "' changed the output";
  }
}

// AllDigits (one copy; the importers had three): digits only, no sign, not empty.
TEST(ParseInt64, AllDigits) {
  for (const char* yes : {"0", "7", "0012", "99999999999999999999999"}) EXPECT_TRUE(AllDigits(yes));
  for (const char* no : {"", "-1", "+1", " 1", "1 ", "1a", "x"}) EXPECT_FALSE(AllDigits(no)) << no;
}

// Lz4Compress appends to what `dst` holds, whether the input's bound is under the 4 MiB that the
// thread's buffer is kept for or past it, and from several threads at once (each has its own
// buffer): every output decompresses to its input, after the bytes that were there before.
TEST(Lz4Codec, CompressAppendsAndRoundTripsAtEverySize) {
  auto check = [](size_t size, uint32_t seed) {
    std::mt19937 rng(seed);
    std::string raw(size, '\0');
    // Half repeats (compressible), half random (not): both of LZ4's paths.
    for (size_t i = 0; i < size; ++i) {
      raw[i] = (i / 4096) % 2 ? static_cast<char>(rng()) : static_cast<char>(i % 7);
    }
    std::string dst = "prefix";
    if (!Lz4Compress(raw, &dst).ok())
      return std::string("compress failed at ") + std::to_string(size);
    if (dst.compare(0, 6, "prefix") != 0)
      return std::string("prefix lost at ") + std::to_string(size);
    std::string back;
    const Status s = Lz4Decompress(std::string_view(dst).substr(6), raw.size(), &back);
    if (!s.ok() || back != raw) return std::string("round trip failed at ") + std::to_string(size);
    return std::string();
  };
  for (size_t size : {size_t{0}, size_t{1}, size_t{63}, size_t{100000}, (size_t{4} << 20) - 100,
                      (size_t{5} << 20), size_t{1000}}) {
    EXPECT_EQ(check(size, static_cast<uint32_t>(size)), "");
  }
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < errors.size(); ++t) {
    threads.emplace_back([&, t] {
      for (size_t k = 0; k < 20 && errors[t].empty(); ++k) {
        errors[t] =
            check(1000 + (k * 7919 + t * 104729) % 300000, static_cast<uint32_t>(t * 100 + k));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

// The fast mode (acceleration > 1) writes LZ4 blocks the one decoder reads, larger than the
// default mode's on bytes with short matches (random names: what it is for), the same on a
// repeating pattern.
TEST(Lz4Codec, FastModeRoundTripsAndEstimates) {
  std::mt19937 rng(11);
  std::string random_names(16384, '\0'), pattern(16384, '\0');
  for (size_t i = 0; i < random_names.size(); ++i) {
    random_names[i] = static_cast<char>(rng() % 8);
    pattern[i] = static_cast<char>(i % 8);
  }
  for (const std::string* raw : {&random_names, &pattern}) {
    std::string normal, fast, back;
    ASSERT_TRUE(Lz4Compress(*raw, &normal).ok());
    ASSERT_TRUE(Lz4Compress(*raw, &fast, 16).ok());
    ASSERT_TRUE(Lz4Decompress(fast, raw->size(), &back).ok());
    EXPECT_EQ(back, *raw);
    EXPECT_GE(fast.size(), normal.size());
    if (raw == &pattern) {
      EXPECT_LT(fast.size(), 128u);
    }
  }
}

}  // namespace
}  // namespace tracedb::engine
