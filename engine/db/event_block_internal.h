// What the event block encoder (event_block_encode.cc) and decoder (event_block.cc) share: the
// format's constants and the reference each row's ts is coded against. Format:
// docs/database-format.md "Event blocks". Internal to engine/; include only from those two files.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace tracedb::engine::block_internal {

// 1: every integer column in varints. 2: the dur column in bit-length coding. 3: the ts and dur
// columns in entropy-coded bit lengths, dur of a parent against its children's
// (docs/database-format.md "Event blocks"); the other columns as in 1. 4 (current): as 3, the
// name column led by a coding byte (kNameVarint or kNameHuffman). All four are read.
constexpr uint8_t kBlockFormat = 4;
constexpr uint8_t kBlockFormatHuffman = 3;
constexpr uint8_t kBlockFormatBitLength = 2;
constexpr uint8_t kBlockFormatVarint = 1;
constexpr size_t kMaxRows = 65536;
// Format 4's name column: its first byte says how the block-local name indexes follow.
constexpr uint8_t kNameVarint = 0;   // n varints, as in formats 1-3
constexpr uint8_t kNameHuffman = 1;  // entropy-coded bit lengths (PutHuffmanBitLengthColumn)

// DurationBucket (event_block.h), inline for the encoder's per-row statistics.
inline int DurationBucketInline(int64_t dur) {
  return dur <= 1 ? 0 : 63 - std::countl_zero(static_cast<uint64_t>(dur));
}

// The time a row's ts is coded against (docs/database-format.md "Event blocks"): the block's
// base for the first row of a track run, the previous row's start for a first child (deeper
// than the previous row), else the previous row's end (a sibling or what follows it). Rows in
// (track, k) order are in start order, so most deltas are the small gaps between phases.
inline int64_t TsReference(bool run_start, int64_t base, int64_t prev_ts, int64_t prev_end,
                           uint32_t depth, uint32_t prev_depth) {
  if (run_start) return base;
  return depth > prev_depth ? prev_ts : prev_end;
}

}  // namespace tracedb::engine::block_internal
