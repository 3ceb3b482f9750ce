// `tracedb verify DB`: every event block decoded and compared with what the database says about
// it elsewhere, the way PRAGMA integrity_check compares a table with its indexes. The readers
// trust the zone maps for speed (the `blocks` row's ts range, max duration and count, the
// `block_names` rows, `name_stats`); this is how a user learns that a file lies.
// Checks, each reported with the block or row it concerns:
//   - SQLite's own structure (PRAGMA quick_check) and the schema (tables are tables);
//   - `strings` and `tracks` ids within the range the readers index (engine/db/block_check.h);
//   - per block: its declared count (1..65536) and its payload (decodes, CRC); its zone map
//     (min_ts, max_end, max_dur, count) equal to its events'; every event's track in `tracks` on
//     the block's rank; every name and category id in `strings`; its `block_names` rows equal
//     to its events' (name, cat) counts and max durations, none missing, none extra;
//   - `block_names` rows of blocks that do not exist;
//   - `name_stats` per (rank, name, cat, kind) equal to the events' count, total, min and max
//     duration (a rank that `tracedb archive` cut keeps the summaries of dropped events: there
//     only count >= the events' is required).
// Thread safety: VerifyDb opens its own read-only connection; reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/util/status.h"

namespace tracedb::engine {

struct VerifyOptions {
  size_t max_listed = 200;   // problems listed in full; the rest are counted
  bool sqlite_check = true;  // PRAGMA quick_check first (reads every page)
};

struct VerifyReport {
  uint64_t blocks = 0, events = 0, strings = 0, tracks = 0, name_stats = 0;
  uint64_t problems = 0;            // every problem found
  std::vector<std::string> listed;  // the first max_listed, each "<where>: <what>"
  bool ok() const { return problems == 0; }
};

// A non-OK Status only when `path` cannot be opened and read as a trace database at all (its
// message says why); problems inside a readable database are in the report.
StatusOr<VerifyReport> VerifyDb(const std::string& path, const VerifyOptions& options = {});

}  // namespace tracedb::engine
