// A training loop with slow steps injected at known steps, for tests/slow_step_test.py (the
// `step_stats` table and the slow-step trigger, docs/flight.md). Each step: tracedb_step(s),
// a `work` span (category compute) that sleeps until the step's intended duration less 3 ms
// (SLOW_MS for the slow steps, STEP_MS for the others), an `MPI_Allreduce` span (category mpi,
// bytes 1000 + s) of 2 ms, then an `MPI_Isend` span (category mpi, bytes 10, a non-blocking
// start) of 1 ms: 3 spans per step (3 rows of the events table), 1010 + s bytes.
// Usage: slow_step_program STEPS STEP_MS SLOW_MS [SLOW_STEP...]. Prints "steps N".
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tracedb/recorder.h"

static void SleepNs(long ns) {
  struct timespec t = {ns / 1000000000, ns % 1000000000};
  while (nanosleep(&t, &t) != 0) {
  }
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s STEPS STEP_MS SLOW_MS [SLOW_STEP...]\n", argv[0]);
    return 2;
  }
  const int steps = atoi(argv[1]);
  const long step_ms = atol(argv[2]), slow_ms = atol(argv[3]);
  const uint32_t work = tracedb_intern("work");
  const uint32_t allreduce = tracedb_intern("MPI_Allreduce");
  const uint32_t isend = tracedb_intern("MPI_Isend");
  for (int step = 0; step < steps; ++step) {
    int slow = 0;
    for (int i = 4; i < argc; ++i) slow |= atoi(argv[i]) == step;
    const long ms = slow ? slow_ms : step_ms;
    tracedb_step(step);
    tracedb_begin_ex(work, TRACEDB_CAT_COMPUTE, 0, NULL);
    SleepNs((ms - 3) * 1000000L);
    tracedb_end_ex(work, TRACEDB_CAT_COMPUTE, 0, NULL);
    tracedb_args a = {0};
    a.fields = TRACEDB_ARG_BYTES;
    a.bytes = 1000 + (uint64_t)step;
    tracedb_begin_ex(allreduce, TRACEDB_CAT_MPI, 0, &a);
    SleepNs(2000000L);
    tracedb_end_ex(allreduce, TRACEDB_CAT_MPI, 0, NULL);
    a.bytes = 10;
    tracedb_begin_ex(isend, TRACEDB_CAT_MPI, 0, &a);
    SleepNs(1000000L);
    tracedb_end_ex(isend, TRACEDB_CAT_MPI, 0, NULL);
  }
  printf("steps %d\n", steps);
  return 0;
}
