#!/usr/bin/env bash
# The false-alarm rate of `tracedb check` on this machine (docs/check.md "False alarms"): records
# the unchanged MPI program tests/mpi/check_program.cc RUNS times (`tracedb record -- mpirun -np
# 2`), then checks every run from the (K+1)-th on against the K runs before it, with the default
# thresholds and with none (--alpha 0.01 --min-change 0 --min-abs-ms 0 --between-factor 0: the bare
# within-run test, as tracedb diff flags a change).
# A failing check is followed by the CI recipe of docs/check.md: the run is recorded once more
# and checked again (a failure only when both fail).
# Prints one line per check and a summary: checks that failed, and per name the largest
# |change| and smallest p seen between unchanged runs (what the defaults must stay above).
#   bench/check_false_alarm.sh BUILD [RUNS=20] [K=4] [STEPS=12]
set -euo pipefail
build=$(cd "${1:?usage: check_false_alarm.sh BUILD [RUNS] [K] [STEPS]}" && pwd)
runs=${2:-20}
k=${3:-4}
steps=${4:-12}
tracedb=$build/tracedb
program=$build/tests/mpi/check_program
mpiexec=$(command -v mpiexec || command -v mpirun)
work=$(mktemp -d /tmp/check_false_alarm.XXXXXX)
# Waiting ranks yield the CPU instead of spinning (a shared machine; as tests/mpi/check_cmd_test.py).
export OMPI_MCA_mpi_yield_when_idle=1
trap 'rm -rf "$work"' EXIT
echo "recording $runs unchanged runs of $steps steps (mpirun -np 2) into $work"
for i in $(seq 1 "$runs"); do
  "$tracedb" record -q -o "$work/run$i.tdb" -- "$mpiexec" --oversubscribe --allow-run-as-root \
    -np 2 "$program" --steps "$steps"
done
fails=0
twice=0
bare_fails=0
checks=0
for i in $(seq $((k + 1)) "$runs"); do
  base=()
  for j in $(seq $((i - k)) $((i - 1))); do base+=("$work/run$j.tdb"); done
  rc=0
  "$tracedb" check "$work/run$i.tdb" --baseline "${base[@]}" -f json > "$work/check$i.json" || rc=$?
  [ "$rc" -gt 1 ] && { echo "check failed to run (exit $rc)"; exit 1; }
  if [ "$rc" -eq 1 ]; then
    fails=$((fails + 1))
    # The CI recipe: record the failing run once more and check again; fail only if both fail.
    "$tracedb" record -q -o "$work/again$i.tdb" -- "$mpiexec" --oversubscribe \
      --allow-run-as-root -np 2 "$program" --steps "$steps"
    "$tracedb" check "$work/again$i.tdb" --baseline "${base[@]}" -q > /dev/null && again=0 || again=$?
    [ "$again" -eq 1 ] && twice=$((twice + 1))
    echo "run $i: failed; recorded again: $([ "$again" -eq 1 ] && echo failed again || echo passed)"
  fi
  rc=0
  "$tracedb" check "$work/run$i.tdb" --baseline "${base[@]}" -f json --alpha 0.01 --min-change 0 \
    --min-abs-ms 0 --between-factor 0 > "$work/bare$i.json" || rc=$?
  [ "$rc" -eq 1 ] && bare_fails=$((bare_fails + 1))
  checks=$((checks + 1))
  python3 - "$work/check$i.json" "$i" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("run %s: %s; %s" % (sys.argv[2], "PASS" if d["passed"] else "FAIL",
      ", ".join("%s %+.1f%% p=%.2g" % (c["name"], 100 * c["change"], c["p"]) for c in d["checked"]
                if c["change"] is not None)))
PY
done
python3 - "$work" "$k" "$runs" <<'PY'
import glob, json, sys
work, k, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
worst = {}
for f in sorted(glob.glob(work + "/check*.json")):
    for c in json.load(open(f))["checked"]:
        if c["change"] is None:
            continue
        w = worst.setdefault(c["name"], {"change": 0, "abs": 0, "p": 1, "cv": 0, "ns": c["baseline_ns"]})
        w["change"] = max(w["change"], abs(c["change"]))
        w["abs"] = max(w["abs"], abs(c["abs_change_ns"]))
        w["p"] = min(w["p"], c["p"])
        w["cv"] = max(w["cv"], c["between_cv"])
print("%-16s %12s %12s %12s %10s %12s" % ("name", "baseline", "max |change|", "max |abs|", "min p",
                                          "max run cv"))
for n, w in sorted(worst.items(), key=lambda x: -x[1]["ns"]):
    print("%-16s %10.3f ms %11.1f%% %9.3f ms %10.2g %11.1f%%" %
          (n, w["ns"] / 1e6, 100 * w["change"], w["abs"] / 1e6, w["p"], 100 * w["cv"]))
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "checks: $checks, failed with the defaults: $fails (of which failed again when recorded again: $twice), failed with no thresholds (p < 0.01 only): $bare_fails"
