#!/usr/bin/env bash
# Recorder benchmark with its peers, side by side in one run: tracedb (recorder_bench, which also
# runs the Horovod-style writer, and the burst at 512, 64 and 4 MiB budgets) and LTTng-UST 2.13
# (lttng_bench under a real LTTng session: its span loop for the cost per span, recorder_bench's
# Horovod-like workload event for event for the bytes per event).
# Needs liblttng-ust-dev and lttng-tools for the LTTng part (installed here when root).
# Usage: bench/run_recorder_bench.sh [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
reps=${1:-7}
if [ "$(id -u)" -eq 0 ] && ! dpkg -s liblttng-ust-dev lttng-tools >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq liblttng-ust-dev lttng-tools >/dev/null
fi
cmake -S "$root" -B "$root/build-bench" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRACEDB_TESTS=OFF >/dev/null
cmake --build "$root/build-bench" --target recorder_bench >/dev/null
cmake --build "$root/build-bench" --target lttng_bench >/dev/null 2>&1 || true

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo
ours=$("$root/build-bench/bench/recorder_bench" --reps "$reps")
echo "$ours"
ours_span=$(echo "$ours" | awk '/recording, 1 thread/ {print $(NF-1)}')
ours_bpe=$(echo "$ours" | awk '/segment bytes per event/ {print $(NF-1)}')
# The burst of DESIGN.md (4 threads x 250,000 complete events flat out), one process per budget.
echo
for mb in 512 64 4; do
  "$root/build-bench/bench/recorder_bench" --burst "$mb" --dir "/tmp/tracedb-recorder-burst-$$"
done

# One LTTng session per measure, so that each trace holds only its own events.
lttng_session() {  # OUTDIR EVENT-PATTERN COMMAND...: runs COMMAND under a started session
  local out=$1 pattern=$2 session="tracedb-bench-$$-$RANDOM"
  shift 2
  lttng create "$session" --output="$out" >/dev/null
  lttng enable-event --userspace "$pattern" >/dev/null
  lttng start >/dev/null
  "$@"
  lttng stop >/dev/null
  lttng destroy "$session" >/dev/null
}

if [ -x "$root/build-bench/bench/lttng_bench" ] && command -v lttng >/dev/null; then
  pgrep -x lttng-sessiond >/dev/null || lttng-sessiond --daemonize --no-kernel >/dev/null 2>&1
  # 1. Cost per span: begin/end pairs timed as recorder_bench times its span figure.
  out=$(mktemp -d)
  result=$(lttng_session "$out" 'tracedb_bench:span_*' "$root/build-bench/bench/lttng_bench" "$reps" 1048576)
  span=$(echo "$result" | awk '/lttng_span_ns/ {print $2}')
  loop_events=$(echo "$result" | awk '/lttng_events/ {print $2}')
  loop_bytes=$(du -sb "$out" | cut -f1)
  rm -rf "$out"
  # 2. Bytes per event: the Horovod-like workload of recorder_bench, event for event (16 tensors
  #    x 300 steps, the same phase durations), as tracedb's segment bytes per event.
  out=$(mktemp -d)
  result=$(lttng_session "$out" 'tracedb_bench:phase_*' "$root/build-bench/bench/lttng_bench" --workload 300 16)
  events=$(echo "$result" | awk '/lttng_workload_events/ {print $2}')
  bytes=$(du -sb "$out" | cut -f1)
  meta=$(find "$out" -name metadata -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
  rm -rf "$out"
  version=$(lttng --version | grep -o '[0-9]*\.[0-9]*\.[0-9]*' | head -n 1)
  echo
  echo "peer: LTTng-UST $version, span (2 tracepoints) while recording: $span ns"
  awk -v b="$bytes" -v e="$events" -v m="$meta" 'BEGIN {
    printf "peer: LTTng-UST Horovod-like workload: bytes per event on disk: %.2f B (%d events; %.2f B without the %d-byte metadata file)\n", b / e, e, (b - m) / e, m }'
  awk -v b="$loop_bytes" -v e="$loop_events" 'BEGIN {
    printf "peer: LTTng-UST span loop (not the workload): bytes per event on disk: %.2f B\n", b / e }'
  awk -v l="$span" -v o="$ours_span" -v b="$bytes" -v e="$events" -v ob="$ours_bpe" 'BEGIN {
    printf "  LTTng-UST span / tracedb span         %6.1fx   (target >= 5x)\n", l / o
    printf "  LTTng-UST bytes / tracedb bytes       %6.1fx   per event, same workload\n", (b / e) / ob }'
else
  echo
  echo "LTTng-UST not available: its figures are not measured in this run"
fi
