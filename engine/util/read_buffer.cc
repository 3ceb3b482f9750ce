#include "engine/util/read_buffer.h"

#include <sys/mman.h>

#include <algorithm>

namespace tracedb::engine {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

ReadBuffer::~ReadBuffer() {
  if (data_ != nullptr) ::munmap(data_, capacity_);
}

char* ReadBuffer::Reserve(size_t n) {
  n = std::max<size_t>(n, 1);
  if (n <= capacity_) return data_;
  if (data_ != nullptr) ::munmap(data_, capacity_);
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
  return data_;
}

}  // namespace tracedb::engine
