// The span statistics views (span_stats, name_stats_all; computed by the table-valued
// functions of query/views/views_spans.h) and the `kind` filter of `events` (settled per block from
// block_names and name_stats, checked exactly in the scan) on small hand-built traces whose
// every expected value is worked out by hand below: a name on two ranks, instants and counters
// under a span's name (not spans), one name under two categories, a single-span group, and a
// trace without spans. tests/events_differential_test.cc compares the same views with their
// plain SQL on random traces.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/db/trace_builder.h"
#include "engine/db/trace_writer.h"
#include "query/open/query_db.h"
#include "query/views/exact_select.h"
#include "query/views/views.h"
#include "tests/hand_trace.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

// Rows of `sql` as text, one string per row ("NULL" for NULL), fields joined by '|', each
// field prefixed by its type's letter (i integer, r real, t text).
std::vector<std::string> Rows(engine::Db* db, const std::string& sql) {
  std::vector<std::string> out;
  auto st = db->Prepare(sql);
  EXPECT_TRUE(st.ok()) << sql << ": " << st.status().message();
  if (!st.ok()) return out;
  for (;;) {
    auto row = st->Step();
    EXPECT_TRUE(row.ok()) << sql << ": " << row.status().message();
    if (!row.ok() || !*row) break;
    std::string r;
    for (int i = 0; i < sqlite3_column_count(st->raw()); ++i) {
      if (i) r += "|";
      switch (sqlite3_column_type(st->raw(), i)) {
        case SQLITE_NULL:
          r += "NULL";
          break;
        case SQLITE_INTEGER:
          r += std::string(st->Text(i));
          break;
        case SQLITE_FLOAT:
          r += "r" + std::string(st->Text(i));
          break;
        default:
          r += "t" + std::string(st->Text(i));
      }
    }
    out.push_back(r);
  }
  return out;
}

struct Trace {
  engine::TraceWriter* tw;
  engine::TraceBuilder* b;
  std::vector<uint32_t> track;
};

// Writes a trace of `ranks` ranks (one track each) with what `fill` adds, in one batch.
template <typename Fill>
void Write(const std::string& path, int ranks, Fill fill) {
  auto w = engine::TraceWriter::Open(path);
  ASSERT_TRUE(w.ok()) << w.status().message();
  engine::TraceWriter* tw = w->get();
  engine::TraceBuilder b(tw);
  ASSERT_TRUE(tw->BeginBatch().ok());
  Trace t{tw, &b, {}};
  for (int r = 0; r < ranks; ++r) {
    t.track.push_back(AddRankTrack(tw, r, ranks, "spans-test"));
  }
  fill(t);
  ASSERT_TRUE(tw->CommitBatch().ok());
}

TEST(SpanViews, HandBuiltTraceGivesHandDerivedRows) {
  TempDir tmp;
  const std::string path = tmp.Sub("spans.tdb");
  Write(path, 2, [](Trace& t) {
    const uint32_t a = t.tw->Intern("a"), b = t.tw->Intern("b"), cat1 = t.tw->Intern("c1"),
                   cat2 = t.tw->Intern("c2"), ctr = t.tw->Intern("ctr");
    // Rank 0: spans "a" of 1..10 ns (category c1 for the odd ones, c2 for the even ones), an
    // instant "a" and a counter: not spans.
    for (int64_t d = 1; d <= 10; ++d)
      ASSERT_TRUE(t.b->Complete(t.track[0], 100 * d, d, a, d % 2 ? cat1 : cat2, nullptr).ok());
    ASSERT_TRUE(t.b->Instant(t.track[0], 2000, a, cat1, nullptr).ok());
    ASSERT_TRUE(t.b->Counter(t.track[0], 2100, ctr, 0, 3.5).ok());
    // Rank 1: spans "a" of 200 and 100 ns, one span "b" of 7 ns.
    ASSERT_TRUE(t.b->Complete(t.track[1], 100, 200, a, cat1, nullptr).ok());
    ASSERT_TRUE(t.b->Complete(t.track[1], 400, 100, a, cat1, nullptr).ok());
    ASSERT_TRUE(t.b->Complete(t.track[1], 600, 7, b, 0, nullptr).ok());
    ASSERT_TRUE(t.b->Instant(t.track[1], 700, b, 0, nullptr).ok());
  });
  auto db = query::OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  engine::Db* q = db->get();
  // Nearest rank: of n values the ceil(p/100 * n)-th smallest. Rank 0 "a": 1..10, sum 55,
  // mean 5.5 -> 5, p50 the 5th (5), p95 and p99 the 10th (10). Rank 1 "a": 100, 200: sum 300,
  // mean 150, p50 the 1st (100), p95 and p99 the 2nd (200).
  EXPECT_EQ(Rows(q, "SELECT * FROM span_stats"),
            (std::vector<std::string>{"0|ta|10|55|5|5|10|10|10", "1|ta|2|300|150|100|200|200|200",
                                      "1|tb|1|7|7|7|7|7|7"}));
  // Over both ranks, "a" has 1..10, 100, 200: count 12, sum 355, mean 29.58 -> 29, p50 the
  // 6th (6), p95 ceil(11.4) = 12th (200), p99 ceil(11.88) = 12th (200).
  EXPECT_EQ(Rows(q, "SELECT * FROM name_stats_all"),
            (std::vector<std::string>{"ta|12|2|355|29|6|200|200|200", "tb|1|1|7|7|7|7|7|7"}));
  // rank = x reads one rank; a text that is a number compares as that number.
  EXPECT_EQ(Rows(q, "SELECT name, count FROM span_stats WHERE rank = '1'"),
            (std::vector<std::string>{"ta|2", "tb|1"}));
  EXPECT_EQ(Rows(q, "SELECT count(*) FROM span_stats WHERE rank = 1.5"),
            (std::vector<std::string>{"0"}));
  EXPECT_EQ(Rows(q, "SELECT count(*) FROM span_stats WHERE rank IN (0, 1, 'x')"),
            (std::vector<std::string>{"3"}));
  // The same rows as the plain SQL the views replace, in the same order.
  EXPECT_EQ(Rows(q, "SELECT * FROM span_stats"),
            Rows(q,
                 "SELECT rank, name, count(*), sum(dur), CAST(avg(dur) AS INTEGER), "
                 "percentile(dur, 50), percentile(dur, 95), percentile(dur, 99), max(dur) "
                 "FROM events WHERE kind = 'span' GROUP BY rank, name"));
  // The kind filter, exact (SQLite does not re-check it): 13 spans, 2 instants, 1 counter.
  EXPECT_EQ(Rows(q, "SELECT count(*) FROM spans"), (std::vector<std::string>{"13"}));
  EXPECT_EQ(Rows(q, "SELECT count(*) FROM events WHERE kind = 'instant'"),
            (std::vector<std::string>{"2"}));
  EXPECT_EQ(Rows(q, "SELECT count(*) FROM events WHERE kind IN ('instant', 'counter', 'x')"),
            (std::vector<std::string>{"3"}));
  EXPECT_EQ(Rows(q, "SELECT count(*) FROM events WHERE kind NOT IN ('span')"),
            (std::vector<std::string>{"3"}));
  for (const char* none : {"'Span'", "NULL", "0", "x'7370616e'", "'span '"}) {
    EXPECT_EQ(Rows(q, std::string("SELECT count(*) FROM events WHERE kind = ") + none),
              (std::vector<std::string>{"0"}))
        << none;
  }
  EXPECT_EQ(Rows(q, "SELECT count(*) FROM events WHERE kind = 'span' AND kind = 'flow'"),
            (std::vector<std::string>{"0"}));
  EXPECT_EQ(Rows(q, "SELECT count(*) FROM events WHERE kind = 'SPAN' COLLATE NOCASE"),
            (std::vector<std::string>{"13"}));
  EXPECT_EQ(Rows(q, "SELECT sum(dur) FROM events WHERE kind = 'span' AND rank = 1"),
            (std::vector<std::string>{"307"}));
}

// A block holding only spans is settled by its zone map; one holding none is skipped; a block
// of several kinds is filtered row by row. Each gives the counts the generator wrote.
TEST(SpanViews, KindFilterOverPureAndMixedBlocks) {
  TempDir tmp;
  const std::string path = tmp.Sub("kinds.tdb");
  Write(path, 3, [](Trace& t) {
    const uint32_t s = t.tw->Intern("s"), i = t.tw->Intern("i"), c = t.tw->Intern("c");
    // Rank 0: spans only; rank 1: instants and counters only; rank 2: every kind.
    for (int64_t k = 0; k < 1000; ++k) {
      ASSERT_TRUE(t.b->Complete(t.track[0], 10 * k, 5, s, 0, nullptr).ok());
      ASSERT_TRUE(t.b->Instant(t.track[1], 10 * k, i, 0, nullptr).ok());
      if (k % 4 == 0) {
        ASSERT_TRUE(t.b->Counter(t.track[1], 10 * k + 1, c, 0, 1.0).ok());
      }
      ASSERT_TRUE(t.b->Complete(t.track[2], 10 * k, 5, s, 0, nullptr).ok());
      if (k % 2 == 0) {
        ASSERT_TRUE(t.b->Instant(t.track[2], 10 * k + 6, i, 0, nullptr).ok());
      }
    }
  });
  auto db = query::OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  engine::Db* q = db->get();
  EXPECT_EQ(Rows(q, "SELECT rank, count(*) FROM spans GROUP BY rank"),
            (std::vector<std::string>{"0|1000", "2|1000"}));
  EXPECT_EQ(Rows(q, "SELECT rank, count(*) FROM events WHERE kind = 'instant' GROUP BY rank"),
            (std::vector<std::string>{"1|1000", "2|500"}));
  EXPECT_EQ(Rows(q, "SELECT count(*) FROM events WHERE kind = 'counter'"),
            (std::vector<std::string>{"250"}));
  EXPECT_EQ(Rows(q, "SELECT count(*) FROM events WHERE kind IN ('span', 'counter')"),
            (std::vector<std::string>{"2250"}));
  EXPECT_EQ(Rows(q, "SELECT count(*) FROM events WHERE kind = 'flow'"),
            (std::vector<std::string>{"0"}));
  // Rows read through xColumn agree with the filter.
  EXPECT_EQ(Rows(q,
                 "SELECT kind, count(*) FROM events WHERE kind IN ('instant', 'span') "
                 "GROUP BY kind"),
            (std::vector<std::string>{"tinstant|1500", "tspan|2000"}));
  EXPECT_EQ(Rows(q, "SELECT count(*) FROM events WHERE kind = 'span' ORDER BY dur DESC LIMIT 3"),
            (std::vector<std::string>{"2000"}));
  EXPECT_EQ(Rows(q, "SELECT id FROM events WHERE kind = 'span' AND rank = 1"),
            (std::vector<std::string>{}));
}

// The top-n search keeps at most 16 decoded blocks for its winners and loads the others again:
// winners from 30 blocks (one rank each, one long span of a known length per rank) come back
// whole and in order, each block's count checked against its decode (it once reloaded them
// with a count of 0, and every `ORDER BY dur DESC LIMIT 20` over more than 16 blocks failed).
TEST(SpanViews, TopNWithWinnersFromMoreBlocksThanItKeeps) {
  TempDir tmp;
  const std::string path = tmp.Sub("top.tdb");
  constexpr int kRanks = 40;
  Write(path, kRanks, [](Trace& t) {
    const uint32_t a = t.tw->Intern("a");
    for (int r = 0; r < kRanks; ++r) {
      // Short spans, then one of 1,000,000 + r ns: the longest of rank r.
      for (int64_t i = 0; i < 50; ++i)
        ASSERT_TRUE(t.b->Complete(t.track[r], 1000 * i, 10 + i, a, 0, nullptr).ok());
      ASSERT_TRUE(t.b->Complete(t.track[r], 100000, 1000000 + r, a, 0, nullptr).ok());
    }
  });
  auto db = query::OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  std::vector<std::string> expected;
  for (int r = kRanks - 1; r >= kRanks - 30; --r)
    expected.push_back(std::to_string(r) + "|" + std::to_string(1000000 + r));
  EXPECT_EQ(Rows(db->get(), "SELECT rank, dur FROM events ORDER BY dur DESC LIMIT 30"), expected);
  EXPECT_EQ(Rows(db->get(),
                 "SELECT count(DISTINCT block) FROM (SELECT rank AS block FROM events "
                 "ORDER BY dur DESC LIMIT 30)"),
            (std::vector<std::string>{"30"}));
}

// Without the summaries (name_stats emptied, then dropped) nothing is settled per block: every
// row is checked, with the same counts.
TEST(SpanViews, KindFilterWithoutSummaries) {
  TempDir tmp;
  const std::string path = tmp.Sub("nostats.tdb");
  Write(path, 2, [](Trace& t) {
    const uint32_t s = t.tw->Intern("s"), i = t.tw->Intern("i");
    for (int64_t k = 0; k < 300; ++k) {
      ASSERT_TRUE(t.b->Complete(t.track[0], 10 * k, 5, s, 0, nullptr).ok());
      ASSERT_TRUE(t.b->Instant(t.track[1], 10 * k, i, 0, nullptr).ok());
      if (k % 3 == 0) {
        ASSERT_TRUE(t.b->Complete(t.track[1], 10 * k + 1, 2, s, 0, nullptr).ok());
      }
    }
  });
  for (const char* change : {"DELETE FROM name_stats", "DROP TABLE name_stats"}) {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(raw, change, nullptr, nullptr, nullptr), SQLITE_OK) << change;
    sqlite3_close(raw);
    auto db = query::OpenQueryDb(path);
    ASSERT_TRUE(db.ok()) << db.status().message();
    engine::Db* q = db->get();
    EXPECT_EQ(Rows(q, "SELECT rank, count(*) FROM spans GROUP BY rank"),
              (std::vector<std::string>{"0|300", "1|100"}))
        << change;
    EXPECT_EQ(Rows(q, "SELECT count(*) FROM events WHERE kind = 'instant'"),
              (std::vector<std::string>{"300"}))
        << change;
  }
}

TEST(SpanViews, NoSpansNoRows) {
  TempDir tmp;
  const std::string path = tmp.Sub("instants.tdb");
  Write(path, 1, [](Trace& t) {
    const uint32_t i = t.tw->Intern("i");
    ASSERT_TRUE(t.b->Instant(t.track[0], 10, i, 0, nullptr).ok());
  });
  auto db = query::OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  engine::Db* q = db->get();
  EXPECT_EQ(Rows(q, "SELECT count(*) FROM span_stats"), (std::vector<std::string>{"0"}));
  EXPECT_EQ(Rows(q, "SELECT count(*) FROM name_stats_all"), (std::vector<std::string>{"0"}));
  EXPECT_EQ(Rows(q, "SELECT count(*) FROM spans"), (std::vector<std::string>{"0"}));
}

// The nearest-rank percentile of `v` worked out here by a full sort: the smallest r with
// r >= p/100 * n (1-based), in integers.
int64_t SortedPercentile(std::vector<int64_t> v, int p) {
  std::sort(v.begin(), v.end());
  const size_t r = std::max<size_t>(1, (static_cast<size_t>(p) * v.size() + 99) / 100);
  return v[r - 1];
}

// A span_stats row worked out from the durations themselves ("i" fields as Rows() prints them).
std::string ExpectedRow(const std::string& head, const std::vector<int64_t>& v) {
  int64_t sum = 0, max = INT64_MIN;
  for (int64_t d : v) {
    sum += d;
    max = std::max(max, d);
  }
  // Every sum here is far below 2^53: the mean in doubles is the exact quotient, truncated.
  return head + "|" + std::to_string(v.size()) + "|" + std::to_string(sum) + "|" +
         std::to_string(sum / static_cast<int64_t>(v.size())) + "|" +
         std::to_string(SortedPercentile(v, 50)) + "|" + std::to_string(SortedPercentile(v, 95)) +
         "|" + std::to_string(SortedPercentile(v, 99)) + "|" + std::to_string(max);
}

// Groups too large to hold, whose percentiles the views select over further passes
// (query/views/exact_select.h), against the sorted durations the test generated: nearly all
// values in one log2 bucket (and in one bucket of the first pass), three values tied thousands
// of times each, a spread over 30 powers of two, and groups at the size where the first pass
// stops holding values (976 held, 977 and 978 not).
TEST(SpanViews, PercentilesOfLargeGroupsAreExact) {
  TempDir tmp;
  const std::string path = tmp.Sub("large.tdb");
  std::mt19937_64 rng(20261128);
  const std::vector<std::string> names = {"held", "narrow", "spilled", "spread", "ties"};
  // durs[rank][name], names in byte order as the rows come.
  std::vector<std::vector<std::vector<int64_t>>> durs(2, std::vector<std::vector<int64_t>>(5));
  for (size_t r = 0; r < 2; ++r) {
    for (int i = 0; i < 30000; ++i) {
      // 1,000,000 .. 1,003,000: all in [917504, 1048575], one bucket of the first pass.
      durs[r][1].push_back(1000000 + static_cast<int64_t>(rng() % 3001));
      durs[r][3].push_back(static_cast<int64_t>(rng() % (uint64_t{2} << (rng() % 30))));
      // 7 x 5000, 1000 x 20000, 10^9 x 5000 (shuffled below).
      durs[r][4].push_back(i < 5000 ? 7 : i < 25000 ? 1000 : 1000000000);
    }
    for (int i = 0; i < 976; ++i) durs[r][0].push_back(static_cast<int64_t>(rng() % 5000));
    for (size_t i = 0; i < 977 + r; ++i) durs[r][2].push_back(static_cast<int64_t>(rng() % 5000));
    std::shuffle(durs[r][4].begin(), durs[r][4].end(), rng);
  }
  Write(path, 2, [&](Trace& t) {
    uint32_t ids[5];
    for (size_t n = 0; n < 5; ++n) ids[n] = t.tw->Intern(names[n]);
    // Interleaved by name, so that the blocks hold every group; one after the other in time.
    for (size_t r = 0; r < 2; ++r) {
      int64_t ts = 1000;
      for (size_t i = 0; i < 30000; ++i) {
        for (size_t n = 0; n < 5; ++n) {
          if (i >= durs[r][n].size()) continue;
          const int64_t d = durs[r][n][i];
          ASSERT_TRUE(t.b->Complete(t.track[r], ts, d, ids[n], 0, nullptr).ok());
          ts += d + 1;
        }
      }
    }
  });
  auto db = query::OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  engine::Db* q = db->get();
  std::vector<std::string> want, want_all;
  for (size_t r = 0; r < 2; ++r)
    for (size_t n = 0; n < 5; ++n)
      want.push_back(ExpectedRow(std::to_string(r) + "|t" + names[n], durs[r][n]));
  EXPECT_EQ(Rows(q, "SELECT * FROM span_stats"), want);
  EXPECT_EQ(Rows(q, "SELECT * FROM span_stats WHERE rank = 1"),
            std::vector<std::string>(want.begin() + 5, want.end()));
  // name_stats_all: both ranks' durations together (and the column `ranks`, 2).
  for (size_t n = 0; n < 5; ++n) {
    std::vector<int64_t> all = durs[0][n];
    all.insert(all.end(), durs[1][n].begin(), durs[1][n].end());
    std::string row = ExpectedRow("t" + names[n], all);
    const size_t bar = row.find('|', row.find('|') + 1);  // after name|count
    row.insert(bar, "|2");
    want_all.push_back(row);
  }
  EXPECT_EQ(Rows(q, "SELECT * FROM name_stats_all"), want_all);
}

// The selection alone on values the database cannot hold as durations (negative, both ends of
// int64) and on adversarial shapes, against a full sort, for every percentile rank of a few.
TEST(SpanViews, ExactSelectAgainstSort) {
  std::mt19937_64 rng(7);
  std::vector<std::vector<int64_t>> cases;
  cases.push_back({INT64_MIN, INT64_MAX, -1, 0, 1, INT64_MIN + 1, INT64_MAX - 1});
  std::vector<int64_t> v;
  for (int i = 0; i < 20000; ++i) v.push_back(i % 3 == 0 ? INT64_MIN : i % 3 == 1 ? -5 : INT64_MAX);
  cases.push_back(v);
  v.clear();
  // Two adjacent values, each tied 10,000 times: a sub-range of width 2 until the last pass.
  for (int i = 0; i < 20000; ++i) v.push_back(int64_t{1} << 40 | (i & 1));
  cases.push_back(v);
  v.clear();
  for (int i = 0; i < 50000; ++i)
    v.push_back(static_cast<int64_t>(rng()));  // every power of two, both signs
  cases.push_back(v);
  v.clear();
  // Negative, nearly all in one bucket.
  for (int i = 0; i < 50000; ++i)
    v.push_back(-(int64_t{1} << 50) - static_cast<int64_t>(rng() % 100000));
  cases.push_back(v);
  for (const std::vector<int64_t>& c : cases) {
    std::vector<int64_t> sorted = c;
    std::sort(sorted.begin(), sorted.end());
    const uint64_t n = c.size();
    for (uint64_t k0 = 0; k0 < n; k0 += std::max<uint64_t>(1, n / 7)) {
      const uint64_t ks[3] = {k0, (k0 + n) / 2, n - 1};
      query::ExactSelect sel;
      for (int64_t x : c) sel.Add(x);
      bool more = sel.Want(ks, 3);
      int passes = 1;
      while (more) {
        // Odd k0 keep every range whole when the budget allows; even ones refine past 2048.
        std::vector<uint64_t> sizes;
        sel.AddRangeSizes(&sizes);
        sel.Plan(k0 % 2 ? query::ExactSelect::CollectLimit(sizes, 100000) : 0);
        for (size_t i = c.size(); i-- > 0;) sel.Feed(c[i]);  // any order
        auto r = sel.EndPass();
        ASSERT_TRUE(r.ok()) << r.status().message();
        more = *r;
        ++passes;
      }
      EXPECT_LE(passes, 7);
      for (size_t i = 0; i < 3; ++i) EXPECT_EQ(sel.result(i), sorted[ks[i]]) << "rank " << ks[i];
    }
  }
  // A pass that does not see what the first saw is an error, not an answer.
  query::ExactSelect sel;
  for (int i = 0; i < 5000; ++i) sel.Add(i);
  const uint64_t k[1] = {2500};
  ASSERT_TRUE(sel.Want(k, 1));
  sel.Plan(0);
  for (int i = 0; i < 4999; ++i) sel.Feed(i);
  EXPECT_FALSE(sel.EndPass().ok());
}

}  // namespace
}  // namespace tracedb::testing
