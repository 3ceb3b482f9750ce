// The NCCL profiler plugin through its ABI, without NCCL or a GPU: nccl_harness drives
// ncclProfiler_v5, _v4 and _v3 as NCCL does on two ranks, `tracedb compact` merges them, and every
// field in the database is checked against the facts the harness wrote while driving the plugin
// (what it emitted), not against the plugin's own reading. Also: the event mask from
// TRACEDB_NCCL_EVENTS, a bad mask refused, the pool bound with drops counted exactly, the step
// window switching the mask, and the GPU views over the result.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "query/open/query_db.h"
#include "query/views/gpu_views.h"
#include "recorder/nccl/event_mask.h"
#include "recorder/nccl/profiler_abi.h"
#include "tests/db_invariants.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

constexpr uint64_t kCommId = 0xABCDEF0123456789ull;
int64_t FoldedComm() { return static_cast<uint32_t>(kCommId ^ (kCommId >> 32)); }

std::vector<std::vector<std::string>> ReadFacts(const std::string& path) {
  std::vector<std::vector<std::string>> facts;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> f;
    std::string w;
    while (words >> w) f.push_back(w);
    if (!f.empty()) facts.push_back(f);
  }
  return facts;
}

// Runs the harness as rank `rank` of `world`; returns its exit code and stderr in *err.
int Harness(const std::string& trace, int version, const std::string& facts, int rank, int world,
            const std::string& mode, const std::string& env = "", std::string* err = nullptr) {
  int rc = 0;
  const std::string cmd = "env TRACEDB_DIR=" + ShellQuote(trace) +
                          " TRACEDB_RANK=" + std::to_string(rank) +
                          " TRACEDB_WORLD_SIZE=" + std::to_string(world) + " " + env + " " +
                          ShellQuote(NCCL_HARNESS_PATH) + " " + ShellQuote(NCCL_PLUGIN_PATH) + " " +
                          std::to_string(version) + " " + ShellQuote(facts) + " " + mode + " 2>&1";
  const std::string out = RunCommand(cmd, &rc);
  if (err) *err = out;
  return rc;
}

int Compact(const std::string& trace, const std::string& db) {
  int rc = 0;
  const std::string out = RunCommand(
      TracedbBin() + " compact " + ShellQuote(trace) + " -o " + ShellQuote(db) + " -q 2>&1", &rc);
  if (rc != 0) ADD_FAILURE() << out;
  if (rc == 0) ExpectDbInvariants(db);  // tests/db_invariants.h, on every DB the harness makes
  return rc;
}

class Db {
 public:
  explicit Db(const std::string& path) {
    auto q = query::OpenQueryDb(path);
    if (!q.ok()) {
      ADD_FAILURE() << q.status().ToString();
      return;
    }
    db_ = std::move(*q);
    Status s = query::InstallGpuViews(db_.get());
    if (!s.ok()) ADD_FAILURE() << s.ToString();
  }
  int64_t Int(const std::string& sql) {
    if (!db_) return -999;
    auto v = db_->QueryInt(sql, -1);
    if (!v.ok()) {
      ADD_FAILURE() << v.status().ToString() << " in " << sql;
      return -999;
    }
    return *v;
  }

 private:
  std::unique_ptr<engine::Db> db_;
};

std::string Q(const std::string& s) { return "'" + s + "'"; }

class NcclPluginTest : public ::testing::TestWithParam<int> {};

TEST_P(NcclPluginTest, EveryFieldOnTwoRanks) {
  const int version = GetParam();
  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  std::map<int, std::vector<std::vector<std::string>>> facts;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string f = tmp.Sub("facts" + std::to_string(rank));
    std::string err;
    ASSERT_EQ(Harness(trace, version, f, rank, 2, "full", "", &err), 0) << err;
    facts[rank] = ReadFacts(f);
  }
  const std::string dbpath = tmp.Sub("job.tdb");
  ASSERT_EQ(Compact(trace, dbpath), 0);
  Db db(dbpath);
  const std::string comm = std::to_string(FoldedComm());

  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const std::string r = std::to_string(rank);
    const std::string lp = "nccl dp r" + r;  // the lanes of this rank's communicator
    int colls = 0, proxies = 0, steps = 0, kernels = 0;
    for (const auto& f : facts[rank]) {
      if (f[0] == "name") {
        EXPECT_EQ(f[1], "tracedb");
      }
      if (f[0] == "init") {
        EXPECT_EQ(f[1], "0");
      }
      if (f[0] == "mask") {
        EXPECT_EQ(std::stoi(f[1]), nccl::kDefaultEventMask);
      }
      if (f[0] == "coll") {
        // coll SEQ FUNC BYTES ROOT ALGO PROTO: one instant on the communicator's lane.
        ++colls;
        const int root = std::stoi(f[4]);
        const int algo = f[5] == "RING" ? 2 : 1;
        const int proto = f[6] == "LL128" ? 2 : 3;
        const int32_t tag = nccl::PackTaskTag(8, algo, proto, 2, 16);
        EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE rank = " + r +
                         " AND kind = 'instant' AND cat = 'nccl' AND lane = " + Q(lp) +
                         " AND name = " + Q(f[2]) + " AND seq = " + f[1] + " AND bytes = " + f[3] +
                         " AND comm = " + comm + " AND tag = " + std::to_string(tag) +
                         (root >= 0 ? " AND peer = " + f[4] : " AND peer IS NULL") +
                         " AND flow IS NOT NULL"),
                  1)
            << "coll seq " << f[1];
      }
      if (f[0] == "proxy") {
        // proxy DIR SEQ CH PEER BYTES ROW: a span on the channel's lane (one row per op in
        // flight at once), linked to its task by flow.
        ++proxies;
        const std::string name = f[1] == "send" ? "ProxySend" : "ProxyRecv";
        EXPECT_EQ(db.Int("SELECT count(*) FROM events p JOIN events c ON c.rank = p.rank AND "
                         "c.flow = p.flow AND c.kind = 'instant' WHERE p.rank = " +
                         r + " AND p.kind = 'span' AND p.name = " + Q(name) + " AND p.lane = " +
                         Q(lp + " ch" + f[3] + " " + f[1] + (f[6] == "0" ? "" : " #" + f[6])) +
                         " AND p.seq = " + f[2] + " AND c.seq = " + f[2] + " AND p.peer = " + f[4] +
                         " AND p.bytes = " + f[5] + " AND p.comm = " + comm),
                  1)
            << "proxy " << f[1] << " seq " << f[2] << " ch " << f[3];
      }
      if (f[0] == "step") {
        // step DIR SEQ CH STEP BYTES OPROW: on the lane of its op's row and its FIFO slot.
        ++steps;
        const std::string name = f[1] == "send" ? "ProxyStepSend" : "ProxyStepRecv";
        EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE rank = " + r +
                         " AND name = " + Q(name) + " AND lane = " +
                         Q(lp + " ch" + f[3] + " " + f[1] + (f[6] == "0" ? "" : " #" + f[6]) +
                           " steps" + (f[4] == "0" ? "" : " #" + f[4])) +
                         " AND seq = " + f[2] + " AND tag = " + f[4] + " AND bytes = " + f[5] +
                         " AND flow IS NOT NULL"),
                  1)
            << "step " << f[1] << " seq " << f[2] << " ch " << f[3] << " step " << f[4];
      }
      if (f[0] == "kernel") {
        // kernel SEQ CH FUNC GPU_DUR: GPU-timed in v4/v5: the duration is the timer difference
        // (within 2 ns: compaction maps local times to the common clock with its drift).
        ++kernels;
        const bool gpu = f[4] != "-1";
        EXPECT_EQ(
            db.Int("SELECT count(*) FROM events WHERE rank = " + r + " AND kind = 'span' " +
                   "AND name = " + Q(f[3]) + " AND lane = " + Q(lp + " ch" + f[2] + " kernel") +
                   " AND seq = " + f[1] + " AND (tag & 255) = " + f[2] +
                   " AND (tag >> 8 & 1) = " + (gpu ? "1" : "0") +
                   (gpu ? " AND abs(dur - " + f[4] + ") <= 2" : "") + " AND comm = " + comm),
            1)
            << "kernel seq " << f[1] << " ch " << f[2];
      }
      if (f[0] == "p2p") {
        EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE rank = " + r +
                         " AND kind = 'instant' AND name = 'Send' AND peer = " + f[2] +
                         " AND bytes = " + f[3] + " AND seq IS NULL AND comm = " + comm),
                  1);
      }
      if (f[0] == "pxn") {
        // The foreign proxy op is recorded, with nothing taken from its (foreign) parent.
        EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE rank = " + r +
                         " AND name = 'ProxySend' AND flow IS NULL AND seq IS NULL"),
                  1);
        EXPECT_EQ(db.Int("SELECT CAST(value AS INTEGER) FROM events WHERE rank = " + r +
                         " AND name = 'nccl.foreign_parents'"),
                  1);
      }
      if (f[0] == "ctrl") {
        EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE rank = " + r + " AND name = " +
                         Q(f[1]) + " AND lane = 'nccl proxy ctrl' AND tag = " + f[2]),
                  1);
      }
    }
    EXPECT_EQ(colls, 6);
    // Nothing beyond what was emitted (the PXN op is the one extra ProxySend).
    EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE rank = " + r +
                     " AND name IN ('AllReduce', 'Broadcast') AND kind = 'instant'"),
              colls);
    EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE rank = " + r +
                     " AND name IN ('ProxySend', 'ProxyRecv')"),
              proxies + 1);
    EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE rank = " + r +
                     " AND name IN ('ProxyStepSend', 'ProxyStepRecv')"),
              steps);
    EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE rank = " + r + " AND lane LIKE " +
                     Q(lp + " ch% kernel")),
              kernels);
    EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE rank = " + r +
                     " AND name = 'Group' AND lane = " + Q(lp + " groups") + " AND kind = 'span'"),
              colls + 1);
    EXPECT_EQ(db.Int("SELECT CAST(value AS INTEGER) FROM events WHERE rank = " + r +
                     " AND name = 'nccl.dropped_events'"),
              0);
    if (version == 5) {
      // API events on the calling thread, nested as the application called them.
      EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE rank = " + r +
                       " AND name = 'ncclGroup' AND depth = 0 AND lane IS NULL"),
                colls + 1);
      EXPECT_EQ(db.Int("SELECT count(*) FROM events c JOIN events p ON p.id = c.parent WHERE "
                       "c.rank = " +
                       r +
                       " AND c.name IN ('ncclAllReduce', 'ncclBroadcast') AND "
                       "p.name = 'ncclGroup' AND c.comm = " +
                       comm),
                colls);
      EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE rank = " + r +
                       " AND name = 'ncclBroadcast' AND peer = 1 AND bytes = 12288"),
                1);
      EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE rank = " + r +
                       " AND name = 'ncclSend' AND bytes = 2400"),
                1);
      EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE rank = " + r +
                       " AND name = 'ncclKernelLaunch' AND depth = 1"),
                colls);
    } else {
      EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE rank = " + r +
                       " AND name LIKE 'nccl%'"
                       " AND lane IS NULL AND kind = 'span'"),
                0);
    }
  }
  // One collective is matched across ranks by (comm, seq).
  EXPECT_EQ(db.Int("SELECT count(*) FROM (SELECT seq FROM events WHERE kind = 'instant' AND "
                   "name IN ('AllReduce', 'Broadcast') GROUP BY comm, seq "
                   "HAVING count(DISTINCT rank) = 2)"),
            6);
  // Every span nests properly on its track; nothing unmatched.
  EXPECT_EQ(db.Int("SELECT coalesce(sum(value), 0) FROM stats WHERE name IN "
                   "('improper_nesting', 'unmatched_end', 'negative_duration')"),
            0);

  // GPU times mapped onto the host clock keep causality: every kernel channel lies after its
  // collective was issued and before the next one was (the harness reports each in between).
  EXPECT_EQ(
      db.Int("SELECT count(*) FROM events k JOIN events c ON c.rank = k.rank AND "
             "c.flow = k.flow AND c.kind = 'instant' WHERE k.lane LIKE 'nccl dp r_ ch% kernel' "
             "AND (k.ts < c.ts OR k.end_ts > coalesce((SELECT min(n.ts) FROM events n "
             "WHERE n.rank = c.rank AND n.kind = 'instant' AND n.lane = c.lane AND "
             "n.ts > c.ts), k.end_ts))"),
      0);

  // The views: one row per task and rank, completed by its last kernel channel (collectives)
  // or at issue when nothing followed it (the send, which had no proxy op here).
  EXPECT_EQ(db.Int("SELECT count(*) FROM nccl_ops"), 14);
  EXPECT_EQ(db.Int("SELECT count(*) FROM nccl_ops WHERE completion = 'kernel' AND "
                   "datatype = 'float32' AND channels = 2 AND warps = 16 AND "
                   "((seq % 2 = 0 AND algo = 'RING' AND proto = 'LL128') OR "
                   "(seq % 2 = 1 AND algo = 'TREE' AND proto = 'SIMPLE'))"),
            12);
  EXPECT_EQ(db.Int("SELECT count(*) FROM nccl_ops WHERE name = 'Send' AND completion = 'enqueue' "
                   "AND dur_ns = 0 AND datatype = 'int64'"),
            2);
  // Completion is the latest end among the task's proxy ops and kernel channels.
  EXPECT_EQ(db.Int("SELECT count(*) FROM nccl_ops o WHERE o.completion = 'kernel' AND o.end_ts = "
                   "(SELECT max(e.ts + e.dur) FROM events e WHERE e.rank = o.rank AND "
                   "e.seq = o.seq AND e.comm = o.comm AND e.kind = 'span' AND e.lane LIKE "
                   "'nccl dp r_ ch%')"),
            12);
  EXPECT_EQ(db.Int("SELECT sum(instances) FROM nccl_collectives WHERE name = 'AllReduce'"), 8);
  EXPECT_EQ(db.Int("SELECT sum(total_bytes) FROM nccl_collectives WHERE name = 'Broadcast' "
                   "AND rank = 0"),
            (3 + 6) * 1024 * 4);
  EXPECT_EQ(db.Int("SELECT count(*) FROM gpu_step_time WHERE nccl_ns > 0 AND kernel_ns = 0 AND "
                   "overlap_ns = 0"),
            12);
}

INSTANTIATE_TEST_SUITE_P(Versions, NcclPluginTest, ::testing::Values(5, 4, 3),
                         [](const auto& info) { return "v" + std::to_string(info.param); });

TEST(NcclPlugin, MaskFromEnvironment) {
  TempDir tmp;
  const std::string f = tmp.Sub("facts");
  std::string err;
  ASSERT_EQ(Harness(tmp.Sub("trace"), 5, f, 0, 1, "full", "TRACEDB_NCCL_EVENTS=coll,proxyop", &err),
            0)
      << err;
  bool seen = false;
  for (const auto& line : ReadFacts(f)) {
    if (line[0] == "mask") {
      EXPECT_EQ(std::stoi(line[1]), nccl::kColl | nccl::kProxyOp);
      seen = true;
    }
  }
  EXPECT_TRUE(seen);
}

TEST(NcclPlugin, BadMaskDisablesThePluginWithAClearMessage) {
  TempDir tmp;
  const std::string f = tmp.Sub("facts");
  std::string err;
  ASSERT_EQ(Harness(tmp.Sub("trace"), 4, f, 0, 1, "full", "TRACEDB_NCCL_EVENTS=coll,kernels", &err),
            0);
  EXPECT_NE(err.find("unknown event 'kernels'"), std::string::npos) << err;
  bool failed = false;
  for (const auto& line : ReadFacts(f)) {
    if (line[0] == "init") failed = line[1] != "0";
  }
  EXPECT_TRUE(failed);
}

TEST(NcclPlugin, FullPoolGivesNullHandlesAndCountsEveryDrop) {
  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  const std::string f = tmp.Sub("facts");
  std::string err;
  ASSERT_EQ(Harness(trace, 5, f, 0, 1, "pool", "TRACEDB_NCCL_POOL=16", &err), 0) << err;
  int handles = -1, dropped = -1;
  for (const auto& line : ReadFacts(f)) {
    if (line[0] == "handles") handles = std::stoi(line[1]);
    if (line[0] == "dropped") dropped = std::stoi(line[1]);
  }
  EXPECT_EQ(handles, 16);
  EXPECT_EQ(dropped, 24);
  const std::string dbpath = tmp.Sub("job.tdb");
  ASSERT_EQ(Compact(trace, dbpath), 0);
  Db db(dbpath);
  EXPECT_EQ(db.Int("SELECT CAST(value AS INTEGER) FROM events WHERE name = 'nccl.dropped_events'"),
            dropped);
  EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE name = 'ProxyCtrl'"), handles);
}

TEST(NcclPlugin, ConcurrentProxyThreadsRecordedPlusDroppedEqualsStarted) {
  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  const std::string f = tmp.Sub("facts");
  std::string err;
  ASSERT_EQ(Harness(trace, 5, f, 0, 1, "stress", "TRACEDB_NCCL_POOL=64", &err), 0) << err;
  std::map<std::string, long> n;
  for (const auto& line : ReadFacts(f)) {
    if (line.size() == 2 && line[0] != "name") n[line[0]] = std::stol(line[1]);
  }
  ASSERT_EQ(n["recorded"] + n["refused"], n["started"]);
  EXPECT_GT(n["refused"], 0);  // 80 in flight > 64 slots
  EXPECT_EQ(n["recorder_dropped"], 0);
  const std::string dbpath = tmp.Sub("job.tdb");
  ASSERT_EQ(Compact(trace, dbpath), 0);
  Db db(dbpath);
  EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE name = 'ProxySend'"), n["recorded"]);
  EXPECT_EQ(db.Int("SELECT CAST(value AS INTEGER) FROM events WHERE name = 'nccl.dropped_events'"),
            n["refused"]);
  // Each thread's channel: at most 8 rows, whatever was in flight (the rest share the last).
  EXPECT_EQ(db.Int("SELECT count(*) FROM (SELECT tag & 255 AS ch, count(DISTINCT lane) AS rows "
                   "FROM events WHERE name = 'ProxySend' GROUP BY ch HAVING rows > 8)"),
            0);
}

TEST(NcclPlugin, StepWindowSwitchesTheMask) {
  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  const std::string f = tmp.Sub("facts");
  std::string err;
  ASSERT_EQ(Harness(trace, 5, f, 0, 1, "window", "TRACEDB_START_STEP=2 TRACEDB_END_STEP=3", &err),
            0)
      << err;
  int rows = 0;
  for (const auto& line : ReadFacts(f)) {
    if (line[0] != "window") continue;
    ++rows;
    const int step = std::stoi(line[1]);
    const bool inside = step >= 2 && step <= 3;
    EXPECT_EQ(std::stoi(line[2]),
              inside ? nccl::kDefaultEventMask : (nccl::kGroup | nccl::kGroupApi))
        << "step " << step;
    EXPECT_EQ(line[3], inside ? "1" : "0") << "step " << step;
  }
  EXPECT_EQ(rows, 5);
  const std::string dbpath = tmp.Sub("job.tdb");
  ASSERT_EQ(Compact(trace, dbpath), 0);
  Db db(dbpath);
  EXPECT_EQ(db.Int("SELECT group_concat(seq) FROM (SELECT seq FROM events WHERE name = "
                   "'AllReduce' ORDER BY seq)") == -999,
            false);
  EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE name = 'AllReduce'"), 2);
  EXPECT_EQ(db.Int("SELECT min(seq) * 10 + max(seq) FROM events WHERE name = 'AllReduce'"), 23);
}

class NcclHostileTest : public ::testing::TestWithParam<int> {};

TEST_P(NcclHostileTest, BadDescriptorsNeverCrashAndAreRecordedSafely) {
  const int version = GetParam();
  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  const std::string f = tmp.Sub("facts");
  std::string err;
  ASSERT_EQ(Harness(trace, version, f, 0, 1, "hostile", "", &err), 0) << err;
  std::map<std::string, int> facts;
  for (const auto& line : ReadFacts(f)) {
    if (line.size() == 2 && line[0].rfind("hostile_", 0) == 0) facts[line[0]] = std::stoi(line[1]);
  }
  EXPECT_EQ(facts["hostile_unknown_type_handle"], 0);
  if (version == 5) {
    EXPECT_EQ(facts.count("hostile_null_descr_handle"), 1u);
    EXPECT_EQ(facts["hostile_null_descr_handle"], 0);
  }
  const std::string dbpath = tmp.Sub("job.tdb");
  ASSERT_EQ(Compact(trace, dbpath), 0);
  Db db(dbpath);
  // Null strings: the task is named "unknown", its datatype unknown, so no byte count.
  EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE name = 'unknown' AND kind = 'instant' AND "
                   "bytes = 0 AND tag = 0 AND seq = 0"),
            1);
  // Channel 200 is clamped to the last lane; the misaligned parent is not followed; the
  // misaligned stop was ignored, the real one recorded once.
  EXPECT_EQ(
      db.Int("SELECT count(*) FROM events WHERE name = 'ProxySend' AND lane LIKE '% ch63 send' "
             "AND flow IS NULL AND seq IS NULL"),
      1);
  EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE name = 'ProxySend'"), 1);
  if (version >= 4) {
    // Timers that run backwards: host-timed (no GPU flag), never a negative duration.
    EXPECT_EQ(db.Int("SELECT count(*) FROM events WHERE lane LIKE '% ch3 kernel' AND "
                     "(tag >> 8 & 1) = 0 AND dur >= 0"),
              1);
  }
  EXPECT_EQ(db.Int("SELECT coalesce(sum(value), 0) FROM stats WHERE name IN "
                   "('improper_nesting', 'unmatched_end', 'negative_duration')"),
            0);
}

INSTANTIATE_TEST_SUITE_P(Versions, NcclHostileTest, ::testing::Values(5, 4, 3),
                         [](const auto& info) { return "v" + std::to_string(info.param); });

TEST(NcclEventMask, Parsing) {
  int mask = 0;
  std::string err;
  EXPECT_TRUE(nccl::ParseEventMask("", &mask, &err));
  EXPECT_EQ(mask, nccl::kDefaultEventMask);
  EXPECT_TRUE(nccl::ParseEventMask("0x12", &mask, &err));
  EXPECT_EQ(mask, 0x12);
  EXPECT_TRUE(nccl::ParseEventMask(" Coll + ProxyStep ,kernelch", &mask, &err));
  EXPECT_EQ(mask, nccl::kColl | nccl::kProxyStep | nccl::kKernelCh);
  EXPECT_TRUE(nccl::ParseEventMask("default,proxyctrl", &mask, &err));
  EXPECT_EQ(mask, nccl::kDefaultEventMask | nccl::kProxyCtrl);
  EXPECT_TRUE(nccl::ParseEventMask("all", &mask, &err));
  EXPECT_EQ(mask, 0xfff);
  EXPECT_FALSE(nccl::ParseEventMask("coll,nope", &mask, &err));
  EXPECT_NE(err.find("'nope'"), std::string::npos);
  EXPECT_FALSE(nccl::ParseEventMask("12x", &mask, &err));
  EXPECT_FALSE(nccl::ParseEventMask("-1", &mask, &err));
}

TEST(NcclEventMask, Codes) {
  EXPECT_EQ(nccl::DatatypeCode("ncclFloat32"), 8u);
  EXPECT_EQ(nccl::DatatypeSize(8), 4u);
  EXPECT_EQ(nccl::DatatypeCode("ncclBfloat16"), 10u);
  EXPECT_EQ(nccl::DatatypeSize(10), 2u);
  EXPECT_EQ(nccl::DatatypeCode("ncclInt64"), 5u);
  EXPECT_EQ(nccl::DatatypeSize(5), 8u);
  EXPECT_EQ(nccl::DatatypeCode("float"), 0u);
  EXPECT_EQ(nccl::DatatypeCode(nullptr), 0u);
  EXPECT_EQ(nccl::AlgoCode("RING"), 2u);
  EXPECT_EQ(nccl::AlgoCode("Ring"), 2u);
  EXPECT_EQ(nccl::AlgoCode("COLLNET_DIRECT"), 3u);
  EXPECT_EQ(nccl::AlgoCode("NVLS_TREE"), 6u);
  EXPECT_EQ(nccl::ProtoCode("SIMPLE"), 3u);
  EXPECT_EQ(nccl::ProtoCode("LL128"), 2u);
  EXPECT_EQ(nccl::PackTaskTag(8, 2, 2, 2, 16), 8 | 2 << 8 | 2 << 12 | 2 << 16 | 16 << 24);
  EXPECT_GE(nccl::PackTaskTag(255, 15, 15, 255, 1000), 0);
}

}  // namespace
}  // namespace tracedb::testing
