// The DuckDB peer of the database benchmark: loads the generated events (CSV) into a DuckDB
// database file, then times the same queries as db_bench (median of REPS runs) and prints
// "name wall_ms rows cpu_ms" lines plus the file's size.
// Usage: node duckdb_bench.mjs EVENTS.csv OUT.duckdb [REPS]
import { DuckDBInstance } from '@duckdb/node-api';
import fs from 'node:fs';

const [csv, out, repsArg] = process.argv.slice(2);
const reps = Number(repsArg || 5);
for (const f of [out, out + '.wal']) if (fs.existsSync(f)) fs.rmSync(f);

const instance = await DuckDBInstance.create(out);
const con = await instance.connect();
let t0 = performance.now();
await con.run(`CREATE TABLE events AS SELECT * FROM read_csv('${csv}', header = true,
  columns = {'rank': 'INTEGER', 'tid': 'INTEGER', 'name': 'VARCHAR', 'ts': 'BIGINT',
             'dur': 'BIGINT', 'depth': 'INTEGER'})`);
await con.run('CHECKPOINT');
const loadMs = performance.now() - t0;
const count = Number((await (await con.run('SELECT count(*) FROM events')).getRows())[0][0]);

// The same names and rows as db_bench.cc (a track there is (rank, tid) here).
const queries = [
  ['top10', `SELECT rank, ts, dur FROM events WHERE name = 'COMMUNICATE'
             ORDER BY dur DESC LIMIT 10`],
  ['rank_name_agg', `SELECT rank, name, count(*), sum(dur), max(dur) FROM events
                     GROUP BY rank, name`],
  ['track_name_agg', `SELECT rank, tid, name, count(*), sum(dur), max(dur) FROM events
                      GROUP BY rank, tid, name`],
  ['median_by_name', 'SELECT name, quantile_disc(dur, 0.5) FROM events GROUP BY name'],
  ['p95_by_name', 'SELECT name, quantile_disc(dur, 0.95) FROM events GROUP BY name'],
  ['count_scan', 'SELECT count(*) FROM events WHERE dur >= 0'],
  ['count_depth', 'SELECT count(*) FROM events WHERE depth >= 0'],
];
for (const [name, sql] of queries) {
  const times = [];
  const cpu = [];
  let rows = 0;
  for (let r = 0; r < reps; ++r) {
    const c0 = process.cpuUsage();  // every thread of the process, DuckDB's workers included
    t0 = performance.now();
    const result = await con.run(sql);
    rows = (await result.getRows()).length;
    times.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
  }
  times.sort((a, b) => a - b);
  cpu.sort((a, b) => a - b);
  const mid = Math.floor(times.length / 2);
  console.log(`${name} ${times[mid].toFixed(3)} ${rows} ${cpu[mid].toFixed(3)}`);
}
con.closeSync?.();
instance.closeSync?.();
const bytes = fs.statSync(out).size + (fs.existsSync(out + '.wal') ? fs.statSync(out + '.wal').size : 0);
console.log(`duckdb_events ${count}`);
console.log(`duckdb_bytes ${bytes}`);
console.log(`duckdb_bytes_per_event ${(bytes / count).toFixed(2)}`);
console.log(`duckdb_load_ms ${loadMs.toFixed(0)}`);
