// ClockModel: the maps the common clock is built from (docs/database-format.md "Clocks"), on
// known answers: an offset is exact, an inverted map undoes the map to the ns, a composition
// equals the two maps applied one after the other, and a bulk-built model equals one built knot
// by knot.
#include "engine/db/clock_model.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <utility>
#include <vector>

namespace tracedb::engine {
namespace {

constexpr int64_t kSec = 1000000000;

// A clock that runs (1 + ppm * 1e-6) times as fast as local time, in steps of one second, with
// the rate changing by `wobble` ppm every second.
std::vector<std::pair<int64_t, int64_t>> Knots(int64_t origin, double ppm, double wobble, int n) {
  std::vector<std::pair<int64_t, int64_t>> k;
  int64_t c = origin;
  for (int i = 0; i < n; ++i) {
    k.emplace_back(int64_t{i} * kSec, c);
    c += kSec + static_cast<int64_t>((ppm + (i % 2 ? wobble : -wobble)) * 1000);
  }
  return k;
}

TEST(ClockModel, OffsetIsExact) {
  const ClockModel m = ClockModel::Offset(5 * kSec, 1700000000 * kSec);
  for (int64_t t : {int64_t{0}, 5 * kSec, 5 * kSec + 6067204, 3600 * kSec}) {
    EXPECT_EQ(m.Map(t), t + 1700000000 * kSec);
  }
  // A span's duration is unchanged, wherever it lies.
  EXPECT_EQ(m.Map(123456789 + 6067204) - m.Map(123456789), 6067204);
}

// OffsetOver: true exactly when Map is t + offset over the whole range (known offsets put in),
// false across a knot where the rate changes, at a rate other than 1, and where the sum would
// pass INT64_MAX (Map saturates there).
TEST(ClockModel, OffsetOverOnlyWhereMapIsAnOffset) {
  int64_t off = -1;
  ClockModel none;
  ASSERT_TRUE(none.OffsetOver(-5, 5 * kSec, &off));
  EXPECT_EQ(off, 0);

  const ClockModel m = ClockModel::Offset(5 * kSec, 1700000000 * kSec);
  ASSERT_TRUE(m.OffsetOver(6 * kSec, 9 * kSec, &off));
  EXPECT_EQ(off, 1700000000 * kSec);
  EXPECT_EQ(m.Map(9 * kSec), 9 * kSec + off);
  // Before the first knot Map extends the segment backwards but OffsetOver does not claim it.
  EXPECT_FALSE(m.OffsetOver(4 * kSec, 6 * kSec, &off));
  // Near the top of the range Map saturates: no offset.
  EXPECT_FALSE(m.OffsetOver(6 * kSec, INT64_MAX - kSec, &off));

  // Rate 1 from 0 to 10 s (offset 100), then rate 2 (a damaged, flat segment's clamp).
  const ClockModel two =
      ClockModel::FromKnots({{0, 100}, {10 * kSec, 10 * kSec + 100}, {20 * kSec, 30 * kSec + 100}});
  ASSERT_TRUE(two.OffsetOver(kSec, 2 * kSec, &off));
  EXPECT_EQ(off, 100);
  EXPECT_FALSE(two.OffsetOver(9 * kSec, 11 * kSec, &off));   // across the knot
  EXPECT_FALSE(two.OffsetOver(11 * kSec, 12 * kSec, &off));  // rate 2
  EXPECT_EQ(two.Map(12 * kSec), 14 * kSec + 100);
}

// AffineOver: where it says yes, At(t) is Map(t) at every t of the range (both ends, and random
// ones between), at rates other than 1 and a second or more past the segment's knot (where Map
// takes its 128-bit path); no across a knot, before the first knot, or where Map saturates.
TEST(ClockModel, AffineOverEqualsMapWhereItHolds) {
  ClockModel::Affine a;
  EXPECT_FALSE(ClockModel().AffineOver(0, 10, &a));  // no knots: Map(t) == t (OffsetOver's)

  const ClockModel drift = ClockModel::FromKnots(Knots(1700000000 * kSec, 37.0, 11.3, 20));
  std::mt19937_64 rng(5);
  size_t ranges = 0;
  for (int i = 0; i < 2000; ++i) {
    const int64_t lo = static_cast<int64_t>(rng() % (25 * kSec));
    const int64_t hi = lo + static_cast<int64_t>(rng() % (i % 2 ? kSec / 50 : 3 * kSec));
    const bool across = lo / kSec != hi / kSec && lo / kSec < 19;
    ASSERT_EQ(drift.AffineOver(lo, hi, &a), !across) << lo << " " << hi;
    if (across) continue;
    ++ranges;
    EXPECT_EQ(a.At(lo), drift.Map(lo));
    EXPECT_EQ(a.At(hi), drift.Map(hi));
    for (int j = 0; j < 20; ++j) {
      const int64_t t = lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
      ASSERT_EQ(a.At(t), drift.Map(t)) << t;
    }
  }
  EXPECT_GT(ranges, 1000u);
  // Past the last knot the last segment goes on: 100 s in, Map's 128-bit path.
  ASSERT_TRUE(drift.AffineOver(120 * kSec, 121 * kSec, &a));
  EXPECT_EQ(a.At(120 * kSec + 12345), drift.Map(120 * kSec + 12345));

  // Rate 2 from 10 s on (the clamp of a damaged, flat segment; the last knot keeps the rate of
  // the segment before it), up to where Map saturates.
  const ClockModel two =
      ClockModel::FromKnots({{0, 100}, {10 * kSec, 10 * kSec + 100}, {20 * kSec, 30 * kSec + 100}});
  ASSERT_TRUE(two.AffineOver(11 * kSec, 12 * kSec, &a));
  EXPECT_EQ(a.At(11 * kSec + 7), two.Map(11 * kSec + 7));
  EXPECT_EQ(a.At(11 * kSec + 7), 12 * kSec + 114);
  EXPECT_FALSE(two.AffineOver(-kSec, kSec, &a));  // before the first knot
  const int64_t last = INT64_MAX / 2;             // maps to INT64_MAX - 10 s + 99
  ASSERT_TRUE(two.AffineOver(21 * kSec, last, &a));
  EXPECT_EQ(a.At(last), two.Map(last));
  EXPECT_EQ(a.At(last), INT64_MAX - 10 * kSec + 99);
  EXPECT_FALSE(two.AffineOver(21 * kSec, last + 6 * kSec, &a));  // Map saturates there
  // To the ns: the last t whose 30 s + 100 + 2 (t - 20 s) is at most INT64_MAX.
  const int64_t edge = 20 * kSec + (INT64_MAX - 30 * kSec - 100) / 2;
  ASSERT_TRUE(two.AffineOver(21 * kSec, edge, &a));
  EXPECT_EQ(a.At(edge), two.Map(edge));
  EXPECT_EQ(a.At(edge), INT64_MAX - 1);
  EXPECT_FALSE(two.AffineOver(21 * kSec, edge + 1, &a));
  EXPECT_TRUE(two.AffineOver(edge, edge, &a));  // after a miss, from the segment's cache
  EXPECT_EQ(two.Map(last + 6 * kSec), INT64_MAX);
}

TEST(ClockModel, InvertedUndoesTheMap) {
  const ClockModel m = ClockModel::FromKnots(Knots(1700000000 * kSec, 3.0, 0.7, 60));
  const ClockModel back = m.Inverted();
  for (int64_t t = 0; t < 59 * kSec; t += 987654321) {
    // Each map floors, and slopes are 32-bit fixed point: 2 ns at most after both.
    EXPECT_LE(std::llabs(back.Map(m.Map(t)) - t), 2) << t;
  }
}

TEST(ClockModel, ComposeIsTheMapsOneAfterTheOther) {
  const ClockModel inner = ClockModel::FromKnots(Knots(1700000000 * kSec, -12.0, 0.5, 40));
  // The outer map's knots fall between the inner's (offset by half a second of its input).
  std::vector<std::pair<int64_t, int64_t>> ok;
  for (const auto& [l, c] : Knots(7 * kSec, 4.0, 1.5, 40)) {
    ok.emplace_back(l + 1700000000 * kSec + kSec / 2, c);
  }
  const ClockModel outer = ClockModel::FromKnots(ok);
  const ClockModel both = ClockModel::Compose(inner, outer);
  for (int64_t t = kSec / 3; t < 38 * kSec; t += 123456789) {
    EXPECT_LE(std::llabs(both.Map(t) - outer.Map(inner.Map(t))), 2) << t;
  }
  // With no outer map (no reference clock) the inner map is kept as it is.
  const ClockModel alone = ClockModel::Compose(inner, ClockModel());
  EXPECT_EQ(alone.Map(17 * kSec + 5), inner.Map(17 * kSec + 5));
}

TEST(ClockModel, FromKnotsEqualsKnotByKnot) {
  const auto knots = Knots(1700000000 * kSec, 2.5, 0.3, 30);
  ClockModel one;
  for (const auto& [l, c] : knots) one.AddKnot(l, c);
  auto shuffled = knots;
  std::swap(shuffled[3], shuffled[20]);
  shuffled.emplace_back(knots[5].first + 10, knots[5].second + 10);  // < 1 ms from a knot
  const ClockModel bulk = ClockModel::FromKnots(shuffled);
  EXPECT_EQ(bulk.size(), one.size());
  for (int64_t t = -kSec; t < 31 * kSec; t += 77777777) EXPECT_EQ(bulk.Map(t), one.Map(t)) << t;
}

}  // namespace
}  // namespace tracedb::engine
