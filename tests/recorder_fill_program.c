/* Records steadily into DIR until told count is reached, for the full-disk test: THREADS threads
 * each emit EVENTS events (spans, instants, counters), pausing 1 ms after every 5,000, as a
 * training loop does between steps. After each thread's first 5,000 events, all of them wait
 * while the main thread calls tracedb_flush(): that first write is small (some 40 KB), so some
 * events are written however late the flusher runs afterwards (a flusher held back on a loaded
 * machine could otherwise make its first write larger than the whole small filesystem).
 * Prints the recorder's counters after tracedb_stop:
 *   emitted N written W dropped D stop S
 * Usage: recorder_fill_program DIR THREADS EVENTS_PER_THREAD */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tracedb/recorder.h"

static long g_per_thread;
static uint32_t g_span, g_tick, g_value;
static pthread_barrier_t g_first_flush; /* the workers and main, twice: before and after it */

static void* Work(void* arg) {
  (void)arg;
  const struct timespec pause = {0, 1000000};
  long emitted = 0;
  while (emitted < g_per_thread) {
    switch (emitted % 4) {
      case 0:
        tracedb_begin(g_span);
        break;
      case 1:
        tracedb_counter(g_value, (double)emitted);
        break;
      case 2:
        tracedb_instant(g_tick);
        break;
      default:
        tracedb_end(g_span);
        break;
    }
    if (++emitted % 5000 == 0) {
      if (emitted == 5000) {
        pthread_barrier_wait(&g_first_flush); /* main flushes */
        pthread_barrier_wait(&g_first_flush);
      }
      nanosleep(&pause, NULL);
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s DIR THREADS EVENTS_PER_THREAD\n", argv[0]);
    return 2;
  }
  const int threads = atoi(argv[2]);
  g_per_thread = atol(argv[3]);
  if (tracedb_start(argv[1]) != TRACEDB_OK) {
    fprintf(stderr, "tracedb_start failed\n");
    return 1;
  }
  g_span = tracedb_intern("span");
  g_tick = tracedb_intern("tick");
  g_value = tracedb_intern("value");
  pthread_t* t = calloc((size_t)threads, sizeof(pthread_t));
  if (t == NULL || g_per_thread < 5000) return 1;
  pthread_barrier_init(&g_first_flush, NULL, (unsigned)threads + 1);
  for (int i = 0; i < threads; ++i) pthread_create(&t[i], NULL, Work, NULL);
  pthread_barrier_wait(&g_first_flush);
  const int first = tracedb_flush();
  pthread_barrier_wait(&g_first_flush);
  if (first != TRACEDB_OK) fprintf(stderr, "first tracedb_flush: %d\n", first);
  for (int i = 0; i < threads; ++i) pthread_join(t[i], NULL);
  free(t);
  pthread_barrier_destroy(&g_first_flush);
  const int stop = tracedb_stop();
  tracedb_counters c;
  tracedb_get_counters(&c);
  printf("emitted %ld written %llu dropped %llu stop %d\n", (long)threads * g_per_thread,
         (unsigned long long)c.written, (unsigned long long)c.dropped, stop);
  return 0;
}
