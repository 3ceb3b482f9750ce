// Helpers shared by tests: unique temporary directories and a visitor that collects everything
// a trace directory holds.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/segment/segment_format.h"
#include "engine/segment/segment_reader.h"

namespace tracedb::testing {

// A fresh empty directory, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void RemoveTree(const std::string& path);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& bytes);

// Runs `cmd` with /bin/sh; returns its stdout and sets *exit_code (-1 when it could not run).
std::string RunCommand(const std::string& cmd, int* exit_code);

// Where a child started by SpawnChild writes its output.
enum class ChildOutput {
  kInherit,         // this process's stdout and stderr
  kBothToFile,      // stdout and stderr to `path`, truncated first
  kStderrAppended,  // stderr appended to `path`; stdout inherited
};
// Starts argv[0] with `argv` (no shell) and `env` ("NAME=value" entries) added to this process's
// environment (an entry there comes first, so it overrides an inherited one of the same name);
// the child's pid, or -1 when it could not be started. The one posix_spawn of the test helpers.
pid_t SpawnChild(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                 ChildOutput output = ChildOutput::kInherit, const std::string& path = "");

// A child's exit code (-1: it could not be started or waited for) and its peak resident memory.
struct MeasuredRun {
  int exit_code = -1;
  long peak_kb = 0;  // ru_maxrss of the child
};
// Runs argv (no shell) with `env` ("NAME=value" entries) added to the environment, stdout and
// stderr to the file `log`, and waits for it: the memory tests compare the peaks of a small and a
// large run.
MeasuredRun RunMeasured(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                        const std::string& log);
// Starts program args[0] with `args` (no shell), SIGKILLs it after `delay_us` microseconds
// (whether or not it finished by then) and reaps it: a kill at a random moment of its run.
// Fails the calling test when it cannot be started.
void RunAndKillAfter(const std::vector<std::string>& args, int64_t delay_us);
// Quotes `s` for /bin/sh.
std::string ShellQuote(const std::string& s);
// The source tree ($TRACEDB_SOURCE_DIR, else the one this test was built from).
std::string SourceRoot();
// The shared fixtures (SourceRoot()/../shared/fixtures); may not exist. Tests look things up
// through SharedFixturePath(), never by building paths under it themselves.
std::string SharedFixtures();
// SharedFixtures()/`sub` (a folder or a file; "" for the root) when it exists, else "": the
// caller then skips, e.g. `if (p.empty()) GTEST_SKIP() << …;`. Except in CI (CI=true in the
// environment): there a missing shared fixture is recorded as a failure of the calling test,
// so that a broken path cannot pass as a skip.
std::string SharedFixturePath(const std::string& sub = "");
// The tracedb binary under test ($TRACEDB_BIN).
std::string TracedbBin();
// The Python the tests run their scripts with (TRACEDB_TEST_PYTHON3 from the environment, else
// the python3 that was on PATH at configure time, resolved to its executable: a version
// manager's shim costs about 0.3 s per start, and some tests start it dozens of times).
std::string Python3Bin();

// An event as read back, with its thread and names resolved.
struct ReadEvent {
  int32_t rank = 0;
  uint32_t pid = 0;
  uint32_t thread = 0;  // per-process thread index
  std::string name;
  std::string lane;  // "" for the thread's own track
  engine::SegmentEvent e;
};

struct Collected {
  std::vector<ReadEvent> events;
  std::map<uint32_t, std::string> thread_names;  // thread index -> name
  uint64_t dropped = 0;
  std::vector<engine::SyncPoint> sync;
  std::vector<engine::AnchorPoint> anchors;
  std::vector<engine::CommInfo> comms;
  std::vector<engine::SegmentMeta> metas;
  uint64_t corrupt_blocks = 0;
  uint64_t torn_tails = 0;
  uint64_t files = 0;
  uint64_t closed_files = 0;
};

// Reads every segment file under `dir` (all ranks). Fails the calling test on I/O errors.
Collected CollectDir(const std::string& dir);

}  // namespace tracedb::testing
