// A recording process made to be killed: THREADS threads each emit complete events named
// "work" whose content is a function of a per-thread serial i (seq = thread << 32 | i,
// bytes = 7 * i + thread, dur = 1000 + i % 977 ns), paced so that the buffers never fill. The
// main thread calls tracedb_flush() in a loop; before each call it reads how many events every
// thread had emitted, and once the call has returned it appends those counts to LOG as one line
// "flush N C0 C1 ..." and fsyncs it. So every line of LOG is a promise: those events are in the
// segment files, whenever the process is killed afterwards.
// Usage: kill_program DIR LOG THREADS        (runs until killed; exit 1 on a recorder error)
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tracedb/recorder.h"

namespace {

struct alignas(64) Counter {
  std::atomic<uint64_t> emitted{0};
};

void Work(uint32_t thread, uint32_t name, Counter* c) {
  const std::string tname = "worker " + std::to_string(thread);
  tracedb_thread_name(tname.c_str());
  for (uint64_t i = 0;; ++i) {
    tracedb_args a = {};
    a.fields = TRACEDB_ARG_SEQ | TRACEDB_ARG_BYTES;
    a.seq = (static_cast<uint64_t>(thread) << 32) | i;
    a.bytes = 7 * i + thread;
    const int64_t now = tracedb_now();
    tracedb_complete_ex(name, TRACEDB_CAT_COMPUTE, 0, now, 1000 + static_cast<int64_t>(i % 977),
                        &a);
    c->emitted.store(i + 1, std::memory_order_release);
    // About 200K events/s per thread: far below what the flusher drains, so nothing is dropped.
    if (i % 64 == 63) std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s DIR LOG THREADS\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[3]);
  if (threads < 1 || threads > 64) {
    std::fprintf(stderr, "THREADS must be 1..64\n");
    return 2;
  }
  const int log = ::open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) {
    std::perror(argv[2]);
    return 1;
  }
  if (tracedb_start(argv[1]) != TRACEDB_OK) {
    std::fprintf(stderr, "cannot start recording into %s\n", argv[1]);
    return 1;
  }
  const uint32_t name = tracedb_intern("work");
  std::unique_ptr<Counter[]> counters(new Counter[threads]);
  for (int t = 0; t < threads; ++t) {
    std::thread(Work, static_cast<uint32_t>(t), name, &counters[t]).detach();
  }
  for (uint64_t n = 1;; ++n) {
    std::string line = "flush " + std::to_string(n);
    for (int t = 0; t < threads; ++t) {
      line += " " + std::to_string(counters[t].emitted.load(std::memory_order_acquire));
    }
    line += "\n";
    const int rc = tracedb_flush();
    if (rc != TRACEDB_OK) {
      std::fprintf(stderr, "tracedb_flush failed: %d\n", rc);
      return 1;
    }
    if (::write(log, line.data(), line.size()) != static_cast<ssize_t>(line.size()) ||
        ::fsync(log) != 0) {
      std::perror("log");
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(3 + n % 7));
  }
}
