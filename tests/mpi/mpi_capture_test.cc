// End-to-end tests of the MPI interposer (libtracedb_mpi.so) with real mpirun: MPI programs that
// never call tracedb (mpi_workload.c, mpi_threads.c) run with and without
// LD_PRELOAD=libtracedb_mpi.so, and what the recorder wrote is read back with the engine's
// segment reader and checked against what the programs say they did.
//
// Each suite runs its mpirun jobs once, in SetUpTestSuite; CTest runs one suite per test.
// Environment (set by tests/mpi/CMakeLists.txt): MPIEXEC, TRACEDB_MPI_LIB, MPI_WORKLOAD,
// MPI_THREADS, TRACEDB_TEST_TMP.
// Thread safety: single-threaded test.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/segment/segment_format.h"
#include "tests/test_util.h"

namespace tracedb {
namespace {

using engine::CommInfo;
using engine::EventArgs;
using engine::SyncPoint;
using testing::ReadEvent;

constexpr uint8_t kCatMpi = 4;
constexpr uint32_t kUnknownComm = 1;
const char* const kStartEndpoint = "mpi_request_start";
const char* const kDoneEndpoint = "mpi_request_complete";

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct Job {
  int exit_code = -1;
  std::string out;  // the program's stdout
  std::string err;
};

// Runs `argv` on `ranks` ranks with mpirun; `env` is exported to the ranks only (not to mpirun
// itself, so that the launcher is neither preloaded nor recorded).
Job RunMpi(int ranks, const std::vector<std::string>& env, const std::vector<std::string>& argv,
           const std::string& scratch) {
  std::string cmd = ShellQuote(Env("MPIEXEC")) + " --oversubscribe";
  if (geteuid() == 0) cmd += " --allow-run-as-root";
  cmd += " -np " + std::to_string(ranks);
  for (const std::string& e : env) cmd += " -x " + ShellQuote(e);
  for (const std::string& a : argv) cmd += " " + ShellQuote(a);
  const std::string out = scratch + ".out", err = scratch + ".err";
  cmd += " >" + ShellQuote(out) + " 2>" + ShellQuote(err);
  const int status = std::system(cmd.c_str());
  Job job;
  job.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  job.out = Slurp(out);
  job.err = Slurp(err);
  return job;
}

// A blocking call is recorded as a begin at entry and an end at exit (an end's fields replace
// the begin's); the checks below want one event per call. Folds each begin/end pair of a thread
// into the complete event it stands for, at the end's place in the file (where the recorder
// wrote a complete event before). A begin left open stays a begin (and fails the kind checks).
void FoldBeginEnd(std::vector<ReadEvent>* events) {
  std::map<std::pair<uint32_t, uint32_t>, std::vector<size_t>> open;  // (pid, thread) -> begins
  std::vector<bool> drop(events->size(), false);
  for (size_t i = 0; i < events->size(); ++i) {
    ReadEvent& e = (*events)[i];
    if (e.e.kind == engine::EventKind::kBegin) {
      open[{e.pid, e.thread}].push_back(i);
    } else if (e.e.kind == engine::EventKind::kEnd) {
      auto& stack = open[{e.pid, e.thread}];
      if (stack.empty()) continue;
      const ReadEvent& b = (*events)[stack.back()];
      drop[stack.back()] = true;
      stack.pop_back();
      EventArgs args = b.e.args;
      const EventArgs& end = e.e.args;
      if (end.mask & EventArgs::kBytes) args.bytes = end.bytes;
      if (end.mask & EventArgs::kPeer) args.peer = end.peer;
      if (end.mask & EventArgs::kTag) args.tag = end.tag;
      if (end.mask & EventArgs::kComm) args.comm = end.comm;
      if (end.mask & EventArgs::kSeq) args.seq = end.seq;
      if (end.mask & EventArgs::kFlow) args.flow = end.flow;
      args.mask |= end.mask;
      const int64_t end_ts = e.e.ts;
      e.name = b.name;
      e.e = b.e;
      e.e.kind = engine::EventKind::kComplete;
      e.e.ival = end_ts - b.e.ts;
      e.e.args = args;
      e.e.has_args = args.mask != 0;
    }
  }
  size_t out = 0;
  for (size_t i = 0; i < events->size(); ++i) {
    if (drop[i]) continue;
    if (out != i) (*events)[out] = std::move((*events)[i]);  // (a self-move empties strings)
    ++out;
  }
  events->resize(out);
}

// What one rank recorded.
struct RankTrace {
  std::vector<ReadEvent> events;  // in file order
  std::vector<SyncPoint> sync;
  std::map<uint32_t, CommInfo> comms;  // by id
  std::set<uint32_t> threads;
};

std::map<int, RankTrace> LoadTrace(const std::string& dir, int ranks) {
  std::map<int, RankTrace> out;
  for (int r = 0; r < ranks; ++r) {
    const std::string rank_dir = dir + "/rank-" + std::to_string(r);
    if (!std::filesystem::exists(rank_dir)) continue;
    testing::Collected c = testing::CollectDir(rank_dir);
    RankTrace& t = out[r];
    t.events = std::move(c.events);
    FoldBeginEnd(&t.events);
    t.sync = std::move(c.sync);
    for (const CommInfo& ci : c.comms) {
      auto [it, inserted] = t.comms.emplace(ci.comm, ci);
      EXPECT_TRUE(inserted || it->second == ci)
          << "rank " << r << ": comm " << ci.comm << " declared twice, differently";
    }
    for (const ReadEvent& e : t.events) t.threads.insert(e.thread);
    EXPECT_EQ(c.corrupt_blocks, 0u);
    EXPECT_EQ(c.dropped, 0u);
  }
  return out;
}

using Counts = std::map<std::string, std::pair<uint64_t, uint64_t>>;  // name -> (count, bytes)

Counts ReadExpected(const std::string& path) {
  Counts c;
  std::ifstream in(path);
  std::string name;
  uint64_t count, bytes;
  while (in >> name >> count >> bytes) c[name] = {count, bytes};
  EXPECT_FALSE(c.empty()) << "no expectations in " << path;
  return c;
}

Counts Recorded(const RankTrace& t) {
  Counts c;
  for (const ReadEvent& e : t.events) {
    auto& [count, bytes] = c[e.name];
    ++count;
    if (e.e.args.mask & EventArgs::kBytes) bytes += e.e.args.bytes;
  }
  return c;
}

// Every per-routine count and byte total equals what the program says it did.
void ExpectCountsEqual(const Counts& expected, const Counts& recorded, int rank) {
  for (const auto& [name, cb] : expected) {
    auto it = recorded.find(name);
    if (it == recorded.end()) {
      ADD_FAILURE() << "rank " << rank << ": " << name << " never recorded";
      continue;
    }
    EXPECT_EQ(it->second.first, cb.first) << "rank " << rank << ": count of " << name;
    EXPECT_EQ(it->second.second, cb.second) << "rank " << rank << ": bytes of " << name;
  }
  for (const auto& [name, cb] : recorded) {
    EXPECT_TRUE(expected.count(name))
        << "rank " << rank << ": unexpected " << name << " x" << cb.first;
  }
}

bool Has(const ReadEvent& e, uint32_t field) { return (e.e.args.mask & field) != 0; }

// Routines that start a nonblocking operation (MPI_Startall only when it starts one request).
bool IsInitiator(const std::string& name) {
  static const std::set<std::string> kNames = {
      "MPI_Start", "MPI_Startall", kStartEndpoint,    "MPI_Comm_idup",
      "MPI_Rput",  "MPI_Rget",     "MPI_Raccumulate", "MPI_Rget_accumulate"};
  static const std::set<std::string> kNotI = {
      "MPI_Iprobe",      "MPI_Improbe",          "MPI_Init",
      "MPI_Init_thread", "MPI_Intercomm_create", "MPI_Intercomm_merge"};
  return kNames.count(name) || (name.rfind("MPI_I", 0) == 0 && !kNotI.count(name));
}

// Operations the program started, by its own count: each must have a flow of its own.
uint64_t StartedOperations(const Counts& expected) {
  uint64_t n = 0;
  for (const auto& [name, cb] : expected) {
    if (IsInitiator(name) && name != "MPI_Startall") n += cb.first;
  }
  return n;
}

// Entries whose counts do not depend on how often a polling loop ran.
Counts Deterministic(const Counts& c) {
  Counts out;
  for (const auto& [name, cb] : c) {
    if (name.find("Test") != std::string::npos || name.find("probe") != std::string::npos ||
        name.find("some") != std::string::npos || name == "MPI_Win_test" || name == kDoneEndpoint) {
      continue;
    }
    out[name] = cb;
  }
  return out;
}

bool IsCompletion(const std::string& name) {
  return name == kDoneEndpoint || name == "MPI_Request_free" || name.rfind("MPI_Wait", 0) == 0 ||
         name.rfind("MPI_Test", 0) == 0;
}

// Each flow id of a rank marks exactly one initiating event and one completing event, in that
// order, with the same communicator (and peer, when both have one). Returns the number of flows.
size_t ExpectFlowsPaired(const RankTrace& t, int rank) {
  std::map<uint64_t, std::vector<const ReadEvent*>> by_flow;
  for (const ReadEvent& e : t.events) {
    if (Has(e, EventArgs::kFlow)) by_flow[e.e.args.flow].push_back(&e);
  }
  for (const auto& [flow, evs] : by_flow) {
    if (evs.size() != 2) {
      ADD_FAILURE() << "rank " << rank << ": flow " << flow << " on " << evs.size()
                    << " events (first: " << evs[0]->name << ")";
      continue;
    }
    const ReadEvent* start = evs[0];
    const ReadEvent* done = evs[1];
    if (!IsInitiator(start->name) || start->e.ts > done->e.ts) std::swap(start, done);
    EXPECT_TRUE(IsInitiator(start->name))
        << "rank " << rank << ": flow " << flow << " starts at " << start->name;
    EXPECT_TRUE(IsCompletion(done->name))
        << "rank " << rank << ": flow " << flow << " ends at " << done->name;
    EXPECT_LE(start->e.ts, done->e.ts + done->e.ival) << "rank " << rank << ": flow " << flow;
    EXPECT_EQ(start->e.args.comm, done->e.args.comm) << "rank " << rank << ": flow " << flow;
    // A wildcard receive (MPI_ANY_SOURCE < 0) learns its source at completion.
    if (Has(*start, EventArgs::kPeer) && Has(*done, EventArgs::kPeer) && start->e.args.peer >= 0) {
      EXPECT_EQ(start->e.args.peer, done->e.args.peer) << "rank " << rank << ": flow " << flow;
    }
    if (Has(*start, EventArgs::kBytes) && Has(*done, EventArgs::kBytes)) {
      EXPECT_LE(done->e.args.bytes, start->e.args.bytes) << "rank " << rank << ": flow " << flow;
    }
  }
  return by_flow.size();
}

// Communicators are declared identically by all their members, ids follow the documented
// scheme, and every collective was recorded by every member of its communicator with the same
// (comm, seq) and name.
void ExpectCollectivesMatch(const std::map<int, RankTrace>& traces, int world_size) {
  std::map<uint32_t, CommInfo> comms;
  std::map<uint32_t, std::set<int>> declared_by;
  for (const auto& [rank, t] : traces) {
    for (const auto& [id, ci] : t.comms) {
      declared_by[id].insert(rank);
      ASSERT_EQ(ci.members.size(), static_cast<size_t>(ci.size)) << "comm " << id;
      ASSERT_GE(ci.rank_in_comm, 0);
      ASSERT_LT(ci.rank_in_comm, ci.size);
      EXPECT_EQ(ci.members[ci.rank_in_comm], rank) << "comm " << id;
      auto [it, inserted] = comms.emplace(id, ci);
      if (!inserted) {
        EXPECT_EQ(it->second.members, ci.members) << "comm " << id << " differs on rank " << rank;
      }
    }
  }
  for (const auto& [id, ci] : comms) {
    std::set<int> members(ci.members.begin(), ci.members.end());
    EXPECT_EQ(declared_by[id], members) << "comm " << id << " declared by other ranks";
    // docs/mpi-capture.md: id = 2 + counter * W + smallest member (WORLD = 0).
    const int leader = *members.begin();
    if (id == 0) {
      EXPECT_EQ(static_cast<int>(members.size()), world_size);
    } else {
      EXPECT_GE(id, 2u + leader);
      EXPECT_EQ((id - 2 - leader) % world_size, 0u) << "comm " << id << " leader " << leader;
    }
  }

  std::map<std::pair<uint32_t, uint64_t>, std::map<int, std::string>> by_key;
  for (const auto& [rank, t] : traces) {
    std::map<uint32_t, std::set<uint64_t>> seqs;
    for (const ReadEvent& e : t.events) {
      if (Has(e, EventArgs::kComm)) {
        EXPECT_NE(e.e.args.comm, kUnknownComm) << "rank " << rank << ": " << e.name;
        EXPECT_TRUE(t.comms.count(e.e.args.comm))
            << "rank " << rank << ": " << e.name << " on undeclared comm " << e.e.args.comm;
      }
      if (!Has(e, EventArgs::kSeq)) continue;
      EXPECT_TRUE(Has(e, EventArgs::kComm)) << e.name;
      auto& names = by_key[{e.e.args.comm, e.e.args.seq}];
      EXPECT_TRUE(names.emplace(rank, e.name).second)
          << "rank " << rank << ": two events with comm " << e.e.args.comm << " seq "
          << e.e.args.seq;
      seqs[e.e.args.comm].insert(e.e.args.seq);
    }
    for (const auto& [comm, s] : seqs) {  // 0, 1, 2, … without gaps
      EXPECT_EQ(*s.rbegin() + 1, s.size()) << "rank " << rank << ": gaps in seq of comm " << comm;
    }
  }
  for (const auto& [key, names] : by_key) {
    const auto it = comms.find(key.first);
    ASSERT_NE(it, comms.end());
    std::set<int> ranks;
    for (const auto& [rank, name] : names) {
      ranks.insert(rank);
      EXPECT_EQ(name, names.begin()->second)
          << "comm " << key.first << " seq " << key.second << ": rank " << rank;
    }
    const std::set<int> members(it->second.members.begin(), it->second.members.end());
    EXPECT_EQ(ranks, members) << names.begin()->second << " comm " << key.first << " seq "
                              << key.second;
  }
  EXPECT_GT(by_key.size(), 50u);
}

// The recorder clock of the jobs whose sync points ExpectClockSync checks. With the CPU counter
// (the default) each process converts it to ns by a rate it calibrated itself over 10 ms, and
// two processes' clocks then drift apart by a few ppm: a true offset between them, which the
// sync measures (and compaction removes through the anchors, docs/database-format.md), of
// hundreds of ns by MPI_Finalize; a 2-rank job measured 508 ns with an uncertainty of 453.
// CLOCK_MONOTONIC is one clock for every process of the host, so there the offset is the
// sync's measurement error alone, which a min-RTT ping-pong bounds.
const char* const kOneClock = "TRACEDB_CLOCK=monotonic";

// Two sync points per rank (MPI_Init and MPI_Finalize) against rank 0, around every MPI event
// recorded after MPI_Init and before MPI_Finalize. The job ran with kOneClock.
void ExpectClockSync(const std::map<int, RankTrace>& traces) {
  for (const auto& [rank, t] : traces) {
    ASSERT_EQ(t.sync.size(), 2u) << "rank " << rank;
    for (const SyncPoint& p : t.sync) {
      EXPECT_EQ(p.ref_rank, 0);
      if (rank == 0) {
        EXPECT_EQ(p.offset_ns, 0);
        EXPECT_EQ(p.uncertainty_ns, 0);
      } else {
        EXPECT_GT(p.uncertainty_ns, 0) << "rank " << rank;
        // One host, one clock (kOneClock): the true offset is 0, and a min-RTT ping-pong bounds
        // the measured one by half the round trip, which is the stored uncertainty (composed
        // through a node leader, the sum of both). That holds whatever the load; the round trip
        // itself does not (ranks busy-polling on two busy cores took up to 12 ms), so its
        // bound is only a sanity bound.
        EXPECT_LE(std::abs(p.offset_ns), p.uncertainty_ns) << "rank " << rank;
        EXPECT_LT(p.uncertainty_ns, 1000000000) << "rank " << rank;
      }
    }
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (const ReadEvent& e : t.events) {
      if (e.name == "MPI_Init" || e.name == "MPI_Init_thread" || e.name == "MPI_Finalize") {
        continue;
      }
      first = std::min(first, e.e.ts);
      last = std::max(last, e.e.ts + e.e.ival);
    }
    EXPECT_LE(t.sync[0].local_ns, first) << "rank " << rank;
    EXPECT_GE(t.sync[1].local_ns, last) << "rank " << rank;
  }
}

void ExpectAllMpiSpans(const std::map<int, RankTrace>& traces) {
  for (const auto& [rank, t] : traces) {
    for (const ReadEvent& e : t.events) {
      EXPECT_EQ(e.e.kind, engine::EventKind::kComplete) << e.name;
      EXPECT_EQ(e.e.cat, kCatMpi) << e.name;
      EXPECT_TRUE(e.lane.empty()) << e.name;
      EXPECT_GE(e.e.ival, 0) << e.name;
      if (e.name == kStartEndpoint || e.name == kDoneEndpoint) {
        EXPECT_EQ(e.e.ival, 0);
        EXPECT_TRUE(Has(e, EventArgs::kFlow));
      } else {
        EXPECT_EQ(e.name.rfind("MPI_", 0), 0u) << e.name;
      }
    }
  }
}

std::string Scratch(const std::string& name) {
  std::string base = Env("TRACEDB_TEST_TMP");
  if (base.empty()) base = "/tmp/tracedb-test";
  const std::string dir = base + "/mpi-" + name + "-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// ---------------------------------------------------------------------------------------------
// mpi_workload on 4 ranks: plain, preloaded without TRACEDB_DIR, recorded, recorded by rank 1
// only; the exit code and stdout of all of them must be the same. (Runs that check traces exit
// with 0: after a rank exits with another code, mpirun kills the others.)

class MpiWorkload : public ::testing::Test {
 protected:
  static constexpr int kRanks = 4;
  static constexpr int kExitCode = 3;

  static void SetUpTestSuite() {
    unsetenv("TRACEDB_DIR");
    unsetenv("LD_PRELOAD");
    dir_ = new std::string(Scratch("workload"));
    const std::string& d = *dir_;
    const std::string lib = Env("TRACEDB_MPI_LIB"), prog = Env("MPI_WORKLOAD");
    const std::string code = std::to_string(kExitCode);
    for (const char* sub : {"expect-plain", "expect-traced", "expect-partial"}) {
      std::filesystem::create_directories(d + "/" + sub);
    }
    plain_ = new Job(RunMpi(kRanks, {}, {prog, d + "/expect-plain", code}, d + "/plain"));
    passthrough_ = new Job(RunMpi(kRanks, {"LD_PRELOAD=" + lib}, {prog, "-", code}, d + "/pass"));
    traced_exit_ = new Job(RunMpi(kRanks, {"LD_PRELOAD=" + lib, "TRACEDB_DIR=" + d + "/trace3"},
                                  {prog, "-", code}, d + "/traced3"));
    traced_ =
        new Job(RunMpi(kRanks, {"LD_PRELOAD=" + lib, "TRACEDB_DIR=" + d + "/trace", kOneClock},
                       {prog, d + "/expect-traced", "0"}, d + "/traced"));
    // Only rank 1 records: every rank must still agree on communicator ids (no hang).
    partial_ =
        new Job(RunMpi(kRanks, {"LD_PRELOAD=" + lib},
                       {"sh", "-c",
                        "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then export TRACEDB_DIR=" + d +
                            "/partial; fi; exec \"$0\" \"$@\"",
                        prog, d + "/expect-partial", "0"},
                       d + "/partial"));
    traces_ = new std::map<int, RankTrace>(LoadTrace(d + "/trace", kRanks));
  }
  static void TearDownTestSuite() {
    if (std::getenv("TRACEDB_KEEP_TMP") == nullptr) std::filesystem::remove_all(*dir_);
    delete dir_;
    delete plain_;
    delete passthrough_;
    delete traced_exit_;
    delete traced_;
    delete partial_;
    delete traces_;
  }
  static std::string* dir_;
  static Job* plain_;
  static Job* passthrough_;
  static Job* traced_exit_;
  static Job* traced_;
  static Job* partial_;
  static std::map<int, RankTrace>* traces_;
};
std::string* MpiWorkload::dir_;
Job* MpiWorkload::plain_;
Job* MpiWorkload::passthrough_;
Job* MpiWorkload::traced_exit_;
Job* MpiWorkload::traced_;
Job* MpiWorkload::partial_;
std::map<int, RankTrace>* MpiWorkload::traces_;

TEST_F(MpiWorkload, OutputAndExitCodeUnchanged) {
  EXPECT_EQ(plain_->exit_code, kExitCode) << plain_->err;
  EXPECT_NE(plain_->out.find("errors 0"), std::string::npos) << plain_->out;
  for (const Job* job : {passthrough_, traced_exit_}) {
    EXPECT_EQ(job->exit_code, kExitCode) << job->err;
    EXPECT_EQ(job->out, plain_->out);
  }
  for (const Job* job : {traced_, partial_}) {
    EXPECT_EQ(job->exit_code, 0) << job->err;
    EXPECT_EQ(job->out, plain_->out);
  }
  // The interposer is silent: nothing on stderr when the program exits with 0.
  EXPECT_EQ(traced_->err, "");
  // Pass-through wrote no trace; the recorded run with exit code 3 did.
  EXPECT_TRUE(std::filesystem::exists(*dir_ + "/trace3/rank-0"));
  // The program's own bookkeeping does not depend on the interposer either.
  for (int r = 0; r < kRanks; ++r) {
    const std::string name = "/expected-" + std::to_string(r) + ".txt";
    EXPECT_EQ(Deterministic(ReadExpected(*dir_ + "/expect-plain" + name)),
              Deterministic(ReadExpected(*dir_ + "/expect-traced" + name)));
  }
}

TEST_F(MpiWorkload, EveryRoutineCountedWithItsBytes) {
  ASSERT_EQ(traces_->size(), static_cast<size_t>(kRanks));
  for (const auto& [rank, t] : *traces_) {
    const Counts expected =
        ReadExpected(*dir_ + "/expect-traced/expected-" + std::to_string(rank) + ".txt");
    EXPECT_GT(expected.size(), 100u);  // the routine families the workload covers
    ExpectCountsEqual(expected, Recorded(t), rank);
  }
}

TEST_F(MpiWorkload, EveryEventIsAnMpiSpan) { ExpectAllMpiSpans(*traces_); }

TEST_F(MpiWorkload, CollectivesMatchAcrossRanks) { ExpectCollectivesMatch(*traces_, kRanks); }

TEST_F(MpiWorkload, NonblockingStartAndCompletionShareAFlow) {
  for (const auto& [rank, t] : *traces_) {
    const Counts expected =
        ReadExpected(*dir_ + "/expect-traced/expected-" + std::to_string(rank) + ".txt");
    EXPECT_GT(StartedOperations(expected), 60u);
    EXPECT_EQ(ExpectFlowsPaired(t, rank), StartedOperations(expected)) << "rank " << rank;
  }
}

TEST_F(MpiWorkload, ReceivesReportActualSourceTagAndBytes) {
  for (const auto& [rank, t] : *traces_) {
    const int left = (rank - 1 + kRanks) % kRanks, right = (rank + 1) % kRanks;
    int wildcard = 0;
    for (const ReadEvent& e : t.events) {
      if (e.name != "MPI_Recv") continue;
      ASSERT_TRUE(Has(e, EventArgs::kPeer) && Has(e, EventArgs::kTag) && Has(e, EventArgs::kBytes));
      EXPECT_EQ(e.e.args.peer, left);   // every receive of the workload comes from the left
      if (e.e.args.tag == 20 + left) {  // the MPI_ANY_SOURCE/MPI_ANY_TAG receive
        ++wildcard;
        EXPECT_EQ(e.e.args.bytes, 4u * (3 + left));
      }
    }
    EXPECT_EQ(wildcard, 1) << "rank " << rank;
    // The wildcard MPI_Irecv: posted with MPI_ANY_SOURCE/MPI_ANY_TAG, completed by an MPI_Wait
    // that carries the same flow and the actual source, tag and size.
    int wildcard_waits = 0;
    for (const ReadEvent& start : t.events) {
      if (start.name != "MPI_Irecv" || start.e.args.peer >= 0) continue;
      for (const ReadEvent& done : t.events) {
        if (done.name != "MPI_Wait" || !Has(done, EventArgs::kFlow) ||
            done.e.args.flow != start.e.args.flow) {
          continue;
        }
        ++wildcard_waits;
        EXPECT_EQ(done.e.args.peer, left);
        EXPECT_EQ(done.e.args.tag, 130);
        EXPECT_EQ(done.e.args.bytes, 4u * (6 + left));
      }
    }
    EXPECT_EQ(wildcard_waits, 1) << "rank " << rank;
    int sends = 0;
    for (const ReadEvent& e : t.events) {
      if (e.name == "MPI_Send") {
        ++sends;
        EXPECT_EQ(e.e.args.peer, right);
        EXPECT_EQ(e.e.args.tag, 10);
        EXPECT_EQ(e.e.args.comm, 0u);
        EXPECT_FALSE(Has(e, EventArgs::kSeq));
      }
    }
    EXPECT_EQ(sends, 1);
  }
}

TEST_F(MpiWorkload, OneSidedAndNeighborhoodCallsRecorded) {
  for (const auto& [rank, t] : *traces_) {
    const int left = (rank - 1 + kRanks) % kRanks, right = (rank + 1) % kRanks;
    std::map<std::string, int> n;
    for (const ReadEvent& e : t.events) {
      const bool rma = e.name == "MPI_Put" || e.name == "MPI_Get" || e.name == "MPI_Accumulate" ||
                       e.name == "MPI_Fetch_and_op" || e.name == "MPI_Rput" ||
                       e.name == "MPI_Rget" || e.name == "MPI_Compare_and_swap";
      if (rma) {
        ++n["rma"];
        ASSERT_TRUE(Has(e, EventArgs::kComm) && Has(e, EventArgs::kPeer)) << e.name;
        EXPECT_TRUE(e.e.args.peer == left || e.e.args.peer == right) << e.name;
        const CommInfo& win = t.comms.at(e.e.args.comm);  // a window, declared like a comm
        EXPECT_NE(e.e.args.comm, 0u) << e.name;
        EXPECT_EQ(win.size, kRanks) << e.name;
      }
      if (e.name == "MPI_Win_fence") {
        ++n["fence"];
        EXPECT_TRUE(Has(e, EventArgs::kSeq));
      }
      if (e.name.rfind("MPI_Neighbor_", 0) == 0 || e.name.rfind("MPI_Ineighbor_", 0) == 0) {
        ++n["neighbor"];
        EXPECT_TRUE(Has(e, EventArgs::kSeq) && Has(e, EventArgs::kBytes)) << e.name;
        EXPECT_NE(e.e.args.comm, 0u);
      }
    }
    EXPECT_EQ(n["rma"], 11) << "rank " << rank;
    EXPECT_EQ(n["fence"], 11) << "rank " << rank;
    EXPECT_EQ(n["neighbor"], 14) << "rank " << rank;
  }
}

TEST_F(MpiWorkload, ClockSyncAtInitAndFinalize) { ExpectClockSync(*traces_); }

TEST_F(MpiWorkload, OnlyTheRecordingRankWritesAndItsIdsStillAgree) {
  const std::map<int, RankTrace> partial = LoadTrace(*dir_ + "/partial", kRanks);
  ASSERT_EQ(partial.size(), 1u);
  ASSERT_TRUE(partial.count(1));
  const RankTrace& t = partial.at(1);
  ExpectCountsEqual(ReadExpected(*dir_ + "/expect-partial/expected-1.txt"), Recorded(t), 1);
  // Same communicator ids and sequence numbers as in the fully recorded run.
  std::vector<std::tuple<std::string, uint32_t, uint64_t>> a, b;
  for (const ReadEvent& e : t.events) {
    if (Has(e, EventArgs::kSeq)) a.emplace_back(e.name, e.e.args.comm, e.e.args.seq);
  }
  for (const ReadEvent& e : traces_->at(1).events) {
    if (Has(e, EventArgs::kSeq)) b.emplace_back(e.name, e.e.args.comm, e.e.args.seq);
  }
  EXPECT_EQ(a, b);
  EXPECT_EQ(t.sync.size(), 2u);
}

// ---------------------------------------------------------------------------------------------
// mpi_threads: 2 ranks x 4 threads under MPI_THREAD_MULTIPLE.

class MpiThreads : public ::testing::Test {
 protected:
  static constexpr int kRanks = 2;
  static constexpr int kThreads = 4;
  static void SetUpTestSuite() {
    unsetenv("TRACEDB_DIR");
    unsetenv("LD_PRELOAD");
    dir_ = new std::string(Scratch("threads"));
    const std::string& d = *dir_;
    const std::string lib = Env("TRACEDB_MPI_LIB"), prog = Env("MPI_THREADS");
    std::filesystem::create_directories(d + "/expect");
    plain_ = new Job(RunMpi(kRanks, {}, {prog, "-", std::to_string(kThreads), "40"}, d + "/plain"));
    traced_ =
        new Job(RunMpi(kRanks, {"LD_PRELOAD=" + lib, "TRACEDB_DIR=" + d + "/trace", kOneClock},
                       {prog, d + "/expect", std::to_string(kThreads), "40"}, d + "/traced"));
    traces_ = new std::map<int, RankTrace>(LoadTrace(d + "/trace", kRanks));
  }
  static void TearDownTestSuite() {
    if (std::getenv("TRACEDB_KEEP_TMP") == nullptr) std::filesystem::remove_all(*dir_);
    delete dir_;
    delete plain_;
    delete traced_;
    delete traces_;
  }
  static std::string* dir_;
  static Job* plain_;
  static Job* traced_;
  static std::map<int, RankTrace>* traces_;
};
std::string* MpiThreads::dir_;
Job* MpiThreads::plain_;
Job* MpiThreads::traced_;
std::map<int, RankTrace>* MpiThreads::traces_;

TEST_F(MpiThreads, OutputAndExitCodeUnchanged) {
  EXPECT_EQ(plain_->exit_code, 0) << plain_->err;
  EXPECT_NE(plain_->out.find("errors 0"), std::string::npos) << plain_->out;
  EXPECT_EQ(traced_->exit_code, 0) << traced_->err;
  EXPECT_EQ(traced_->out, plain_->out);
}

TEST_F(MpiThreads, CountsFlowsAndCollectives) {
  ASSERT_EQ(traces_->size(), static_cast<size_t>(kRanks));
  for (const auto& [rank, t] : *traces_) {
    ExpectCountsEqual(ReadExpected(*dir_ + "/expect/expected-" + std::to_string(rank) + ".txt"),
                      Recorded(t), rank);
    EXPECT_GE(t.threads.size(), static_cast<size_t>(kThreads + 1));  // the workers and main
    EXPECT_EQ(ExpectFlowsPaired(t, rank), 3u * kThreads * 40);
  }
  ExpectCollectivesMatch(*traces_, kRanks);
  ExpectAllMpiSpans(*traces_);
  ExpectClockSync(*traces_);
}

// ---------------------------------------------------------------------------------------------
// Hierarchical clock sync: TRACEDB_MPI_SYNC_GROUP=2 makes {0,1} and {2,3} two "nodes"; rank 3
// then syncs through its node leader (rank 2) and adds rank 2's uncertainty to its own.

TEST(MpiClockSync, HierarchicalThroughNodeLeaders) {
  unsetenv("TRACEDB_DIR");
  const std::string d = Scratch("sync");
  const Job job = RunMpi(4,
                         {"LD_PRELOAD=" + Env("TRACEDB_MPI_LIB"), "TRACEDB_DIR=" + d + "/trace",
                          "TRACEDB_MPI_SYNC_GROUP=2", kOneClock},
                         {Env("MPI_THREADS"), "-", "1", "5"}, d + "/job");
  ASSERT_EQ(job.exit_code, 0) << job.err;
  const std::map<int, RankTrace> traces = LoadTrace(d + "/trace", 4);
  ASSERT_EQ(traces.size(), 4u);
  ExpectClockSync(traces);
  for (int i = 0; i < 2; ++i) {
    // Composed through rank 2: at least rank 2's own uncertainty plus a round trip of its own.
    EXPECT_GT(traces.at(3).sync[i].uncertainty_ns, traces.at(2).sync[i].uncertainty_ns);
  }
  if (std::getenv("TRACEDB_KEEP_TMP") == nullptr) std::filesystem::remove_all(d);
}

}  // namespace
}  // namespace tracedb
