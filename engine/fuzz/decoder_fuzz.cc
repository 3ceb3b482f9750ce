// Fuzz entry points. See decoder_fuzz.h.
#include "engine/fuzz/decoder_fuzz.h"

#include <string>
#include <string_view>
#include <tuple>

#include "engine/db/event_block.h"
#include "engine/segment/segment_blocks.h"
#include "engine/segment/segment_reader.h"
#include "engine/segment/segment_writer.h"
#include "engine/util/coding.h"
#include "engine/util/crc32c.h"

namespace tracedb::engine::fuzz {
namespace {

// Counts what the scan hands over, to check it against what the scan reports.
class Sink : public SegmentVisitor {
 public:
  void OnEvents(uint32_t, const std::vector<SegmentEvent>& e) override { events += e.size(); }
  // The columns path (compaction's): every array holds what the kinds say it holds, which is
  // what its readers index by.
  void OnEventColumns(uint32_t, const EventColumns& c) override {
    events += c.n;
    size_t ints = 0, values = 0, args = 0;
    for (size_t i = 0; i < c.n; ++i) {
      const uint8_t kind = c.kind[i] & kKindMask;
      if (kind >= kNumEventKinds) columns_ok = false;
      ints += kind == static_cast<uint8_t>(EventKind::kComplete) ||
              kind == static_cast<uint8_t>(EventKind::kStep);
      values += kind == static_cast<uint8_t>(EventKind::kCounter);
      args += (c.kind[i] & kKindHasArgs) != 0;
      if (kind == static_cast<uint8_t>(EventKind::kComplete) && c.ints[ints - 1] < 0) {
        columns_ok = false;
      }
    }
    if (ints != c.n_ints || values != c.n_values || args != c.n_args || c.ts.size() < c.n ||
        c.name.size() < c.n || c.lane.size() < c.n || c.ints.size() < ints ||
        c.values.size() < values || c.args.size() < args) {
      columns_ok = false;
    }
  }
  uint64_t events = 0;
  bool columns_ok = true;
};

Result Unclean(std::string why) { return Result{Outcome::kUnclean, std::move(why)}; }

// An error is clean when it is a data error with a message that names what it rejected.
Result FromError(const Status& s, std::string_view name) {
  if (s.code() != Status::Code::kCorruption && s.code() != Status::Code::kInvalidArgument) {
    return Unclean("unexpected status kind: " + s.ToString());
  }
  if (s.message().empty()) return Unclean("error without a message");
  if (!name.empty() && s.message().find(name) == std::string::npos) {
    return Unclean("error does not name '" + std::string(name) + "': " + s.message());
  }
  return Result{Outcome::kError, s.message()};
}

Result CheckScan(const StatusOr<SegmentScan>& scan, const Sink& sink, size_t size) {
  if (!scan.ok()) return FromError(scan.status(), "fuzz");
  const SegmentScan& s = *scan;
  if (s.file_size != size || s.end_offset > size || s.corrupt_bytes > size ||
      s.torn_tail_bytes > size || s.end_offset + s.torn_tail_bytes > size) {
    return Unclean("scan offsets outside the file");
  }
  if (s.events != sink.events) return Unclean("scan counted events it did not hand over");
  if (s.problems.size() > SegmentScan::kMaxProblems) return Unclean("problem list not capped");
  if (s.corrupt_blocks > 0 && s.problems.empty()) return Unclean("corruption not described");
  // Linear time: the RangeCrc bound (a small multiple of the file).
  if (s.crc_work_bytes > 64 * static_cast<uint64_t>(size) + 4096) {
    return Unclean("checksum work " + std::to_string(s.crc_work_bytes) + " for " +
                   std::to_string(size) + " bytes");
  }
  return Result{};
}

}  // namespace

Result SegmentFile(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  Sink sink;
  const auto scan = ScanSegmentBytes("fuzz", bytes, &sink);
  Result r = CheckScan(scan, sink, size);
  if (r.outcome != Outcome::kOk) return r;
  // Again as compaction reads: in columns, a few events at a time.
  ScanOptions columns;
  columns.event_columns = true;
  columns.event_chunk = 5;
  Sink column_sink;
  const auto column_scan = ScanSegmentBytes("fuzz", bytes, &column_sink, columns);
  Result c = CheckScan(column_scan, column_sink, size);
  if (c.outcome != Outcome::kOk) return c;
  if (!column_sink.columns_ok) return Unclean("event columns disagree with their kinds");
  // Again as a file larger than its window is read (a window at a time, the whole file from a
  // bad block on): the same scan, whatever the window.
  ScanOptions windows;
  windows.window_bytes = 64 + size % 193;
  Sink window_sink;
  const auto window_scan = ScanSegmentBytesInWindows("fuzz", bytes, &window_sink, windows);
  Result w = CheckScan(window_scan, window_sink, size);
  if (w.outcome != Outcome::kOk) return w;
  if (scan.ok() != window_scan.ok()) return Unclean("a windowed scan failed differently");
  if (scan.ok()) {
    const SegmentScan& a = *scan;
    const SegmentScan& b = *window_scan;
    if (std::tie(a.version, a.pid, a.seq, a.file_size, a.end_offset, a.blocks, a.events,
                 a.corrupt_blocks, a.corrupt_bytes, a.torn_tail_bytes, a.closed, a.anchor_end,
                 a.problems) != std::tie(b.version, b.pid, b.seq, b.file_size, b.end_offset,
                                         b.blocks, b.events, b.corrupt_blocks, b.corrupt_bytes,
                                         b.torn_tail_bytes, b.closed, b.anchor_end, b.problems) ||
        sink.events != window_sink.events) {
      return Unclean("a windowed scan differs from the whole file's");
    }
  } else if (scan.status().ToString() != window_scan.status().ToString()) {
    return Unclean("a windowed scan failed with another error");
  }
  // Again as compaction's catalog pass reads (EVENTS blocks passed over unread): on a file in
  // which a checked scan finds nothing amiss, the same blocks, end and catalog; on any other,
  // never a crash, and a stop only where a checked scan also meets a block not whole and valid.
  ScanOptions checked;
  checked.events = false;
  Sink checked_sink;
  const auto checked_scan = ScanSegmentBytes("fuzz", bytes, &checked_sink, checked);
  ScanOptions skip = checked;
  skip.skip_unread_events = true;
  skip.window_bytes = 64 + size % 193;
  Sink skip_sink;
  const auto skip_scan = ScanSegmentBytesInWindows("fuzz", bytes, &skip_sink, skip);
  if (checked_scan.ok() != skip_scan.ok()) return Unclean("a skipping scan failed differently");
  if (checked_scan.ok()) {
    const SegmentScan& a = *checked_scan;
    const SegmentScan& b = *skip_scan;
    if (b.end_offset > size || b.unread_blocks > b.blocks) {
      return Unclean("a skipping scan's counts are outside the file");
    }
    if (a.corrupt_blocks == 0 && a.torn_tail_bytes == 0 &&
        (b.skip_stopped || std::tie(a.end_offset, a.blocks, a.closed, a.anchor_end) !=
                               std::tie(b.end_offset, b.blocks, b.closed, b.anchor_end))) {
      return Unclean("a skipping scan differs from a checked one on a sound file");
    }
  }
  return r;
}

Result SegmentBlockPayload(const uint8_t* data, size_t size) {
  if (size == 0) return Result{};
  std::string file;
  EncodeFileHeader(1, 0, &file);
  const std::string_view payload(reinterpret_cast<const char*>(data) + 1, size - 1);
  FrameBlock(static_cast<BlockType>(data[0] % 12), Codec::kRaw, payload,
             static_cast<uint32_t>(payload.size()), &file);
  Sink sink;
  const auto scan = ScanSegmentBytes("fuzz", file, &sink);
  Result r = CheckScan(scan, sink, file.size());
  if (r.outcome != Outcome::kOk) return r;
  // The one block is either decoded or counted as corrupt, never lost silently; a block too
  // large for the format is the only other case (counted corrupt as well).
  if (scan->blocks + scan->corrupt_blocks != 1) {
    return Unclean("the block was neither decoded nor counted corrupt");
  }
  // Again as compaction reads: in columns, a few events at a time.
  ScanOptions columns;
  columns.event_columns = true;
  columns.event_chunk = 5;
  Sink column_sink;
  const auto column_scan = ScanSegmentBytes("fuzz", file, &column_sink, columns);
  Result c = CheckScan(column_scan, column_sink, file.size());
  if (c.outcome != Outcome::kOk) return c;
  if (!column_sink.columns_ok) return Unclean("event columns disagree with their kinds");
  if (column_scan->blocks != scan->blocks) {
    return Unclean("the block decodes whole but not in columns, or the other way round");
  }
  return scan->corrupt_blocks ? Result{Outcome::kError, scan->problems.front()} : Result{};
}

Result EventBlockPayload(const uint8_t* data, size_t size) {
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  std::string blob;
  blob.push_back(0);  // raw codec
  PutVarint64(&blob, raw.size());
  PutFixed32(&blob, Crc32c(raw.data(), raw.size()));
  blob.append(raw);
  DecodedBlock b;
  const Status s = DecodeBlock(blob, 1, &b, kColTrack);
  if (!s.ok()) return FromError(s, "event block 1");
  if (b.track.size() != b.n) return Unclean("track column of the wrong length");
  for (uint32_t col = 1; col <= kColAll; col <<= 1) {
    const Status c = b.Need(col);
    if (!c.ok()) return FromError(c, "event block 1");
    if (!b.has(col)) return Unclean("column " + std::to_string(col) + " not marked decoded");
  }
  for (size_t i = 0; i < b.n; ++i) {
    if (b.kind[i] >= kNumRowKinds) return Unclean("row kind out of range");
  }
  // The same payload in the container's codec 2 (its middle third as the stored section) decodes
  // to the same rows; and the input read as a whole container never crashes the unpacking.
  const size_t at = raw.size() / 3, len = raw.size() / 3;
  std::string lz(raw.substr(0, at));
  lz.append(raw.substr(at + len));
  std::string packed;
  PackBlock(lz, at, raw.substr(at, len), &packed);
  DecodedBlock p;
  if (!DecodeBlock(packed, 1, &p, kColAll).ok()) return Unclean("codec 2 does not decode");
  if (p.n != b.n || p.track != b.track || p.ts != b.ts || p.dur != b.dur || p.name != b.name) {
    return Unclean("codec 2 decodes to other rows");
  }
  std::string unpacked;
  (void)UnpackBlock(raw, &unpacked);
  return Result{};
}

}  // namespace tracedb::engine::fuzz
