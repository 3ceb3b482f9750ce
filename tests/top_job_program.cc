// A recording program for the tests of `tracedb top`: one rank of a training-like loop, in real
// time, written to DIR by the recorder. Each step: a step marker, a "forward" compute span of
// COMPUTE_MS, an "MPI_Allreduce" (cat mpi) of COMM_MS. Prints "events N" at the end (the events
// it recorded: 2 per step, 3 with OVERLAP_MS; step markers are not events). OVERLAP_MS > 0 adds
// a communication span "MPI_Iallreduce" (cat mpi, on a lane of its own) during the first
// OVERLAP_MS of "forward" (at most COMPUTE_MS): communication hidden behind computation.
// Usage: top_job_program DIR RANK STEPS COMPUTE_MS COMM_MS [OVERLAP_MS]
//        (env TRACEDB_FLUSH_MS applies)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "tracedb/recorder.h"

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s DIR RANK STEPS COMPUTE_MS COMM_MS [OVERLAP_MS]\n", argv[0]);
    return 2;
  }
  setenv("TRACEDB_RANK", argv[2], 1);
  const int steps = std::atoi(argv[3]);
  const auto compute = std::chrono::microseconds(static_cast<int64_t>(std::atof(argv[4]) * 1000));
  const auto comm = std::chrono::microseconds(static_cast<int64_t>(std::atof(argv[5]) * 1000));
  auto overlap =
      std::chrono::microseconds(argc > 6 ? static_cast<int64_t>(std::atof(argv[6]) * 1000) : 0);
  overlap = std::min(overlap, compute);
  if (tracedb_start(argv[1]) != TRACEDB_OK) {
    std::fprintf(stderr, "cannot start recording into %s\n", argv[1]);
    return 1;
  }
  const uint32_t fwd = tracedb_intern("forward");
  const uint32_t ar = tracedb_intern("MPI_Allreduce");
  const uint32_t iar = tracedb_intern("MPI_Iallreduce");
  const uint32_t lane = tracedb_lane("gradients");
  for (int s = 0; s < steps; ++s) {
    tracedb_step(s);
    tracedb_begin_ex(fwd, TRACEDB_CAT_COMPUTE, 0, nullptr);
    if (overlap.count() > 0) {
      tracedb_begin_ex(iar, TRACEDB_CAT_MPI, lane, nullptr);
      std::this_thread::sleep_for(overlap);
      tracedb_end_ex(iar, TRACEDB_CAT_MPI, lane, nullptr);
      std::this_thread::sleep_for(compute - overlap);
    } else {
      std::this_thread::sleep_for(compute);
    }
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
  std::printf("events %llu dropped %llu\n",
              static_cast<unsigned long long>((overlap.count() > 0 ? 3ull : 2ull) * steps),
              static_cast<unsigned long long>(c.dropped));
  return 0;
}
