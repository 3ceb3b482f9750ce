#!/usr/bin/env bash
# Archival soak: a long job recorded with the real recorder (tests/soak_program; one step stands
# for one second of a training job) into 1 MiB rotating segment files, `tracedb compact --watch
# --delete-compacted` following it, and `tracedb archive --keep-steps K` applied every few
# seconds. Samples every second: the segment directory's bytes, the database's bytes, the
# recorder's RSS. Checks at the end, and exits 1 when one fails:
#   - disk: segment dir + database (+ journal) never above --disk-bound-mb;
#   - recorder memory: RSS in the second half of the run at most --rss-growth-kb above the
#     highest RSS of the first half (after a warm-up of 10% of the run);
#   - nothing lost: the database's whole-job summaries (name_summary, steps) count every event
#     and step the program says it emitted; the events kept are those of the last K steps;
#   - compaction time follows new data: per --watch pass, seconds per million new events, first
#     quarter of the passes vs last quarter (printed; checked against --pass-ratio-max).
# Usage: bench/archive_soak.sh [--steps N] [--spans N] [--pause-us N] [--keep-steps K]
#          [--archive-every S] [--disk-bound-mb N] [--rss-growth-kb N] [--pass-ratio-max R]
#          [--out DIR]
# Binaries: $TRACEDB_BIN (default build/tracedb), $SOAK_PROGRAM (build/tests/soak_program),
# $PYTHON3 (default python3, for the checks).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=36000 spans=200 pause_us=2000 keep=3600 every=10 bound_mb=64 rss_kb=1024 ratio=4
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --spans) spans=$2; shift 2 ;;
    --pause-us) pause_us=$2; shift 2 ;;
    --keep-steps) keep=$2; shift 2 ;;
    --archive-every) every=$2; shift 2 ;;
    --disk-bound-mb) bound_mb=$2; shift 2 ;;
    --rss-growth-kb) rss_kb=$2; shift 2 ;;
    --pass-ratio-max) ratio=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "archive_soak.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
bin=${TRACEDB_BIN:-$root/build/tracedb}
prog=${SOAK_PROGRAM:-$root/build/tests/soak_program}
for f in "$bin" "$prog"; do
  [ -x "$f" ] || { echo "archive_soak.sh: $f: not built (ninja -C build tracedb_cli soak_program)" >&2; exit 2; }
done
work=${out:-$(mktemp -d /tmp/tracedb-soak.XXXXXX)}
mkdir -p "$work"
rm -rf "$work/trace" "$work/job.tdb" "$work/job.tdb-journal"
cleanup() {
  for p in ${rec_pid:-} ${cmp_pid:-}; do pkill -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  [ -z "$out" ] && rm -rf "$work"
  return 0
}
trap cleanup EXIT

echo "archive soak: $steps steps x $spans spans (one step = 1 s of job: $((steps / 3600)) h $(((steps % 3600) / 60)) min simulated), keep the last $keep steps, archive every ${every} s"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start (shared)"
TRACEDB_SEGMENT_MB=1 TRACEDB_FLUSH_MS=200 "$prog" "$work/trace" "$steps" "$spans" "$pause_us" \
  >"$work/program.out" 2>"$work/program.err" &
rec_pid=$!
for _ in $(seq 100); do [ -d "$work/trace" ] && break; sleep 0.05; done
# CPU time (user + system) and peak RSS of the compactor and of every archive run: the machine
# is shared, so wall times are noisy.
/usr/bin/time -o "$work/compact.time" -f "%U %S %M" \
  "$bin" compact --watch --interval 0.5 --delete-compacted "$work/trace" -o "$work/job.tdb" \
  2>"$work/compact.log" &
cmp_pid=$!

samples="$work/samples.tsv"   # t  seg_bytes  db_bytes  rss_kb
archives="$work/archive.jsonl"
: >"$samples"; : >"$archives"; : >"$work/archive.time"
start=$(date +%s.%N)
last_archive=$start
while kill -0 "$rec_pid" 2>/dev/null; do
  now=$(date +%s.%N)
  seg=$( (du -sb "$work/trace" 2>/dev/null || echo 0) | cut -f1)
  db=$(( $(stat -c %s "$work/job.tdb" 2>/dev/null || echo 0) + $(stat -c %s "$work/job.tdb-journal" 2>/dev/null || echo 0) ))
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$rec_pid/status" 2>/dev/null || echo "")
  [ -n "$rss" ] && printf '%.2f\t%s\t%s\t%s\n' "$(echo "$now - $start" | bc)" "$seg" "$db" "$rss" >>"$samples"
  if [ -f "$work/job.tdb" ] && [ "$(echo "$now - $last_archive >= $every" | bc)" = 1 ]; then
    /usr/bin/time -a -o "$work/archive.time" -f "%U %S %M" \
      "$bin" archive "$work/job.tdb" --keep-steps "$keep" -f json >>"$archives" 2>>"$work/archive.err" || {
      echo "archive_soak.sh: archive failed: $(tail -1 "$work/archive.err")" >&2; exit 1; }
    last_archive=$(date +%s.%N)
  fi
  sleep 1
done
wait "$rec_pid" || { echo "archive_soak.sh: the recording program failed: $(cat "$work/program.err")" >&2; exit 1; }
wait "$cmp_pid" || { echo "archive_soak.sh: compact --watch failed: $(tail -3 "$work/compact.log")" >&2; exit 1; }
cmp_pid=""
"$bin" archive "$work/job.tdb" --keep-steps "$keep" -f json >>"$archives"
seg=$(du -sb "$work/trace" | cut -f1)
db=$(wc -c <"$work/job.tdb")
printf '%.2f\t%s\t%s\t%s\n' "$(echo "$(date +%s.%N) - $start" | bc)" "$seg" "$db" 0 >>"$samples"
wall=$(echo "$(date +%s.%N) - $start" | bc)

q() { "$bin" query "$work/job.tdb" -f csv "$1" | tail -n +2; }
summary_events=$(q "SELECT sum(count) FROM name_summary")
summary_steps=$(q "SELECT count(DISTINCT step) FROM steps")
kept_events=$(q "SELECT count(*) FROM events")
kept_min_step=$(q "SELECT min(step) FROM events")
left_files=$(find "$work/trace" -name '*.tds' | wc -l)
deleted=$(q "SELECT coalesce(sum(value), 0) FROM stats WHERE name = 'deleted_segment_files'")
integrity=$(q "PRAGMA integrity_check")
# What the database holds besides the kept blocks (sqlite3's dbstat, when the program is there).
if command -v sqlite3 >/dev/null; then
  echo "database pages by table (bytes): $(sqlite3 "$work/job.tdb" "SELECT group_concat(name || ' ' || b, ', ') FROM (SELECT name, sum(pgsize) AS b FROM dbstat GROUP BY name ORDER BY b DESC LIMIT 4)")"
fi

"${PYTHON3:-python3}" - "$work" "$steps" "$spans" "$keep" "$bound_mb" "$rss_kb" "$ratio" "$wall" \
  "$summary_events" "$summary_steps" "$kept_events" "$kept_min_step" "$left_files" "$deleted" \
  "$integrity" <<'PY'
import json, re, statistics, sys
(work, steps, spans, keep, bound_mb, rss_kb, ratio, wall, summary_events, summary_steps,
 kept_events, kept_min_step, left_files, deleted, integrity) = sys.argv[1:]
steps, spans, keep, bound_mb, rss_kb = int(steps), int(spans), int(keep), float(bound_mb), int(rss_kb)
ratio, wall = float(ratio), float(wall)
emitted = dict(l.split() for l in open(work + "/program.out") if l.strip())
failures = []
rows = [l.split("\t") for l in open(work + "/samples.tsv") if l.strip()]
disk = [(float(t), int(s) + int(d)) for t, s, d, _ in rows]
rss = [(float(t), int(r)) for t, _, _, r in rows if int(r) > 0]
peak_disk = max(b for _, b in disk)
print(f"samples: {len(rows)} over {wall:.0f} s of wall time")
print(f"disk (segment dir + database): peak {peak_disk / 1e6:.1f} MB, final "
      f"{disk[-1][1] / 1e6:.1f} MB (bound {bound_mb:g} MB)")
if peak_disk > bound_mb * 1e6:
    failures.append(f"disk peaked at {peak_disk / 1e6:.1f} MB > {bound_mb:g} MB")
# Per tenth of the run: peak disk, peak RSS.
n = len(rows)
print("tenth of run  peak disk MB  peak RSS KiB")
for i in range(10):
    part = rows[i * n // 10:(i + 1) * n // 10] or rows[-1:]
    print(f"{i + 1:>11}  {max(int(s) + int(d) for _, s, d, _ in part) / 1e6:>12.1f}  "
          f"{max([int(r) for *_, r in part] + [0]):>12}")
if len(rss) >= 4:
    t_end = rss[-1][0]
    warm = [r for t, r in rss if 0.1 * t_end <= t <= 0.5 * t_end] or [rss[0][1]]
    late = [r for t, r in rss if t > 0.5 * t_end] or [rss[-1][1]]
    growth = max(late) - max(warm)
    print(f"recorder RSS: first half (after warm-up) max {max(warm)} KiB, second half max "
          f"{max(late)} KiB: growth {growth} KiB (allowed {rss_kb})")
    if growth > rss_kb:
        failures.append(f"recorder RSS grew by {growth} KiB > {rss_kb}")
else:
    failures.append("too few RSS samples (run longer)")
passes = []
for l in open(work + "/compact.log"):
    m = re.match(r"\r?\+([\d,]+) rows \(([\d,]+) segment events\) in ([\d.]+) s", l.strip("\r\n"))
    if m:
        passes.append((int(m.group(2).replace(",", "")), float(m.group(3))))
print(f"compact --watch passes with new data: {len(passes)}; new events per pass: median "
      f"{statistics.median([e for e, _ in passes]) if passes else 0:,.0f}")
if len(passes) >= 8:
    q = len(passes) // 4
    def rate(ps):  # seconds per million new events, over the passes' totals
        return sum(t for _, t in ps) / max(1, sum(e for e, _ in ps)) * 1e6
    first, last = rate(passes[:q]), rate(passes[-q:])
    print(f"compaction time per million new events: first quarter of passes {first:.3f} s, "
          f"last quarter {last:.3f} s (ratio {last / first if first else 0:.2f}, allowed {ratio:g})")
    if first > 0 and last / first > ratio:
        failures.append(f"compaction per new event got {last / first:.2f}x slower")
cu, cs, cm = open(work + "/compact.time").read().split()[-3:]
cpu = float(cu) + float(cs)
total_new = sum(e for e, _ in passes)
print(f"compactor CPU: {cpu:.1f} s user+sys for {total_new:,} segment events "
      f"({cpu / max(1, total_new) * 1e6:.3f} s per million), peak RSS {int(cm) // 1024} MiB")
at = [l.split() for l in open(work + "/archive.time") if re.match(r"^[\d.]+ [\d.]+ \d+$", l.strip())]
if at:
    acpu = [float(u) + float(s) for u, s, _ in at]
    print(f"archive CPU per run: median {statistics.median(acpu):.2f} s, max {max(acpu):.2f} s "
          f"({len(at)} runs), peak RSS {max(int(m) for *_, m in at) // 1024} MiB")
archives = [json.loads(l) for l in open(work + "/archive.jsonl") if l.strip()]
dropped = sum(a["events_dropped"] for a in archives)
print(f"archive runs: {len(archives)}, events dropped in all {dropped:,}; segment files deleted "
      f"by compact: {deleted}, left: {left_files}")
if archives:
    a = archives[-1]
    print(f"last archive: {a['events_after']:,} events kept; file {a['file_bytes_before']:,} -> "
          f"{a['file_bytes_after']:,} bytes")
want_events = int(emitted["events"])
print(f"events emitted {want_events:,} (dropped by the recorder: {emitted['dropped']}); "
      f"name_summary counts {summary_events}; steps {summary_steps} of {steps}")
print(f"events kept {kept_events} from step {kept_min_step} (last {keep} steps: "
      f"{keep * spans:,} events)")
if int(summary_events) + int(emitted["dropped"]) != want_events:
    failures.append(f"name_summary counts {summary_events}, the program emitted {want_events}")
if int(summary_steps) != steps:
    failures.append(f"steps table holds {summary_steps} steps of {steps}")
if int(kept_events) < keep * spans or int(kept_min_step) > steps - keep:
    failures.append(f"the last {keep} steps are not all kept")
if int(left_files) != 0:
    failures.append(f"{left_files} segment files left after the job ended")
if integrity.strip() != "ok":
    failures.append(f"integrity_check: {integrity}")
for f in failures:
    print("FAIL:", f)
print("PASS" if not failures else "FAILED")
sys.exit(1 if failures else 0)
PY
