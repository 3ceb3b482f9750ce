// A recorded workload for compaction tests: THREADS threads each emit SPANS nested spans
// (step > phase > COMMUNICATE with typed args, on the thread and on per-tensor lanes), instants,
// counters and complete events named "allreduce" with known durations whose `seq` argument is
// a unique serial. Prints what it emitted, for the test to compare with the database:
//   rows N                    rows the database must hold for this process
//   top SEQ DUR               the 10 longest "allreduce" events (seq, dur), longest first
// Usage: workload_program DIR THREADS SPANS [RANK]   (env WORKLOAD_PAUSE_MS, default 2)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tracedb/recorder.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s DIR THREADS SPANS [RANK]\n", argv[0]);
    return 2;
  }
  if (argc > 4) setenv("TRACEDB_RANK", argv[4], 1);
  const int threads = std::atoi(argv[2]);
  const int spans = std::atoi(argv[3]);
  // WORKLOAD_PAUSE_MS: the pause after every 1000 spans (default 2), to stretch the job.
  const char* pause_env = std::getenv("WORKLOAD_PAUSE_MS");
  const int pause_ms = pause_env ? std::atoi(pause_env) : 2;
  if (tracedb_start(argv[1]) != TRACEDB_OK) {
    std::fprintf(stderr, "cannot start recording into %s\n", argv[1]);
    return 1;
  }
  const uint32_t step = tracedb_intern("train_step");
  const uint32_t fwd = tracedb_intern("forward");
  const uint32_t comm = tracedb_intern("COMMUNICATE");
  const uint32_t ar = tracedb_intern("allreduce");
  const uint32_t tick = tracedb_intern("tick");
  const uint32_t loss = tracedb_intern("loss");
  std::mutex mu;
  std::vector<std::pair<int64_t, uint64_t>> durations;  // (dur, seq)
  uint64_t rows = 0;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      char lane_name[32];
      std::snprintf(lane_name, sizeof(lane_name), "tensor.%d", t % 3);
      const uint32_t lane = tracedb_lane(lane_name);
      std::vector<std::pair<int64_t, uint64_t>> mine;
      uint64_t my_rows = 0;
      for (int i = 0; i < spans; ++i) {
        const uint64_t serial = static_cast<uint64_t>(t) * 1000000 + static_cast<uint64_t>(i);
        tracedb_begin_ex(step, TRACEDB_CAT_PHASE, 0, nullptr);
        tracedb_begin_ex(fwd, TRACEDB_CAT_COMPUTE, 0, nullptr);
        tracedb_end(fwd);
        tracedb_args a{};
        a.fields = TRACEDB_ARG_BYTES | TRACEDB_ARG_PEER;
        a.bytes = 4096u * static_cast<uint64_t>(i % 7 + 1);
        a.peer = (t + 1) % threads;
        tracedb_begin_ex(comm, TRACEDB_CAT_COMM, lane, &a);
        tracedb_end_ex(comm, TRACEDB_CAT_COMM, lane, nullptr);
        const int64_t dur = 1000 * (1 + static_cast<int64_t>((serial * 7919) % 20000));
        tracedb_args s{};
        s.fields = TRACEDB_ARG_SEQ;
        s.seq = serial;
        tracedb_complete_ex(ar, TRACEDB_CAT_MPI, 0, tracedb_now() - dur, dur, &s);
        tracedb_instant(tick);
        tracedb_counter(loss, 1.0 / (i + 1));
        tracedb_end(step);
        my_rows += 6;  // step, forward, COMMUNICATE, allreduce, tick, loss
        mine.emplace_back(dur, serial);
        // Let the flusher keep up: this workload must not drop anything.
        if (i % 1000 == 999) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
      }
      std::lock_guard<std::mutex> lock(mu);
      rows += my_rows;
      durations.insert(durations.end(), mine.begin(), mine.end());
    });
  }
  for (auto& th : pool) th.join();
  tracedb_stop();
  tracedb_counters c;
  tracedb_get_counters(&c);
  if (c.dropped != 0) {
    std::fprintf(stderr, "dropped %llu events; the test needs none\n",
                 static_cast<unsigned long long>(c.dropped));
    return 3;
  }
  std::sort(durations.rbegin(), durations.rend());
  std::printf("rows %llu\n", static_cast<unsigned long long>(rows));
  for (size_t i = 0; i < 10 && i < durations.size(); ++i) {
    std::printf("top %llu %lld\n", static_cast<unsigned long long>(durations[i].second),
                static_cast<long long>(durations[i].first));
  }
  return 0;
}
