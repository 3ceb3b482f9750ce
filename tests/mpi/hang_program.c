// A 4-rank MPI training loop with a hang or a crash put in at a known step, for the hang
// forensics tests (tests/hang_test.py, docs/hang.md). Each step: a `fetch_batch` span, a
// `compute` span, then MPI_Allreduce on MPI_COMM_WORLD (steps of about 2 ms).
//
//   hang_program hang STEP DIR   at STEP, rank 2 blocks in MPI_Recv from rank 3 (tag 99) inside
//                                fetch_batch, which rank 3 never sends; the others block in
//                                that step's MPI_Allreduce. The job runs until it is killed.
//   hang_program crash STEP DIR  at STEP, rank 1 dies of SIGSEGV inside `compute`.
//
// Before it blocks or dies, each rank writes what it is about to do to DIR/expect-RANK.txt (the
// known answer): "STATE CALL PEER STEP SPANS...", e.g. "blocked MPI_Recv 3 30 MPI_Recv
// fetch_batch", innermost span first, and the number of MPI_Allreduce calls it finished. Rank 2
// prints "hang: rank 2 blocks at step N" on stdout once it is about to block.
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tracedb/recorder.h"

static void SleepUs(long us) {
  struct timespec t = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&t, NULL);
}

static void Expect(const char* dir, int rank, const char* line) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/expect-%d.txt", dir, rank);
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    return;
  }
  fputs(line, f);
  fclose(f);
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: hang_program hang|crash STEP DIR\n");
    return 2;
  }
  const int hang = strcmp(argv[1], "hang") == 0;
  const int at = atoi(argv[2]);
  const char* dir = argv[3];
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const uint32_t fetch = tracedb_intern("fetch_batch");
  const uint32_t compute = tracedb_intern("compute");
  char line[512];
  for (int step = 0; step < 100000; ++step) {
    tracedb_step(step);
    tracedb_begin(fetch);
    if (hang && step == at && rank == 2) {
      snprintf(line, sizeof(line), "blocked MPI_Recv 3 %d MPI_Recv fetch_batch\nallreduce %d\n",
               step, step);
      Expect(dir, rank, line);
      printf("hang: rank 2 blocks at step %d\n", step);
      fflush(stdout);
      int x = 0;
      MPI_Recv(&x, 1, MPI_INT, 3, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    SleepUs(500);
    tracedb_end(fetch);
    tracedb_begin(compute);
    if (!hang && step == at && rank == 1) {
      snprintf(line, sizeof(line), "crashed - -1 %d compute\nallreduce %d\n", step, step);
      Expect(dir, rank, line);
      raise(SIGSEGV);
    }
    SleepUs(1500);
    tracedb_end(compute);
    if (hang && step == at) {
      snprintf(line, sizeof(line), "blocked MPI_Allreduce -1 %d MPI_Allreduce\nallreduce %d\n",
               step, step);
      Expect(dir, rank, line);
    }
    double v = 1, sum = 0;
    MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
