#!/usr/bin/env bash
# Compaction of a many-rank job (issue 12 item 4; docs/bench-compaction.md "4,096 ranks").
# For each rank count, tests/scale_job_gen writes the job (8 ranks per node, STEPS steps of
# 26 recorder events per rank, true per-node clocks, the MPI clock sync, 4 stragglers) and
# tests/scale_job_test.py compacts it under RLIMIT_NOFILE=NOFILE, checks rows, clock error per
# rank and `tracedb report stragglers` against the generator, and measures compaction: CPU
# (user + system, wait4), wall, peak RSS, most open files (sampled every ms), DB size.
# Any failed check stops the script. The raw JSON of each size is appended to TMP/results.jsonl.
# Usage: bench/run_scale_bench.sh [RANKS...]      (default: 256 1024 4096)
#   env: BUILD (default build), STEPS (100), NOFILE (32), TMP (/tmp/tracedb-scale-bench),
#        GEN_ARGS (extra generator arguments, e.g. --no-members: no member list for
#        MPI_COMM_WORLD in the COMMS blocks)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
steps=${STEPS:-100}
nofile=${NOFILE:-32}
tmp=${TMP:-/tmp/tracedb-scale-bench}
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(256 1024 4096)
ninja -C "$build" -j2 tracedb_cli scale_job_gen >/dev/null
mkdir -p "$tmp"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf '| ranks | recorder events | rows | compact CPU s | wall s | peak RSS | max open fds (limit) | DB MB | DB B/row | CPU us/rank | worst clock error / stated (sync ranks) | stragglers found | report stragglers wall s |\n'
printf '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|\n'
for r in "${ranks[@]}"; do
  line=$(python3 tests/scale_job_test.py --tracedb "$build/tracedb" --gen "$build/tests/scale_job_gen" \
    --tmp "$tmp" --ranks "$r" --steps "$steps" --nofile "$nofile" \
    $(for a in ${GEN_ARGS:-}; do printf -- '--gen-arg=%s ' "$a"; done))
  echo "$line" >> "$tmp/results.jsonl"  # every figure of the run, clocks per method included
  python3 - "$line" <<'EOF'
import json, sys
d = json.loads(sys.argv[1])
s = d["clock"].get("sync", {})
print(f"| {d['ranks']:,} | {d['segment_events']:,} | {d['rows']:,} | {d['compact_cpu_s']:.2f} | "
      f"{d['compact_wall_s']:.1f} | {d['compact_max_rss_kb'] / 1024:.0f} MiB | "
      f"{d['compact_max_fds']} ({d['nofile_limit']}) | {d['db_bytes'] / 1e6:.1f} | "
      f"{d['db_bytes'] / d['rows']:.2f} | {d['compact_cpu_s'] / d['ranks'] * 1e6:.0f} | "
      f"{s.get('max_error_ns', 0) / 1000:.1f} / {s.get('max_unc_ns', 0) / 1000:.1f} us "
      f"({s.get('max_error_over_unc', 0):.2f}) | {len(d['stragglers'])} of {len(d['stragglers'])} | "
      f"{d['report_stragglers_wall_s']:.1f} |")
EOF
done
