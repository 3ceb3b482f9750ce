#include "engine/util/read_buffer.h"

#include <sys/mman.h>

#include <algorithm>

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
// a file's bytes is caught as it was in a buffer from new[] (whose redzone a mapping lacks).
void Fence(char* data, size_t used, size_t capacity) {
#ifdef TRACEDB_READ_BUFFER_ASAN
  ASAN_UNPOISON_MEMORY_REGION(data, capacity);
  ASAN_POISON_MEMORY_REGION(data + used, capacity - used);
#else
  (void)data, (void)used, (void)capacity;
#endif
}

}  // namespace

ReadBuffer::~ReadBuffer() {
  if (data_ != nullptr) {
    Fence(data_, capacity_, capacity_);
    ::munmap(data_, capacity_);
  }
}

char* ReadBuffer::Reserve(size_t n) {
  n = std::max<size_t>(n, 1);
  if (n <= capacity_) {
    Fence(data_, n, capacity_);
    return data_;
  }
  if (data_ != nullptr) {
    Fence(data_, capacity_, capacity_);
    ::munmap(data_, capacity_);
  }
  data_ = nullptr;
  capacity_ = 0;
  // Whole huge pages; a small buffer (a file's header) is not worth one.
  const size_t size = n < kHugePage ? n : (n + kHugePage - 1) / kHugePage * kHugePage;
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
#ifdef MADV_HUGEPAGE
  // Advice only: a kernel without transparent huge pages (or with them off) says no, and the
  // buffer is simply of small pages.
  if (size >= kHugePage) (void)::madvise(p, size, MADV_HUGEPAGE);
#endif
  data_ = static_cast<char*>(p);
  capacity_ = size;
  Fence(data_, n, capacity_);
  return data_;
}

}  // namespace tracedb::engine
