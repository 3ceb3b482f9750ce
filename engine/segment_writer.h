// SegmentWriter: creates one segment file and appends framed blocks to it.
//
// Blocks are staged in memory by AppendBlock() and handed to the OS by Flush() with as few
// write(2) calls as possible, so a reader (or a crash) sees whole blocks except at a torn tail.
// Thread safety: none; the recorder's flusher thread owns its writer.
// Format: docs/segment-format.md, "File header" and "Block frame".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/segment_format.h"
#include "engine/status.h"

namespace tracedb::engine {

// "DIR/rank-<rank>" and "seg-<pid>-<seq, 6 digits>.tds".
std::string RankDirName(int32_t rank);
std::string SegmentFileName(uint32_t pid, uint32_t seq);

class SegmentWriter {
 public:
  SegmentWriter() = default;
  ~SegmentWriter();
  SegmentWriter(const SegmentWriter&) = delete;
  SegmentWriter& operator=(const SegmentWriter&) = delete;

  // Creates (O_EXCL) `path` and stages its file header. REQUIRES: not open.
  Status Open(const std::string& path, uint32_t pid, uint32_t seq);
  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

  // Stages one block. `raw` is the uncompressed payload; it is LZ4-compressed when that helps
  // and `compress` is set.
  void AppendBlock(BlockType type, std::string_view raw, bool compress);

  // Writes every staged byte. On error the staged bytes are discarded and the error returned.
  Status Flush();
  // Flushes, then closes. Safe to call when not open.
  Status Close();
  // Closes the descriptor without writing staged bytes (a forked child's copy of a writer).
  void Abandon();

  // Bytes in the file after the next Flush().
  uint64_t size() const { return written_ + pending_.size(); }
  uint64_t staged() const { return pending_.size(); }

 private:
  int fd_ = -1;
  std::string path_;
  uint64_t written_ = 0;
  std::string pending_;
  std::string scratch_;
};

// Frames one block (header + payload) and appends it to *dst; used by the writer and by tests
// that build hostile files.
void FrameBlock(BlockType type, Codec codec, std::string_view stored, uint32_t raw_size,
                std::string* dst);
// The 32-byte file header.
void EncodeFileHeader(uint32_t pid, uint32_t seq, std::string* dst);

}  // namespace tracedb::engine
