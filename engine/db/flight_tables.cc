// The flight recorder's tables. See flight_tables.h; columns in docs/flight.md.
#include "engine/db/flight_tables.h"

#include <algorithm>
#include <cstdio>

#include "engine/db/db_schema.h"
#include "engine/util/coding.h"
#include "engine/util/json_string.h"

namespace tracedb::engine {

Status InsertTrigger(Db* db, int32_t rank, int64_t ts, const std::string& reason) {
  TRACEDB_RETURN_IF_ERROR(EnsureTable(db, "triggers"));
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt st, db->Prepare("INSERT OR IGNORE INTO triggers(rank, ts, reason) VALUES(?1, ?2, ?3)"));
  return st.Bind(1, rank).Bind(2, ts).Bind(3, reason).Run();
}

std::string TopNamesJson(const std::vector<std::pair<std::string, int64_t>>& top) {
  std::string out = "[";
  for (size_t i = 0; i < top.size(); ++i) {
    if (i) out += ",";
    out += "[";
    AppendJsonString(&out, top[i].first);  // engine/util/json_string.h
    out += ",";
    out += std::to_string(top[i].second);
    out += "]";
  }
  out += "]";
  return out;
}

Status InsertStepStats(Db* db, int32_t rank, const std::vector<StepStat>& rows,
                       const ClockModel& to_common, const std::vector<std::string>& strings) {
  if (rows.empty()) return Status::Ok();
  TRACEDB_RETURN_IF_ERROR(EnsureTable(db, "step_stats"));
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt st, db->Prepare("INSERT OR IGNORE INTO step_stats(rank, step, start_ns, end_ns, dur_ns, "
                           "compute_ns, comm_ns, wait_ns, bytes, events, top_names) "
                           "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"));
  std::vector<std::pair<std::string, int64_t>> top;
  for (const StepStat& r : rows) {
    // The decoder guarantees start_ns + dur_ns fits.
    const int64_t start = to_common.Map(r.start_ns);
    const int64_t end = std::max(start, to_common.Map(r.start_ns + r.dur_ns));
    top.clear();
    for (const auto& [id, ns] : r.top) {
      top.emplace_back(id >= 1 && id <= strings.size()
                           ? strings[id - 1]
                           : "<unknown name " + std::to_string(id) + ">",
                       ns);
    }
    TRACEDB_RETURN_IF_ERROR(
        st.Bind(1, rank)
            .Bind(2, r.step)
            .Bind(3, start)
            .Bind(4, end)
            .Bind(5, SaturatingSub(end, start))
            .Bind(6, r.compute_ns)
            .Bind(7, r.comm_ns)
            .Bind(8, r.wait_ns)
            .Bind(9, static_cast<int64_t>(std::min<uint64_t>(r.bytes, INT64_MAX)))
            .Bind(10, static_cast<int64_t>(std::min<uint64_t>(r.events, INT64_MAX)))
            .Bind(11, TopNamesJson(top))
            .Run());
  }
  return Status::Ok();
}

}  // namespace tracedb::engine
