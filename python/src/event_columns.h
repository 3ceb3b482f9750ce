// The read path's scan: a trace database's events decoded from their blocks into typed column
// buffers, with the zone-map pruning of the SQL path. Candidate blocks are chosen from the
// `blocks` and `block_names` tables (rank, ts range, duration, names, categories, the time range
// of a step range) before any is decoded; rows are then filtered inside the decoded columns.
// Events never go row by row through SQLite: SQLite only hands over each block's BLOB.
//
// Decoding runs on up to TRACEDB_READ_THREADS threads (default: the machine's cores, at most 8),
// each with its own read-only connection, each block written into its own slot of the output; a
// final pass closes the gaps left by rows that a filter removed. Output order: blocks by (rank,
// min_ts), rows of a block by (track, k).
// Thread safety: ScanEvents is reentrant; a result belongs to its caller.
// Formats: docs/database-format.md ("Event blocks", the zone-map tables); the columns mean what
// the `events` table's do (docs/sql.md). Used by python/src/read_module.cc (docs/python.md).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "engine/util/read_buffer.h"

namespace tracedb::python {

// Output memory that is not zero-filled first (every item is written before it is read). From
// 2 MiB up, an anonymous mapping of whole huge pages advised MADV_HUGEPAGE: a column of 10M
// events (80 MB) from `new` was faulted in 4 KiB at a time as the scan first wrote it, 20,000
// faults, most of the read path's time on a VM whose page faults are paravirtualised
// (docs/bench-python.md, "Output columns on huge pages").
struct Buffer {
  size_t size = 0;
  Buffer() = default;
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      Free();
      bytes_ = o.bytes_;
      size = o.size;
      capacity_ = o.capacity_;
      mapped_ = o.mapped_;
      o.bytes_ = nullptr;
      o.size = o.capacity_ = 0;
      o.mapped_ = false;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Free(); }
  // Room for n bytes, the first min(n, size) kept. Throws std::bad_alloc.
  void resize(size_t n) {
    if (n > capacity_) {
      constexpr size_t kHuge = size_t{2} << 20;
      char* b = nullptr;
      size_t cap = n;
      bool mapped = false;
      if (n >= kHuge) {
        b = engine::MapHugePages(n, &cap);
        if (b == nullptr) throw std::bad_alloc();
        mapped = true;
      } else {
        b = new char[n];
      }
      if (size) std::memcpy(b, bytes_, size);
      Free();
      bytes_ = b;
      capacity_ = cap;
      mapped_ = mapped;
    }
    size = n;
  }
  char* data() { return bytes_; }
  char& operator[](size_t i) { return bytes_[i]; }

 private:
  void Free() {
    if (bytes_ == nullptr) return;
    if (mapped_) {
      ::munmap(bytes_, capacity_);
    } else {
      delete[] bytes_;
    }
    bytes_ = nullptr;
  }
  char* bytes_ = nullptr;
  size_t capacity_ = 0;
  bool mapped_ = false;
};

// A typed output column (capacity: the candidate blocks' event count).
struct Out {
  std::string name;
  char format[4] = {0};
  size_t itemsize = 0;
  Buffer data;
  bool nullable = false;
  Buffer null;  // 1: NULL
  template <typename T>
  T* As() {
    return reinterpret_cast<T*>(data.data());
  }
};

// The columns of `events` the scan can produce, and how each is stored.
enum Col : int {
  kRank,
  kTid,
  kTrack,
  kLane,
  kId,
  kName,
  kCat,
  kKind,
  kTs,
  kDur,
  kEndTs,
  kDepth,
  kBytes,
  kPeer,
  kTag,
  kComm,
  kSeq,
  kFlow,
  kValue,
  kStep,
  kNumCols
};
struct ColSpec {
  const char* name;
  const char* format;
  size_t itemsize;
  bool nullable;
  uint32_t needs;  // block column groups
};
extern const ColSpec kSpecs[kNumCols];

struct Range {
  int64_t lo = INT64_MIN, hi = INT64_MAX;  // [lo, hi]
  bool all() const { return lo == INT64_MIN && hi == INT64_MAX; }
  bool has(int64_t v) const { return v >= lo && v <= hi; }
};

struct Query {
  std::string path;
  bool want[kNumCols] = {false};
  std::vector<int64_t> ranks, names, cats, kinds;  // empty: any
  Range ts, dur, step;
};

struct ScanResult {
  std::vector<Out> cols;
  std::vector<std::string> lanes;
  uint64_t n = 0;
  uint64_t blocks_total = 0, blocks_read = 0;
  std::string error;
};

// Decodes the events `q` asks for. On failure r->error says why, naming the file.
void ScanEvents(const Query& q, ScanResult* r);

}  // namespace tracedb::python
