// Span statistics and collective matching in bounded memory (issue 24: a billion events on one
// machine): `SELECT * FROM span_stats` and `tracedb report stragglers` over a job 8x larger must
// not take ~8x the memory. Each case writes a job of N and of 8N events (8 ranks; per step and
// rank three spans of random duration and one MPI allreduce on one communicator, seq = the
// step), runs the query in a child process on each, reads the child's peak RSS (wait4's rusage)
// and checks that the larger run grew by less than a quarter (a half for span_stats) of what
// holding the larger job's extra durations (8 bytes a span) or its extra collective arrivals (the
// 104-byte rows the whole-table matcher keeps) would cost. The output of each child is checked too:
// span_stats against the same statistics in plain SQL over `events`, the stragglers' rows against
// plain SQL over the arrivals. No absolute time or memory bounds.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "engine/db/db_schema.h"
#include "engine/db/sqlite.h"
#include "engine/db/trace_builder.h"
#include "engine/db/trace_writer.h"
#include "query/open/query_db.h"
#include "tests/hand_trace.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

using engine::EventArgs;

constexpr int kRanks = 8;

// A job of `steps` steps on kRanks ranks: per step and rank three spans ("fwd", "bwd", "opt")
// and an MPI_Allreduce (cat mpi, comm 1, seq = step) whose arrival is random. 4 events a step
// and rank.
void WriteJob(const std::string& path, int steps) {
  auto w = engine::TraceWriter::Open(path);
  ASSERT_TRUE(w.ok()) << w.status().message();
  engine::TraceWriter* tw = w->get();
  engine::TraceBuilder b(tw);
  ASSERT_TRUE(tw->BeginBatch().ok());
  std::vector<uint32_t> track;
  for (int r = 0; r < kRanks; ++r) track.push_back(AddRankTrack(tw, r, kRanks, "memory-test"));
  const uint32_t names[3] = {tw->Intern("fwd"), tw->Intern("bwd"), tw->Intern("opt")};
  const uint32_t allreduce = tw->Intern("MPI_Allreduce"), mpi = tw->Intern("mpi");
  std::mt19937_64 rng(static_cast<uint64_t>(steps));
  std::vector<int64_t> t(kRanks, 0);
  for (int s = 0; s < steps; ++s) {
    const int64_t step_end = 1000000 * static_cast<int64_t>(s + 1);
    for (int r = 0; r < kRanks; ++r) {
      int64_t ts = 1000000 * static_cast<int64_t>(s);
      for (uint32_t n : names) {
        const int64_t d = 1000 + static_cast<int64_t>(rng() % (50000 << (rng() % 4)));
        ASSERT_TRUE(b.Complete(track[static_cast<size_t>(r)], ts, d, n, 0, nullptr).ok());
        ts += d + 10;
      }
      EventArgs a;
      a.mask = EventArgs::kSeq | EventArgs::kComm;
      a.comm = 1;
      a.seq = static_cast<uint64_t>(s);
      ts += static_cast<int64_t>(rng() % 200000);
      ASSERT_TRUE(
          b.Complete(track[static_cast<size_t>(r)], ts, step_end - 1 - ts, allreduce, mpi, &a)
              .ok());
    }
  }
  ASSERT_TRUE(tw->CommitBatch().ok());
}

struct Jobs {
  TempDir dir;
  std::string small, big;
  int small_steps = 10000, big_steps = 80000;  // 320K and 2.56M events
};

const Jobs& TheJobs() {
  static Jobs* jobs = [] {
    auto* j = new Jobs;
    j->small = j->dir.Sub("small.tdb");
    j->big = j->dir.Sub("big.tdb");
    // Written by a forked child, so that this process stays small: a spawned child's ru_maxrss
    // counts its parent's resident memory from before exec.
    const pid_t pid = fork();
    if (pid == 0) {
      WriteJob(j->small, j->small_steps);
      WriteJob(j->big, j->big_steps);
      _exit(::testing::Test::HasFailure() ? 1 : 0);
    }
    int status = -1;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writing the jobs failed";
    return j;
  }();
  return *jobs;
}

// Runs `tracedb ARGS...` on both jobs and checks the growth against `extra_kb`, what holding the
// larger job's extra items would cost.
void ExpectBounded(const std::vector<std::string>& args, double extra_kb, double fraction,
                   std::string* small_out, std::string* big_out) {
  const Jobs& j = TheJobs();
  long peak[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> argv = {TracedbBin()};
    argv.insert(argv.end(), args.begin(), args.end());
    for (std::string& a : argv)
      if (a == "DB") a = i ? j.big : j.small;
    const std::string log = j.dir.Sub(i ? "big.log" : "small.log");
    const MeasuredRun r = RunMeasured(argv, {}, log);
    EXPECT_EQ(r.exit_code, 0) << ReadFile(log);
    ASSERT_GT(r.peak_kb, 0);
    peak[i] = r.peak_kb;
    *(i ? big_out : small_out) = ReadFile(log);
  }
  const double grew_kb = static_cast<double>(peak[1] - peak[0]);
  std::printf("peak RSS %ld KB (N), %ld KB (8N); holding the extra items: %.0f KB\n", peak[0],
              peak[1], extra_kb);
  EXPECT_LT(grew_kb, extra_kb * fraction)
      << "peak " << peak[0] << " KB on the small job, " << peak[1]
      << " KB on the 8x job; holding the extra items: " << extra_kb << " KB";
}

// The output of `tracedb query -f csv DB SQL` in a child, for the reference.
std::string Csv(const std::string& db, const std::string& sql) {
  const Jobs& j = TheJobs();
  const std::string log = j.dir.Sub("ref.log");
  const MeasuredRun r = RunMeasured({TracedbBin(), "query", "-f", "csv", db, sql}, {}, log);
  EXPECT_EQ(r.exit_code, 0) << ReadFile(log);
  return ReadFile(log);
}

TEST(ViewsMemory, SpanStatsPercentilesInBoundedMemory) {
  const Jobs& j = TheJobs();
  const double extra_spans = 3.0 * kRanks * (j.big_steps - j.small_steps);
  std::string small, big;
  // Half, not a quarter: SQLite's page cache (2 MB) fills on the larger job only, and the
  // second pass keeps the values of each percentile's bucket (a few % of the spans here; at
  // most 32 MiB in all, whatever the job). Holding every duration grows by more than the whole.
  ExpectBounded({"query", "-f", "csv", "DB", "SELECT * FROM span_stats"}, extra_spans * 8 / 1024,
                0.5, &small, &big);
  // The same rows as the plain SQL (the percentile() aggregate over every row).
  const std::string plain =
      "SELECT rank, name, count(*) AS count, sum(dur) AS total_ns, CAST(avg(dur) AS INTEGER) AS "
      "mean_ns, percentile(dur, 50) AS p50_ns, percentile(dur, 95) AS p95_ns, percentile(dur, 99) "
      "AS p99_ns, max(dur) AS max_ns FROM events WHERE kind = 'span' GROUP BY rank, name";
  EXPECT_EQ(small, Csv(j.small, plain));
  EXPECT_EQ(big, Csv(j.big, plain));
}

TEST(ViewsMemory, StragglersInBoundedMemory) {
  const Jobs& j = TheJobs();
  const double extra_arrivals = 1.0 * kRanks * (j.big_steps - j.small_steps);
  std::string small, big;
  ExpectBounded({"report", "stragglers", "-f", "csv", "DB"}, extra_arrivals * 104 / 1024, 0.25,
                &small, &big);
  // The stragglers' rows from plain SQL: per collective its last rank (latest ts, then the
  // lowest rank) and skew (max ts - min ts), per last rank the count, sum and max.
  const std::string plain =
      "WITH c AS MATERIALIZED (SELECT rank, seq, ts FROM events WHERE cat = 'mpi' AND seq IS NOT "
      "NULL), k AS (SELECT seq, max(ts) - min(ts) AS skew, count(*) AS n FROM c GROUP BY seq), "
      "l AS (SELECT seq, rank AS last FROM (SELECT seq, rank, row_number() OVER (PARTITION BY "
      "seq ORDER BY ts DESC, rank) AS rn FROM c) WHERE rn = 1) "
      "SELECT last AS rank, count(*) AS times_last, human_duration(sum(skew)) AS others_waited, "
      "human_duration(max(skew)) AS worst_skew FROM k JOIN l USING (seq) WHERE n > 1 "
      "GROUP BY last ORDER BY sum(skew) DESC, last";
  EXPECT_EQ(small, Csv(j.small, plain));
  EXPECT_EQ(big, Csv(j.big, plain));
}

// The events table reads a job's steps (millions of rows in a long job: every rank's every step)
// only for a query that uses the step column. The small job copied, 2M steps added to the copy
// (250,000 a rank, one every 500 ns from 0): a top-3 by duration must not grow by what holding
// them costs (16 bytes each at least), and gives the same rows; a query by step on the copy
// counts what plain SQL over ts counts.
TEST(ViewsMemory, EventsQueriesWithoutStepsDoNotReadThem) {
  const Jobs& j = TheJobs();
  const std::string with_steps = j.dir.Sub("steps.tdb");
  {
    std::ifstream in(j.small, std::ios::binary);
    std::ofstream out(with_steps, std::ios::binary);
    out << in.rdbuf();
  }
  {
    auto db = engine::Db::Open(with_steps, engine::Db::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status().message();
    ASSERT_TRUE(engine::EnsureTable(db->get(), "steps").ok());
    ASSERT_TRUE((*db)
                    ->Exec("DELETE FROM steps; WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT "
                           "i + 1 FROM c WHERE i < 1999999) INSERT INTO steps(rank, ts, step) "
                           "SELECT i % 8, (i / 8) * 500, i / 8 FROM c")
                    .ok());
  }
  const std::string top = "SELECT rank, name, dur FROM events ORDER BY dur DESC LIMIT 3";
  long peak[2] = {0, 0};
  std::string out[2];
  for (int i = 0; i < 2; ++i) {
    const std::string log = j.dir.Sub(i ? "steps-big.log" : "steps-small.log");
    const MeasuredRun r =
        RunMeasured({TracedbBin(), "query", "-f", "csv", i ? with_steps : j.small, top}, {}, log);
    EXPECT_EQ(r.exit_code, 0) << ReadFile(log);
    peak[i] = r.peak_kb;
    out[i] = ReadFile(log);
  }
  EXPECT_EQ(out[1], out[0]);
  const double steps_kb = 2000000.0 * 16 / 1024;
  EXPECT_LT(static_cast<double>(peak[1] - peak[0]), steps_kb / 4)
      << "peak " << peak[0] << " KB without the steps, " << peak[1] << " KB with them";
  // A query by step still reads them: step 249999 of rank 0 runs from ts 124,999,500 on.
  EXPECT_EQ(Csv(with_steps, "SELECT count(*) FROM events WHERE rank = 0 AND step = 249999"),
            Csv(with_steps, "SELECT count(*) FROM events WHERE rank = 0 AND ts >= 124999500"));
  EXPECT_EQ(Csv(with_steps, "SELECT count(*) FROM events WHERE rank = 0 AND step = 249999"),
            Csv(j.small, "SELECT count(*) FROM events WHERE rank = 0 AND ts >= 124999500"));
}

}  // namespace
}  // namespace tracedb::testing
