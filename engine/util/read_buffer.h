// A buffer for reading whole files into memory, kept between reads: compaction reads every
// segment file twice (its catalog, then its events), and a file of the recorder's default size
// (64 MB) is past glibc's largest mmap threshold (32 MB), so a buffer from `new` was a fresh
// mapping each time, every 4 KiB page of it faulted in and zeroed by the kernel: about 0.2 s of
// system CPU per 64 MB file read on the shared VM of docs/bench-compaction.md ("Page faults"),
// more than the user CPU of decoding it. From 2 MiB up this one is an anonymous mapping advised
// for huge pages (MADV_HUGEPAGE: 2 MiB pages where the kernel has them, 512 times fewer faults),
// below that a heap block; it grows only when a larger file comes, and is freed when the object
// goes. (Where transparent huge pages are set to `madvise` with direct defragmentation, the
// first touch of a huge page may wait for the kernel to compact memory: on a fragmented host,
// the price of the fewer faults.) The same kind of room, kept for the same reason, holds a
// segment block's decompressed payload (ScanBuffers::raw) and Lz4Compress's output.
// Thread safety: one object per thread.
#pragma once

#include <cstddef>

namespace tracedb::engine {

class ReadBuffer {
 public:
  ReadBuffer() = default;
  ~ReadBuffer();
  ReadBuffer(const ReadBuffer&) = delete;
  ReadBuffer& operator=(const ReadBuffer&) = delete;

  // Room for `n` bytes (at least 1), or null when the memory cannot be had. What the buffer
  // held is not kept when it grows; the bytes are those of the last read, or zeros. Only the
  // `n` bytes may be used until the next call (AddressSanitizer holds a reader to it).
  char* Reserve(size_t n);
  size_t capacity() const { return capacity_; }

 private:
  void Release();

  char* data_ = nullptr;
  size_t capacity_ = 0;
  bool mapped_ = false;  // an mmap (else malloc)
};

// An anonymous mapping of at least `n` bytes (n >= 1), in whole 2 MiB pages advised
// MADV_HUGEPAGE (advice: small pages where the kernel refuses it); its size in *size, to give
// back with munmap. Null when it cannot be had. ReadBuffer's room from 2 MiB up, SQLite's page
// cache (engine/db/sqlite.cc) and the Python read path's output columns: memory that a 4 KiB
// page at a time would fault in page by page, at about 13 us a fault on a paravirtualised VM.
char* MapHugePages(size_t n, size_t* size);

}  // namespace tracedb::engine
