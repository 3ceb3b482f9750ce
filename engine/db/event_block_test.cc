#include "engine/db/event_block.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <random>
#include <thread>
#include <tuple>

namespace tracedb::engine {
namespace {

std::vector<Row> SampleRows(int n, bool micro) {
  std::mt19937_64 rng(7);
  std::vector<Row> rows;
  int64_t ts = 1700000000000000000;
  for (int i = 0; i < n; ++i) {
    Row r;
    ts += static_cast<int64_t>(rng() % 20000) * (micro ? 1000 : 1);
    r.ts = ts;
    r.dur = static_cast<int64_t>(rng() % 100000) * (micro ? 1000 : 1);
    r.track = 1 + static_cast<uint32_t>(i % 3);
    r.name = 10 + static_cast<uint32_t>(rng() % 5);
    r.cat = i % 7 == 0 ? 0 : 3;
    r.kind = static_cast<RowKind>(i % 4);
    r.depth = static_cast<uint32_t>(i % 4);
    r.k = static_cast<uint64_t>(i);
    r.parent_k = i % 4 == 0 ? 0 : static_cast<uint64_t>(i - i % 4) + 1;
    if (i % 5 == 0) {
      r.args.mask = EventArgs::kAllFields;
      r.args.bytes = rng();
      r.args.peer = -static_cast<int32_t>(i);
      r.args.tag = i;
      r.args.comm = 3;
      r.args.seq = static_cast<uint64_t>(i) * 2;
      r.args.flow = rng();
    }
    if (r.kind == RowKind::kCounter) r.value = i * 0.5;
    if (i % 11 == 0) r.json = "{\"dtype\": \"float32\", \"i\": " + std::to_string(i) + "}";
    rows.push_back(r);
  }
  return rows;
}

void ExpectRowEq(const Row& a, const Row& b) {
  EXPECT_EQ(a.ts, b.ts);
  EXPECT_EQ(a.dur, b.dur);
  EXPECT_EQ(a.track, b.track);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.cat, b.cat);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.depth, b.depth);
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.parent_k, b.parent_k);
  EXPECT_EQ(a.args, b.args);
  EXPECT_EQ(a.value, b.value);
  EXPECT_EQ(a.json, b.json);
  EXPECT_EQ(a.open, b.open);
}

TEST(EventBlock, RoundTripsEveryColumn) {
  for (bool micro : {false, true}) {
    std::vector<Row> rows = SampleRows(5000, micro);
    std::vector<Row> expected = rows;
    std::string blob;
    BlockZone zone;
    EncodeBlock(rows, &blob, &zone);
    // Blocks hold rows in (track, k) order.
    std::sort(expected.begin(), expected.end(), [](const Row& a, const Row& b) {
      return a.track != b.track ? a.track < b.track : a.k < b.k;
    });
    DecodedBlock d;
    ASSERT_TRUE(DecodeBlock(blob, 1, &d).ok());
    ASSERT_EQ(d.n, expected.size());
    for (size_t i = 0; i < d.n; ++i) ExpectRowEq(d.RowAt(i), expected[i]);
    EXPECT_EQ(zone.count, 5000u);
    int64_t max_dur = 0, min_ts = INT64_MAX;
    for (const Row& r : expected) {
      max_dur = std::max(max_dur, r.dur);
      min_ts = std::min(min_ts, r.ts);
    }
    EXPECT_EQ(zone.max_dur, max_dur);
    EXPECT_EQ(zone.min_ts, min_ts);
    uint64_t named = 0;
    for (const auto& n : zone.names) named += n.count;
    EXPECT_EQ(named, 5000u);
  }
}

// Row::open (docs/database-format.md "Open spans") is bit 512 of the argument mask: it survives
// the round trip on rows with and without arguments and JSON, and no other row gets it.
TEST(EventBlock, OpenFlagRoundTrips) {
  std::vector<Row> rows = SampleRows(300, false);
  for (size_t i = 0; i < rows.size(); i += 7) rows[i].open = true;
  std::map<std::pair<uint32_t, uint64_t>, bool> want;
  for (const Row& r : rows) want[{r.track, r.k}] = r.open;
  std::string blob;
  BlockZone zone;
  EncodeBlock(rows, &blob, &zone);
  DecodedBlock d;
  ASSERT_TRUE(DecodeBlock(blob, 1, &d).ok());
  ASSERT_EQ(d.n, rows.size());
  size_t open = 0;
  for (size_t i = 0; i < d.n; ++i) {
    const Row r = d.RowAt(i);
    EXPECT_EQ(r.open, want.at({r.track, r.k})) << i;
    EXPECT_EQ((d.arg_mask[i] & DecodedBlock::kOpen) != 0, r.open) << i;
    open += r.open;
  }
  EXPECT_EQ(open, (rows.size() + 6) / 7);
}

TEST(EventBlock, MicrosecondDataIsSmaller) {
  std::vector<Row> ns = SampleRows(20000, false), us = SampleRows(20000, true);
  std::string a, b;
  BlockZone z;
  EncodeBlock(ns, &a, &z);
  EncodeBlock(us, &b, &z);
  // µs data (every value a multiple of 1000 ns) costs what the same values in µs would: the
  // common time scale removes the three zero digits.
  EXPECT_LE(b.size(), a.size() + 4);
  EXPECT_GE(b.size() + 4, a.size());
}

TEST(EventBlock, CorruptBlocksAreErrorsNotCrashes) {
  std::vector<Row> rows = SampleRows(300, false);
  std::string blob;
  BlockZone zone;
  EncodeBlock(rows, &blob, &zone);
  DecodedBlock d;
  for (size_t n = 0; n < blob.size(); ++n) {
    EXPECT_FALSE(DecodeBlock(std::string_view(blob.data(), n), 9, &d).ok()) << n;
  }
  std::mt19937 rng(3);
  for (int i = 0; i < 3000; ++i) {
    std::string bad = blob;
    bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    Status s = DecodeBlock(bad, 9, &d);
    if (!s.ok()) {
      EXPECT_NE(s.message().find("event block 9"), std::string::npos);
    }
  }
}

// Extreme values (as a hostile import could bring) round-trip exactly through the wrap-around
// coding, with and without a common time scale; under UBSan this also proves no overflow.
TEST(EventBlock, ExtremeTimestampsRoundTripWithoutOverflow) {
  for (int64_t step : {int64_t{1}, int64_t{1000}}) {
    std::vector<Row> rows;
    const int64_t ts_values[] = {INT64_MIN / step * step,        0,     INT64_MAX / step * step,
                                 INT64_MIN / step * step + step, -step, step};
    uint64_t k = 0;
    for (int64_t ts : ts_values) {
      Row r;
      r.track = 1;
      r.k = k++;
      r.ts = ts;
      r.dur = ts > 0 ? step : INT64_MAX / step * step;
      r.depth = static_cast<uint32_t>(k % 3);
      r.parent_k = k > 1 ? k - 1 : 0;
      r.name = 3;
      rows.push_back(r);
    }
    std::string blob;
    BlockZone zone;
    EncodeBlock(rows, &blob, &zone);
    DecodedBlock d;
    ASSERT_TRUE(DecodeBlock(blob, 1, &d).ok());
    ASSERT_EQ(d.n, rows.size());
    for (size_t i = 0; i < d.n; ++i) ExpectRowEq(d.RowAt(i), rows[i]);
    EXPECT_EQ(zone.max_end, INT64_MAX);  // clamped, not wrapped
  }
}

TEST(EventBlock, DurationsOfEveryBitLengthRoundTrip) {
  // Formats 2 and 3 code dur by bit length: 0, 1, and 2^b - 1, 2^b, 2^b + 1 for every b up to
  // 62, and INT64_MAX, in one block (lengths 0 to 63: every length symbol).
  std::vector<int64_t> durs = {0, 1, INT64_MAX};
  for (int b = 1; b <= 62; ++b) {
    for (int64_t d : {(int64_t{1} << b) - 1, int64_t{1} << b, (int64_t{1} << b) + 1}) {
      durs.push_back(d);
    }
  }
  std::vector<Row> rows;
  for (size_t i = 0; i < durs.size(); ++i) {
    Row r;
    r.track = 1;
    r.k = i;
    r.ts = static_cast<int64_t>(i) * 7;
    r.dur = durs[i];
    r.name = 2;
    rows.push_back(r);
  }
  std::string blob;
  BlockZone zone;
  EncodeBlock(rows, &blob, &zone);
  DecodedBlock d;
  ASSERT_TRUE(DecodeBlock(blob, 1, &d, kColDur).ok());
  ASSERT_EQ(d.n, rows.size());
  for (size_t i = 0; i < d.n; ++i) EXPECT_EQ(d.dur[i], durs[i]) << i;
  ASSERT_TRUE(d.Need(kColAll).ok());
  for (size_t i = 0; i < d.n; ++i) ExpectRowEq(d.RowAt(i), rows[i]);
}

// Format 3's ts and dur columns: entropy-coded bit lengths round-trip every kind of column, and
// every proper prefix of a column is an error.
TEST(HuffmanBitLengthColumn, RoundTripsAndRejectsTruncation) {
  std::mt19937_64 rng(12);
  std::vector<std::vector<uint64_t>> cases;
  cases.push_back({});
  cases.push_back({0});
  cases.push_back({UINT64_MAX});
  cases.push_back(std::vector<uint64_t>(1000, 100));  // one exact value: no code bits at all
  cases.push_back(std::vector<uint64_t>(1000, 1));    // one length symbol without mantissa
  {
    std::vector<uint64_t> v = {0, 1, UINT64_MAX, UINT64_MAX - 1};
    for (int b = 1; b < 64; ++b) {
      for (uint64_t x : {(uint64_t{1} << b) - 1, uint64_t{1} << b, (uint64_t{1} << b) + 1}) {
        v.push_back(x);
      }
    }
    cases.push_back(v);
  }
  {
    // Log-uniform values mixed with a dozen frequent ones (more than the 8 that get symbols).
    std::vector<uint64_t> v;
    for (int i = 0; i < 20000; ++i) {
      if (i % 3 == 0) {
        v.push_back(1000 + 37 * (rng() % 12));
      } else {
        v.push_back(rng() >> (rng() % 64));
      }
    }
    cases.push_back(v);
  }
  {
    // Geometric symbol frequencies: an unrestricted Huffman code would need codes of up to 40
    // bits; they are limited to 12.
    std::vector<uint64_t> v;
    for (int b = 2; b < 42; ++b) {
      for (uint64_t i = 0; i < (uint64_t{1} << std::max(0, 17 - (b - 2) / 2)); ++i) {
        if (v.size() < 65536) v.push_back((uint64_t{1} << b) | (rng() & ((uint64_t{1} << b) - 1)));
      }
    }
    cases.push_back(v);
  }
  for (const std::vector<uint64_t>& v : cases) {
    std::string col;
    PutHuffmanBitLengthColumn(v.data(), v.size(), &col);
    std::vector<uint64_t> got(v.size());
    ASSERT_TRUE(GetHuffmanBitLengthColumn(col, v.size(), got.data())) << v.size();
    EXPECT_EQ(got, v);
    // Every prefix of a small column; of a large one, a sample and the last 16 (each decode
    // reads the whole column).
    for (size_t len = 0; len < col.size();
         len += col.size() < 2000 || len + 16 >= col.size() ? 1 : 97) {
      EXPECT_FALSE(
          GetHuffmanBitLengthColumn(std::string_view(col.data(), len), v.size(), got.data()))
          << v.size() << " values, prefix of " << len << " bytes";
    }
    std::string longer = col + std::string(1, '\0');
    EXPECT_FALSE(GetHuffmanBitLengthColumn(longer, v.size(), got.data()));
  }
  // A constant column costs its header only.
  std::string col;
  const std::vector<uint64_t> same(1000, 100);
  PutHuffmanBitLengthColumn(same.data(), same.size(), &col);
  EXPECT_LE(col.size(), 6u);
}

// The frequent values a column lists (its first byte is how many): none for random values, where
// values seen once in the sample used to take all 8 symbols; a value of a tenth of the rows among
// random ones, whether it starts at the first row or only after a quarter of the column.
TEST(HuffmanBitLengthColumn, FrequentValuesOnlyWhereTheyRepeat) {
  std::mt19937_64 rng(21);
  const auto encoded = [](const std::vector<uint64_t>& v) {
    std::string col;
    PutHuffmanBitLengthColumn(v.data(), v.size(), &col);
    std::vector<uint64_t> got(v.size());
    EXPECT_TRUE(GetHuffmanBitLengthColumn(col, v.size(), got.data()));
    EXPECT_EQ(got, v);
    return col;
  };
  std::vector<uint64_t> random(16384), early(16384), late(16384);
  for (size_t i = 0; i < random.size(); ++i) {
    random[i] = rng() % 1000000;
    early[i] = i % 10 == 0 ? 777777 : random[i];
    late[i] = i >= 4096 && i % 10 == 0 ? 777777 : random[i];
  }
  const std::string r = encoded(random), e = encoded(early), l = encoded(late);
  ASSERT_FALSE(r.empty() || e.empty() || l.empty());
  EXPECT_EQ(r[0], 0) << "frequent values listed for a random column";
  // Listed by count, the repeated value first (values voted once may fill the other symbols).
  const auto first_listed = [](const std::string& col) {
    uint64_t x = 0;
    Reader rd(std::string_view(col).substr(1));
    return col[0] >= 1 && rd.GetVarint64(&x) ? x : 0;
  };
  EXPECT_EQ(first_listed(e), 777777u);
  EXPECT_EQ(first_listed(l), 777777u);
  // The listed value costs its code instead of 19 bits of mantissa: 1,639 of them save 3 KB.
  EXPECT_LT(e.size() + 3000, r.size());
}

// Two columns decoded side by side (ts and dur of a format 3 block) give what each gives alone,
// whichever stream reaches its bounds-checked tail first; a fault in either is reported.
TEST(HuffmanBitLengthColumn, TwoColumnsSideBySideMatchOneAtATime) {
  std::mt19937_64 rng(31);
  for (int round = 0; round < 40; ++round) {
    const size_t n = round < 4 ? static_cast<size_t>(round) : 1 + rng() % 5000;
    std::vector<uint64_t> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      // Column a: small values (a short stream); b: up to 64 bits (a long one, with values of
      // 46 bits or more, whose mantissas are read in two parts); swapped in odd rounds.
      const uint64_t small = rng() % 50, big = rng() >> (rng() % 64);
      a[i] = round % 2 ? big : small;
      b[i] = round % 2 ? small : big;
    }
    std::string ca, cb;
    PutHuffmanBitLengthColumn(a.data(), n, &ca);
    PutHuffmanBitLengthColumn(b.data(), n, &cb);
    std::vector<uint64_t> ga(n), gb(n);
    ASSERT_TRUE(GetHuffmanBitLengthColumns(ca, cb, n, ga.data(), gb.data())) << round;
    EXPECT_EQ(ga, a) << round;
    EXPECT_EQ(gb, b) << round;
    if (n == 0) continue;
    for (int cut = 1; cut <= 3; ++cut) {
      EXPECT_FALSE(GetHuffmanBitLengthColumns(std::string_view(ca.data(), ca.size() - cut), cb, n,
                                              ga.data(), gb.data()))
          << round << " " << cut;
      EXPECT_FALSE(GetHuffmanBitLengthColumns(ca, std::string_view(cb.data(), cb.size() - cut), n,
                                              ga.data(), gb.data()))
          << round << " " << cut;
    }
    EXPECT_FALSE(
        GetHuffmanBitLengthColumns(ca, cb + std::string(1, '\0'), n, ga.data(), gb.data()));
  }
}

// The decoders take two values from one read when both fit in its 57 bits: values of 20 to 40
// bits put the pairs' sums on both sides of that bound (a pair taken, a pair refused, then the
// streams at different rows), mixed with 50-bit values (a single value past the bound) and runs
// of zeros; odd and even counts; each value as written.
TEST(HuffmanBitLengthColumn, PairsAroundTheReadBoundDecodeAsWritten) {
  std::mt19937_64 rng(57);
  for (int round = 0; round < 12; ++round) {
    const size_t n = 3000 + static_cast<size_t>(round);  // odd and even
    std::vector<uint64_t> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      const int bits = 20 + static_cast<int>(rng() % 21);
      a[i] = (uint64_t{1} << (bits - 1)) | (rng() & ((uint64_t{1} << (bits - 1)) - 1));
      if (i % 97 == 0) a[i] = (uint64_t{1} << 49) | (rng() >> 15);
      b[i] = round % 3 == 0 ? 0 : (i % 5 == 0 ? rng() >> (14 + rng() % 50) : i % 7);
    }
    std::string ca, cb;
    PutHuffmanBitLengthColumn(a.data(), n, &ca);
    PutHuffmanBitLengthColumn(b.data(), n, &cb);
    std::vector<uint64_t> ga(n), gb(n);
    ASSERT_TRUE(GetHuffmanBitLengthColumn(ca, n, ga.data())) << round;
    EXPECT_EQ(ga, a) << round;
    std::fill(ga.begin(), ga.end(), 0);
    ASSERT_TRUE(GetHuffmanBitLengthColumns(ca, cb, n, ga.data(), gb.data())) << round;
    EXPECT_EQ(ga, a) << round;
    EXPECT_EQ(gb, b) << round;
    ASSERT_TRUE(GetHuffmanBitLengthColumns(cb, ca, n, gb.data(), ga.data())) << round;
    EXPECT_EQ(ga, a) << round;
    EXPECT_EQ(gb, b) << round;
  }
}

// The symbols' counts come from the bit lengths' counts less the frequent values' estimated
// occurrences (sampled votes, scaled): a value of the same bit length as a frequent one must
// keep a code however few of them there are, whether the statistics were gathered by the
// column's own pass (sampled votes) or value by value (HuffmanColumnStats::Add, every vote).
TEST(HuffmanBitLengthColumn, RareValuesBesideAFrequentOneOfTheirLengthKeepACode) {
  std::mt19937_64 rng(7);
  for (size_t n : {size_t{100}, size_t{4095}, size_t{4096}, size_t{20000}, size_t{65536}}) {
    for (int strays : {1, 2, 5, 50}) {
      for (int trial = 0; trial < 4; ++trial) {
        // 1000 and the strays (512..1023) all have bit length 10; a second frequent value too.
        std::vector<uint64_t> v(n, 1000);
        for (size_t i = 0; i < n; i += 3 + trial) v[i] = 700;
        for (int k = 0; k < strays; ++k) v[rng() % n] = 512 + rng() % 512;
        std::string col;
        PutHuffmanBitLengthColumn(v.data(), n, &col);
        std::vector<uint64_t> got(n);
        ASSERT_TRUE(GetHuffmanBitLengthColumn(col, n, got.data())) << n << " " << strays;
        EXPECT_EQ(got, v);
        HuffmanColumnStats stats;
        for (uint64_t x : v) stats.Add(x);
        std::string col2;
        PutHuffmanBitLengthColumn(v.data(), n, stats, &col2);
        ASSERT_TRUE(GetHuffmanBitLengthColumn(col2, n, got.data())) << n << " " << strays;
        EXPECT_EQ(got, v);
        // The frequent values got symbols of their own: far below 10 bits a value.
        EXPECT_LT(col.size(), n / 2 + 64);
      }
    }
  }
}

// Columns of small values (a block's name indexes): every alphabet size up to 64, uniform and
// skewed (frequent values get symbols of their own), odd and even lengths, decoded back
// exactly; and each again with one large last value.
TEST(HuffmanBitLengthColumn, SmallValuesRoundTrip) {
  std::mt19937_64 rng(11);
  for (uint64_t alphabet :
       {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{8}, uint64_t{33}, uint64_t{64}}) {
    for (size_t n : {size_t{1}, size_t{2}, size_t{3}, size_t{64}, size_t{65}, size_t{4097}}) {
      for (int skew = 0; skew < 2; ++skew) {
        std::vector<uint64_t> v(n);
        for (uint64_t& x : v) x = skew && rng() % 4 != 0 ? alphabet - 1 : rng() % alphabet;
        for (int big = 0; big < 2; ++big) {
          if (big) v.back() = 1000 + rng() % 100000;
          std::string col;
          PutHuffmanBitLengthColumn(v.data(), n, &col);
          std::vector<uint64_t> got(n);
          ASSERT_TRUE(GetHuffmanBitLengthColumn(col, n, got.data()))
              << alphabet << " " << n << " " << skew << " " << big;
          EXPECT_EQ(got, v) << alphabet << " " << n << " " << skew << " " << big;
        }
      }
    }
  }
}

TEST(HuffmanBitLengthColumn, MalformedTablesAreRejected) {
  std::vector<uint64_t> v = {5, 6, 7, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 9};
  std::string col;
  PutHuffmanBitLengthColumn(v.data(), v.size(), &col);
  std::vector<uint64_t> got(v.size());
  ASSERT_TRUE(GetHuffmanBitLengthColumn(col, v.size(), got.data()));
  // Every single-byte change either fails or decodes (never reads out of bounds: ASan/UBSan).
  for (size_t i = 0; i < col.size(); ++i) {
    for (int x = 1; x < 256; ++x) {
      std::string bad = col;
      bad[i] = static_cast<char>(bad[i] ^ x);
      (void)GetHuffmanBitLengthColumn(bad, v.size(), got.data());
    }
  }
  // An incomplete code (Kraft sum below 1) and an over-long code are errors: with two symbols of
  // lengths 2 and 1, and with lengths 13.
  const std::string incomplete = std::string("\0\x02\x03\x02\x04\x02", 6) + std::string(4, '\0');
  EXPECT_FALSE(GetHuffmanBitLengthColumn(incomplete, 2, got.data()));
  const std::string too_long = std::string("\0\x02\x03\x0d\x04\x01", 6) + std::string(4, '\0');
  EXPECT_FALSE(GetHuffmanBitLengthColumn(too_long, 2, got.data()));
  const std::string complete = std::string("\0\x02\x03\x01\x04\x01", 6) + std::string(1, '\x02');
  ASSERT_TRUE(GetHuffmanBitLengthColumn(complete, 2, got.data()));
  EXPECT_EQ(got[0], 5u);  // code 0 = symbol 3 (length 3), mantissa 01
  // An exact-value symbol beyond the exact values given, and symbols out of order.
  const std::string undefined = std::string("\x01\x05\x02\x03\x01\x42\x01", 7) + '\0';
  EXPECT_FALSE(GetHuffmanBitLengthColumn(undefined, 2, got.data()));
  const std::string unordered = std::string("\0\x02\x04\x01\x03\x01", 6) + std::string(1, '\0');
  EXPECT_FALSE(GetHuffmanBitLengthColumn(unordered, 2, got.data()));
}

// A parent's duration coded against its children's: nested spans (with gaps, with children that
// overlap or outlast the parent, deeper than the predicted depths, across track runs) come back
// exactly, and a parent that is its children plus a constant costs almost nothing.
TEST(EventBlock, ParentDurationsAgainstChildrenRoundTrip) {
  std::mt19937_64 rng(21);
  std::vector<Row> rows;
  for (uint32_t track = 1; track <= 3; ++track) {
    int64_t ts = 1000;
    uint64_t k = 0;
    for (int iter = 0; iter < 2000; ++iter) {
      const int64_t start = ts;
      Row parent;
      parent.track = track;
      parent.k = k++;
      parent.ts = start;
      parent.name = 1;
      const size_t at = rows.size();
      rows.push_back(parent);
      int64_t t = start + 50, sum = 0;
      const int children = iter % 7;
      for (int c = 0; c < children; ++c) {
        Row ch;
        ch.track = track;
        ch.k = k++;
        ch.ts = t;
        ch.dur = static_cast<int64_t>(1000 + rng() % 1000000);
        ch.depth = 1;
        ch.parent_k = parent.k + 1;
        ch.name = 2;
        rows.push_back(ch);
        if (c == 2) {  // a grandchild
          Row g = ch;
          g.k = k++;
          g.depth = 2;
          g.parent_k = ch.k + 1;
          g.dur = ch.dur / 2;
          rows.push_back(g);
        }
        sum += ch.dur + 100;
        t += ch.dur + 100;
      }
      // Mostly the children plus 500 ns; sometimes shorter than its children (async work).
      rows[at].dur = iter % 11 == 5 ? sum / 3 : sum + 500;
      ts = start + rows[at].dur + static_cast<int64_t>(rng() % 5000);
    }
    // A chain deeper than the predicted depths.
    for (uint32_t d = 0; d < 70; ++d) {
      Row r;
      r.track = track;
      r.k = k++;
      r.ts = ts + d;
      r.dur = 100000 - d;
      r.depth = d;
      r.parent_k = d == 0 ? 0 : r.k;
      rows.push_back(r);
    }
  }
  for (size_t first = 0; first < rows.size(); first += 65536) {
    const size_t n = std::min<size_t>(65536, rows.size() - first);
    std::string blob;
    BlockZone zone;
    EncodeBlock(rows.data() + first, n, &blob, &zone);
    DecodedBlock d;
    ASSERT_TRUE(DecodeBlock(blob, 1, &d, kColDur).ok());
    ASSERT_EQ(d.n, n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(d.dur[i], rows[first + i].dur) << i;
    ASSERT_TRUE(d.Need(kColAll).ok());
    for (size_t i = 0; i < n; ++i) ExpectRowEq(d.RowAt(i), rows[first + i]);
  }
  // The same rows with the parents' durations random instead: the block must grow by about the
  // bits of those durations (the coding spends next to nothing on the predictable ones).
  std::vector<Row> random = rows;
  size_t parents = 0;
  for (size_t i = 0; i + 1 < random.size(); ++i) {
    if (random[i].depth == 0 && random[i + 1].depth == 1) {
      random[i].dur = static_cast<int64_t>(1 + rng() % (1u << 22));
      ++parents;
    }
  }
  std::string a, b;
  BlockZone zone;
  EncodeBlock(rows.data(), std::min<size_t>(rows.size(), 65536), &a, &zone);
  EncodeBlock(random.data(), std::min<size_t>(random.size(), 65536), &b, &zone);
  EXPECT_GT(b.size(), a.size() + parents * 2);
}

// A block of top-level rows only (the decoder then skips the residual pass) and the same block
// with a single parent at its end (the pass runs): durations as recorded, asked for alone, with
// ts, and after ts.
TEST(EventBlock, FlatBlocksAndALoneParentKeepTheirDurations) {
  std::mt19937_64 rng(33);
  std::vector<Row> rows;
  int64_t ts = 5000;
  for (uint64_t k = 0; k < 3000; ++k) {
    Row r;
    r.track = 1 + static_cast<uint32_t>(k / 1000);
    r.k = k;
    r.ts = ts;
    r.dur = static_cast<int64_t>(rng() % 1000000);
    r.name = 1 + static_cast<uint32_t>(rng() % 8);
    ts += r.dur + static_cast<int64_t>(rng() % 1024);
    rows.push_back(r);
  }
  for (int with_parent = 0; with_parent < 2; ++with_parent) {
    if (with_parent) {
      Row& p = rows[rows.size() - 2];  // the last row becomes its child
      rows.back().depth = 1;
      rows.back().parent_k = p.k + 1;
      rows.back().ts = p.ts + 10;
      rows.back().dur = p.dur / 2;
    }
    std::string blob;
    BlockZone zone;
    EncodeBlock(rows, &blob, &zone);
    for (uint32_t want : {uint32_t{kColDur}, uint32_t{kColTs}}) {
      DecodedBlock d;
      ASSERT_TRUE(DecodeBlock(blob, 1, &d, want).ok());
      ASSERT_EQ(d.n, rows.size());
      for (size_t i = 0; i < rows.size(); ++i) {
        ASSERT_EQ(d.dur[i], rows[i].dur) << with_parent << " " << i;
        if (want == kColTs) {
          ASSERT_EQ(d.ts[i], rows[i].ts) << with_parent << " " << i;
        }
      }
      ASSERT_TRUE(d.Need(kColTs).ok());
      for (size_t i = 0; i < rows.size(); ++i) ASSERT_EQ(d.ts[i], rows[i].ts) << i;
    }
  }
}

// DurationsToResiduals and ResidualsToDurations are inverses for any input, hostile depths and
// wrap-around sums included.
TEST(EventBlock, DurationResidualsInvertOnArbitraryInput) {
  std::mt19937_64 rng(4);
  for (int round = 0; round < 200; ++round) {
    const size_t n = 1 + rng() % 300;
    std::vector<uint64_t> dur(n), v;
    std::vector<uint32_t> depth(n), track(n);
    uint32_t t = 1;
    for (size_t i = 0; i < n; ++i) {
      dur[i] = round % 2 ? rng() : rng() % 1000;
      depth[i] = rng() % 10 == 0 ? static_cast<uint32_t>(rng()) : static_cast<uint32_t>(rng() % 6);
      if (rng() % 50 == 0) ++t;
      track[i] = t;
    }
    v = dur;
    DurationsToResiduals(v.data(), depth.data(), track.data(), n);
    ResidualsToDurations(v.data(), depth.data(), track.data(), n);
    ASSERT_EQ(v, dur) << round;
  }
}

// A block of distinct names in distinct categories (an import can make one) has names x
// categories combinations far beyond its rows: the per-(name, cat, kind) statistics must come out
// as for any block, without a table of that size (16K x 16K x 4 entries would be 4 GiB).
TEST(EventBlock, ManyNamesInManyCategoriesKeepExactStatistics) {
  const int n = 16000;
  std::vector<Row> rows;
  for (int i = 0; i < n; ++i) {
    Row r;
    r.ts = 1000 + i * 10;
    r.dur = 5 + i % 3;
    r.track = 1;
    r.k = static_cast<uint64_t>(i);
    r.name = 100 + static_cast<uint32_t>(i / 2);    // each name twice
    r.cat = 100000 + static_cast<uint32_t>(i / 2);  // in its own category
    r.kind = RowKind::kSpan;
    rows.push_back(r);
  }
  std::string blob;
  BlockZone zone;
  EncodeBlock(rows, &blob, &zone);
  ASSERT_EQ(zone.names.size(), static_cast<size_t>(n / 2));
  std::map<std::pair<uint32_t, uint32_t>, std::pair<uint64_t, int64_t>> expect;  // count, total
  for (const Row& r : rows) {
    auto& e = expect[{r.name, r.cat}];
    e.first++;
    e.second += r.dur;
  }
  for (const BlockNameInfo& info : zone.names) {
    const auto it = expect.find({info.name, info.cat});
    ASSERT_NE(it, expect.end());
    EXPECT_EQ(info.count, it->second.first);
    EXPECT_EQ(info.total_dur, it->second.second);
  }
  DecodedBlock d;
  ASSERT_TRUE(DecodeBlock(blob, 1, &d).ok());
  ASSERT_EQ(d.n, static_cast<size_t>(n));
  for (size_t i = 0; i < d.n; ++i) ExpectRowEq(d.RowAt(i), rows[i]);
}

// EncodeBlock takes rows in (track, k) order in one pass and others through a sort, finishes
// the ts deltas once the block's time base and scale are known, and counts each (name, cat,
// kind)'s statistics on the way. Every shape of block (in order or not, its first row first or
// not, a common scale or not, overlapping events, negative and overflowing durations, names in
// several categories and kinds, ids past the dense table) must decode to its rows in (track, k)
// order, with the zone map and name statistics of a plain computation over those rows, and the
// same rows shuffled must give the same.
TEST(EventBlock, EveryShapeOfBlockMatchesAPlainComputation) {
  struct Shape {
    const char* what;
    int tracks;
    int64_t unit;
    bool overlap, negative_dur, extreme, sorted;
  };
  const Shape shapes[] = {
      {"one track in order", 1, 1, false, false, false, true},
      {"tracks in order, a later track starts first", 3, 1, false, false, false, true},
      {"tracks interleaved", 3, 1, false, false, false, false},
      // Up to 64 tracks a block's rows are put in order by a counting sort, past that by a
      // comparison sort (OrderByTrack); a track whose k goes back is the shuffled input below.
      {"64 tracks interleaved", 64, 1, false, false, false, false},
      {"65 tracks interleaved", 65, 1, false, false, false, false},
      {"microseconds in order", 2, 1000, false, false, false, true},
      {"microseconds interleaved", 2, 1000, false, false, false, false},
      {"overlapping events", 1, 1, true, false, false, true},
      {"negative durations", 2, 1, false, true, false, false},
      {"extreme times and durations", 2, 1, false, false, true, true},
  };
  for (const Shape& shape : shapes) {
    SCOPED_TRACE(shape.what);
    std::mt19937_64 rng(99);
    std::vector<Row> rows;
    std::map<uint32_t, uint64_t> next_k;
    int64_t ts = 5'000'000;
    for (int i = 0; i < 20000; ++i) {
      Row r;
      // A later track starts first: its first row has the block's smallest ts.
      r.track = 1 + static_cast<uint32_t>(rng() % shape.tracks);
      r.k = next_k[r.track]++;
      ts += (rng() % 4 == 0 ? 50 : static_cast<int64_t>(rng() % 3000)) * shape.unit;
      r.ts = ts - (r.track == 2 ? 1'000'000 * shape.unit : 0);
      if (shape.overlap && rng() % 5 == 0) r.ts -= static_cast<int64_t>(rng() % 5000);
      r.dur = static_cast<int64_t>(rng() % 40000) * shape.unit;
      if (shape.negative_dur && rng() % 7 == 0) r.dur = -r.dur - 1;
      if (shape.extreme && rng() % 50 == 0) {
        r.ts = static_cast<int64_t>(rng());
        r.dur = static_cast<int64_t>(rng() >> 1);  // ends past INT64_MAX
      }
      r.depth = static_cast<uint32_t>(rng() % 3);
      r.parent_k = r.depth == 0 || r.k == 0 ? 0 : r.k;
      r.name = rng() % 9 == 0 ? (1u << 21) + static_cast<uint32_t>(rng() % 3)
                              : 10 + static_cast<uint32_t>(rng() % 6);
      r.cat = static_cast<uint32_t>(rng() % 3);
      r.kind = static_cast<RowKind>(rng() % kNumRowKinds);
      if (r.kind == RowKind::kCounter) r.value = static_cast<double>(i) / 4;
      if (rng() % 10 == 0) {
        r.args.mask = EventArgs::kBytes | EventArgs::kPeer;
        r.args.bytes = rng() % 100000;
        r.args.peer = static_cast<int32_t>(rng() % 64) - 1;
      }
      if (rng() % 17 == 0) r.json = "{\"i\": " + std::to_string(i) + "}";
      rows.push_back(r);
    }
    std::vector<Row> expected = rows;
    std::stable_sort(expected.begin(), expected.end(), [](const Row& a, const Row& b) {
      return a.track != b.track ? a.track < b.track : a.k < b.k;
    });
    if (shape.sorted) rows = expected;
    std::vector<Row> shuffled = rows;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);

    // The plain computation, over the rows in (track, k) order.
    int64_t min_ts = INT64_MAX, max_end = INT64_MIN, max_dur = 0;
    std::vector<BlockNameInfo> names;
    std::map<std::tuple<uint32_t, uint32_t, RowKind>, size_t> at;
    for (const Row& r : expected) {
      min_ts = std::min(min_ts, r.ts);
      max_end = std::max(max_end, r.end());
      max_dur = std::max(max_dur, r.dur);
      auto [it, fresh] = at.try_emplace({r.name, r.cat, r.kind}, names.size());
      if (fresh) {
        BlockNameInfo& info = names.emplace_back();
        info.name = r.name;
        info.cat = r.cat;
        info.kind = r.kind;
        info.min_dur = r.dur;
        info.max_dur = r.dur;
      }
      BlockNameInfo& info = names[it->second];
      info.count++;
      info.total_dur = SaturatingAdd(info.total_dur, r.dur);
      info.min_dur = std::min(info.min_dur, r.dur);
      info.max_dur = std::max(info.max_dur, r.dur);
      info.hist[static_cast<size_t>(
          r.dur <= 1 ? 0 : std::bit_width(static_cast<uint64_t>(r.dur)) - 1)]++;
    }

    for (const std::vector<Row>* input : {&rows, &shuffled}) {
      std::string blob;
      BlockZone zone;
      EncodeBlock(*input, &blob, &zone);
      EXPECT_EQ(zone.count, expected.size());
      EXPECT_EQ(zone.min_ts, min_ts);
      EXPECT_EQ(zone.max_end, max_end);
      EXPECT_EQ(zone.max_dur, max_dur);
      ASSERT_EQ(zone.names.size(), names.size());
      for (size_t i = 0; i < names.size(); ++i) {
        const BlockNameInfo &got = zone.names[i], &want = names[i];
        EXPECT_EQ(got.name, want.name) << i;
        EXPECT_EQ(got.cat, want.cat) << i;
        EXPECT_EQ(got.kind, want.kind) << i;
        EXPECT_EQ(got.count, want.count) << i;
        EXPECT_EQ(got.total_dur, want.total_dur) << i;
        EXPECT_EQ(got.min_dur, want.min_dur) << i;
        EXPECT_EQ(got.max_dur, want.max_dur) << i;
        EXPECT_EQ(got.hist, want.hist) << i;
      }
      // (A block keeps durations of 0 to INT64_MAX: its decoder rejects others, so the zone map
      // is all there is to check with negative ones.)
      if (shape.negative_dur) continue;
      DecodedBlock d;
      const Status st = DecodeBlock(blob, 1, &d);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(d.n, expected.size());
      for (size_t i = 0; i < d.n; ++i) ExpectRowEq(d.RowAt(i), expected[i]);
    }
  }
}

// A block whose rows are out of (track, k) order counts its ts statistics in the encoder's pass
// as plain deltas or as zigzags, by whether the block before it (on this thread) had a negative
// delta; a wrong guess is counted again. Blocks with and without negative deltas, in every
// order, must give the bytes a fresh thread gives (no history) and decode to their rows.
TEST(EventBlock, BlocksOutOfOrderEncodeAloneWhateverCameBefore) {
  auto make = [](bool overlap, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<Row> rows;
    uint64_t k[2] = {0, 0};
    int64_t end[2] = {1'000'000, 1'000'500};
    for (int i = 0; i < 3000; ++i) {
      Row r;
      r.track = 1 + static_cast<uint32_t>(rng() % 2);  // two tracks, interleaved
      r.k = k[r.track - 1]++;
      // Each row starts after its track's last end (deltas >= 0), or before it (< 0).
      r.ts = end[r.track - 1] + static_cast<int64_t>(rng() % 5000) -
             (overlap && rng() % 4 == 0 ? 3000 : 0);
      r.dur = 1 + static_cast<int64_t>(rng() % 2000);
      end[r.track - 1] = std::max(end[r.track - 1], r.ts + r.dur);
      r.name = 10 + static_cast<uint32_t>(rng() % 5);
      if (rng() % 8 == 0) {
        r.args.mask = EventArgs::kBytes;
        r.args.bytes = rng() % 4096;
      }
      rows.push_back(r);
    }
    return rows;
  };
  auto encode = [](const std::vector<Row>& rows) {
    std::string blob;
    BlockZone zone;
    EncodeBlock(rows, &blob, &zone);
    return blob;
  };
  auto encode_fresh = [&](const std::vector<Row>& rows) {
    std::string blob;
    std::thread t([&] { blob = encode(rows); });
    t.join();
    return blob;
  };
  const bool order[] = {true, false, false, true, true, false, true};
  for (size_t b = 0; b < std::size(order); ++b) {
    SCOPED_TRACE(b);
    const std::vector<Row> rows = make(order[b], 40 + b);
    std::vector<Row> expected = rows;
    std::stable_sort(expected.begin(), expected.end(), [](const Row& x, const Row& y) {
      return x.track != y.track ? x.track < y.track : x.k < y.k;
    });
    bool interleaved = false;
    for (size_t i = 1; i < rows.size(); ++i) interleaved |= rows[i].track < rows[i - 1].track;
    ASSERT_TRUE(interleaved);
    const std::string blob = encode(rows);
    EXPECT_EQ(blob, encode_fresh(rows));
    DecodedBlock d;
    const Status st = DecodeBlock(blob, 1, &d);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(d.n, expected.size());
    for (size_t i = 0; i < d.n; ++i) ExpectRowEq(d.RowAt(i), expected[i]);
  }
}

// The container's codec 2 (a stored section after the LZ4 bytes) against the plain
// concatenation it stands for, for sections anywhere in payloads of every kind: compressible or
// not, empty or not. Each blob unpacks to the concatenation; its codec is the one the contents
// call for; every cut and every out-of-range section is an error, never a crash.
TEST(BlockContainer, StoredSectionsUnpackToTheConcatenation) {
  std::mt19937_64 rng(11);
  auto bytes = [&rng](size_t n, bool random) {
    std::string b(n, '\0');
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<char>(random ? rng() : i % 13);
    return b;
  };
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE(round);
    const bool lz_random = round % 5 == 4;
    const std::string lz = bytes(200 + rng() % 3000, lz_random);
    const std::string stored = bytes(round % 3 == 0 ? 0 : rng() % 5000, true);
    const size_t at = rng() % (lz.size() + 1);
    const std::string want = lz.substr(0, at) + stored + lz.substr(at);
    std::string blob;
    PackBlock(lz, at, stored, &blob);
    const uint8_t codec =
        lz_random ? kBlockCodecRaw : (stored.empty() ? kBlockCodecLz4 : kBlockCodecLz4Stored);
    ASSERT_EQ(static_cast<uint8_t>(blob[0]), codec);
    std::string raw;
    BlockContainer box;
    ASSERT_TRUE(UnpackBlock(blob, &raw, &box).ok());
    EXPECT_EQ(raw, want);
    EXPECT_EQ(box.codec, codec);
    EXPECT_EQ(box.stored_len, codec == kBlockCodecLz4Stored ? stored.size() : 0);
    if (codec == kBlockCodecLz4Stored) {
      EXPECT_EQ(box.stored_at, at);
    }
    for (size_t n = 0; n < blob.size(); n += 1 + n / 16) {
      EXPECT_FALSE(UnpackBlock(std::string_view(blob.data(), n), &raw).ok()) << n;
    }
  }
  // A section that does not lie in the payload, or claims more bytes than follow the header.
  const std::string lz = bytes(2000, false), stored = bytes(1500, true);
  std::string blob;
  PackBlock(lz, 700, stored, &blob);
  ASSERT_EQ(static_cast<uint8_t>(blob[0]), kBlockCodecLz4Stored);
  Reader hdr(blob);
  uint8_t codec;
  uint64_t size, at, len;
  uint32_t crc;
  ASSERT_TRUE(hdr.GetU8(&codec) && hdr.GetVarint64(&size) && hdr.GetFixed32(&crc) &&
              hdr.GetVarint64(&at) && hdr.GetVarint64(&len));
  const std::string_view body(hdr.data(), hdr.remaining());
  const std::vector<std::pair<uint64_t, uint64_t>> bad = {
      {size + 1, 0},     {0, size + 1},    {size, 1},     {at, body.size() + 1},
      {UINT64_MAX, len}, {at, UINT64_MAX}, {at + 1, len}, {at, len - 1}};
  for (const auto& [a, l] : bad) {
    std::string b;
    b.push_back(static_cast<char>(kBlockCodecLz4Stored));
    PutVarint64(&b, size);
    PutFixed32(&b, crc);
    PutVarint64(&b, a);
    PutVarint64(&b, l);
    b.append(body);
    std::string raw;
    EXPECT_FALSE(UnpackBlock(b, &raw).ok()) << a << " " << l;
  }
}

// The encoder keeps the entropy-coded ts and dur columns of random values out of LZ4 (codec 2),
// and leaves a column LZ4 can shrink with the rest: durations that repeat a cycle of 40 values
// make bits that repeat, which LZ4 compresses several-fold.
TEST(EventBlock, RandomColumnsAreStoredAndPeriodicOnesCompressed) {
  auto block = [](bool periodic_dur, bool periodic_ts) {
    std::mt19937_64 rng(5);
    std::vector<int64_t> cycle(40);
    for (int64_t& c : cycle) c = static_cast<int64_t>(rng() % 1000000);
    std::vector<Row> rows;
    int64_t ts = 1700000000000000000;
    for (uint64_t i = 0; i < 16384; ++i) {
      Row r;
      r.track = 1;
      r.k = i;
      r.name = 10;
      r.dur = periodic_dur ? cycle[i % cycle.size()] : static_cast<int64_t>(rng() % 1000000);
      r.ts = ts;
      ts += r.dur +
            (periodic_ts ? cycle[(i * 7) % cycle.size()] : static_cast<int64_t>(rng() % 5000));
      rows.push_back(r);
    }
    std::string blob;
    BlockZone zone;
    EncodeBlock(rows, &blob, &zone);
    DecodedBlock d;
    EXPECT_TRUE(DecodeBlock(blob, 1, &d).ok());
    EXPECT_EQ(d.n, rows.size());
    for (size_t i = 0; i < d.n && i < rows.size(); ++i) {
      if (d.ts[i] != rows[i].ts || d.dur[i] != rows[i].dur) {
        ADD_FAILURE() << "row " << i;
        break;
      }
    }
    std::string raw;
    BlockContainer box;
    EXPECT_TRUE(UnpackBlock(blob, &raw, &box).ok());
    return std::make_pair(box, blob.size());
  };
  const auto [random_box, random_bytes] = block(false, false);
  EXPECT_EQ(random_box.codec, kBlockCodecLz4Stored);
  const auto [dur_box, dur_bytes] = block(true, false);  // ts random, dur periodic: ts stored
  EXPECT_EQ(dur_box.codec, kBlockCodecLz4Stored);
  EXPECT_LT(dur_box.stored_len, random_box.stored_len * 3 / 4);
  const auto [both_box, both_bytes] = block(true, true);
  EXPECT_EQ(both_box.codec, kBlockCodecLz4);
  EXPECT_EQ(both_box.stored_len, 0u);
  EXPECT_LT(both_bytes, random_bytes / 4);
}

}  // namespace
}  // namespace tracedb::engine
