// A full disk: the test mounts a small tmpfs (skipped where mounting is not permitted) and
// records into it with a multi-threaded program (tests/recorder_fill_program.c) until the disk is
// full. The program runs to the
// end, with exactly one warning; every event is written or counted as dropped; what was written
// stays readable (no corrupt block, no torn tail) and compacts with `tracedb compact`.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "tests/test_util.h"

namespace tracedb {
namespace {

using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;

long Field(const std::string& text, const std::string& key) {
  const std::string k = key + " ";
  const size_t p = text.find(k);
  return p == std::string::npos ? -1 : std::atol(text.c_str() + p + k.size());
}

long JsonInt(const std::string& json, const std::string& key) {
  const std::string k = "\"" + key + "\": ";
  const size_t p = json.find(k);
  return p == std::string::npos ? -1 : std::atol(json.c_str() + p + k.size());
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

class SmallFilesystem {
 public:
  explicit SmallFilesystem(const std::string& path, const char* size) : path_(path) {
    std::filesystem::create_directories(path);
    const std::string opts = std::string("size=") + size;
    if (::mount("tracedb-test", path.c_str(), "tmpfs", 0, opts.c_str()) == 0) {
      mounted_ = true;
    } else {
      error_ = std::strerror(errno);
    }
  }
  ~SmallFilesystem() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  std::string path_;
  bool mounted_ = false;
  std::string error_;
};

TEST(RecorderDiskFull, RunsOnWarnsOnceCountsDropsAndWhatWasWrittenCompacts) {
  TempDir tmp;
  SmallFilesystem fs(tmp.Sub("small"), "3m");
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here: " << fs.error();
  const std::string dir = tmp.Sub("small") + "/trace";
  const std::string err = tmp.Sub("stderr.txt");
  // 4 threads x 1,000,000 events at a steady pace: about 8 MB of segments for a 3 MiB
  // filesystem. A short flush interval, so that writing starts (and fails) while the threads
  // still record. The program flushes once after each thread's first 5,000 events, with the
  // threads waiting: a first write of some 40 KB. (Without it, a flusher held back on a loaded
  // machine wrote more than the whole filesystem in its first write, with 1 MiB and again with
  // 3 MiB: nothing written, and the test's premise gone.)
  constexpr long kThreads = 4, kPerThread = 1000000;
  int rc = -1;
  auto run = [&](const std::string& into, double* seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string out = RunCommand("TRACEDB_FLUSH_MS=5 " + ShellQuote(FILL_PROGRAM_PATH) + " " +
                                           ShellQuote(into) + " " + std::to_string(kThreads) + " " +
                                           std::to_string(kPerThread) + " 2>" + ShellQuote(err),
                                       &rc);
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
  };
  // The same program into an ordinary directory first: the pace of the application.
  double normal_seconds = 0;
  const std::string normal = run(tmp.Sub("normal"), &normal_seconds);
  ASSERT_EQ(rc, 0) << normal;
  double seconds = 0;
  const std::string out = run(dir, &seconds);
  const std::string warnings = testing::ReadFile(err);
  ASSERT_EQ(rc, 0) << out << warnings;
  // The application runs on at its pace: nothing blocks on the full disk (a loose bound, on a
  // shared machine; a blocked writer would take seconds per flush).
  EXPECT_LT(seconds, 2 * normal_seconds + 1.0) << "normal run " << normal_seconds << " s";
  const long emitted = Field(out, "emitted"), written = Field(out, "written"),
             dropped = Field(out, "dropped");
  ASSERT_EQ(emitted, kThreads * kPerThread) << out;
  EXPECT_EQ(written + dropped, emitted) << out;
  EXPECT_GT(dropped, 0) << out << " (the filesystem did not fill up)";
  EXPECT_GE(written, kThreads * 5000) << out;  // at least the first flush
  EXPECT_EQ(Field(out, "stop"), -2) << out;    // TRACEDB_ERR_IO: this session's writing failed
  // Exactly one warning, naming the reason.
  EXPECT_EQ(Count(warnings, "tracedb:"), 1u) << warnings;
  EXPECT_NE(warnings.find("No space left on device"), std::string::npos) << warnings;

  // What was written is readable, whole, and exactly what the counters call written.
  testing::Collected got = testing::CollectDir(dir);
  EXPECT_EQ(got.corrupt_blocks, 0u);
  EXPECT_EQ(got.torn_tails, 0u);
  EXPECT_EQ(static_cast<long>(got.events.size()), written);

  // And it compacts (the database goes outside the full filesystem).
  const std::string db = tmp.Sub("job.tdb");
  const std::string bin = ShellQuote(testing::TracedbBin());
  const std::string compact =
      RunCommand(bin + " compact " + ShellQuote(dir) + " -o " + ShellQuote(db) + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << compact;
  const std::string json = RunCommand(bin + " info --json " + ShellQuote(db), &rc);
  ASSERT_EQ(rc, 0) << json;
  // Every event written is in the database: a span pairs a begin and an end into one row, and a
  // begin whose end was never written (the cut) is a row flagged open (the process is over:
  // docs/hang.md "Open spans").
  uint64_t expected_rows = 0, expected_open = 0;
  std::map<uint32_t, uint64_t> depth;  // thread -> open begins
  for (const auto& e : got.events) {
    if (e.e.kind == engine::EventKind::kEnd) {
      if (depth[e.thread] > 0) --depth[e.thread];
    } else {
      ++expected_rows;
      if (e.e.kind == engine::EventKind::kBegin) ++depth[e.thread];
    }
  }
  for (const auto& [thread, open] : depth) expected_open += open;
  EXPECT_EQ(JsonInt(json, "events"), static_cast<long>(expected_rows)) << json << compact;
  const std::string open_rows =
      RunCommand(bin + " query " + ShellQuote(db) +
                     " 'SELECT count(*) AS n FROM events WHERE open = 1' -f csv",
                 &rc);
  EXPECT_EQ(open_rows, "n\n" + std::to_string(expected_open) + "\n") << compact;
  EXPECT_EQ(JsonInt(json, "ranks"), 1) << json;
  std::printf("disk full: %ld written, %ld dropped of %ld in %.2f s (%.2f s normally); %s", written,
              dropped, emitted, seconds, normal_seconds, warnings.c_str());
}

}  // namespace
}  // namespace tracedb
