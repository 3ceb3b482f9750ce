/* tracedb recorder: the C ABI linked into (or injected into) a training process.
 *
 * Records spans, instants, counters and communication events from every thread into per-thread
 * buffers (no lock, no allocation, no system call on the recording path but once per 64 KiB
 * chunk); a background flusher thread encodes them into LZ4-compressed columnar segment files
 * under DIR/rank-<r>/.
 *
 * Contract for every function below:
 *   - it never throws, never blocks on I/O, and never aborts the process;
 *   - it is safe to call before tracedb_start(), after tracedb_stop(), from any thread, and in a
 *     forked child (where no session is running: recording is off, tracedb_stop() and
 *     tracedb_flush() return TRACEDB_ERR_STATE, until the child calls tracedb_start() itself);
 *   - when recording is off (not started, stopped, or outside the step window) a recording call
 *     costs one load and one branch.
 * Loss: thread buffers draw 64 KiB chunks from one pool of TRACEDB_BUFFER_MB per process; an
 * event is dropped (and counted, in the segment files) only when every chunk is in use, or when
 * writing is disabled by an I/O error (counted in tracedb_get_counters).
 * Stop: tracedb_stop() waits for every call that found recording on; each such event is in the
 * session's files or counted as dropped, never in a later session's.
 * Signal handlers: the recording calls (tracedb_begin ... tracedb_complete_ex, and tracedb_now
 * once a session has started) may be called from a signal handler with names interned
 * beforehand; a handler that interrupts its
 * thread inside a recording call drops its event and counts it. The other functions take locks:
 * not from a handler.
 * SIGTERM, SIGINT, SIGHUP: at the first tracedb_start(), where the application left the default
 * action, the library installs a handler that writes everything buffered (waiting at most 3 s) and
 * then lets the signal take its default action. A handler the application installs replaces it.
 * docs/recorder.md states every promise in full.
 *
 * Environment:
 *   TRACEDB_DIR          start automatically at load time, writing under this directory
 *   TRACEDB_RANK / TRACEDB_WORLD_SIZE, else OMPI_COMM_WORLD_RANK/SIZE, PMIX_RANK, SLURM_PROCID/
 *                        NTASKS, PMI_RANK/SIZE, RANK/WORLD_SIZE (torchrun), else rank 0 of 1
 *   TRACEDB_BUFFER_MB    memory budget for all thread buffers of the process (default 64)
 *   TRACEDB_ON_FULL      "drop" (default): a full budget drops the event; "wait": the thread waits
 *                        for the flusher to free a chunk, at most TRACEDB_ON_FULL_WAIT_MS
 *                        (default 100) per event, then drops it
 *   TRACEDB_FLUSH_MS     longest time an event waits in memory before it is written (default 1000)
 *   TRACEDB_SEGMENT_MB   segment file size at which a new file is started (default 64)
 *   TRACEDB_START_STEP / TRACEDB_END_STEP
 *                        record only while START_STEP <= step <= END_STEP (see tracedb_step)
 *   TRACEDB_CLOCK        "tsc" or "monotonic" (default: the CPU counter when it is invariant: TSC
 *                        on x86-64, cntvct_el0 on aarch64)
 *   TRACEDB_HOSTNAME     the host name written in segments (default: gethostname)
 *   TRACEDB_REALTIME_OFFSET_NS
 *                        shift the realtime readings of the clock anchors (simulates a host
 *                        whose clock is off; for testing clock alignment on one machine)
 *
 * The segment format is specified in docs/segment-format.md.
 */
#ifndef TRACEDB_RECORDER_H_
#define TRACEDB_RECORDER_H_

#include <stdint.h>

#if defined(_WIN32)
#define TRACEDB_API
#else
#define TRACEDB_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
#define TRACEDB_NOEXCEPT noexcept
extern "C" {
#else
#define TRACEDB_NOEXCEPT
#endif

/* Return codes of the int-returning functions. */
#define TRACEDB_OK 0
#define TRACEDB_ERR_STATE (-1)   /* wrong state: already started, or not started */
#define TRACEDB_ERR_IO (-2)      /* the directory or a segment file cannot be written */
#define TRACEDB_ERR_ARG (-3)     /* a NULL or invalid argument */
#define TRACEDB_ERR_TIMEOUT (-4) /* tracedb_flush: the flusher did not finish within 30 s */
#define TRACEDB_ERR_RATE (-5)    /* tracedb_trigger: within 1 s of the last trigger (ignored) */

/* Categories: one per event (docs/segment-format.md "Categories"). */
#define TRACEDB_CAT_USER 0
#define TRACEDB_CAT_COMPUTE 1
#define TRACEDB_CAT_COMM 2
#define TRACEDB_CAT_PHASE 3
#define TRACEDB_CAT_MPI 4
#define TRACEDB_CAT_NCCL 5
#define TRACEDB_CAT_CUDA 6
#define TRACEDB_CAT_STEP 7

/* Typed arguments of a communication event. Set the TRACEDB_ARG_* bits of `fields` for the
 * members that carry a value; the others are ignored. */
#define TRACEDB_ARG_BYTES 1u
#define TRACEDB_ARG_PEER 2u /* peer rank, or root of a rooted collective */
#define TRACEDB_ARG_TAG 4u
#define TRACEDB_ARG_COMM 8u  /* communicator id */
#define TRACEDB_ARG_SEQ 16u  /* per-communicator collective sequence number */
#define TRACEDB_ARG_FLOW 32u /* links events of one operation: a request and its completion */
typedef struct tracedb_args {
  uint32_t fields;
  int32_t peer;
  int32_t tag;
  uint32_t comm;
  uint64_t bytes;
  uint64_t seq;
  uint64_t flow;
} tracedb_args;

/* ---- Session ---- */

/* Starts recording into `dir` (created if missing), with empty buffers. TRACEDB_ERR_STATE when
 * already started (a forked child inherits no session and may start its own); TRACEDB_ERR_IO
 * when `dir` is unwritable or the buffer budget cannot be mapped. */
TRACEDB_API int tracedb_start(const char* dir) TRACEDB_NOEXCEPT;
/* Stops recording: waits for calls in flight (at most 5 s), writes everything buffered and
 * closes the segment file. TRACEDB_ERR_IO when writing was disabled by an I/O error during this
 * session (and only this one); TRACEDB_ERR_STATE when not started. Also runs at exit. */
TRACEDB_API int tracedb_stop(void) TRACEDB_NOEXCEPT;
/* Returns once every event recorded (by any thread) before the call has been written to this
 * rank's segment files, so a process killed right after loses none of them. */
TRACEDB_API int tracedb_flush(void) TRACEDB_NOEXCEPT;
/* 1 while events are being recorded (started, and inside the step window), else 0. */
TRACEDB_API int tracedb_enabled(void) TRACEDB_NOEXCEPT;
/* This process's rank and world size, as detected from the environment. */
TRACEDB_API int tracedb_rank(void) TRACEDB_NOEXCEPT;
TRACEDB_API int tracedb_world_size(void) TRACEDB_NOEXCEPT;

/* ---- Names, lanes, threads ---- */

/* Returns the id of `name` (interned once per process; the same string gives the same id).
 * Ids are never 0 except for NULL or when out of memory. Not for the hot path: intern once. */
TRACEDB_API uint32_t tracedb_intern(const char* name) TRACEDB_NOEXCEPT;
/* Returns the id of the named lane (a track of its own, e.g. one per tensor), creating it.
 * Lane 0 is the calling thread's own track. At most 65535 lanes per process; past that, 0. */
TRACEDB_API uint32_t tracedb_lane(const char* name) TRACEDB_NOEXCEPT;
/* Names the calling thread's track. */
TRACEDB_API void tracedb_thread_name(const char* name) TRACEDB_NOEXCEPT;

/* ---- Recording (the hot path) ---- */

TRACEDB_API void tracedb_begin(uint32_t name) TRACEDB_NOEXCEPT;
TRACEDB_API void tracedb_end(uint32_t name) TRACEDB_NOEXCEPT;
TRACEDB_API void tracedb_instant(uint32_t name) TRACEDB_NOEXCEPT;
TRACEDB_API void tracedb_counter(uint32_t name, double value) TRACEDB_NOEXCEPT;
/* A span with explicit times on the recorder's clock (see tracedb_now). */
TRACEDB_API void tracedb_complete(uint32_t name, int64_t ts_ns, int64_t dur_ns) TRACEDB_NOEXCEPT;
/* The recorder's clock, in ns (monotonic; the same clock as every recorded event). */
TRACEDB_API int64_t tracedb_now(void) TRACEDB_NOEXCEPT;

/* The same with a category, a lane (0: the thread's track) and optional typed arguments
 * (`args` may be NULL). */
TRACEDB_API void tracedb_begin_ex(uint32_t name, uint32_t cat, uint32_t lane,
                                  const tracedb_args* args) TRACEDB_NOEXCEPT;
TRACEDB_API void tracedb_end_ex(uint32_t name, uint32_t cat, uint32_t lane,
                                const tracedb_args* args) TRACEDB_NOEXCEPT;
TRACEDB_API void tracedb_instant_ex(uint32_t name, uint32_t cat, uint32_t lane,
                                    const tracedb_args* args) TRACEDB_NOEXCEPT;
TRACEDB_API void tracedb_counter_ex(uint32_t name, uint32_t cat, uint32_t lane,
                                    double value) TRACEDB_NOEXCEPT;
TRACEDB_API void tracedb_complete_ex(uint32_t name, uint32_t cat, uint32_t lane, int64_t ts_ns,
                                     int64_t dur_ns, const tracedb_args* args) TRACEDB_NOEXCEPT;

/* ---- Steps ---- */

/* Marks the start of training step `step`. With TRACEDB_START_STEP/TRACEDB_END_STEP set, events
 * are recorded only while START_STEP <= step <= END_STEP (before the first call: not recorded).
 * Each call inside the window is recorded as a step marker that compaction uses to give every
 * event its step. */
TRACEDB_API void tracedb_step(int64_t step) TRACEDB_NOEXCEPT;

/* ---- For interposers (MPI, NCCL) ---- */

/* Records one clock-sync measurement: at local time `local_ns` (tracedb_now clock) the clock of
 * `ref_rank` read local_ns + offset_ns, within +-uncertainty_ns. Written even when stopped
 * inside the step window; ignored when not started. */
TRACEDB_API void tracedb_clock_sync(int32_t ref_rank, int64_t local_ns, int64_t offset_ns,
                                    int64_t uncertainty_ns) TRACEDB_NOEXCEPT;

/* Declares a communicator: events that carry `comm` in their arguments belong to it. The id must
 * be the same on every member rank; `members` (world ranks in communicator order, `size`
 * entries) may be NULL. Ignored when not started. */
TRACEDB_API void tracedb_comm_define(uint32_t comm, int32_t size, int32_t rank_in_comm,
                                     const int32_t* members) TRACEDB_NOEXCEPT;

/* Flight-recorder mode (TRACEDB_FLIGHT=DURATION, docs/flight.md): events are kept in memory for
 * the last DURATION and written only around a trigger. tracedb_trigger records a trigger (an
 * instant named "tracedb.trigger:" + reason, the `triggers` table once compacted) and asks for
 * the last DURATION of events to be written now, and everything for the next DURATION. Outside
 * flight mode only the trigger is recorded. A trigger within 1 s of the previous one (a storm)
 * is ignored: TRACEDB_ERR_RATE. TRACEDB_ERR_STATE when not recording; TRACEDB_ERR_ARG for NULL.
 * Takes a lock (it interns the reason): not from a signal handler. SIGUSR1 triggers too (reason
 * "SIGUSR1") in flight mode, where the application left its default action. */
TRACEDB_API int tracedb_trigger(const char* reason) TRACEDB_NOEXCEPT;

/* Counters of this process since load. */
typedef struct tracedb_counters {
  uint64_t written;        /* events written to segment files */
  uint64_t dropped;        /* events dropped: budget full, reentrant handler, or writing disabled */
  uint64_t flushed_bytes;  /* bytes handed to the OS */
  uint64_t write_errors;   /* sessions whose writing an I/O error disabled */
  uint64_t flusher_cpu_ns; /* CPU time the flusher thread has used */
} tracedb_counters;
TRACEDB_API void tracedb_get_counters(tracedb_counters* out) TRACEDB_NOEXCEPT;

/* Nonzero while events are recorded. Written by the library only; the macros below read it
 * inline, so that a recording call costs one load and one branch when recording is off (as
 * LTTng-UST's tracepoint() checks its enabled flag). Read it with TRACEDB_ACTIVE(). */
TRACEDB_API extern int tracedb_active_;
#define TRACEDB_ACTIVE() (__atomic_load_n(&tracedb_active_, __ATOMIC_RELAXED) != 0)

#ifdef __cplusplus
} /* extern "C" */
#endif

/* The recording calls check TRACEDB_ACTIVE() before calling into the library. The functions
 * themselves stay callable (and addressable) under their names; define TRACEDB_NO_INLINE_CHECK
 * to call them directly. */
#if !defined(TRACEDB_BUILDING_LIBRARY) && !defined(TRACEDB_NO_INLINE_CHECK)
#define tracedb_begin(name) (TRACEDB_ACTIVE() ? tracedb_begin(name) : (void)0)
#define tracedb_end(name) (TRACEDB_ACTIVE() ? tracedb_end(name) : (void)0)
#define tracedb_instant(name) (TRACEDB_ACTIVE() ? tracedb_instant(name) : (void)0)
#define tracedb_counter(name, value) (TRACEDB_ACTIVE() ? tracedb_counter((name), (value)) : (void)0)
#define tracedb_complete(name, ts, dur) \
  (TRACEDB_ACTIVE() ? tracedb_complete((name), (ts), (dur)) : (void)0)
#define tracedb_begin_ex(name, cat, lane, args) \
  (TRACEDB_ACTIVE() ? tracedb_begin_ex((name), (cat), (lane), (args)) : (void)0)
#define tracedb_end_ex(name, cat, lane, args) \
  (TRACEDB_ACTIVE() ? tracedb_end_ex((name), (cat), (lane), (args)) : (void)0)
#define tracedb_instant_ex(name, cat, lane, args) \
  (TRACEDB_ACTIVE() ? tracedb_instant_ex((name), (cat), (lane), (args)) : (void)0)
#define tracedb_counter_ex(name, cat, lane, value) \
  (TRACEDB_ACTIVE() ? tracedb_counter_ex((name), (cat), (lane), (value)) : (void)0)
#define tracedb_complete_ex(name, cat, lane, ts, dur, args) \
  (TRACEDB_ACTIVE() ? tracedb_complete_ex((name), (cat), (lane), (ts), (dur), (args)) : (void)0)
#endif

#endif /* TRACEDB_RECORDER_H_ */
