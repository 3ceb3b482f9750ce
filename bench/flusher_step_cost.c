// The flusher's CPU time per event on a step loop (docs/flight.md "Cost of the summaries"):
// STEPS steps of PER iterations of three spans (a compute span with a user span inside, then an
// MPI_Allreduce span: 6 events), recorded into DIR; prints the flusher thread's CPU time
// divided by the events written. Run it against two builds of libtracedb.so
// (LD_LIBRARY_PATH) to compare what the flusher does per event.
// Usage: flusher_step_cost STEPS PER DIR (TRACEDB_BUFFER_MB=256 keeps every event).
#include <stdio.h>
#include <stdlib.h>

#include "tracedb/recorder.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s STEPS PER DIR\n", argv[0]);
    return 2;
  }
  const int steps = atoi(argv[1]), per = atoi(argv[2]);
  if (tracedb_start(argv[3]) != TRACEDB_OK) {
    fprintf(stderr, "cannot record into %s\n", argv[3]);
    return 1;
  }
  const uint32_t fwd = tracedb_intern("fwd"), ar = tracedb_intern("MPI_Allreduce");
  const uint32_t op = tracedb_intern("op");
  for (int s = 0; s < steps; ++s) {
    tracedb_step(s);
    for (int i = 0; i < per; ++i) {
      tracedb_begin_ex(fwd, TRACEDB_CAT_COMPUTE, 0, NULL);
      tracedb_begin_ex(op, TRACEDB_CAT_USER, 0, NULL);
      tracedb_end_ex(op, TRACEDB_CAT_USER, 0, NULL);
      tracedb_end_ex(fwd, TRACEDB_CAT_COMPUTE, 0, NULL);
      tracedb_begin_ex(ar, TRACEDB_CAT_MPI, 0, NULL);
      tracedb_end_ex(ar, TRACEDB_CAT_MPI, 0, NULL);
    }
  }
  tracedb_stop();
  tracedb_counters k;
  tracedb_get_counters(&k);
  printf("%.1f ns of flusher CPU per event (%llu events, %llu dropped)\n",
         k.written ? (double)k.flusher_cpu_ns / (double)k.written : 0.0,
         (unsigned long long)k.written, (unsigned long long)k.dropped);
  return 0;
}
