#!/usr/bin/env python3
"""End-to-end test of `tracedb check` and `tracedb runs` (docs/check.md "Testing").

An MPI program with known phases (tests/mpi/check_program.cc: forward 4 ms, backward 12 ms,
optimizer 4 ms of sleep per step, a barrier and one real MPI_Allreduce) is recorded with
`tracedb record -- mpirun -np 2` four times unchanged as the baselines (added to a run history
with `runs add`), then as candidates: once more unchanged (check must pass: no false alarm),
with backward slowed by 40% on every rank (must fail naming backward, and nothing but backward
and the step time), with a 64x larger allreduce (must fail naming MPI_Allreduce, whose change
must be 10x beyond any phase named beside it: the transfer's CPU work can delay the sleeping
phases on 2 cores), and with a new 8 ms phase (must fail naming it as new). A verdict not met is
tried once more with a new recording (the CI recipe of docs/check.md: this machine's load can
slow a whole run), with new baselines too when theirs varied too much to see a 40% change. The
medians check reports are compared with medians computed here from plain SQL on the same
databases; the JUnit XML is parsed with xml.etree; `runs list` must show the command, git
revision and environment that `record` captured. Also: `diff` marks new names and compares the
stragglers' caused wait (against the stragglers view), `report html` with several baselines
carries the trend and sets start-up apart, usage errors and "nothing to compare" exit 2.
Exit 0 passed, 1 failed.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL: " + what)


def run(cmd, env=None, ok=(0,)):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if p.returncode not in ok:
        print("command failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout, p.stderr))
    return p


def sql_per_step(tracedb, db, name, routine=False):
    """The per-step values of `name` (the first step left out): per step, the time in spans of
    that name summed per rank and averaged over the ranks (for a communication routine the least
    over the ranks: docs/check.md "The method"), from plain SQL."""
    out = run([tracedb, "query", db, "-f", "csv",
               "SELECT step, rank, sum(dur) FROM events WHERE kind = 'span' AND name = '%s' "
               "AND step IS NOT NULL GROUP BY step, rank" % name]).stdout.splitlines()[1:]
    per = {}
    for line in out:
        step, _, ns = line.split(",")
        per.setdefault(int(step), []).append(int(ns))
    if not per:
        return []
    first = min(per)
    return [(min(v) if routine else sum(v) / len(v)) for s, v in per.items() if s != first]


def sql_median_per_step(tracedb, db, name, routine=False):
    values = sql_per_step(tracedb, db, name, routine)
    return statistics.median(values) if values else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracedb", required=True)
    ap.add_argument("--program", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--tmp", default=None)
    o = ap.parse_args()
    if o.tmp:
        os.makedirs(o.tmp, exist_ok=True)
    work = tempfile.mkdtemp(prefix="check_cmd_", dir=o.tmp)
    # Waiting ranks yield the CPU rather than spin (a shared, loaded machine).
    # NCCL_DEBUG is kept in record.env, NCCL_AUTH_TOKEN (a secret by its name) must not be.
    env = dict(os.environ, TRACEDB_RUNS=os.path.join(work, "runs.db"),
               OMPI_MCA_mpi_yield_when_idle="1", NCCL_DEBUG="WARN", NCCL_AUTH_TOKEN="s3cret")
    T = o.tracedb

    def record(name, *args):
        db = os.path.join(work, name + ".tdb")
        p = run([T, "record", "-q", "-o", db, "--", o.mpiexec, "--oversubscribe",
                 "--allow-run-as-root", "-np", "2", o.program, "--steps", "12"] + list(args),
                env=env)
        check(p.returncode == 0, "record %s" % name)
        return db

    label = ["base"]  # the baselines' label in the run history (changed when they are redone)

    def check_json(db, *extra):
        p = run([T, "check", db, "--baseline", "runs:" + label[0], "-f", "json"] + list(extra),
                env=env,
                ok=(0, 1))
        try:
            return p.returncode, json.loads(p.stdout)
        except ValueError:
            check(False, "check %s printed JSON" % db)
            return p.returncode, {"regressions": [], "checked": []}

    def attempt(name, args, verdict):
        """Records and checks; when `verdict` (a function of exit code and result returning ""
        or what is wrong) is not met, records once more: the CI recipe of docs/check.md (a run
        fails when it fails twice), since a whole run can be slowed by this machine's load. When
        the baselines themselves varied so much that a 40% change is within their run-to-run
        range (a threshold over 35% for a phase), they are recorded again too."""
        for n in (1, 2):
            if n == 2 and label[0] == "base" and any(c["threshold"] > 0.35 for c in res["checked"]
                              if c["kind"] == "phase" and c["verdict"] != "new"):
                label[0] = "base_again"
                print("the baselines vary too much run to run: recording them again")
                for i in range(4):
                    b = record("base_again%d" % i)
                    run([T, "runs", "add", "-q", b, "--label", label[0]], env=env)
            db = record(name if n == 1 else name + "_again", *args)
            rc, res = check_json(db)
            wrong = verdict(rc, res)
            print("%s (try %d): exit %d, regressions %s%s" %
                  (name, n, rc, sorted(r["name"] for r in res["regressions"]),
                   "; " + wrong if wrong else ""))
            if not wrong:
                return db, rc, res
        check(False, "%s: %s (twice)" % (name, wrong))
        return db, rc, res

    for i in range(4):
        db = record("base%d" % i)
        check(run([T, "runs", "add", db, "--label", "base"], env=env).returncode == 0, "runs add")

    # runs list: four runs with what record captured.
    listed = json.loads(run([T, "runs", "list", "-f", "json"], env=env).stdout)
    check(len(listed) == 4 and all(r["label"] == "base" for r in listed), "runs list: 4 runs")
    check(all(o.program in r["command"] for r in listed), "runs list: the recorded command")
    check(all(r["steps"] == 12 and r["ranks"] == 2 for r in listed), "runs list: steps and ranks")
    git = subprocess.run(["git", "rev-parse", "HEAD"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    if git.returncode == 0:
        check(all(r["git_rev"].startswith(git.stdout.strip()) for r in listed),
              "runs list: the git revision (%s)" % git.stdout.strip())
    for r in listed:
        e = json.loads(r["env"]) if r["env"] else {}
        check(e.get("NCCL_DEBUG") == "WARN" and e.get("OMPI_MCA_mpi_yield_when_idle") == "1",
              "runs list: the recorded environment %s" % r["env"])
        check("s3cret" not in r["env"] and "NCCL_AUTH_TOKEN" not in r["env"],
              "no secret in the recorded environment")
    two = json.loads(run([T, "runs", "list", "-f", "json", "--last", "2"], env=env).stdout)
    check([r["path"] for r in two] == [r["path"] for r in listed[2:]], "runs list --last 2")

    # 1. Unchanged: passes.
    same, rc, res = attempt("same", [], lambda rc, res: "" if rc == 0 and not res["regressions"]
                            else "an unchanged run failed")
    names = {c["name"] for c in res["checked"]}
    check({"step", "forward", "backward", "optimizer", "MPI_Allreduce"} <= names,
          "checked the phases, the collective and the step time (%s)" % sorted(names))
    check(len(res["baselines"]) == 4, "runs:base gives the 4 baselines")
    # Medians against plain SQL.
    for c in res["checked"]:
        if c["name"] in ("forward", "backward", "optimizer", "MPI_Allreduce"):
            want = sql_median_per_step(T, same, c["name"], c["kind"] == "routine")
            check(want is not None and abs(c["run_ns"] - want) <= 1,
                  "%s: run median %s = SQL %s" % (c["name"], c["run_ns"], want))

    # 2. backward 40% slower on every rank: fails naming backward (and the step time) only.
    def names(res):
        return {r["name"] for r in res["regressions"]}
    slow, rc, res = attempt(
        "slow", ["--slow", "backward=1.4"],
        lambda rc, res: "" if rc == 1 and "backward" in names(res) and
        names(res) <= {"backward", "step"} else "not backward (and the step time) only")
    failed = names(res)
    for r in res["regressions"]:
        if r["name"] == "backward":
            # +40% injected: 12 ms of sleep became 16.8 ms. A sleep only overruns, by up to 2 ms
            # per phase under this machine's load (bench/check_false_alarm.sh), so the known
            # answers are bounded from below exactly and from above with that allowance.
            check(12.0e6 <= r["baseline_ns"] <= 16.0e6, "backward baseline %s ns" % r["baseline_ns"])
            check(16.8e6 <= r["run_ns"] <= 20.8e6, "backward slowed %s ns" % r["run_ns"])
            check(abs(r["change"] - (r["run_ns"] / r["baseline_ns"] - 1)) < 1e-9, "change")
            check(r["p"] is not None and r["p"] < 0.01, "backward's p %s" % r["p"])
            check(r["threshold"] >= 0.15, "threshold reported")
            pooled = []
            for b in res["baselines"]:
                pooled += sql_per_step(T, b, "backward")
            check(len(pooled) == r["baseline_values"] and
                  abs(statistics.median(pooled) - r["baseline_ns"]) <= 1,
                  "backward's pooled baseline median %s = SQL %s" %
                  (r["baseline_ns"], statistics.median(pooled) if pooled else None))
            want = sql_median_per_step(T, slow, "backward")
            check(abs(r["run_ns"] - want) <= 1, "backward median %s = SQL %s" % (r["run_ns"], want))

    # JUnit: one test case per checked name, one failure per regression.
    xml_path = os.path.join(work, "slow.xml")
    p = run([T, "check", slow, "--baseline", "runs:" + label[0], "-f", "junit", "-o", xml_path],
            env=env,
            ok=(1,))
    check(p.returncode == 1, "junit: exit 1")
    root = ET.parse(xml_path).getroot()
    cases = root.findall(".//testcase")
    fails = [c.get("name") for c in cases if c.find("failure") is not None]
    check(len(cases) == len(res["checked"]) + len(res["skipped"]),
          "junit: %d test cases for %d checked + %d skipped" %
          (len(cases), len(res["checked"]), len(res["skipped"])))
    check(sorted(fails) == sorted(failed), "junit failures %s = regressions" % fails)
    check(int(root.get("failures")) == len(failed), "junit: failures attribute")

    # 3. A slower collective (1024x the bytes, 64 MB: +20 ms a step here, and still 4-5x the
    # baseline when two busy loops share the 2 cores, where a 16 MB one, +3 ms, is lost in the
    # 12 ms that a 64 KB allreduce then takes; measured, and seen in CI): fails naming
    # MPI_Allreduce, no phase.
    # A larger allreduce burns CPU on this 2-core machine, which can delay the phases' sleeps
    # too (by tens of percent, measured): the collective must be named, and its change must be
    # far (10x) beyond any phase's that is named beside it.
    def coll_verdict(rc, res):
        reg = {r["name"]: r for r in res["regressions"]}
        if rc != 1 or "MPI_Allreduce" not in reg:
            return "the collective not named"
        phases = [r["change"] for r in res["regressions"] if r["kind"] == "phase"]
        if phases and reg["MPI_Allreduce"]["change"] < 10 * max(phases):
            return "a phase slowed as much as the collective"
        return ""
    attempt("coll", ["--allreduce-kb", "65536"], coll_verdict)

    # 4. A new 3 ms phase: fails naming it as new.
    new, rc, res = attempt(
        "new", ["--extra-ms", "8"],
        lambda rc, res: "" if rc == 1 and any(r["name"] == "injected_sleep" and
                                              r["verdict"] == "new" for r in res["regressions"])
        else "the new phase not named as new")

    # diff: new names as such, and the straggler's caused wait.
    d = run([T, "diff", listed[0]["path"], new]).stdout
    check(any("injected_sleep" in l and " new " in l for l in d.splitlines()),
          "diff marks injected_sleep as new")
    check(" caused " in d and "of waiting" in d, "diff compares the straggler's caused wait")
    dj = json.loads(run([T, "diff", listed[0]["path"], new, "-f", "json"]).stdout)
    st = {n["name"]: n["status"] for n in dj["names"]}
    check(st.get("injected_sleep") == "new" and st.get("backward") == "both", "diff JSON status")
    # The stragglers' caused wait in each run, against the stragglers view.
    def caused(db):
        rows = run([T, "query", db, "-f", "csv", "SELECT rank, caused_wait_ns FROM stragglers"])
        return {int(r.split(",")[0]): int(r.split(",")[1]) for r in rows.stdout.split()[1:]}
    ca, cb = caused(listed[0]["path"]), caused(new)
    check(dj["straggler_wait"] and all(w["a_ns"] == ca.get(w["rank"], 0) and
                                       w["b_ns"] == cb.get(w["rank"], 0)
                                       for w in dj["straggler_wait"]),
          "diff: caused wait %s = stragglers view %s / %s" % (dj["straggler_wait"], ca, cb))

    # report html with all the baselines: the trend carries every run, this one last.
    page = os.path.join(work, "report.html")
    p = run([T, "report", "html", new, "-o", page, "--baseline", "runs:" + label[0]], env=env)
    check(p.returncode == 0, "report html --baseline runs:base")
    if p.returncode == 0:
        text = open(page).read()
        blob = text.split('<script id="tracedb-data" type="application/json">')[1].split("</script>")[0]
        data = json.loads(blob)
        check(len(data["trend"]["runs"]) == 5 and data["trend"]["runs"][-1]["path"] == new,
              "trend: 4 baselines and this run")
        tn = {n["name"]: n for n in data["trend"]["names"]}
        check("injected_sleep" in tn and tn["injected_sleep"]["median_ns"][0] is None,
              "trend: the new name has no value in the baselines")
        # Start-up set apart: it covers MPI_Init on every rank, and ends by the end of step 0.
        init_end = int(run([T, "query", new, "-f", "csv", "SELECT max(ts + dur) AS e FROM events "
                            "WHERE name = 'MPI_Init'"]).stdout.split()[1])
        step0_end = int(run([T, "query", new, "-f", "csv", "SELECT max(ts + dur) AS e FROM events "
                             "WHERE step = 0"]).stdout.split()[1])
        su = data["startup"]["end_ns"]
        t0 = data["overview"]["t0"]
        check(su is not None and init_end - t0 <= su <= step0_end - t0,
              "start-up ends after MPI_Init (%s) and by the end of step 0 (%s): %s" %
              (init_end - t0, step0_end - t0, su))
        # Each name's time inside start-up, for the slowest-phases chart's scale: MPI_Init's
        # whole time is there, a training phase's is not (against plain SQL over events).
        sun = data["startup"]["names"]
        init_total = int(run([T, "query", new, "-f", "csv", "SELECT sum(dur) AS s FROM events "
                              "WHERE name = 'MPI_Init'"]).stdout.split()[1])
        bw_total = int(run([T, "query", new, "-f", "csv", "SELECT sum(dur) AS s FROM events "
                            "WHERE name = 'backward'"]).stdout.split()[1])
        check(sun.get("MPI_Init") == init_total, "start-up holds all of MPI_Init: %s of %s" %
              (sun.get("MPI_Init"), init_total))
        check(2 * sun.get("backward", 0) < bw_total, "backward is mostly outside start-up: %s of %s"
              % (sun.get("backward"), bw_total))

    # Usage errors and unreadable inputs: exit 2, naming what is wrong.
    p = run([T, "check", same, "--baseline", "runs:nosuchlabel"], env=env, ok=(2,))
    check(p.returncode == 2 and "nosuchlabel" in p.stderr, "unknown label: exit 2")
    p = run([T, "check", same, "--baseline", os.path.join(work, "missing.tdb")], env=env, ok=(2,))
    check(p.returncode == 2 and "missing.tdb" in p.stderr, "missing baseline: exit 2")
    p = run([T, "check", same, "--baseline", same, "-f", "yaml"], env=env, ok=(2,))
    check(p.returncode == 2, "unknown format: exit 2")
    p = run([T, "check", same], env=env, ok=(2,))
    check(p.returncode == 2, "no baseline: exit 2")
    # Nothing comparable (every name in fewer steps than asked): "could not check", not a pass.
    p = run([T, "check", same, "--baseline", "runs:" + label[0], "--min-steps", "1000"], env=env,
            ok=(2,))
    check(p.returncode == 2 and "nothing to compare" in p.stderr, "nothing tested: exit 2")

    if FAILURES:
        print("%d failures (files kept in %s)" % (len(FAILURES), work))
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
