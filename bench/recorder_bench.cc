// Recorder benchmark (measures; not a test). Prints, as medians of several repetitions in one
// run:
//   - one clock read (clock_gettime(CLOCK_MONOTONIC), rdtsc, tracedb_now);
//   - ns per span (tracedb_begin + tracedb_end) on 1 and 2 threads while recording, and the
//     Horovod-style writer (mutex-guarded queue, writer thread, ostream JSON) as a peer;
//   - ns per span when stopped and outside the step window;
//   - flusher throughput: events written per second of the flusher thread's CPU time;
//   - segment bytes per event on a Horovod-like workload (per-tensor NEGOTIATE_ALLREDUCE, QUEUE,
//     MEMCPY_IN_FUSION_BUFFER, COMMUNICATE, MEMCPY_OUT_FUSION_BUFFER phases with realistic
//     durations), and the Horovod-style writer's JSON bytes per event on the same workload.
// LTTng-UST is measured by bench/lttng_bench (bench/run_recorder_bench.sh runs both).
//
// With --burst MB it measures only the burst of DESIGN.md instead, in a process of its own (so
// that its peak memory is its own): 4 threads x 250,000 complete events as fast as they can,
// with TRACEDB_BUFFER_MB=MB; it prints events written and dropped (the recorder's counters),
// the wall time of the burst, and the peak resident memory the session added.
//
// Usage: recorder_bench [--reps N] [--spans N] [--dir DIR] | --burst MB [--dir DIR]
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tracedb/recorder.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
double NsPerOp(uint64_t n, F&& f) {
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() /
         static_cast<double>(n);
}

// Keeps the compiler from dropping a computed value.
template <typename T>
void Keep(const T& v) {
  asm volatile("" : : "r,m"(v) : "memory");
}

uint64_t DirBytes(const std::string& dir) {
  uint64_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file()) n += e.file_size();
  }
  return n;
}

// The peer: a Horovod-style timeline writer (horovod/common/timeline.cc as Horovod describes it:
// records pushed to a mutex-guarded queue, a writer thread formats them with an ostream).
class HorovodStyleWriter {
 public:
  explicit HorovodStyleWriter(const std::string& path) : out_(path) {
    out_ << "[\n";
    writer_ = std::thread([this] { Loop(); });
  }
  ~HorovodStyleWriter() {
    {
      std::lock_guard<std::mutex> l(mu_);
      done_ = true;
    }
    cv_.notify_one();
    writer_.join();
  }
  void Write(char ph, const std::string& name, int pid) {
    const int64_t ts =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch())
            .count();
    {
      std::lock_guard<std::mutex> l(mu_);
      queue_.push_back(Rec{ph, name, pid, ts});
    }
    cv_.notify_one();
  }

 private:
  struct Rec {
    char ph;
    std::string name;
    int pid;
    int64_t ts;
  };
  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [&] { return done_ || !queue_.empty(); });
      std::deque<Rec> batch;
      batch.swap(queue_);
      const bool done = done_;
      l.unlock();
      for (const Rec& r : batch) {
        out_ << "{\"ph\": \"" << r.ph << "\"";
        if (r.ph == 'B') out_ << ", \"name\": \"" << r.name << "\"";
        out_ << ", \"ts\": " << r.ts << ", \"pid\": " << r.pid << "},\n";
      }
      l.lock();
      if (done && queue_.empty()) break;
    }
    out_.flush();
  }
  std::ofstream out_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Rec> queue_;
  bool done_ = false;
  std::thread writer_;
};

// Busy-waits about `ns` nanoseconds (the phases of the Horovod-like workload take real time).
void Spin(int64_t ns) {
  const auto until = Clock::now() + std::chrono::nanoseconds(ns);
  while (Clock::now() < until) {
  }
}

struct Workload {
  std::vector<std::string> tensors;
  std::vector<std::string> phases = {"NEGOTIATE_ALLREDUCE", "QUEUE", "MEMCPY_IN_FUSION_BUFFER",
                                     "COMMUNICATE", "MEMCPY_OUT_FUSION_BUFFER"};
  // Log-uniform phase durations in [min_ns, max_ns], as real phases spread over decades.
  int64_t min_ns = 500, max_ns = 50000;
};

// Runs the Horovod-like workload for `steps` steps; calls emit(kind, phase, tensor) where kind
// is 'B' (begin of op or phase) or 'E'.
template <typename Emit>
uint64_t RunWorkload(const Workload& w, int steps, Emit&& emit) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(std::log(static_cast<double>(w.min_ns)),
                                           std::log(static_cast<double>(w.max_ns)));
  uint64_t events = 0;
  for (int s = 0; s < steps; ++s) {
    for (size_t t = 0; t < w.tensors.size(); ++t) {
      emit('B', -1, t);  // the top-level ALLREDUCE of this tensor
      for (size_t p = 0; p < w.phases.size(); ++p) {
        emit('B', static_cast<int>(p), t);
        Spin(static_cast<int64_t>(std::exp(u(rng))));
        emit('E', static_cast<int>(p), t);
      }
      emit('E', -1, t);
      events += 2 * (w.phases.size() + 1);
    }
  }
  return events;
}

// A line of /proc/self/status ("VmRSS", "VmHWM"), in KiB.
long StatusKb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string k = std::string(key) + ":";
  while (std::getline(f, line)) {
    if (line.compare(0, k.size(), k) == 0) return std::atol(line.c_str() + k.size());
  }
  return -1;
}

int RunBurst(const std::string& budget_mb, const std::string& dir) {
  constexpr int kThreads = 4;
  constexpr int kEvents = 250000;
  std::filesystem::remove_all(dir);
  setenv("TRACEDB_BUFFER_MB", budget_mb.c_str(), 1);
  const long rss0 = StatusKb("VmRSS");
  if (tracedb_start(dir.c_str()) != TRACEDB_OK) {
    std::fprintf(stderr, "cannot record into %s\n", dir.c_str());
    return 1;
  }
  const uint32_t name = tracedb_intern("burst");
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kEvents; ++i) tracedb_complete(name, tracedb_now(), 10);
    });
  }
  const auto t0 = Clock::now();
  go.store(true);
  for (auto& t : threads) t.join();
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  tracedb_stop();
  const long hwm = StatusKb("VmHWM");
  tracedb_counters c;
  tracedb_get_counters(&c);
  std::printf(
      "burst %d x %d complete events, TRACEDB_BUFFER_MB=%s: written %llu dropped %llu "
      "emitted %d, %.1f ms, peak RSS added %.1f MiB\n",
      kThreads, kEvents, budget_mb.c_str(), static_cast<unsigned long long>(c.written),
      static_cast<unsigned long long>(c.dropped), kThreads * kEvents, ms,
      static_cast<double>(hwm - rss0) / 1024.0);
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 7;
  uint64_t spans = 32768;  // per batch: 1 MiB of records, far within the budget: nothing dropped
  int batches = 32;
  std::string dir = "/tmp/tracedb-recorder-bench";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (a == "--batches")
      batches = std::atoi(argv[i + 1]);
    else if (a == "--dir")
      dir = argv[i + 1];
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--burst") return RunBurst(argv[i + 1], dir);
  }
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const uint64_t n = spans * static_cast<uint64_t>(batches);

  // ---- clock reads ----
  std::vector<double> cg, tsc, now;
  for (int r = 0; r < reps; ++r) {
    cg.push_back(NsPerOp(n, [&] {
      timespec ts;
      for (uint64_t i = 0; i < n; ++i) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        Keep(ts);
      }
    }));
    tsc.push_back(NsPerOp(n, [&] {
#if defined(__x86_64__)
      for (uint64_t i = 0; i < n; ++i) Keep(__rdtsc());
#elif defined(__aarch64__)
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t v;
        asm volatile("mrs %0, cntvct_el0" : "=r"(v));
        Keep(v);
      }
#endif
    }));
    now.push_back(NsPerOp(n, [&] {
      for (uint64_t i = 0; i < n; ++i) Keep(tracedb_now());
    }));
  }
  const double clock_ns = Median(cg), tsc_ns = Median(tsc), now_ns = Median(now);

  // ---- spans while recording ----
  if (tracedb_start((dir + "/spans").c_str()) != TRACEDB_OK) {
    std::fprintf(stderr, "cannot start recording in %s\n", dir.c_str());
    return 1;
  }
  const uint32_t name = tracedb_intern("span");
  // Each batch is timed on its own and the median over all batches of all repetitions is
  // reported: a VM's noise hits single batches, not the median.
  std::mutex batch_mu;
  auto span_batches = [&](std::vector<double>* out) {
    std::vector<double> mine;
    for (int b = 0; b < batches; ++b) {
      mine.push_back(NsPerOp(spans, [&] {
        for (uint64_t i = 0; i < spans; ++i) {
          tracedb_begin(name);
          tracedb_end(name);
        }
      }));
      tracedb_flush();  // not timed: empties the ring so that no event is dropped
    }
    std::lock_guard<std::mutex> l(batch_mu);
    out->insert(out->end(), mine.begin(), mine.end());
  };
  std::vector<double> one, two;
  for (int r = 0; r < reps; ++r) span_batches(&one);
  for (int r = 0; r < reps; ++r) {
    std::thread t1([&] { span_batches(&two); });
    std::thread t2([&] { span_batches(&two); });
    t1.join();
    t2.join();
  }
  tracedb_counters c1;
  tracedb_get_counters(&c1);

  // Sustained: flat out with no pauses; the flusher's CPU time gives its throughput.
  const uint64_t before_written = c1.written, before_cpu = c1.flusher_cpu_ns;
  const uint64_t sustained = 20000000;
  const double sustained_ns = NsPerOp(sustained, [&] {
    for (uint64_t i = 0; i < sustained; ++i) {
      tracedb_begin(name);
      tracedb_end(name);
    }
  });
  tracedb_stop();
  tracedb_counters c2;
  tracedb_get_counters(&c2);
  const double flusher_events = static_cast<double>(c2.written - before_written);
  const double flusher_cpu_s = static_cast<double>(c2.flusher_cpu_ns - before_cpu) / 1e9;
  const double dropped_pct =
      100.0 * static_cast<double>(c2.dropped - c1.dropped) / static_cast<double>(2 * sustained);

  // ---- stopped and outside the step window ----
  std::vector<double> stopped, outside;
  for (int r = 0; r < reps; ++r) {
    stopped.push_back(NsPerOp(n, [&] {
      for (uint64_t i = 0; i < n; ++i) {
        tracedb_begin(name);
        tracedb_end(name);
      }
    }));
  }
  setenv("TRACEDB_START_STEP", "1000000", 1);
  setenv("TRACEDB_END_STEP", "1000001", 1);
  tracedb_start((dir + "/window").c_str());
  tracedb_step(1);
  for (int r = 0; r < reps; ++r) {
    outside.push_back(NsPerOp(n, [&] {
      for (uint64_t i = 0; i < n; ++i) {
        tracedb_begin(name);
        tracedb_end(name);
      }
    }));
  }
  tracedb_stop();
  unsetenv("TRACEDB_START_STEP");
  unsetenv("TRACEDB_END_STEP");

  // ---- the Horovod-style writer: per-span cost ----
  std::vector<double> hvd;
  {
    HorovodStyleWriter w(dir + "/hvd-spans.json");
    const std::string op = "MPI_ALLREDUCE";
    for (int r = 0; r < reps; ++r) {
      hvd.push_back(NsPerOp(n / 4, [&] {
        for (uint64_t i = 0; i < n / 4; ++i) {
          w.Write('B', op, 1);
          w.Write('E', op, 1);
        }
      }));
    }
  }

  // ---- bytes per event on the Horovod-like workload ----
  Workload wl;
  for (int t = 0; t < 16; ++t)
    wl.tensors.push_back("DistributedAdam/grad_layer" + std::to_string(t));
  const int steps = 300;
  tracedb_start((dir + "/horovod-like").c_str());
  std::vector<uint32_t> lanes, phase_names;
  for (const auto& t : wl.tensors) lanes.push_back(tracedb_lane(t.c_str()));
  for (const auto& p : wl.phases) phase_names.push_back(tracedb_intern(p.c_str()));
  const uint32_t allreduce = tracedb_intern("ALLREDUCE");
  const uint64_t wl_events = RunWorkload(wl, steps, [&](char k, int phase, size_t t) {
    const uint32_t nm = phase < 0 ? allreduce : phase_names[static_cast<size_t>(phase)];
    if (k == 'B')
      tracedb_begin_ex(nm, TRACEDB_CAT_PHASE, lanes[t], nullptr);
    else
      tracedb_end_ex(nm, TRACEDB_CAT_PHASE, lanes[t], nullptr);
  });
  tracedb_stop();
  tracedb_counters c3;
  tracedb_get_counters(&c3);
  const uint64_t seg_bytes = DirBytes(dir + "/horovod-like");
  {
    HorovodStyleWriter w(dir + "/horovod-like.json");
    RunWorkload(wl, steps, [&](char k, int phase, size_t t) {
      w.Write(k, phase < 0 ? "ALLREDUCE" : wl.phases[static_cast<size_t>(phase)],
              static_cast<int>(t) + 1);
    });
  }
  const uint64_t json_bytes = std::filesystem::file_size(dir + "/horovod-like.json");

  const double span_one = Median(one), span_two = Median(two);
  std::printf(
      "tracedb recorder benchmark (medians of %d repetitions of %llu spans; spans\n"
      "recorded in batches of %llu, each timed, with an untimed flush in between)\n\n",
      reps, static_cast<unsigned long long>(n), static_cast<unsigned long long>(spans));
  std::printf("%-58s %10s\n", "measure", "value");
  std::printf("%-58s %8.1f ns\n", "clock read: clock_gettime(CLOCK_MONOTONIC)", clock_ns);
  std::printf("%-58s %8.1f ns\n", "clock read: rdtsc", tsc_ns);
  std::printf("%-58s %8.1f ns\n", "clock read: tracedb_now()", now_ns);
  std::printf("%-58s %8.1f ns\n", "span (begin+end), recording, 1 thread", span_one);
  std::printf("%-58s %8.1f ns\n", "span (begin+end), recording, 2 threads (per thread)", span_two);
  std::printf("%-58s %8.1f ns  (%.1f%% dropped)\n", "span, sustained 20M spans flat out, 1 thread",
              sustained_ns, dropped_pct);
  std::printf("%-58s %8.2f ns\n", "span when stopped", Median(stopped));
  std::printf("%-58s %8.2f ns\n", "span outside the step window", Median(outside));
  std::printf("%-58s %8.1f ns\n", "peer: Horovod-style writer, span (B+E)", Median(hvd));
  std::printf("%-58s %8.1f M events/s\n", "flusher: events per second of flusher CPU",
              flusher_events / flusher_cpu_s / 1e6);
  std::printf("%-58s %8.2f B\n", "Horovod-like workload: segment bytes per event",
              static_cast<double>(seg_bytes) / static_cast<double>(wl_events));
  std::printf("%-58s %8.2f B\n", "Horovod-like workload: segment bytes per span",
              2.0 * static_cast<double>(seg_bytes) / static_cast<double>(wl_events));
  std::printf("%-58s %8.2f B\n", "peer: Horovod-style JSON bytes per event",
              static_cast<double>(json_bytes) / static_cast<double>(wl_events));
  std::printf("\nratios\n");
  std::printf("  span / (2 x clock_gettime + 10 ns)       %6.2f   (target <= 1)\n",
              span_one / (2 * clock_ns + 10));
  std::printf("  span / (2 x tracedb_now + 10 ns)         %6.2f   (target <= 1)\n",
              span_one / (2 * now_ns + 10));
  std::printf("  Horovod-style writer / tracedb span      %6.1fx\n", Median(hvd) / span_one);
  std::printf("  Horovod-style JSON / tracedb segments    %6.1fx bytes\n",
              static_cast<double>(json_bytes) / static_cast<double>(seg_bytes));
  std::printf("  (workload: %llu events, %llu dropped)\n",
              static_cast<unsigned long long>(wl_events),
              static_cast<unsigned long long>(c3.dropped - c2.dropped));
  std::filesystem::remove_all(dir);
  return 0;
}
