// The GPU views. See gpu_views.h; the encodings they decode (the `tag` of NCCL task events and of
// CUDA activity, the lane names) are specified in docs/gpu-capture.md "Fields".
#include "query/views/gpu_views.h"

namespace tracedb::query {

const char* GpuViewsSql() {
  return R"sql(
-- One row per NCCL task (collective or point-to-point) and rank: the instant recorded when it was
-- issued, with its descriptor decoded from `tag`, and its real completion: the end of the last
-- proxy op or kernel channel that carries its `flow` ('enqueue' when neither was recorded).
CREATE TEMP VIEW IF NOT EXISTS nccl_ops AS
  SELECT t.rank, t.comm, t.seq, t.flow, t.name, t.bytes, t.peer AS root_or_peer, t.step,
         CASE t.tag & 255 WHEN 1 THEN 'int8' WHEN 2 THEN 'uint8' WHEN 3 THEN 'int32'
           WHEN 4 THEN 'uint32' WHEN 5 THEN 'int64' WHEN 6 THEN 'uint64' WHEN 7 THEN 'float16'
           WHEN 8 THEN 'float32' WHEN 9 THEN 'float64' WHEN 10 THEN 'bfloat16'
           WHEN 11 THEN 'float8e4m3' WHEN 12 THEN 'float8e5m2' END AS datatype,
         CASE t.tag >> 8 & 15 WHEN 1 THEN 'TREE' WHEN 2 THEN 'RING' WHEN 3 THEN 'COLLNET_DIRECT'
           WHEN 4 THEN 'COLLNET_CHAIN' WHEN 5 THEN 'NVLS' WHEN 6 THEN 'NVLS_TREE'
           WHEN 7 THEN 'PAT' END AS algo,
         CASE t.tag >> 12 & 15 WHEN 1 THEN 'LL' WHEN 2 THEN 'LL128' WHEN 3 THEN 'SIMPLE'
           END AS proto,
         t.tag >> 16 & 255 AS channels, t.tag >> 24 & 127 AS warps,
         t.ts AS issue_ts, c.gpu_start_ts, coalesce(c.end_ts, t.ts) AS end_ts,
         coalesce(c.end_ts, t.ts) - t.ts AS dur_ns, c.kernel_end_ts - c.gpu_start_ts AS kernel_ns,
         CASE WHEN c.kernel_end_ts IS NOT NULL THEN 'kernel'
              WHEN c.end_ts IS NOT NULL THEN 'proxy' ELSE 'enqueue' END AS completion
  FROM events t LEFT JOIN (
    SELECT rank, flow, max(end_ts) AS end_ts,
           min(ts) FILTER (WHERE lane LIKE 'nccl % kernel') AS gpu_start_ts,
           max(end_ts) FILTER (WHERE lane LIKE 'nccl % kernel') AS kernel_end_ts
    FROM events WHERE cat = 'nccl' AND kind = 'span' AND flow IS NOT NULL
    GROUP BY rank, flow) c ON c.rank = t.rank AND c.flow = t.flow
  WHERE t.cat = 'nccl' AND t.kind = 'instant' AND t.flow IS NOT NULL;

-- Per rank and NCCL function (like Nsight Systems' NCCL summary): instances, bytes, the time
-- from issue to completion, and the share of the rank's NCCL time.
CREATE TEMP VIEW IF NOT EXISTS nccl_collectives AS
  SELECT rank, name, count(*) AS instances, sum(bytes) AS total_bytes, sum(dur_ns) AS total_ns,
         CAST(avg(dur_ns) AS INTEGER) AS mean_ns, percentile(dur_ns, 50) AS p50_ns,
         min(dur_ns) AS min_ns, max(dur_ns) AS max_ns, sum(kernel_ns) AS kernel_ns,
         round(100.0 * sum(dur_ns) / max(1, sum(sum(dur_ns)) OVER (PARTITION BY rank)), 1)
           AS time_pct
  FROM nccl_ops GROUP BY rank, name;

-- Per CUDA kernel name over all ranks (like nsys' cuda_gpu_kern_sum), from CUPTI activity
-- (cat 'cuda', tag kind 1) or a Kineto trace's kernel events (cat 'kernel'): two selects, each
-- with its `cat =` pushed down to the events table (see gpu_step_time).
CREATE TEMP VIEW IF NOT EXISTS gpu_kernels AS
  SELECT name, count(*) AS instances, count(DISTINCT rank) AS ranks, sum(dur) AS total_ns,
         CAST(avg(dur) AS INTEGER) AS mean_ns, percentile(dur, 50) AS med_ns,
         min(dur) AS min_ns, max(dur) AS max_ns,
         round(100.0 * sum(dur) / max(1, sum(sum(dur)) OVER ()), 1) AS time_pct
  FROM (SELECT name, rank, dur FROM events
        WHERE cat = 'cuda' AND kind = 'span' AND (tag & 255) = 1
        UNION ALL
        SELECT name, rank, dur FROM events WHERE cat = 'kernel' AND kind = 'span')
  GROUP BY name;

-- Per rank and step: GPU time covered by compute kernels, by NCCL (its kernels seen by CUPTI,
-- by Kineto, or the plugin's kernel channels), and by both at once (communication hidden behind
-- compute).
-- The two kinds of rows are two selects, each with its `cat =` pushed down to the events table
-- (blocks without such a category are never decoded): an OR of them is not pushed down and
-- decodes every block. They cannot both hold one event, and the interval functions do not
-- depend on row order, so the UNION ALL gives the rows of the OR. (In the cuda select,
-- `cat = 'nccl' OR name LIKE 'nccl%'` is `name LIKE 'nccl%'`, NULL for a NULL name as there.)
CREATE TEMP VIEW IF NOT EXISTS gpu_step_time AS
  SELECT rank, step,
         coalesce(covered_ns(ts, dur) FILTER (WHERE NOT is_nccl), 0) AS kernel_ns,
         coalesce(covered_ns(ts, dur) FILTER (WHERE is_nccl), 0) AS nccl_ns,
         coalesce(overlap_ns(ts, dur, is_nccl), 0) AS overlap_ns
  FROM (SELECT rank, step, ts, dur, name LIKE 'nccl%' AS is_nccl
        FROM events WHERE cat = 'cuda' AND kind = 'span' AND (tag & 255) = 1
        UNION ALL
        SELECT rank, step, ts, dur, name LIKE 'nccl%' AS is_nccl
        FROM events WHERE cat = 'kernel' AND kind = 'span'
        UNION ALL
        SELECT rank, step, ts, dur, 1 AS is_nccl
        FROM events WHERE cat = 'nccl' AND kind = 'span' AND lane LIKE 'nccl % kernel')
  GROUP BY rank, step;
)sql";
}

int InstallGpuViews(sqlite3* db, char** err) {
  return sqlite3_exec(db, GpuViewsSql(), nullptr, nullptr, err);
}

Status InstallGpuViews(engine::Db* db) { return db->Exec(GpuViewsSql()); }

}  // namespace tracedb::query
