// The process-wide pool of buffer chunks: the memory budget (TRACEDB_BUFFER_MB) of all thread
// buffers of one recording session, cut into fixed-size chunks of 16-byte record slots.
//
// Each recording thread writes into one chunk at a time and takes a new one when it is full
// (thread_buffer.h); the flusher drains full chunks and gives them back. So a burst on a few
// threads can use the whole budget, and events are dropped only when every chunk is in use.
// The pool maps its whole budget of address space at creation and touches pages lazily: the
// flusher keeps a reserve of chunks already touched (Prefault), so that producers rarely
// page-fault; resident memory never exceeds the budget.
//
// Thread safety: Acquire and Release are lock-free (a tagged Treiber stack) and async-signal-safe;
// Prefault is called by one thread (the flusher) at a time.
#pragma once

#include <atomic>
#include <cstdint>

namespace tracedb::recorder {

struct Record;

inline constexpr uint32_t kChunkSlots = 4096;  // 64 KiB of 16-byte slots
inline constexpr uint64_t kChunkBytes = uint64_t{kChunkSlots} * 16;
inline constexpr uint32_t kSealed = 0x80000000u;  // in Chunk::committed: the producer moved on

struct Chunk {
  // Slots published by the producer (release); kSealed is set, with the final count, once the
  // producer has linked `next` and will never touch this chunk again.
  std::atomic<uint32_t> committed{0};
  std::atomic<Chunk*> next{nullptr};   // the thread's next chunk, stored before the seal
  Record* slots = nullptr;             // kChunkSlots slots in the pool's arena
  std::atomic<uint32_t> free_next{0};  // free-stack link: index + 1 of the next free chunk
  uint32_t index = 0;
};

class ChunkPool {
 public:
  // Reserves `budget_bytes` of address space (whole chunks, at least one). nullptr when the
  // system refuses the mapping or the headers.
  static ChunkPool* Create(uint64_t budget_bytes) noexcept;
  ~ChunkPool();
  ChunkPool(const ChunkPool&) = delete;
  ChunkPool& operator=(const ChunkPool&) = delete;

  // A free chunk (committed 0, next null), or nullptr when every chunk is in use.
  Chunk* Acquire() noexcept;
  // Gives back a chunk nobody references any more.
  void Release(Chunk* c) noexcept;
  // Touches the pages of never-used chunks and puts them on the free stack until `reserve`
  // chunks are free (or the arena is all in use). REQUIRES: one caller at a time.
  void Prefault(uint32_t reserve) noexcept;

  uint32_t chunks() const { return count_; }
  uint64_t bytes() const { return uint64_t{count_} * kChunkBytes; }
  // Chunks on the free stack or never used (a snapshot).
  uint32_t available() const noexcept;

 private:
  ChunkPool() = default;
  void Push(Chunk* c) noexcept;
  Chunk* Pop() noexcept;
  Chunk* Fresh() noexcept;

  char* arena_ = nullptr;
  uint64_t arena_bytes_ = 0;
  Chunk* headers_ = nullptr;
  uint32_t count_ = 0;
  std::atomic<uint64_t> free_top_{0};  // (tag << 32) | (index + 1); 0 in the low half: empty
  std::atomic<uint32_t> free_count_{0};
  std::atomic<uint32_t> fresh_{0};  // chunks [fresh_, count_) were never handed out
};

}  // namespace tracedb::recorder
