// A training loop for the flight-recorder tests (tests/flight_test.py, docs/flight.md): steps of
// at least 2 ms, each a `work` span (category compute) then a short `allreduce` span (category
// comm), with step markers. At step 300 it calls tracedb_trigger("manual"), then 50 more
// triggers at once (a storm, all within the 1 s rate limit).
// Options (after STEPS): `usr1` raises SIGUSR1 at step 1000 (a trigger in flight mode, where the
// library installed its handler; else it would die of it); `longcompute` makes step 500's `work`
// last 1.5 s (a long compute phase: no communication call is open); `stuckcomm` makes step 400's
// `allreduce` last 1.2 s (a communication call that makes no progress); `nomanual` leaves out
// the manual trigger and the storm.
// Usage: flight_program STEPS [usr1] [longcompute] [stuckcomm] [nomanual]. It prints "manual R",
// "storm accepted N" and "steps N".
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tracedb/recorder.h"

static void SleepNs(long ns) {
  struct timespec t = {ns / 1000000000, ns % 1000000000};
  nanosleep(&t, NULL);
}

int main(int argc, char** argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 1300;
  int usr1 = 0, longcompute = 0, stuckcomm = 0, nomanual = 0;
  for (int i = 2; i < argc; ++i) {
    usr1 |= strcmp(argv[i], "usr1") == 0;
    longcompute |= strcmp(argv[i], "longcompute") == 0;
    stuckcomm |= strcmp(argv[i], "stuckcomm") == 0;
    nomanual |= strcmp(argv[i], "nomanual") == 0;
  }
  const uint32_t work = tracedb_intern("work");
  const uint32_t allreduce = tracedb_intern("allreduce");
  for (int step = 0; step < steps; ++step) {
    tracedb_step(step);
    tracedb_begin_ex(work, TRACEDB_CAT_COMPUTE, 0, NULL);
    SleepNs(longcompute && step == 500 ? 1500000000L : 2000000L);
    tracedb_end_ex(work, TRACEDB_CAT_COMPUTE, 0, NULL);
    tracedb_begin_ex(allreduce, TRACEDB_CAT_COMM, 0, NULL);
    SleepNs(stuckcomm && step == 400 ? 1200000000L : 100000L);
    tracedb_end_ex(allreduce, TRACEDB_CAT_COMM, 0, NULL);
    if (step == 300 && !nomanual) {
      printf("manual %d\n", tracedb_trigger("manual"));
      int accepted = 0;
      for (int i = 0; i < 50; ++i) accepted += tracedb_trigger("storm") == TRACEDB_OK;
      printf("storm accepted %d\n", accepted);
    }
    if (step == 1000 && usr1) raise(SIGUSR1);
  }
  printf("steps %d\n", steps);
  return 0;
}
