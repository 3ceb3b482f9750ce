// The Horovod negotiation views (negotiation_ticks, negotiations; computed by the table-valued
// functions of query/views/views_negotiation.h) on a small hand-built trace whose every expected
// row is worked out by hand below: negotiations on three ranks, on lanes (tensor) and on a thread
// track (tensor NULL), a negotiation on a rank without ticks, ties in ts (broken by peer, NULL
// first), a NULL peer, a repeated tick, a tick that is itself a span, ticks whose parent is not a
// negotiation (a plain span, a name without the underscore of NEGOTIATE_), a tick without a
// parent, a negotiation without ticks and a lower-case negotiate_ name (LIKE ignores ASCII case).
// tests/events_differential_test.cc compares the same views with their plain SQL on random
// traces.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/db/trace_builder.h"
#include "engine/db/trace_writer.h"
#include "query/open/query_db.h"
#include "tests/hand_trace.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

using engine::EventArgs;

// Rows of `sql` as text, one string per row ("NULL" for NULL), fields joined by '|'.
EventArgs Peer(int32_t peer) {
  EventArgs a;
  a.mask = EventArgs::kPeer;
  a.peer = peer;
  return a;
}

// The id of the one event named `name` at `ts`, read from `events` (not from the views).
std::string IdOf(engine::Db* db, const std::string& name, int64_t ts) {
  auto id = db->QueryInt(
      "SELECT id FROM events WHERE name = '" + name + "' AND ts = " + std::to_string(ts), -1);
  EXPECT_TRUE(id.ok());
  EXPECT_GE(id.ok() ? *id : -1, 0) << name << " at " << ts;
  return id.ok() ? std::to_string(*id) : "?";
}

TEST(NegotiationViews, HandBuiltTraceGivesHandDerivedRows) {
  TempDir tmp;
  const std::string path = tmp.Sub("neg.tdb");
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().message();
    engine::TraceWriter* tw = w->get();
    engine::TraceBuilder b(tw);
    ASSERT_TRUE(tw->BeginBatch().ok());
    for (int r = 0; r < 4; ++r) {
      engine::RankRecord rec;
      rec.rank = r;
      rec.world_size = 4;
      rec.source = "horovod";
      ASSERT_TRUE(tw->SetRank(rec).ok());
    }
    auto track = [&](int32_t rank, const char* kind, const char* name) {
      engine::TrackSpec s;
      s.rank = rank;
      s.kind = kind;
      s.name = name;
      return tw->Track(s);
    };
    const uint32_t lane0 = track(0, "lane", "grad.w1"), main0 = track(0, "thread", "main0");
    const uint32_t lane1 = track(1, "lane", "grad.w2"), main2 = track(2, "thread", "main2");
    const uint32_t lane3 = track(3, "lane", "grad.w1");
    const uint32_t allreduce = tw->Intern("NEGOTIATE_ALLREDUCE");
    const uint32_t broadcast = tw->Intern("negotiate_broadcast");
    const uint32_t allgather = tw->Intern("NEGOTIATE_ALLGATHER");
    const uint32_t no_underscore = tw->Intern("NEGOTIATEXALLREDUCE");
    const uint32_t queue = tw->Intern("QUEUE"), ready = tw->Intern("RANK_READY");
    const uint32_t cat = tw->Intern("comm");
    EventArgs a;
    // A: rank 0, lane grad.w1, 100..200. Ticks: NULL peer at 120, 2 at 150, 1 and 0 at 170.
    // from_last (ts DESC, peer): 0@170 1, 1@170 2, 2@150 3, NULL@120 4. Last: rank 0, +70.
    ASSERT_TRUE(b.Begin(lane0, 100, allreduce, cat, nullptr).ok());
    ASSERT_TRUE(b.Instant(lane0, 120, ready, cat, nullptr).ok());
    for (auto [peer, ts] : std::vector<std::pair<int32_t, int64_t>>{{2, 150}, {1, 170}, {0, 170}}) {
      a = Peer(peer);
      ASSERT_TRUE(b.Instant(lane0, ts, ready, cat, &a).ok());
    }
    ASSERT_TRUE(b.End(lane0, 200).ok());
    // D: rank 0, lane grad.w1, 700..800, no tick: no negotiations row.
    ASSERT_TRUE(b.Begin(lane0, 700, allreduce, cat, nullptr).ok());
    ASSERT_TRUE(b.End(lane0, 800).ok());
    // B: rank 1, lane grad.w2, negotiate_broadcast 300..400. Ticks: 1 at 310, then 2 and NULL
    // at 390. from_last: NULL@390 1, 2@390 2, 1@310 3. Last: NULL, +90.
    ASSERT_TRUE(b.Begin(lane1, 300, broadcast, cat, nullptr).ok());
    a = Peer(1);
    ASSERT_TRUE(b.Instant(lane1, 310, ready, cat, &a).ok());
    a = Peer(2);
    ASSERT_TRUE(b.Instant(lane1, 390, ready, cat, &a).ok());
    ASSERT_TRUE(b.Instant(lane1, 390, ready, cat, nullptr).ok());
    ASSERT_TRUE(b.End(lane1, 400).ok());
    // C: rank 2, thread track (tensor NULL), 500..600. Ticks: 0 at 550 twice, and a RANK_READY
    // span of rank 1 at 560. from_last: 1@560 1, 0@550 2, 0@550 3. Last: rank 1, +60.
    ASSERT_TRUE(b.Begin(main2, 500, allgather, cat, nullptr).ok());
    a = Peer(0);
    ASSERT_TRUE(b.Instant(main2, 550, ready, cat, &a).ok());
    ASSERT_TRUE(b.Instant(main2, 550, ready, cat, &a).ok());
    a = Peer(1);
    ASSERT_TRUE(b.Complete(main2, 560, 10, ready, cat, &a).ok());
    ASSERT_TRUE(b.End(main2, 600).ok());
    // Rank 3: a negotiation on a rank that has no tick at all: no negotiations row.
    ASSERT_TRUE(b.Begin(lane3, 100, allreduce, cat, nullptr).ok());
    ASSERT_TRUE(b.End(lane3, 200).ok());
    // Rank 0's thread: a tick under QUEUE (a tick, no negotiation), a tick without a parent (no
    // tick at all), and a tick under NEGOTIATEXALLREDUCE (no underscore: no negotiation).
    ASSERT_TRUE(b.Begin(main0, 900, queue, cat, nullptr).ok());
    a = Peer(1);
    ASSERT_TRUE(b.Instant(main0, 950, ready, cat, &a).ok());
    ASSERT_TRUE(b.End(main0, 1000).ok());
    a = Peer(2);
    ASSERT_TRUE(b.Instant(main0, 1100, ready, cat, &a).ok());
    ASSERT_TRUE(b.Begin(main0, 1200, no_underscore, cat, nullptr).ok());
    a = Peer(1);
    ASSERT_TRUE(b.Instant(main0, 1250, ready, cat, &a).ok());
    ASSERT_TRUE(b.End(main0, 1300).ok());
    ASSERT_TRUE(tw->CommitBatch().ok());
  }
  auto db = query::OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  engine::Db* q = db->get();
  auto na_id = q->QueryInt(
      "SELECT id FROM events WHERE name = 'NEGOTIATE_ALLREDUCE' AND ts = 100 "
      "AND rank = 0",
      -1);
  ASSERT_TRUE(na_id.ok());
  const std::string na = std::to_string(*na_id);
  const std::string nb = IdOf(q, "negotiate_broadcast", 300);
  const std::string nc = IdOf(q, "NEGOTIATE_ALLGATHER", 500);
  const std::string nq = IdOf(q, "QUEUE", 900);
  const std::string nx = IdOf(q, "NEGOTIATEXALLREDUCE", 1200);

  // negotiation, ready_rank, ts, from_last; sorted here by negotiation id (ids grow with the
  // track, then the order of the rows on it: lane0, main0, lane1, main2).
  std::vector<std::string> ticks = {
      na + "|0|170|1", na + "|1|170|2",  na + "|2|150|3",    na + "|NULL|120|4",
      nq + "|1|950|1", nx + "|1|1250|1", nb + "|NULL|390|1", nb + "|2|390|2",
      nb + "|1|310|3", nc + "|1|560|1",  nc + "|0|550|2",    nc + "|0|550|3",
  };
  EXPECT_EQ(SqlRows(q, "SELECT * FROM negotiation_ticks ORDER BY negotiation, from_last"), ticks);
  // The same rows in the table's own order (no ORDER BY: xBestIndex's promise is not used).
  std::vector<std::string> got = SqlRows(q, "SELECT * FROM negotiation_ticks");
  std::sort(got.begin(), got.end());
  std::vector<std::string> want = ticks;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  // A descending order is SQLite's to sort.
  EXPECT_EQ(SqlRows(q,
                    "SELECT negotiation, from_last FROM negotiation_ticks "
                    "ORDER BY negotiation DESC, from_last DESC LIMIT 2"),
            (std::vector<std::string>{nc + "|3", nc + "|2"}));
  // id, rank, name, tensor, ts, dur, last_rank, last_ready_after_ns
  EXPECT_EQ(SqlRows(q, "SELECT * FROM negotiations ORDER BY id"),
            (std::vector<std::string>{
                na + "|0|NEGOTIATE_ALLREDUCE|grad.w1|100|100|0|70",
                nb + "|1|negotiate_broadcast|grad.w2|300|100|NULL|90",
                nc + "|2|NEGOTIATE_ALLGATHER|NULL|500|100|1|60",
            }));
  // Column types as the SQL gives them: integers, not reals or text.
  EXPECT_EQ(SqlRows(q,
                    "SELECT DISTINCT typeof(negotiation), typeof(ts), typeof(from_last) "
                    "FROM negotiation_ticks"),
            (std::vector<std::string>{"integer|integer|integer"}));
  EXPECT_EQ(SqlRows(q,
                    "SELECT DISTINCT typeof(id), typeof(rank), typeof(name), typeof(ts), "
                    "typeof(dur), typeof(last_ready_after_ns) FROM negotiations"),
            (std::vector<std::string>{"integer|integer|text|integer|integer|integer"}));
  // The collective arrivals read the same ticks (query/views/negotiation_rows.h): those of the
  // three negotiations with a peer, 3 + 2 + 3.
  EXPECT_EQ(SqlRows(q,
                    "SELECT seq, count(*) FROM collective_calls WHERE dur IS NULL GROUP BY seq "
                    "ORDER BY seq"),
            (std::vector<std::string>{na + "|3", nb + "|2", nc + "|3"}));
}

TEST(NegotiationViews, NoTicksNoRows) {
  TempDir tmp;
  const std::string path = tmp.Sub("plain.tdb");
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().message();
    engine::TraceWriter* tw = w->get();
    engine::TraceBuilder b(tw);
    ASSERT_TRUE(tw->BeginBatch().ok());
    engine::RankRecord rec;
    rec.rank = 0;
    rec.world_size = 1;
    ASSERT_TRUE(tw->SetRank(rec).ok());
    engine::TrackSpec s;
    s.name = "main";
    const uint32_t t = tw->Track(s);
    // A negotiation without ticks, and a RANK_READY name no event uses.
    ASSERT_TRUE(b.Complete(t, 10, 5, tw->Intern("NEGOTIATE_ALLREDUCE"), 0, nullptr).ok());
    tw->Intern("RANK_READY");
    ASSERT_TRUE(tw->CommitBatch().ok());
  }
  auto db = query::OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  EXPECT_EQ(SqlRows(db->get(), "SELECT count(*) FROM negotiation_ticks"),
            (std::vector<std::string>{"0"}));
  EXPECT_EQ(SqlRows(db->get(), "SELECT count(*) FROM negotiations"),
            (std::vector<std::string>{"0"}));
}

}  // namespace
}  // namespace tracedb::testing
