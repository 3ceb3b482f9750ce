// A long training job for the archival soak (bench/archive_soak.sh): one thread records STEPS
// steps with the real recorder, each a tracedb_step() marker and SPANS spans in a forward /
// backward / allreduce pattern (allreduce carries bytes = its step), then sleeps PAUSE_US. A
// step stands for one second of a real job, so 3,600 steps are an hour of simulated job time
// recorded in a few seconds. At the end it prints what it emitted, the reference the soak checks
// the database's summaries against:
//   steps N
//   events N            span events (begin+end pairs count once), step markers not included
//   dropped N           events the recorder reports dropped (full buffers)
// Usage: soak_program DIR STEPS SPANS PAUSE_US
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "tracedb/recorder.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s DIR STEPS SPANS PAUSE_US\n", argv[0]);
    return 2;
  }
  const long steps = std::atol(argv[2]);
  const long spans = std::atol(argv[3]);
  const long pause_us = std::atol(argv[4]);
  if (steps < 1 || spans < 3 || pause_us < 0) {
    std::fprintf(stderr, "STEPS >= 1, SPANS >= 3, PAUSE_US >= 0\n");
    return 2;
  }
  if (tracedb_start(argv[1]) != TRACEDB_OK) {
    std::fprintf(stderr, "cannot start recording into %s\n", argv[1]);
    return 1;
  }
  const uint32_t fwd = tracedb_intern("forward");
  const uint32_t bwd = tracedb_intern("backward");
  const uint32_t layer = tracedb_intern("layer");
  const uint32_t ar = tracedb_intern("allreduce");
  unsigned long long events = 0;
  for (long s = 0; s < steps; ++s) {
    tracedb_step(s);
    tracedb_begin_ex(fwd, TRACEDB_CAT_COMPUTE, 0, nullptr);
    long left = spans - 3;  // forward, backward and allreduce are three of them
    for (long i = 0; i < left / 2; ++i) {
      tracedb_begin_ex(layer, TRACEDB_CAT_COMPUTE, 0, nullptr);
      tracedb_end(layer);
    }
    tracedb_end(fwd);
    tracedb_begin_ex(bwd, TRACEDB_CAT_COMPUTE, 0, nullptr);
    for (long i = left / 2; i < left; ++i) {
      tracedb_begin_ex(layer, TRACEDB_CAT_COMPUTE, 0, nullptr);
      tracedb_end(layer);
    }
    tracedb_end(bwd);
    tracedb_args a{};
    a.fields = TRACEDB_ARG_BYTES;
    a.bytes = static_cast<uint64_t>(s);
    tracedb_begin_ex(ar, TRACEDB_CAT_COMM, 0, &a);
    tracedb_end_ex(ar, TRACEDB_CAT_COMM, 0, nullptr);
    events += static_cast<unsigned long long>(spans);
    if (pause_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
  }
  tracedb_counters c{};
  tracedb_get_counters(&c);
  if (tracedb_stop() != TRACEDB_OK) {
    std::fprintf(stderr, "recording failed\n");
    return 1;
  }
  std::printf("steps %ld\nevents %llu\ndropped %llu\n", steps, events,
              static_cast<unsigned long long>(c.dropped));
  return 0;
}
