#!/usr/bin/env bash
# NCCL profiler plugin benchmark: the plugin's cost per event in the dlopen harness, beside the
# recorder's own span and two clock reads, in one run (docs/bench-nccl.md).
# Usage: bench/run_nccl_plugin_bench.sh [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
reps=${1:-9}
cmake -S "$root" -B "$root/build-bench" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRACEDB_TESTS=OFF >/dev/null
cmake --build "$root/build-bench" --target nccl_plugin_bench tracedb_nccl_profiler >/dev/null
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
"$root/build-bench/bench/nccl_plugin_bench" \
  "$root/build-bench/recorder/nccl/libnccl-profiler-tracedb.so" --reps "$reps"
