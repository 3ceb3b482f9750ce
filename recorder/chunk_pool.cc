// Chunk pool implementation. See chunk_pool.h.
#include "recorder/chunk_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include "recorder/thread_buffer.h"

namespace tracedb::recorder {

static_assert(sizeof(Record) == 16, "a chunk slot is one record");

ChunkPool* ChunkPool::Create(uint64_t budget_bytes) noexcept {
  uint64_t count = budget_bytes / kChunkBytes;
  if (count == 0) count = 1;
  if (count > 0x7fffffff) count = 0x7fffffff;
  auto* pool = new (std::nothrow) ChunkPool();
  if (pool == nullptr) return nullptr;
  pool->count_ = static_cast<uint32_t>(count);
  pool->headers_ = new (std::nothrow) Chunk[count];
  pool->arena_bytes_ = count * kChunkBytes;
  void* p = ::mmap(nullptr, pool->arena_bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (pool->headers_ == nullptr || p == MAP_FAILED) {
    delete pool;  // the destructor skips what is missing
    if (p != MAP_FAILED) ::munmap(p, count * kChunkBytes);
    return nullptr;
  }
  pool->arena_ = static_cast<char*>(p);
  for (uint32_t i = 0; i < pool->count_; ++i) {
    pool->headers_[i].index = i;
    pool->headers_[i].slots = reinterpret_cast<Record*>(pool->arena_ + uint64_t{i} * kChunkBytes);
  }
  return pool;
}

ChunkPool::~ChunkPool() {
  if (arena_ != nullptr) ::munmap(arena_, arena_bytes_);
  delete[] headers_;
}

void ChunkPool::Push(Chunk* c) noexcept {
  uint64_t top = free_top_.load(std::memory_order_relaxed);
  for (;;) {
    c->free_next.store(static_cast<uint32_t>(top), std::memory_order_relaxed);
    const uint64_t tag = (top >> 32) + 1;
    const uint64_t next = (tag << 32) | (uint64_t{c->index} + 1);
    if (free_top_.compare_exchange_weak(top, next, std::memory_order_release,
                                        std::memory_order_relaxed)) {
      break;
    }
  }
  free_count_.fetch_add(1, std::memory_order_relaxed);
}

Chunk* ChunkPool::Pop() noexcept {
  uint64_t top = free_top_.load(std::memory_order_acquire);
  for (;;) {
    const uint32_t idx = static_cast<uint32_t>(top);
    if (idx == 0) return nullptr;
    Chunk* c = &headers_[idx - 1];
    // May read a link that a concurrent pop and push just changed: the tag makes the CAS fail.
    const uint64_t link = c->free_next.load(std::memory_order_relaxed);
    const uint64_t next = (((top >> 32) + 1) << 32) | link;
    if (free_top_.compare_exchange_weak(top, next, std::memory_order_acquire,
                                        std::memory_order_acquire)) {
      free_count_.fetch_sub(1, std::memory_order_relaxed);
      return c;
    }
  }
}

Chunk* ChunkPool::Fresh() noexcept {
  if (fresh_.load(std::memory_order_relaxed) >= count_) return nullptr;
  const uint32_t i = fresh_.fetch_add(1, std::memory_order_relaxed);
  if (i >= count_) return nullptr;  // fresh_ may pass count_ by the number of racing threads
  return &headers_[i];
}

Chunk* ChunkPool::Acquire() noexcept {
  Chunk* c = Pop();
  if (c == nullptr) c = Fresh();
  if (c != nullptr) {
    c->committed.store(0, std::memory_order_relaxed);
    c->next.store(nullptr, std::memory_order_relaxed);
  }
  return c;
}

void ChunkPool::Release(Chunk* c) noexcept { Push(c); }

void ChunkPool::Prefault(uint32_t reserve) noexcept {
  const long page = ::sysconf(_SC_PAGESIZE) > 0 ? ::sysconf(_SC_PAGESIZE) : 4096;
  while (free_count_.load(std::memory_order_relaxed) < reserve) {
    Chunk* c = Fresh();
    if (c == nullptr) return;
    // Nobody else can see this chunk yet: write one byte per page so that the kernel backs it.
    char* p = reinterpret_cast<char*>(c->slots);
    for (uint64_t off = 0; off < kChunkBytes; off += static_cast<uint64_t>(page)) p[off] = 0;
    Push(c);
  }
}

uint32_t ChunkPool::available() const noexcept {
  const uint32_t fresh = fresh_.load(std::memory_order_relaxed);
  return free_count_.load(std::memory_order_relaxed) + (fresh < count_ ? count_ - fresh : 0);
}

}  // namespace tracedb::recorder
