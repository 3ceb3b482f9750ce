// Fuzz entry points. See decoder_fuzz.h.
#include "engine/fuzz/decoder_fuzz.h"

#include <string>
#include <string_view>

#include "engine/db/event_block.h"
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
  uint64_t events = 0;
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
  Sink sink;
  const auto scan =
      ScanSegmentBytes("fuzz", std::string_view(reinterpret_cast<const char*>(data), size), &sink);
  return CheckScan(scan, sink, size);
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
  return Result{};
}

}  // namespace tracedb::engine::fuzz
