/* Barriers for the clock-alignment test: every rank leaves each of N barriers at (nearly) the
 * same true time, so after compaction their exits must line up on the common clock.
 * Usage: barrier_program [N]  (never calls tracedb) */
#include <mpi.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int n = argc > 1 ? atoi(argv[1]) : 40;
  for (int i = 0; i < n; ++i) {
    /* Ranks arrive at different times; they leave together. */
    struct timespec d = {0, 200000L * ((rank + i) % 4)};
    nanosleep(&d, NULL);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
