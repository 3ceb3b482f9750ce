// Per-thread event buffers: the recorder's hot path.
//
// Each recording thread owns one ThreadBuffer: a queue of fixed-size chunks (chunk_pool.h) drawn
// from the session's process-wide pool. The owning thread writes 16-byte Records into its
// current chunk and publishes them with a release store of the chunk's `committed` count; when
// an event does not fit, it takes a new chunk from the pool, links it after the current one and
// seals the current one (which wakes the flusher if it sleeps). The flusher reads each chunk up
// to `committed`, and gives sealed chunks back to the pool once drained. No lock, allocation or
// system call on the producer side except once per chunk (the pool's lock-free stack, and a
// futex wake only when the flusher sleeps); when the pool is empty the event is dropped and
// counted. An event takes 1 to 5 consecutive slots of one chunk: its Record, then a payload slot
// (duration, counter value or step) when kRecPayload is set, then three argument slots when
// kRecArgs is set.
//
// `busy` is set by the owning thread for the duration of one recording call: tracedb_stop waits
// until no thread is busy (so that an event that passed the enabled check is written in this
// session or counted), and a signal handler that records while its thread is busy drops and
// counts its event instead of corrupting the chunk.
// Thread safety: as described; producer-only and consumer-only fields are marked.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "recorder/chunk_pool.h"

namespace tracedb::recorder {

struct Record {
  int64_t ts;     // ns, recorder clock
  uint32_t name;  // string id
  uint16_t lane;  // 0 = the thread's own track
  uint8_t kind;   // engine::EventKind in the low 4 bits, kRec* flags above
  uint8_t cat;    // TRACEDB_CAT_*
};
static_assert(sizeof(Record) == 16, "records are 16 bytes");

// A payload or argument slot, overlaid on a Record slot.
struct ExtSlot {
  uint64_t a;
  uint64_t b;
};
static_assert(sizeof(ExtSlot) == sizeof(Record));

inline constexpr uint8_t kRecArgs = 0x10;     // three ExtSlots of arguments follow
inline constexpr uint8_t kRecPayload = 0x20;  // one ExtSlot of payload follows (before args)
inline constexpr uint32_t kMaxEventSlots = 5;
static_assert(kChunkSlots >= kMaxEventSlots);
inline constexpr uint32_t kNoSlot = UINT32_MAX;

struct alignas(64) ThreadBuffer {
  // --- written by the producer (owning thread) only ---
  // 1 while the owning thread is inside a recording call. Read by tracedb_stop and by signal
  // handlers on the same thread.
  std::atomic<uint32_t> busy{0};
  uint32_t pos = 0;                  // next free slot of `chunk`
  uint32_t limit = 0;                // kChunkSlots, or 0 while the thread has no chunk
  Chunk* chunk = nullptr;            // current chunk
  Record* slots = nullptr;           // chunk->slots
  std::atomic<uint64_t> dropped{0};  // events dropped: no free chunk
  // Events dropped by a signal handler that interrupted a recording call of this thread
  // (fetch_add: handlers may nest).
  std::atomic<uint64_t> reentry_dropped{0};
  // The first chunk of the session, for the consumer (the rest are linked by Chunk::next).
  std::atomic<Chunk*> first{nullptr};

  // --- written by the consumer (flusher) only ---
  alignas(64) Chunk* read_chunk = nullptr;  // the chunk being drained
  uint32_t read_pos = 0;                    // slots of read_chunk already drained
  uint64_t reported_dropped = 0;            // drops already written in a STATS block
  // The hang watchdog (TRACEDB_HANG_TIMEOUT): communication spans (mpi, nccl, comm) begun and
  // not ended, as the flusher decoded them, since when the outermost is open, and whether the
  // watchdog fired for it.
  uint32_t comm_depth = 0;
  int64_t comm_open_since = 0;  // recorder clock
  bool comm_watchdog_fired = false;

  // --- set once at attach ---
  uint32_t index = 0;  // per-process thread index, from 1
  uint32_t os_tid = 0;
  std::atomic<bool> retired{false};  // the thread has exited; free once drained
  // Guarded by the catalog mutex.
  std::string name;
  bool name_dirty = false;

  uint64_t TotalDropped() const noexcept {
    return dropped.load(std::memory_order_relaxed) +
           reentry_dropped.load(std::memory_order_relaxed);
  }
};

// Events of threads that got no buffer (out of memory): counted here, reported as thread 0.
extern std::atomic<uint64_t> g_nobuf_dropped;
// Drops of buffers already freed (their threads exited), for the process totals.
extern std::atomic<uint64_t> g_freed_dropped;

// Takes a new chunk for `b` (sealing and linking the current one). Returns 0 (the first slot of
// the new chunk) or kNoSlot when the pool is empty. REQUIRES: called by the owning thread.
uint32_t NextChunk(ThreadBuffer* b) noexcept;

// Reserves `n` consecutive slots. Returns the first slot index, or kNoSlot when no chunk is free
// (the event is then counted as dropped). REQUIRES: called by the owning thread, busy set.
inline uint32_t Reserve(ThreadBuffer* b, uint32_t n) noexcept {
  const uint32_t p = b->pos;
  if (__builtin_expect(p + n <= b->limit, 1)) return p;
  return NextChunk(b);
}

inline Record& SlotAt(Record* slots, uint32_t i) noexcept { return slots[i]; }
inline ExtSlot& ExtAt(Record* slots, uint32_t i) noexcept {
  return *reinterpret_cast<ExtSlot*>(&slots[i]);
}

// Counts one dropped event. REQUIRES: called by the owning thread, busy set.
inline void CountDrop(ThreadBuffer* b) noexcept {
  b->dropped.store(b->dropped.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// Publishes the slots below `new_pos` of the current chunk.
inline void Publish(ThreadBuffer* b, uint32_t new_pos) noexcept {
  b->pos = new_pos;
  b->chunk->committed.store(new_pos, std::memory_order_release);
}

}  // namespace tracedb::recorder
