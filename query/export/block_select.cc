// ForEachBlockZone. See block_select.h.
#include "query/export/block_select.h"

#include <algorithm>

#include "engine/db/block_check.h"

namespace tracedb::query {

void BlockZoneRow::SetCount(int64_t declared) {
  count_ok = engine::CheckBlockCount(block, declared).ok();
  count = count_ok ? static_cast<uint64_t>(declared) : 0;
}

Status ForEachBlockZone(engine::Db* db, const TimeWindow* only,
                        const std::function<Status(const BlockZoneRow&)>& fn) {
  TRACEDB_ASSIGN_OR_RETURN(
      engine::Stmt list,
      db->Prepare(only != nullptr
                      ? "SELECT block, rank, min_ts, max_end, max_dur, count FROM blocks "
                        "WHERE min_ts < ?2 AND max_end >= ?1 ORDER BY rank, min_ts, block"
                      : "SELECT block, rank, min_ts, max_end, max_dur, count FROM blocks "
                        "ORDER BY rank, min_ts, block"));
  if (only != nullptr) {
    list.Bind(1, only->lo);
    list.Bind(2, only->hi);
  }
  BlockZoneRow z;
  for (;;) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, list.Step());
    if (!row) break;
    z.block = list.Int(0);
    z.rank = list.Int(1);
    z.min_ts = list.Int(2);
    z.max_end = list.Int(3);
    z.max_dur = list.Int(4);
    z.SetCount(list.Int(5));
    TRACEDB_RETURN_IF_ERROR(fn(z));
  }
  return Status::Ok();
}

}  // namespace tracedb::query
