// SegmentWriter: creates one segment file and appends framed blocks to it.
//
// Blocks are staged in memory by AppendBlock() and handed to the OS by Flush() with as few
// write(2) calls as possible, so a reader (or a crash) sees whole blocks except at a torn tail.
// The writer holds an exclusive flock(2) on its file from Open() until Close()/Abandon(), and
// the kernel drops it when the process dies: a reader that can take a shared lock on an
// unfinished file knows its writer is gone (docs/segment-format.md "Writer lock").
// Thread safety: none; the recorder's flusher thread owns its writer.
// Format: docs/segment-format.md, "File header" and "Block frame".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/segment/segment_format.h"
#include "engine/util/status.h"

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

  // Creates (O_EXCL) `path`, takes an exclusive flock on it before anything is written, and
  // stages its file header. A filesystem without flock leaves the file unlocked (readers then
  // fall back on the file's age). REQUIRES: not open.
  Status Open(const std::string& path, uint32_t pid, uint32_t seq);
  // Whether Open() obtained the writer lock.
  bool locked() const { return locked_; }
  // Exchanges the two writers' files and buffers (the recorder creates its next file before it
  // ends the current one, then swaps).
  void Swap(SegmentWriter& other) noexcept;
  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

  // Stages one block. `raw` is the uncompressed payload; it is LZ4-compressed when that helps
  // and `compress` is set; when compression fails the block is stored raw (never an empty
  // payload). A block larger than the format allows (raw > kMaxRawBlockBytes) is not staged:
  // the next Flush() returns the error.
  void AppendBlock(BlockType type, std::string_view raw, bool compress);

  // Writes every staged byte. On error the staged bytes are discarded and the error returned
  // (also the error of a block that AppendBlock() refused since the last Flush()).
  Status Flush();
  // Flushes, then closes (which releases the lock). Safe to call when not open.
  Status Close();
  // Closes the descriptor without writing staged bytes (a forked child's copy of a writer). It
  // never unlocks: the lock belongs to the open file that the parent still holds.
  void Abandon();

  // Bytes in the file after the next Flush().
  uint64_t size() const { return written_ + pending_.size(); }
  uint64_t staged() const { return pending_.size(); }

 private:
  int fd_ = -1;
  bool locked_ = false;
  std::string path_;
  uint64_t written_ = 0;
  std::string pending_;
  std::string scratch_;
  Status append_error_;  // the first block refused since the last Flush()
};

// Frames one block (header + payload) and appends it to *dst; used by the writer and by tests
// that build hostile files.
void FrameBlock(BlockType type, Codec codec, std::string_view stored, uint32_t raw_size,
                std::string* dst);
// The 32-byte file header.
void EncodeFileHeader(uint32_t pid, uint32_t seq, std::string* dst);

// Whether the process that writes an unfinished segment file still runs, as its writer lock
// tells (docs/segment-format.md "Writer lock").
enum class WriterState {
  kAlive,    // the exclusive lock is held: follow the file incrementally
  kGone,     // the lock could be taken: no process writes the file any more
  kUnknown,  // no answer (no flock on this filesystem, the file vanished, …)
};
WriterState ProbeSegmentWriter(const std::string& path);

}  // namespace tracedb::engine
