#!/usr/bin/env bash
# The main job: a real 4-rank MPI training run recorded by `tracedb record` (the recorder API in
# the program, MPI captured by the interposer with no code change), compacted into one trace
# database, and queried: the 10 slowest COMMUNICATE phases, a per-rank summary, stragglers, the
# MPI report; then exported as Chrome trace JSON. Output goes to demo-out/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc 2>/dev/null || echo 2)
ranks=${RANKS:-4}
steps=${STEPS:-120}

# Only the demo's packages (no test framework, browser or compilers for the sanitizer builds).
"$root/scripts/setup-deps.sh" --demo

echo "== build"
# The tests and benchmarks need GoogleTest, which the demo's set leaves out: build them only when
# it is there (after scripts/setup-deps.sh without --demo, e.g. for scripts/test.sh).
if dpkg-query -W -f='${Status}' libgtest-dev 2>/dev/null | grep -q "install ok installed"; then
  with_tests=ON
else
  with_tests=OFF
fi
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTRACEDB_TESTS=$with_tests -DTRACEDB_BENCH=$with_tests >/dev/null
cmake --build "$root/build" -j "$jobs" --target tracedb_cli tracedb tracedb_mpi logreg_mpi tracedb_sqlite
if cmake --build "$root/build" -j "$jobs" --target tracedb_python >/dev/null 2>&1; then
  have_python=1
else
  have_python=0
fi
tracedb="$root/build/tracedb"

out="$root/demo-out"
rm -rf "$out"
mkdir -p "$out"
mpi_flags=(--oversubscribe)
if [ "$(id -u)" -eq 0 ]; then mpi_flags+=(--allow-run-as-root); fi

echo
echo "== record: $ranks ranks of logistic regression (allreduce), a straggler on the last rank,"
echo "   MPI captured by the interposer: tracedb record -- mpirun ..."
"$tracedb" record --force -o "$out/job.tdb" -- \
  mpirun "${mpi_flags[@]}" -np "$ranks" \
  "$root/build/examples/logreg_mpi" --steps "$steps" --straggler-ms 15
"$tracedb" info "$out/job.tdb"

q() {
  echo
  echo "-- $1"
  "$tracedb" query "$out/job.tdb" "$2"
}
q "The 10 slowest COMMUNICATE phases, and on which rank and tensor" \
  "SELECT rank, lane AS tensor, step, human_duration(dur) AS duration, human_bytes(bytes) AS bytes
   FROM events WHERE name = 'COMMUNICATE' ORDER BY dur DESC LIMIT 10"
q "Per rank: compute vs communication (and how much communication hid behind compute)" \
  "SELECT rank, human_duration(compute_ns) AS compute, human_duration(comm_ns) AS comm,
          human_duration(overlap_ns) AS overlapped, human_duration(wall_ns) AS wall
   FROM rank_time_split ORDER BY rank"
q "Per rank and phase: count, mean and tail latency" \
  "SELECT rank, name, count, human_duration(mean_ns) AS mean, human_duration(p99_ns) AS p99,
          human_duration(max_ns) AS max
   FROM span_stats WHERE name IN ('forward', 'backward', 'COMMUNICATE') ORDER BY name, rank"
q "The slowest steps" \
  "SELECT step, ranks, human_duration(max_ns) AS slowest, human_duration(mean_ns) AS mean
   FROM step_summary ORDER BY max_ns DESC LIMIT 5"
q "The MPI calls during the slowest COMMUNICATE phase (the interposer's events)" \
  "SELECT c.rank, c.name, human_bytes(c.bytes) AS bytes, human_duration(c.dur) AS duration,
          c.comm, c.seq
   FROM (SELECT rank, ts, end_ts FROM events WHERE name = 'COMMUNICATE'
         ORDER BY dur DESC LIMIT 1) p
   JOIN events c ON c.rank = p.rank AND c.cat = 'mpi' AND c.ts >= p.ts AND c.end_ts <= p.end_ts"

echo
echo "== stragglers: which rank arrives last to each collective (matched by communicator and seq)"
"$tracedb" report stragglers "$out/job.tdb" -n 5

echo
echo "== the MPI report, as IBM mpitrace prints it (first 45 lines)"
"$tracedb" report mpi "$out/job.tdb" > "$out/mpi-report.txt"
head -n 45 "$out/mpi-report.txt"
echo "(the whole report: $out/mpi-report.txt)"

echo
echo "== Chrome trace JSON for chrome://tracing, Perfetto UI or speedscope (steps 10 to 20)"
"$tracedb" export --chrome "$out/job.tdb" -o "$out/job.json" --from step:10 --to step:20
"$tracedb" export --chrome "$out/job.tdb" -o "$out/job-all.json.gz"

echo
echo "== the same database in the stock sqlite3, with the tracedb extension loaded"
sqlite3 "$out/job.tdb" "PRAGMA integrity_check;" ".load $root/build/libtracedb_sqlite" \
  "SELECT count(*) AS events, count(DISTINCT rank) AS ranks FROM events;"

# ---- PyTorch: the same questions for a DDP job recorded with no code change ----
py=/usr/bin/python3
if [ "$have_python" = 1 ] && "$py" -c "import torch.distributed" 2>/dev/null; then
  echo
  echo "== record: DDP over gloo, $ranks ranks, a small MLP on synthetic data (examples/ddp_train.py),"
  echo "   no code change: tracedb record -- mpirun ... $py examples/ddp_train.py"
  "$tracedb" record --force -o "$out/ddp.tdb" -- \
    mpirun "${mpi_flags[@]}" -np "$ranks" "$py" "$root/examples/ddp_train.py" --steps 30 \
    --straggler-ms 5
  q2() {
    echo
    echo "-- $1"
    "$tracedb" query "$out/ddp.tdb" "$2"
  }
  q2 "The slowest gradient allreduce buckets (DDP's Reducer, seen by the RecordFunction observer)" \
    "SELECT rank, step, seq, human_bytes(bytes) AS bucket, human_duration(dur) AS duration
     FROM events WHERE name = 'gloo:all_reduce' AND step IS NOT NULL ORDER BY dur DESC LIMIT 8"
  q2 "Per step phase: forward, backward, optimizer (mean over ranks and steps)" \
    "SELECT name, count(*) AS n, human_duration(avg(dur)) AS mean, human_duration(max(dur)) AS max
     FROM events WHERE cat = 'compute' GROUP BY name ORDER BY avg(dur) DESC"
  q2 "Stragglers: per collective (comm, seq), who arrived last and how late" \
    "SELECT seq, min(name) AS name, count(*) AS ranks,
            (SELECT rank FROM events l WHERE l.cat = 'comm' AND l.comm = e.comm AND l.seq = e.seq
             ORDER BY l.ts DESC LIMIT 1) AS last_rank,
            human_duration(max(ts) - min(ts)) AS skew
     FROM events e WHERE cat = 'comm' AND seq IS NOT NULL
     GROUP BY comm, seq ORDER BY max(ts) - min(ts) DESC LIMIT 8"
  echo
  echo "-- The same trace in pandas (tracedb.open(...).events(), decoded from the blocks)"
  PYTHONPATH="$root/build/python" "$py" - "$out/ddp.tdb" <<'PYEOF'
import sys, tracedb
df = tracedb.open(sys.argv[1]).events(where={"cat": "comm"})
print(df.groupby(["name", "rank"], observed=True)["dur"].agg(["count", "mean", "max"]).head(12))
PYEOF
else
  echo
  echo "(PyTorch part skipped: $py has no torch.distributed, or the Python package is not built)"
fi

echo
echo "done: $out/job.tdb (try: $tracedb shell $out/job.tdb)"
echo "browse it: $tracedb view $out/job.tdb   (prints a 127.0.0.1 URL with its token; docs/view.md)"
