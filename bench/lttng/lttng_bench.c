/* The LTTng-UST peer of recorder_bench. bench/run_recorder_bench.sh creates and starts an LTTng
 * session around each mode and measures the trace's size on disk.
 *
 *   lttng_bench [REPS] [SPANS]      ns per span (two tracepoints) while the session records,
 *                                   timed as recorder_bench times tracedb's span: REPS
 *                                   repetitions of SPANS spans in timed batches of 32,768,
 *                                   median over all batches
 *   lttng_bench --workload STEPS TENSORS
 *                                   the Horovod-like workload of recorder_bench, event for event:
 *                                   per step and tensor an ALLREDUCE span holding five phase
 *                                   spans (begin/end with name, lane and category, as
 *                                   tracedb_begin_ex/end_ex record them) that busy-wait
 *                                   log-uniform durations from 500 ns to 50 us drawn by the same
 *                                   generator (mt19937_64 seeded 7, libstdc++'s
 *                                   uniform_real_distribution), so both tools record the same
 *                                   events at the same pace. Prints the events recorded.
 */
#define TRACEPOINT_CREATE_PROBES
#define TRACEPOINT_DEFINE
#include "lttng_tp.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* mt19937_64 as std::mt19937_64 (Matsumoto and Nishimura's reference, 2004). */
#define MT_NN 312
#define MT_MM 156
static uint64_t mt[MT_NN];
static int mti = MT_NN + 1;
static void mt_seed(uint64_t seed) {
  mt[0] = seed;
  for (mti = 1; mti < MT_NN; mti++)
    mt[mti] = 6364136223846793005ULL * (mt[mti - 1] ^ (mt[mti - 1] >> 62)) + (uint64_t)mti;
}
static uint64_t mt_next(void) {
  static const uint64_t mag01[2] = {0ULL, 0xB5026F5AA96619E9ULL};
  const uint64_t um = 0xFFFFFFFF80000000ULL, lm = 0x7FFFFFFFULL;
  uint64_t x;
  if (mti >= MT_NN) {
    int i;
    for (i = 0; i < MT_NN - MT_MM; i++) {
      x = (mt[i] & um) | (mt[i + 1] & lm);
      mt[i] = mt[i + MT_MM] ^ (x >> 1) ^ mag01[x & 1ULL];
    }
    for (; i < MT_NN - 1; i++) {
      x = (mt[i] & um) | (mt[i + 1] & lm);
      mt[i] = mt[i + (MT_MM - MT_NN)] ^ (x >> 1) ^ mag01[x & 1ULL];
    }
    x = (mt[MT_NN - 1] & um) | (mt[0] & lm);
    mt[MT_NN - 1] = mt[MT_MM - 1] ^ (x >> 1) ^ mag01[x & 1ULL];
    mti = 0;
  }
  x = mt[mti++];
  x ^= (x >> 29) & 0x5555555555555555ULL;
  x ^= (x << 17) & 0x71D67FFFEDA60000ULL;
  x ^= (x << 37) & 0xFFF7EEE000000000ULL;
  x ^= (x >> 43);
  return x;
}
/* std::uniform_real_distribution<double>(a, b) over mt19937_64 in libstdc++:
 * generate_canonical takes one draw, divided by 2^64 (kept below 1). */
static double uniform(double a, double b) {
  double c = (double)mt_next() / 18446744073709551616.0;
  if (c >= 1.0) c = nextafter(1.0, 0.0);
  return c * (b - a) + a;
}

static void spin(int64_t ns) {
  const double until = now_ns() + (double)ns;
  while (now_ns() < until) {
  }
}

static int run_workload(int steps, int tensors) {
  enum { kPhases = 5, kAllreduce = 6, kCatPhase = 3 };
  const double lo = log(500.0), hi = log(50000.0);
  long events = 0;
  mt_seed(7);
  for (int s = 0; s < steps; ++s) {
    for (int t = 0; t < tensors; ++t) {
      const uint32_t lane = (uint32_t)t + 1;
      tracepoint(tracedb_bench, phase_begin, kAllreduce, lane, kCatPhase);
      for (uint32_t p = 1; p <= kPhases; ++p) {
        tracepoint(tracedb_bench, phase_begin, p, lane, kCatPhase);
        spin((int64_t)exp(uniform(lo, hi)));
        tracepoint(tracedb_bench, phase_end, p, lane, kCatPhase);
      }
      tracepoint(tracedb_bench, phase_end, kAllreduce, lane, kCatPhase);
      events += 2 * (kPhases + 1);
    }
  }
  printf("lttng_workload_events %ld\n", events);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--workload") == 0) {
    if (argc != 4) {
      fprintf(stderr, "usage: %s --workload STEPS TENSORS\n", argv[0]);
      return 2;
    }
    return run_workload(atoi(argv[2]), atoi(argv[3]));
  }
  /* As recorder_bench times tracedb's span: batches of 32,768 spans, each timed on its own,
   * the median over every batch of every repetition; between batches an untimed 20 ms pause
   * lets the consumer daemon drain the buffers (recorder_bench calls tracedb_flush there). */
  enum { kBatch = 32768, kMaxBatches = 4096 };
  int reps = argc > 1 ? atoi(argv[1]) : 7;
  long spans = argc > 2 ? atol(argv[2]) : 1048576;
  static double results[kMaxBatches];
  int nres = 0;
  const long batches = spans / kBatch > 0 ? spans / kBatch : 1;
  const struct timespec pause = {0, 20000000};
  for (int r = 0; r < reps; ++r) {
    for (long b = 0; b < batches && nres < kMaxBatches; ++b) {
      double t0 = now_ns();
      for (long i = 0; i < kBatch; ++i) {
        tracepoint(tracedb_bench, span_begin, 7);
        tracepoint(tracedb_bench, span_end, 7);
      }
      results[nres++] = (now_ns() - t0) / kBatch;
      nanosleep(&pause, NULL);
    }
  }
  qsort(results, nres, sizeof(double), cmp);
  printf("lttng_span_ns %.1f\n", results[nres / 2]);
  printf("lttng_events %ld\n", 2L * kBatch * nres);
  return 0;
}
