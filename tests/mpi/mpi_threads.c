/* An MPI program whose threads call MPI concurrently (MPI_THREAD_MULTIPLE), for
 * mpi_capture_test.cc. It never calls tracedb.
 *
 *   mpi_threads EXPECT_DIR|- [THREADS] [ITERATIONS]       (2 ranks or more)
 *
 * Each thread owns a duplicate of MPI_COMM_WORLD and, ITERATIONS times, exchanges a message
 * around the ring with MPI_Irecv/MPI_Isend/MPI_Waitall, runs an MPI_Allreduce and an
 * MPI_Iallreduce/MPI_Wait on its communicator, and an MPI_Sendrecv on MPI_COMM_WORLD (its own
 * tag). Writes EXPECT_DIR/expected-<rank>.txt like mpi_workload.c; rank 0 prints a digest. Exit
 * code 0 when MPI_THREAD_MULTIPLE was provided and every received value was right, else 1.
 * Thread safety: that is the point; the expectation counters are per thread.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 16

static int r, n, left, right, iterations;
static MPI_Comm comms[MAX_THREADS];
static long long sums[MAX_THREADS];
static int errors[MAX_THREADS];

static void* worker(void* arg) {
  const int t = (int)(long)arg;
  int sbuf[64], rbuf[64];
  for (int i = 0; i < 64; ++i) sbuf[i] = r * 1000 + t * 100 + i;
  for (int it = 0; it < iterations; ++it) {
    MPI_Request reqs[2];
    MPI_Status sts[2];
    MPI_Irecv(rbuf, 64, MPI_INT, left, t, comms[t], &reqs[0]);
    MPI_Isend(sbuf, t + 1, MPI_INT, right, t, comms[t], &reqs[1]);
    MPI_Waitall(2, reqs, sts);
    int got = -1;
    MPI_Get_count(&sts[0], MPI_INT, &got);
    if (got != t + 1 || rbuf[t] != left * 1000 + t * 100 + t) errors[t]++;
    sums[t] += rbuf[0];

    long v = r + t, s = 0;
    MPI_Allreduce(&v, &s, 1, MPI_LONG, MPI_SUM, comms[t]);
    if (s != (long)n * (n - 1) / 2 + (long)n * t) errors[t]++;
    MPI_Request q;
    MPI_Iallreduce(&v, &s, 1, MPI_LONG, MPI_MAX, comms[t], &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    if (s != n - 1 + t) errors[t]++;

    int x = r * 10 + t, y = -1;
    MPI_Sendrecv(&x, 1, MPI_INT, right, 100 + t, &y, 1, MPI_INT, left, 100 + t, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (y != left * 10 + t) errors[t]++;
  }
  return NULL;
}

int main(int argc, char** argv) {
  const char* expect_dir = argc > 1 ? argv[1] : "-";
  int threads = argc > 2 ? atoi(argv[2]) : 4;
  iterations = argc > 3 ? atoi(argv[3]) : 50;
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (threads < 1 || threads > MAX_THREADS || iterations < 1) threads = iterations = 1;
  left = (r - 1 + n) % n;
  right = (r + 1) % n;
  int bad = provided != MPI_THREAD_MULTIPLE;
  if (bad && r == 0) fprintf(stderr, "mpi_threads: MPI_THREAD_MULTIPLE not provided\n");

  for (int t = 0; t < threads; ++t) MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
  pthread_t tids[MAX_THREADS];
  for (int t = 0; t < threads; ++t) pthread_create(&tids[t], NULL, worker, (void*)(long)t);
  for (int t = 0; t < threads; ++t) pthread_join(tids[t], NULL);
  long long sum = 0;
  for (int t = 0; t < threads; ++t) {
    bad += errors[t];
    sum += sums[t];
    MPI_Comm_free(&comms[t]);
  }
  long long total = 0;
  int total_bad = 0;
  MPI_Reduce(&sum, &total, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Allreduce(&bad, &total_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (r == 0) {
    printf("mpi_threads: %d ranks x %d threads x %d iterations, digest %lld, errors %d\n", n,
           threads, iterations, total, total_bad);
    fflush(stdout);
  }
  MPI_Finalize();

  if (strcmp(expect_dir, "-") != 0) {
    char path[4096];
    snprintf(path, sizeof path, "%s/expected-%d.txt", expect_dir, r);
    FILE* f = fopen(path, "w");
    if (f == NULL) return 1;
    const long long T = threads, I = iterations;
    long long isend = 0, waitall = 0;
    for (int t = 0; t < threads; ++t) {
      isend += 4LL * (t + 1) * I;
      waitall += 8LL * (t + 1) * I; /* the receive and the send, t + 1 ints each */
    }
    fprintf(f, "MPI_Init_thread 1 0\nMPI_Comm_rank 1 0\nMPI_Comm_size 1 0\n");
    fprintf(f, "MPI_Comm_dup %lld 0\nMPI_Comm_free %lld 0\n", T, T);
    fprintf(f, "MPI_Irecv %lld %lld\nMPI_Isend %lld %lld\n", T * I, T * I * 256, T * I, isend);
    fprintf(f, "MPI_Waitall %lld %lld\nmpi_request_complete %lld %lld\n", T * I, waitall, 2 * T * I,
            waitall);
    fprintf(f, "MPI_Allreduce %lld %lld\nMPI_Iallreduce %lld %lld\nMPI_Wait %lld %lld\n", T * I + 1,
            T * I * 8 + 4, T * I, T * I * 8, T * I, T * I * 8);
    fprintf(f, "MPI_Sendrecv %lld %lld\nMPI_Reduce 1 8\nMPI_Finalize 1 0\n", T * I, T * I * 4);
    fclose(f);
  }
  return total_bad != 0 ? 1 : 0;
}
