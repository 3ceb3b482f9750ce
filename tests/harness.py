"""What the Python end-to-end tests share (flight_test, hang_test, record_stop_test, torch_test):
failures collected rather than raised (every check of a run is reported), `tracedb query` and
`tracedb report hang` read back, and the end of a run (its files kept when something failed).
Each test imports it from its own folder (tests/, the script's directory on sys.path)."""

import csv
import io
import json
import shutil
import subprocess

FAILURES = []


def check(cond, what):
    """Records `what` as a failure when `cond` is false; returns cond."""
    if not cond:
        FAILURES.append(what)
        print("FAIL: " + what, flush=True)
    return cond


def query(args, db, sql, timeout=120):
    """The rows of `sql` on `db` through `tracedb query` (args.tracedb), as dicts; [] (and a
    failure) when the command fails."""
    out = subprocess.run([args.tracedb, "query", db, sql, "-f", "csv"], capture_output=True,
                         text=True, timeout=timeout)
    if not check(out.returncode == 0, "query failed: %s: %s" % (sql, out.stderr)):
        return []
    return list(csv.DictReader(io.StringIO(out.stdout)))


def hang_report(args, path):
    """`tracedb report hang -f json PATH` (a database or a live segment directory): (the report,
    "") or (None, why not)."""
    out = subprocess.run([args.tracedb, "report", "hang", "-f", "json", path],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        return None, out.stderr
    try:
        return json.loads(out.stdout), ""
    except ValueError as e:
        return None, "not JSON (%s): %s" % (e, out.stdout[:300])


def clean_up(work):
    """Removes the run's scratch folder unless something failed (then it is kept to look at)."""
    if not FAILURES:
        shutil.rmtree(work, ignore_errors=True)


def verdict(work):
    """The exit code of the run, after saying how it went."""
    if FAILURES:
        print("%d failure(s); files kept in %s" % (len(FAILURES), work))
        return 1
    print("passed")
    return 0
