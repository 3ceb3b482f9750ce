// Built-in views. See views.h; documented in docs/sql.md.
#include "query/views.h"

#include "query/events_vtab.h"
#include "query/functions.h"

namespace tracedb::query {

const char* ViewsSql() {
  return R"sql(
CREATE TEMP VIEW IF NOT EXISTS spans AS
  SELECT * FROM events WHERE kind = 'span';

-- Per (rank, name): count, total, mean and exact percentiles of span durations.
CREATE TEMP VIEW IF NOT EXISTS span_stats AS
  SELECT rank, name, count(*) AS count, sum(dur) AS total_ns,
         CAST(avg(dur) AS INTEGER) AS mean_ns, percentile(dur, 50) AS p50_ns,
         percentile(dur, 95) AS p95_ns, percentile(dur, 99) AS p99_ns, max(dur) AS max_ns
  FROM events WHERE kind = 'span' GROUP BY rank, name;

-- The same per name over all ranks.
CREATE TEMP VIEW IF NOT EXISTS name_stats_all AS
  SELECT name, count(*) AS count, count(DISTINCT rank) AS ranks, sum(dur) AS total_ns,
         CAST(avg(dur) AS INTEGER) AS mean_ns, percentile(dur, 50) AS p50_ns,
         percentile(dur, 95) AS p95_ns, percentile(dur, 99) AS p99_ns, max(dur) AS max_ns
  FROM events WHERE kind = 'span' GROUP BY name;

-- Per (rank, name) from the summary tables, without decoding any event.
CREATE TEMP VIEW IF NOT EXISTS name_summary AS
  SELECT ns.rank AS rank, n.s AS name, c.s AS cat,
         CASE ns.kind WHEN 0 THEN 'span' WHEN 1 THEN 'instant' WHEN 2 THEN 'counter'
                      ELSE 'flow' END AS kind,
         ns.count AS count, ns.total_dur AS total_ns,
         CAST(ns.total_dur / ns.count AS INTEGER) AS mean_ns, ns.min_dur AS min_ns,
         ns.max_dur AS max_ns
  FROM main.name_stats ns JOIN main.strings n ON n.id = ns.name
  LEFT JOIN main.strings c ON c.id = ns.cat;

-- Per rank: time covered by compute spans, by communication spans (comm, mpi, nccl), by both
-- at once (communication hidden behind compute), and the rank's wall time.
CREATE TEMP VIEW IF NOT EXISTS rank_time_split AS
  SELECT rank,
         covered_ns(ts, dur) FILTER (WHERE cat = 'compute') AS compute_ns,
         covered_ns(ts, dur) FILTER (WHERE cat IN ('comm', 'mpi', 'nccl')) AS comm_ns,
         overlap_ns(ts, dur, cat IN ('comm', 'mpi', 'nccl'))
           FILTER (WHERE cat IN ('compute', 'comm', 'mpi', 'nccl')) AS overlap_ns,
         max(ts + dur) - min(ts) AS wall_ns
  FROM events WHERE kind = 'span' GROUP BY rank;

-- Training steps per rank (from tracedb_step markers or imported step spans).
CREATE TEMP VIEW IF NOT EXISTS step_times AS
  SELECT rank, step, ts AS start_ts,
         coalesce(lead(ts) OVER (PARTITION BY rank ORDER BY ts),
                  (SELECT max(max_end) FROM main.blocks b WHERE b.rank = s.rank)) - ts AS dur
  FROM main.steps s;

-- Per step over all ranks: the slowest rank's time and the spread.
CREATE TEMP VIEW IF NOT EXISTS step_summary AS
  SELECT step, count(*) AS ranks, min(dur) AS min_ns, CAST(avg(dur) AS INTEGER) AS mean_ns,
         max(dur) AS max_ns,
         (SELECT t2.rank FROM step_times t2 WHERE t2.step = t.step
          ORDER BY t2.dur DESC LIMIT 1) AS slowest_rank
  FROM step_times t GROUP BY step;

-- Each rank's clock alignment.
CREATE TEMP VIEW IF NOT EXISTS clock_alignment AS
  SELECT rank, host, clock_method, offset_ns, drift_ppm, uncertainty_ns, sync_points
  FROM main.ranks;
)sql";
}

int InstallSqlSurface(sqlite3* db, char** err) {
  int rc = RegisterEventsModule(db);
  if (rc == SQLITE_OK) rc = RegisterFunctions(db);
  if (rc != SQLITE_OK) {
    if (err)
      *err = sqlite3_mprintf("cannot register the tracedb SQL module: %s", sqlite3_errstr(rc));
    return rc;
  }
  return sqlite3_exec(db, ViewsSql(), nullptr, nullptr, err);
}

}  // namespace tracedb::query
