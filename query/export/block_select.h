// Choice of event blocks by their zone maps, shared by the Chrome exporter and `tracedb view`:
// the time window test on a block's (min_ts, max_end) and on an event's (ts, dur), and the walk
// over the `blocks` table in rank, then time order (the blocks(rank, min_ts) index gives it
// without a sort).
// Thread safety: plain data and functions; ForEachBlockZone uses the caller's Db.
#pragma once

#include <climits>
#include <cstdint>
#include <functional>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::query {

// A time window [lo, hi) in ns on the job's common clock.
struct TimeWindow {
  int64_t lo = INT64_MIN;
  int64_t hi = INT64_MAX;
  bool Empty() const { return lo >= hi; }
  bool All() const { return lo == INT64_MIN && hi == INT64_MAX; }
  // A block may hold an event overlapping the window.
  bool MayOverlap(int64_t min_ts, int64_t max_end) const { return min_ts < hi && max_end >= lo; }
  // A span overlaps [lo, hi); an instant (or empty span) lies in it.
  bool Overlaps(int64_t ts, int64_t dur) const {
    int64_t end;
    if (__builtin_add_overflow(ts, dur, &end)) end = dur > 0 ? INT64_MAX : INT64_MIN;
    return ts < hi && (end > lo || ts >= lo);
  }
};

// A block's zone map (the `blocks` row without its data).
struct BlockZoneRow {
  int64_t block = 0;
  int64_t rank = 0;
  int64_t min_ts = 0;
  int64_t max_end = 0;
  int64_t max_dur = 0;
  uint64_t count = 0;    // 0 when the declared count is not one a block can hold
  bool count_ok = true;  // the declared count passed engine::CheckBlockCount (1..65536)
  // Sets count and count_ok from the `blocks.count` value read from disk.
  void SetCount(int64_t declared);
};

// Calls fn for the blocks of `db` in (rank, min_ts, block) order; with `only`, just those whose
// zone map may overlap it (the others are not read). fn's error stops the walk and is returned.
Status ForEachBlockZone(engine::Db* db, const TimeWindow* only,
                        const std::function<Status(const BlockZoneRow&)>& fn);

}  // namespace tracedb::query
