// A real trace viewer loads what `tracedb export --chrome` writes: speedscope (npm, pinned,
// installed by tests/viewers/setup-speedscope.sh) running in headless Chromium (Debian
// `chromium`, installed by scripts/setup-deps.sh) imports the file with its own Trace Event
// importer (tests/viewers/speedscope_load.py). The test skips, saying why, when Chromium or
// the npm package cannot be had.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>

#include "tests/segment_fixture.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

std::string ViewersDir() {
#ifdef TRACEDB_VIEWERS_DIR
  return TRACEDB_VIEWERS_DIR;
#else
  return "/tmp/tracedb-viewers";
#endif
}

// Two ranks; rank 0 has a thread with nested spans and a lane, rank 1 one thread; spans down
// to a few ns apart, which only exact, job-relative timestamps keep in order.
std::string Spec() {
  std::string s;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string r = std::to_string(rank);
    s += "file trace " + r + " " + std::to_string(100 + rank) + " 0 host=node" + r + " world=2\n";
    s += "anchor 1700000000000000000 0\n";
    s += "string 1 train_step\nstring 2 forward\nstring 3 MPI_Allreduce\nstring 4 grad \"fc1\"\n";
    s += "thread 1 " + std::to_string(4242 + rank) + " trainer\nlane 1 4\nevents 1\n";
    for (int k = 0; k < 2000; ++k) {
      const int64_t b = 1000 + int64_t{k} * 10000;
      auto at = [&](int64_t off) { return std::to_string(b + off); };
      s += "S " + at(0) + " " + std::to_string(k) + "\n";
      s += "B " + at(1) + " 1 cat=3\n";
      s += "B " + at(2) + " 2 cat=1\n";
      s += "X " + at(3) + " 7 3 cat=4 bytes=4096 flow=" + std::to_string(k + 1) + "\n";
      s += "X " + at(11) + " 5 3 cat=4 flow=" + std::to_string(k + 1) + "\n";
      s += "E " + at(17) + " 2\n";
      s += "E " + at(18) + " 1\n";
      if (rank == 0) s += "X " + at(20) + " 300 3 cat=2 lane=1 bytes=64\n";
    }
    s += "anchor 1700000010000000000 10000000000\nend\n";
  }
  return s;
}

TEST(ExportViewer, SpeedscopeLoadsTheExport) {
  const char* chromium_env = std::getenv("CHROMIUM");
  std::string chromium = chromium_env && *chromium_env ? chromium_env : "";
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (chromium.empty() && access(c, X_OK) == 0) chromium = c;
  }
  if (chromium.empty()) {
    GTEST_SKIP() << "headless Chromium is not installed (scripts/setup-deps.sh installs the "
                    "Debian package chromium)";
  }
  int rc = 0;
  std::string app = RunCommand(
      SourceRoot() + "/tests/viewers/setup-speedscope.sh " + ShellQuote(ViewersDir()) + " 2>&1",
      &rc);
  while (!app.empty() && app.back() == '\n') app.pop_back();
  if (rc != 0) GTEST_SKIP() << "speedscope could not be installed from npm: " << app;
  app = app.substr(app.find_last_of('\n') + 1);

  TempDir tmp;
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp.path(), Spec()).ok());
  const std::string db = tmp.Sub("job.tdb");
  std::string out = RunCommand(TracedbBin() + " compact " + ShellQuote(tmp.Sub("trace")) + " -o " +
                                   ShellQuote(db) + " -q 2>&1",
                               &rc);
  ASSERT_EQ(rc, 0) << out;
  auto load = [&](const std::string& file) {
    std::string report =
        RunCommand(ShellQuote(Python3Bin()) + " " +
                       ShellQuote(SourceRoot() + "/tests/viewers/speedscope_load.py") + " --app " +
                       ShellQuote(app) + " --chromium " + ShellQuote(chromium) + " " +
                       ShellQuote(file) + " 2>&1",
                   &rc);
    EXPECT_EQ(rc, 0) << file << "\n" << report;
    return report;
  };
  // The whole job: three threads with spans, named by our metadata.
  const std::string json = tmp.Sub("job.json");
  out = RunCommand(
      TracedbBin() + " export --chrome -q " + ShellQuote(db) + " -o " + ShellQuote(json) + " 2>&1",
      &rc);
  ASSERT_EQ(rc, 0) << out;
  std::string report = load(json);
  EXPECT_NE(report.find("importer Importing as Trace Event Format profile"), std::string::npos)
      << report;
  EXPECT_NE(report.find("title job.json - speedscope"), std::string::npos) << report;
  EXPECT_NE(report.find("profiles 3\n"), std::string::npos) << report;
  // Speedscope rebuilt every nesting (spans a few ns apart stay in order).
  EXPECT_NE(report.find("warnings 0\n"), std::string::npos) << report;
  EXPECT_TRUE(std::regex_search(
      report, std::regex("first rank [01] \\(node[01]\\) \\(pid [01]\\), (trainer|grad \"fc1\") "
                         "\\(tid [0-9]+\\)")))
      << report;
  EXPECT_EQ(report.find("error"), std::string::npos) << report;
  // The last part of a split export stands alone: its own process and thread names.
  const std::string split = tmp.Sub("split.json");
  out = RunCommand(TracedbBin() + " export --chrome -q --max-mb 0.3 " + ShellQuote(db) + " -o " +
                       ShellQuote(split) + " 2>&1",
                   &rc);
  ASSERT_EQ(rc, 0) << out;
  std::string last;
  for (int k = 1; std::filesystem::exists(tmp.Sub("split." + std::to_string(k) + ".json")); ++k) {
    last = tmp.Sub("split." + std::to_string(k) + ".json");
  }
  ASSERT_FALSE(last.empty()) << "the export was not split";
  report = load(last);
  EXPECT_TRUE(std::regex_search(report, std::regex("first rank 1 \\(node1\\) \\(pid 1\\), "
                                                   "trainer \\(tid [0-9]+\\)")))
      << report;
}

}  // namespace
}  // namespace tracedb::testing
