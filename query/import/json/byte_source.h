// ByteSource: the bytes of an input file, read in chunks, decompressed on the fly when the file
// is gzip (detected by its magic bytes 1f 8b, not by its name). Memory is bounded by the chunk
// buffers whatever the file size; nothing reads the whole file.
//
// Errors name the file and the byte offset: a missing file, a read error, or damaged gzip data
// ("x.json.gz: gzip data damaged at compressed byte offset 1234: invalid block type"). A gzip
// stream that simply ends early (a file cut while being written) is not an error: the bytes
// decompressed so far are returned, then the end, and warning() says where it stopped.
// Thread safety: one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "engine/util/status.h"

namespace tracedb::query::json {

class ByteSource {
 public:
  virtual ~ByteSource() = default;

  // Opens `path` (plain or gzip).
  static StatusOr<std::unique_ptr<ByteSource>> Open(const std::string& path);
  // A source over bytes held in memory (tests, fuzzing). Gzip bytes are decompressed too.
  static std::unique_ptr<ByteSource> FromString(std::string data, std::string name);

  // Reads up to `n` decompressed bytes into `dst`; returns how many, 0 at the end.
  virtual StatusOr<size_t> Read(char* dst, size_t n) = 0;

  const std::string& name() const { return name_; }
  bool compressed() const { return compressed_; }
  uint64_t file_size() const { return file_size_; }  // bytes on disk (compressed size)
  // Whether file_size() is the input's size when opened: a regular file or bytes in memory, not
  // a pipe or a device (whose size is 0).
  bool size_known() const { return size_known_; }
  uint64_t raw_read() const { return raw_read_; }  // bytes taken from disk so far
  // Set when a gzip stream ended before its trailer; empty otherwise.
  const std::string& warning() const { return warning_; }

 protected:
  std::string name_;
  bool compressed_ = false;
  uint64_t file_size_ = 0;
  bool size_known_ = false;
  uint64_t raw_read_ = 0;
  std::string warning_;
};

// The first `max_bytes` decompressed bytes of `path` (fewer when the file is shorter), for
// format detection.
StatusOr<std::string> ReadHead(const std::string& path, size_t max_bytes);

}  // namespace tracedb::query::json
