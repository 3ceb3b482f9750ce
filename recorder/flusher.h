// The flusher: one background thread per recording process that drains every thread buffer,
// encodes the records into EVENTS blocks (columns, then LZ4), and appends them with the catalog's
// new strings, lanes and thread names to this rank's segment file. It sleeps on a futex and is
// woken when producers have filled a batch of chunks (it then writes the full chunks and gives
// them back to the pool), when the flush interval (default 1 s) has passed since its last write (it
// then writes everything, partly filled chunks too), on tracedb_flush(), on Stop(), and when
// SIGTERM/SIGINT asks for a last write (RequestTerminateFlush). It rotates files by size and writes
// an END block at the end of the session. In flight-recorder mode (FlusherConfig::flight_ns) the
// EVENTS blocks go to a ring of the last window instead of the file, and a trigger
// (RequestTrigger, or a terminating signal) writes the ring and then everything for one more
// window (docs/flight.md). In every mode it summarises each step (recorder/step_stats.h) and
// writes the summaries as STEPSTATS blocks; in flight mode a slow step triggers.
//
// An I/O error (full disk, removed directory) disables writing for the session with one warning
// on stderr; the flusher keeps draining so producers never block, and counts what it discards as
// dropped.
// Thread safety: Start/Stop/Flush from one controlling thread at a time (the recorder's session
// mutex); NotifyChunkFull from any producer; RequestTerminateFlush from a signal handler; the
// flusher thread is internal.
// Format: docs/segment-format.md.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/segment/segment_blocks.h"
#include "engine/segment/segment_writer.h"
#include "engine/util/status.h"
#include "recorder/chunk_pool.h"
#include "recorder/flight_ring.h"
#include "recorder/rank_env.h"
#include "recorder/step_stats.h"
#include "recorder/thread_buffer.h"

namespace tracedb::recorder {

struct FlusherConfig {
  std::string dir;  // the job's trace directory (rank-<r>/ is created in it)
  RankInfo rank;
  int64_t flush_interval_ns = 1000000000;
  uint64_t segment_bytes = 64ull << 20;
  int64_t start_step = -1;
  int64_t end_step = -1;
  ChunkPool* pool = nullptr;      // the session's chunks; drained chunks go back to it
  uint32_t prefault_chunks = 64;  // free chunks the flusher keeps touched, ready for producers
  int64_t flight_ns = 0;        // > 0: flight-recorder mode (TRACEDB_FLIGHT): events are kept in a
                                // ring of this window and written only around a trigger
  int64_t hang_timeout_ns = 0;  // > 0: the hang watchdog (TRACEDB_HANG_TIMEOUT): a thread in
                                // one communication call this long triggers, once per call
  uint32_t hang_trigger_name = 0;       // "tracedb.trigger:hang", interned by the caller
  double slow_step_factor = 0;          // > 1 (flight mode only): a step longer than this times the
                                        // median of the recent ones triggers (TRACEDB_SLOW_STEP)
  uint32_t slow_step_trigger_name = 0;  // "tracedb.trigger:slow_step", interned by the caller
};

// Claims the right to trigger now: false within a second of the last trigger (recorder.cc; the
// rate limit that tracedb_trigger, SIGUSR1 and the slow-step trigger share). Async-signal-safe.
bool ClaimTrigger() noexcept;

class Flusher {
 public:
  Flusher() = default;
  ~Flusher();
  Flusher(const Flusher&) = delete;
  Flusher& operator=(const Flusher&) = delete;

  // Creates DIR/rank-<r>/, opens the first segment file, starts the thread.
  Status Start(const FlusherConfig& config);
  // Drains everything, writes STATS and END, closes the file and joins the thread.
  void Stop();
  // Returns once everything published before the call has been written (or an error).
  Status Flush();
  // True once writing was disabled by an I/O error in this session.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // Fork support: the parent holds the file mutex across fork(), so that the child never sees a
  // file half opened or half rotated. In the child the thread does not exist: AbandonInChild
  // closes the inherited segment descriptor (so that the parent's lock on it goes with the
  // parent) and unlocks; the caller must then leak this object (destroying it would join a
  // thread of the parent).
  void LockForFork();
  void UnlockAfterFork();
  void AbandonInChild();

  // Called by a producer that has just sealed a full chunk: wakes the flusher if it sleeps and
  // a batch of chunks (a 16th of the pool, 1 to 64) is full. Async-signal-safe.
  static void NotifyChunkFull() noexcept;
  // Wakes the flusher to write the full chunks now (a producer waiting for a free chunk).
  static void RequestDrain() noexcept;
  // From a SIGTERM/SIGINT handler: asks the running flusher for a last write (everything
  // buffered, then END) and waits for it up to `timeout_ms`. Returns true when it was written.
  // Async-signal-safe.
  static bool RequestTerminateFlush(int timeout_ms) noexcept;
  // Flight mode: asks the flusher to write its ring now and everything for the next window
  // (docs/flight.md). Outside flight mode, nothing to do. Async-signal-safe.
  static void RequestTrigger() noexcept;

  void AddSync(const engine::SyncPoint& p);
  void AddComm(engine::CommInfo c);

  // Process-lifetime counters (also across sessions).
  static std::atomic<uint64_t> written_events;
  static std::atomic<uint64_t> discarded_events;  // drained but not written (I/O error)
  static std::atomic<uint64_t> written_bytes;
  static std::atomic<uint64_t> write_errors;  // sessions whose writing an I/O error disabled
  static std::atomic<uint64_t> cpu_ns;        // the flusher thread's CPU time
  static std::atomic<uint64_t> flight_forgotten_events;  // aged out of the flight ring unwritten

 private:
  void Run();
  // One pass: drain, encode, write. `partial` drains partly filled chunks too (else only full
  // ones); `final` also writes STATS and END; `trigger` writes the flight ring and starts a
  // window of detail.
  void Cycle(bool final, bool partial, bool trigger = false);
  void DrainBuffer(ThreadBuffer* b, bool partial);
  void DecodeSlots(ThreadBuffer* b, const Record* slots, uint32_t from, uint32_t to);
  void FinishBlock(uint32_t thread_index);
  // Creates the next file of this process (seg-<pid>-<seq>) in `w`, without its header blocks.
  Status CreateNextFile(engine::SegmentWriter* w);
  // CreateNextFile into writer_, then its header blocks.
  Status OpenNextFile();
  // Ends the current file and continues in the next one, created before the current one gets
  // its END block: while the process lives it holds an unfinished file at every moment, so a
  // reader that finds every file of the directory ended knows the job is over, also between two
  // files (`compact --watch`). False when writing is disabled (an error was reported).
  bool RotateFile();
  void WriteFileHeaderBlocks();
  void AppendCatalogDeltas(bool all);
  void AppendStatsIfChanged(bool force);
  void CloseFile();
  // The hang watchdog: true when some thread has been in one communication call for
  // hang_timeout_ns (marks it fired). REQUIRES: the flusher thread.
  bool WatchdogFires(int64_t now_ns);
  void FailWriting(const Status& s);
  static void CutBackTo(const std::string& path, uint64_t size, uint64_t events);

  FlusherConfig config_;
  std::string rank_dir_;
  engine::SegmentMeta meta_;
  uint32_t seq_ = 0;
  engine::SegmentWriter writer_;
  engine::SegmentWriter next_writer_;  // open only during RotateFile (file_mu_ held)
  uint64_t file_events_ = 0;
  bool writing_disabled_ = false;
  std::atomic<bool> failed_{false};

  // What the current file already holds of the catalog.
  uint32_t strings_written_ = 0;  // highest string id written
  size_t lanes_written_ = 0;

  engine::EventsBlockEncoder encoder_;
  std::vector<std::string> staged_events_;  // raw EVENTS payloads of this cycle
  std::vector<uint64_t> staged_counts_;     // events in each of them
  size_t staged_count_ = 0;
  uint64_t staged_events_total_ = 0;
  std::vector<std::string_view> string_scratch_;
  std::vector<engine::LaneInfo> lane_scratch_;
  std::vector<engine::ThreadInfo> thread_scratch_;
  std::vector<ThreadBuffer*> buffers_scratch_;
  std::vector<ThreadBuffer*> retired_scratch_;
  std::string block_scratch_;
  std::map<uint32_t, uint64_t> drops_;  // thread index -> cumulative dropped
  bool drops_changed_ = false;
  int64_t last_write_ns_ = 0;
  int64_t last_anchor_ns_ = 0;

  uint64_t full_seen_ = 0;  // chunks sealed by producers, as of the last cycle
  FlightRing ring_;         // flight mode's last window of EVENTS blocks
  StepStats steps_;         // the per-step summaries (STEPSTATS blocks), every mode
  std::vector<engine::StepStat> step_rows_;  // finished steps of this cycle
  bool slow_trigger_ = false;                // a slow step was decoded this cycle (flight mode)
  uint32_t last_step_thread_ = 0;            // the thread index of the last step marker decoded
  int64_t detail_until_ns_ = 0;  // flight mode: write everything until then (a trigger's window)

  std::mutex file_mu_;  // held by the flusher thread while it writes; by fork() around the fork
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool stop_ = false;
  uint64_t flush_requested_ = 0;
  uint64_t flush_done_ = 0;
  Status flush_status_;
  std::vector<engine::SyncPoint> pending_sync_;
  std::vector<engine::CommInfo> pending_comms_;
  std::vector<engine::CommInfo> all_comms_;  // flusher-owned: repeated in every new file
  std::thread thread_;
};

}  // namespace tracedb::recorder
