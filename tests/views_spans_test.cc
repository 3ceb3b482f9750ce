// The span statistics views (span_stats, name_stats_all; computed by the table-valued
// functions of query/views/views_spans.h) and the `kind` filter of `events` (settled per block from
// block_names and name_stats, checked exactly in the scan) on small hand-built traces whose
// every expected value is worked out by hand below: a name on two ranks, instants and counters
// under a span's name (not spans), one name under two categories, a single-span group, and a
// trace without spans. tests/events_differential_test.cc compares the same views with their
// plain SQL on random traces.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/db/trace_builder.h"
#include "engine/db/trace_writer.h"
#include "query/open/query_db.h"
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

}  // namespace
}  // namespace tracedb::testing
