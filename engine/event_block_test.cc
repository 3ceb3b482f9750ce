#include "engine/event_block.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

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
  // Format 2 codes dur by bit length: 0, 1, and 2^b - 1, 2^b, 2^b + 1 for every b up to 62,
  // and INT64_MAX, in one block (lengths 0 to 63: the widest length field).
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

}  // namespace
}  // namespace tracedb::engine
