// Checks on values read from a trace database. See block_check.h.
#include "engine/db/block_check.h"

#include <string>

namespace tracedb::engine {

Status CheckBlockCount(int64_t block, int64_t count) {
  if (count >= 1 && count <= kMaxBlockRows) return Status::Ok();
  return Status::Corruption("block " + std::to_string(block) + ": its zone map declares " +
                            std::to_string(count) + " events (a block holds 1 to " +
                            std::to_string(kMaxBlockRows) + "); `tracedb verify` lists what lies");
}

Status CheckDecodedCount(int64_t block, size_t rows, int64_t count) {
  if (count >= 0 && rows == static_cast<uint64_t>(count)) return Status::Ok();
  return Status::Corruption("block " + std::to_string(block) + " holds " + std::to_string(rows) +
                            " events, its zone map says " + std::to_string(count) +
                            "; `tracedb verify` lists what lies");
}

}  // namespace tracedb::engine
