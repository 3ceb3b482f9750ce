// A recording program for the tests of `tracedb top`: one rank of a training-like loop, in real
// time, written to DIR by the recorder. Each step: a step marker, a "forward" compute span of
// COMPUTE_MS, an "MPI_Allreduce" (cat mpi) of COMM_MS. Prints "events N" at the end (the events
// it recorded: 2 per step; step markers are not events).
// Usage: top_job_program DIR RANK STEPS COMPUTE_MS COMM_MS   (env TRACEDB_FLUSH_MS applies)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "tracedb/recorder.h"

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s DIR RANK STEPS COMPUTE_MS COMM_MS\n", argv[0]);
    return 2;
  }
  setenv("TRACEDB_RANK", argv[2], 1);
  const int steps = std::atoi(argv[3]);
  const auto compute = std::chrono::microseconds(static_cast<int64_t>(std::atof(argv[4]) * 1000));
  const auto comm = std::chrono::microseconds(static_cast<int64_t>(std::atof(argv[5]) * 1000));
  if (tracedb_start(argv[1]) != TRACEDB_OK) {
    std::fprintf(stderr, "cannot start recording into %s\n", argv[1]);
    return 1;
  }
  const uint32_t fwd = tracedb_intern("forward");
  const uint32_t ar = tracedb_intern("MPI_Allreduce");
  for (int s = 0; s < steps; ++s) {
    tracedb_step(s);
    tracedb_begin_ex(fwd, TRACEDB_CAT_COMPUTE, 0, nullptr);
    std::this_thread::sleep_for(compute);
    tracedb_end_ex(fwd, TRACEDB_CAT_COMPUTE, 0, nullptr);
    tracedb_args a{};
    a.fields = TRACEDB_ARG_BYTES;
    a.bytes = 1 << 20;
    tracedb_begin_ex(ar, TRACEDB_CAT_MPI, 0, &a);
    std::this_thread::sleep_for(comm);
    tracedb_end_ex(ar, TRACEDB_CAT_MPI, 0, nullptr);
  }
  tracedb_stop();
  tracedb_counters c;
  tracedb_get_counters(&c);
  std::printf("events %llu dropped %llu\n", static_cast<unsigned long long>(2ull * steps),
              static_cast<unsigned long long>(c.dropped));
  return 0;
}
