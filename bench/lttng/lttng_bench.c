/* The LTTng-UST peer of recorder_bench: ns per span (two tracepoints) while an LTTng session
 * records them, median of several repetitions. bench/run_recorder_bench.sh creates and starts
 * the session, runs this, and measures the trace's bytes per event.
 * Usage: lttng_bench [REPS] [SPANS] */
#define TRACEPOINT_CREATE_PROBES
#define TRACEPOINT_DEFINE
#include "lttng_tp.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 7;
  long spans = argc > 2 ? atol(argv[2]) : 1000000;
  double results[64];
  if (reps > 64) reps = 64;
  for (int r = 0; r < reps; ++r) {
    double t0 = now_ns();
    for (long i = 0; i < spans; ++i) {
      tracepoint(tracedb_bench, span_begin, 7);
      tracepoint(tracedb_bench, span_end, 7);
    }
    results[r] = (now_ns() - t0) / spans;
  }
  qsort(results, reps, sizeof(double), cmp);
  printf("lttng_span_ns %.1f\n", results[reps / 2]);
  printf("lttng_events %ld\n", 2L * spans * reps);
  return 0;
}
