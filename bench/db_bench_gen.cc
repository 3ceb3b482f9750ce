// Generates the events of the database benchmark, twice: as segment files (what the recorder
// writes) and as a CSV of the rows compaction will produce (what DuckDB and the SQLite-rows
// baseline load). The workload is Horovod-like: on each rank a compute thread runs
// forward/backward spans and a communication thread runs, per tensor, an ALLREDUCE span
// holding NEGOTIATE_ALLREDUCE, QUEUE, MEMCPY_IN_FUSION_BUFFER, COMMUNICATE and
// MEMCPY_OUT_FUSION_BUFFER, with log-uniform durations from 1 µs to 20 ms and ns timestamps.
//
// Usage: db_bench_gen OUTDIR EVENTS [RANKS] [--no-csv]
//   writes OUTDIR/trace/rank-*/seg-*.tds and OUTDIR/events.csv
//   (columns rank,tid,name,ts,dur,depth; ts in ns since the Unix epoch)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/segment_blocks.h"
#include "engine/segment_writer.h"

using namespace tracedb::engine;

namespace {

constexpr int64_t kEpoch = 1700000000000000000;  // ns; the anchors map the clock 1:1 onto it
const char* const kNames[] = {"forward",     "backward",
                              "ALLREDUCE",   "NEGOTIATE_ALLREDUCE",
                              "QUEUE",       "MEMCPY_IN_FUSION_BUFFER",
                              "COMMUNICATE", "MEMCPY_OUT_FUSION_BUFFER"};

struct Rank {
  SegmentWriter writer;
  EventsBlockEncoder enc[2];
  int64_t clock[2] = {0, 0};  // per thread: the time its next span may start
  uint64_t in_block[2] = {0, 0};
  uint32_t seq = 0;
  uint64_t file_events = 0;
};

void Die(const tracedb::Status& s) {
  std::fprintf(stderr, "db_bench_gen: %s\n", s.ToString().c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUTDIR EVENTS [RANKS] [--no-csv]\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  const uint64_t total = std::strtoull(argv[2], nullptr, 10);
  const int ranks = argc > 3 && argv[3][0] != '-' ? std::atoi(argv[3]) : 8;
  bool csv_on = true;
  for (int i = 3; i < argc; ++i) csv_on &= std::string(argv[i]) != "--no-csv";
  std::filesystem::create_directories(out + "/trace");
  FILE* csv = nullptr;
  if (csv_on) {
    csv = std::fopen((out + "/events.csv").c_str(), "w");
    if (!csv) {
      std::perror("events.csv");
      return 1;
    }
    static char buf[1 << 20];
    std::setvbuf(csv, buf, _IOFBF, sizeof(buf));
    std::fputs("rank,tid,name,ts,dur,depth\n", csv);
  }

  std::vector<Rank> rs(static_cast<size_t>(ranks));
  auto open_file = [&](int r) {
    Rank& x = rs[static_cast<size_t>(r)];
    const std::string dir = out + "/trace/" + RankDirName(r);
    std::filesystem::create_directories(dir);
    const uint32_t pid = 1000 + static_cast<uint32_t>(r);
    tracedb::Status s = x.writer.Open(dir + "/" + SegmentFileName(pid, x.seq), pid, x.seq);
    if (!s.ok()) Die(s);
    x.seq++;
    SegmentMeta m;
    m.rank = r;
    m.world_size = ranks;
    m.pid = pid;
    m.host = "bench-host";
    m.clock = ClockKind::kMonotonic;
    m.tool_version = "bench";
    std::string raw;
    EncodeMeta(m, &raw);
    x.writer.AppendBlock(BlockType::kMeta, raw, false);
    raw.clear();
    std::vector<std::string_view> names(std::begin(kNames), std::end(kNames));
    EncodeStrings(1, names, &raw);
    x.writer.AppendBlock(BlockType::kStrings, raw, true);
    raw.clear();
    EncodeThreads({{1, 100, "compute"}, {2, 101, "communication"}}, &raw);
    x.writer.AppendBlock(BlockType::kThreads, raw, true);
    raw.clear();
    // Identity clock: realtime = kEpoch + local.
    EncodeAnchors({{kEpoch, 0, 10}}, &raw);
    x.writer.AppendBlock(BlockType::kAnchor, raw, false);
    for (int t = 0; t < 2; ++t) {
      x.enc[t].Reset(static_cast<uint32_t>(t + 1));
      x.in_block[t] = 0;
    }
    x.file_events = 0;
  };
  auto flush_block = [&](int r, int t) {
    Rank& x = rs[static_cast<size_t>(r)];
    if (x.enc[t].count() == 0) return;
    std::string raw;
    x.enc[t].Finish(&raw);
    x.writer.AppendBlock(BlockType::kEvents, raw, true);
    x.file_events += x.enc[t].count();
    x.enc[t].Reset(static_cast<uint32_t>(t + 1));
  };
  auto close_file = [&](int r) {
    Rank& x = rs[static_cast<size_t>(r)];
    flush_block(r, 0);
    flush_block(r, 1);
    const int64_t last = std::max(x.clock[0], x.clock[1]) + 1000000000;
    std::string raw;
    EncodeAnchors({{kEpoch + last, last, 10}}, &raw);
    x.writer.AppendBlock(BlockType::kAnchor, raw, false);
    raw.clear();
    EncodeEnd({x.file_events}, &raw);
    x.writer.AppendBlock(BlockType::kEnd, raw, false);
    tracedb::Status s = x.writer.Close();
    if (!s.ok()) Die(s);
  };
  for (int r = 0; r < ranks; ++r) open_file(r);

  std::mt19937_64 rng(20261122);
  std::uniform_real_distribution<double> logdur(std::log(1000.0), std::log(20e6));
  auto dur = [&] { return static_cast<int64_t>(std::exp(logdur(rng))); };
  auto gap = [&] { return static_cast<int64_t>(200 + rng() % 5000); };
  auto emit = [&](int r, int t, int name, int64_t ts, int64_t d, int depth) {
    Rank& x = rs[static_cast<size_t>(r)];
    x.enc[t].AddWithInt(EventKind::kComplete, t == 0 ? 1 : 3, ts, static_cast<uint32_t>(name + 1),
                        0, d, nullptr);
    if (csv) {
      std::fprintf(csv, "%d,%d,%s,%lld,%lld,%d\n", r, 100 + t, kNames[name],
                   static_cast<long long>(kEpoch + ts), static_cast<long long>(d), depth);
    }
    if (x.enc[t].count() == 65536) flush_block(r, t);
  };
  uint64_t made = 0;
  while (made < total) {
    for (int r = 0; r < ranks && made < total; ++r) {
      Rank& x = rs[static_cast<size_t>(r)];
      // Compute thread: forward and backward.
      for (int name : {0, 1}) {
        const int64_t d = dur();
        emit(r, 0, name, x.clock[0], d, 0);
        x.clock[0] += d + gap();
        ++made;
      }
      // Communication thread: one tensor's ALLREDUCE with its five phases.
      int64_t phases[5];
      int64_t sum = 0;
      for (int64_t& p : phases) {
        p = dur() / 5;
        sum += p + 100;
      }
      const int64_t start = x.clock[1];
      emit(r, 1, 2, start, sum, 0);
      int64_t ts = start + 50;
      for (int p = 0; p < 5; ++p) {
        emit(r, 1, 3 + p, ts, phases[p], 1);
        ts += phases[p] + 100;
      }
      x.clock[1] = start + sum + gap();
      made += 6;
      if (x.writer.size() > (64u << 20)) {
        close_file(r);
        open_file(r);
      }
    }
  }
  for (int r = 0; r < ranks; ++r) close_file(r);
  if (csv) std::fclose(csv);
  std::printf("%llu events on %d ranks in %s\n", static_cast<unsigned long long>(made), ranks,
              out.c_str());
  return 0;
}
