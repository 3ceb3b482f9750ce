// Shards read in place (engine/compact/shard_catalog.h), end to end through the tracedb program and
// OpenQueryDb: a job compacted with `--shard-by node` (or as separately compacted databases
// listed by `tracedb shards create`) answers the same rows as the same job compacted into one
// database, for `events`, the views and the reports; no copy of the block payloads is written
// (the catalog is small beside the shards); a shard that grows, is archived (old blocks dropped)
// or is compacted again is seen on the next open; an old layout's merged copy is removed; the
// number of open shard files stays bounded; a missing or corrupt shard is an error naming the
// file.
// The reference is always the single-process compaction (no shard, no catalog), compared by
// content: string, track and block ids differ by design, so columns holding them are resolved
// (names, track identities) or left out.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "engine/compact/shard_catalog.h"
#include "engine/compact/shard_compact.h"
#include "engine/db/sqlite.h"
#include "query/open/query_db.h"
#include "tests/db_rows.h"
#include "tests/segment_fixture.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

constexpr int64_t kT0 = 1700000000000000000;  // ns

int Sh(const std::string& cmd, std::string* out = nullptr) {
  int code = -1;
  std::string o = RunCommand(cmd + " 2>&1", &code);
  if (out) *out = o;
  return code;
}

std::string Tracedb() { return ShellQuote(TracedbBin()) + " "; }

int64_t FileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

// File `seq` (10 s each) of ranks [first, first + n) of a job of `world` ranks, rank r on host
// "h" + r / per_host. Each rank: nested spans, a rank-specific kernel name listed first (so
// shards number their strings differently and the catalog maps them), collectives, sends and
// receives to its neighbours, a counter, step markers; `iters` iterations of 5 events.
// With `rank_names` false every rank names its kernel "kernel": the shards' strings are then the
// catalog's, and only their track ids are mapped.
std::string JobSpec(int seq, int first, int n, int world, int per_host, int iters,
                    bool rank_names = true) {
  std::string spec;
  for (int rank = first; rank < first + n; ++rank) {
    const int64_t local_off = 1000000000LL * (rank + 1);
    auto local = [&](int64_t t) { return std::to_string(t - kT0 + local_off); };
    spec += "file trace " + std::to_string(rank) + " " + std::to_string(100 + rank) + " " +
            std::to_string(seq) + " host=h" + std::to_string(rank / per_host) +
            " world=" + std::to_string(world) + "\n";
    spec += "string 1 " + (rank_names ? "r" + std::to_string(rank) + "." : std::string()) +
            "kernel\nstring 2 step\nstring 3 unused\n" +
            "string 4 MPI_Allreduce\nstring 5 MPI_Send\nstring 6 MPI_Recv\nstring 7 loss\n";
    spec += "thread 1 " + std::to_string(1000 + rank) + " main\n";
    std::string members;
    for (int r = 0; r < world; ++r) members += (r ? "," : "") + std::to_string(r);
    spec += "comm 1 " + std::to_string(world) + " " + std::to_string(rank) + " " + members + "\n";
    const int64_t base = kT0 + int64_t{seq} * 10000000000;
    for (int s = 0; s <= 10; ++s) {
      const int64_t t = base + int64_t{s} * 1000000000;
      spec += "anchor " + std::to_string(t) + " " + local(t) + " unc=40\n";
    }
    spec += "events 1\n";
    const int64_t gap = 9000000000 / iters;
    // Durations and counter values that vary like measured ones (not a short cycle), so that the
    // blocks compress like a real job's rather than to almost nothing.
    uint64_t lcg = 0x9E3779B97F4A7C15ull * (rank + 1) + seq;
    auto next = [&lcg] {
      lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
      return lcg >> 33;
    };
    for (int i = 0; i < iters; ++i) {
      const int64_t t = base + 100000000 + int64_t{i} * gap;
      if (i % 100 == 0) spec += "S " + local(t) + " " + std::to_string(seq * 1000 + i / 100) + "\n";
      spec += "B " + local(t) + " 2 cat=1\n";
      spec += "X " + local(t + 100) + " " + std::to_string(1000 + next() % 900) + " 1 cat=1\n";
      spec += "X " + local(t + 2000 + 50 * ((i + rank) % 7)) + " " +
              std::to_string(3000 + next() % 3000) +
              " 4 cat=4 seq=" + std::to_string(seq * iters + i) + " comm=1 bytes=4096\n";
      spec += "X " + local(t + 6000) + " 500 5 cat=4 peer=" + std::to_string((rank + 1) % world) +
              " tag=7 comm=1 bytes=64\n";
      spec += "X " + local(t + 7000) +
              " 800 6 cat=4 peer=" + std::to_string((rank + world - 1) % world) +
              " tag=7 comm=1 bytes=64\n";
      spec += "E " + local(t + 9000) + " 2\n";
      spec +=
          "C " + local(t + 9500) + " 7 " + std::to_string(static_cast<double>(next()) / 7) + "\n";
    }
    spec += "drop 1 " + std::to_string(rank + seq) + "\nend\n";
  }
  return spec;
}

int64_t Count(const std::string& db_path, const std::string& sql) {
  auto db = query::OpenQueryDb(db_path);
  EXPECT_TRUE(db.ok()) << db.status().message();
  if (!db.ok()) return -1;
  auto n = (*db)->QueryInt(sql, -1);
  EXPECT_TRUE(n.ok()) << n.status().message();
  return n.ok() ? *n : -1;
}

// Every event's columns but its ids (id, track, parent: numbered per database), in order.
const char* kAllEvents =
    "SELECT rank, tid, track_name, lane, name, cat, kind, ts, dur, end_ts, depth, bytes, peer, "
    "tag, comm, seq, flow, value, step, args FROM events ORDER BY rank, ts, depth, name, dur";

// The same rows from `got` as from `want`, for events (ordered, and filtered so that zone maps
// prune), the views and the summary tables.
void ExpectSameRows(const std::string& want, const std::string& got) {
  const std::string all = QueryRows(want, kAllEvents, false);
  EXPECT_GT(std::count(all.begin(), all.end(), '\n'), 100);
  EXPECT_TRUE(all == QueryRows(got, kAllEvents, false));
  for (const char* q : {
           "SELECT count(*), sum(dur), min(ts), max(end_ts) FROM events",
           // The ids inside the mapped blocks point at the right rows of the catalog's tables.
           "SELECT e.rank, t.kind, t.name, t.tid, e.name, count(*) FROM events e "
           "JOIN tracks t ON t.track = e.track GROUP BY 1, 2, 3, 4, 5",
           "SELECT (id >> 32) = track, count(*) FROM events GROUP BY 1",
           "SELECT e.rank, e.name, e.ts, p.name, p.ts FROM events e JOIN events p "
           "ON p.id = e.parent",
           "SELECT rank, name, ts FROM events WHERE name GLOB '*kernel' AND rank = 5",
           "SELECT rank, ts, dur FROM events WHERE ts BETWEEN 1700000012000000000 AND "
           "1700000012500000000",
           "SELECT rank, name, ts, dur FROM events WHERE rank = 2 AND dur > 2200",
           "SELECT * FROM spans WHERE rank = 6 AND ts < 1700000001000000000",
           "SELECT * FROM span_stats",
           "SELECT * FROM name_stats_all",
           "SELECT * FROM name_summary",
           "SELECT * FROM rank_time_split",
           "SELECT * FROM step_times",
           "SELECT * FROM step_summary",
           "SELECT * FROM clock_alignment",
           "SELECT rank, name, ts, late_ns, wait_ns, ranks, last_rank FROM collective_arrivals",
           "SELECT * FROM stragglers",
           "SELECT * FROM collective_wait",
           "SELECT src, dst, comm, tag, bytes, send_ts, recv_end_ts, latency_ns FROM "
           "p2p_messages",
           // (Block boundaries differ: a shard's compaction cuts its ranks' blocks on its own.)
           "SELECT n.s, sum(bn.count), max(bn.max_dur) FROM block_names bn JOIN strings n "
           "ON n.id = bn.name GROUP BY 1",
           "SELECT rank, sum(count), min(min_ts), max(max_end), max(max_dur) FROM blocks "
           "GROUP BY 1",
           "SELECT value FROM meta WHERE key = 'open_spans'",
       }) {
    const std::string w = QueryRows(want, q);
    EXPECT_FALSE(w.empty()) << q;
    EXPECT_EQ(w, QueryRows(got, q)) << q;
  }
  // The command-line readers: the same text.
  // (The export's lines sorted: events are written block by block, and the shards cut their
  // ranks' blocks at other events than the single compaction does.)
  const std::vector<std::string> cmds = {
      "report stragglers DB", "report mpi DB", "export --chrome DB -o DB.json && sort DB.json",
      "query -f csv DB 'SELECT * FROM span_stats ORDER BY rank, name'",
      // Run comparison reads manifests too (a run against itself: every change is 0).
      "diff -f csv DB DB", "diff -f json DB DB"};
  for (const std::string& cmd : cmds) {
    auto run = [&](const std::string& db, std::string* out) {
      std::string c = cmd;
      for (size_t at; (at = c.find("DB")) != std::string::npos;) c.replace(at, 2, ShellQuote(db));
      const int code = Sh(Tracedb() + "-q " + c, out);
      for (size_t at; (at = out->find(db)) != std::string::npos;) out->replace(at, db.size(), "DB");
      return code;
    };
    std::string a, b;
    ASSERT_EQ(run(want, &a), 0) << cmd << "\n" << a;
    ASSERT_EQ(run(got, &b), 0) << cmd << "\n" << b;
    EXPECT_GT(a.size(), 100u) << cmd;
    // (Not EXPECT_EQ: gtest's diff of two large texts takes memory quadratic in their size.)
    const size_t at = std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin();
    EXPECT_TRUE(a == b) << cmd << ": first difference at byte " << at << " of " << a.size() << ": "
                        << a.substr(at > 200 ? at - 200 : 0, 400) << "\nvs\n"
                        << b.substr(at > 200 ? at - 200 : 0, 400);
  }
}

class ShardCatalog : public ::testing::Test {
 protected:
  // Writes files `seqs` of a job of 8 ranks, 3 per host (hosts h0, h1, h2).
  void WriteJob(std::initializer_list<int> seqs, int iters, bool rank_names = true) {
    for (int seq : seqs) {
      const Status s =
          WriteSegmentsFromSpec(tmp_.path(), JobSpec(seq, 0, 8, 8, 3, iters, rank_names));
      ASSERT_TRUE(s.ok()) << s.message();
    }
  }
  void Compact(const std::string& args) {
    std::string out;
    ASSERT_EQ(Sh(Tracedb() + "compact -q " + args, &out), 0) << args << "\n" << out;
  }
  TempDir tmp_;
};

TEST_F(ShardCatalog, ShardsByNodeReadInPlaceSameRowsAsOneDb) {
  WriteJob({0, 1}, 2500);
  const std::string one = tmp_.Sub("one.tdb"), nodes = tmp_.Sub("nodes.tdb");
  Compact(ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(one));
  Compact("--shard-by node " + ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(nodes));
  ExpectSameRows(one, nodes);

  // No copy of the payloads: the catalog is small beside the shards, and no merged file exists.
  int64_t shard_bytes = 0;
  for (const char* h : {"h0", "h1", "h2"}) {
    const int64_t n = FileSize(nodes + ".shards/node-" + h + ".tdb");
    ASSERT_GT(n, 0) << h;
    shard_bytes += n;
  }
  const int64_t catalog = FileSize(engine::CatalogPath(nodes));
  ASSERT_GT(catalog, 0);
  EXPECT_LT(catalog * 10, shard_bytes) << catalog << " vs " << shard_bytes;
  std::printf("catalog %lld bytes, shards %lld bytes\n", static_cast<long long>(catalog),
              static_cast<long long>(shard_bytes));
  EXPECT_EQ(FileSize(nodes + ".shards/merged.tdb"), -1);
  // Two of the three shards number strings differently from the catalog: their blocks are
  // rewritten when read, which the rows above checked.
  auto cat = engine::Db::Open(engine::CatalogPath(nodes), engine::Db::Mode::kReadOnly);
  ASSERT_TRUE(cat.ok());
  auto mapped = (*cat)->QueryInt("SELECT count(*) FROM shard_files WHERE length(strings) > 0");
  ASSERT_TRUE(mapped.ok());
  EXPECT_EQ(*mapped, 3);  // every shard's maps are stored, identity or not
  auto strings_differ = (*cat)->QueryInt(
      "SELECT count(*) FROM shard_files WHERE strings != (SELECT strings FROM shard_files "
      "WHERE shard = 1)");
  ASSERT_TRUE(strings_differ.ok());
  EXPECT_EQ(*strings_differ, 2);
  // Block payloads are not in the catalog at all.
  EXPECT_FALSE((*cat)->QueryInt("SELECT count(*) FROM block_refs WHERE data IS NOT NULL").ok());
}

TEST_F(ShardCatalog, AGrownShardIsSeenOnTheNextOpen) {
  // (Names common to all ranks: here the shards' blocks differ from the catalog's only in their
  // track ids.)
  WriteJob({0}, 200, /*rank_names=*/false);
  const std::string nodes = tmp_.Sub("nodes.tdb"), one = tmp_.Sub("one.tdb");
  Compact("--shard-by node " + ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(nodes));
  const int64_t before = Count(nodes, "SELECT count(*) FROM events");
  const int64_t blocks_before = Count(nodes, "SELECT count(*) FROM blocks");
  // The second file of every rank: the next compaction adds blocks to each shard.
  WriteJob({1}, 200, /*rank_names=*/false);
  Compact("--shard-by node " + ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(nodes));
  Compact(ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(one));
  const int64_t after = Count(nodes, "SELECT count(*) FROM events");
  EXPECT_GT(after, before);
  EXPECT_EQ(after, Count(one, "SELECT count(*) FROM events"));
  EXPECT_GT(Count(nodes, "SELECT count(*) FROM blocks"), blocks_before);
  ExpectSameRows(one, nodes);
  // An open with nothing new changes nothing in the catalog (SQLite's change counter).
  const std::string catalog = engine::CatalogPath(nodes);
  const std::string bytes = ReadFile(catalog);
  EXPECT_EQ(Count(nodes, "SELECT count(*) FROM events"), after);
  EXPECT_EQ(ReadFile(catalog), bytes);
}

TEST_F(ShardCatalog, OldLayoutMergedCopyIsRemoved) {
  WriteJob({0}, 100);
  const std::string nodes = tmp_.Sub("nodes.tdb"), one = tmp_.Sub("one.tdb");
  Compact("--shard-by node " + ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(nodes));
  Compact(ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(one));
  // What an older tracedb left: a full trace database at nodes.tdb.shards/merged.tdb (here the
  // single compaction's, which holds the same events), and no catalog.
  const std::string merged = nodes + ".shards/merged.tdb";
  ASSERT_EQ(Sh("cp " + ShellQuote(one) + " " + ShellQuote(merged)), 0);
  ASSERT_GT(FileSize(merged), 0);
  ASSERT_EQ(FileSize(engine::CatalogPath(nodes)), -1);
  EXPECT_EQ(QueryRows(nodes, kAllEvents, false), QueryRows(one, kAllEvents, false));
  EXPECT_EQ(FileSize(merged), -1);
  EXPECT_GT(FileSize(engine::CatalogPath(nodes)), 0);
}

TEST_F(ShardCatalog, SeveralDatabasesAsOne) {
  // Ranks 0-4 and 5-7 recorded into two directories and compacted separately.
  for (int seq : {0, 1}) {
    ASSERT_TRUE(WriteSegmentsFromSpec(tmp_.Sub("a"), JobSpec(seq, 0, 5, 8, 3, 300)).ok());
    ASSERT_TRUE(WriteSegmentsFromSpec(tmp_.Sub("b"), JobSpec(seq, 5, 3, 8, 3, 300)).ok());
    ASSERT_TRUE(WriteSegmentsFromSpec(tmp_.path(), JobSpec(seq, 0, 8, 8, 3, 300)).ok());
  }
  const std::string a = tmp_.Sub("a.tdb"), b = tmp_.Sub("b.tdb"), one = tmp_.Sub("one.tdb");
  Compact(ShellQuote(tmp_.Sub("a/trace")) + " -o " + ShellQuote(a));
  Compact(ShellQuote(tmp_.Sub("b/trace")) + " -o " + ShellQuote(b));
  Compact(ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(one));
  ASSERT_EQ(::mkdir(tmp_.Sub("m").c_str(), 0777), 0);
  const std::string ab = tmp_.Sub("m/ab.tdb");
  std::string out;
  // The databases are outside the manifest's directory: refused without the flag.
  EXPECT_EQ(Sh(Tracedb() + "shards create " + ShellQuote(b) + " " + ShellQuote(a) + " -o " +
                   ShellQuote(ab),
               &out),
            1)
      << out;
  EXPECT_NE(out.find("outside " + tmp_.Sub("m") + ", the manifest's directory"), std::string::npos)
      << out;
  // b first: the catalog's ids then follow b's, and a's blocks are the ones rewritten.
  const std::string ext = Tracedb() + "--allow-external-shards ";
  ASSERT_EQ(
      Sh(ext + "shards create " + ShellQuote(b) + " " + ShellQuote(a) + " -o " + ShellQuote(ab),
         &out),
      0)
      << out;
  EXPECT_NE(out.find("2 shards"), std::string::npos) << out;
  ::setenv("TRACEDB_ALLOW_EXTERNAL_SHARDS", "1", 1);  // this process and the commands it runs
  ExpectSameRows(one, ab);
  ::unsetenv("TRACEDB_ALLOW_EXTERNAL_SHARDS");
  std::string listed;
  ASSERT_EQ(Sh(ext + "shards list " + ShellQuote(ab), &listed), 0) << listed;
  EXPECT_NE(listed.find("/a.tdb\n"), std::string::npos) << listed;
  EXPECT_NE(listed.find("/b.tdb\n"), std::string::npos) << listed;
  // `info` reads it too, and counts the shards' bytes; a reader without the flag refuses it.
  ASSERT_EQ(Sh(ext + "info " + ShellQuote(ab), &out), 0) << out;
  EXPECT_EQ(Sh(Tracedb() + "query " + ShellQuote(ab) + " 'SELECT count(*) FROM events'", &out), 1)
      << out;
  EXPECT_NE(out.find("is an absolute path, outside the manifest's directory"), std::string::npos)
      << out;

  // Overlapping ranks are refused, naming both files; so is an existing output.
  ASSERT_EQ(Sh("cp " + ShellQuote(a) + " " + ShellQuote(tmp_.Sub("a2.tdb"))), 0);
  EXPECT_NE(Sh(Tracedb() + "shards create " + ShellQuote(a) + " " + ShellQuote(tmp_.Sub("a2.tdb")) +
                   " -o " + ShellQuote(tmp_.Sub("x.tdb")),
               &out),
            0);
  EXPECT_NE(out.find("is in two shards"), std::string::npos) << out;
  EXPECT_NE(out.find("a2.tdb"), std::string::npos) << out;
  EXPECT_EQ(FileSize(tmp_.Sub("x.tdb")), -1);
  EXPECT_NE(Sh(Tracedb() + "shards create " + ShellQuote(a) + " -o " + ShellQuote(ab), &out), 0);
  EXPECT_NE(out.find("exists"), std::string::npos) << out;
  EXPECT_NE(
      Sh(Tracedb() + "shards create " + ShellQuote(ab) + " -o " + ShellQuote(tmp_.Sub("y")), &out),
      0);
  EXPECT_NE(out.find("a manifest"), std::string::npos) << out;
}

// A manifest received from someone else reaches no file outside its directory: an absolute
// path, a '..' and a link out are refused by every reader, which then creates no catalog and
// deletes nothing; with --allow-external-shards the same manifest is read.
TEST_F(ShardCatalog, AManifestFromElsewhereStaysInItsDirectory) {
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp_.path(), JobSpec(0, 0, 2, 2, 1, 50)).ok());
  const std::string victim = tmp_.Sub("victim.tdb");
  Compact(ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(victim));
  ASSERT_EQ(::mkdir(tmp_.Sub("got").c_str(), 0777), 0);
  ASSERT_EQ(::symlink(tmp_.path().c_str(), tmp_.Sub("got/up").c_str()), 0);
  const std::vector<std::pair<std::string, std::string>> entries = {
      {victim, "is an absolute path"},
      {"../victim.tdb", "leaves the manifest's directory ('..')"},
      {"up/victim.tdb", "through a symbolic link"}};
  int i = 0;
  for (const auto& [entry, why] : entries) {
    const std::string m = tmp_.Sub("got/m" + std::to_string(i++) + ".tdb");
    ASSERT_TRUE(engine::WriteManifest(m, {{entry, ""}}).ok());
    // What an older tracedb's open would delete, were it allowed to open this manifest.
    std::string out;
    EXPECT_EQ(Sh(Tracedb() + "query " + ShellQuote(m) + " 'SELECT count(*) FROM events'", &out), 1)
        << out;
    EXPECT_NE(out.find(why), std::string::npos) << entry << ": " << out;
    EXPECT_NE(out.find("--allow-external-shards"), std::string::npos) << out;
    EXPECT_EQ(FileSize(engine::CatalogPath(m)), -1) << entry;
    EXPECT_GT(FileSize(victim), 0);
    ASSERT_EQ(Sh(Tracedb() + "--allow-external-shards query " + ShellQuote(m) +
                     " 'SELECT count(*) > 0 FROM events'",
                 &out),
              0)
        << out;
    EXPECT_NE(out.find("1"), std::string::npos) << out;
  }
}

TEST_F(ShardCatalog, OpenShardFilesAreBounded) {
  // 100 ranks, each on its own host: 100 shards, more than the 64 connections kept open.
  constexpr int kRanks = 100;
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp_.path(), JobSpec(0, 0, kRanks, kRanks, 1, 20)).ok());
  const std::string nodes = tmp_.Sub("nodes.tdb"), one = tmp_.Sub("one.tdb");
  Compact("--shard-by node " + ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(nodes));
  Compact(ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(one));
  const std::string sql = "SELECT rank, count(*), sum(dur), max(ts) FROM events GROUP BY rank";
  {
    auto db = query::OpenQueryDb(nodes);
    ASSERT_TRUE(db.ok()) << db.status().message();
    ASSERT_EQ(*(*db)->QueryInt("SELECT count(*) FROM shard_files"), kRanks);
  }
  {
    auto db = engine::OpenShardCatalog(nodes, /*max_open=*/8);
    ASSERT_TRUE(db.ok()) << db.status().message();
    auto n = (*db)->QueryInt("SELECT count(*) FROM blocks WHERE length(data) > 0");
    ASSERT_TRUE(n.ok()) << n.status().message();
    EXPECT_GE(*n, kRanks);
    const engine::ShardConnectionCounts c = engine::ShardConnections(db->get());
    EXPECT_EQ(c.peak, 8u);
    EXPECT_LE(c.open, 8u);
    EXPECT_GE(c.opened, static_cast<size_t>(kRanks));
  }
  // The program under a descriptor limit below the shard count (a file each) but above the cap.
  std::string want, got;
  ASSERT_EQ(Sh(Tracedb() + "query -f csv " + ShellQuote(one) + " " + ShellQuote(sql), &want), 0);
  ASSERT_EQ(Sh("ulimit -n 90 && " + Tracedb() + "query -f csv " + ShellQuote(nodes) + " " +
                   ShellQuote(sql),
               &got),
            0)
      << got;
  EXPECT_EQ(want, got);
  EXPECT_NE(want.find("\n99,"), std::string::npos) << want;
  // The limit does bind: below the cap of 64 shard files, the same query runs out of them.
  EXPECT_NE(Sh("ulimit -n 40 && " + Tracedb() + "query -f csv " + ShellQuote(nodes) + " " +
                   ShellQuote(sql),
               &got),
            0)
      << got;
  EXPECT_NE(got.find("unable to open"), std::string::npos) << got;
}

TEST_F(ShardCatalog, AnOpenManifestDoesNotBlockAShardsWriter) {
  WriteJob({0}, 100);
  const std::string nodes = tmp_.Sub("nodes.tdb");
  Compact("--shard-by node " + ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(nodes));
  auto db = query::OpenQueryDb(nodes);
  ASSERT_TRUE(db.ok()) << db.status().message();
  // Every shard read, and the connection kept (as `tracedb shell` or `view` keep it).
  auto n = (*db)->QueryInt("SELECT sum(length(data)) FROM blocks");
  ASSERT_TRUE(n.ok()) << n.status().message();
  ASSERT_GT(*n, 0);
  // A compaction of the next file into a shard must be able to commit meanwhile.
  for (const char* h : {"h0", "h1", "h2"}) {
    auto w = engine::Db::Open(nodes + ".shards/node-" + h + ".tdb", engine::Db::Mode::kReadWrite);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Exec("PRAGMA busy_timeout = 200").ok());
    const Status s = (*w)->Exec(
        "BEGIN IMMEDIATE; INSERT OR REPLACE INTO state(key, value) VALUES('test', 1); COMMIT");
    EXPECT_TRUE(s.ok()) << h << ": " << s.message();
  }
}

// The rows of `sql` over the shards of `manifest` read one by one as plain trace databases (no
// catalog), in host order: ranks ascend from h0 to h2, so for a query ordered by rank first this
// is the whole job's answer.
std::string ShardByShardRows(const std::string& manifest, const std::string& sql) {
  std::string all;
  for (const char* h : {"h0", "h1", "h2"}) {
    all += QueryRows(manifest + ".shards/node-" + h + ".tdb", sql, false);
  }
  return all;
}

// What the catalog must answer after a shard changed under it: the shards' own rows, events,
// blocks and summaries.
void ExpectShardsRows(const std::string& nodes) {
  const std::string all = QueryRows(nodes, kAllEvents, false);
  EXPECT_GT(std::count(all.begin(), all.end(), '\n'), 100);
  EXPECT_TRUE(all == ShardByShardRows(nodes, kAllEvents));
  for (const char* q : {
           "SELECT rank, count(*), sum(dur), min(ts), max(end_ts) FROM events GROUP BY rank "
           "ORDER BY rank",
           "SELECT rank, count(*), sum(count), min(min_ts), max(max_end), max(max_dur) FROM blocks "
           "GROUP BY rank ORDER BY rank",
           "SELECT rank, name, ts, dur FROM events WHERE dur > 2200 ORDER BY rank, ts, name",
           "SELECT rank, n.s, kind, count, total_dur, max_dur FROM name_stats JOIN strings n "
           "ON n.id = name ORDER BY rank, n.s, kind",
       }) {
    const std::string got = QueryRows(nodes, q, false);
    EXPECT_FALSE(got.empty()) << q;
    EXPECT_EQ(got, ShardByShardRows(nodes, q)) << q;
  }
}

TEST_F(ShardCatalog, AnArchivedShardIsSeenOnTheNextOpen) {
  // Three files of 300 iterations (9 steps per rank), compacted as they come: blocks of each
  // file apart, which retention can drop.
  const std::string nodes = tmp_.Sub("nodes.tdb"), h1 = nodes + ".shards/node-h1.tdb";
  for (int seq : {0, 1, 2}) {
    WriteJob({seq}, 300);
    Compact("--shard-by node " + ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(nodes));
  }
  ExpectShardsRows(nodes);
  const int64_t before = Count(nodes, "SELECT count(*) FROM events WHERE rank BETWEEN 3 AND 5");
  const int64_t blocks_before = Count(h1, "SELECT count(*) FROM blocks");
  // Retention on one shard drops its ranks' old blocks (the ones the catalog listed first).
  std::string out;
  ASSERT_EQ(Sh(Tracedb() + "archive -q --keep-steps 2 " + ShellQuote(h1), &out), 0) << out;
  ASSERT_LT(Count(h1, "SELECT count(*) FROM blocks"), blocks_before);
  const int64_t after = Count(nodes, "SELECT count(*) FROM events WHERE rank BETWEEN 3 AND 5");
  EXPECT_LT(after, before);
  EXPECT_EQ(after, Count(h1, "SELECT count(*) FROM events"));
  ExpectShardsRows(nodes);
  // The shards that did not change keep their refs; the archived one's were listed again.
  auto cat = engine::Db::Open(engine::CatalogPath(nodes), engine::Db::Mode::kReadOnly);
  ASSERT_TRUE(cat.ok());
  auto refs = (*cat)->QueryInt(
      "SELECT count(*) FROM block_refs r JOIN shard_files f ON f.shard = r.shard "
      "WHERE f.path LIKE '%node-h1.tdb'");
  ASSERT_TRUE(refs.ok());
  EXPECT_EQ(*refs, Count(h1, "SELECT count(*) FROM blocks"));
  // Block ids of a block_names row all point at a listed block.
  auto orphans = (*cat)->QueryInt(
      "SELECT count(*) FROM block_names WHERE block NOT IN (SELECT block FROM block_refs)");
  ASSERT_TRUE(orphans.ok());
  EXPECT_EQ(*orphans, 0);
  // `report stragglers` and an export over all the shards run.
  ASSERT_EQ(Sh(Tracedb() + "-q report stragglers " + ShellQuote(nodes), &out), 0) << out;
}

TEST_F(ShardCatalog, AShardCompactedAgainIsSeen) {
  // The job of `a` (one file) and of `b` (two files), each compacted by node.
  for (int seq : {0, 1}) {
    if (seq == 0) {
      ASSERT_TRUE(WriteSegmentsFromSpec(tmp_.Sub("a"), JobSpec(seq, 0, 8, 8, 3, 200)).ok());
    }
    ASSERT_TRUE(WriteSegmentsFromSpec(tmp_.Sub("b"), JobSpec(seq, 0, 8, 8, 3, 200)).ok());
  }
  const std::string a = tmp_.Sub("a.tdb"), b = tmp_.Sub("b.tdb");
  Compact("--shard-by node " + ShellQuote(tmp_.Sub("a/trace")) + " -o " + ShellQuote(a));
  Compact("--shard-by node " + ShellQuote(tmp_.Sub("b/trace")) + " -o " + ShellQuote(b));
  ExpectShardsRows(a);
  const std::string a1 = a + ".shards/node-h1.tdb", b1 = b + ".shards/node-h1.tdb";
  // a's h1 shard replaced by b's, a new file renamed over it: the catalog, which listed a's
  // blocks 1..N of that shard, must not take b's blocks 1..N for them.
  ASSERT_EQ(Sh("cp " + ShellQuote(b1) + " " + ShellQuote(a1 + ".new") + " && mv " +
               ShellQuote(a1 + ".new") + " " + ShellQuote(a1)),
            0);
  ExpectShardsRows(a);
  EXPECT_EQ(Count(a, "SELECT count(*) FROM events WHERE rank BETWEEN 3 AND 5"),
            Count(b, "SELECT count(*) FROM events WHERE rank BETWEEN 3 AND 5"));
  // And back to a copy of the first version, written over the same file (same inode).
  Compact("--shard-by node " + ShellQuote(tmp_.Sub("a/trace")) + " -o " +
          ShellQuote(tmp_.Sub("a2.tdb")));
  ASSERT_EQ(Sh("cat " + ShellQuote(tmp_.Sub("a2.tdb.shards/node-h1.tdb")) + " > " + ShellQuote(a1)),
            0);
  ExpectShardsRows(a);
  EXPECT_EQ(Count(a, "SELECT count(*) FROM events WHERE rank BETWEEN 3 AND 5"),
            Count(tmp_.Sub("a2.tdb"), "SELECT count(*) FROM events WHERE rank BETWEEN 3 AND 5"));
}

TEST_F(ShardCatalog, ABuildLeftByADeadProcessIsRemoved) {
  WriteJob({0}, 100);
  const std::string nodes = tmp_.Sub("nodes.tdb"), one = tmp_.Sub("one.tdb");
  Compact("--shard-by node " + ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(nodes));
  Compact(ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(one));
  const std::string catalog = engine::CatalogPath(nodes);
  // A process that has exited: its pid is free (and not reused within this test, in practice).
  const pid_t dead = ::fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) ::_exit(0);
  int status = 0;
  ASSERT_EQ(::waitpid(dead, &status, 0), dead);
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  const std::string build = catalog + ".build-" + host + "-";
  const std::string dead_build = build + std::to_string(dead);
  // The build of a process of another host (a shared file system): left alone.
  const std::string other_host = catalog + ".build-elsewhere.example-" + std::to_string(dead);
  WriteFile(other_host, "x");
  // (This test's parent: a process that runs, and not this one, whose own build file is its.)
  const std::string live_build = build + std::to_string(::getppid());
  // What a build killed half way leaves: a file that is not a catalog yet, and its journal.
  WriteFile(dead_build, std::string(4096, 'x'));
  WriteFile(dead_build + "-journal", "x");
  WriteFile(live_build, "x");
  ASSERT_EQ(FileSize(catalog), -1);  // (made by the first open)
  EXPECT_EQ(QueryRows(nodes, kAllEvents, false), QueryRows(one, kAllEvents, false));
  EXPECT_GT(FileSize(catalog), 0);
  EXPECT_EQ(FileSize(dead_build), -1);
  EXPECT_EQ(FileSize(dead_build + "-journal"), -1);
  // A build of a process still running is left to it.
  EXPECT_EQ(FileSize(live_build), 1);
  EXPECT_EQ(FileSize(other_host), 1);
  // The build that made the catalog left nothing behind: the two builds above are all there is.
  std::string out;
  ASSERT_EQ(Sh("ls " + ShellQuote(nodes + ".shards") + " | grep -c build", &out), 0);
  EXPECT_EQ(out, "2\n");
}

TEST_F(ShardCatalog, AnOpenKilledAtAnyMomentLeavesAWholeCatalog) {
  // 60 one-rank shards: a first open takes long enough to be killed in the middle.
  constexpr int kRanks = 60;
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp_.path(), JobSpec(0, 0, kRanks, kRanks, 1, 20)).ok());
  const std::string nodes = tmp_.Sub("nodes.tdb"), one = tmp_.Sub("one.tdb");
  Compact("--shard-by node " + ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(nodes));
  Compact(ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(one));
  const std::string catalog = engine::CatalogPath(nodes);
  const std::string want = QueryRows(one, kAllEvents, false);
  // Kills drawn over the time a first open takes here (measured: machines differ), plus the
  // program's start.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(Count(nodes, "SELECT count(*) FROM events"), Count(one, "SELECT count(*) FROM events"));
  const auto open_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  std::uniform_int_distribution<int64_t> delay_us(0, 20000 + open_us * 3 / 2);
  int mid_build = 0;  // rounds killed while a build file existed
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    // Even rounds build the catalog from nothing; odd ones refresh it after every shard changed
    // (a new modification time: each shard is checked and its state written again).
    if (round % 2 == 0) {
      (void)::unlink(catalog.c_str());
    } else {
      ASSERT_EQ(Sh("touch " + ShellQuote(nodes) + ".shards/node-h*.tdb"), 0);
    }
    RunAndKillAfter({TracedbBin(), "query", "-q", nodes, "SELECT count(*) FROM events"},
                    delay_us(rng));
    if (HasFatalFailure()) return;
    // Whatever the moment: catalog.tdb is absent or whole, never half written.
    if (FileSize(catalog) >= 0) {
      auto db = engine::Db::Open(catalog, engine::Db::Mode::kReadOnly);
      ASSERT_TRUE(db.ok()) << db.status().message();
      auto ok = (*db)->QueryInt(
          "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'");
      ASSERT_TRUE(ok.ok()) << ok.status().message();
      EXPECT_EQ(*ok, 1);
      auto shards = (*db)->QueryInt("SELECT count(*) FROM shard_files");
      ASSERT_TRUE(shards.ok()) << shards.status().message();
      EXPECT_EQ(*shards, kRanks);
    }
    std::string left;
    (void)Sh("ls " + ShellQuote(nodes + ".shards") + " | grep -c build", &left);
    mid_build += left != "0\n";
    // The next open answers exactly, and leaves no build file behind.
    EXPECT_TRUE(QueryRows(nodes, kAllEvents, false) == want);
    std::string out;
    ASSERT_EQ(Sh("ls " + ShellQuote(nodes + ".shards") + " | grep -c build", &out), 1) << out;
  }
  std::printf("killed during a build in %d of 10 rounds\n", mid_build);
}

TEST_F(ShardCatalog, MissingOrCorruptShardNamesTheFile) {
  WriteJob({0}, 100);
  const std::string nodes = tmp_.Sub("nodes.tdb");
  Compact("--shard-by node " + ShellQuote(tmp_.Sub("trace")) + " -o " + ShellQuote(nodes));
  const std::string h1 = nodes + ".shards/node-h1.tdb";
  // (sum(dur) decodes every block; count(*) is answered from the zone maps.)
  const std::string sql = "SELECT sum(dur) FROM events";
  std::string out;
  ASSERT_EQ(Sh(Tracedb() + "query " + ShellQuote(nodes) + " " + ShellQuote(sql), &out), 0) << out;

  // A block payload damaged after the catalog listed it: the query that reads it fails.
  ASSERT_EQ(Sh("cp " + ShellQuote(h1) + " " + ShellQuote(h1 + ".bak")), 0);
  {
    auto db = engine::OpenShardCatalog(nodes);
    ASSERT_TRUE(db.ok()) << db.status().message();
    auto w = engine::Db::Open(h1, engine::Db::Mode::kReadWrite);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Exec("UPDATE blocks SET data = x'01020304' WHERE block = 1").ok());
    auto n = (*db)->QueryInt("SELECT sum(length(data)) FROM blocks");
    ASSERT_FALSE(n.ok());
    EXPECT_NE(n.status().message().find("node-h1.tdb"), std::string::npos) << n.status().message();
  }
  EXPECT_NE(Sh(Tracedb() + "query " + ShellQuote(nodes) + " " + ShellQuote(sql), &out), 0);
  EXPECT_NE(out.find("node-h1.tdb"), std::string::npos) << out;

  // A shard that is not a database at all.
  WriteFile(h1, std::string(8192, 'x'));
  EXPECT_NE(Sh(Tracedb() + "query " + ShellQuote(nodes) + " " + ShellQuote(sql), &out), 0);
  EXPECT_NE(out.find("node-h1.tdb"), std::string::npos) << out;

  // A shard that is gone.
  ASSERT_EQ(::unlink(h1.c_str()), 0);
  EXPECT_NE(Sh(Tracedb() + "query " + ShellQuote(nodes) + " " + ShellQuote(sql), &out), 0);
  EXPECT_NE(out.find("node-h1.tdb"), std::string::npos) << out;
  EXPECT_NE(out.find("no such"), std::string::npos) << out;

  // Back in place, the manifest opens again.
  ASSERT_EQ(::rename((h1 + ".bak").c_str(), h1.c_str()), 0);
  EXPECT_EQ(Sh(Tracedb() + "query " + ShellQuote(nodes) + " " + ShellQuote(sql), &out), 0) << out;
}

}  // namespace
}  // namespace tracedb::testing
