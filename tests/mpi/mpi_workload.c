/* An MPI program that exercises every routine family the interposer wraps, for
 * mpi_capture_test.cc. It never calls tracedb: it is run with and without
 * LD_PRELOAD=libtracedb_mpi.so and must behave identically.
 *
 *   mpi_workload EXPECT_DIR|- [EXIT_CODE]     (an even number of ranks, at least 4)
 *
 * Besides doing the calls it writes, per rank, EXPECT_DIR/expected-<rank>.txt: one line
 * "<event name> <count> <bytes>" per event name, the events the interposer must record under
 * the rules of docs/mpi-capture.md (one event per call; bytes as specified there; completion
 * and start events of calls that complete or start several requests). Rank 0 prints a
 * deterministic digest of the data received on every rank; the exit code is EXIT_CODE (default
 * 0) when every received value was right, else 1.
 * Thread safety: single-threaded MPI program.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W MPI_COMM_WORLD
#define MAX_NAMES 256

static int r, n, left, right;
static int errors;
static long long digest; /* sum of received values, weighted by position */

static struct {
  char name[48];
  long long count;
  long long bytes;
} expected[MAX_NAMES];
static int num_expected;

/* One more event `name` carrying `bytes` (0 for events without bytes). */
static void expect(const char* name, long long bytes) {
  int i;
  for (i = 0; i < num_expected; ++i) {
    if (strcmp(expected[i].name, name) == 0) break;
  }
  if (i == num_expected) {
    if (num_expected == MAX_NAMES) abort();
    snprintf(expected[i].name, sizeof expected[i].name, "%s", name);
    ++num_expected;
  }
  expected[i].count++;
  expected[i].bytes += bytes;
}
#define DONE "mpi_request_complete"
#define STARTED "mpi_request_start"

static void check(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "rank %d: wrong result: %s\n", r, what);
    ++errors;
  }
}

static void absorb(const int* v, int count) {
  for (int i = 0; i < count; ++i) digest += (long long)v[i] * (i + 1);
}

static void fill(int* v, int count, int base) {
  for (int i = 0; i < count; ++i) v[i] = base * 1000 + i;
}

static int count_of(const MPI_Status* st) {
  int c = -1;
  MPI_Get_count(st, MPI_INT, &c);
  return c;
}

/* ------------------------------------------------------------------ point-to-point */
static void point_to_point(void) {
  int sbuf[64], rbuf[64], rb2[64];
  MPI_Status st;
  MPI_Request q, qs, reqs[4];
  fill(sbuf, 64, r);

  int bsize = 4096 + 4 * MPI_BSEND_OVERHEAD;
  char* bbuf = malloc(bsize);
  MPI_Buffer_attach(bbuf, bsize);
  expect("MPI_Buffer_attach", bsize);

  /* Blocking ring, even ranks send first. */
  if (r % 2 == 0) {
    MPI_Send(sbuf, 8 + r, MPI_INT, right, 10, W);
    MPI_Recv(rbuf, 64, MPI_INT, left, 10, W, &st);
  } else {
    MPI_Recv(rbuf, 64, MPI_INT, left, 10, W, &st);
    MPI_Send(sbuf, 8 + r, MPI_INT, right, 10, W);
  }
  expect("MPI_Send", 4 * (8 + r));
  expect("MPI_Recv", 4 * (8 + left));
  check(st.MPI_SOURCE == left && count_of(&st) == 8 + left && rbuf[1] == left * 1000 + 1, "recv");
  absorb(rbuf, 8 + left);

  /* Synchronous send, wildcard receive, status ignored. */
  if (r % 2 == 0) {
    MPI_Ssend(sbuf, 3 + r, MPI_INT, right, 20 + r, W);
    MPI_Recv(rbuf, 64, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, W, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(rbuf, 64, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, W, MPI_STATUS_IGNORE);
    MPI_Ssend(sbuf, 3 + r, MPI_INT, right, 20 + r, W);
  }
  expect("MPI_Ssend", 4 * (3 + r));
  expect("MPI_Recv", 4 * (3 + left));
  check(rbuf[0] == left * 1000, "wildcard recv");
  absorb(rbuf, 3 + left);

  /* Buffered and ready sends. */
  MPI_Bsend(sbuf, 5, MPI_INT, right, 30, W);
  expect("MPI_Bsend", 20);
  MPI_Recv(rbuf, 64, MPI_INT, left, 30, W, &st);
  expect("MPI_Recv", 20);
  absorb(rbuf, 5);
  MPI_Irecv(rbuf, 16, MPI_INT, left, 40, W, &q);
  expect("MPI_Irecv", 64);
  MPI_Barrier(W);
  expect("MPI_Barrier", 0);
  MPI_Rsend(sbuf, 6, MPI_INT, right, 40, W);
  expect("MPI_Rsend", 24);
  MPI_Wait(&q, &st);
  expect("MPI_Wait", 24);
  check(count_of(&st) == 6 && st.MPI_SOURCE == left, "rsend");

  /* Nonblocking both ways, one Waitall. */
  MPI_Irecv(rbuf, 64, MPI_INT, left, 50, W, &reqs[0]);
  MPI_Irecv(rb2, 64, MPI_INT, right, 51, W, &reqs[1]);
  MPI_Isend(sbuf, 8 + r, MPI_INT, right, 50, W, &reqs[2]);
  MPI_Isend(sbuf, 8 + r, MPI_INT, left, 51, W, &reqs[3]);
  expect("MPI_Irecv", 256);
  expect("MPI_Irecv", 256);
  expect("MPI_Isend", 4 * (8 + r));
  expect("MPI_Isend", 4 * (8 + r));
  MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE);
  expect("MPI_Waitall", 4 * (8 + left) + 4 * (8 + right) + 8 * (8 + r));
  expect(DONE, 4 * (8 + left));
  expect(DONE, 4 * (8 + right));
  expect(DONE, 4 * (8 + r));
  expect(DONE, 4 * (8 + r));
  absorb(rbuf, 8 + left);
  absorb(rb2, 8 + right);

  /* Issend; Ibsend and Irsend completed together. */
  MPI_Irecv(rbuf, 64, MPI_INT, left, 60, W, &q);
  expect("MPI_Irecv", 256);
  MPI_Issend(sbuf, 2, MPI_INT, right, 60, W, &qs);
  expect("MPI_Issend", 8);
  MPI_Wait(&qs, MPI_STATUS_IGNORE);
  expect("MPI_Wait", 8);
  MPI_Wait(&q, MPI_STATUS_IGNORE);
  expect("MPI_Wait", 8);
  MPI_Status sts[4];
  MPI_Irecv(rbuf, 64, MPI_INT, left, 61, W, &reqs[0]);
  MPI_Ibsend(sbuf, 3, MPI_INT, right, 61, W, &reqs[1]);
  expect("MPI_Irecv", 256);
  expect("MPI_Ibsend", 12);
  MPI_Waitall(2, reqs, sts);
  expect("MPI_Waitall", 24);
  expect(DONE, 12);
  expect(DONE, 12);
  check(count_of(&sts[0]) == 3 && sts[0].MPI_SOURCE == left, "ibsend");
  MPI_Irecv(rbuf, 64, MPI_INT, left, 62, W, &reqs[0]);
  expect("MPI_Irecv", 256);
  MPI_Barrier(W);
  expect("MPI_Barrier", 0);
  MPI_Irsend(sbuf, 4, MPI_INT, right, 62, W, &reqs[1]);
  expect("MPI_Irsend", 16);
  MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
  expect("MPI_Waitall", 32);
  expect(DONE, 16);
  expect(DONE, 16);
  absorb(rbuf, 4);

  /* Waitany, Waitsome: requests 0,1 receive from left/right, 2,3 send. */
  long long bytes_of[4];
  for (int round = 0; round < 2; ++round) {
    int tag = 70 + 10 * round;
    MPI_Irecv(rbuf, 64, MPI_INT, left, tag, W, &reqs[0]);
    MPI_Irecv(rb2, 64, MPI_INT, right, tag + 1, W, &reqs[1]);
    MPI_Isend(sbuf, 1 + r, MPI_INT, right, tag, W, &reqs[2]);
    MPI_Isend(sbuf, 1 + r, MPI_INT, left, tag + 1, W, &reqs[3]);
    expect("MPI_Irecv", 256);
    expect("MPI_Irecv", 256);
    expect("MPI_Isend", 4 * (1 + r));
    expect("MPI_Isend", 4 * (1 + r));
    bytes_of[0] = 4 * (1 + left);
    bytes_of[1] = 4 * (1 + right);
    bytes_of[2] = bytes_of[3] = 4 * (1 + r);
    int done = 0;
    while (done < 4) {
      if (round == 0) {
        int idx;
        MPI_Waitany(4, reqs, &idx, &st);
        expect("MPI_Waitany", bytes_of[idx]);
        ++done;
      } else {
        int out, idx[4];
        MPI_Waitsome(4, reqs, &out, idx, MPI_STATUSES_IGNORE);
        long long sum = 0;
        for (int j = 0; j < out; ++j) sum += bytes_of[idx[j]];
        expect("MPI_Waitsome", sum);
        if (out > 1) {
          for (int j = 0; j < out; ++j) expect(DONE, bytes_of[idx[j]]);
        }
        done += out;
      }
    }
    absorb(rbuf, 1 + left);
    absorb(rb2, 1 + right);
  }

  /* The Test family. */
  int flag = 0;
  MPI_Irecv(rbuf, 64, MPI_INT, left, 90, W, &q);
  MPI_Isend(sbuf, 2 + r, MPI_INT, right, 90, W, &qs);
  expect("MPI_Irecv", 256);
  expect("MPI_Isend", 4 * (2 + r));
  while (!flag) {
    MPI_Test(&q, &flag, &st);
    expect("MPI_Test", flag ? 4 * (2 + left) : 0);
  }
  MPI_Wait(&qs, MPI_STATUS_IGNORE);
  expect("MPI_Wait", 4 * (2 + r));
  absorb(rbuf, 2 + left);

  MPI_Irecv(rbuf, 64, MPI_INT, left, 91, W, &reqs[0]);
  MPI_Isend(sbuf, 3 + r, MPI_INT, right, 91, W, &reqs[1]);
  expect("MPI_Irecv", 256);
  expect("MPI_Isend", 4 * (3 + r));
  bytes_of[0] = 4 * (3 + left);
  bytes_of[1] = 4 * (3 + r);
  for (int done = 0; done < 2;) {
    int idx;
    MPI_Testany(2, reqs, &idx, &flag, MPI_STATUS_IGNORE);
    if (flag && idx != MPI_UNDEFINED) {
      expect("MPI_Testany", bytes_of[idx]);
      ++done;
    } else {
      expect("MPI_Testany", 0);
    }
  }

  MPI_Irecv(rbuf, 64, MPI_INT, left, 92, W, &reqs[0]);
  MPI_Isend(sbuf, 4 + r, MPI_INT, right, 92, W, &reqs[1]);
  expect("MPI_Irecv", 256);
  expect("MPI_Isend", 4 * (4 + r));
  for (flag = 0; !flag;) {
    MPI_Testall(2, reqs, &flag, MPI_STATUSES_IGNORE);
    if (flag) {
      expect("MPI_Testall", 4 * (4 + left) + 4 * (4 + r));
      expect(DONE, 4 * (4 + left));
      expect(DONE, 4 * (4 + r));
    } else {
      expect("MPI_Testall", 0);
    }
  }

  MPI_Irecv(rbuf, 64, MPI_INT, left, 93, W, &reqs[0]);
  MPI_Isend(sbuf, 5 + r, MPI_INT, right, 93, W, &reqs[1]);
  expect("MPI_Irecv", 256);
  expect("MPI_Isend", 4 * (5 + r));
  bytes_of[0] = 4 * (5 + left);
  bytes_of[1] = 4 * (5 + r);
  for (int done = 0; done < 2;) {
    int out, idx[2];
    MPI_Testsome(2, reqs, &out, idx, sts);
    long long sum = 0;
    for (int j = 0; j < out; ++j) sum += bytes_of[idx[j]];
    expect("MPI_Testsome", sum);
    if (out > 1) {
      for (int j = 0; j < out; ++j) expect(DONE, bytes_of[idx[j]]);
    }
    done += out;
  }
  absorb(rbuf, 5 + left);

  /* Sendrecv and Sendrecv_replace. */
  MPI_Sendrecv(sbuf, 5, MPI_INT, right, 100, rbuf, 64, MPI_INT, left, 100, W, &st);
  expect("MPI_Sendrecv", 20);
  check(count_of(&st) == 5 && rbuf[4] == left * 1000 + 4, "sendrecv");
  int rep[7];
  fill(rep, 7, r);
  MPI_Sendrecv_replace(rep, 7, MPI_INT, right, 101, left, 101, W, MPI_STATUS_IGNORE);
  expect("MPI_Sendrecv_replace", 28);
  check(rep[6] == left * 1000 + 6, "sendrecv_replace");
  absorb(rep, 7);

  /* Persistent requests: three rounds of Startall/Waitall, one of Start/Wait. */
  MPI_Request pers[2];
  MPI_Recv_init(rbuf, 64, MPI_INT, left, 110, W, &pers[0]);
  MPI_Send_init(sbuf, 4, MPI_INT, right, 110, W, &pers[1]);
  expect("MPI_Recv_init", 256);
  expect("MPI_Send_init", 16);
  for (int round = 0; round < 3; ++round) {
    MPI_Startall(2, pers);
    expect("MPI_Startall", 256 + 16);
    expect(STARTED, 256);
    expect(STARTED, 16);
    MPI_Waitall(2, pers, MPI_STATUSES_IGNORE);
    expect("MPI_Waitall", 32);
    expect(DONE, 16);
    expect(DONE, 16);
    absorb(rbuf, 4);
  }
  MPI_Start(&pers[0]);
  expect("MPI_Start", 256);
  MPI_Start(&pers[1]);
  expect("MPI_Start", 16);
  MPI_Wait(&pers[1], MPI_STATUS_IGNORE);
  expect("MPI_Wait", 16);
  MPI_Wait(&pers[0], &st);
  expect("MPI_Wait", 16);
  MPI_Request_free(&pers[0]);
  MPI_Request_free(&pers[1]);
  expect("MPI_Request_free", 0);
  expect("MPI_Request_free", 0);

  /* Probes and matched receives. */
  MPI_Isend(sbuf, 9, MPI_INT, right, 120, W, &qs);
  expect("MPI_Isend", 36);
  MPI_Probe(MPI_ANY_SOURCE, 120, W, &st);
  expect("MPI_Probe", 36);
  MPI_Recv(rbuf, 64, MPI_INT, st.MPI_SOURCE, 120, W, MPI_STATUS_IGNORE);
  expect("MPI_Recv", 36);
  MPI_Wait(&qs, MPI_STATUS_IGNORE);
  expect("MPI_Wait", 36);
  absorb(rbuf, 9);

  MPI_Isend(sbuf, 10, MPI_INT, right, 121, W, &qs);
  expect("MPI_Isend", 40);
  for (flag = 0; !flag;) {
    MPI_Iprobe(left, 121, W, &flag, &st);
    expect("MPI_Iprobe", flag ? 40 : 0);
  }
  MPI_Recv(rbuf, 64, MPI_INT, left, 121, W, MPI_STATUS_IGNORE);
  expect("MPI_Recv", 40);
  MPI_Wait(&qs, MPI_STATUS_IGNORE);
  expect("MPI_Wait", 40);

  MPI_Message msg;
  MPI_Isend(sbuf, 11, MPI_INT, right, 122, W, &qs);
  expect("MPI_Isend", 44);
  MPI_Mprobe(left, 122, W, &msg, &st);
  expect("MPI_Mprobe", 44);
  MPI_Mrecv(rbuf, 64, MPI_INT, &msg, &st);
  expect("MPI_Mrecv", 44);
  check(count_of(&st) == 11 && rbuf[10] == left * 1000 + 10, "mrecv");
  MPI_Wait(&qs, MPI_STATUS_IGNORE);
  expect("MPI_Wait", 44);

  MPI_Isend(sbuf, 12, MPI_INT, right, 123, W, &qs);
  expect("MPI_Isend", 48);
  for (flag = 0; !flag;) {
    MPI_Improbe(left, 123, W, &flag, &msg, MPI_STATUS_IGNORE);
    expect("MPI_Improbe", flag ? 48 : 0);
  }
  MPI_Imrecv(rbuf, 64, MPI_INT, &msg, &q);
  expect("MPI_Imrecv", 256);
  MPI_Wait(&q, &st);
  expect("MPI_Wait", 48);
  MPI_Wait(&qs, MPI_STATUS_IGNORE);
  expect("MPI_Wait", 48);
  check(count_of(&st) == 12, "imrecv");
  absorb(rbuf, 12);

  /* A wildcard nonblocking receive: its completion reports the actual source and tag. */
  MPI_Irecv(rbuf, 64, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, W, &q);
  expect("MPI_Irecv", 256);
  MPI_Isend(sbuf, 6 + r, MPI_INT, right, 130, W, &qs);
  expect("MPI_Isend", 4 * (6 + r));
  MPI_Wait(&qs, MPI_STATUS_IGNORE);
  expect("MPI_Wait", 4 * (6 + r));
  MPI_Wait(&q, &st);
  expect("MPI_Wait", 4 * (6 + left));
  check(st.MPI_SOURCE == left && st.MPI_TAG == 130, "wildcard irecv");
  absorb(rbuf, 6 + left);

  void* detached;
  int dsize;
  MPI_Buffer_detach(&detached, &dsize);
  expect("MPI_Buffer_detach", 0);
  free(bbuf);
}

/* ------------------------------------------------------------------ collectives */
static int sum_1_to(int k) { return k * (k + 1) / 2; }

/* The Alltoallw datatype for messages to rank `dest`. */
static MPI_Datatype wtype(int dest) { return dest % 2 == 0 ? MPI_DOUBLE : MPI_INT; }

/* Runs every collective once, blocking (`nb` = 0) or as its I-form followed by MPI_Wait. */
static void collectives(int nb) {
  int sv[64], rv[256], counts[64], displs[64], rcounts[64], rdispls[64];
  double dv[8], dr[8];
  long lv = r + 1, lr = 0;
  MPI_Request q;
  MPI_Datatype stypes[64], rtypes[64];
  for (int i = 0; i < 64; ++i) sv[i] = r * 100 + i;
  for (int i = 0; i < 8; ++i) dv[i] = r + i;
  const char* wait = "MPI_Wait";
#define COLL(blocking_call, nb_call, name, nb_name, bytes) \
  do {                                                     \
    if (nb) {                                              \
      nb_call;                                             \
      MPI_Wait(&q, MPI_STATUS_IGNORE);                     \
      expect(nb_name, bytes);                              \
      expect(wait, bytes);                                 \
    } else {                                               \
      blocking_call;                                       \
      expect(name, bytes);                                 \
    }                                                      \
  } while (0)

  COLL(MPI_Barrier(W), MPI_Ibarrier(W, &q), "MPI_Barrier", "MPI_Ibarrier", 0);
  if (r == 1) fill(rv, 10, 77);
  COLL(MPI_Bcast(rv, 10, MPI_INT, 1, W), MPI_Ibcast(rv, 10, MPI_INT, 1, W, &q), "MPI_Bcast",
       "MPI_Ibcast", 40);
  check(rv[9] == 77009, "bcast");
  absorb(rv, 10);
  COLL(MPI_Reduce(dv, dr, 3, MPI_DOUBLE, MPI_SUM, 0, W),
       MPI_Ireduce(dv, dr, 3, MPI_DOUBLE, MPI_SUM, 0, W, &q), "MPI_Reduce", "MPI_Ireduce", 24);
  if (r == 0) check(dr[2] == sum_1_to(n - 1) + 2.0 * n, "reduce");
  COLL(MPI_Allreduce(dv, dr, 1, MPI_DOUBLE, MPI_SUM, W),
       MPI_Iallreduce(dv, dr, 1, MPI_DOUBLE, MPI_SUM, W, &q), "MPI_Allreduce", "MPI_Iallreduce", 8);
  check(dr[0] == sum_1_to(n - 1), "allreduce");
  rv[0] = r;
  rv[1] = -r;
  COLL(MPI_Allreduce(MPI_IN_PLACE, rv, 2, MPI_INT, MPI_MAX, W),
       MPI_Iallreduce(MPI_IN_PLACE, rv, 2, MPI_INT, MPI_MAX, W, &q), "MPI_Allreduce",
       "MPI_Iallreduce", 8);
  check(rv[0] == n - 1 && rv[1] == 0, "allreduce in place");
  COLL(MPI_Gather(sv, 2, MPI_INT, rv, 2, MPI_INT, 0, W),
       MPI_Igather(sv, 2, MPI_INT, rv, 2, MPI_INT, 0, W, &q), "MPI_Gather", "MPI_Igather", 8);
  if (r == 0) absorb(rv, 2 * n);
  if (r == 0) {
    rv[0] = 5;
    rv[1] = 6;
    COLL(MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rv, 2, MPI_INT, 0, W),
         MPI_Igather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rv, 2, MPI_INT, 0, W, &q), "MPI_Gather",
         "MPI_Igather", 8);
    check(rv[0] == 5 && rv[2] == 100, "gather in place");
  } else {
    COLL(MPI_Gather(sv, 2, MPI_INT, NULL, 0, MPI_DATATYPE_NULL, 0, W),
         MPI_Igather(sv, 2, MPI_INT, NULL, 0, MPI_DATATYPE_NULL, 0, W, &q), "MPI_Gather",
         "MPI_Igather", 8);
  }
  for (int i = 0; i < n; ++i) {
    counts[i] = i + 1;
    displs[i] = sum_1_to(i);
  }
  COLL(MPI_Gatherv(sv, r + 1, MPI_INT, rv, counts, displs, MPI_INT, 0, W),
       MPI_Igatherv(sv, r + 1, MPI_INT, rv, counts, displs, MPI_INT, 0, W, &q), "MPI_Gatherv",
       "MPI_Igatherv", 4 * (r + 1));
  if (r == 0) absorb(rv, sum_1_to(n));
  COLL(MPI_Scatter(sv, 3, MPI_INT, rv, 3, MPI_INT, 2, W),
       MPI_Iscatter(sv, 3, MPI_INT, rv, 3, MPI_INT, 2, W, &q), "MPI_Scatter", "MPI_Iscatter",
       r == 2 ? 12 * n : 12);
  check(rv[0] == 200 + 3 * r, "scatter");
  COLL(MPI_Scatterv(sv, counts, displs, MPI_INT, rv, r + 1, MPI_INT, 0, W),
       MPI_Iscatterv(sv, counts, displs, MPI_INT, rv, r + 1, MPI_INT, 0, W, &q), "MPI_Scatterv",
       "MPI_Iscatterv", r == 0 ? 4 * sum_1_to(n) : 4 * (r + 1));
  check(rv[r] == sum_1_to(r) + r, "scatterv");
  COLL(MPI_Allgather(sv, 2, MPI_INT, rv, 2, MPI_INT, W),
       MPI_Iallgather(sv, 2, MPI_INT, rv, 2, MPI_INT, W, &q), "MPI_Allgather", "MPI_Iallgather", 8);
  absorb(rv, 2 * n);
  rv[2 * r] = 9;
  rv[2 * r + 1] = 9;
  COLL(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rv, 2, MPI_INT, W),
       MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rv, 2, MPI_INT, W, &q), "MPI_Allgather",
       "MPI_Iallgather", 8);
  check(rv[2 * left] == 9, "allgather in place");
  COLL(MPI_Allgatherv(sv, r + 1, MPI_INT, rv, counts, displs, MPI_INT, W),
       MPI_Iallgatherv(sv, r + 1, MPI_INT, rv, counts, displs, MPI_INT, W, &q), "MPI_Allgatherv",
       "MPI_Iallgatherv", 4 * (r + 1));
  absorb(rv, sum_1_to(n));
  COLL(MPI_Alltoall(sv, 2, MPI_INT, rv, 2, MPI_INT, W),
       MPI_Ialltoall(sv, 2, MPI_INT, rv, 2, MPI_INT, W, &q), "MPI_Alltoall", "MPI_Ialltoall",
       8 * n);
  check(rv[2 * left] == left * 100 + 2 * r, "alltoall");
  for (int i = 0; i < n; ++i) {
    rcounts[i] = r + 1;
    rdispls[i] = i * (r + 1);
  }
  COLL(MPI_Alltoallv(sv, counts, displs, MPI_INT, rv, rcounts, rdispls, MPI_INT, W),
       MPI_Ialltoallv(sv, counts, displs, MPI_INT, rv, rcounts, rdispls, MPI_INT, W, &q),
       "MPI_Alltoallv", "MPI_Ialltoallv", 4 * sum_1_to(n));
  absorb(rv, n * (r + 1));
  {
    int wcounts[64], sd[64], rd[64];
    double sdw[64], rdw[64];
    long long wbytes = 0;
    for (int i = 0; i < n; ++i) {
      wcounts[i] = 1;
      sd[i] = rd[i] = 8 * i;
      stypes[i] = wtype(i);
      rtypes[i] = wtype(r);
      wbytes += wtype(i) == MPI_DOUBLE ? 8 : 4;
      sdw[i] = r;
    }
    COLL(MPI_Alltoallw(sdw, wcounts, sd, stypes, rdw, wcounts, rd, rtypes, W),
         MPI_Ialltoallw(sdw, wcounts, sd, stypes, rdw, wcounts, rd, rtypes, W, &q), "MPI_Alltoallw",
         "MPI_Ialltoallw", wbytes);
  }
  COLL(MPI_Reduce_scatter(sv, rv, counts, MPI_INT, MPI_SUM, W),
       MPI_Ireduce_scatter(sv, rv, counts, MPI_INT, MPI_SUM, W, &q), "MPI_Reduce_scatter",
       "MPI_Ireduce_scatter", 4 * sum_1_to(n));
  absorb(rv, r + 1);
  COLL(MPI_Reduce_scatter_block(sv, rv, 2, MPI_INT, MPI_SUM, W),
       MPI_Ireduce_scatter_block(sv, rv, 2, MPI_INT, MPI_SUM, W, &q), "MPI_Reduce_scatter_block",
       "MPI_Ireduce_scatter_block", 8 * n);
  absorb(rv, 2);
  COLL(MPI_Scan(&lv, &lr, 1, MPI_LONG, MPI_SUM, W),
       MPI_Iscan(&lv, &lr, 1, MPI_LONG, MPI_SUM, W, &q), "MPI_Scan", "MPI_Iscan", 8);
  check(lr == sum_1_to(r + 1), "scan");
  COLL(MPI_Exscan(&lv, &lr, 1, MPI_LONG, MPI_SUM, W),
       MPI_Iexscan(&lv, &lr, 1, MPI_LONG, MPI_SUM, W, &q), "MPI_Exscan", "MPI_Iexscan", 8);
  if (r > 0) check(lr == sum_1_to(r), "exscan");
#undef COLL

  if (nb) { /* several nonblocking collectives completed by one Waitall */
    MPI_Request reqs[3];
    MPI_Iallreduce(dv, dr, 2, MPI_DOUBLE, MPI_SUM, W, &reqs[0]);
    MPI_Ibcast(sv, 10, MPI_INT, 0, W, &reqs[1]);
    MPI_Ibarrier(W, &reqs[2]);
    expect("MPI_Iallreduce", 16);
    expect("MPI_Ibcast", 40);
    expect("MPI_Ibarrier", 0);
    MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE);
    expect("MPI_Waitall", 56);
    expect(DONE, 16);
    expect(DONE, 40);
    expect(DONE, 0);
  }
}

/* ------------------------------------------------------------------ communicators */
static void communicators(void) {
  MPI_Comm dup, half, shm, evens = MPI_COMM_NULL, odds = MPI_COMM_NULL, idup, inter, merged;
  MPI_Group world_group, g;
  MPI_Request q;
  int x = r + 1, y = 0, members[64];

  MPI_Comm_dup(W, &dup);
  expect("MPI_Comm_dup", 0);
  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, dup);
  expect("MPI_Allreduce", 4);
  check(y == sum_1_to(n), "dup allreduce");

  MPI_Comm_split(W, r % 2, r, &half);
  expect("MPI_Comm_split", 0);
  y = r;
  MPI_Bcast(&y, 1, MPI_INT, 0, half);
  expect("MPI_Bcast", 4);
  check(y == r % 2, "split bcast");

  MPI_Comm_split_type(W, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, &shm);
  expect("MPI_Comm_split_type", 0);
  MPI_Barrier(shm);
  expect("MPI_Barrier", 0);

  MPI_Comm_group(W, &world_group);
  for (int i = 0; i < n / 2; ++i) members[i] = 2 * i;
  MPI_Group_incl(world_group, n / 2, members, &g);
  MPI_Comm_create(W, g, &evens);
  expect("MPI_Comm_create", 0);
  MPI_Group_free(&g);
  check((evens != MPI_COMM_NULL) == (r % 2 == 0), "comm_create");
  if (evens != MPI_COMM_NULL) {
    MPI_Barrier(evens);
    expect("MPI_Barrier", 0);
  }
  if (r % 2 == 1) {
    for (int i = 0; i < n / 2; ++i) members[i] = 2 * i + 1;
    MPI_Group_incl(world_group, n / 2, members, &g);
    MPI_Comm_create_group(W, g, 7, &odds);
    expect("MPI_Comm_create_group", 0);
    MPI_Group_free(&g);
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, odds);
    expect("MPI_Allreduce", 4);
  }
  MPI_Group_free(&world_group);

  MPI_Comm_idup(W, &idup, &q);
  expect("MPI_Comm_idup", 0);
  MPI_Wait(&q, MPI_STATUS_IGNORE);
  expect("MPI_Wait", 0);
  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MAX, idup);
  expect("MPI_Allreduce", 4);
  check(y == n, "idup allreduce");

  /* Intercommunicator between the even and the odd half. */
  MPI_Intercomm_create(half, 0, W, r % 2 == 0 ? 1 : 0, 99, &inter);
  expect("MPI_Intercomm_create", 0);
  int local_rank, z = 0;
  MPI_Comm_rank(half, &local_rank);
  expect("MPI_Comm_rank", 0);
  MPI_Sendrecv(&x, 1, MPI_INT, local_rank, 5, &z, 1, MPI_INT, local_rank, 5, inter,
               MPI_STATUS_IGNORE);
  expect("MPI_Sendrecv", 4);
  check(z == (r % 2 == 0 ? r + 2 : r), "intercomm sendrecv");
  MPI_Barrier(inter);
  expect("MPI_Barrier", 0);
  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, inter);
  expect("MPI_Allreduce", 4);
  MPI_Intercomm_merge(inter, r % 2, &merged);
  expect("MPI_Intercomm_merge", 0);
  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, merged);
  expect("MPI_Allreduce", 4);
  check(y == sum_1_to(n), "merged allreduce");

  MPI_Comm* all[] = {&dup, &half, &shm, &evens, &odds, &idup, &inter, &merged};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
    if (*all[i] == MPI_COMM_NULL) continue;
    MPI_Comm_free(all[i]);
    expect("MPI_Comm_free", 0);
  }
}

/* ------------------------------------------------------------------ topologies */
static void topologies(void) {
  MPI_Comm ring, cart2, sub, dg, dg2, graph;
  MPI_Request q;
  int sv[16], rv[16], c2[2] = {2, 2}, d2[2] = {0, 2}, cv[2] = {1, 2}, rc[2] = {2, 1},
                      rd[2] = {0, 2};
  for (int i = 0; i < 16; ++i) sv[i] = r * 10 + i;

  int dims[1] = {n}, periods[1] = {1};
  MPI_Cart_create(W, 1, dims, periods, 0, &ring);
  expect("MPI_Cart_create", 0);
  for (int nb = 0; nb < 2; ++nb) {
    const char* suffix = nb ? "MPI_Ineighbor_" : "MPI_Neighbor_";
    char name[64];
#define NEIGHBOR(op, blocking_call, nb_call, bytes)  \
  do {                                               \
    if (nb) {                                        \
      nb_call;                                       \
      MPI_Wait(&q, MPI_STATUS_IGNORE);               \
      expect("MPI_Wait", bytes);                     \
    } else {                                         \
      blocking_call;                                 \
    }                                                \
    snprintf(name, sizeof name, "%s%s", suffix, op); \
    expect(name, bytes);                             \
  } while (0)
    NEIGHBOR("allgather", MPI_Neighbor_allgather(sv, 1, MPI_INT, rv, 1, MPI_INT, ring),
             MPI_Ineighbor_allgather(sv, 1, MPI_INT, rv, 1, MPI_INT, ring, &q), 4);
    check(rv[0] == left * 10 && rv[1] == right * 10, "neighbor_allgather");
    NEIGHBOR("allgatherv", MPI_Neighbor_allgatherv(sv, 2, MPI_INT, rv, c2, d2, MPI_INT, ring),
             MPI_Ineighbor_allgatherv(sv, 2, MPI_INT, rv, c2, d2, MPI_INT, ring, &q), 8);
    absorb(rv, 4);
    NEIGHBOR("alltoall", MPI_Neighbor_alltoall(sv, 3, MPI_INT, rv, 3, MPI_INT, ring),
             MPI_Ineighbor_alltoall(sv, 3, MPI_INT, rv, 3, MPI_INT, ring, &q), 24);
    check(rv[0] == left * 10 + 3 && rv[3] == right * 10, "neighbor_alltoall");
    NEIGHBOR("alltoallv", MPI_Neighbor_alltoallv(sv, cv, d2, MPI_INT, rv, rc, rd, MPI_INT, ring),
             MPI_Ineighbor_alltoallv(sv, cv, d2, MPI_INT, rv, rc, rd, MPI_INT, ring, &q), 12);
    absorb(rv, 3);
    {
      double sw[2] = {r, r + 0.5}, rw[2];
      int wc[2] = {1, 1};
      MPI_Aint wd[2] = {0, 8};
      MPI_Datatype wt[2] = {MPI_DOUBLE, MPI_DOUBLE};
      NEIGHBOR("alltoallw", MPI_Neighbor_alltoallw(sw, wc, wd, wt, rw, wc, wd, wt, ring),
               MPI_Ineighbor_alltoallw(sw, wc, wd, wt, rw, wc, wd, wt, ring, &q), 16);
      check(rw[0] == left + 0.5 && rw[1] == right, "neighbor_alltoallw");
    }
#undef NEIGHBOR
  }

  int dims2[2] = {2, n / 2}, periods2[2] = {0, 0}, remain[2] = {1, 0};
  MPI_Cart_create(W, 2, dims2, periods2, 0, &cart2);
  expect("MPI_Cart_create", 0);
  MPI_Neighbor_alltoall(sv, 1, MPI_INT, rv, 1, MPI_INT, cart2); /* 4 neighbours, some null */
  expect("MPI_Neighbor_alltoall", 16);
  MPI_Cart_sub(cart2, remain, &sub);
  expect("MPI_Cart_sub", 0);
  MPI_Barrier(sub);
  expect("MPI_Barrier", 0);

  int nbrs[2] = {left, right};
  MPI_Dist_graph_create_adjacent(W, 2, nbrs, MPI_UNWEIGHTED, 2, nbrs, MPI_UNWEIGHTED, MPI_INFO_NULL,
                                 0, &dg);
  expect("MPI_Dist_graph_create_adjacent", 0);
  MPI_Neighbor_alltoall(sv, 1, MPI_INT, rv, 1, MPI_INT, dg);
  expect("MPI_Neighbor_alltoall", 8);
  check(rv[0] == left * 10 + 1 && rv[1] == right * 10, "dist graph alltoall");

  int src[1] = {r}, deg[1] = {1}, dst[1] = {right};
  MPI_Dist_graph_create(W, 1, src, deg, dst, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &dg2);
  expect("MPI_Dist_graph_create", 0);
  MPI_Neighbor_allgather(sv, 1, MPI_INT, rv, 1, MPI_INT, dg2);
  expect("MPI_Neighbor_allgather", 4);
  check(rv[0] == left * 10, "dist graph allgather");

  int index[64], edges[128];
  for (int i = 0; i < n; ++i) {
    index[i] = 2 * (i + 1);
    edges[2 * i] = (i - 1 + n) % n;
    edges[2 * i + 1] = (i + 1) % n;
  }
  MPI_Graph_create(W, n, index, edges, 0, &graph);
  expect("MPI_Graph_create", 0);
  MPI_Neighbor_alltoall(sv, 2, MPI_INT, rv, 2, MPI_INT, graph);
  expect("MPI_Neighbor_alltoall", 16);
  absorb(rv, 4);

  MPI_Comm* all[] = {&ring, &cart2, &sub, &dg, &dg2, &graph};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
    MPI_Comm_free(all[i]);
    expect("MPI_Comm_free", 0);
  }
}

/* ------------------------------------------------------------------ one-sided */
static void one_sided(void) {
  int wbuf[16] = {0}, x = r + 1, y[2] = {0, 0}, res = 0, cmp = 0, flag = 0;
  MPI_Win win;
  MPI_Request reqs[4];
  MPI_Win_create(wbuf, sizeof wbuf, sizeof(int), MPI_INFO_NULL, W, &win);
  expect("MPI_Win_create", sizeof wbuf);
  MPI_Win_fence(0, win);
  MPI_Put(&x, 1, MPI_INT, right, 0, 1, MPI_INT, win);
  MPI_Win_fence(0, win);
  check(wbuf[0] == left + 1, "put");
  MPI_Get(y, 2, MPI_INT, left, 0, 2, MPI_INT, win);
  MPI_Win_fence(0, win);
  check(y[0] == (left - 1 + n) % n + 1, "get");
  MPI_Accumulate(&x, 1, MPI_INT, right, 1, 1, MPI_INT, MPI_SUM, win);
  MPI_Win_fence(0, win);
  MPI_Get_accumulate(&x, 1, MPI_INT, &res, 1, MPI_INT, right, 2, 1, MPI_INT, MPI_SUM, win);
  MPI_Win_fence(0, win);
  MPI_Fetch_and_op(&x, &res, MPI_INT, right, 3, MPI_SUM, win);
  MPI_Win_fence(0, win);
  MPI_Compare_and_swap(&x, &cmp, &res, MPI_INT, right, 4, win);
  MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
  check(wbuf[1] == left + 1 && wbuf[2] == left + 1 && wbuf[3] == left + 1, "accumulate");
  check(wbuf[4] == left + 1, "compare_and_swap");
  expect("MPI_Put", 4);
  expect("MPI_Get", 8);
  expect("MPI_Accumulate", 4);
  expect("MPI_Get_accumulate", 4);
  expect("MPI_Fetch_and_op", 4);
  expect("MPI_Compare_and_swap", 4);
  for (int i = 0; i < 7; ++i) expect("MPI_Win_fence", 0);

  MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
  MPI_Put(&x, 1, MPI_INT, right, 5, 1, MPI_INT, win);
  MPI_Win_flush(right, win);
  MPI_Win_flush_local(right, win);
  MPI_Win_unlock(right, win);
  expect("MPI_Win_lock", 0);
  expect("MPI_Put", 4);
  expect("MPI_Win_flush", 0);
  expect("MPI_Win_flush_local", 0);
  expect("MPI_Win_unlock", 0);

  int got = 0, acc_res = 0;
  MPI_Win_lock_all(0, win);
  MPI_Rput(&x, 1, MPI_INT, right, 6, 1, MPI_INT, win, &reqs[0]);
  MPI_Rget(&got, 1, MPI_INT, left, 7, 1, MPI_INT, win, &reqs[1]);
  MPI_Raccumulate(&x, 1, MPI_INT, right, 8, 1, MPI_INT, MPI_SUM, win, &reqs[2]);
  MPI_Rget_accumulate(&x, 1, MPI_INT, &acc_res, 1, MPI_INT, right, 9, 1, MPI_INT, MPI_SUM, win,
                      &reqs[3]);
  MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE);
  MPI_Win_flush_all(win);
  MPI_Win_flush_local_all(win);
  MPI_Win_sync(win);
  MPI_Win_unlock_all(win);
  expect("MPI_Win_lock_all", 0);
  expect("MPI_Rput", 4);
  expect("MPI_Rget", 4);
  expect("MPI_Raccumulate", 4);
  expect("MPI_Rget_accumulate", 4);
  expect("MPI_Waitall", 16);
  for (int i = 0; i < 4; ++i) expect(DONE, 4);
  expect("MPI_Win_flush_all", 0);
  expect("MPI_Win_flush_local_all", 0);
  expect("MPI_Win_sync", 0);
  expect("MPI_Win_unlock_all", 0);
  MPI_Barrier(W);
  expect("MPI_Barrier", 0);
  check(wbuf[6] == left + 1 && wbuf[8] == left + 1, "rput/raccumulate");

  /* Post/start/complete/wait, then again with Win_test. */
  MPI_Group world_group, from, to;
  MPI_Comm_group(W, &world_group);
  MPI_Group_incl(world_group, 1, &left, &from);
  MPI_Group_incl(world_group, 1, &right, &to);
  for (int round = 0; round < 2; ++round) {
    MPI_Win_post(from, 0, win);
    MPI_Win_start(to, 0, win);
    MPI_Put(&x, 1, MPI_INT, right, 10 + round, 1, MPI_INT, win);
    MPI_Win_complete(win);
    expect("MPI_Win_post", 0);
    expect("MPI_Win_start", 0);
    expect("MPI_Put", 4);
    expect("MPI_Win_complete", 0);
    if (round == 0) {
      MPI_Win_wait(win);
      expect("MPI_Win_wait", 0);
    } else {
      for (flag = 0; !flag;) {
        MPI_Win_test(win, &flag);
        expect("MPI_Win_test", 0);
      }
    }
    check(wbuf[10 + round] == left + 1, "pscw put");
  }
  MPI_Group_free(&from);
  MPI_Group_free(&to);
  MPI_Group_free(&world_group);
  absorb(wbuf, 16);
  MPI_Win_free(&win);
  expect("MPI_Win_free", 0);

  int* base = NULL;
  MPI_Win_allocate(64, sizeof(int), MPI_INFO_NULL, W, &base, &win);
  expect("MPI_Win_allocate", 64);
  MPI_Win_fence(0, win);
  MPI_Put(&x, 1, MPI_INT, left, 0, 1, MPI_INT, win);
  MPI_Win_fence(0, win);
  check(base[0] == right + 1, "allocate put");
  MPI_Win_free(&win);
  expect("MPI_Win_fence", 0);
  expect("MPI_Put", 4);
  expect("MPI_Win_fence", 0);
  expect("MPI_Win_free", 0);

  MPI_Comm shm;
  MPI_Comm_split_type(W, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, &shm);
  expect("MPI_Comm_split_type", 0);
  MPI_Win_allocate_shared(32, sizeof(int), MPI_INFO_NULL, shm, &base, &win);
  expect("MPI_Win_allocate_shared", 32);
  MPI_Win_fence(0, win);
  base[0] = x;
  MPI_Win_sync(win);
  MPI_Win_fence(0, win);
  MPI_Win_free(&win);
  expect("MPI_Win_fence", 0);
  expect("MPI_Win_sync", 0);
  expect("MPI_Win_fence", 0);
  expect("MPI_Win_free", 0);
  MPI_Comm_free(&shm);
  expect("MPI_Comm_free", 0);

  static char dyn[128];
  MPI_Win_create_dynamic(MPI_INFO_NULL, W, &win);
  MPI_Win_attach(win, dyn, sizeof dyn);
  MPI_Win_detach(win, dyn);
  MPI_Win_free(&win);
  expect("MPI_Win_create_dynamic", 0);
  expect("MPI_Win_attach", 128);
  expect("MPI_Win_detach", 0);
  expect("MPI_Win_free", 0);
}

/* ------------------------------------------------------------------ main */
int main(int argc, char** argv) {
  const char* expect_dir = argc > 1 ? argv[1] : "-";
  const int exit_code = argc > 2 ? atoi(argv[2]) : 0;
  MPI_Init(&argc, &argv);
  expect("MPI_Init", 0);
  MPI_Comm_rank(W, &r);
  MPI_Comm_size(W, &n);
  expect("MPI_Comm_rank", 0);
  expect("MPI_Comm_size", 0);
  if (n < 4 || n % 2 != 0 || n > 32) {
    if (r == 0) fprintf(stderr, "mpi_workload: needs an even number of ranks, 4 to 32\n");
    MPI_Abort(W, 2);
  }
  left = (r - 1 + n) % n;
  right = (r + 1) % n;

  point_to_point();
  collectives(0);
  collectives(1);
  communicators();
  topologies();
  one_sided();

  long long all[64];
  int total_errors = 0;
  MPI_Gather(&digest, 1, MPI_LONG_LONG, all, 1, MPI_LONG_LONG, 0, W);
  expect("MPI_Gather", 8);
  MPI_Allreduce(&errors, &total_errors, 1, MPI_INT, MPI_SUM, W);
  expect("MPI_Allreduce", 4);
  if (r == 0) {
    printf("mpi_workload: %d ranks\n", n);
    for (int i = 0; i < n; ++i) printf("rank %d digest %lld\n", i, all[i]);
    printf("errors %d\n", total_errors);
    fflush(stdout);
  }
  /* Written before MPI_Finalize: once one rank exits with a non-zero code, mpirun kills the
   * others. */
  expect("MPI_Finalize", 0);
  if (strcmp(expect_dir, "-") != 0) {
    char path[4096];
    snprintf(path, sizeof path, "%s/expected-%d.txt", expect_dir, r);
    FILE* f = fopen(path, "w");
    if (f == NULL) {
      ++total_errors;
    } else {
      for (int i = 0; i < num_expected; ++i) {
        fprintf(f, "%s %lld %lld\n", expected[i].name, expected[i].count, expected[i].bytes);
      }
      fclose(f);
    }
  }
  MPI_Finalize();
  return total_errors != 0 ? 1 : exit_code;
}
