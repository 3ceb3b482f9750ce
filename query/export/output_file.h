// OutputFile: a large-buffered output file for the exporters, plain or gzip (zlib), written
// under a temporary name unique to this file (PATH.partial-XXXXXX, mkostemp), fsynced, then
// renamed into place by Close() (and the directory fsynced), so a failed, interrupted or
// crashed export never leaves a truncated file under the final name (and an export ended by
// SIGINT, SIGTERM or SIGHUP removes its temporary file: engine/util/interrupt_cleanup.h), and two
// exports to one path never write into each other's temporary file (the last rename wins).
//
// Callers format straight into the buffer: Reserve(n) returns room for n bytes, Commit(end)
// keeps what was written. A full buffer is handed to a background thread that compresses and
// writes it while the caller fills the other one (double buffering), so formatting overlaps
// the kernel's copy and zlib. Buffers change hands only inside Reserve(), so the bytes
// committed since the last Reserve() can be taken back with Rewind().
// Write errors are sticky: status() turns non-OK (at the next hand-over at the latest) and
// later writes are dropped.
// Thread safety: the public methods belong to one thread at a time; the background thread
// touches only the buffer it was handed, the file and the zlib stream, under mu_'s hand-over.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/util/interrupt_cleanup.h"
#include "engine/util/status.h"

namespace tracedb::query {

class OutputFile {
 public:
  // Creates a fresh PATH.partial-XXXXXX. `gzip_level` 0: plain; 1..9: gzip at that zlib level.
  static StatusOr<std::unique_ptr<OutputFile>> Create(const std::string& path, int gzip_level);
  ~OutputFile();  // an unclosed file is removed (Abandon)
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Room for at least `n` bytes at the returned pointer (handing the full buffer to the writer
  // thread first). Never fails: after a write error the bytes are dropped.
  char* Reserve(size_t n) {
    if (static_cast<size_t>(cap_ - cur_) >= n) return cur_;
    return ReserveSlow(n);
  }
  // Keeps the bytes written from the last Reserve() pointer up to `end`.
  void Commit(char* end) { cur_ = end; }
  void Append(const char* data, size_t n);
  void Append(const std::string& s) { Append(s.data(), s.size()); }

  // Uncompressed bytes appended so far (handed over or buffered).
  uint64_t bytes() const { return flushed_ + static_cast<uint64_t>(cur_ - fill_->data.get()); }
  // Drops what was appended after the mark `bytes_before` (a value of bytes() taken since the
  // last Reserve()). REQUIRES: those bytes are still buffered.
  void Rewind(uint64_t bytes_before);

  // Writes out everything, finishes the gzip stream, fsyncs, closes and renames the temporary
  // file to PATH, then fsyncs PATH's directory. On error the temporary file is removed.
  Status Close();
  // Closes and removes the temporary file.
  void Abandon();

  const Status& status() const { return status_; }
  const std::string& path() const { return path_; }
  // The temporary file written until Close() renames it.
  const std::string& temporary_path() const { return partial_; }
  // Bytes written to disk (compressed size for gzip); final after Close().
  uint64_t disk_bytes() const { return disk_bytes_; }

 private:
  struct Deflater;
  struct Buffer {
    std::unique_ptr<char[]> data;
    size_t size = 0;
  };
  OutputFile(std::string path, std::string partial, int fd, std::unique_ptr<Deflater> z);
  char* ReserveSlow(size_t n);
  void HandOver();    // gives the filled buffer to the writer thread, takes the other one
  void WaitIdle();    // until the writer thread has written what it was given
  void WriterLoop();  // the background thread
  void Write(const char* data, size_t n);  // compress (gzip) and write; writer thread
  void WriteAll(const char* data, size_t n);
  void Fail(Status s);  // under mu_

  std::string path_, partial_;
  int fd_ = -1;
  std::unique_ptr<Deflater> z_;
  Buffer bufs_[2];
  Buffer* fill_ = nullptr;  // the buffer being filled by the caller
  char* cur_ = nullptr;
  char* cap_ = nullptr;
  uint64_t flushed_ = 0;  // bytes handed over

  // Hand-over to the writer thread.
  std::thread writer_;
  std::mutex mu_;
  std::condition_variable cv_;
  const char* pending_ = nullptr;  // handed over, not yet written
  size_t pending_n_ = 0;
  bool stop_ = false;
  Status writer_status_;  // under mu_
  uint64_t disk_bytes_ = 0;

  Status status_;  // the caller's copy
  bool closed_ = false;
  // Removes the temporary file on Ctrl-C/SIGTERM until it is renamed or removed.
  engine::InterruptCleanup on_interrupt_;
};

}  // namespace tracedb::query
