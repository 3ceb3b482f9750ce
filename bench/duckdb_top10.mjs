// The DuckDB side of the top-10 after an import (docs/bench-import.md, issue 24 item 5): opens a
// DuckDB database file that bench/duckdb_read_json.mjs loaded (DUCKDB_DB=PATH) and runs the
// top-10 slowest spans of one name, printing {"open_s": S, "query_s": S, "rows": [...]} (times
// inside node, its start-up excluded; a fresh process per run, as `tracedb query` is).
// Usage: node duckdb_top10.mjs DB.duckdb [NAME=COMMUNICATE]
import { DuckDBInstance } from '@duckdb/node-api';

const [db, nameArg] = process.argv.slice(2);
const name = (nameArg || 'COMMUNICATE').replaceAll("'", "''");
const t0 = performance.now();
const instance = await DuckDBInstance.create(db, { access_mode: 'READ_ONLY' });
const con = await instance.connect();
const t1 = performance.now();
// read_json keeps the file's fields: ts and dur in µs (doubles), pid as the rank.
const result = await con.runAndReadAll(
    `SELECT pid, ts, dur FROM events WHERE name = '${name}' ORDER BY dur DESC LIMIT 10`);
const t2 = performance.now();
console.log(JSON.stringify({
  open_s: (t1 - t0) / 1000,
  query_s: (t2 - t1) / 1000,
  rows: result.getRows().map((r) => r.map(Number)),
}));
