// Automatic start: TRACEDB_DIR alone starts recording, with no call to tracedb_start, by every
// start path (the load-time constructor of a program linked with libtracedb; LD_PRELOAD of the
// library into /bin/true and into a program that knows nothing of tracedb) and with the rank
// taken from each launcher's variable, or none. Each case runs the program in a child process
// and checks its exit status, the rank-N directory it wrote, and the events read back twice:
// by the engine's segment reader and by `tracedb info --json`.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <cstdio>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "engine/segment/segment_writer.h"
#include "tests/test_util.h"

namespace tracedb {
namespace {

using testing::CollectDir;
using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;

enum class Mode { kLinked, kPreloadProgram, kPreloadTrue };

struct RankVar {
  const char* rank;  // nullptr: no rank variable at all
  const char* size;
};

// Every variable DetectRank reads, cleared in the child so that the case sees only its own.
const char* const kAllRankVars[] = {"TRACEDB_RANK",
                                    "TRACEDB_WORLD_SIZE",
                                    "TRACEDB_LOCAL_RANK",
                                    "OMPI_COMM_WORLD_RANK",
                                    "OMPI_COMM_WORLD_SIZE",
                                    "OMPI_COMM_WORLD_LOCAL_RANK",
                                    "PMIX_RANK",
                                    "SLURM_PROCID",
                                    "SLURM_NTASKS",
                                    "SLURM_LOCALID",
                                    "PMI_RANK",
                                    "PMI_SIZE",
                                    "MPI_LOCALRANKID",
                                    "RANK",
                                    "WORLD_SIZE",
                                    "LOCAL_RANK",
                                    "TRACEDB_DIR",
                                    "LD_PRELOAD",
                                    "TRACEDB_START_STEP",
                                    "TRACEDB_END_STEP",
                                    "TRACEDB_FOLLOW_FORK"};

const RankVar kRankVars[] = {
    {"TRACEDB_RANK", "TRACEDB_WORLD_SIZE"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"PMIX_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"SLURM_PROCID", "SLURM_NTASKS"},
    {"PMI_RANK", "PMI_SIZE"},
    {"RANK", "WORLD_SIZE"},
    {nullptr, nullptr},
};

constexpr long kEventsPerThread = 1000;  // x 3 events x 2 threads
constexpr int kRank = 5;
constexpr int kWorld = 8;

std::string CleanEnvPrefix() {
  std::string cmd = "env";
  for (const char* v : kAllRankVars) cmd += std::string(" -u ") + v;
  return cmd;
}

long JsonInt(const std::string& json, const std::string& key) {
  const std::string k = "\"" + key + "\": ";
  const size_t p = json.find(k);
  if (p == std::string::npos) return -1;
  return std::atol(json.c_str() + p + k.size());
}

struct Case {
  Mode mode;
  RankVar var;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << static_cast<int>(c.mode) << "/" << (c.var.rank ? c.var.rank : "none");
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  std::string m = info.param.mode == Mode::kLinked           ? "Linked"
                  : info.param.mode == Mode::kPreloadProgram ? "PreloadProgram"
                                                             : "PreloadTrue";
  return m + "_" + (info.param.var.rank ? info.param.var.rank : "NoRankVariable");
}

class AutoStartTest : public ::testing::TestWithParam<Case> {};

TEST_P(AutoStartTest, StartsWritesTheRankDirectoryAndEverything) {
  const Case& c = GetParam();
  TempDir tmp;
  const std::string dir = tmp.Sub("trace");
  std::string cmd = CleanEnvPrefix() + " TRACEDB_DIR=" + ShellQuote(dir);
  const int rank = c.var.rank ? kRank : 0;
  const int world = c.var.rank ? kWorld : 1;
  if (c.var.rank) {
    cmd += std::string(" ") + c.var.rank + "=" + std::to_string(kRank) + " " + c.var.size + "=" +
           std::to_string(kWorld);
  }
  if (c.mode != Mode::kLinked) cmd += " LD_PRELOAD=" + ShellQuote(TRACEDB_LIBRARY_PATH);
  if (c.mode == Mode::kLinked) cmd += " " + ShellQuote(AUTOSTART_LINKED_PATH);
  if (c.mode == Mode::kPreloadProgram) cmd += " " + ShellQuote(AUTOSTART_PLAIN_PATH);
  if (c.mode == Mode::kPreloadTrue) {
    cmd += " /bin/true";
  } else {
    cmd += " " + std::to_string(kEventsPerThread);
  }
  int rc = -1;
  const std::string out = RunCommand(cmd + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << cmd << "\n" << out;

  const long expected = c.mode == Mode::kPreloadTrue ? 0 : 2 * 3 * kEventsPerThread;
  if (c.mode != Mode::kPreloadTrue) {
    EXPECT_EQ(out, "enabled 1 rank " + std::to_string(rank) + " emitted " +
                       std::to_string(expected) + "\n");
  }

  // Exactly one directory, the rank's.
  std::vector<std::string> subdirs;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    subdirs.push_back(e.path().filename().string());
  }
  ASSERT_EQ(subdirs, std::vector<std::string>{engine::RankDirName(rank)});

  // Read back by the engine's reader: every event, the rank, a closed file.
  testing::Collected got = CollectDir(dir);
  EXPECT_EQ(static_cast<long>(got.events.size()), expected);
  EXPECT_EQ(got.dropped, 0u);
  EXPECT_EQ(got.corrupt_blocks, 0u);
  EXPECT_EQ(got.torn_tails, 0u);
  ASSERT_EQ(got.files, 1u);
  EXPECT_EQ(got.closed_files, 1u);  // the exit handler wrote the END block
  ASSERT_EQ(got.metas.size(), 1u);
  EXPECT_EQ(got.metas[0].rank, rank);
  EXPECT_EQ(got.metas[0].world_size, world);
  for (const auto& e : got.events) ASSERT_EQ(e.rank, rank);

  // And by the CLI.
  const std::string json =
      RunCommand(ShellQuote(testing::TracedbBin()) + " info --json " + ShellQuote(dir), &rc);
  ASSERT_EQ(rc, 0) << json;
  EXPECT_EQ(JsonInt(json, "ranks"), 1) << json;
  // info counts events as the database will hold them: a begin/end pair is one span, so each
  // iteration (begin, instant, end) is 2 events, not 3 records.
  EXPECT_EQ(JsonInt(json, "events"), expected / 3 * 2) << json;
  EXPECT_EQ(JsonInt(json, "dropped"), 0) << json;
  EXPECT_EQ(JsonInt(json, "rank"), rank) << json;
  EXPECT_EQ(JsonInt(json, "open_files"), 0) << json;
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (Mode m : {Mode::kLinked, Mode::kPreloadProgram, Mode::kPreloadTrue}) {
    for (const RankVar& v : kRankVars) cases.push_back(Case{m, v});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EveryPathAndRankVariable, AutoStartTest, ::testing::ValuesIn(AllCases()),
                         CaseName);

// Without TRACEDB_DIR nothing starts and nothing is written, whichever way the library came in.
TEST(AutoStart, NoDirectoryNoRecording) {
  TempDir tmp;
  for (const std::string& prog :
       {std::string("env LD_PRELOAD=") + ShellQuote(TRACEDB_LIBRARY_PATH) + " " +
            ShellQuote(AUTOSTART_PLAIN_PATH),
        ShellQuote(AUTOSTART_LINKED_PATH)}) {
    int rc = -1;
    const std::string out = RunCommand(
        "cd " + ShellQuote(tmp.path()) + " && " + CleanEnvPrefix() + " " + prog + " 10 2>&1", &rc);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(out, "enabled 0 rank 0 emitted 0\n");
  }
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
}

// An unwritable TRACEDB_DIR: the program still runs to the end (exit 0), with one warning.
TEST(AutoStart, UnwritableDirectoryWarnsOnceAndRunsOn) {
  TempDir tmp;
  testing::WriteFile(tmp.Sub("file"), "x");
  int rc = -1;
  const std::string out =
      RunCommand(CleanEnvPrefix() + " TRACEDB_DIR=" + ShellQuote(tmp.Sub("file") + "/sub") +
                     " LD_PRELOAD=" + ShellQuote(TRACEDB_LIBRARY_PATH) + " " +
                     ShellQuote(AUTOSTART_PLAIN_PATH) + " 10 2>&1",
                 &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("tracedb: cannot record to TRACEDB_DIR="), std::string::npos) << out;
  EXPECT_NE(out.find("enabled 0 rank 0 emitted 0\n"), std::string::npos) << out;
}

// SIGTERM, SIGINT, SIGHUP and the fatal signals of a crash, where the application installed no
// handler: the library writes everything buffered and the END block, then the signal takes its
// default action (the process dies of it).
class TerminateSignalTest : public ::testing::TestWithParam<int> {};

TEST_P(TerminateSignalTest, FlushesThenDiesOfTheSignal) {
  const int sig = GetParam();
  // No core file from the crash signals (the child inherits the limit).
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  TempDir tmp;
  const std::string dir = tmp.Sub("trace");
  const std::string out_path = tmp.Sub("out.txt");
  // Spawned directly (not through a shell, which would ignore SIGINT in a background job),
  // with the default action for both signals, as a launcher leaves them.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGSEGV, SIGABRT}) sigaddset(&defaults, s);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  // A long flush interval: without the handler nothing would be written before the signal.
  const std::string env_dir = "TRACEDB_DIR=" + dir;
  const char* envp[] = {env_dir.c_str(), "TRACEDB_FLUSH_MS=3600000", "TRACEDB_RANK=3", nullptr};
  const std::string events = std::to_string(kEventsPerThread);
  const char* argv[] = {AUTOSTART_LINKED_PATH, events.c_str(), "wait", nullptr};
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, AUTOSTART_LINKED_PATH, &actions, &attr, const_cast<char**>(argv),
                        const_cast<char**>(envp)),
            0);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  const std::string expected_out =
      "enabled 1 rank 3 emitted " + std::to_string(2 * 3 * kEventsPerThread) + "\n";
  for (int i = 0; i < 2000 && testing::ReadFile(out_path) != expected_out; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(testing::ReadFile(out_path), expected_out);
  // Nothing written yet (only the file header): the events are in memory.
  EXPECT_EQ(CollectDir(dir).events.size(), 0u);
  ASSERT_EQ(kill(pid, sig), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
  EXPECT_EQ(WTERMSIG(status), sig);

  testing::Collected got = CollectDir(dir);
  EXPECT_EQ(static_cast<long>(got.events.size()), 2 * 3 * kEventsPerThread);
  EXPECT_EQ(got.dropped, 0u);
  EXPECT_EQ(got.closed_files, 1u);  // END written
  EXPECT_EQ(got.torn_tails, 0u);
}

INSTANTIATE_TEST_SUITE_P(StopAndFatalSignals, TerminateSignalTest,
                         ::testing::Values(SIGTERM, SIGINT, SIGHUP, SIGSEGV, SIGABRT),
                         [](const ::testing::TestParamInfo<int>& info) {
                           switch (info.param) {
                             case SIGTERM:
                               return std::string("SIGTERM");
                             case SIGINT:
                               return std::string("SIGINT");
                             case SIGHUP:
                               return std::string("SIGHUP");
                             case SIGSEGV:
                               return std::string("SIGSEGV");
                             default:
                               return std::string("SIGABRT");
                           }
                         });

}  // namespace
}  // namespace tracedb
