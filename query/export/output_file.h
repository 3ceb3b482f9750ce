// OutputFile: a large-buffered output file for the exporters, plain or gzip (zlib), written
// under a temporary name (PATH.partial) and renamed into place by Close(), so a failed or
// interrupted export never leaves a truncated file under the final name.
//
// Callers format straight into the buffer: Reserve(n) returns room for n bytes, Commit(end)
// keeps what was written. The buffer is written out only inside Reserve(), so the bytes
// committed since the last Reserve() can be taken back with Rewind().
// Write errors are sticky: status() turns non-OK and later writes are dropped.
// Thread safety: one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/status.h"

namespace tracedb::query {

class OutputFile {
 public:
  // Creates PATH.partial (truncating it). `gzip_level` 0: plain; 1..9: gzip at that zlib level.
  static StatusOr<std::unique_ptr<OutputFile>> Create(const std::string& path, int gzip_level);
  ~OutputFile();  // an unclosed file is removed (Abandon)
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Room for at least `n` bytes at the returned pointer (writing out the buffer first when it
  // is full). Never fails: after a write error the bytes go to a scratch buffer.
  char* Reserve(size_t n) {
    if (static_cast<size_t>(cap_ - cur_) >= n) return cur_;
    return ReserveSlow(n);
  }
  // Keeps the bytes written from the last Reserve() pointer up to `end`.
  void Commit(char* end) { cur_ = end; }
  void Append(const char* data, size_t n);
  void Append(const std::string& s) { Append(s.data(), s.size()); }

  // Uncompressed bytes appended so far (written out or buffered).
  uint64_t bytes() const { return flushed_ + static_cast<uint64_t>(cur_ - buf_.get()); }
  // Drops what was appended after the mark `bytes_before` (a value of bytes() taken since the
  // last Reserve()). REQUIRES: those bytes are still buffered.
  void Rewind(uint64_t bytes_before);

  // Writes out everything, finishes the gzip stream, closes and renames PATH.partial to PATH.
  Status Close();
  // Closes and removes PATH.partial.
  void Abandon();

  const Status& status() const { return status_; }
  const std::string& path() const { return path_; }
  // Bytes written to disk so far (compressed size for gzip; final after Close()).
  uint64_t disk_bytes() const { return disk_bytes_; }

 private:
  struct Deflater;
  OutputFile(std::string path, int fd, std::unique_ptr<Deflater> z);
  char* ReserveSlow(size_t n);
  void Flush();  // writes out the buffer
  void WriteAll(const char* data, size_t n);
  void Fail(Status s);

  std::string path_, partial_;
  int fd_ = -1;
  std::unique_ptr<Deflater> z_;
  std::unique_ptr<char[]> buf_;
  char* cur_ = nullptr;
  char* cap_ = nullptr;
  size_t size_ = 0;
  uint64_t flushed_ = 0;
  uint64_t disk_bytes_ = 0;
  Status status_;
  bool closed_ = false;
};

}  // namespace tracedb::query
