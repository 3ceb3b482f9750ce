// One rank of the billion-event benchmark (bench/run_billion_bench.sh, docs/bench-billion.md):
// records EVENTS complete spans through the recorder's C ABI (libtracedb, the real recorder:
// per-thread buffers, the flusher, segment files), as one process of a 64-rank job.
//
// The job is Horovod-like, in steps of STEP_NS (400 ms) of virtual time that every rank shares
// (step s starts at BASE + s * STEP_NS on the recorder's clock, BASE given by the script):
//   lane 0 (the thread's track): forward (10 layer spans inside), backward (10 layer spans),
//     optimizer, then MPI_Allreduce (category MPI, world communicator 1, seq = step, bytes) from
//     this rank's arrival to the step's common end: 24 events;
//   lane "horovod": 12 tensors, each an ALLREDUCE span holding NEGOTIATE_ALLREDUCE, QUEUE,
//     MEMCPY_IN_FUSION_BUFFER, COMMUNICATE, MEMCPY_OUT_FUSION_BUFFER: 72 events.
// 96 events per step. Durations are random at ns resolution (log-uniform): COMMUNICATE from 1 µs
// to 20 ms (the 200M workload of issue 24), the other phases 1-500 µs, layers 10 µs-2 ms.
// Timestamps are given explicitly (tracedb_complete_ex), so recording runs flat out; the
// recorder's step markers carry the wall-clock time of the call, not the virtual one, so this
// job records none (a step's window is [BASE + s * STEP_NS, + STEP_NS)).
//
// Known answer: the 10 longest COMMUNICATE spans of the whole job are injected: the i-th
// (i = 0..9) on rank (7 i + 3) mod RANKS, at step (i + 1) * steps / 11, tensor i, with
// duration 25,000,000 + i * 1,000,003 ns (every random COMMUNICATE is ≤ 20 ms). Each rank
// prints the ones it recorded and its totals as JSON on stdout:
//   {"rank":R,"events":N,"steps":S,"written":W,"dropped":D,"injected":[[rank,step,dur],...]}
// EVENTS is exact: the last step is cut short where the count is reached.
//
// Usage: billion_gen DIR TOTAL_EVENTS RANKS BASE_NS   (rank from TRACEDB_RANK; this rank records
// TOTAL_EVENTS / RANKS, one more on the first TOTAL_EVENTS % RANKS ranks)
// Deterministic per rank (seeded by rank). A program; single-threaded.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tracedb/recorder.h"

namespace {

constexpr int64_t kStepNs = 400'000'000;
constexpr int64_t kArrivalEndNs = 390'000'000;  // the allreduce ends here in every step
constexpr int kLayers = 10;
constexpr int kTensors = 12;
constexpr int kEventsPerStep = 2 * (kLayers + 1) + 2 + kTensors * 6;  // 96
constexpr int kInjected = 10;
constexpr int64_t kInjectedBaseNs = 25'000'000;
constexpr int64_t kInjectedStepNs = 1'000'003;

// splitmix64: fast, good enough for durations.
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Unit() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }
  // Log-uniform in [lo, hi] ns.
  int64_t LogUniform(double lo, double hi) {
    return static_cast<int64_t>(std::exp(std::log(lo) + Unit() * (std::log(hi) - std::log(lo))));
  }
};

struct Names {
  uint32_t forward, backward, layer_fwd, layer_bwd, optimizer, allreduce_mpi;
  uint32_t allreduce, negotiate, queue, memcpy_in, communicate, memcpy_out;
};

class Rank {
 public:
  Rank(int rank, int ranks, int64_t base, uint64_t budget, int64_t steps_total)
      : rank_(rank), ranks_(ranks), base_(base), left_(budget), steps_total_(steps_total) {
    rng_.s = 0x1234567ull + static_cast<uint64_t>(rank) * 0x9e3779b97f4a7c15ull;
    n_.forward = tracedb_intern("forward");
    n_.backward = tracedb_intern("backward");
    n_.layer_fwd = tracedb_intern("layer_fwd");
    n_.layer_bwd = tracedb_intern("layer_bwd");
    n_.optimizer = tracedb_intern("optimizer");
    n_.allreduce_mpi = tracedb_intern("MPI_Allreduce");
    n_.allreduce = tracedb_intern("ALLREDUCE");
    n_.negotiate = tracedb_intern("NEGOTIATE_ALLREDUCE");
    n_.queue = tracedb_intern("QUEUE");
    n_.memcpy_in = tracedb_intern("MEMCPY_IN_FUSION_BUFFER");
    n_.communicate = tracedb_intern("COMMUNICATE");
    n_.memcpy_out = tracedb_intern("MEMCPY_OUT_FUSION_BUFFER");
    comm_lane_ = tracedb_lane("horovod");
  }

  bool Done() const { return left_ == 0; }
  uint64_t emitted() const { return emitted_; }
  const std::string& injected() const { return injected_; }

  void Step(int64_t s) {
    const int64_t b = base_ + s * kStepNs;
    // Lane 0: forward and backward (children end before their parent, as recorded live).
    int64_t t = b + 1000;
    t = Pass(n_.forward, n_.layer_fwd, t);
    t = Pass(n_.backward, n_.layer_bwd, t + 2000);
    const int64_t opt = rng_.LogUniform(10e3, 2e6);
    Emit(n_.optimizer, TRACEDB_CAT_COMPUTE, 0, t + 1000, opt, nullptr);
    const int64_t lane0_end = t + 1000 + opt;
    // Lane "horovod": the tensors' allreduces, one after the other.
    int64_t c = b + 5000;
    for (int k = 0; k < kTensors; ++k) {
      const int64_t start = c;
      int64_t p = start + 200;
      const uint32_t phases[5] = {n_.negotiate, n_.queue, n_.memcpy_in, n_.communicate,
                                  n_.memcpy_out};
      for (uint32_t ph : phases) {
        int64_t d = ph == n_.communicate ? rng_.LogUniform(1e3, 20e6) : rng_.LogUniform(1e3, 500e3);
        if (ph == n_.communicate) d = Injected(s, k, d);
        Emit(ph, TRACEDB_CAT_PHASE, comm_lane_, p, d, nullptr);
        p += d + 100 + static_cast<int64_t>(rng_.Next() % 400);
      }
      Emit(n_.allreduce, TRACEDB_CAT_COMM, comm_lane_, start, p - start, nullptr);
      c = p + 1000;
    }
    // The MPI allreduce of the step: from this rank's arrival to the common end.
    const int64_t arrive = (lane0_end > c ? lane0_end : c) + 500;
    tracedb_args a{};
    a.fields = TRACEDB_ARG_COMM | TRACEDB_ARG_SEQ | TRACEDB_ARG_BYTES;
    a.comm = 1;
    a.seq = static_cast<uint64_t>(s);
    a.bytes = 4u << 20;
    const int64_t end = b + kArrivalEndNs + static_cast<int64_t>(rng_.Next() % 2000);
    Emit(n_.allreduce_mpi, TRACEDB_CAT_MPI, 0, arrive, end - arrive, &a);
  }

 private:
  // A parent span with kLayers children back to back; returns its end.
  int64_t Pass(uint32_t parent, uint32_t child, int64_t t0) {
    int64_t t = t0 + 300;
    for (int i = 0; i < kLayers; ++i) {
      const int64_t d = rng_.LogUniform(10e3, 2e6);
      Emit(child, TRACEDB_CAT_COMPUTE, 0, t, d, nullptr);
      t += d + 50 + static_cast<int64_t>(rng_.Next() % 200);
    }
    t += 300;
    Emit(parent, TRACEDB_CAT_COMPUTE, 0, t0, t - t0, nullptr);
    return t;
  }

  int64_t Injected(int64_t s, int tensor, int64_t d) {
    for (int i = 0; i < kInjected; ++i) {
      if ((7 * i + 3) % ranks_ != rank_ || tensor != i) continue;
      if (s != (i + 1) * steps_total_ / (kInjected + 1)) continue;
      const int64_t dur = kInjectedBaseNs + i * kInjectedStepNs;
      if (left_ == 0) return d;  // not recorded: not claimed either
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s[%d,%lld,%lld]", injected_.empty() ? "" : ",", rank_,
                    static_cast<long long>(s), static_cast<long long>(dur));
      injected_ += buf;
      return dur;
    }
    return d;
  }

  void Emit(uint32_t name, uint32_t cat, uint32_t lane, int64_t ts, int64_t dur,
            const tracedb_args* args) {
    if (left_ == 0) return;
    tracedb_complete_ex(name, cat, lane, ts, dur, args);
    --left_;
    ++emitted_;
  }

  int rank_, ranks_;
  int64_t base_;
  uint64_t left_;
  int64_t steps_total_;
  uint64_t emitted_ = 0;
  Rng rng_{};
  Names n_{};
  uint32_t comm_lane_ = 0;
  std::string injected_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s DIR TOTAL_EVENTS RANKS BASE_NS\n", argv[0]);
    return 2;
  }
  const uint64_t total = std::strtoull(argv[2], nullptr, 10);
  const int ranks = std::atoi(argv[3]);
  const int64_t base = std::strtoll(argv[4], nullptr, 10);
  if (ranks <= 0 || base <= 0) {
    std::fprintf(stderr, "billion_gen: RANKS and BASE_NS must be positive\n");
    return 2;
  }
  if (tracedb_start(argv[1]) != TRACEDB_OK) {
    std::fprintf(stderr, "billion_gen: cannot record into %s\n", argv[1]);
    return 1;
  }
  const int rank = tracedb_rank();
  if (rank < 0 || rank >= ranks) {
    std::fprintf(stderr, "billion_gen: rank %d outside 0..%d (TRACEDB_RANK)\n", rank, ranks - 1);
    return 2;
  }
  const uint64_t u_ranks = static_cast<uint64_t>(ranks);
  const uint64_t events = total / u_ranks + (static_cast<uint64_t>(rank) < total % u_ranks ? 1 : 0);
  tracedb_comm_define(1, ranks, rank, nullptr);
  // Every rank's step count from the same formula, so the injected steps agree across ranks.
  const int64_t steps_total = static_cast<int64_t>(total / u_ranks / kEventsPerStep) + 1;
  Rank r(rank, ranks, base, events, steps_total);
  int64_t s = 0;
  for (; !r.Done(); ++s) r.Step(s);
  if (tracedb_stop() != TRACEDB_OK) {
    std::fprintf(stderr, "billion_gen: rank %d: tracedb_stop failed\n", rank);
    return 1;
  }
  tracedb_counters k{};
  tracedb_get_counters(&k);
  std::printf(
      "{\"rank\":%d,\"events\":%llu,\"steps\":%lld,\"written\":%llu,\"dropped\":%llu,"
      "\"write_errors\":%llu,\"injected\":[%s]}\n",
      rank, static_cast<unsigned long long>(r.emitted()), static_cast<long long>(s),
      static_cast<unsigned long long>(k.written), static_cast<unsigned long long>(k.dropped),
      static_cast<unsigned long long>(k.write_errors), r.injected().c_str());
  return k.dropped == 0 && k.write_errors == 0 ? 0 : 1;
}
