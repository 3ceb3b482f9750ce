#!/usr/bin/env bash
# Recorder benchmark with its peers, side by side in one run: tracedb (recorder_bench, which also
# runs the Horovod-style writer, and the burst at 512, 64 and 4 MiB budgets) and LTTng-UST 2.13
# (lttng_bench under a real LTTng session).
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

if [ -x "$root/build-bench/bench/lttng_bench" ] && command -v lttng >/dev/null; then
  pgrep -x lttng-sessiond >/dev/null || lttng-sessiond --daemonize --no-kernel >/dev/null 2>&1
  out=$(mktemp -d)
  session="tracedb-bench-$$"
  lttng create "$session" --output="$out" >/dev/null
  lttng enable-event --userspace 'tracedb_bench:*' >/dev/null
  lttng start >/dev/null
  result=$("$root/build-bench/bench/lttng_bench" "$reps" 1000000)
  lttng stop >/dev/null
  lttng destroy "$session" >/dev/null
  span=$(echo "$result" | awk '/lttng_span_ns/ {print $2}')
  events=$(echo "$result" | awk '/lttng_events/ {print $2}')
  bytes=$(du -sb "$out" | cut -f1)
  rm -rf "$out"
  version=$(lttng --version | grep -o '[0-9]*\.[0-9]*\.[0-9]*' | head -n 1)
  echo
  echo "peer: LTTng-UST $version, span (2 tracepoints) while recording: $span ns"
  awk -v b="$bytes" -v e="$events" 'BEGIN { printf "peer: LTTng-UST bytes per event on disk: %.2f B\n", b / e }'
  awk -v l="$span" -v o="$ours_span" -v b="$bytes" -v e="$events" -v ob="$ours_bpe" 'BEGIN {
    printf "  LTTng-UST span / tracedb span         %6.1fx   (target >= 5x)\n", l / o
    printf "  LTTng-UST bytes / tracedb bytes       %6.1fx   per event\n", (b / e) / ob }'
else
  echo
  echo "LTTng-UST not available: its figures are not measured in this run"
fi
