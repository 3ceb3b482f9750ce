// Imports in bounded memory (issue 24 item 4): `tracedb import` of a file 8x larger must not
// take ~8x the memory. Each case writes a trace of N and of 8N events with a known row count,
// imports both in a child process, reads the child's peak RSS (wait4's rusage) and checks that
// the larger import grew by less than a quarter of the extra input bytes (a reader that kept the
// file, its events or their args would grow by more than that), and that every row arrived
// (counted with plain SQL against the count written). No absolute time or memory bounds.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/db/sqlite.h"
#include "tests/db_rows.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

// The rows of the database: the blocks' counts summed, and for a small database every row
// decoded (ReadDbRows, the tests' own reader of the blocks), which must agree.
int64_t CountRows(const std::string& db, bool decode) {
  auto d = engine::Db::Open(db, engine::Db::Mode::kReadOnly);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  if (!d.ok()) return -1;
  auto v = (*d)->QueryInt("SELECT sum(count) FROM blocks", -1);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  if (!v.ok()) return -1;
  if (decode) {
    EXPECT_EQ(static_cast<int64_t>(ReadDbRows(db).size()), *v);
  }
  return *v;
}

// The generators write straight to a file, and rows are counted only after both imports, so that
// the test process is as small for one child as for the other: a child's ru_maxrss includes its
// parent's resident memory from before exec (vfork-style spawn).
class Out {
 public:
  explicit Out(const std::string& path) : f_(std::fopen(path.c_str(), "w")) {}
  ~Out() { Close(); }
  void Put(const char* text) {
    std::fputs(text, f_);
    bytes_ += std::strlen(text);
  }
  template <typename... A>
  void Put(const char* fmt, A... a) {
    bytes_ += static_cast<size_t>(std::fprintf(f_, fmt, a...));
  }
  size_t Close() {
    if (f_ != nullptr) std::fclose(f_);
    f_ = nullptr;
    return bytes_;
  }
  bool ok() const { return f_ != nullptr; }

 private:
  FILE* f_;
  size_t bytes_ = 0;
};

// A Horovod timeline (new framing) of `ops` allreduces on 16 tensors: per op a B/E ALLREDUCE
// holding two X ticks, its E carrying args. Returns the rows it holds (a B/E pair is one row).
int64_t Horovod(Out* o, int ops) {
  o->Put(
      "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "
      "{\"start_time_since_epoch_in_micros\":1633449303945695}},\n");
  int64_t ts = 1000, rows = 0;
  for (int op = 0; op < ops; ++op) {
    const int pid = 1 + op % 16;
    o->Put(
        "{\"ph\": \"B\", \"name\": \"ALLREDUCE\", \"ts\": %lld, \"pid\": %d},"
        "{\"ph\": \"X\", \"name\": \"%d\", \"ts\": %lld, \"pid\": %d, \"dur\": 0},"
        "{\"ph\": \"X\", \"name\": \"%d\", \"ts\": %lld, \"pid\": %d, \"dur\": 0},"
        "{\"ph\": \"E\", \"ts\": %lld, \"pid\": %d, \"args\": {\"dtype\": \"float32\", "
        "\"shape\": \"[%d, 3]\"}}%s",
        static_cast<long long>(ts), pid, op % 8, static_cast<long long>(ts + 1), pid, (op + 1) % 8,
        static_cast<long long>(ts + 2), pid, static_cast<long long>(ts + 5), pid, op % 100,
        op + 1 < ops ? "," : "\n]\n");
    ts += 7;
    rows += 3;
  }
  return rows;
}

// A Kineto trace (object form) whose X events on two threads and a GPU stream come out of start
// order (written in blocks of 64 in reverse), so the import takes the sorted path; args on every
// event. Returns the rows it holds (one per X).
int64_t Kineto(Out* o, int events) {
  o->Put(
      "{\"schemaVersion\":1,\"distributedInfo\":{\"backend\":\"nccl\",\"rank\":0,"
      "\"world_size\":1},\"traceEvents\":[\n");
  for (int i = 0; i < events; ++i) {
    const int k = (i / 64) * 64 + (63 - i % 64);
    const int tid = k % 3 == 2 ? 7 : 101 + k % 2;
    o->Put(
        "%s{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"op%d\",\"pid\":%d,\"tid\":%d,"
        "\"ts\":%lld.25,\"dur\":3.5,\"args\":{\"correlation\":%d}}",
        i ? ",\n" : "", tid == 7 ? "kernel" : "cpu_op", k % 17, tid == 7 ? 0 : 100, tid,
        static_cast<long long>(10 * k), k);
  }
  o->Put("\n],\"baseTimeNanoseconds\":1700000000000000000}\n");
  return events;
}

struct Measured {
  size_t bytes = 0;
  long peak_kb = 0;
  int64_t rows = 0;  // written by the generator
  std::string db;
};

// Writes a trace with `gen` and imports it in a child: the file's size, the child's peak.
template <typename Gen>
Measured Import(const TempDir& dir, const std::string& name, Gen gen, const std::string& format,
                const std::vector<std::string>& env) {
  const std::string file = dir.Sub(name + ".json");
  const std::string db = dir.Sub(name + ".tdb");
  Out out(file);
  EXPECT_TRUE(out.ok()) << file;
  const int64_t rows = gen(&out);
  const size_t bytes = out.Close();
  const MeasuredRun r =
      RunMeasured({TracedbBin(), "import", "--input-format", format, file, "-o", db}, env,
                  dir.Sub(name + ".log"));
  EXPECT_EQ(r.exit_code, 0) << name << ": " << ReadFile(dir.Sub(name + ".log"));
  std::remove(file.c_str());
  return Measured{bytes, r.peak_kb, rows, db};
}

// The larger import's peak may exceed the smaller's by less than a quarter of the extra bytes.
// Then every row must be there (the small database decoded row by row too).
void ExpectBounded(const Measured& small, const Measured& big) {
  ASSERT_GT(small.peak_kb, 0);
  ASSERT_GT(big.peak_kb, 0);
  const double extra_kb = static_cast<double>(big.bytes - small.bytes) / 1024.0;
  const double grew_kb = static_cast<double>(big.peak_kb - small.peak_kb);
  EXPECT_LT(grew_kb, extra_kb / 4) << "peak " << small.peak_kb << " KB for " << small.bytes
                                   << " bytes, " << big.peak_kb << " KB for " << big.bytes;
  EXPECT_EQ(CountRows(small.db, /*decode=*/true), small.rows);
  EXPECT_EQ(CountRows(big.db, /*decode=*/false), big.rows);
}

TEST(ImportMemory, HorovodStreamsWhateverTheFileSize) {
  TempDir dir;
  const int n = 60000;  // 240K records (past the pipe's 131K in flight), ~16 MB; 8N: ~130 MB
  const Measured small = Import(dir, "small", [&](Out* o) { return Horovod(o, n); }, "horovod", {});
  const Measured big = Import(dir, "big", [&](Out* o) { return Horovod(o, 8 * n); }, "horovod", {});
  ExpectBounded(small, big);
}

TEST(ImportMemory, SortedChromePathSpillsWhateverTheFileSize) {
  // A 4 MiB sort budget, so that both files spill sorted runs (as a file past 64 MB does by
  // default): memory then stays at the budget, not the file. N is past the events the builder
  // pipe may hold in flight (16 batches of 8192: a bound reached by the larger file only would
  // read as growth).
  TempDir dir;
  const int n = 150000;  // ~16 MB; 8N: ~130 MB
  const std::vector<std::string> env = {"TRACEDB_IMPORT_SORT_MB=4"};
  const Measured small = Import(
      dir, "small", [&](Out* o) { return Kineto(o, n); }, "kineto", env);
  const Measured big = Import(
      dir, "big", [&](Out* o) { return Kineto(o, 8 * n); }, "kineto", env);
  ExpectBounded(small, big);
}

}  // namespace
}  // namespace tracedb::testing
