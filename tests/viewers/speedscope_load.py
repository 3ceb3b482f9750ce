#!/usr/bin/env python3
"""Loads a Chrome trace JSON file in the speedscope viewer, in headless Chromium, and reports
what speedscope's own importer made of it.

Usage: speedscope_load.py --app DIR --chromium BIN FILE

Serves speedscope's built app (DIR, with index.html) and FILE from a loopback HTTP server,
opens index.html#profileURL=/trace/NAME in headless Chromium and dumps the page once speedscope
has imported the file. Prints:
  importer <the importer speedscope chose, from its console log>
  title <the page title: NAME - speedscope once a profile is shown>
  profiles <N: the "(1/N)" of speedscope's thread selector>
  warnings <N: spans speedscope could not nest ("Tried to end ...", "... still open")>
  first <the name speedscope gives the profile on show>
  error <speedscope's error text, if it failed>
Exit status 0 when a profile was shown, 1 otherwise, 2 when Chromium could not run.
"""
import argparse
import html
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--chromium", required=True)
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("file")
    o = ap.parse_args()
    app = os.path.abspath(o.app)
    trace = os.path.abspath(o.file)
    name = os.path.basename(trace)

    class Handler(http.server.SimpleHTTPRequestHandler):
        def translate_path(self, path):
            path = path.split("?", 1)[0].split("#", 1)[0]
            if path == "/trace/" + name:
                return trace
            if path.startswith("/app/"):
                return os.path.join(app, os.path.normpath(path[5:]).lstrip("/"))
            return "/nonexistent"

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    profile_dir = tempfile.mkdtemp(prefix="speedscope-chromium-")
    url = "http://127.0.0.1:%d/app/index.html#profileURL=/trace/%s" % (port, name)
    cmd = [o.chromium, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update", "--no-first-run",
           "--disable-dev-shm-usage", "--user-data-dir=" + profile_dir,
           "--virtual-time-budget=20000", "--enable-logging=stderr", "--v=0", "--dump-dom", url]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=o.timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        print("error chromium did not run: %s" % e)
        return 2
    finally:
        server.shutdown()
        shutil.rmtree(profile_dir, ignore_errors=True)
    dom, log = r.stdout, r.stderr
    m = re.search(r'"(Importing as [^"]*)"', log)
    print("importer %s" % (m.group(1) if m else "-"))
    print("warnings %d" % len(re.findall(r"Tried to end|was still open at end of profile", log)))
    m = re.search(r"<title>([^<]*)</title>", dom)
    title = html.unescape(m.group(1)) if m else ""
    print("title %s" % title)
    # The toolbar names the profile on show: "<span>NAME <span class=...>(1/N)</span>" with a
    # thread selector when there are several, else the bare NAME.
    m = re.search(r"<span>([^<]*?)\s*<span[^>]*>\((\d+)/(\d+)\)</span>", dom)
    if m:
        print("profiles %s" % m.group(3))
        print("first %s" % html.unescape(m.group(1)).strip())
    else:
        m = re.search(r">([^<>]*\(pid -?\d+\)[^<>]*\(tid -?\d+\))<", dom)
        if m:
            print("profiles 1")
            print("first %s" % html.unescape(m.group(1)).strip())
    err = re.search(r"(Something went wrong[^<]*|Unrecognized format[^<]*)", dom)
    if err:
        print("error %s" % err.group(1))
    if r.returncode != 0 and not dom:
        print("error chromium exited with %d: %s" % (r.returncode, log[-500:]))
        return 2
    return 0 if (m and not err and title == name + " - speedscope") else 1


if __name__ == "__main__":
    sys.exit(main())
