// ScanSegment: reads one segment file, validates every block (frame, CRC, payload) and hands the
// decoded contents to a visitor. Corrupt blocks are skipped and counted (the scan resynchronises
// on the next block magic); an incomplete block at the end of the file is reported as a torn tail
// and is not an error, so a file still being written, or one whose writer was killed, yields every
// complete block.
// Thread safety: none; one scan per thread.
// Format: docs/segment-format.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/segment/segment_blocks.h"
#include "engine/segment/segment_format.h"
#include "engine/util/read_buffer.h"
#include "engine/util/status.h"

namespace tracedb::engine {

class SegmentVisitor {
 public:
  virtual ~SegmentVisitor() = default;
  virtual void OnMeta(const SegmentMeta&) {}
  virtual void OnStrings(uint32_t /*first_id*/, const std::vector<std::string>&) {}
  virtual void OnThreads(const std::vector<ThreadInfo>&) {}
  virtual void OnLanes(const std::vector<LaneInfo>&) {}
  virtual void OnEvents(uint32_t /*thread_index*/, const std::vector<SegmentEvent>&) {}
  // Instead of OnEvents when ScanOptions::event_columns is set: the same events, as columns.
  virtual void OnEventColumns(uint32_t /*thread_index*/, const EventColumns&) {}
  virtual void OnSync(const std::vector<SyncPoint>&) {}
  virtual void OnAnchors(const std::vector<AnchorPoint>&) {}
  virtual void OnStats(const std::vector<DropCount>&) {}
  virtual void OnComms(const std::vector<CommInfo>&) {}
  virtual void OnStepStats(const std::vector<StepStat>&) {}
  virtual void OnEnd(const SegmentEnd&) {}
};

struct SegmentScan {
  uint16_t version = 0;
  uint32_t pid = 0;
  uint32_t seq = 0;
  uint64_t file_size = 0;
  uint64_t end_offset = 0;      // just past the last whole block (where a later scan resumes)
  uint64_t blocks = 0;          // valid blocks handed to the visitor
  uint64_t events = 0;          // events in those blocks
  uint64_t corrupt_blocks = 0;  // damaged regions skipped
  uint64_t corrupt_bytes = 0;
  uint64_t torn_tail_bytes = 0;       // bytes of an incomplete last block
  bool closed = false;                // an END block was seen
  uint64_t anchor_end = 0;            // just past the last ANCHOR or END block (0: none)
  uint64_t crc_work_bytes = 0;        // bytes checksummed: at most ~3x the file, whatever it holds
  uint64_t unread_blocks = 0;         // EVENTS blocks passed over unread (skip_unread_events)
  bool skip_stopped = false;          // skip_unread_events: stopped at a block not whole and valid
  std::vector<std::string> problems;  // "offset N: reason", at most kMaxProblems
  static constexpr size_t kMaxProblems = 16;
};

// What a scan allocates for a file: its bytes (ScanSegment), a block's decompressed payload
// and the decoded events. Kept between scans, they are allocated once for the largest file
// and block, instead of once per file (compaction reads each file twice). One per thread.
struct ScanBuffers {
  ReadBuffer file;
  ReadBuffer raw;  // a compressed block's payload
  std::vector<SegmentEvent> events;
  EventColumns columns;
};

struct ScanOptions {
  uint64_t start_offset = 0;         // where to start (0, or a previous scan's end_offset)
  uint64_t end_offset = UINT64_MAX;  // stop before the block that starts at or after this
  bool events = true;                // decode EVENTS blocks (else only check their CRC)
  bool catalog = true;               // decode every other block type
  // 0: each EVENTS block reaches OnEvents whole, or not at all when it is malformed. N > 0: in
  // calls of at most N events, decoded just before each call (cache-friendly for large blocks);
  // a block whose CRC holds but whose payload is malformed may then have handed its leading,
  // well-formed events on before it is counted corrupt.
  size_t event_chunk = 0;
  // Hand EVENTS blocks to OnEventColumns (decoded column by column, no SegmentEvent per event)
  // instead of OnEvents; event_chunk applies the same way.
  bool event_columns = false;
  // Where a scan reads the file and decompresses its blocks: a caller that scans many files
  // (compaction) passes one ScanBuffers for all of them (engine/util/read_buffer.h says why);
  // null: the call's own.
  ScanBuffers* buffers = nullptr;
  // ScanSegment reads a file larger than this a window of this size at a time (at least 64
  // bytes; larger for a larger block), the whole file only from a damaged block or a torn tail on,
  // so that a large file does not need a buffer of its size; 0: the whole file at once. The scan's
  // result is the same.
  size_t window_bytes = size_t{8} << 20;
  // With `events` false: an EVENTS block is passed over by the length its header gives, neither
  // read nor CRC-checked, when the header holds together (magic, lengths in range, a known codec,
  // the payload inside the file); the file is read a small window at a time, so that a scan for
  // the other blocks reads a few KB of a 64 MB file of events instead of all of it. Such a block
  // counts in `blocks` and `unread_blocks`. At the first block that is not whole and valid (a
  // damaged block, a torn tail) the scan stops, `skip_stopped` set, its end_offset there: the
  // caller scans again without this to have it found and reported. A damaged payload goes
  // unseen, and a length crafted to land on another header hides the blocks between: a caller
  // that needs every defect found checks every block's CRC in a later pass (compaction: its
  // catalog pass skips, its events pass checks).
  bool skip_unread_events = false;
};

// Scans `path`. IOError when the file cannot be read; Corruption when its file header is bad or
// of another version. Every other defect is reported in the result.
StatusOr<SegmentScan> ScanSegment(const std::string& path, SegmentVisitor* visitor,
                                  const ScanOptions& options);
inline StatusOr<SegmentScan> ScanSegment(const std::string& path, SegmentVisitor* visitor) {
  return ScanSegment(path, visitor, ScanOptions());
}

// Same, over bytes already in memory (`name` is used in messages). Used by the fuzz target.
StatusOr<SegmentScan> ScanSegmentBytes(const std::string& name, std::string_view bytes,
                                       SegmentVisitor* visitor, const ScanOptions& options);
inline StatusOr<SegmentScan> ScanSegmentBytes(const std::string& name, std::string_view bytes,
                                              SegmentVisitor* visitor, uint64_t start_offset = 0) {
  ScanOptions o;
  o.start_offset = start_offset;
  return ScanSegmentBytes(name, bytes, visitor, o);
}

// The same bytes read as ScanSegment reads a file larger than options.window_bytes: a window at a
// time, each copied into the scan's buffer (ScanSegmentBytes when window_bytes is 0 or the bytes
// are no larger). The result is ScanSegmentBytes'; the fuzz target and the tests check that.
StatusOr<SegmentScan> ScanSegmentBytesInWindows(const std::string& name, std::string_view bytes,
                                                SegmentVisitor* visitor,
                                                const ScanOptions& options);

// A file's first META (none: nullopt) and its scan, its EVENTS blocks passed over unread (a file
// whose skipping scan stops is scanned again, checked): what segment GC and the by-node shard
// split need of each file.
struct SegmentMetaScan {
  SegmentScan scan;
  std::optional<SegmentMeta> meta;
};
// `buffers`: as ScanOptions::buffers (a caller reading many files passes one for all).
StatusOr<SegmentMetaScan> ScanSegmentMeta(const std::string& path, ScanBuffers* buffers = nullptr);

}  // namespace tracedb::engine
