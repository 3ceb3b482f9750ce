/* A plain C program against tracedb/recorder.h: N threads record spans, instants, counters and
 * complete events. It prints how many records it emitted (a begin and its end are two records,
 * as the recorder's written/dropped counters count them) and how many events (a begin/end pair
 * is one span, one event): `tracedb info --json` and the compacted DB must count the events.
 * Then 1000 complete events "known" of 6,067,204 ns each, 7 ms apart (a span of 7 s of recorder
 * time): on rank 0, whose recorder clock is the common clock, they read back exactly.
 * Usage: c_api_program DIR THREADS RECORDS_PER_THREAD */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "tracedb/recorder.h"

#define KNOWN 1000
#define KNOWN_DUR 6067204

static uint32_t g_names[4];
static long g_per_thread;
/* Events per thread: each loop of 5 records is 4 events (the span once), then single instants. */
static long EventsPerThread(void) { return (g_per_thread / 5) * 4 + g_per_thread % 5; }

static void* Work(void* arg) {
  long emitted = 0;
  char name[32];
  snprintf(name, sizeof(name), "worker-%ld", (long)(size_t)arg);
  tracedb_thread_name(name);
  while (emitted + 5 <= g_per_thread) {
    tracedb_begin(g_names[0]);
    tracedb_instant(g_names[1]);
    tracedb_counter(g_names[2], (double)emitted);
    tracedb_complete(g_names[3], tracedb_now(), 10);
    tracedb_end(g_names[0]);
    emitted += 5;
  }
  while (emitted < g_per_thread) {
    tracedb_instant(g_names[1]);
    emitted++;
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s DIR THREADS RECORDS_PER_THREAD\n", argv[0]);
    return 2;
  }
  int threads = atoi(argv[2]);
  g_per_thread = atol(argv[3]);
  if (tracedb_start(argv[1]) != TRACEDB_OK) {
    fprintf(stderr, "tracedb_start failed\n");
    return 1;
  }
  g_names[0] = tracedb_intern("span");
  g_names[1] = tracedb_intern("tick");
  g_names[2] = tracedb_intern("value");
  g_names[3] = tracedb_intern("io");
  pthread_t* t = calloc((size_t)threads, sizeof(pthread_t));
  for (int i = 0; i < threads; ++i) pthread_create(&t[i], NULL, Work, (void*)(size_t)i);
  for (int i = 0; i < threads; ++i) pthread_join(t[i], NULL);
  free(t);
  /* Known durations: KNOWN complete events of KNOWN_DUR ns, one after another on this thread,
   * spread over some seconds of recorder time (rank 0's must read back exactly). */
  const uint32_t known = tracedb_intern("known");
  const int64_t start = tracedb_now();
  for (int i = 0; i < KNOWN; ++i) tracedb_complete(known, start + (int64_t)i * 7000000, KNOWN_DUR);
  tracedb_counters c;
  tracedb_stop();
  tracedb_get_counters(&c);
  printf("emitted %ld written %llu dropped %llu events %ld\n", (long)threads * g_per_thread + KNOWN,
         (unsigned long long)c.written, (unsigned long long)c.dropped,
         (long)threads * EventsPerThread() + KNOWN);
  return 0;
}
