// Generates the events of the database benchmark, twice: as segment files (what the recorder
// writes) and as a CSV of the rows compaction will produce (what DuckDB and the SQLite-rows
// baseline load). The workload is Horovod-like: on each rank a compute thread runs
// forward/backward spans and a communication thread runs, per tensor, an ALLREDUCE span
// holding NEGOTIATE_ALLREDUCE, QUEUE, MEMCPY_IN_FUSION_BUFFER, COMMUNICATE and
// MEMCPY_OUT_FUSION_BUFFER, with log-uniform durations from 1 µs to 20 ms and ns timestamps.
//
// With --mpi (the built-in views benchmark, bench/run_views_bench.sh) each rank also has an MPI
// thread: per iteration an MPI_Isend to the right neighbour and an MPI_Irecv from the left one
// (tags 0-3, comm 0, each with its own flow), the two MPI_Waits that complete them (carrying the
// request's flow, peer, tag and bytes, as the MPI capture records them), a blocking MPI_Send to
// the left and MPI_Recv from the right (tag 100), and an MPI_Allreduce (comm 0, seq = the
// iteration); rank 0's NEGOTIATE_ALLREDUCE spans hold one RANK_READY tick per rank (peer = the
// rank), as an imported Horovod timeline does; every 10 iterations each rank enters a new
// training step. No CSV is written in this mode: the views bench copies the database's own rows.
//
// Usage: db_bench_gen OUTDIR EVENTS [RANKS] [--no-csv] [--mpi]
//   writes OUTDIR/trace/rank-*/seg-*.tds and OUTDIR/events.csv
//   (columns rank,tid,name,ts,dur,depth; ts in ns since the Unix epoch)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/segment/segment_blocks.h"
#include "engine/segment/segment_writer.h"

using namespace tracedb::engine;

namespace {

constexpr int64_t kEpoch = 1700000000000000000;  // ns; the anchors map the clock 1:1 onto it
const char* const kNames[] = {"forward",     "backward",
                              "ALLREDUCE",   "NEGOTIATE_ALLREDUCE",
                              "QUEUE",       "MEMCPY_IN_FUSION_BUFFER",
                              "COMMUNICATE", "MEMCPY_OUT_FUSION_BUFFER",
                              "MPI_Isend",   "MPI_Irecv",
                              "MPI_Wait",    "MPI_Send",
                              "MPI_Recv",    "MPI_Allreduce",
                              "RANK_READY"};
enum MpiName { kIsend = 8, kIrecv, kWait, kSend, kRecv, kAllreduce, kRankReady };
constexpr int kThreads = 3;  // compute, communication, mpi

struct Rank {
  SegmentWriter writer;
  EventsBlockEncoder enc[kThreads];
  int64_t clock[kThreads] = {0, 0, 0};  // per thread: the time its next span may start
  uint64_t in_block[kThreads] = {0, 0, 0};
  uint64_t next_flow = 1;
  int64_t iteration = 0;
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
  bool csv_on = true, mpi = false;
  for (int i = 3; i < argc; ++i) {
    csv_on &= std::string(argv[i]) != "--no-csv";
    mpi |= std::string(argv[i]) == "--mpi";
  }
  csv_on &= !mpi;
  const int threads = mpi ? 3 : 2;
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
    if (mpi)
      EncodeThreads({{1, 100, "compute"}, {2, 101, "communication"}, {3, 102, "mpi"}}, &raw);
    else
      EncodeThreads({{1, 100, "compute"}, {2, 101, "communication"}}, &raw);
    x.writer.AppendBlock(BlockType::kThreads, raw, true);
    raw.clear();
    // Identity clock: realtime = kEpoch + local.
    EncodeAnchors({{kEpoch, 0, 10}}, &raw);
    x.writer.AppendBlock(BlockType::kAnchor, raw, false);
    for (int t = 0; t < threads; ++t) {
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
    for (int t = 0; t < threads; ++t) flush_block(r, t);
    const int64_t last = std::max({x.clock[0], x.clock[1], x.clock[2]}) + 1000000000;
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
  // MPI mode: an event with arguments (cat 4 = mpi unless given).
  auto emit_args = [&](int r, int t, EventKind kind, int name, int64_t ts, int64_t d,
                       const EventArgs& a, uint8_t cat = 4) {
    Rank& x = rs[static_cast<size_t>(r)];
    if (kind == EventKind::kComplete)
      x.enc[t].AddWithInt(kind, cat, ts, static_cast<uint32_t>(name + 1), 0, d, &a);
    else
      x.enc[t].Add(kind, cat, ts, static_cast<uint32_t>(name + 1), 0, &a);
    if (x.enc[t].count() == 65536) flush_block(r, t);
  };
  auto short_dur = [&] { return static_cast<int64_t>(500 + rng() % 20000); };
  // One iteration of rank r's MPI thread (7 events).
  auto mpi_iteration = [&](int r) {
    Rank& x = rs[static_cast<size_t>(r)];
    const int right = (r + 1) % ranks, left = (r + ranks - 1) % ranks;
    const int32_t tag = static_cast<int32_t>(x.iteration % 4);
    const uint64_t bytes = 1024u << (x.iteration % 8);
    int64_t ts = x.clock[2];
    auto args = [&](int32_t peer, int32_t tg, uint64_t b, uint64_t flow) {
      EventArgs a;
      a.mask = EventArgs::kPeer | EventArgs::kTag | EventArgs::kComm;
      a.peer = peer;
      a.tag = tg;
      a.comm = 0;
      if (b) a.mask |= EventArgs::kBytes, a.bytes = b;
      if (flow) a.mask |= EventArgs::kFlow, a.flow = flow;
      return a;
    };
    auto span = [&](int name, const EventArgs& a) {
      const int64_t d = short_dur();
      emit_args(r, 2, EventKind::kComplete, name, ts, d, a);
      ts += d + gap();
    };
    const uint64_t f_send = (static_cast<uint64_t>(r) << 40) | x.next_flow++;
    const uint64_t f_recv = (static_cast<uint64_t>(r) << 40) | x.next_flow++;
    span(kIsend, args(right, tag, bytes, f_send));
    span(kIrecv, args(left, tag, 0, f_recv));
    span(kWait, args(left, tag, bytes, f_recv));
    span(kWait, args(right, tag, bytes, f_send));
    span(kSend, args(left, 100, bytes, 0));
    span(kRecv, args(right, 100, bytes, 0));
    EventArgs coll;
    coll.mask = EventArgs::kComm | EventArgs::kSeq | EventArgs::kBytes;
    coll.comm = 0;
    coll.seq = static_cast<uint64_t>(x.iteration);
    coll.bytes = bytes;
    const int64_t d = dur();
    emit_args(r, 2, EventKind::kComplete, kAllreduce, ts, d, coll);
    x.clock[2] = ts + d + gap();
  };
  uint64_t made = 0;
  while (made < total) {
    for (int r = 0; r < ranks && made < total; ++r) {
      Rank& x = rs[static_cast<size_t>(r)];
      if (mpi && x.iteration % 10 == 0) {  // a new training step
        x.enc[0].AddWithInt(EventKind::kStep, 7, x.clock[0], 0, 0, x.iteration / 10, nullptr);
        if (x.enc[0].count() == 65536) flush_block(r, 0);
      }
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
        if (mpi && p == 0 && r == 0) {
          // Rank 0's negotiation: every rank's readiness tick, inside the span.
          for (int k = 0; k < ranks; ++k) {
            EventArgs a;
            a.mask = EventArgs::kPeer;
            a.peer = static_cast<int32_t>((k * 5 + x.iteration) % ranks);
            emit_args(r, 1, EventKind::kInstant, kRankReady,
                      ts + 1 + (phases[p] - 2) * (k + 1) / (ranks + 1), 0, a, 2);
          }
          made += static_cast<uint64_t>(ranks);
        }
        ts += phases[p] + 100;
      }
      x.clock[1] = start + sum + gap();
      made += 6;
      if (mpi) {
        mpi_iteration(r);
        made += 7;
      }
      ++x.iteration;
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
