// Compaction's clocks (compactor.cc's second pass): each process's clock model onto the common
// clock, from what the pre-pass stored (anchors, sync exchanges, hosts), and the ranks' rows of
// the `ranks` table that say how. Internal to engine/ (compactor.cc and compactor_clocks.cc).
// Method and rationale: docs/database-format.md "Clocks".
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "engine/db/clock_model.h"
#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::engine::compaction {

using ProcessKey = std::pair<int32_t, uint32_t>;  // (rank, pid)

struct ProcessClock {
  ClockModel model;
  std::string method;           // "reference", "same-host", "sync", "realtime"
  int64_t uncertainty_ns = -1;  // -1: unknown
  int64_t sync_points = 0;
  int64_t last_anchor_local = INT64_MIN;  // the process's latest anchor (its clock), even one
                                          // the model skipped as too close to another
};

// Every process's clock, from the pre-pass tables of `db`.
StatusOr<std::map<ProcessKey, ProcessClock>> BuildClocks(Db* db);

// Writes the clock columns of the ranks' rows (see compactor_clocks.cc for what is skipped).
Status StoreRankClocks(Db* db, const std::map<ProcessKey, ProcessClock>& clocks, size_t clock_ranks,
                       std::set<int32_t>* stored);

}  // namespace tracedb::engine::compaction
