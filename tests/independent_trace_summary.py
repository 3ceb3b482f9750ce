#!/usr/bin/env python3
"""An independent reading of a trace file, for tracedb's import tests.

Reads a Horovod, BytePS or Kineto (Chrome-JSON) trace with Python's own json module after
repairing the framing (Horovod's old timelines are never closed), matches begin/end events with a
stack per pid (Horovod: ends carry no name and close the innermost open span), and prints, per
(rank, name, kind), the number of rows and the total duration in integer nanoseconds
(microseconds read as Decimal, so fractional digits are exact):

    rank,name_utf8_hex,kind,count,total_dur_ns

Usage: independent_trace_summary.py horovod|byteps|kineto FILE
It shares no code with tracedb; the C++ test compares tracedb's rows with this.
"""
import collections
import decimal
import gzip
import json
import sys


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    text = raw.decode("utf-8", errors="replace").strip()
    if text.startswith("[") and not text.endswith("]"):
        text = text.rstrip().rstrip(",") + "]"  # the old Horovod framing: never closed
    return json.loads(text, parse_float=decimal.Decimal, strict=False)


def ns(v):
    return int(decimal.Decimal(str(v)) * 1000)


def summarize(fmt, doc):
    events = doc if isinstance(doc, list) else doc["traceEvents"]
    rank = 0
    if isinstance(doc, dict):
        info = doc.get("distributedInfo") or {}
        rank = int(info.get("rank", 0))
    out = collections.defaultdict(lambda: [0, 0])

    def add(name, kind, dur):
        out[(rank, name, kind)][0] += 1
        out[(rank, name, kind)][1] += dur

    stacks = collections.defaultdict(list)
    for e in events:
        ph = e.get("ph")
        if ph == "M":
            continue
        if fmt == "horovod":
            pid = e.get("pid")
            if ph == "B":
                stacks[pid].append((e["name"], ns(e["ts"])))
            elif ph == "E":
                if stacks[pid]:
                    name, start = stacks[pid].pop()
                    add(name, "span", ns(e["ts"]) - start)
            elif ph == "X":
                name = e["name"]
                top = stacks[pid][-1][0] if stacks[pid] else ""
                if name.isdigit() and ns(e.get("dur", 0)) == 0 and top.startswith("NEGOTIATE_"):
                    add("RANK_READY", "instant", 0)
                else:
                    add(name, "span", ns(e.get("dur", 0)))
            elif ph in ("i", "I"):
                add(e["name"], "instant", 0)
        else:
            if ph == "X":
                add(e["name"], "span", ns(e.get("dur", 0)))
            elif ph in ("s", "t", "f"):
                add(e["name"], "flow", 0)
            elif ph in ("i", "I"):
                add(e["name"], "instant", 0)
            elif ph in ("B", "E"):
                key = (e.get("pid"), e.get("tid"))
                if ph == "B":
                    stacks[key].append((e["name"], ns(e["ts"])))
                elif stacks[key]:
                    name, start = stacks[key].pop()
                    add(name, "span", ns(e["ts"]) - start)
    return out


def main():
    fmt, path = sys.argv[1], sys.argv[2]
    rows = summarize(fmt, load(path))
    w = sys.stdout
    for (rank, name, kind), (count, total) in sorted(rows.items()):
        w.write("%d,%s,%s,%d,%d\n" % (rank, name.encode("utf-8").hex(), kind, count, total))


if __name__ == "__main__":
    main()
