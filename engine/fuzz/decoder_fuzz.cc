// Fuzz entry points. See decoder_fuzz.h.
#include "engine/fuzz/decoder_fuzz.h"

#include <string>
#include <string_view>

#include "engine/coding.h"
#include "engine/crc32c.h"
#include "engine/event_block.h"
#include "engine/segment_reader.h"
#include "engine/segment_writer.h"

namespace tracedb::engine::fuzz {
namespace {

class Sink : public SegmentVisitor {};

}  // namespace

void SegmentFile(const uint8_t* data, size_t size) {
  Sink sink;
  (void)ScanSegmentBytes("fuzz", std::string_view(reinterpret_cast<const char*>(data), size),
                         &sink);
}

void SegmentBlockPayload(const uint8_t* data, size_t size) {
  if (size == 0) return;
  std::string file;
  EncodeFileHeader(1, 0, &file);
  const std::string_view payload(reinterpret_cast<const char*>(data) + 1, size - 1);
  FrameBlock(static_cast<BlockType>(data[0] % 12), Codec::kRaw, payload,
             static_cast<uint32_t>(payload.size()), &file);
  Sink sink;
  (void)ScanSegmentBytes("fuzz", file, &sink);
}

void EventBlockPayload(const uint8_t* data, size_t size) {
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  std::string blob;
  blob.push_back(0);  // raw codec
  PutVarint64(&blob, raw.size());
  PutFixed32(&blob, Crc32c(raw.data(), raw.size()));
  blob.append(raw);
  DecodedBlock b;
  if (DecodeBlock(blob, 1, &b, kColTrack).ok()) {
    for (uint32_t col = 1; col <= kColAll; col <<= 1) (void)b.Need(col);
  }
}

}  // namespace tracedb::engine::fuzz
