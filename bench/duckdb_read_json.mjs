// The DuckDB side of bench/import_bench.py: loads the trace events of one Chrome-JSON file into
// an in-memory DuckDB table with read_json (the array form as is; the object form by unnesting
// its traceEvents), and prints {"rows": N, "seconds": S} (S: the load alone, without node's
// start-up). Usage: node duckdb_read_json.mjs FILE array|object; with "none" as the form it
// loads nothing (the memory of node + DuckDB alone, for the baseline).
import { DuckDBInstance } from '@duckdb/node-api';

const [file, form] = process.argv.slice(2);
const path = file.replaceAll("'", "''");
const instance = await DuckDBInstance.create(':memory:');
const con = await instance.connect();
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
