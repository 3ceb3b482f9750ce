// `tracedb info DIR` and `tracedb compact DIR` count a directory's segment events the same way
// (one definition: engine::SegmentEventCount), checked against a count made apart from both: the
// event and step lines of the fixture's own text (fixtures/shell/counts.spec), a begin/end pair
// once (the program emitted one span; the DB holds one row), and the DB's rows by plain SQL.
// Also with a torn tail: both leave out the same torn block.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <regex>
#include <sstream>
#include <string>

#include "query/open/query_db.h"
#include "tests/segment_fixture.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

struct Counts {
  uint64_t events = 0;
  uint64_t steps = 0;
};

// Counts the event lines (B, I, X, C: an E line closes its B's span, one event) and step lines
// (S) of a segment spec, up to (not including) the line `stop_at` (1-based; 0: all).
Counts CountSpec(const std::string& spec, size_t stop_at = 0) {
  Counts c;
  std::istringstream in(spec);
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (stop_at && n >= stop_at) break;
    if (line.size() < 2 || line[1] != ' ') continue;
    if (std::string("BIXC").find(line[0]) != std::string::npos) ++c.events;
    if (line[0] == 'S') ++c.steps;
  }
  return c;
}

uint64_t JsonInt(const std::string& json, const std::string& key) {
  std::smatch m;
  const std::regex re("\"" + key + "\": ([0-9]+)");
  EXPECT_TRUE(std::regex_search(json, m, re)) << key << " not in " << json;
  return m.empty() ? UINT64_MAX : std::stoull(m[1]);
}

Counts Info(const std::string& dir) {
  int rc = 0;
  const std::string out =
      RunCommand(TracedbBin() + " info --format json " + ShellQuote(dir) + " 2>&1", &rc);
  EXPECT_EQ(rc, 0) << out;
  return Counts{JsonInt(out, "events"), JsonInt(out, "steps")};
}

// Runs compact; its summary line says "compacted N segment events and M step markers from".
Counts Compact(const std::string& dir, const std::string& db, const std::string& flags,
               int64_t* sources_events, std::string* output, int64_t* rows = nullptr) {
  int rc = 0;
  std::string& out = *output;
  out = RunCommand(
      TracedbBin() + " compact " + ShellQuote(dir) + " -o " + ShellQuote(db) + flags + " 2>&1",
      &rc);
  EXPECT_EQ(rc, 0) << out;
  std::smatch m;
  const std::regex re("compacted ([0-9,]+) segment events(?: and ([0-9,]+) step markers)? from");
  EXPECT_TRUE(std::regex_search(out, m, re)) << out;
  auto num = [](std::string s) {
    s.erase(std::remove(s.begin(), s.end(), ','), s.end());
    return s.empty() ? uint64_t{0} : std::stoull(s);
  };
  Counts c;
  if (!m.empty()) c = Counts{num(m[1]), num(m[2])};
  auto q = query::OpenQueryDb(db);
  EXPECT_TRUE(q.ok());
  if (q.ok()) {
    auto n = (*q)->QueryInt("SELECT sum(events) FROM sources", -1);
    EXPECT_TRUE(n.ok());
    *sources_events = n.ok() ? *n : -1;
    if (rows) {
      auto r = (*q)->QueryInt("SELECT count(*) FROM events", -1);
      EXPECT_TRUE(r.ok());
      *rows = r.ok() ? *r : -1;
    }
  }
  return c;
}

TEST(InfoAndCompact, CountTheSameEventsAsTheFixtureHolds) {
  const std::string spec = ReadFile(SourceRoot() + "/fixtures/shell/counts.spec");
  const Counts want = CountSpec(spec);
  ASSERT_EQ(want.events, 9u);  // the fixture as written; a change to it shows here first
  ASSERT_EQ(want.steps, 5u);
  TempDir tmp;
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp.path(), spec).ok());
  const std::string dir = tmp.Sub("trace");
  const Counts info = Info(dir);
  EXPECT_EQ(info.events, want.events);
  EXPECT_EQ(info.steps, want.steps);
  int64_t sources = -1;
  std::string out;
  int64_t rows = -1;
  const Counts compact = Compact(dir, tmp.Sub("job.tdb"), "", &sources, &out, &rows);
  EXPECT_EQ(compact.events, want.events) << out;
  EXPECT_EQ(compact.steps, want.steps) << out;
  EXPECT_EQ(sources, static_cast<int64_t>(want.events)) << out;
  EXPECT_EQ(rows, static_cast<int64_t>(want.events)) << "rows in events";
}

// Rank 1's file left unclosed, its last block torn: neither counts the torn block's 2 events and
// 1 step marker. (The fixture's files carry no writer lock, so compact cannot tell that their
// writer is gone: --finish says the job is over. Without it, compact takes an unclosed file only
// up to its newest clock anchor and says that the file waits for the next run.)
TEST(InfoAndCompact, LeaveOutTheSameTornBlock) {
  std::string spec = ReadFile(SourceRoot() + "/fixtures/shell/counts.spec");
  const size_t end = spec.rfind("end\n");
  ASSERT_NE(end, std::string::npos);
  spec.erase(end);  // the file is not closed
  // The line number of the last "events" line: the block that is torn.
  size_t last_events_line = 0, n = 0;
  std::istringstream in(spec);
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.rfind("events ", 0) == 0) last_events_line = n;
  }
  const Counts want = CountSpec(spec, last_events_line);
  ASSERT_EQ(want.events, 7u);
  ASSERT_EQ(want.steps, 4u);
  TempDir tmp;
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp.path(), spec).ok());
  const std::string file = tmp.Sub("trace/rank-1/seg-200-000000.tds");
  struct stat st;
  ASSERT_EQ(::stat(file.c_str(), &st), 0) << file;
  ASSERT_EQ(::truncate(file.c_str(), st.st_size - 3), 0);
  const std::string dir = tmp.Sub("trace");
  const Counts info = Info(dir);
  EXPECT_EQ(info.events, want.events);
  EXPECT_EQ(info.steps, want.steps);
  int64_t sources = -1;
  std::string out;
  const Counts compact = Compact(dir, tmp.Sub("job.tdb"), " --finish", &sources, &out);
  EXPECT_EQ(compact.events, want.events) << out;
  EXPECT_EQ(compact.steps, want.steps) << out;
  EXPECT_EQ(sources, static_cast<int64_t>(want.events)) << out;
}

// The progress line (forced on a pipe with TRACEDB_PROGRESS=1) and -v's line per segment file:
// one per file of the fixture, with the rows each added.
TEST(Compact, ShowsProgressAndOneVerboseLinePerFile) {
  const std::string spec = ReadFile(SourceRoot() + "/fixtures/shell/counts.spec");
  TempDir tmp;
  ASSERT_TRUE(WriteSegmentsFromSpec(tmp.path(), spec).ok());
  int rc = 0;
  const std::string out =
      RunCommand("TRACEDB_PROGRESS=1 " + TracedbBin() + " compact " + ShellQuote(tmp.Sub("trace")) +
                     " -o " + ShellQuote(tmp.Sub("job.tdb")) + " -v 2>&1",
                 &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("\rcompact: file [1-3]/3, [0-9,]+ events, ")))
      << out;
  for (const char* file :
       {"rank-0/seg-100-000000.tds", "rank-0/seg-101-000000.tds", "rank-1/seg-200-000000.tds"}) {
    EXPECT_TRUE(
        std::regex_search(out, std::regex("tracedb compact: [^\n]*/trace/" + std::string(file) +
                                          ": [0-9,]+ rows from [0-9.]+ [KM]?B in [0-9.]+ s\n")))
        << file << " in " << out;
  }
  // -q: neither the progress line nor the summary.
  const std::string quiet =
      RunCommand("TRACEDB_PROGRESS=1 " + TracedbBin() + " compact " + ShellQuote(tmp.Sub("trace")) +
                     " -o " + ShellQuote(tmp.Sub("quiet.tdb")) + " -q 2>&1",
                 &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(quiet, "");
}

}  // namespace
}  // namespace tracedb::testing
