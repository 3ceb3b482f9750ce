// `tracedb archive` (engine/compact/archive.h) on a database built with known content: 2 ranks, 60
// steps of 1 s, each step 40 "compute" spans (10 ms, every 20 ms) and one "allreduce" (5 ms at
// +800 ms, bytes = step), one batch (so one block) per rank and step. The expected numbers below
// are counted from that description, not from the archive code: which events a policy keeps,
// what the summaries must still say for the whole job, and that recompression changes no event.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include "engine/db/trace_writer.h"
#include "query/open/query_db.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

constexpr int kRanks = 2;
constexpr int kSteps = 60;
constexpr int kCompute = 40;
constexpr int64_t kSecond = 1000000000;
constexpr int64_t kT0 = 1700000000 * kSecond;
constexpr int64_t kEventsPerRankStep = kCompute + 1;
constexpr int64_t kAllEvents = kRanks * kSteps * kEventsPerRankStep;

int64_t StepStart(int rank, int step) { return kT0 + step * kSecond + rank * 1000; }

void BuildDb(const std::string& path, bool with_steps = true) {
  auto w = engine::TraceWriter::Open(path);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  engine::TraceWriter& tw = **w;
  ASSERT_TRUE(tw.BeginBatch().ok());
  const uint32_t compute = tw.Intern("compute"), allreduce = tw.Intern("allreduce");
  const uint32_t cat = tw.Intern("compute");
  uint32_t tracks[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    engine::TrackSpec spec;
    spec.rank = r;
    spec.name = "main";
    spec.local_id = 0;
    tracks[r] = tw.Track(spec);
  }
  ASSERT_TRUE(tw.CommitBatch().ok());
  for (int s = 0; s < kSteps; ++s) {
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(tw.BeginBatch().ok());
      if (with_steps) tw.AddStep(r, StepStart(r, s), s);
      for (int i = 0; i <= kCompute; ++i) {
        engine::Row row;
        row.track = tracks[r];
        row.k = tw.TakeK(tracks[r]);
        row.cat = cat;
        if (i < kCompute) {
          row.name = compute;
          row.ts = StepStart(r, s) + i * 20000000;
          row.dur = 10000000;
        } else {
          row.name = allreduce;
          row.ts = StepStart(r, s) + 800000000;
          row.dur = 5000000;
          row.args.mask = engine::EventArgs::kBytes;
          row.args.bytes = s;
        }
        ASSERT_TRUE(tw.AddRow(r, row).ok());
      }
      ASSERT_TRUE(tw.CommitBatch().ok());
    }
  }
}

int64_t QueryInt(const std::string& db, const std::string& sql) {
  auto q = query::OpenQueryDb(db);
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  if (!q.ok()) return -1;
  auto v = (*q)->QueryInt(sql, -1);
  EXPECT_TRUE(v.ok()) << sql << ": " << v.status().ToString();
  return v.ok() ? *v : -1;
}

std::string Archive(const std::string& db, const std::string& args, int* rc) {
  return RunCommand(TracedbBin() + " archive " + ShellQuote(db) + " " + args + " 2>&1", rc);
}

// A digest of every event's content (exact in 64 bits: the sums stay far below 2^63).
std::string Digest(const std::string& db) {
  auto q = query::OpenQueryDb(db);
  EXPECT_TRUE(q.ok());
  if (!q.ok()) return "";
  auto st = (*q)->Prepare(
      "SELECT count(*), sum(ts - 1700000000000000000), sum(dur), sum(bytes), "
      "group_concat(DISTINCT name), sum(step), sum(depth) FROM events");
  EXPECT_TRUE(st.ok());
  if (!st.ok() || !*st->Step()) return "";
  std::string d;
  for (int c = 0; c < st->ColumnCount(); ++c) d += std::string(st->Text(c)) + "|";
  return d;
}

void ExpectWholeJobSummaries(const std::string& db) {
  EXPECT_EQ(QueryInt(db, "SELECT sum(count) FROM name_summary"), kAllEvents);
  EXPECT_EQ(QueryInt(db, "SELECT sum(total_ns) FROM name_summary WHERE name = 'compute'"),
            int64_t{kRanks} * kSteps * kCompute * 10000000);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM step_summary"), kSteps);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM step_times WHERE dur IS NOT NULL"),
            int64_t{kRanks} * kSteps);
  EXPECT_EQ(
      QueryInt(db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
}

TEST(ArchiveTest, KeepStepsKeepsExactlyTheLastStepsAndTheWholeJobSummaries) {
  TempDir tmp;
  const std::string db = tmp.Sub("job.tdb");
  BuildDb(db);
  int rc = 0;
  const std::string out = Archive(db, "--keep-steps 10", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("820 kept, 4,100 dropped"), std::string::npos) << out;
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM events"), 10 * kRanks * kEventsPerRankStep);
  EXPECT_EQ(QueryInt(db, "SELECT min(step) FROM events"), kSteps - 10);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM events WHERE name = 'allreduce'"), 10 * kRanks);
  EXPECT_EQ(QueryInt(db, "SELECT sum(value) FROM stats WHERE name = 'archive_dropped_events'"),
            50 * kRanks * kEventsPerRankStep);
  ExpectWholeJobSummaries(db);
  // Applying the same policy again drops nothing more.
  const std::string again = Archive(db, "--keep-steps 10", &rc);
  ASSERT_EQ(rc, 0) << again;
  EXPECT_NE(again.find("820 kept, 0 dropped"), std::string::npos) << again;
}

TEST(ArchiveTest, KeepLastKeepsEveryEventEndingInTheWindow) {
  TempDir tmp;
  const std::string db = tmp.Sub("job.tdb");
  BuildDb(db);
  int rc = 0;
  const std::string out = Archive(db, "--keep-last 5s -f json", &rc);
  ASSERT_EQ(rc, 0) << out;
  // Newest end: rank 1's last allreduce; the window's start 5 s before it.
  const int64_t newest = StepStart(1, kSteps - 1) + 805000000;
  const int64_t cutoff = newest - 5 * kSecond;
  // Every event that ends at or after the cutoff, counted from the generator's description.
  int64_t want = 0;
  for (int r = 0; r < kRanks; ++r) {
    for (int s = 0; s < kSteps; ++s) {
      for (int i = 0; i < kCompute; ++i)
        want += StepStart(r, s) + i * 20000000 + 10000000 >= cutoff;
      want += StepStart(r, s) + 805000000 >= cutoff;
    }
  }
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM events WHERE ts + dur >= " + std::to_string(cutoff)),
            want);
  // Whole blocks go: the blocks (rank, step) that end before the cutoff.
  int64_t kept_blocks = 0;
  for (int r = 0; r < kRanks; ++r) {
    for (int s = 0; s < kSteps; ++s) kept_blocks += StepStart(r, s) + 805000000 >= cutoff;
  }
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM events"), kept_blocks * kEventsPerRankStep);
  EXPECT_NE(out.find("\"events_after\":" + std::to_string(kept_blocks * kEventsPerRankStep)),
            std::string::npos)
      << out;
  ExpectWholeJobSummaries(db);
}

TEST(ArchiveTest, RecompressChangesNoEventAndShrinksTheBlocks) {
  TempDir tmp;
  const std::string db = tmp.Sub("job.tdb");
  BuildDb(db);
  const std::string before = Digest(db);
  const int64_t bytes_before = QueryInt(db, "SELECT sum(length(data)) FROM blocks");
  int rc = 0;
  std::string out = Archive(db, "--recompress -f json", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(Digest(db), before);
  EXPECT_LT(QueryInt(db, "SELECT sum(length(data)) FROM blocks"), bytes_before);
  EXPECT_EQ(out.find("\"blocks_recompressed\":0,"), std::string::npos) << out;
  // Codec byte 1 (LZ4) on every block: LZ4-HC output is an LZ4 block.
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM blocks WHERE substr(data, 1, 1) != x'01'"), 0);
  // A second run looks only at blocks it has not seen.
  out = Archive(db, "--recompress -f json", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"blocks_considered\":0,"), std::string::npos) << out;
  ExpectWholeJobSummaries(db);
}

TEST(ArchiveTest, RecompressOlderThanLeavesTheNewestBlocks) {
  TempDir tmp;
  const std::string db = tmp.Sub("job.tdb");
  BuildDb(db);
  int rc = 0;
  const std::string out = Archive(db, "--recompress-older-than 10s -f json", &rc);
  ASSERT_EQ(rc, 0) << out;
  // Blocks of steps that end more than 10 s before the newest end: steps 0..49 on rank 0 (rank
  // 0's step 49 ends 10 s + 1 µs before), 0..48 on rank 1.
  EXPECT_NE(out.find("\"blocks_considered\":99,"), std::string::npos) << out;
}

TEST(ArchiveTest, ErrorsNameTheFileAndTheOption) {
  TempDir tmp;
  const std::string db = tmp.Sub("nosteps.tdb");
  BuildDb(db, /*with_steps=*/false);
  int rc = 0;
  std::string out = Archive(db, "--keep-steps 3", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find(db + ": the database has no steps"), std::string::npos) << out;
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM events"), kAllEvents);
  out = Archive(db, "--keep-last 6 hours", &rc);
  EXPECT_EQ(rc, 2) << out;
  out = Archive(db, "--keep-last 6d", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("bad --keep-last '6d'"), std::string::npos) << out;
  const std::string not_db = tmp.Sub("x.tdb");
  WriteFile(not_db, std::string(8192, 'x'));
  out = Archive(not_db, "--keep-last 1h", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find(not_db), std::string::npos) << out;
}

// SIGKILL at random moments of archive (drop + recompress + VACUUM): the database is always
// valid and holds either every event or exactly the kept ones.
TEST(ArchiveTest, KilledArchiveLeavesAValidDatabase) {
  TempDir tmp;
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  std::uniform_int_distribution<int> delay_us(0, 60000);
  for (int round = 0; round < 6; ++round) {
    const std::string db = tmp.Sub("job" + std::to_string(round) + ".tdb");
    BuildDb(db);
    RunAndKillAfter({TracedbBin(), "archive", db, "--keep-steps", "10", "--recompress", "-q"},
                    delay_us(rng));
    if (HasFatalFailure()) return;
    // A kill inside a transaction leaves a hot journal, which a read-only open refuses (it
    // never writes: docs/security.md); one read-write open rolls it back, as the message says.
    if (std::filesystem::exists(db + "-journal")) {
      auto rw = engine::Db::Open(db, engine::Db::Mode::kReadWrite);
      ASSERT_TRUE(rw.ok()) << rw.status().ToString();
      ASSERT_TRUE((*rw)->QueryInt("SELECT count(*) FROM sqlite_master").ok());
    }
    EXPECT_EQ(
        QueryInt(db, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"),
        1);
    const int64_t n = QueryInt(db, "SELECT count(*) FROM events");
    EXPECT_TRUE(n == kAllEvents || n == 10 * kRanks * kEventsPerRankStep) << n;
    EXPECT_EQ(QueryInt(db, "SELECT sum(count) FROM name_summary"), kAllEvents);
  }
}

}  // namespace
}  // namespace tracedb::testing
