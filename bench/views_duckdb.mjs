// The DuckDB peer of the built-in views benchmark (bench/run_views_bench.sh): loads the rows
// `views_bench export` wrote (events and the summary tables the views read) into an in-memory
// DuckDB database, defines each built-in view as the equivalent DuckDB SQL over those plain
// tables, and times them as `views_bench time` does (the list comes from `views_bench list`:
// count(*) of row-level views, the full result of aggregates). Prints "view wall_ms rows cpu_ms"
// lines (medians of REPS runs) and "duckdb_load_ms N".
// Equivalence: the SQL is query/views.cc's and query/gpu_views.cc's, with what DuckDB lacks
// spelled out: percentile(x, p) is quantile_disc(x, p / 100) (both the nearest-rank value);
// activity() is its table (query/functions.cc ActivityOf) as a CASE; covered_ns and overlap_ns
// are the union length of intervals computed with window functions (islands), and the overlap
// as covered(A) + covered(B) - covered(A or B); SQLite's bare columns in GROUP BY are any_value.
// Usage: node views_duckdb.mjs DIR LIST.tsv [REPS]
import { DuckDBInstance } from '@duckdb/node-api';
import fs from 'node:fs';

const [dir, listFile, repsArg] = process.argv.slice(2);
const reps = Number(repsArg || 5);
const list = fs.readFileSync(listFile, 'utf8').trim().split('\n').map((l) => l.split('\t'));

const instance = await DuckDBInstance.create(':memory:');
const con = await instance.connect();

const tables = {
  events: {id: 'BIGINT', rank: 'INTEGER', tid: 'BIGINT', track: 'BIGINT', track_name: 'VARCHAR',
           lane: 'VARCHAR', name: 'VARCHAR', cat: 'VARCHAR', kind: 'VARCHAR', ts: 'BIGINT',
           dur: 'BIGINT', end_ts: 'BIGINT', depth: 'INTEGER', parent: 'BIGINT', bytes: 'BIGINT',
           peer: 'BIGINT', tag: 'BIGINT', comm: 'BIGINT', seq: 'BIGINT', flow: 'BIGINT',
           step: 'BIGINT'},
  comms: {rank: 'INTEGER', comm: 'BIGINT', size: 'INTEGER', rank_in_comm: 'INTEGER'},
  steps: {rank: 'INTEGER', ts: 'BIGINT', step: 'BIGINT'},
  blocks: {block: 'BIGINT', rank: 'INTEGER', min_ts: 'BIGINT', max_end: 'BIGINT',
           max_dur: 'BIGINT', count: 'BIGINT'},
  name_stats: {rank: 'INTEGER', name: 'BIGINT', cat: 'BIGINT', kind: 'INTEGER', count: 'BIGINT',
               total_dur: 'BIGINT', min_dur: 'BIGINT', max_dur: 'BIGINT'},
  strings: {id: 'BIGINT', s: 'VARCHAR'},
};
let t0 = performance.now();
for (const [name, cols] of Object.entries(tables)) {
  const spec = Object.entries(cols).map(([c, t]) => `'${c}': '${t}'`).join(', ');
  await con.run(`CREATE TABLE ${name} AS SELECT * FROM read_csv('${dir}/${name}.csv',
    header = true, quote = '"', escape = '"', columns = {${spec}})`);
}
// ranks: every column as the file has it (types detected).
await con.run(`CREATE TABLE ranks AS SELECT * FROM read_csv('${dir}/ranks.csv', header = true)`);
// Imported-profile tables the view_notes view reads: empty here, as in the tracedb database.
await con.run('CREATE TABLE mpi_profile(rank INTEGER)');
await con.run('CREATE TABLE rank_times(rank INTEGER)');
const loadMs = performance.now() - t0;

// Union length of the intervals [ts, e) per (keys..., s): `src` has columns keys, s, ts, e.
const covered = (src, keys) => {
  const k = keys.join(', ');
  return `(SELECT ${k}, s, sum(hi - lo) AS ns FROM (
      SELECT ${k}, s, island, min(ts) AS lo, max(e) AS hi FROM (
        SELECT ${k}, s, ts, e, sum(CASE WHEN prev IS NULL OR ts > prev THEN 1 ELSE 0 END)
          OVER (PARTITION BY ${k}, s ORDER BY ts, e ROWS UNBOUNDED PRECEDING) AS island
        FROM (SELECT ${k}, s, ts, e, max(e) OVER (PARTITION BY ${k}, s ORDER BY ts, e
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev FROM ${src}))
      GROUP BY ${k}, s, island)
    GROUP BY ${k}, s)`;
};

const activity = String.raw`CASE
    WHEN e.cat = 'compute' THEN 'compute'
    WHEN lower(e.cat) = 'comm' OR e.cat IN ('mpi', 'nccl') THEN 'comm'
    WHEN r.source IN ('horovod', 'byteps') THEN 'comm'
    WHEN r.source = 'bluefog' THEN
      CASE WHEN e.name IN ('FORWARD', 'BACKWARD', 'GRADIENT COMPT.') THEN 'compute' ELSE 'comm' END
    WHEN e.cat = 'kernel' THEN CASE WHEN lower(e.name) LIKE 'nccl%' THEN 'comm' ELSE 'compute' END
    WHEN NOT (e.rank IN (SELECT rank FROM gpu)) AND e.cat IN ('cpu_op', 'user_annotation') THEN
      CASE WHEN lower(e.name) LIKE 'nccl:%' OR lower(e.name) LIKE 'gloo:%'
             OR lower(e.name) LIKE 'c10d::%' OR lower(e.name) LIKE 'processgroup%' THEN 'comm'
           WHEN e.cat = 'cpu_op' THEN 'compute' END
  END`;

const views = {
  spans: `SELECT * FROM events WHERE kind = 'span'`,
  span_stats: `SELECT rank, name, count(*) AS count, sum(dur) AS total_ns,
      CAST(avg(dur) AS BIGINT) AS mean_ns, quantile_disc(dur, 0.5) AS p50_ns,
      quantile_disc(dur, 0.95) AS p95_ns, quantile_disc(dur, 0.99) AS p99_ns, max(dur) AS max_ns
    FROM events WHERE kind = 'span' GROUP BY rank, name`,
  name_stats_all: `SELECT name, count(*) AS count, count(DISTINCT rank) AS ranks,
      sum(dur) AS total_ns, CAST(avg(dur) AS BIGINT) AS mean_ns, quantile_disc(dur, 0.5) AS p50_ns,
      quantile_disc(dur, 0.95) AS p95_ns, quantile_disc(dur, 0.99) AS p99_ns, max(dur) AS max_ns
    FROM events WHERE kind = 'span' GROUP BY name`,
  name_summary: `SELECT ns.rank AS rank, n.s AS name, c.s AS cat,
      CASE ns.kind WHEN 0 THEN 'span' WHEN 1 THEN 'instant' WHEN 2 THEN 'counter'
                   ELSE 'flow' END AS kind,
      ns.count AS count, ns.total_dur AS total_ns, ns.total_dur // ns.count AS mean_ns,
      ns.min_dur AS min_ns, ns.max_dur AS max_ns
    FROM name_stats ns JOIN strings n ON n.id = ns.name LEFT JOIN strings c ON c.id = ns.cat`,
  rank_time_split: `WITH gpu AS (
      SELECT DISTINCT ns.rank FROM name_stats ns JOIN strings c ON c.id = ns.cat
      WHERE c.s = 'kernel'),
    a AS (
      SELECT e.rank, e.ts, e.dur, ${activity} AS act
      FROM events e LEFT JOIN ranks r ON r.rank = e.rank WHERE e.kind = 'span'),
    iv AS (SELECT rank, act AS s, ts, ts + dur AS e FROM a WHERE act IS NOT NULL
           UNION ALL SELECT rank, 'both', ts, ts + dur FROM a WHERE act IS NOT NULL),
    cov AS ${covered('iv', ['rank'])},
    w AS (SELECT rank, max(ts + dur) - min(ts) AS wall_ns FROM a GROUP BY rank)
    SELECT w.rank, coalesce(c.ns, 0) AS compute_ns, coalesce(m.ns, 0) AS comm_ns,
           coalesce(c.ns, 0) + coalesce(m.ns, 0) - coalesce(b.ns, 0) AS overlap_ns, w.wall_ns
    FROM w LEFT JOIN cov c ON c.rank = w.rank AND c.s = 'compute'
    LEFT JOIN cov m ON m.rank = w.rank AND m.s = 'comm'
    LEFT JOIN cov b ON b.rank = w.rank AND b.s = 'both'`,
  step_times: `SELECT rank, step, ts AS start_ts,
      coalesce(lead(ts) OVER (PARTITION BY rank ORDER BY ts),
               (SELECT max(max_end) FROM blocks b WHERE b.rank = s.rank)) - ts AS dur
    FROM steps s`,
  step_summary: `SELECT step, count(*) AS ranks, min(dur) AS min_ns,
      CAST(avg(dur) AS BIGINT) AS mean_ns, max(dur) AS max_ns,
      (SELECT t2.rank FROM step_times t2 WHERE t2.step = t.step
       ORDER BY t2.dur DESC LIMIT 1) AS slowest_rank
    FROM step_times t GROUP BY step`,
  collective_calls: String.raw`WITH n AS MATERIALIZED (
      SELECT id, name FROM events
      WHERE kind = 'span' AND name LIKE 'NEGOTIATE\_%' ESCAPE '\')
    SELECT rank, name, comm, seq, id, ts, dur, end_ts
    FROM events
    WHERE (cat IN ('mpi', 'comm') OR (cat = 'nccl' AND kind = 'instant')) AND seq IS NOT NULL
    UNION ALL
    SELECT t.peer, substr(n.name, 11), 0, n.id, t.id, t.ts, NULL, NULL
    FROM events t JOIN n ON n.id = t.parent
    WHERE t.name = 'RANK_READY' AND t.peer IS NOT NULL`,
  collective_arrivals: `SELECT rank, name, comm, seq, id, ts, dur, end_ts,
      ts - min(ts) OVER w AS late_ns, max(ts) OVER w - ts AS wait_ns, count(*) OVER w AS ranks,
      first_value(rank) OVER (PARTITION BY comm, seq ORDER BY ts DESC, rank) AS last_rank
    FROM collective_calls WINDOW w AS (PARTITION BY comm, seq)`,
  collectives: `SELECT comm, seq, any_value(name) AS name, any_value(ranks) AS ranks,
      min(ts) AS first_arrival, max(ts) AS last_arrival, max(late_ns) AS skew_ns,
      any_value(last_rank) AS last_rank, max(end_ts) - min(end_ts) AS exit_spread_ns,
      max(dur) AS max_dur
    FROM collective_arrivals GROUP BY comm, seq`,
  stragglers: `SELECT last_rank AS rank, count(*) AS times_last, sum(skew_ns) AS caused_wait_ns,
      max(skew_ns) AS max_skew_ns
    FROM collectives WHERE ranks > 1 GROUP BY last_rank`,
  collective_wait: `SELECT rank, count(*) AS collectives, sum(wait_ns) AS waited_ns,
      sum(late_ns) AS late_ns, sum(CASE WHEN rank = last_rank THEN 1 ELSE 0 END) AS times_last
    FROM collective_arrivals GROUP BY rank`,
  p2p_sends: `SELECT e.id, e.rank AS src, e.comm, coalesce(c.rank_in_comm, e.rank) AS src_in_comm,
      e.peer AS dst_in_comm, e.tag, e.ts, e.end_ts, e.bytes,
      row_number() OVER (PARTITION BY e.rank, e.comm, e.peer, e.tag ORDER BY e.ts, e.id) AS n
    FROM events e LEFT JOIN comms c ON c.rank = e.rank AND c.comm = e.comm
    WHERE e.cat = 'mpi' AND e.peer >= 0 AND e.tag IS NOT NULL AND e.name IN
      ('MPI_Send', 'MPI_Ssend', 'MPI_Bsend', 'MPI_Rsend', 'MPI_Isend', 'MPI_Issend',
       'MPI_Ibsend', 'MPI_Irsend', 'MPI_Sendrecv', 'MPI_Sendrecv_replace')`,
  p2p_receives: `SELECT id, dst, comm, dst_in_comm, src_in_comm, tag, posted_ts, end_ts, bytes,
      row_number() OVER (PARTITION BY dst, comm, src_in_comm, tag ORDER BY posted_ts, id) AS n
    FROM (
      SELECT e.id, e.rank AS dst, e.comm, coalesce(c.rank_in_comm, e.rank) AS dst_in_comm,
             e.peer AS src_in_comm, e.tag, e.ts AS posted_ts, e.end_ts, e.bytes
      FROM events e LEFT JOIN comms c ON c.rank = e.rank AND c.comm = e.comm
      WHERE e.cat = 'mpi' AND e.name IN ('MPI_Recv', 'MPI_Mrecv') AND e.peer >= 0
      UNION ALL
      SELECT d.id, s.rank, s.comm, coalesce(c.rank_in_comm, s.rank), d.peer, d.tag, s.ts,
             d.end_ts, d.bytes
      FROM events s JOIN events d ON d.rank = s.rank AND d.flow = s.flow AND d.id <> s.id
      LEFT JOIN comms c ON c.rank = s.rank AND c.comm = s.comm
      WHERE s.cat = 'mpi' AND s.name IN ('MPI_Irecv', 'MPI_Imrecv') AND d.cat = 'mpi'
        AND d.peer >= 0)`,
  p2p_messages: `SELECT s.id AS send_id, r.id AS recv_id, s.src, r.dst, s.comm, s.tag, s.bytes,
      s.ts AS send_ts, r.end_ts AS recv_end_ts, r.end_ts - s.ts AS latency_ns
    FROM p2p_sends s JOIN p2p_receives r
      ON r.comm = s.comm AND r.dst_in_comm = s.dst_in_comm AND r.src_in_comm = s.src_in_comm
     AND r.tag = s.tag AND r.n = s.n`,
  negotiation_ticks: `SELECT parent AS negotiation, peer AS ready_rank, ts,
      row_number() OVER (PARTITION BY parent ORDER BY ts DESC, peer) AS from_last
    FROM events WHERE name = 'RANK_READY' AND parent IS NOT NULL`,
  negotiations: String.raw`WITH n AS MATERIALIZED (
      SELECT id, rank, name, lane, ts, dur FROM events
      WHERE kind = 'span' AND name LIKE 'NEGOTIATE\_%' ESCAPE '\')
    SELECT n.id, n.rank, n.name, n.lane AS tensor, n.ts, n.dur, t.ready_rank AS last_rank,
           t.ts - n.ts AS last_ready_after_ns
    FROM negotiation_ticks t JOIN n ON n.id = t.negotiation
    WHERE t.from_last = 1`,
  clock_alignment: `SELECT rank, host, clock_method, offset_ns, drift_ppm, uncertainty_ns,
      sync_points FROM ranks`,
  view_notes: `WITH f AS (
      SELECT EXISTS (SELECT 1 FROM name_stats) AS events_,
             EXISTS (SELECT 1 FROM name_stats WHERE kind = 0) AS spans,
             EXISTS (SELECT 1 FROM steps) AS steps,
             EXISTS (SELECT 1 FROM name_stats ns JOIN strings c ON c.id = ns.cat
                     WHERE c.s = 'mpi') AS mpi,
             EXISTS (SELECT 1 FROM name_stats ns JOIN strings c ON c.id = ns.cat
                     WHERE c.s IN ('mpi', 'comm', 'nccl')) AS coll,
             EXISTS (SELECT 1 FROM name_stats ns JOIN strings c ON c.id = ns.cat
                     WHERE c.s IN ('mpi', 'comm', 'nccl')
                     GROUP BY ns.name HAVING count(DISTINCT ns.rank) > 1) AS multi,
             EXISTS (SELECT 1 FROM name_stats ns JOIN strings n ON n.id = ns.name
                     WHERE n.s = 'RANK_READY') AS ticks,
             EXISTS (SELECT 1 FROM mpi_profile UNION ALL SELECT 1 FROM rank_times) AS profile,
             EXISTS (SELECT 1 FROM ranks WHERE source IN ('horovod', 'byteps')) AS comm_only,
             EXISTS (SELECT 1 FROM ranks WHERE source = 'bluefog') AS bluefog,
             EXISTS (SELECT 1 FROM ranks WHERE source = 'chrome') AS generic,
             (SELECT string_agg(source, ', ' ORDER BY source) FROM (SELECT DISTINCT source
                FROM ranks WHERE source IS NOT NULL)) AS formats),
    why AS (
      SELECT CASE WHEN profile THEN 'mpitrace and mpiP profiles hold per-routine totals' ELSE
                  'no events' END AS no_events,
             'no collective events with sequence numbers' AS no_seq,
             'no training steps' AS no_steps, *
      FROM f)
    SELECT v, CASE WHEN note = '' THEN 'yes' WHEN answers THEN 'partly' ELSE 'no' END AS answers,
           note, formats
    FROM (
      SELECT 'spans' AS v, spans AS answers, CASE WHEN spans THEN '' ELSE no_events END AS note,
             formats FROM why
      UNION ALL SELECT 'span_stats', spans, CASE WHEN spans THEN '' ELSE no_events END, formats
        FROM why
      UNION ALL SELECT 'name_stats_all', spans, CASE WHEN spans THEN '' ELSE no_events END,
        formats FROM why
      UNION ALL SELECT 'name_summary', events_, CASE WHEN events_ THEN '' ELSE no_events END,
        formats FROM why
      UNION ALL SELECT 'rank_time_split', spans,
        CASE WHEN NOT spans THEN no_events WHEN comm_only THEN 'communication only'
             WHEN bluefog THEN 'Bluefog' WHEN generic THEN 'generic' ELSE '' END, formats
        FROM why
      UNION ALL SELECT 'step_times', steps, CASE WHEN steps THEN '' ELSE no_steps END, formats
        FROM why
      UNION ALL SELECT 'step_summary', steps, CASE WHEN steps THEN '' ELSE no_steps END, formats
        FROM why
      UNION ALL SELECT vv.name, coll OR ticks,
        CASE WHEN coll AND (multi OR vv.name <> 'stragglers') THEN ''
             WHEN coll THEN 'nobody waited' WHEN ticks THEN 'ticks' ELSE no_seq END, formats
        FROM why, (SELECT 'collective_calls' AS name UNION ALL SELECT 'collective_arrivals'
                   UNION ALL SELECT 'collectives' UNION ALL SELECT 'stragglers'
                   UNION ALL SELECT 'collective_wait') vv
      UNION ALL SELECT vv.name, mpi, CASE WHEN mpi THEN '' ELSE 'no MPI events' END, formats
        FROM why, (SELECT 'p2p_sends' AS name UNION ALL SELECT 'p2p_receives'
                   UNION ALL SELECT 'p2p_messages') vv
      UNION ALL SELECT vv.name, ticks, CASE WHEN ticks THEN '' ELSE 'no ticks' END, formats
        FROM why, (SELECT 'negotiation_ticks' AS name UNION ALL SELECT 'negotiations') vv
      UNION ALL SELECT 'clock_alignment', true, '', formats FROM why)`,
  nccl_ops: `SELECT t.rank, t.comm, t.seq, t.flow, t.name, t.bytes, t.peer AS root_or_peer, t.step,
      t.tag & 255 AS datatype, (t.tag >> 8) & 15 AS algo, (t.tag >> 12) & 15 AS proto,
      (t.tag >> 16) & 255 AS channels, (t.tag >> 24) & 127 AS warps,
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
    WHERE t.cat = 'nccl' AND t.kind = 'instant' AND t.flow IS NOT NULL`,
  nccl_collectives: `SELECT rank, name, count(*) AS instances, sum(bytes) AS total_bytes,
      sum(dur_ns) AS total_ns, CAST(avg(dur_ns) AS BIGINT) AS mean_ns,
      quantile_disc(dur_ns, 0.5) AS p50_ns, min(dur_ns) AS min_ns, max(dur_ns) AS max_ns,
      sum(kernel_ns) AS kernel_ns,
      round(100.0 * sum(dur_ns) / greatest(1, sum(sum(dur_ns)) OVER (PARTITION BY rank)), 1)
        AS time_pct
    FROM nccl_ops GROUP BY rank, name`,
  gpu_kernels: `SELECT name, count(*) AS instances, count(DISTINCT rank) AS ranks,
      sum(dur) AS total_ns, CAST(avg(dur) AS BIGINT) AS mean_ns, quantile_disc(dur, 0.5) AS med_ns,
      min(dur) AS min_ns, max(dur) AS max_ns,
      round(100.0 * sum(dur) / greatest(1, sum(sum(dur)) OVER ()), 1) AS time_pct
    FROM events WHERE cat = 'cuda' AND kind = 'span' AND (tag & 255) = 1 GROUP BY name`,
  gpu_step_time: `WITH k AS (
      SELECT rank, step, ts, ts + dur AS e, (cat = 'nccl' OR name LIKE 'nccl%') AS is_nccl
      FROM events
      WHERE kind = 'span' AND ((cat = 'cuda' AND (tag & 255) = 1)
                               OR (cat = 'nccl' AND lane LIKE 'nccl % kernel'))),
    iv AS (SELECT rank, step, CASE WHEN is_nccl THEN 'nccl' ELSE 'kernel' END AS s, ts, e FROM k
           UNION ALL SELECT rank, step, 'both', ts, e FROM k),
    cov AS ${covered('iv', ['rank', 'step'])},
    g AS (SELECT DISTINCT rank, step FROM k)
    SELECT g.rank, g.step, coalesce(a.ns, 0) AS kernel_ns, coalesce(b.ns, 0) AS nccl_ns,
           coalesce(a.ns, 0) + coalesce(b.ns, 0) - coalesce(c.ns, 0) AS overlap_ns
    FROM g LEFT JOIN cov a ON a.rank = g.rank AND a.step IS NOT DISTINCT FROM g.step AND a.s = 'kernel'
    LEFT JOIN cov b ON b.rank = g.rank AND b.step IS NOT DISTINCT FROM g.step AND b.s = 'nccl'
    LEFT JOIN cov c ON c.rank = g.rank AND c.step IS NOT DISTINCT FROM g.step AND c.s = 'both'`,
};
for (const [name, sql] of Object.entries(views)) {
  await con.run(`CREATE VIEW ${name} AS ${sql}`);
}

// Not views: the queries a report runs, in order (query/mpi_report.cc FromEvents and
// BuildMpiReport for `tracedb report mpi`), each read in full; rows = the report's (rank,
// routine) rows, the first query's groups less the names it leaves out.
const excluded = ['MPI_Init', 'MPI_Init_thread', 'MPI_Finalize', 'mpi_request_start',
                  'mpi_request_complete'];
const reports = {
  report_mpi: {
    sql: [
      // Whether MPI events were recorded (tracedb asks block_names, not exported: the same
      // question of a summary table).
      `SELECT count(*) FROM name_stats ns JOIN strings s ON s.id = ns.cat WHERE s.s = 'mpi'`,
      `SELECT rank, name, count(*), coalesce(sum(bytes)::DOUBLE, 0.0), sum(dur)
       FROM events WHERE cat = 'mpi' GROUP BY rank, name`,
      // log2_bucket(x): 0 below 1, else floor(log2(x)) (query/functions.cc).
      `SELECT rank, name, CASE WHEN bytes = 0 THEN 0 WHEN bytes <= 4 THEN 4
         ELSE 1::BIGINT << (CASE WHEN bytes - 1 < 1 THEN 0
                                 ELSE floor(log2(bytes - 1))::INTEGER END + 1) END AS hi,
         count(*), coalesce(sum(bytes)::DOUBLE, 0.0), sum(dur)
       FROM events WHERE cat = 'mpi' AND bytes IS NOT NULL
       GROUP BY rank, name, hi ORDER BY rank, name, hi`,
      `SELECT rank, min(ts) FILTER (WHERE name IN ('MPI_Init', 'MPI_Init_thread')),
         max(end_ts) FILTER (WHERE name = 'MPI_Finalize')
       FROM events WHERE cat = 'mpi' GROUP BY rank`,
      'SELECT rank, min(min_ts), max(max_end) FROM blocks GROUP BY rank',
      'SELECT rank, host, world_size FROM ranks',
    ],
    rows: (results) => results[1].filter((r) => !excluded.includes(r[1])).length,
  },
};

for (const [view, count] of list) {
  if (view in reports) {
    const times = [];
    const cpu = [];
    let rows = 0;
    for (let r = 0; r < reps; ++r) {
      const c0 = process.cpuUsage();
      t0 = performance.now();
      const results = [];
      for (const sql of reports[view].sql) results.push(await (await con.run(sql)).getRows());
      rows = reports[view].rows(results);
      times.push(performance.now() - t0);
      const c = process.cpuUsage(c0);
      cpu.push((c.user + c.system) / 1000);
    }
    times.sort((a, b) => a - b);
    cpu.sort((a, b) => a - b);
    const mid = Math.floor(times.length / 2);
    console.log(`${view} ${times[mid].toFixed(3)} ${rows} ${cpu[mid].toFixed(3)}`);
    continue;
  }
  if (!(view in views)) {
    console.error(`views_duckdb: no DuckDB definition of ${view}`);
    process.exit(1);
  }
  const sql = count === 'count' ? `SELECT count(*) FROM ${view}` : `SELECT * FROM ${view}`;
  const times = [];
  const cpu = [];
  let rows = 0;
  for (let r = 0; r < reps; ++r) {
    const c0 = process.cpuUsage();  // every thread of the process, DuckDB's workers included
    t0 = performance.now();
    const result = await con.run(sql);
    const got = await result.getRows();
    rows = count === 'count' ? Number(got[0][0]) : got.length;
    times.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
  }
  times.sort((a, b) => a - b);
  cpu.sort((a, b) => a - b);
  const mid = Math.floor(times.length / 2);
  console.log(`${view} ${times[mid].toFixed(3)} ${rows} ${cpu[mid].toFixed(3)}`);
}
console.log(`duckdb_load_ms ${loadMs.toFixed(0)}`);
