// Built-in views. See views.h; documented in docs/sql.md.
#include "query/views/views.h"

#include <string>

#include "query/analysis/why_views.h"
#include "query/sql/events_vtab.h"
#include "query/sql/functions.h"
#include "query/views/gpu_views.h"
#include "query/views/views_collective.h"
#include "query/views/views_negotiation.h"
#include "query/views/views_p2p.h"
#include "query/views/views_spans.h"
#include "query/views/views_steps.h"

namespace tracedb::query {

namespace {

// The views up to the point-to-point ones, as shipped.
const char* const kHeadSql = R"sql(
CREATE TEMP VIEW IF NOT EXISTS spans AS
  SELECT * FROM events WHERE kind = 'span';

-- Per (rank, name): count, total, mean and exact percentiles of span durations.
-- Computed in C++ over the decoded blocks (query/views/views_spans.h): the same rows as the SQL in
-- ViewsReferenceSql().
CREATE TEMP VIEW IF NOT EXISTS span_stats AS
  SELECT rank, name, count, total_ns, mean_ns, p50_ns, p95_ns, p99_ns, max_ns
  FROM tracedb_span_stats;

-- The same per name over all ranks.
CREATE TEMP VIEW IF NOT EXISTS name_stats_all AS
  SELECT name, count, ranks, total_ns, mean_ns, p50_ns, p95_ns, p99_ns, max_ns
  FROM tracedb_name_stats_all;

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

-- Per rank: time covered by compute spans, by communication spans, by both at once
-- (communication hidden behind compute), and the rank's wall time. What counts as compute or
-- communication is activity(): recorded categories (compute; comm, mpi, nccl) and imported
-- ones (Kineto kernels, NCCL kernels, gloo/NCCL operators; BytePS Comm; every Horovod and
-- Bluefog phase). docs/sql.md, "Views on imported traces".
CREATE TEMP VIEW IF NOT EXISTS rank_time_split AS
  WITH gpu AS (
    SELECT DISTINCT ns.rank FROM main.name_stats ns JOIN main.strings c ON c.id = ns.cat
    WHERE c.s = 'kernel'),
  a AS (
    SELECT e.rank, e.ts, e.dur,
           activity(r.source, e.cat, e.name, e.rank IN (SELECT rank FROM gpu)) AS act
    FROM events e LEFT JOIN main.ranks r ON r.rank = e.rank WHERE e.kind = 'span')
  SELECT rank,
         covered_ns(ts, dur) FILTER (WHERE act = 'compute') AS compute_ns,
         covered_ns(ts, dur) FILTER (WHERE act = 'comm') AS comm_ns,
         overlap_ns(ts, dur, act = 'comm') FILTER (WHERE act IS NOT NULL) AS overlap_ns,
         max(ts + dur) - min(ts) AS wall_ns
  FROM a GROUP BY rank;

-- Training steps per rank (from tracedb_step markers or imported step spans): each step lasts
-- until the rank's next one, the last until the end of the rank's events. Computed in C++ over
-- main.steps (query/views/views_steps.h; the plain SQL, a lead() window, is ViewsReferenceSql()).
CREATE TEMP VIEW IF NOT EXISTS step_times AS
  SELECT rank, step, start_ts, dur FROM tracedb_step_times;

-- Per step over all ranks: the slowest rank's time and the spread. (The slowest rank is numbered
-- by a window over step_times, computed once: a correlated subquery per step recomputed
-- step_times for every step, quadratic in the steps; docs/sql.md "What each view costs".)
CREATE TEMP VIEW IF NOT EXISTS step_summary AS
  WITH t AS (
    SELECT step, rank, dur, row_number() OVER (PARTITION BY step ORDER BY dur DESC, rank) AS r
    FROM step_times)
  SELECT step, count(*) AS ranks, min(dur) AS min_ns, CAST(avg(dur) AS INTEGER) AS mean_ns,
         max(dur) AS max_ns,
         -- CAST: the column's INTEGER affinity, as the subquery's steps.rank has.
         CAST(max(CASE WHEN r = 1 THEN rank END) AS INTEGER) AS slowest_rank
  FROM t GROUP BY step;

)sql";

// The same views as plain SQL where the shipped ones differ (the reference the differential
// test compares them with): step_times' window, step_summary's correlated subquery, and
// span_stats and name_stats_all as the GROUP BY the C++ of query/views/views_spans.h computes.
const char* const kHeadReferenceSql = R"sql(
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

-- Per rank: time covered by compute spans, by communication spans, by both at once
-- (communication hidden behind compute), and the rank's wall time. What counts as compute or
-- communication is activity(): recorded categories (compute; comm, mpi, nccl) and imported
-- ones (Kineto kernels, NCCL kernels, gloo/NCCL operators; BytePS Comm; every Horovod and
-- Bluefog phase). docs/sql.md, "Views on imported traces".
CREATE TEMP VIEW IF NOT EXISTS rank_time_split AS
  WITH gpu AS (
    SELECT DISTINCT ns.rank FROM main.name_stats ns JOIN main.strings c ON c.id = ns.cat
    WHERE c.s = 'kernel'),
  a AS (
    SELECT e.rank, e.ts, e.dur,
           activity(r.source, e.cat, e.name, e.rank IN (SELECT rank FROM gpu)) AS act
    FROM events e LEFT JOIN main.ranks r ON r.rank = e.rank WHERE e.kind = 'span')
  SELECT rank,
         covered_ns(ts, dur) FILTER (WHERE act = 'compute') AS compute_ns,
         covered_ns(ts, dur) FILTER (WHERE act = 'comm') AS comm_ns,
         overlap_ns(ts, dur, act = 'comm') FILTER (WHERE act IS NOT NULL) AS overlap_ns,
         max(ts + dur) - min(ts) AS wall_ns
  FROM a GROUP BY rank;

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

)sql";

// Collective matching over the table-valued function of query/views/views_collective.h (the views
// after it read it through collective_arrivals).
const char* const kCollSql = R"sql(
-- ---- Cross-rank matching (MPI capture; docs/sql.md "Stragglers") ----

-- Every rank's arrival at every collective: recorded MPI calls, PyTorch collectives (cat
-- 'comm') and NCCL collectives (their issue instants), matched by communicator and sequence
-- number; and imported Horovod negotiations, where rank 0's timeline holds one
-- RANK_READY tick per rank (comm 0, seq = the NEGOTIATE_* span's id, name without NEGOTIATE_;
-- a tick has no duration, so dur and end_ts are NULL).
-- Computed in C++ over the decoded blocks (query/views/views_collective.h): the same rows as the SQL
-- in ViewsReferenceSql().
CREATE TEMP VIEW IF NOT EXISTS collective_calls AS
  SELECT rank, name, comm, seq, id, ts, dur, end_ts FROM tracedb_collective_arrivals;

-- Every rank's call of every collective, matched across ranks by (comm, seq): how late it
-- arrived after the first rank (late_ns), how long it waited for the last one (wait_ns), and
-- who arrived last.
CREATE TEMP VIEW IF NOT EXISTS collective_arrivals AS
  SELECT rank, name, comm, seq, id, ts, dur, end_ts, late_ns, wait_ns, ranks, last_rank
  FROM tracedb_collective_arrivals;

-- One row per collective: its arrival skew and the straggler (the last rank to arrive).
CREATE TEMP VIEW IF NOT EXISTS collectives AS
  SELECT comm, seq, name, ranks, min(ts) AS first_arrival, max(ts) AS last_arrival,
         max(late_ns) AS skew_ns, last_rank, max(end_ts) - min(end_ts) AS exit_spread_ns,
         max(dur) AS max_dur
  FROM collective_arrivals GROUP BY comm, seq;

-- Per rank: how often it was the straggler, and the time the others spent waiting for it.
CREATE TEMP VIEW IF NOT EXISTS stragglers AS
  SELECT last_rank AS rank, count(*) AS times_last, sum(skew_ns) AS caused_wait_ns,
         max(skew_ns) AS max_skew_ns
  FROM collectives WHERE ranks > 1 GROUP BY last_rank;

-- Per rank: the time it spent waiting in collectives for later ranks.
CREATE TEMP VIEW IF NOT EXISTS collective_wait AS
  SELECT rank, count(*) AS collectives, sum(wait_ns) AS waited_ns, sum(late_ns) AS late_ns,
         sum(CASE WHEN rank = last_rank THEN 1 ELSE 0 END) AS times_last
  FROM collective_arrivals GROUP BY rank;

)sql";

// The same in plain SQL: window functions over (comm, seq) (kept as the reference of the C++).
const char* const kCollReferenceSql = R"sql(
-- ---- Cross-rank matching (MPI capture; docs/sql.md "Stragglers") ----

-- Every rank's arrival at every collective: recorded MPI calls, PyTorch collectives (cat
-- 'comm') and NCCL collectives (their issue instants), matched by communicator and sequence
-- number; and imported Horovod negotiations, where rank 0's timeline holds one
-- RANK_READY tick per rank (comm 0, seq = the NEGOTIATE_* span's id, name without NEGOTIATE_;
-- a tick has no duration, so dur and end_ts are NULL).
-- (The NEGOTIATE_* spans are read once into a table SQLite indexes: a join on events.id per
-- tick would decode a block per tick.)
CREATE TEMP VIEW IF NOT EXISTS collective_calls AS
  WITH n AS MATERIALIZED (
    SELECT id, name FROM events
    WHERE kind = 'span' AND name LIKE 'NEGOTIATE\_%' ESCAPE '\')
  SELECT rank, name, comm, seq, id, ts, dur, end_ts
  FROM events
  WHERE (cat IN ('mpi', 'comm') OR (cat = 'nccl' AND kind = 'instant')) AND seq IS NOT NULL
  UNION ALL
  SELECT t.peer, substr(n.name, 11), CAST(0 AS INTEGER), n.id, t.id, t.ts, NULL, NULL
  FROM events t JOIN n ON n.id = t.parent
  WHERE t.name = 'RANK_READY' AND t.peer IS NOT NULL;
-- (CAST: the ticks' comm has the INTEGER affinity of every other comm, as the C++ table's
-- column does; a bare 0 had none, so `comm > '-1'` differed between the two kinds of row.)

-- Every rank's call of every collective, matched across ranks by (comm, seq): how late it
-- arrived after the first rank (late_ns), how long it waited for the last one (wait_ns), and
-- who arrived last.
CREATE TEMP VIEW IF NOT EXISTS collective_arrivals AS
  SELECT rank, name, comm, seq, id, ts, dur, end_ts,
         ts - min(ts) OVER w AS late_ns,
         max(ts) OVER w - ts AS wait_ns,
         count(*) OVER w AS ranks,
         first_value(rank) OVER (PARTITION BY comm, seq ORDER BY ts DESC, rank) AS last_rank
  FROM collective_calls
  WINDOW w AS (PARTITION BY comm, seq);

-- One row per collective: its arrival skew and the straggler (the last rank to arrive).
CREATE TEMP VIEW IF NOT EXISTS collectives AS
  SELECT comm, seq, name, ranks, min(ts) AS first_arrival, max(ts) AS last_arrival,
         max(late_ns) AS skew_ns, last_rank, max(end_ts) - min(end_ts) AS exit_spread_ns,
         max(dur) AS max_dur
  FROM collective_arrivals GROUP BY comm, seq;

-- Per rank: how often it was the straggler, and the time the others spent waiting for it.
CREATE TEMP VIEW IF NOT EXISTS stragglers AS
  SELECT last_rank AS rank, count(*) AS times_last, sum(skew_ns) AS caused_wait_ns,
         max(skew_ns) AS max_skew_ns
  FROM collectives WHERE ranks > 1 GROUP BY last_rank;

-- Per rank: the time it spent waiting in collectives for later ranks.
CREATE TEMP VIEW IF NOT EXISTS collective_wait AS
  SELECT rank, count(*) AS collectives, sum(wait_ns) AS waited_ns, sum(late_ns) AS late_ns,
         sum(CASE WHEN rank = last_rank THEN 1 ELSE 0 END) AS times_last
  FROM collective_arrivals GROUP BY rank;

)sql";

// Point-to-point matching over the table-valued functions of query/views/views_p2p.h.
const char* const kP2pSql = R"sql(
-- Point-to-point messages: the n-th send from rank A to B with tag T on a communicator matches
-- the n-th receive posted at B from A with tag T (MPI's non-overtaking rule). Ranks in `peer`
-- are communicator ranks; the comms table translates them. Computed in C++ over the decoded MPI
-- blocks (query/views/views_p2p.h): the same rows as the SQL in ViewsReferenceSql().
CREATE TEMP VIEW IF NOT EXISTS p2p_sends AS
  SELECT id, src, comm, src_in_comm, dst_in_comm, tag, ts, end_ts, bytes, n
  FROM tracedb_p2p_sends;

-- Receives with their actual source and tag (MPI_Recv, and MPI_Irecv with its completion).
CREATE TEMP VIEW IF NOT EXISTS p2p_receives AS
  SELECT id, dst, comm, dst_in_comm, src_in_comm, tag, posted_ts, end_ts, bytes, n
  FROM tracedb_p2p_receives;

-- Matched messages, with the time from the start of the send to the end of the receive.
CREATE TEMP VIEW IF NOT EXISTS p2p_messages AS
  SELECT send_id, recv_id, src, dst, comm, tag, bytes, send_ts, recv_end_ts, latency_ns
  FROM tracedb_p2p_messages;

)sql";

// The same in plain SQL: window functions and a self-join of `events` on (rank, flow), which
// SQLite runs as nested loops (kept as the reference of the C++ matching).
const char* const kP2pReferenceSql = R"sql(
-- Point-to-point messages: the n-th send from rank A to B with tag T on a communicator matches
-- the n-th receive posted at B from A with tag T (MPI's non-overtaking rule). Ranks in `peer`
-- are communicator ranks; the comms table translates them.
CREATE TEMP VIEW IF NOT EXISTS p2p_sends AS
  SELECT e.id, e.rank AS src, e.comm, coalesce(c.rank_in_comm, e.rank) AS src_in_comm,
         e.peer AS dst_in_comm, e.tag, e.ts, e.end_ts, e.bytes,
         row_number() OVER (PARTITION BY e.rank, e.comm, e.peer, e.tag ORDER BY e.ts, e.id) AS n
  FROM events e LEFT JOIN main.comms c ON c.rank = e.rank AND c.comm = e.comm
  WHERE e.cat = 'mpi' AND e.peer >= 0 AND e.tag IS NOT NULL AND e.name IN
    ('MPI_Send', 'MPI_Ssend', 'MPI_Bsend', 'MPI_Rsend', 'MPI_Isend', 'MPI_Issend',
     'MPI_Ibsend', 'MPI_Irsend', 'MPI_Sendrecv', 'MPI_Sendrecv_replace');

CREATE TEMP VIEW IF NOT EXISTS p2p_receives AS
  SELECT id, dst, comm, dst_in_comm, src_in_comm, tag, posted_ts, end_ts, bytes,
         row_number() OVER (PARTITION BY dst, comm, src_in_comm, tag
                            ORDER BY posted_ts, id) AS n
  FROM (
    SELECT e.id, e.rank AS dst, e.comm, coalesce(c.rank_in_comm, e.rank) AS dst_in_comm,
           e.peer AS src_in_comm, e.tag, e.ts AS posted_ts, e.end_ts, e.bytes
    FROM events e LEFT JOIN main.comms c ON c.rank = e.rank AND c.comm = e.comm
    WHERE e.cat = 'mpi' AND e.name IN ('MPI_Recv', 'MPI_Mrecv') AND e.peer >= 0
    UNION ALL
    SELECT d.id, s.rank, s.comm, coalesce(c.rank_in_comm, s.rank), d.peer, d.tag, s.ts,
           d.end_ts, d.bytes
    FROM events s JOIN events d ON d.rank = s.rank AND d.flow = s.flow AND d.id <> s.id
    LEFT JOIN main.comms c ON c.rank = s.rank AND c.comm = s.comm
    WHERE s.cat = 'mpi' AND s.name IN ('MPI_Irecv', 'MPI_Imrecv') AND d.cat = 'mpi'
      AND d.peer >= 0);

-- Matched messages, with the time from the start of the send to the end of the receive.
CREATE TEMP VIEW IF NOT EXISTS p2p_messages AS
  SELECT s.id AS send_id, r.id AS recv_id, s.src, r.dst, s.comm, s.tag, s.bytes,
         s.ts AS send_ts, r.end_ts AS recv_end_ts, r.end_ts - s.ts AS latency_ns
  FROM p2p_sends s JOIN p2p_receives r
    ON r.comm = s.comm AND r.dst_in_comm = s.dst_in_comm AND r.src_in_comm = s.src_in_comm
   AND r.tag = s.tag AND r.n = s.n;

)sql";

// Horovod negotiations over the table-valued functions of query/views/views_negotiation.h.
const char* const kNegSql = R"sql(
-- Horovod negotiations (imported timelines): per NEGOTIATE_* span, the rank whose readiness
-- tick came last, and how long after the negotiation started. Computed in C++ over the decoded
-- blocks that hold RANK_READY ticks and NEGOTIATE_* spans (query/views/views_negotiation.h): the same
-- rows as the SQL in ViewsReferenceSql().
CREATE TEMP VIEW IF NOT EXISTS negotiation_ticks AS
  SELECT negotiation, ready_rank, ts, from_last FROM tracedb_negotiation_ticks;

CREATE TEMP VIEW IF NOT EXISTS negotiations AS
  SELECT id, rank, name, tensor, ts, dur, last_rank, last_ready_after_ns
  FROM tracedb_negotiations;

)sql";

// The same in plain SQL: a row_number() window over the ticks, joined to the spans (kept as the
// reference of the C++).
const char* const kNegReferenceSql = R"sql(
-- Horovod negotiations (imported timelines): per NEGOTIATE_* span, the rank whose readiness
-- tick came last, and how long after the negotiation started.
CREATE TEMP VIEW IF NOT EXISTS negotiation_ticks AS
  SELECT parent AS negotiation, peer AS ready_rank, ts,
         row_number() OVER (PARTITION BY parent ORDER BY ts DESC, peer) AS from_last
  FROM events WHERE name = 'RANK_READY' AND parent IS NOT NULL;

CREATE TEMP VIEW IF NOT EXISTS negotiations AS
  WITH n AS MATERIALIZED (
    SELECT id, rank, name, lane, ts, dur FROM events
    WHERE kind = 'span' AND name LIKE 'NEGOTIATE\_%' ESCAPE '\')
  SELECT n.id, n.rank, n.name, n.lane AS tensor, n.ts, n.dur, t.ready_rank AS last_rank,
         t.ts - n.ts AS last_ready_after_ns
  FROM negotiation_ticks t JOIN n ON n.id = t.negotiation
  WHERE t.from_last = 1;

)sql";

const char* const kTailSql = R"sql(
-- Each rank's clock alignment.
CREATE TEMP VIEW IF NOT EXISTS clock_alignment AS
  SELECT rank, host, clock_method, offset_ns, drift_ppm, uncertainty_ns, sync_points
  FROM main.ranks;

-- Which built-in views answer on this database, and why not where they do not (imported
-- formats that lack what a view needs). Reads only small tables. docs/sql.md.
CREATE TEMP VIEW IF NOT EXISTS view_notes AS
  WITH f AS (
    SELECT EXISTS (SELECT 1 FROM main.name_stats) AS events,
           EXISTS (SELECT 1 FROM main.name_stats WHERE kind = 0) AS spans,
           EXISTS (SELECT 1 FROM main.steps) AS steps,
           EXISTS (SELECT 1 FROM main.name_stats ns JOIN main.strings c ON c.id = ns.cat
                   WHERE c.s = 'mpi') AS mpi,
           EXISTS (SELECT 1 FROM main.name_stats ns JOIN main.strings c ON c.id = ns.cat
                   WHERE c.s IN ('mpi', 'comm', 'nccl')) AS coll,
           EXISTS (SELECT 1 FROM main.name_stats ns JOIN main.strings c ON c.id = ns.cat
                   WHERE c.s IN ('mpi', 'comm', 'nccl')
                   GROUP BY ns.name HAVING count(DISTINCT ns.rank) > 1) AS multi,
           EXISTS (SELECT 1 FROM main.name_stats ns JOIN main.strings n ON n.id = ns.name
                   WHERE n.s = 'RANK_READY') AS ticks,
           EXISTS (SELECT 1 FROM main.mpi_profile UNION ALL SELECT 1 FROM main.rank_times)
             AS profile,
           EXISTS (SELECT 1 FROM main.ranks WHERE source IN ('horovod', 'byteps'))
             AS comm_only,
           EXISTS (SELECT 1 FROM main.ranks WHERE source = 'bluefog') AS bluefog,
           EXISTS (SELECT 1 FROM main.ranks WHERE source = 'chrome') AS generic,
           EXISTS (SELECT 1 FROM main.name_stats ns JOIN main.strings c ON c.id = ns.cat
                   WHERE c.s IN ('cuda', 'kernel') AND ns.kind = 0) AS kernels,
           EXISTS (SELECT 1 FROM main.name_stats ns JOIN main.strings c ON c.id = ns.cat
                   WHERE c.s = 'nccl') AS nccl_tasks,
           (SELECT group_concat(source, ', ') FROM (SELECT DISTINCT source FROM main.ranks
                                                    WHERE source IS NOT NULL ORDER BY source))
             AS formats),
  why AS (
    SELECT CASE WHEN profile THEN 'mpitrace and mpiP profiles hold per-routine totals, not events: '
                                  || 'see mpi_profile, mpi_msgsize, rank_times, tracedb report mpi'
                ELSE 'no events' END AS no_events,
           'no collective events with sequence numbers (recorded by tracedb''s MPI, PyTorch '
             || 'or NCCL capture); imported Horovod timelines answer through their RANK_READY '
             || 'ticks' AS no_seq,
           'no training steps: imports have them only from Kineto ProfilerStep#N spans'
             AS no_steps,
           'no communication events: wait states need matched collectives or messages '
             || '(docs/why.md)' AS no_comm, *
    FROM f)
  SELECT view, CASE WHEN note = '' THEN 'yes' WHEN answers THEN 'partly' ELSE 'no' END AS answers,
         note, formats
  FROM (
    SELECT 'spans' AS view, spans AS answers, CASE WHEN spans THEN '' ELSE no_events END AS note,
           formats FROM why
    UNION ALL SELECT 'span_stats', spans, CASE WHEN spans THEN '' ELSE no_events END, formats
      FROM why
    UNION ALL SELECT 'name_stats_all', spans, CASE WHEN spans THEN '' ELSE no_events END, formats
      FROM why
    UNION ALL SELECT 'name_summary', events, CASE WHEN events THEN '' ELSE no_events END, formats
      FROM why
    UNION ALL SELECT 'rank_time_split', spans,
      CASE WHEN NOT spans THEN no_events
           WHEN comm_only THEN 'Horovod and BytePS timelines time only communication: '
                               || 'compute_ns and overlap_ns are 0 on their ranks'
           WHEN bluefog THEN 'Bluefog''s compute is only its FORWARD and GRADIENT COMPT. '
                             || 'activities (optimizer timeline hooks)'
           WHEN generic THEN 'a generic Chrome trace''s categories count only when they are '
                             || 'compute, comm, mpi or nccl (or Kineto''s kernel, cpu_op)'
           ELSE '' END, formats FROM why
    UNION ALL SELECT 'step_times', steps, CASE WHEN steps THEN '' ELSE no_steps END, formats
      FROM why
    UNION ALL SELECT 'step_summary', steps, CASE WHEN steps THEN '' ELSE no_steps END, formats
      FROM why
    UNION ALL SELECT v.name, coll OR ticks,
      CASE WHEN coll AND (multi OR v.name <> 'stragglers') THEN ''
           WHEN coll THEN 'no collective was called on more than one rank: nobody waited'
           WHEN ticks THEN 'from Horovod RANK_READY ticks: arrival times only '
                                            || '(dur, end_ts and exit_spread_ns are NULL)'
           ELSE no_seq END, formats
      FROM why, (SELECT 'collective_calls' AS name UNION ALL SELECT 'collective_arrivals'
                 UNION ALL SELECT 'collectives' UNION ALL SELECT 'stragglers'
                 UNION ALL SELECT 'collective_wait') v
    UNION ALL SELECT v.name, mpi,
      CASE WHEN mpi THEN '' ELSE 'point-to-point messages need recorded MPI events (peer, tag, '
                                 || 'comm); no imported format has them' END, formats
      FROM why, (SELECT 'p2p_sends' AS name UNION ALL SELECT 'p2p_receives'
                 UNION ALL SELECT 'p2p_messages') v
    UNION ALL SELECT v.name, ticks,
      CASE WHEN ticks THEN '' ELSE 'Horovod negotiations: only Horovod timelines have '
                                   || 'RANK_READY ticks' END, formats
      FROM why, (SELECT 'negotiation_ticks' AS name UNION ALL SELECT 'negotiations') v
    UNION ALL SELECT v.name, kernels,
      CASE WHEN kernels THEN '' ELSE 'no GPU kernels: recorded with tracedb record --cuda '
                                     || '(CUPTI), or imported from a Kineto trace''s kernel '
                                     || 'events' END, formats
      FROM why, (SELECT 'gpu_kernels' AS name UNION ALL SELECT 'gpu_step_time') v
    UNION ALL SELECT v.name, nccl_tasks,
      CASE WHEN nccl_tasks THEN ''
           WHEN kernels THEN 'NCCL tasks (issue, algorithm, completion) come only from '
                             || 'tracedb''s NCCL profiler plugin (record --nccl); this trace''s '
                             || 'NCCL kernels are in gpu_kernels and gpu_step_time'
           ELSE 'NCCL tasks come only from tracedb''s NCCL profiler plugin (record --nccl)'
           END, formats
      FROM why, (SELECT 'nccl_ops' AS name UNION ALL SELECT 'nccl_collectives') v
    UNION ALL SELECT v.name, coll OR mpi OR ticks,
      CASE WHEN (coll AND multi) OR mpi THEN ''
           WHEN coll THEN 'no collective was called on more than one rank: nobody waited'
           WHEN ticks THEN 'from Horovod RANK_READY ticks: the waits of negotiations only'
           ELSE no_comm END, formats
      FROM why, (SELECT 'wait_states' AS name UNION ALL SELECT 'wait_state_totals') v
    UNION ALL SELECT 'root_causes', coll OR mpi OR ticks,
      CASE WHEN coll OR mpi OR ticks
           THEN 'only the delays that stand out from the noise (docs/why.md, Noise); '
                || 'tracedb_root_causes has every one'
           ELSE no_comm END, formats FROM why
    UNION ALL SELECT v.name, spans, CASE WHEN spans THEN '' ELSE no_events END, formats
      FROM why, (SELECT 'critical_path' AS name UNION ALL SELECT 'critical_path_names') v
    UNION ALL SELECT 'critical_path_whatif', spans,
      CASE WHEN spans THEN 'rows only where a rank on the critical path took longer than the '
                           || 'median rank of its step'
           ELSE no_events END, formats FROM why
    UNION ALL SELECT 'clock_alignment', 1, '', formats FROM why);
)sql";

}  // namespace

const char* ViewsSql() {
  static const std::string sql =
      std::string(kHeadSql) + kCollSql + kP2pSql + kNegSql + analysis::WhyViewsSql() + kTailSql;
  return sql.c_str();
}

const char* ViewsReferenceSql() {
  static const std::string sql = std::string(kHeadReferenceSql) + kCollReferenceSql +
                                 kP2pReferenceSql + kNegReferenceSql + analysis::WhyViewsSql() +
                                 kTailSql;
  return sql.c_str();
}

int InstallSqlSurface(sqlite3* db, char** err) {
  int rc = RegisterEventsModule(db);
  if (rc == SQLITE_OK) rc = RegisterFunctions(db);
  if (rc == SQLITE_OK) rc = RegisterP2pModules(db);
  if (rc == SQLITE_OK) rc = RegisterCollectiveModules(db);
  if (rc == SQLITE_OK) rc = RegisterStepsModules(db);
  if (rc == SQLITE_OK) rc = RegisterNegotiationModules(db);
  if (rc == SQLITE_OK) rc = RegisterSpanStatsModules(db);
  if (rc == SQLITE_OK) rc = analysis::RegisterWhyModules(db);
  if (rc != SQLITE_OK) {
    if (err)
      *err = sqlite3_mprintf("cannot register the tracedb SQL module: %s", sqlite3_errstr(rc));
    return rc;
  }
  rc = sqlite3_exec(db, ViewsSql(), nullptr, nullptr, err);
  if (rc == SQLITE_OK) rc = InstallGpuViews(db, err);
  return rc;
}

}  // namespace tracedb::query
