// Entry points shared by the decoder fuzz targets (libFuzzer, built with clang) and by the
// mutation tests that run the same code in CI with any compiler: each takes arbitrary bytes and
// must never crash, hang or read out of bounds.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tracedb::engine::fuzz {

// A whole segment file.
void SegmentFile(const uint8_t* data, size_t size);
// A segment file whose single block of type data[0] carries data[1..] as payload with a valid
// frame and CRC, so that the payload decoders are reached.
void SegmentBlockPayload(const uint8_t* data, size_t size);
// A database event block whose uncompressed payload is the input (valid header and CRC), then
// every column decoded.
void EventBlockPayload(const uint8_t* data, size_t size);

}  // namespace tracedb::engine::fuzz
