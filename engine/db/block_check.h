// Checks on the values a reader takes from a trace database's tables before it trusts them: a
// database is untrusted input (docs/security.md). One function per rule, shared by every reader
// that decodes blocks (the events table's scan, export's block selection, the view's level of
// detail, the Python reader) and by `tracedb verify`, so that a rule is written once.
//   - a block's declared row count (blocks.count) is 1..kMaxBlockRows, never a size to trust
//     beyond that, and a decoded block holds exactly the rows its zone map declares;
//   - a dictionary indexed by id (strings, tracks) is sized by its row count, not by its
//     largest id: ids beyond DenseIdLimit are ignored (their names read NULL) and reported by
//     `tracedb verify`.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/util/status.h"

namespace tracedb::engine {

// The most rows an event block holds (EncodeBlock's limit; DecodeBlock rejects more).
inline constexpr int64_t kMaxBlockRows = 65536;

// Corruption naming the block unless 1 <= count <= kMaxBlockRows.
Status CheckBlockCount(int64_t block, int64_t count);

// Corruption naming the block unless a decoded block's `rows` equal its declared `count`.
Status CheckDecodedCount(int64_t block, size_t rows, int64_t count);

// The largest id an array indexed by id may be sized for when its table has `rows` rows: the
// writers number ids densely from 0 or 1, so rows + a slack of 1024 (memory stays proportional
// to the rows a file holds, whatever ids it claims).
inline constexpr int64_t DenseIdLimit(int64_t rows) { return (rows < 0 ? 0 : rows) + 1024; }
inline constexpr bool DenseIdOk(int64_t id, int64_t rows) {
  return id >= 0 && id <= DenseIdLimit(rows);
}

}  // namespace tracedb::engine
