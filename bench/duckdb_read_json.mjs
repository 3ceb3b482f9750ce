// The DuckDB side of bench/import_bench.py: loads the trace events of one Chrome-JSON file into
// an in-memory DuckDB table with read_json (the array form as is; the object form by unnesting
// its traceEvents), and prints {"rows": N, "seconds": S} (S: the load alone, without node's
// start-up). Usage: node duckdb_read_json.mjs FILE array|object; with "none" as the form it
// loads nothing (the memory of node + DuckDB alone, for the baseline).
// For files larger than memory (bench/run_import_scale_bench.sh): DUCKDB_DB=PATH loads into a
// database file there instead of memory (removed first), DUCKDB_MEMORY_LIMIT=SIZE (e.g. 16GB)
// sets DuckDB's memory_limit and DUCKDB_TEMP_DIR=DIR its temp_directory, so that DuckDB can
// spill rather than take the machine's memory; an error (out of memory) exits 1 with DuckDB's
// message.
import { DuckDBInstance } from '@duckdb/node-api';
import fs from 'node:fs';

const [file, form] = process.argv.slice(2);
const path = file.replaceAll("'", "''");
const dbFile = process.env.DUCKDB_DB || ':memory:';
if (dbFile !== ':memory:') {
  for (const f of [dbFile, dbFile + '.wal']) if (fs.existsSync(f)) fs.rmSync(f);
}
const instance = await DuckDBInstance.create(dbFile);
const con = await instance.connect();
if (process.env.DUCKDB_MEMORY_LIMIT) {
  await con.run(`SET memory_limit = '${process.env.DUCKDB_MEMORY_LIMIT}'`);
}
if (process.env.DUCKDB_TEMP_DIR) {
  await con.run(`SET temp_directory = '${process.env.DUCKDB_TEMP_DIR.replaceAll("'", "''")}'`);
}
const t0 = performance.now();
if (form === 'none') {
  await con.run('CREATE TABLE events AS SELECT 1 AS x');
} else if (form === 'array') {
  await con.run(`CREATE TABLE events AS SELECT * FROM read_json('${path}', format = 'array',
                 maximum_object_size = 1073741824)`);
} else {
  await con.run(`CREATE TABLE events AS SELECT unnest(traceEvents, recursive := true)
                 FROM read_json('${path}', maximum_object_size = 1073741824)`);
}
const seconds = (performance.now() - t0) / 1000;
const result = await con.runAndReadAll('SELECT count(*) FROM events');
console.log(JSON.stringify({ rows: Number(result.getRows()[0][0]), seconds }));
