#!/bin/bash
# Page size and load time of `tracedb report html` on a generated job (tests/report_job_gen.cc),
# against the 2 s target of docs/report.md. Prints the generation time of the page, its size, and
# per run the time headless Chromium takes to load and render it (--dump-dom wall time) and the
# page's own script time; medians of RUNS runs. The peer: the same load of a blank page (the
# browser's own start-up), so that the page's cost is the difference. The machine may be shared:
# quote medians. The generation and the page's writing print their CPU time (user + sys) beside the
# wall time: on a loaded machine the CPU time is the figure to quote.
# Usage: bench/report_html_bench.sh BUILD_DIR RANKS STEPS LAYERS [RUNS] [WORKDIR]
#   events = RANKS * STEPS * (2 * LAYERS + 6); 8 ranks x 11792 steps x 50 layers = 10.0M
set -euo pipefail
build=$1 ranks=$2 steps=$3 layers=$4 runs=${5:-3} work=${6:-$(mktemp -d)}
mkdir -p "$work"
db=$work/job.tdb page=$work/job.html
chromium=${CHROMIUM:-/usr/bin/chromium}
t0=$(date +%s.%N)
/usr/bin/time -f "generate: %e s wall, %U s user + %S s sys CPU, %M KiB peak" \
  "$build/tests/report_job_gen" "$db" "$ranks" "$steps" "$layers" --straggler 3=1.1 --spike 100=3
t1=$(date +%s.%N)
/usr/bin/time -f "report html: %e s wall, %U s user + %S s sys CPU, %M KiB peak" "$build/tracedb" report html "$db" -o "$page"
t2=$(date +%s.%N)
echo "db: $(stat -c %s "$db") bytes; generated in $(echo "$t1 - $t0" | bc) s"
echo "page: $(stat -c %s "$page") bytes; written in $(echo "$t2 - $t1" | bc) s"
echo '<!DOCTYPE html><html><body><p>blank</p></body></html>' > "$work/blank.html"
blanks=() loads=() scripts=()
for i in $(seq "$runs"); do
  s=$(date +%s.%N)
  "$chromium" --headless --no-sandbox --disable-gpu --user-data-dir="$work/profile" \
    --virtual-time-budget=10000 --dump-dom "file://$work/blank.html" >/dev/null 2>&1
  e=$(date +%s.%N)
  blanks+=("$(echo "$e - $s" | bc)")
  s=$(date +%s.%N)
  dom=$("$chromium" --headless --no-sandbox --disable-gpu --user-data-dir="$work/profile" \
        --virtual-time-budget=10000 --dump-dom "file://$page" 2>/dev/null)
  e=$(date +%s.%N)
  loads+=("$(echo "$e - $s" | bc)")
  scripts+=("$(echo "$dom" | grep -o '"render_ms":[0-9.]*' | cut -d: -f2)")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ml=$(median "${loads[@]}") ms=$(median "${scripts[@]}") mb=$(median "${blanks[@]}")
echo "chromium, blank page (process start to DOM dump): ${blanks[*]} s; median $mb s"
echo "chromium load+render (process start to DOM dump): ${loads[*]} s; median $ml s"
echo "the page's own cost: $(echo "$ml - $mb" | bc) s; ratio to the blank page: $(echo "scale=3; $ml / $mb" | bc)"
echo "page script (parse data + draw every plot): ${scripts[*]} ms; median $ms ms"
echo "ratio of the page's own cost to the 2 s target: $(echo "scale=3; ($ml - $mb) / 2" | bc)"
