// A workload from outside the project's generators (issue 24 item 2): N complete spans recorded
// through the C ABI (tracedb_complete_ex) with random durations, on T threads, into DIR; then
// `tracedb compact DIR -o X.tdb` and the DB's bytes per event (docs/bench-compaction.md).
//
// Usage: random_spans DIR N [--threads T] [--max-dur NS] [--names K] [--clock now|synthetic]
//                      [--gap NS] [--seed S]
//   Each span's duration is uniform in [0, NS) (default 1,000,000: about 20 random bits per
//   span, which no codec can store in fewer); its name is one of K (default 8) chosen at random.
//   --clock now (default): each span starts at tracedb_now(), read once per span, as a program
//   that records a span after the fact would; spans then overlap their predecessors.
//   --clock synthetic: back to back, each starting a random 0..NS-1 ns after the previous one
//   ended (no overlap; --gap, default 1024; --gap 0: each starts where the one before ended,
//   as consecutive phases of a loop do, and the durations are the only random times).
// The random numbers are a 64-bit xorshift seeded per thread (deterministic for a given seed).
// TRACEDB_BUFFER_MB (e.g. 1024) keeps every event; the dropped count is printed.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracedb/recorder.h"

typedef struct {
  long long n;
  long long max_dur;
  long long gap;
  int names;
  int synthetic;
  uint64_t seed;
  uint32_t name_ids[64];
} Job;

static uint64_t Next(uint64_t* s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *s = x;
  return x;
}

static void* Run(void* arg) {
  const Job* job = (const Job*)arg;
  uint64_t rng = job->seed;
  for (int i = 0; i < 8; ++i) Next(&rng);
  int64_t t = tracedb_now();
  for (long long i = 0; i < job->n; ++i) {
    const int64_t dur = (int64_t)(Next(&rng) % (uint64_t)job->max_dur);
    const uint32_t name = job->name_ids[Next(&rng) % (uint64_t)job->names];
    if (job->synthetic) {
      tracedb_complete_ex(name, TRACEDB_CAT_COMPUTE, 0, t, dur, NULL);
      t += dur;
      if (job->gap > 0) t += (int64_t)(Next(&rng) % (uint64_t)job->gap);
    } else {
      tracedb_complete_ex(name, TRACEDB_CAT_COMPUTE, 0, tracedb_now(), dur, NULL);
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr,
            "usage: %s DIR N [--threads T] [--max-dur NS] [--names K] "
            "[--clock now|synthetic] [--gap NS] [--seed S]\n",
            argv[0]);
    return 2;
  }
  const char* dir = argv[1];
  const long long n = atoll(argv[2]);
  int threads = 1;
  Job base;
  memset(&base, 0, sizeof base);
  base.max_dur = 1000000;
  base.names = 8;
  base.gap = 1024;
  base.seed = 0x9E3779B97F4A7C15ull;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--threads") == 0) {
      threads = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "--max-dur") == 0) {
      base.max_dur = atoll(argv[i + 1]);
    } else if (strcmp(argv[i], "--names") == 0) {
      base.names = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "--clock") == 0) {
      base.synthetic = strcmp(argv[i + 1], "synthetic") == 0;
      if (!base.synthetic && strcmp(argv[i + 1], "now") != 0) {
        fprintf(stderr, "--clock: now or synthetic, not %s\n", argv[i + 1]);
        return 2;
      }
    } else if (strcmp(argv[i], "--gap") == 0) {
      base.gap = atoll(argv[i + 1]);
    } else if (strcmp(argv[i], "--seed") == 0) {
      base.seed = strtoull(argv[i + 1], NULL, 0) | 1;
    } else {
      fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (n <= 0 || threads < 1 || threads > 256 || base.max_dur < 1 || base.gap < 0 ||
      base.names < 1 || base.names > 64) {
    fprintf(stderr,
            "bad N, --threads (1..256), --max-dur (>= 1), --gap (>= 0) or --names (1..64)\n");
    return 2;
  }
  if (tracedb_start(dir) != TRACEDB_OK) {
    fprintf(stderr, "cannot record into %s\n", dir);
    return 1;
  }
  for (int k = 0; k < base.names; ++k) {
    char name[32];
    snprintf(name, sizeof name, "op_%d", k);
    base.name_ids[k] = tracedb_intern(name);
  }
  pthread_t tid[256];
  Job jobs[256];
  for (int i = 0; i < threads; ++i) {
    jobs[i] = base;
    jobs[i].n = n / threads + (i < n % threads ? 1 : 0);
    jobs[i].seed = base.seed + 0x632BE59BD9B4E019ull * (uint64_t)i;
    if (pthread_create(&tid[i], NULL, Run, &jobs[i]) != 0) {
      fprintf(stderr, "cannot start thread %d\n", i);
      return 1;
    }
  }
  for (int i = 0; i < threads; ++i) pthread_join(tid[i], NULL);
  tracedb_stop();
  tracedb_counters k;
  tracedb_get_counters(&k);
  printf("%llu events written, %llu dropped\n", (unsigned long long)k.written,
         (unsigned long long)k.dropped);
  return k.dropped == 0 ? 0 : 3;
}
