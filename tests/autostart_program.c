/* A program that never calls tracedb_start: recording starts by itself from TRACEDB_DIR, at load
 * time. Built twice: linked with libtracedb (AUTOSTART_LINKED: direct calls through the header),
 * and as an unrelated program that knows nothing of tracedb and finds the recorder, when
 * LD_PRELOAD injected it, with dlsym. Records EVENTS instants and EVENTS spans on the main
 * thread and as many on a second thread when recording is on; exits by returning from main, so
 * the library's exit handler writes everything.
 * Prints: enabled E rank R emitted N
 * With "wait" it then waits for a signal (SIGTERM/SIGINT tests) instead of exiting.
 * Usage: autostart_program EVENTS [wait] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef AUTOSTART_LINKED
#include "tracedb/recorder.h"
#else
#include <dlfcn.h>
#endif

typedef int (*IntFn)(void);
typedef uint32_t (*InternFn)(const char*);
typedef void (*NameFn)(uint32_t);

static IntFn g_enabled, g_rank;
static InternFn g_intern;
static NameFn g_begin, g_end, g_instant;
static long g_events;
static uint32_t g_span, g_tick;

static void* Work(void* arg) {
  (void)arg;
  for (long i = 0; i < g_events; ++i) {
    g_begin(g_span);
    g_instant(g_tick);
    g_end(g_span);
  }
  return NULL;
}

#ifdef AUTOSTART_LINKED
static int Enabled(void) { return tracedb_enabled(); }
static int Rank(void) { return tracedb_rank(); }
static uint32_t Intern(const char* s) { return tracedb_intern(s); }
static void Begin(uint32_t n) { tracedb_begin(n); }
static void End(uint32_t n) { tracedb_end(n); }
static void Instant(uint32_t n) { tracedb_instant(n); }
#endif

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 3 && strcmp(argv[2], "wait") == 0)) {
    fprintf(stderr, "usage: %s EVENTS [wait]\n", argv[0]);
    return 2;
  }
  g_events = atol(argv[1]);
#ifdef AUTOSTART_LINKED
  g_enabled = Enabled;
  g_rank = Rank;
  g_intern = Intern;
  g_begin = Begin;
  g_end = End;
  g_instant = Instant;
#else
  g_enabled = (IntFn)dlsym(RTLD_DEFAULT, "tracedb_enabled");
  g_rank = (IntFn)dlsym(RTLD_DEFAULT, "tracedb_rank");
  g_intern = (InternFn)dlsym(RTLD_DEFAULT, "tracedb_intern");
  g_begin = (NameFn)dlsym(RTLD_DEFAULT, "tracedb_begin");
  g_end = (NameFn)dlsym(RTLD_DEFAULT, "tracedb_end");
  g_instant = (NameFn)dlsym(RTLD_DEFAULT, "tracedb_instant");
#endif
  const int found = g_enabled && g_rank && g_intern && g_begin && g_end && g_instant;
  const int enabled = found ? g_enabled() : 0;
  const int rank = found ? g_rank() : -1;
  long emitted = 0;
  if (enabled) {
    g_span = g_intern("span");
    g_tick = g_intern("tick");
    pthread_t t;
    if (pthread_create(&t, NULL, Work, NULL) != 0) return 1;
    Work(NULL);
    pthread_join(t, NULL);
    emitted = 2 * 3 * g_events;
  }
  printf("enabled %d rank %d emitted %ld\n", enabled, rank, emitted);
  if (argc == 3) {
    fflush(stdout);
    for (;;) pause();
  }
  return 0;
}
