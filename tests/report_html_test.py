#!/usr/bin/env python3
"""Test of `tracedb report html` (docs/report.md "Testing").

1. Generates two runs (tests/report_job_gen.cc): a baseline, and a run with a straggler rank,
   an outlier step, a slower backward pass and drop counts.
2. Writes the report of the second with the first as baseline, and checks every number the page
   embeds against SQL run by `tracedb query` over the same database (the built-in views and
   plain tables), and that the page loads nothing from the network.
3. Renders the page in headless Chromium: the page's own layout record (--dump-dom) says where
   each plot is; a screenshot is decoded (a PNG reader below, standard library only) and every
   plot's region must show a picture (pixel variance and several colours), while a margin of the
   page must not (so the check can fail).

Exit 0: passed; 1: failed; 77: Chromium is missing (a skip, except with CI=true where it fails).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL: " + what)


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if r.returncode != 0:
        sys.exit("command failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout,
                                                    r.stderr))
    return r.stdout


def sql(tracedb, db, q):
    return json.loads(run([tracedb, "query", db, q, "--format", "json"]) or "[]")


def page_data(path):
    html = open(path, encoding="utf-8").read()
    m = re.search(r'<script id="tracedb-data" type="application/json">(.*?)</script>', html, re.S)
    if not m:
        sys.exit("no data element in " + path)
    return html, json.loads(m.group(1))


def read_png(path):
    """Decodes an 8-bit RGB/RGBA non-interlaced PNG into (width, height, channels, rows)."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(path + ": not a PNG")
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    w, h, depth, ctype, _, _, interlace = ihdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        sys.exit("%s: unsupported PNG (depth %d, colour type %d)" % (path, depth, ctype))
    ch = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * ch
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b = prev[i]
            c = prev[i - ch] if i >= ch else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pr) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, ch, rows


def region_stats(img, x, y, w, h):
    """Luminance variance and the number of distinct colours in a rectangle (every 2nd pixel)."""
    iw, ih, ch, rows = img
    x0, y0 = max(0, int(x) + 2), max(0, int(y) + 2)
    x1, y1 = min(iw, int(x + w) - 2), min(ih, int(y + h) - 2)
    n = s = s2 = 0
    colours = set()
    for yy in range(y0, y1, 2):
        row = rows[yy]
        for xx in range(x0, x1, 2):
            r, g, b = row[xx * ch], row[xx * ch + 1], row[xx * ch + 2]
            lum = 0.299 * r + 0.587 * g + 0.114 * b
            n += 1
            s += lum
            s2 += lum * lum
            colours.add((r >> 3, g >> 3, b >> 3))
    if n == 0:
        return 0.0, 0
    mean = s / n
    return s2 / n - mean * mean, len(colours)


def find_chromium():
    for c in (os.environ.get("CHROMIUM", ""), "/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if c and os.access(c, os.X_OK):
            return c
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracedb", required=True)
    ap.add_argument("--gen", required=True)
    ap.add_argument("--tmp", default=None)
    o = ap.parse_args()
    if o.tmp:
        os.makedirs(o.tmp, exist_ok=True)
    work = tempfile.mkdtemp(prefix="report-html-", dir=o.tmp)
    try:
        return test(o, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test(o, work):
    a, b, page = os.path.join(work, "a.tdb"), os.path.join(work, "b.tdb"), os.path.join(work, "r.html")
    run([o.gen, a, "4", "80", "4", "--seed", "1"])
    run([o.gen, b, "4", "80", "4", "--seed", "2", "--straggler", "2=1.2", "--spike", "40=3",
         "--slow", "backward=1.3", "--dropped", "7"])
    # Two baselines (the same run twice): the comparison is with the last, the trend has 3 runs.
    run([o.tracedb, "report", "html", b, "-o", page, "--baseline", a, a])
    html, d = page_data(page)
    T = o.tracedb

    # Nothing from the network: no external src/href, no <link>, no script or image by URL.
    check(not re.search(r'(src|href)\s*=\s*["\']?\s*(https?:)?//', html, re.I), "external URL")
    check("<link" not in html.lower() and "@import" not in html, "stylesheet link or @import")
    check(len(re.findall(r"<script", html)) == 2, "exactly the data and code scripts")

    # Totals.
    check(d["events"] == sql(T, b, "SELECT count(*) AS n FROM events")[0]["n"], "event count")
    check(d["ranks"] == 4, "ranks")
    # Overview: per rank totals are rank_time_split's; the bins add up to them.
    split = {r["rank"]: r for r in sql(T, b, "SELECT * FROM rank_time_split")}
    check(len(d["overview"]["ranks"]) == 4, "overview ranks")
    for r in d["overview"]["ranks"]:
        ref = split[r["rank"]]
        for k in ("compute_ns", "comm_ns", "wall_ns"):
            check(r[k] == ref[k], "overview rank %d %s: %s != %s" % (r["rank"], k, r[k], ref[k]))
        check(sum(r["compute"]) == r["compute_ns"], "compute bins add up, rank %d" % r["rank"])
        check(sum(r["comm"]) == r["comm_ns"], "comm bins add up, rank %d" % r["rank"])
        check(max(r["busy"]) <= d["overview"]["bin_ns"], "a bin is never more than full")
        check(len(r["compute"]) == d["overview"]["bins"], "bin count")
    # Slowest phases: name_stats_all; the slowest spans: the top 20 by duration.
    names = {n["name"]: n for n in sql(T, b, "SELECT * FROM name_stats_all")}
    check(len(d["names"]) == len(names), "names listed")
    for n in d["names"]:
        ref = names[n["name"]]
        for k in ("count", "total_ns", "p50_ns", "p99_ns"):
            check(n[k] == ref[k], "name %s %s: %s != %s" % (n["name"], k, n[k], ref[k]))
    check([n["total_ns"] for n in d["names"]] == sorted((n["total_ns"] for n in d["names"]),
                                                        reverse=True), "names by total time")
    top = sql(T, b, "SELECT dur FROM events WHERE kind = 'span' ORDER BY dur DESC LIMIT 20")
    check([s["dur"] for s in d["slowest"]] == [t["dur"] for t in top], "slowest spans")
    check(d["slowest"][0]["step"] == 40, "the slowest span is in the spiked step")
    # Stragglers and waits.
    strag = sql(T, b, "SELECT rank, times_last, caused_wait_ns, max_skew_ns FROM stragglers "
                      "ORDER BY caused_wait_ns DESC, rank LIMIT 20")
    check(d["stragglers"] == strag, "stragglers view")
    check(d["stragglers"][0]["rank"] == 2, "rank 2 is the straggler")
    waits = {w["rank"]: w for w in sql(T, b, "SELECT rank, waited_ns FROM collective_wait")}
    for r in d["rank_comm"]:
        check(r["wait_ns"] == waits[r["rank"]]["waited_ns"], "wait of rank %d" % r["rank"])
    check(min(d["rank_comm"], key=lambda r: r["wait_ns"])["rank"] == 2,
          "the straggler waits least")
    # Skew over time: every collective counted once, the maximum kept.
    coll = sql(T, b, "SELECT count(*) AS n, max(skew_ns) AS m FROM collectives WHERE ranks > 1")[0]
    check(sum(p["collectives"] for p in d["skew"]) == coll["n"], "collectives in the skew plot")
    check(max(p["max_ns"] for p in d["skew"]) == coll["m"], "largest skew")
    # Message sizes.
    ms = sql(T, b, "SELECT name, log2_bucket(bytes) AS b, count(*) AS n FROM events "
                   "WHERE bytes > 0 GROUP BY 1, 2 ORDER BY 1, 2")
    flat = [{"name": m["routine"], "b": k, "n": c} for m in d["msgsize"] for k, c in m["buckets"]]
    check(flat == ms, "message size histograms")
    # Steps: step_summary, and the spiked step is the only outlier.
    steps = {s["step"]: s for s in sql(T, b, "SELECT step, max_ns, mean_ns FROM step_summary")}
    check(len(d["steps"]) == 80 and d["steps_grouped"] == 1, "steps")
    for s in d["steps"]:
        ref = steps[s["step"]]
        check(s["max_ns"] == ref["max_ns"] and s["mean_ns"] == ref["mean_ns"],
              "step %d times" % s["step"])
    check([s["step"] for s in d["steps"] if s["outlier"]] == [40], "outlier steps")
    # Clock alignment and the stats table.
    check(d["clock"] == sql(T, b, "SELECT rank, host, clock_method, offset_ns, drift_ppm, "
                                  "uncertainty_ns, sync_points FROM clock_alignment ORDER BY rank"),
          "clock alignment")
    check(d["stats"] == sql(T, b, "SELECT name, rank, value FROM stats ORDER BY name, rank"),
          "stats")
    check({(s["name"], s["rank"], s["value"]) for s in d["stats"]} >= {("dropped", 1, 7)},
          "the injected drops")
    # The comparison section: backward slower and significant, forward not.
    diff = {n["name"]: n for n in d["diff"]["names"]}
    # (+30%, and more from the straggler and the spiked step that B also has.)
    check(diff["backward"]["significant"] and diff["backward"]["mean_change"] > 0.3,
          "backward slower, flagged")
    check(diff["forward"]["a"]["count"] == 320, "forward count in A")
    check(d["diff"]["b"]["stragglers"][0] == 2, "B's straggler")
    # The trend across runs: the baselines then this run; the median step (first step left out)
    # as step_summary gives it.
    tr = d["trend"]["runs"]
    check([r["path"] for r in tr] == [a, a, b], "trend: baselines then this run")
    for path, r in ((a, tr[0]), (b, tr[2])):
        steps = [x["m"] for x in sql(T, path, "SELECT max_ns AS m FROM step_summary ORDER BY step")]
        check(r["step_median_ns"] == statistics.median(steps[1:]),
              "trend: median step of %s (%s, SQL %s)" % (path, r["step_median_ns"],
                                                         statistics.median(steps[1:])))
    names = {n["name"]: n for n in d["trend"]["names"]}
    check("backward" in names and names["backward"]["median_ns"][2] > names["backward"]["median_ns"][0],
          "trend: backward slower in this run")

    # Bad input: one line naming the file, exit 1, no page left behind.
    bad, out = os.path.join(work, "bad.tdb"), os.path.join(work, "bad.html")
    with open(bad, "w") as f:
        f.write("not a database " * 20)
    r = subprocess.run([T, "report", "html", bad, "-o", out], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    check(r.returncode == 1 and "bad.tdb" in r.stderr and r.stderr.count("\n") == 1,
          "corrupt input named: " + r.stderr)
    leftovers = [n for n in os.listdir(work) if n.startswith("bad.html")]
    check(not leftovers, "no page for bad input, no temporary file: %s" % leftovers)
    r = subprocess.run([T, "report", "html", b, "-o", os.path.join(work, "no/such/dir.html")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(r.returncode == 1 and "no/such/dir.html" in r.stderr, "unwritable output: " + r.stderr)

    chromium = find_chromium()
    if chromium is None:
        if os.environ.get("CI") == "true":
            check(False, "headless Chromium is missing (scripts/setup-deps.sh installs chromium)")
        else:
            print("SKIP: headless Chromium is not installed; the page's numbers were checked")
            return 1 if FAILURES else 77
    else:
        render(chromium, page, work, bool(d.get("diff")))
    if FAILURES:
        print("%d checks failed" % len(FAILURES))
        return 1
    print("report html: every check passed")
    return 0


def render(chromium, page, work, with_diff):
    base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--user-data-dir=" + os.path.join(work, "profile"), "--virtual-time-budget=5000"]
    url = "file://" + os.path.abspath(page)
    t0 = time.time()
    dom = run(base + ["--dump-dom", url])
    load_s = time.time() - t0
    m = re.search(r'<pre id="tracedb-layout"[^>]*>(.*?)</pre>', dom, re.S)
    check(m is not None and m.group(1).strip(), "the page ran its script (layout record)")
    if not m or not m.group(1).strip():
        return
    layout = json.loads(m.group(1))
    # The clock table shows offsets relative to the first rank, not raw epoch offsets
    # ("1795773854.226 s" for every rank).
    check("offset vs rank" in dom, "clock table: offset relative to a rank")
    check(re.search(r"<td>\d{9,}\.\d+ s</td>", dom) is None, "clock table: no epoch offset")
    # The generator gives rank r an offset of r us: rank 3 is +3.00 us from rank 0.
    check("<td>+3.00 us</td>" in dom, "clock table: rank 3 at +3.00 us from rank 0")
    print("rendered in %.0f ms in the page; chromium --dump-dom took %.2f s" %
          (layout["render_ms"], load_s))
    plots = {p["plot"]: p for p in layout["plots"]}
    want = ["overview", "slowest", "stragglers", "skew", "msgsize:MPI_Allreduce", "steps", "clock",
            "drops"] + (["diff", "trend-steps", "trend-names"] if with_diff else [])
    for p in want:
        check(p in plots, "plot %s present" % p)
    height = int(layout["height"]) + 40
    shot = os.path.join(work, "shot.png")
    run(base + ["--window-size=1200,%d" % height, "--screenshot=" + shot, url], cwd=work)
    img = read_png(shot)
    for name in want:
        if name not in plots:
            continue
        p = plots[name]
        var, colours = region_stats(img, p["x"], p["y"], p["w"], p["h"])
        print("plot %-24s %4dx%-4d variance %8.1f colours %d" % (name, p["w"], p["h"], var, colours))
        check(var > 100 and colours >= 3, "plot %s is not empty (variance %.1f, %d colours)" %
              (name, var, colours))
    # Control: the right margin of the page is blank, and the check says so.
    var, colours = region_stats(img, 1170, 0, 28, min(height, img[1]))
    check(var < 1 and colours <= 2, "the blank margin reads as empty (variance %.1f)" % var)


if __name__ == "__main__":
    sys.exit(main())
