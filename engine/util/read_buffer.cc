#include "engine/util/read_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TRACEDB_READ_BUFFER_ASAN 1
#endif
#elif defined(__SANITIZE_ADDRESS__)
#define TRACEDB_READ_BUFFER_ASAN 1
#endif
#ifdef TRACEDB_READ_BUFFER_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace tracedb::engine {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

// Under AddressSanitizer, the room past what was asked for is poisoned: a reader that runs past
// a file's bytes is caught as it was in a buffer from new[] (a mapping has no redzone, and a
// heap block reused for a smaller file has its old size's).
void Fence(char* data, size_t used, size_t capacity) {
#ifdef TRACEDB_READ_BUFFER_ASAN
  ASAN_UNPOISON_MEMORY_REGION(data, capacity);
  ASAN_POISON_MEMORY_REGION(data + used, capacity - used);
#else
  (void)data, (void)used, (void)capacity;
#endif
}

}  // namespace

ReadBuffer::~ReadBuffer() { Release(); }

void ReadBuffer::Release() {
  if (data_ == nullptr) return;
  Fence(data_, capacity_, capacity_);
  if (mapped_) {
    ::munmap(data_, capacity_);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
  capacity_ = 0;
}

char* ReadBuffer::Reserve(size_t n) {
  n = std::max<size_t>(n, 1);
  if (n <= capacity_) {
    Fence(data_, n, capacity_);
    return data_;
  }
  // Growing by at least half: blocks of slowly growing sizes (a segment's decompressed EVENTS
  // blocks, about 1 MB each) made a new buffer for each new largest one, and glibc gives a block
  // that large a fresh mapping, every page of it faulted in again (a thousand page faults per
  // 10M events, 13 us each on a paravirtualised VM).
  if (capacity_ > 0) n = std::max(n, capacity_ + capacity_ / 2);
  Release();
  if (n < kHugePage) {
    // Below a huge page, from the heap: a mapping would cost two system calls and a fault per
    // page for every file (a directory of small files, a file's header), where the heap reuses.
    data_ = static_cast<char*>(std::malloc(n));
    if (data_ == nullptr) return nullptr;
    mapped_ = false;
    capacity_ = n;
    return data_;
  }
  size_t size = 0;
  char* const p = MapHugePages(n, &size);
  if (p == nullptr) return nullptr;
  data_ = p;
  mapped_ = true;
  capacity_ = size;
  Fence(data_, n, capacity_);
  return data_;
}

char* MapHugePages(size_t n, size_t* size) {
  if (n == 0 || n > SIZE_MAX - kHugePage) return nullptr;
  const size_t bytes = (n + kHugePage - 1) / kHugePage * kHugePage;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
#ifdef MADV_HUGEPAGE
  (void)::madvise(p, bytes, MADV_HUGEPAGE);  // advice: small pages where it is refused
#endif
  *size = bytes;
  return static_cast<char*>(p);
}

}  // namespace tracedb::engine
