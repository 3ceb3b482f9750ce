// A training loop for the flight-recorder tests (tests/flight_test.py, docs/flight.md): steps of
// at least 2 ms (a `work` span each, step markers). At step 300 it calls
// tracedb_trigger("manual"), then 50 more triggers at once (a storm, all within the 1 s rate
// limit); at step 1000, with `usr1` as its second argument, it raises SIGUSR1 (a trigger in
// flight mode, where the library installed its handler; else it would die of it).
// Usage: flight_program STEPS [usr1]. It prints "manual R", "storm accepted N", "steps N".
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tracedb/recorder.h"

int main(int argc, char** argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 1300;
  const int usr1 = argc > 2 && strcmp(argv[2], "usr1") == 0;
  const uint32_t work = tracedb_intern("work");
  for (int step = 0; step < steps; ++step) {
    tracedb_step(step);
    tracedb_begin(work);
    struct timespec t = {0, 2000000};
    nanosleep(&t, NULL);
    tracedb_end(work);
    if (step == 300) {
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
