// Entry points shared by the decoder fuzz targets (libFuzzer, built with clang) and by the
// mutation tests that run the same code in CI with any compiler: each takes arbitrary bytes and
// must never crash, hang or read out of bounds, and must end in "OK or a clean error":
// Outcome::kOk (decoded, and what was decoded is self-consistent), Outcome::kError (rejected
// with a Corruption or InvalidArgument error that names what it rejected). kUnclean (any other
// status, an empty message, an inconsistent result) is a bug: libFuzzer traps on it and the
// tests fail.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tracedb::engine::fuzz {

enum class Outcome { kOk, kError, kUnclean };

struct Result {
  Outcome outcome = Outcome::kOk;
  std::string detail;  // what made an outcome unclean, or the error's message
};

// A whole segment file.
Result SegmentFile(const uint8_t* data, size_t size);
// A segment file whose single block of type data[0] carries data[1..] as payload with a valid
// frame and CRC, so that the payload decoders are reached.
Result SegmentBlockPayload(const uint8_t* data, size_t size);
// A database event block whose uncompressed payload is the input (valid header and CRC), then
// every column decoded.
Result EventBlockPayload(const uint8_t* data, size_t size);

}  // namespace tracedb::engine::fuzz
