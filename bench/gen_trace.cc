// Writes synthetic traces for the import benchmark (bench/import_bench.py).
//
// horovod (default): a job of 8 ranks allreducing 160 gradients step after step, as Horovod's
// timeline.cc writes it: per tensor a process_name/process_sort_index pair on first use; per
// allreduce a NEGOTIATE_ALLREDUCE span holding one rank-ready tick per rank, then ALLREDUCE holding
// its activities (WAIT_FOR_DATA, MEMCPY_IN_FUSION_BUFFER, NCCL_ALLREDUCE,
// MEMCPY_OUT_FUSION_BUFFER), whose end carries dtype and shape; a CYCLE_START marker per cycle. The
// new framing (v0.20.1+): a pid-0 header with the epoch anchor, records back to back, metadata
// lines ending ",\n", and a closing "]" so that other JSON readers (DuckDB) can read it; --old
// writes the old framing (one record per line, never closed).
//
// --kineto: a PyTorch-profiler trace of one rank: the object form with distributedInfo, X events
// with fractional-µs ts/dur and Kineto's args (External id, Input Dims, correlation…) on two CPU
// threads and two GPU streams, ProfilerStep#N spans, NCCL kernels with the collective args, and
// the M records at the end, as Kineto writes them; events are not in start order across threads.
// --kineto --flows adds Kineto's "ac2g" flow pairs: an "s" at each cudaLaunchKernel and an "f"
// (bp "e") at its kernel, with the correlation id as the flow id (two more rows per CPU op).
//
// --chrome: a generic Chrome trace with arguments (the array form, no metadata, ~140 bytes per
// event), as a tool other than tracedb writes one: 8 ranks (pid), each with a compute thread
// (forward/backward spans) and a communication thread where each ALLREDUCE span holds
// NEGOTIATE_ALLREDUCE, QUEUE, MEMCPY_IN_FUSION_BUFFER, COMMUNICATE and MEMCPY_OUT_FUSION_BUFFER
// (the names of bench/db_bench_gen), log-uniform durations from 1 µs to 20 ms with ns digits,
// args {"bytes", "peer", "tag"} on each event; ranks interleaved in the file.
//
// Prints "N records, R rows": R is the rows an importer should write, counted here as the file
// is written (a B/E pair is one span, an X, an instant or a flow end-point one row, an M record
// none), so that a benchmark can check an import against the generator's own count.
//
// Usage: gen_trace OUT.json [EVENTS=2000000] [--old | --kineto [--flows] | --chrome]
// Deterministic (fixed seed). Thread safety: a program.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

namespace {

constexpr int kRanks = 8;
constexpr int kTensors = 160;
constexpr int kTensorsPerCycle = 16;
const char* const kActivities[] = {"WAIT_FOR_DATA", "MEMCPY_IN_FUSION_BUFFER", "NCCL_ALLREDUCE",
                                   "MEMCPY_OUT_FUSION_BUFFER"};

class Writer {
 public:
  Writer(FILE* f, bool old_framing) : f_(f), old_(old_framing) {}
  // One event record (events are written back to back in the new framing).
  // `row`: the record is a row of its own (B, X, i); an E closes its B's row.
  void Event(const std::string& rec, bool row = true) {
    Put(rec, /*metadata=*/false);
    rows_ += row ? 1 : 0;
  }
  void Meta(const std::string& rec) { Put(rec, /*metadata=*/true); }
  void Finish() {
    if (!old_ && !first_) std::fputs("]", f_);
  }
  uint64_t events() const { return events_; }
  uint64_t rows() const { return rows_; }

 private:
  void Put(const std::string& rec, bool metadata) {
    if (first_) {
      std::fputs("[\n", f_);
      first_ = false;
    } else if (!old_) {
      std::fputs(last_meta_ ? ",\n" : ",", f_);
    }
    std::fputs(rec.c_str(), f_);
    if (old_) std::fputs(",\n", f_);
    last_meta_ = metadata;
    ++events_;
  }
  FILE* f_;
  bool old_;
  bool first_ = true;
  bool last_meta_ = false;
  uint64_t events_ = 0;
  uint64_t rows_ = 0;
};

// The kineto trace (see the file comment); returns the number of events written.
// *rows gets the rows the trace holds (every X and flow record).
uint64_t WriteKineto(FILE* f, uint64_t target, bool flows, uint64_t* rows) {
  std::mt19937_64 rng(7);
  std::fputs(
      "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA "
      "A100-SXM4-40GB\", \"totalGlobalMem\": 42314694656}],\n  \"distributedInfo\": "
      "{\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 8},\n  \"traceEvents\": [\n",
      f);
  uint64_t n = 0;
  double t = 1000.0;
  char buf[1024];
  auto emit = [&](const char* rec) {
    std::fputs(n ? ",\n  " : "  ", f);
    std::fputs(rec, f);
    ++n;
  };
  // (n grows in emit(): a condition clang's loop analysis cannot see change, hence the break.)
  for (int64_t step = 1;; ++step) {
    if (n >= target) break;
    const double step_start = t;
    // One step: ops on the main thread, their kernels on stream 7, an allreduce on stream 20.
    for (int op = 0; op < 200 && n < target; ++op) {
      const int tid = op % 5 == 4 ? 102 : 101;
      const double dur = 5.0 + static_cast<double>(rng() % 40000) / 1000.0;
      std::snprintf(buf, sizeof(buf),
                    "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::op%d\", \"pid\": 100, "
                    "\"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"External id\": %llu, "
                    "\"Input Dims\": [[%d, 64], [64]], \"Input type\": [\"float\", \"float\"]}}",
                    op % 23, tid, t, dur, static_cast<unsigned long long>(n), 1 + op % 128);
      emit(buf);
      std::snprintf(buf, sizeof(buf),
                    "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", "
                    "\"pid\": 100, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": "
                    "{\"correlation\": %llu, \"External id\": %llu}}",
                    tid, t + 1.001, 2.5, static_cast<unsigned long long>(n),
                    static_cast<unsigned long long>(n));
      emit(buf);
      if (flows) {
        std::snprintf(buf, sizeof(buf),
                      "{\"ph\": \"s\", \"id\": %llu, \"pid\": 100, \"tid\": %d, \"ts\": %.3f, "
                      "\"cat\": \"ac2g\", \"name\": \"ac2g\"}",
                      static_cast<unsigned long long>(n - 1), tid, t + 1.001);
        emit(buf);
      }
      const unsigned long long corr = flows ? n - 2 : n;
      const double kernel_ts = t + 4.25 + static_cast<double>(op);
      std::snprintf(
          buf, sizeof(buf),
          "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void gemm_kernel<%d>(float*, "
          "float const*)\", \"pid\": 0, \"tid\": 7, \"ts\": %.3f, \"dur\": %.3f, \"args\": "
          "{\"device\": 0, \"stream\": 7, \"correlation\": %llu, \"grid\": [%d, 1, 1], "
          "\"block\": [256, 1, 1]}}",
          op % 9, kernel_ts, dur / 2, corr, 1 + op % 80);
      emit(buf);
      if (flows) {
        std::snprintf(buf, sizeof(buf),
                      "{\"ph\": \"f\", \"id\": %llu, \"pid\": 0, \"tid\": 7, \"ts\": %.3f, "
                      "\"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}",
                      corr, kernel_ts);
        emit(buf);
      }
      if (op % 50 == 49) {
        std::snprintf(
            buf, sizeof(buf),
            "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": "
            "\"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, "
            "ncclWork*)\", \"pid\": 0, \"tid\": 20, \"ts\": %.3f, \"dur\": %.3f, "
            "\"args\": {\"device\": 0, \"stream\": 20, \"Collective name\": \"allreduce\", "
            "\"In msg nelems\": %d, \"Out msg nelems\": %d, \"Group size\": 8, \"dtype\": "
            "\"Float\", \"Process Group Name\": \"0\", \"Seq\": %lld}}",
            t + 10.5, 300.25, 1 << (10 + op % 11), 1 << (10 + op % 11),
            static_cast<long long>(step * 4 + op / 50));
        emit(buf);
      }
      t += dur + 0.5;
    }
    std::snprintf(buf, sizeof(buf),
                  "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#%lld\", "
                  "\"pid\": 100, \"tid\": 101, \"ts\": %.3f, \"dur\": %.3f, \"args\": "
                  "{\"External id\": %llu}}",
                  static_cast<long long>(step), step_start - 0.5, t - step_start + 1.0,
                  static_cast<unsigned long long>(n));
    emit(buf);
    t += 20.0;
  }
  std::fputs(
      ",\n  {\"ph\": \"M\", \"name\": \"process_labels\", \"pid\": 0, \"tid\": 0, \"args\": "
      "{\"labels\": \"GPU 0\"}},\n  {\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 100, "
      "\"tid\": 101, \"args\": {\"name\": \"thread 101 (python)\"}}\n  ],\n  "
      "\"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": 1700000000000000000\n}\n",
      f);
  *rows = n;  // every record above is an X or a flow end-point
  return n + 2;
}

// The generic trace (see the file comment); returns the number of events written (all rows).
uint64_t WriteChrome(FILE* f, uint64_t target) {
  std::mt19937_64 rng(11);
  // Log-uniform in [1 µs, 20 ms], in ns.
  auto dur = [&]() {
    const double u = static_cast<double>(rng() >> 11) / 9007199254740992.0;
    return static_cast<int64_t>(1000.0 * std::exp(u * std::log(20000.0)));
  };
  constexpr int kChromeRanks = 8;
  int64_t t[kChromeRanks];
  for (int r = 0; r < kChromeRanks; ++r) t[r] = 1000000 + r * 137;
  uint64_t n = 0;
  char buf[512];
  auto us = [](int64_t ns, char* out) {
    std::snprintf(out, 32, "%lld.%03lld", static_cast<long long>(ns / 1000),
                  static_cast<long long>(ns % 1000));
  };
  auto emit = [&](int rank, int tid, const char* name, const char* cat, int64_t ts, int64_t d,
                  long long bytes, int peer, int tag) {
    char a[32], b[32];
    us(ts, a);
    us(d, b);
    std::snprintf(buf, sizeof(buf),
                  "%s{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%s,\"dur\":%s,\"name\":\"%s\","
                  "\"cat\":\"%s\",\"args\":{\"bytes\":%lld,\"peer\":%d,\"tag\":%d}}",
                  n ? ",\n" : "[\n", rank, tid, a, b, name, cat, bytes, peer, tag);
    std::fputs(buf, f);
    ++n;
  };
  const char* const kComm[] = {"NEGOTIATE_ALLREDUCE", "QUEUE", "MEMCPY_IN_FUSION_BUFFER",
                               "COMMUNICATE", "MEMCPY_OUT_FUSION_BUFFER"};
  for (uint64_t it = 0;; ++it) {
    if (n >= target) break;  // n grows in emit()
    for (int r = 0; r < kChromeRanks && n < target; ++r) {
      const long long bytes = 1LL << (10 + static_cast<int>(rng() % 14));
      const int peer = static_cast<int>((static_cast<uint64_t>(r) + 1 + it) % kChromeRanks);
      const int tag = static_cast<int>(it % 64);
      // The compute thread: forward then backward.
      const int64_t fwd = dur(), bwd = dur();
      emit(r, 1, "forward", "compute", t[r], fwd, 0, -1, tag);
      emit(r, 1, "backward", "compute", t[r] + fwd + 10, bwd, 0, -1, tag);
      // The communication thread: ALLREDUCE holding its five phases back to back.
      int64_t parts[5], total = 0;
      for (int64_t& p : parts) total += (p = dur());
      const int64_t start = t[r] + fwd;
      emit(r, 2, "ALLREDUCE", "comm", start, total + 6 * 50, bytes, peer, tag);
      int64_t at = start + 50;
      for (int k = 0; k < 5; ++k) {
        emit(r, 2, kComm[k], "comm", at, parts[k], bytes, peer, tag);
        at += parts[k] + 50;
      }
      t[r] = std::max(t[r] + fwd + bwd + 20, start + total + 400);
    }
  }
  std::fputs("\n]\n", f);
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s OUT.json [EVENTS=2000000] [--old | --kineto [--flows] | --chrome]\n",
                 argv[0]);
    return 2;
  }
  uint64_t target = 2000000;
  bool old_framing = false;
  bool kineto = false;
  bool flows = false;
  bool chrome = false;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--old") == 0) {
      old_framing = true;
    } else if (std::strcmp(argv[i], "--kineto") == 0) {
      kineto = true;
    } else if (std::strcmp(argv[i], "--chrome") == 0) {
      chrome = true;
    } else if (std::strcmp(argv[i], "--flows") == 0) {
      flows = true;
    } else {
      target = std::strtoull(argv[i], nullptr, 10);
    }
  }
  FILE* f = std::fopen(argv[1], "w");
  if (f == nullptr) {
    std::perror(argv[1]);
    return 1;
  }
  std::setvbuf(f, nullptr, _IOFBF, 1 << 20);
  if (chrome) {
    const uint64_t n = WriteChrome(f, target);
    if (std::fclose(f) != 0) {
      std::perror(argv[1]);
      return 1;
    }
    std::printf("%llu records, %llu rows\n", static_cast<unsigned long long>(n),
                static_cast<unsigned long long>(n));
    return 0;
  }
  if (kineto) {
    uint64_t rows = 0;
    const uint64_t n = WriteKineto(f, target, flows, &rows);
    if (std::fclose(f) != 0) {
      std::perror(argv[1]);
      return 1;
    }
    std::printf("%llu records, %llu rows\n", static_cast<unsigned long long>(n),
                static_cast<unsigned long long>(rows));
    return 0;
  }
  std::mt19937_64 rng(42);
  Writer w(f, old_framing);
  if (!old_framing) {
    w.Meta(
        "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "
        "{\"start_time_since_epoch_in_micros\":1633449303945695}}");
    w.Meta(
        "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"sort_index\": "
        "0}}");
  }
  int64_t ts = 3585422;
  bool seen[kTensors + 1] = {};
  char buf[512];
  for (uint64_t op = 0; w.events() < target; ++op) {
    const int pid = 1 + static_cast<int>(op % kTensors);
    if (op % kTensorsPerCycle == 0) {
      std::snprintf(buf, sizeof(buf),
                    "{\"ph\": \"i\", \"name\": \"CYCLE_START\", \"ts\": %lld, \"s\": \"g\"}",
                    static_cast<long long>(ts++));
      w.Event(buf);
    }
    if (!seen[pid]) {
      seen[pid] = true;
      std::snprintf(buf, sizeof(buf),
                    "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": "
                    "\"DistributedAdamOptimizer_Allreduce/HorovodAllreduce_gradients_layer%d_"
                    "conv_Conv2D_grad_Conv2DBackpropFilter_0\"}}",
                    pid, pid);
      w.Meta(buf);
      std::snprintf(buf, sizeof(buf),
                    "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, \"args\": "
                    "{\"sort_index\": %d}}",
                    pid, pid);
      w.Meta(buf);
    }
    std::snprintf(buf, sizeof(buf),
                  "{\"ph\": \"B\", \"name\": \"NEGOTIATE_ALLREDUCE\", \"ts\": %lld, \"pid\": %d}",
                  static_cast<long long>(ts), pid);
    w.Event(buf);
    for (int r = 0; r < kRanks; ++r) {
      ts += static_cast<int64_t>(rng() % 40);
      std::snprintf(buf, sizeof(buf),
                    "{\"ph\": \"X\", \"name\": \"%d\", \"ts\": %lld, \"pid\": %d, \"dur\": 0}",
                    static_cast<int>((r * 5 + op) % kRanks), static_cast<long long>(ts), pid);
      w.Event(buf);
    }
    ts += 1 + static_cast<int64_t>(rng() % 5);
    std::snprintf(buf, sizeof(buf), "{\"ph\": \"E\", \"ts\": %lld, \"pid\": %d}",
                  static_cast<long long>(ts), pid);
    w.Event(buf, /*row=*/false);
    std::snprintf(buf, sizeof(buf),
                  "{\"ph\": \"B\", \"name\": \"ALLREDUCE\", \"ts\": %lld, \"pid\": %d}",
                  static_cast<long long>(++ts), pid);
    w.Event(buf);
    for (const char* a : kActivities) {
      std::snprintf(buf, sizeof(buf),
                    "{\"ph\": \"B\", \"name\": \"%s\", \"ts\": %lld, \"pid\": %d}", a,
                    static_cast<long long>(++ts), pid);
      w.Event(buf);
      ts += 1 + static_cast<int64_t>(rng() % 300);
      std::snprintf(buf, sizeof(buf), "{\"ph\": \"E\", \"ts\": %lld, \"pid\": %d}",
                    static_cast<long long>(ts), pid);
      w.Event(buf, /*row=*/false);
    }
    std::snprintf(buf, sizeof(buf),
                  "{\"ph\": \"E\", \"ts\": %lld, \"pid\": %d, \"args\": {\"dtype\": \"float32\", "
                  "\"shape\": \"[%d, %d]\"}}",
                  static_cast<long long>(++ts), pid, 64 * (1 + pid % 7), 3 * (1 + pid % 5));
    w.Event(buf, /*row=*/false);
  }
  w.Finish();
  if (std::fclose(f) != 0) {
    std::perror(argv[1]);
    return 1;
  }
  std::printf("%llu records, %llu rows\n", static_cast<unsigned long long>(w.events()),
              static_cast<unsigned long long>(w.rows()));
  return 0;
}
