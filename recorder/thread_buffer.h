// Per-thread event buffers: the recorder's hot path.
//
// Each recording thread owns one ThreadBuffer, a single-producer single-consumer ring of 16-byte
// Records. The owning thread writes slots and publishes them with a release store of `head`; the
// flusher thread reads [tail, head) and frees the slots with a release store of `tail`. No lock,
// allocation or system call on the producer side; when the ring is full the event is dropped and
// counted. An event takes 1 to 4 consecutive slots: its Record, then a payload slot (duration,
// counter value or step) when kRecPayload is set, then three argument slots when kRecArgs is set.
// Thread safety: as described; producer-only and consumer-only fields are marked.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

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

struct alignas(64) ThreadBuffer {
  // --- written by the producer (owning thread) only ---
  std::atomic<uint64_t> head{0};     // slots published
  uint64_t cached_tail = 0;          // last tail the producer saw
  std::atomic<uint64_t> dropped{0};  // events dropped because the ring was full
  Record* slots = nullptr;
  uint64_t mask = 0;      // capacity - 1
  uint64_t capacity = 0;  // slots, a power of two; 0 for the shared no-buffer sentinel

  // --- written by the consumer (flusher) only ---
  alignas(64) std::atomic<uint64_t> tail{0};
  uint64_t reported_dropped = 0;  // drops already written in a STATS block

  // --- set once at attach ---
  uint32_t index = 0;  // per-process thread index, from 1
  uint32_t os_tid = 0;
  std::atomic<bool> retired{false};  // the thread has exited; free once drained
  // Guarded by the catalog mutex.
  std::string name;
  bool name_dirty = false;
};

// Events of threads that got no buffer (budget spent): counted here, reported as thread 0.
extern std::atomic<uint64_t> g_nobuf_dropped;
// Drops of buffers already freed (their threads exited), for the process totals.
extern std::atomic<uint64_t> g_freed_dropped;

// Reserves `n` consecutive slots. Returns the first slot index, or UINT64_MAX when full (the
// event is then counted as dropped). REQUIRES: called by the owning thread.
inline uint64_t Reserve(ThreadBuffer* b, uint32_t n) noexcept {
  const uint64_t h = b->head.load(std::memory_order_relaxed);
  if (h + n - b->cached_tail > b->capacity) {
    if (b->capacity == 0) return UINT64_MAX;  // the shared no-buffer sentinel
    b->cached_tail = b->tail.load(std::memory_order_acquire);
    if (h + n - b->cached_tail > b->capacity) return UINT64_MAX;
  }
  return h;
}

inline Record& SlotAt(ThreadBuffer* b, uint64_t i) noexcept { return b->slots[i & b->mask]; }
inline ExtSlot& ExtAt(ThreadBuffer* b, uint64_t i) noexcept {
  return *reinterpret_cast<ExtSlot*>(&b->slots[i & b->mask]);
}

// Counts one dropped event. REQUIRES: called by the owning thread.
inline void CountDrop(ThreadBuffer* b) noexcept {
  if (b->capacity == 0) {
    g_nobuf_dropped.fetch_add(1, std::memory_order_relaxed);
  } else {
    b->dropped.store(b->dropped.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
}

inline void Publish(ThreadBuffer* b, uint64_t new_head) noexcept {
  b->head.store(new_head, std::memory_order_release);
}

}  // namespace tracedb::recorder
