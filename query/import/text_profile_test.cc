// Tests of the text profiles' line reader (text_profile.h): the same lines from a file, a gzip
// file and memory; lines longer than kMaxLineBytes cut and counted; and a gzip bomb of short
// lines imported by `tracedb import` in memory that does not grow with its line count (a small
// bomb against a large one, not an absolute figure).
#include "query/import/text_profile.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <string>
#include <vector>

#include "tests/test_util.h"

namespace tracedb::query::text_profile {
namespace {

struct Read {
  std::vector<std::pair<uint32_t, std::string>> lines;
  std::string tail;
  uint32_t tail_number = 0;
  uint64_t tail_bytes = 0, complete = 0, long_lines = 0;
  uint32_t first_long = 0;
};

Read ReadAll(LineReader* r) {
  Read out;
  Line l;
  while (r->Next(&l)) out.lines.emplace_back(l.number, std::string(l.text));
  EXPECT_TRUE(r->status().ok()) << r->status().ToString();
  out.tail = std::string(r->tail());
  out.tail_number = r->tail_number();
  out.tail_bytes = r->tail_bytes();
  out.complete = r->complete_bytes();
  out.long_lines = r->long_lines();
  out.first_long = r->first_long_line();
  return out;
}

void WriteGzip(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb1");
  ASSERT_NE(f, nullptr);
  for (size_t i = 0; i < text.size(); i += 1 << 20) {
    const size_t n = std::min<size_t>(1 << 20, text.size() - i);
    ASSERT_EQ(gzwrite(f, text.data() + i, static_cast<unsigned>(n)), static_cast<int>(n));
  }
  gzclose(f);
}

TEST(LineReaderTest, FileGzipAndMemoryGiveTheSameLines) {
  testing::TempDir tmp;
  const std::string long_line(kMaxLineBytes + 5000, 'y');
  const std::string text =
      "first\r\n\nthird line\n" + long_line + "\nafter\n" + long_line + "tail-without-newline";
  testing::WriteFile(tmp.Sub("plain.txt"), text);
  WriteGzip(tmp.Sub("packed.gz"), text);
  LineReader mem(text);
  const Read want = ReadAll(&mem);
  // Known answers, from the text as written above.
  ASSERT_EQ(want.lines.size(), 5u);
  EXPECT_EQ(want.lines[0], std::make_pair(1u, std::string("first")));
  EXPECT_EQ(want.lines[1], std::make_pair(2u, std::string()));
  EXPECT_EQ(want.lines[2], std::make_pair(3u, std::string("third line")));
  EXPECT_EQ(want.lines[3].first, 4u);
  EXPECT_EQ(want.lines[3].second, long_line.substr(0, kMaxLineBytes));
  EXPECT_EQ(want.lines[4], std::make_pair(5u, std::string("after")));
  EXPECT_EQ(want.long_lines, 1u);
  EXPECT_EQ(want.first_long, 4u);
  EXPECT_EQ(want.tail_number, 6u);
  EXPECT_EQ(want.tail_bytes, long_line.size() + std::string("tail-without-newline").size());
  EXPECT_EQ(want.tail, (long_line + "tail-without-newline").substr(0, kMaxLineBytes));
  EXPECT_EQ(want.complete, text.size() - want.tail_bytes);
  for (const char* name : {"plain.txt", "packed.gz"}) {
    SCOPED_TRACE(name);
    uint64_t size = 0;
    auto r = LineReader::Open(tmp.Sub(name), &size);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const Read got = ReadAll(r->get());
    EXPECT_EQ(got.lines, want.lines);
    EXPECT_EQ(got.tail, want.tail);
    EXPECT_EQ(got.tail_number, want.tail_number);
    EXPECT_EQ(got.tail_bytes, want.tail_bytes);
    EXPECT_EQ(got.complete, want.complete);
    EXPECT_EQ(got.long_lines, want.long_lines);
  }
}

// Peak RSS (KiB) of `tracedb import --input-format FORMAT FILE -o DB`, and its exit status.
long ImportPeakRssKb(const std::string& format, const std::string& file, const std::string& db,
                     int* exit_status) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string bin = testing::TracedbBin();
    if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(126);
    execl(bin.c_str(), bin.c_str(), "import", "-q", "--input-format", format.c_str(), file.c_str(),
          "-o", db.c_str(), (char*)nullptr);
    _exit(127);
  }
  int status = 0;
  struct rusage ru {};
  if (wait4(pid, &status, 0, &ru) != pid) return -1;
  *exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return ru.ru_maxrss;
}

TEST(LineReaderTest, AGzipBombOfShortLinesImportsInMemoryThatDoesNotGrowWithIt) {
  // Before: the whole text in memory and a table of every line (24 bytes a line): a 255 KB gzip
  // of 128M lines took 3.4 GB. Here 100 thousand lines against 6 million (the large one would
  // have cost ~150 MB more), for both importers.
  testing::TempDir tmp;
  struct Format {
    const char* name;
    const char* header;
  };
  for (const Format& f :
       {Format{"mpip", "@ mpiP\n"}, Format{"mpitrace", "Data for MPI rank 0 of 4:\n"}}) {
    SCOPED_TRACE(f.name);
    long rss[2];
    for (int big = 0; big < 2; ++big) {
      const size_t lines = big ? 6000000 : 100000;
      std::string text = f.header;
      text.reserve(text.size() + 2 * lines);
      for (size_t i = 0; i < lines; ++i) text += "x\n";
      const std::string file = tmp.Sub(std::string(f.name) + std::to_string(big) + ".gz");
      WriteGzip(file, text);
      int status = -1;
      rss[big] = ImportPeakRssKb(
          f.name, file, tmp.Sub(std::string(f.name) + std::to_string(big) + ".tdb"), &status);
      ASSERT_GT(rss[big], 0);
      // The junk lines are skipped and counted (exit 0), or the file is refused (exit 1):
      // never a crash.
      EXPECT_TRUE(status == 0 || status == 1) << status;
    }
    EXPECT_LT(rss[1], rss[0] + 48 * 1024)
        << "100K lines: " << rss[0] << " KiB, 6M lines: " << rss[1] << " KiB";
  }
}

}  // namespace
}  // namespace tracedb::query::text_profile
