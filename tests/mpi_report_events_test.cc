// `tracedb report mpi` from recorded MPI events (query/report/mpi_report.cc FromEvents, one pass
// over the decoded MPI blocks) on a hand-built trace: per rank and routine the calls, bytes and
// time, the message-size bins and the elapsed time, against values worked out by hand below and
// against the SQL aggregates over `events` the report used to run (the reference).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/db/trace_builder.h"
#include "engine/db/trace_writer.h"
#include "query/open/query_db.h"
#include "query/report/mpi_report.h"
#include "tests/hand_trace.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

using engine::EventArgs;

EventArgs Bytes(uint64_t n) {
  EventArgs a;
  a.mask = EventArgs::kBytes;
  a.bytes = n;
  return a;
}

// The report's per-routine rows as "rank|routine|calls|bytes|time", in report order.
std::vector<std::string> Routines(const query::MpiReport& r) {
  std::vector<std::string> out;
  for (const auto& rank : r.ranks) {
    for (const auto& s : rank.routines) {
      out.push_back(std::to_string(rank.rank) + "|" + s.routine + "|" + std::to_string(s.calls) +
                    "|" + std::to_string(static_cast<int64_t>(s.bytes)) + "|" +
                    std::to_string(s.time_ns));
    }
  }
  return out;
}

// The bins as "rank|routine|min|max|calls|bytes|time", in report order.
std::vector<std::string> Bins(const query::MpiReport& r) {
  std::vector<std::string> out;
  for (const auto& rank : r.ranks) {
    for (const auto& b : rank.bins) {
      out.push_back(std::to_string(rank.rank) + "|" + b.routine + "|" +
                    std::to_string(b.min_bytes) + "|" + std::to_string(b.max_bytes) + "|" +
                    std::to_string(b.calls) + "|" + std::to_string(static_cast<int64_t>(b.bytes)) +
                    "|" + std::to_string(b.time_ns));
    }
  }
  return out;
}

// The same from SQL over `events`: the queries FromEvents ran before it decoded blocks itself.
std::vector<std::string> SqlRows(engine::Db* db, const std::string& sql) {
  std::vector<std::string> out;
  auto st = db->Prepare(sql);
  EXPECT_TRUE(st.ok()) << st.status().message();
  if (!st.ok()) return out;
  for (;;) {
    auto row = st->Step();
    EXPECT_TRUE(row.ok()) << row.status().message();
    if (!row.ok() || !*row) break;
    std::string r;
    for (int i = 0; i < st->ColumnCount(); ++i) r += (i ? "|" : "") + std::string(st->Text(i));
    out.push_back(r);
  }
  return out;
}

constexpr const char* kExcluded =
    "('MPI_Init', 'MPI_Init_thread', 'MPI_Finalize', 'mpi_request_start', "
    "'mpi_request_complete')";

TEST(MpiReportEvents, HandBuiltTraceGivesHandDerivedAndSqlValues) {
  TempDir tmp;
  const std::string path = tmp.Sub("mpi.tdb");
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().message();
    engine::TraceWriter* tw = w->get();
    engine::TraceBuilder b(tw);
    ASSERT_TRUE(tw->BeginBatch().ok());
    std::vector<uint32_t> track(2);
    for (int r = 0; r < 2; ++r) {
      track[r] = AddRankTrack(tw, r, 2, "mpi-report-test", "node" + std::to_string(r));
    }
    const uint32_t mpi = tw->Intern("mpi"), compute = tw->Intern("compute");
    const uint32_t init = tw->Intern("MPI_Init"), fin = tw->Intern("MPI_Finalize");
    const uint32_t send = tw->Intern("MPI_Send"), allreduce = tw->Intern("MPI_Allreduce");
    const uint32_t barrier = tw->Intern("MPI_Barrier");
    // Rank 0: MPI_Init [0, 10), sends of 0, 3, 4, 5, 8, 9 and 1 MiB + 1 bytes, an allreduce of
    // 8 bytes, a barrier (no bytes), a compute span named MPI_Send (not MPI), MPI_Finalize
    // [900, 950): elapsed 950.
    ASSERT_TRUE(b.Complete(track[0], 0, 10, init, mpi, nullptr).ok());
    int64_t ts = 100;
    for (uint64_t n : {0ull, 3ull, 4ull, 5ull, 8ull, 9ull, (1ull << 20) + 1}) {
      EventArgs a = Bytes(n);
      ASSERT_TRUE(b.Complete(track[0], ts, 10 + static_cast<int64_t>(n % 7), send, mpi, &a).ok());
      ts += 50;
    }
    EventArgs eight = Bytes(8);
    ASSERT_TRUE(b.Complete(track[0], 600, 30, allreduce, mpi, &eight).ok());
    ASSERT_TRUE(b.Complete(track[0], 700, 40, barrier, mpi, nullptr).ok());
    ASSERT_TRUE(b.Complete(track[0], 750, 1000, send, compute, &eight).ok());
    ASSERT_TRUE(b.Complete(track[0], 900, 50, fin, mpi, nullptr).ok());
    // Rank 1: no MPI_Init: elapsed is its time span (blocks), 20..130. Two allreduces of 16.
    EventArgs sixteen = Bytes(16);
    ASSERT_TRUE(b.Complete(track[1], 20, 5, allreduce, mpi, &sixteen).ok());
    ASSERT_TRUE(b.Complete(track[1], 100, 30, allreduce, mpi, &sixteen).ok());
    ASSERT_TRUE(tw->CommitBatch().ok());
  }
  auto db = query::OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  engine::Db* q = db->get();
  auto report = query::BuildMpiReport(q);
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_EQ(report->ranks.size(), 2u);
  EXPECT_EQ(report->source, "recorded");
  // Sends: durations 10 + n % 7 = 10, 13, 14, 15, 11, 12, 15 (2^20 = 4 mod 7): 90 ns,
  // 1,048,606 bytes. By time descending, then name.
  EXPECT_EQ(Routines(*report),
            (std::vector<std::string>{"0|MPI_Send|7|1048606|90", "0|MPI_Barrier|1|0|40",
                                      "0|MPI_Allreduce|1|8|30", "1|MPI_Allreduce|2|32|35"}));
  // Bins: 0 | 1-4 (3, 4) | 5-8 (5, 8) | 9-16 (9) | 1 MiB + 1 .. 2 MiB; by routine, then size.
  EXPECT_EQ(Bins(*report), (std::vector<std::string>{
                               "0|MPI_Allreduce|5|8|1|8|30",
                               "0|MPI_Send|0|0|1|0|10",
                               "0|MPI_Send|1|4|2|7|27",
                               "0|MPI_Send|5|8|2|13|26",
                               "0|MPI_Send|9|16|1|9|12",
                               "0|MPI_Send|1048577|2097152|1|1048577|15",
                               "1|MPI_Allreduce|9|16|2|32|35",
                           }));
  EXPECT_EQ(report->ranks[0].comm_ns, 90 + 40 + 30);
  EXPECT_EQ(report->ranks[0].elapsed_ns, 950);
  EXPECT_EQ(report->ranks[1].elapsed_ns, 110);
  EXPECT_EQ(report->ranks[0].host, "node0");

  // The reference: the SQL aggregates over events, row for row.
  std::vector<std::string> want = SqlRows(
      q, std::string("SELECT rank, name, count(*), CAST(total(bytes) AS INTEGER), sum(dur) FROM "
                     "events WHERE cat = 'mpi' AND name NOT IN ") +
             kExcluded + " GROUP BY rank, name ORDER BY rank, sum(dur) DESC, name");
  EXPECT_EQ(Routines(*report), want);
  want = SqlRows(q, std::string("SELECT rank, name, CASE WHEN bytes = 0 THEN 0 WHEN bytes <= 4 "
                                "THEN 4 ELSE 1 << (log2_bucket(bytes - 1) + 1) END AS hi, "
                                "count(*), CAST(total(bytes) AS INTEGER), sum(dur) FROM events "
                                "WHERE cat = 'mpi' AND bytes IS NOT NULL AND name NOT IN ") +
                        kExcluded + " GROUP BY rank, name, hi ORDER BY rank, name, hi");
  std::vector<std::string> got;
  for (const auto& rank : report->ranks) {
    for (const auto& b : rank.bins) {
      got.push_back(std::to_string(rank.rank) + "|" + b.routine + "|" +
                    std::to_string(b.max_bytes) + "|" + std::to_string(b.calls) + "|" +
                    std::to_string(static_cast<int64_t>(b.bytes)) + "|" +
                    std::to_string(b.time_ns));
    }
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(SqlRows(q,
                    "SELECT max(end_ts) FILTER (WHERE name = 'MPI_Finalize') - min(ts) FILTER "
                    "(WHERE name = 'MPI_Init') FROM events WHERE cat = 'mpi' AND rank = 0"),
            (std::vector<std::string>{"950"}));
}

TEST(MpiReportEvents, NoMpiEventsIsNotFound) {
  TempDir tmp;
  const std::string path = tmp.Sub("none.tdb");
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().message();
    ASSERT_TRUE(w->get()->BeginBatch().ok());
    ASSERT_TRUE(w->get()->CommitBatch().ok());
  }
  auto db = query::OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  EXPECT_FALSE(query::BuildMpiReport(db->get()).ok());
}

}  // namespace
}  // namespace tracedb::testing
