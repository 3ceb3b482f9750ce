#!/usr/bin/env python3
"""Checks files written by `tracedb export --chrome` with real JSON parsers.

Usage: chrome_export_check.py [--expect CSV] [--max-bytes N] [--node] FILE...

Each FILE (a split export passes all its parts, in order; .gz files are decompressed) must be
strict UTF-8 and strict JSON (Python's json module: no NaN, no duplicate keys; with --node also
node's JSON.parse, the parser trace viewers use) of the form
{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}, and every file must stand
alone: the process_name/process_sort_index of each pid and the thread_name/thread_sort_index of
each (pid, tid) it uses, flow events in s/f pairs whose ends sit on events of the same file.
Timestamps must carry at most 3 decimals (exact ns); they count from otherData.ts_origin_ns.

--expect CSV: the output of
  tracedb query DB "SELECT rank, track, name, cat, kind, ts, dur, bytes, peer, tag, comm, seq,
                    flow, value, args FROM events ..." --format csv
The X/i/C events of all files must equal these rows exactly (as a multiset): rank = pid,
track = tid, name, cat, kind, ts and dur to the nanosecond, typed and JSON args.

Prints "files N", "events N", "metadata N", "flows N", one line per flow
("flow CAT NAME s=PID,TID,TS_NS f=PID,TID,TS_NS") and "ok"; on a failure, "FAIL: ..." lines
and exit status 1.
"""
import argparse
import collections
import csv
import decimal
import gzip
import json
import re
import shutil
import subprocess
import sys

D = decimal.Decimal
failures = []


def fail(msg):
    failures.append(msg)
    if len(failures) <= 20:
        print("FAIL: " + msg)


def no_dups(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate keys %r" % keys)
    return dict(pairs)


def reject_constant(name):
    raise ValueError("non-standard JSON constant " + name)


def to_ns(v, what):
    """An exported time (µs, a JSON number) as integer ns, exactly."""
    if isinstance(v, bool) or not isinstance(v, (int, D)):
        fail("%s is not a number: %r" % (what, v))
        return 0
    ns = D(v) * 1000
    if ns != ns.to_integral_value():
        fail("%s %s has more than 3 decimals" % (what, v))
    return int(ns)


def args_key(d):
    return json.dumps(d, sort_keys=True, default=str)


def counter_value(v):
    return "%.12g" % float(v)


def load(path, node):
    raw = open(path, "rb").read()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    text = raw.decode("utf-8")  # strict: the export must be valid UTF-8
    doc = json.loads(text, parse_float=D, parse_constant=reject_constant, object_pairs_hook=no_dups)
    if node:
        script = ("const fs=require('fs'),zlib=require('zlib');let b=fs.readFileSync(process.argv[1]);"
                  "if(process.argv[1].endsWith('.gz'))b=zlib.gunzipSync(b);"
                  "const d=JSON.parse(b.toString('utf8'));"
                  "if(!Array.isArray(d.traceEvents))process.exit(3);")
        r = subprocess.run([node, "-e", script, path], capture_output=True, text=True)
        if r.returncode != 0:
            fail("%s: node JSON.parse failed: %s" % (path, r.stderr.strip()[:300]))
    return doc, len(raw)


def check_file(path, index, doc, size, opts, events, flow_ids, summary):
    if not isinstance(doc, dict) or set(doc) != {"traceEvents", "displayTimeUnit", "otherData"}:
        fail("%s: top level must hold exactly traceEvents, displayTimeUnit, otherData" % path)
        return
    if doc["displayTimeUnit"] != "ns":
        fail("%s: displayTimeUnit %r" % (path, doc["displayTimeUnit"]))
    od = doc["otherData"]
    for k, t in (("tracedb", bool), ("tool_version", str), ("schema_version", int),
                 ("source_db", str), ("filters", dict), ("meta", dict), ("ranks", list),
                 ("part", int), ("events", int), ("job_start_ns", int), ("ts_origin_ns", int)):
        if not isinstance(od.get(k), t):
            fail("%s: otherData.%s missing or not %s" % (path, k, t.__name__))
            return
    origin = od["ts_origin_ns"]
    if od["tracedb"] is not True or od["part"] != index:
        fail("%s: otherData.tracedb/part wrong (part %r, expected %d)" % (path, od["part"], index))
    if opts.max_bytes and size > opts.max_bytes:
        fail("%s: %d bytes of JSON, over the limit %d" % (path, size, opts.max_bytes))
    meta = collections.Counter()
    used_pids, used_threads = set(), set()
    starts = set()  # (pid, tid, ts_ns) of the X/i events in this file
    flows = collections.defaultdict(list)
    n_events = 0
    for e in doc["traceEvents"]:
        if not isinstance(e, dict):
            fail("%s: an event is not an object" % path)
            continue
        ph, pid, tid = e.get("ph"), e.get("pid"), e.get("tid")
        if not isinstance(pid, int) or not isinstance(tid, int) or not isinstance(e.get("name"), str):
            fail("%s: event without integer pid/tid or string name: %r" % (path, e))
            continue
        if "cat" in e and not isinstance(e["cat"], str):
            fail("%s: cat not a string: %r" % (path, e))
        if ph == "M":
            name, a = e["name"], e.get("args", {})
            meta[(name, pid, tid if name.startswith("thread") else None)] += 1
            if name == "process_name":
                m = re.fullmatch(r"rank (-?\d+)( \(.+\))?", a.get("name", ""))
                if not m or int(m.group(1)) != pid:
                    fail("%s: process_name %r for pid %d" % (path, a, pid))
            elif name == "process_sort_index":
                if a.get("sort_index") != pid:
                    fail("%s: process_sort_index %r for pid %d" % (path, a, pid))
            elif name == "thread_name":
                if not isinstance(a.get("name"), str) or not a["name"]:
                    fail("%s: thread_name %r" % (path, a))
            elif name == "thread_sort_index":
                if not isinstance(a.get("sort_index"), int):
                    fail("%s: thread_sort_index %r" % (path, a))
            else:
                fail("%s: unexpected metadata %r" % (path, e))
            continue
        used_pids.add(pid)
        used_threads.add((pid, tid))
        ts = to_ns(e.get("ts"), "ts") + origin
        if ph in ("s", "f"):
            if e.get("cat") != "flow" or not isinstance(e.get("id"), int):
                fail("%s: flow event without cat 'flow' and an integer id: %r" % (path, e))
            if ph == "f" and e.get("bp") != "e":
                fail("%s: f event without bp 'e': %r" % (path, e))
            flows[e.get("id")].append((ph, pid, tid, ts, e["name"]))
            continue
        n_events += 1
        a = e.get("args", {})
        if not isinstance(a, dict) or (("args" in e) and not a):
            fail("%s: args must be a non-empty object when present: %r" % (path, e))
            a = {}
        if ph == "X":
            dur = to_ns(e.get("dur"), "dur")
            if dur < 0:
                fail("%s: negative dur %r" % (path, e))
            key = (pid, tid, e["name"], e.get("cat", ""), "span", ts, dur, args_key(a))
            starts.add((pid, tid, ts))
        elif ph == "i":
            if e.get("s") not in ("t", "g"):
                fail("%s: instant scope %r" % (path, e.get("s")))
            key = (pid, tid, e["name"], e.get("cat", ""), "instant", ts, 0, args_key(a))
            starts.add((pid, tid, ts))
            summary["global_instants"] += e.get("s") == "g"
        elif ph == "C":
            if list(a) != [e["name"]] or isinstance(a[e["name"]], bool) or \
                    not isinstance(a[e["name"]], (int, D)):
                fail("%s: counter args must be {name: number}: %r" % (path, e))
                continue
            key = (pid, tid, e["name"], e.get("cat", ""), "counter", ts, 0,
                   counter_value(a[e["name"]]))
        else:
            fail("%s: unexpected ph %r" % (path, ph))
            continue
        events[key] += 1
    if n_events != od["events"]:
        fail("%s: otherData.events %d, but %d events" % (path, od["events"], n_events))
    for what, n in meta.items():
        if n != 1:
            fail("%s: metadata %r appears %d times" % (path, what, n))
    for pid in used_pids:
        for m in ("process_name", "process_sort_index"):
            if meta[(m, pid, None)] != 1:
                fail("%s: pid %d has no %s in this file" % (path, pid, m))
    for pid, tid in used_threads:
        for m in ("thread_name", "thread_sort_index"):
            if meta[(m, pid, tid)] != 1:
                fail("%s: thread %d/%d has no %s in this file" % (path, pid, tid, m))
    for fid, ends in flows.items():
        if fid in flow_ids:
            fail("%s: flow id %r reused" % (path, fid))
        flow_ids.add(fid)
        phs = sorted(x[0] for x in ends)
        if phs != ["f", "s"]:
            fail("%s: flow %r has ends %r, not one s and one f" % (path, fid, phs))
            continue
        s = next(x for x in ends if x[0] == "s")
        f = next(x for x in ends if x[0] == "f")
        if s[4] != f[4]:
            fail("%s: flow %r ends are named %r and %r" % (path, fid, s[4], f[4]))
        for x in (s, f):
            if (x[1], x[2], x[3]) not in starts:
                fail("%s: flow %r end %r is not at the start of an event of this file" %
                     (path, fid, x))
        cat = "flow"
        summary["flow_lines"].append("flow %s %s s=%d,%d,%d f=%d,%d,%d" %
                                     (cat, s[4], s[1], s[2], s[3], f[1], f[2], f[3]))
    summary["metadata"] += sum(meta.values())


def expected_events(path):
    rows = collections.Counter()
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        for r in csv.DictReader(f):
            kind = r["kind"]
            if kind == "counter":
                key = (int(r["rank"]), int(r["track"]), r["name"], r["cat"], "counter",
                       int(r["ts"]), 0, counter_value(r["value"]))
            else:
                a = {}
                for k in ("bytes", "peer", "tag", "comm", "seq", "flow"):
                    if r[k] != "":
                        a[k] = int(r[k])
                        # SQL shows the unsigned 64-bit arguments as signed integers.
                        if k in ("bytes", "seq", "flow") and a[k] < 0:
                            a[k] += 1 << 64
                if r["args"] != "":
                    try:
                        # strict=False: raw control characters in strings, which the
                        # exporter escapes.
                        j = json.loads(r["args"], parse_float=D, strict=False)
                        if not isinstance(j, dict):
                            raise ValueError
                        a.update(j)
                    except ValueError:
                        a["args_text"] = r["args"]
                key = (int(r["rank"]), int(r["track"]), r["name"], r["cat"],
                       "span" if kind == "span" else "instant", int(r["ts"]),
                       int(r["dur"]) if kind == "span" else 0, args_key(a))
            rows[key] += 1
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--expect")
    ap.add_argument("--max-bytes", type=int, default=0)
    ap.add_argument("--node", action="store_true")
    ap.add_argument("files", nargs="+")
    opts = ap.parse_args()
    node = shutil.which("node") if opts.node else None
    events = collections.Counter()
    flow_ids = set()
    summary = {"metadata": 0, "flow_lines": [], "global_instants": 0}
    for i, path in enumerate(opts.files):
        try:
            doc, size = load(path, node)
        except (OSError, ValueError, EOFError) as e:
            fail("%s: %s" % (path, e))
            continue
        check_file(path, i, doc, size, opts, events, flow_ids, summary)
    if opts.expect:
        want = expected_events(opts.expect)
        missing = want - events
        extra = events - want
        for k in list(missing)[:5]:
            fail("missing or different: %r" % (k,))
        for k in list(extra)[:5]:
            fail("unexpected: %r" % (k,))
        if missing or extra:
            fail("%d expected events missing, %d unexpected" % (sum(missing.values()),
                                                                  sum(extra.values())))
    print("files %d" % len(opts.files))
    print("events %d" % sum(events.values()))
    print("metadata %d" % summary["metadata"])
    print("global_instants %d" % summary["global_instants"])
    print("flows %d" % len(summary["flow_lines"]))
    for line in summary["flow_lines"]:
        print(line)
    if failures:
        print("%d failures" % len(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
