// The `tracedb view` benchmark's browser half: opens a running `tracedb view` URL in headless
// Chromium (Debian's, through playwright-core) and measures first paint, zoom/pan latency and
// the browser's memory; then loads the same trace, exported as Chrome JSON, in speedscope (the
// viewer of tests/viewers) in a fresh browser and measures the same. Prints one JSON line per
// viewer. Run through bench/run_view_bench.sh (docs/bench-view.md).
// Usage: node view_bench.mjs PLAYWRIGHT_CORE_DIR CHROMIUM VIEW_URL [SPEEDSCOPE_APP JSON_FILE]
import { createRequire } from "node:module";
import { execFileSync } from "node:child_process";
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import os from "node:os";

const [pwDir, chromium, viewUrl, ssApp, jsonFile] = process.argv.slice(2);
const require = createRequire(path.resolve(pwDir) + "/");
const { chromium: launcher } = require(pwDir);
const MARK = `--tracedb-bench=${process.pid}-${Date.now()}`;  // finds the browser's main process
// FLAGS=lean adds flags that cut the fixed cost of headless Chromium without changing what the
// page runs in (no --single-process: the page keeps its own renderer process): one renderer, no
// zygote, no software rasterizer in the GPU process, no background features, and the network
// service in the browser process (as Chrome does on low-memory Android devices).
const LEAN = ["--renderer-process-limit=1", "--no-zygote", "--disable-software-rasterizer",
  "--disable-extensions", "--disable-component-extensions-with-background-pages",
  "--disable-background-networking", "--enable-features=NetworkServiceInProcess",
  "--disable-features=Translate,OptimizationHints,MediaRouter,BackForwardCache,site-per-process",
  "--disable-dev-shm-usage"];
const ARGS = ["--no-sandbox", "--disable-gpu", "--enable-precise-memory-info", MARK]
  .concat(process.env.FLAGS === "lean" ? LEAN : []);
const PROFILE = process.env.PROFILE || "";  // a file: the page's CPU profile (CDP Profiler) goes there
const VIEW_PID = Number(process.env.VIEW_PID || 0);  // the server, for its CPU time

function browserPid() {
  const ps = execFileSync("ps", ["-e", "-o", "pid=,args="]).toString().split("\n");
  for (const l of ps) {
    const m = l.trim().match(/^(\d+)\s+(.*)$/);
    if (m && m[2].includes(MARK) && !m[2].includes("--type=")) return Number(m[1]);
  }
  return -1;
}

// Memory of the browser: the proportional set size (PSS: shared pages split between the
// processes that share them) summed over every process of its tree.
function pssMb(pid) {
  try {
    const m = fs.readFileSync(`/proc/${pid}/smaps_rollup`, "utf8").match(/^Pss:\s+(\d+) kB/m);
    return m ? Number(m[1]) : 0;
  } catch { return 0; }
}
// What Chrome's task manager shows as a process's "Memory footprint" on Linux: its private
// memory (pages no other process maps: Private_Clean + Private_Dirty) plus what of it is swapped
// out, in kB. Unlike PSS it does not move with other browsers sharing the same library pages.
function privateKb(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
    const f = (k) => { const m = s.match(new RegExp(`^${k}:\\s+(\\d+) kB`, "m")); return m ? Number(m[1]) : 0; };
    return f("Private_Clean") + f("Private_Dirty") + f("Swap");
  } catch { return 0; }
}
function treeRssMb(pid) {
  const ps = execFileSync("ps", ["-e", "-o", "pid=,ppid=,rss="]).toString().trim().split("\n")
    .map((l) => l.trim().split(/\s+/).map(Number));
  const kids = new Map();
  for (const [p, pp] of ps) { if (!kids.has(pp)) kids.set(pp, []); kids.get(pp).push(p); }
  const rss = new Map(ps.map(([p, , r]) => [p, r]));
  let total = 0;
  const stack = [pid];
  while (stack.length) { const p = stack.pop(); total += rss.has(p) ? pssMb(p) : 0; stack.push(...(kids.get(p) || [])); }
  return total / 1024;
}
// The processes of the browser's tree with their type (browser, renderer, gpu-process, utility,
// zygote), PSS (kB) and CPU time (user + system, ms) from /proc.
function treeProcs(pid) {
  const ps = execFileSync("ps", ["-e", "-o", "pid=,ppid="]).toString().trim().split("\n")
    .map((l) => l.trim().split(/\s+/).map(Number));
  const kids = new Map();
  for (const [p, pp] of ps) { if (!kids.has(pp)) kids.set(pp, []); kids.get(pp).push(p); }
  const out = [];
  const stack = [pid];
  while (stack.length) {
    const p = stack.pop();
    stack.push(...(kids.get(p) || []));
    try {
      const args = fs.readFileSync(`/proc/${p}/cmdline`, "utf8").split(/[\0 ]/);  // children rewrite theirs
      const t = args.find((a) => a.startsWith("--type="));
      let type = t ? t.slice(7) : "browser";
      if (args.includes("--extension-process")) type = "extension";
      if (args.includes("--top-chrome-webui")) type = "renderer:webui";
      if (type === "utility") {
        const u = args.find((a) => a.startsWith("--utility-sub-type="));
        if (u) type = "utility:" + u.slice(19).split(".").slice(-2).join(".");
      }
      out.push({ pid: p, type, pss_kb: pssMb(p), private_kb: privateKb(p), cpu_ms: cpuMs(p) });
    } catch { /* exited */ }
  }
  return out;
}
function cpuMs(pid) {
  try {
    const f = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const v = f.slice(f.lastIndexOf(")") + 2).split(" ");
    return (Number(v[11]) + Number(v[12])) * 10;  // utime, stime in 1/100 s (CLK_TCK 100)
  } catch { return 0; }
}
const byType = (procs, key) => {
  const m = {};
  for (const p of procs) m[p.type] = (m[p.type] || 0) + p[key];
  return m;
};
const cpuDelta = (a, b) => {
  const m = {};
  for (const p of b) {
    const before = a.find((q) => q.pid === p.pid);
    m[p.type] = (m[p.type] || 0) + p.cpu_ms - (before ? before.cpu_ms : 0);
  }
  return m;
};
const mbByType = (procs, key) =>
  Object.fromEntries(Object.entries(byType(procs, key)).map(([k, v]) => [k, +(v / 1024).toFixed(0)]));
// Memory at one point: PSS and private footprint by process type, each renderer's private
// footprint (the tab's is the largest; Chromium may keep a spare one), and the page's JS heap.
const mb1 = (kb) => +(kb / 1024).toFixed(1);
const sum = (procs, key) => procs.reduce((n, p) => n + p[key], 0);
// tabPid: the renderer of the tab (the one that ran the page); the other renderers are Chromium's
// own UI (--top-chrome-webui, "renderer:webui") and a spare one kept for the next tab.
const memAt = (procs, heapMb, tabPid) => {
  const tab = procs.find((p) => p.pid === tabPid);
  return {
    pss_mb: mbByType(procs, "pss_kb"), private_mb: mbByType(procs, "private_kb"),
    whole_browser_pss_mb: +(sum(procs, "pss_kb") / 1024).toFixed(0),
    whole_browser_private_mb: +(sum(procs, "private_kb") / 1024).toFixed(0),
    tab_private_mb: tab ? mb1(tab.private_kb) : null, tab_pss_mb: tab ? mb1(tab.pss_kb) : null,
    ...(heapMb === undefined ? {} : { js_heap_mb: +heapMb.toFixed(1) }),
  };
};
// The page's renderer: of the tab renderers (not Chromium's UI), the one that worked most.
const tabRenderer = (a, b) => {
  let best = -1, most = -1;
  for (const p of b) {
    if (p.type !== "renderer") continue;
    const before = a.find((q) => q.pid === p.pid);
    const d = p.cpu_ms - (before ? before.cpu_ms : 0);
    if (d > most) { most = d; best = p.pid; }
  }
  return best;
};
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.ceil(p / 100 * s.length) - 1)]; };

async function benchView() {
  const browser = await launcher.launch({ executablePath: chromium, headless: true, args: ARGS });
  const page = await browser.newPage({ viewport: { width: 1600, height: 900 } });
  await page.goto("about:blank");
  await page.waitForTimeout(500);
  const blank = treeRssMb(browserPid());  // the browser itself, before the page
  const blankProcs = treeProcs(browserPid());
  const t0 = Date.now();
  await page.goto(viewUrl);
  await page.waitForFunction(() => window.__tdb && window.__tdb.answered >= 1, null, { timeout: 60000 });
  const firstPaint = Date.now() - t0;
  const paintedProcs = treeProcs(browserPid());  // the page drawn once, before any interaction
  const paintedHeap = await page.evaluate(() => performance.memory.usedJSHeapSize / 1e6);
  // V8's heap as allocated from the system (used + free space it keeps), at each point.
  const heapTotal = () => page.evaluate(() => +(performance.memory.totalJSHeapSize / 1e6).toFixed(1));
  const heapTotals = { first_paint: await heapTotal() };
  await page.focus("#tl");
  await page.waitForTimeout(300);  // flows and late work of the first paint, outside the figures
  let cdp = null;
  if (PROFILE) {
    cdp = await page.context().newCDPSession(page);
    await cdp.send("Profiler.enable");
    await cdp.send("Profiler.setSamplingInterval", { interval: 200 });
    await cdp.send("Profiler.start");
  }
  // TRACE=FILE: a Chromium trace (chrome://tracing, Perfetto) of the interactions, for where the
  // browser's CPU goes beyond JavaScript.
  if (process.env.TRACE) {
    await browser.startTracing(page, { path: process.env.TRACE, categories: ["toplevel", "blink",
      "cc", "viz", "gpu", "v8", "renderer.scheduler", "loading", "netlog", "disabled-by-default-devtools.timeline"] });
  }
  const load0 = os.loadavg()[0];
  const procs0 = treeProcs(browserPid());
  const server0 = VIEW_PID ? cpuMs(VIEW_PID) : 0;
  const wall0 = Date.now();
  // Zoom in step by step into the middle (W), pan (A/D) at several depths, zoom out (S).
  const keys = [];
  for (let i = 0; i < 30; i++) keys.push("w", i % 3 === 0 ? "d" : "a");
  for (let i = 0; i < 30; i++) keys.push("s", i % 2 ? "a" : "d");
  const lat = [], server = [], coarse = [], parts = [];
  const one = (r) => { lat.push(r[0]); server.push(r[1]); coarse.push(r[2]); parts.push(r[4] || {}); };
  if (process.env.LOOP !== "page") {
    // One page.evaluate per key (a DevTools round trip between keys, as a quick user leaves a
    // moment between presses). The answer is waited for through the page's "tdb-settled" event
    // and then the next animation frame, the one that shows it; POLL=raf checks at every frame
    // instead (the earlier way: the same end point).
    const rafPoll = process.env.POLL === "raf";
    for (const k of keys) {
      one(await page.evaluate(async ([key, raf]) => {
        const S = window.__tdb;
        const n = S.answered + S.cancelled + S.errors.length;
        const isDone = () => S.answered + S.cancelled + S.errors.length > n;
        let t = 0;
        await new Promise((resolve) => {
          if (raf) {
            t = performance.now();
            document.getElementById("tl").dispatchEvent(new KeyboardEvent("keydown", { key, bubbles: true }));
            const poll = () => (isDone() ? resolve() : requestAnimationFrame(poll));
            poll();
            return;
          }
          const on = () => {
            if (!isDone()) return;
            window.removeEventListener("tdb-settled", on);
            requestAnimationFrame(() => resolve());
          };
          window.addEventListener("tdb-settled", on);
          t = performance.now();
          document.getElementById("tl").dispatchEvent(new KeyboardEvent("keydown", { key, bubbles: true }));
        });
        return [performance.now() - t, S.win.server_ms, S.win.coarse, S.win.w1 - S.win.base, S.lastParts];
      }, [k, rafPoll]));
    }
  } else {
    // LOOP=page: the keys pressed one after the other inside the page (one evaluate for all of
    // them, no DevTools traffic during the interactions, and no pause between keys), each waited
    // for as above.
    for (const r of await page.evaluate(async (ks) => {
      const S = window.__tdb, out = [];
      for (const key of ks) {
        const n = S.answered + S.cancelled + S.errors.length;
        let t = 0;
        await new Promise((resolve) => {
          const on = () => {
            if (S.answered + S.cancelled + S.errors.length <= n) return;
            window.removeEventListener("tdb-settled", on);
            requestAnimationFrame(() => resolve());
          };
          window.addEventListener("tdb-settled", on);
          t = performance.now();
          document.getElementById("tl").dispatchEvent(new KeyboardEvent("keydown", { key, bubbles: true }));
        });
        out.push([performance.now() - t, S.win.server_ms, S.win.coarse, S.win.w1 - S.win.base, S.lastParts]);
      }
      return out;
    }, keys)) one(r);
  }
  const wallLoop = Date.now() - wall0;
  if (process.env.TRACE) await browser.stopTracing();
  const procs1 = treeProcs(browserPid());
  const serverCpu = VIEW_PID ? cpuMs(VIEW_PID) - server0 : 0;
  const load1 = os.loadavg()[0];
  if (cdp) {
    const { profile } = await cdp.send("Profiler.stop");
    fs.writeFileSync(PROFILE, JSON.stringify(profile));
  }
  const cpu = cpuDelta(procs0, procs1);
  const tabPid = tabRenderer(procs0, procs1);
  const partP = (k, p) => +pct(parts.map((x) => x[k] || 0), p).toFixed(1);
  const errors = await page.evaluate(() => window.__tdb.errors);
  const heap = await page.evaluate(() => performance.memory.usedJSHeapSize / 1e6);
  heapTotals.after_interactions = await heapTotal();
  const rss = treeRssMb(browserPid());
  const endProcs = treeProcs(browserPid());
  // The same after a full garbage collection (CDP HeapProfiler.collectGarbage): what the page
  // keeps, apart from garbage V8 had not collected yet.
  const gc = await page.context().newCDPSession(page);
  await gc.send("HeapProfiler.collectGarbage");
  await page.waitForTimeout(500);
  const gcProcs = treeProcs(browserPid());
  const gcHeap = await page.evaluate(() => performance.memory.usedJSHeapSize / 1e6);
  // Then what Chromium gives back under memory pressure (CDP Memory.simulatePressureNotification,
  // "critical": caches purged, free pages returned): what the tab keeps when the system asks.
  await gc.send("Memory.simulatePressureNotification", { level: "critical" });
  await gc.send("HeapProfiler.collectGarbage");
  await page.waitForTimeout(1000);
  const pressureProcs = treeProcs(browserPid());
  heapTotals.after_gc = await heapTotal();
  const meta = await page.evaluate(() => window.__tdb.meta.events);
  await page.screenshot({ path: "/tmp/view_bench_last.png" });
  // A blank tab in the same browser beside the page: what any tab costs (its renderer's
  // private footprint), to set the page's against.
  let blankTab = null;
  if (process.env.BLANK_TAB !== "0") {
    const before = new Set(treeProcs(browserPid()).map((p) => p.pid));
    const blankPage = await browser.newPage({ viewport: { width: 1600, height: 900 } });
    await blankPage.goto("about:blank");
    await blankPage.waitForTimeout(500);
    const now = treeProcs(browserPid());
    const fresh = now.filter((p) => !before.has(p.pid) && p.type === "renderer");
    // Its renderer: the new one that worked most (another new one is the next spare).
    const own = fresh.reduce((a, p) => (!a || p.cpu_ms > a.cpu_ms ? p : a), null);
    blankTab = { tab_private_mb: own ? mb1(own.private_kb) : null, tab_pss_mb: own ? mb1(own.pss_kb) : null,
      new_renderers_private_mb: fresh.map((p) => mb1(p.private_kb)), ...memAt(now, undefined, own && own.pid) };
    await blankPage.close();
  }
  await browser.close();
  return {
    viewer: "tracedb view", events: meta, first_paint_ms: firstPaint,
    zoom_pan_p50_ms: +pct(lat, 50).toFixed(1), zoom_pan_p95_ms: +pct(lat, 95).toFixed(1),
    zoom_pan_max_ms: +Math.max(...lat).toFixed(1), interactions: lat.length,
    server_p50_ms: +pct(server, 50).toFixed(1), server_p95_ms: +pct(server, 95).toFixed(1),
    overview_answers: coarse.filter(Boolean).length,
    // In the page, per answer: the request until its headers, the body, decoding, drawing (ms).
    wait_p50_ms: partP("wait", 50), wait_p95_ms: partP("wait", 95),
    body_p50_ms: partP("body", 50), decode_p50_ms: partP("decode", 50), decode_p95_ms: partP("decode", 95),
    draw_p50_ms: partP("draw", 50), draw_p95_ms: partP("draw", 95),
    answer_kb_p50: partP("kb", 50), answer_kb_max: +Math.max(...parts.map((x) => x.kb || 0)).toFixed(0),
    // CPU time over the interactions, per interaction (ms), by process type; and the server's.
    cpu_ms_per_interaction: Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, +(v / lat.length).toFixed(1)])),
    server_cpu_ms_per_interaction: +(serverCpu / lat.length).toFixed(1),
    loop_wall_s: +(wallLoop / 1000).toFixed(1), load_avg_1min: [+load0.toFixed(1), +load1.toFixed(1)],
    js_heap_mb: +heap.toFixed(1), browser_pss_mb: +rss.toFixed(0), blank_browser_pss_mb: +blank.toFixed(0),
    pss_mb_by_process: Object.fromEntries(Object.entries(byType(endProcs, "pss_kb")).map(([k, v]) => [k, +(v / 1024).toFixed(0)])),
    first_paint_pss_mb_by_process: Object.fromEntries(Object.entries(byType(paintedProcs, "pss_kb")).map(([k, v]) => [k, +(v / 1024).toFixed(0)])),
    first_paint_js_heap_mb: +paintedHeap.toFixed(1),
    after_gc_pss_mb_by_process: Object.fromEntries(Object.entries(byType(gcProcs, "pss_kb")).map(([k, v]) => [k, +(v / 1024).toFixed(0)])),
    after_gc_js_heap_mb: +gcHeap.toFixed(1),
    blank_pss_mb_by_process: Object.fromEntries(Object.entries(byType(blankProcs, "pss_kb")).map(([k, v]) => [k, +(v / 1024).toFixed(0)])),
    // Private footprint (Chrome's task manager's "Memory footprint") beside PSS, at each point.
    memory: {
      blank: memAt(blankProcs, undefined, tabPid), first_paint: memAt(paintedProcs, paintedHeap, tabPid),
      after_interactions: memAt(endProcs, heap, tabPid), after_gc: memAt(gcProcs, gcHeap, tabPid),
      after_pressure: memAt(pressureProcs, undefined, tabPid), js_heap_total_mb: heapTotals,
      ...(blankTab ? { second_blank_tab: blankTab } : {}),
    },
    flags: process.env.FLAGS === "lean" ? "lean" : "default", poll: process.env.LOOP === "page" ? "event, keys in the page" : process.env.POLL === "raf" ? "raf" : "event", errors,
  };
}

async function benchSpeedscope() {
  // speedscope's app and the JSON from one loopback server; #profileURL= loads the file.
  const name = path.basename(jsonFile);
  const srv = http.createServer((req, res) => {
    const u = decodeURIComponent(req.url.split("?")[0].split("#")[0]);
    const file = u === `/trace/${name}` ? jsonFile : path.join(ssApp, u === "/" ? "index.html" : u);
    if (!file.startsWith(ssApp) && file !== jsonFile) { res.statusCode = 404; res.end(); return; }
    fs.stat(file, (err, st) => {
      if (err) { res.statusCode = 404; res.end(); return; }
      res.setHeader("Content-Length", st.size);
      fs.createReadStream(file).pipe(res);
    });
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const port = srv.address().port;
  const browser = await launcher.launch({ executablePath: chromium, headless: true, args: ARGS });
  const page = await browser.newPage({ viewport: { width: 1600, height: 900 } });
  let crashed = false;
  page.on("crash", () => { crashed = true; });
  let peakRss = 0;
  const sampler = setInterval(() => { try { peakRss = Math.max(peakRss, treeRssMb(browserPid())); } catch {} }, 250);
  const t0 = Date.now();
  let ok = false, err = "";
  try {
    await page.goto(`http://127.0.0.1:${port}/index.html#profileURL=/trace/${name}`);
    await page.waitForFunction((n) => document.title.startsWith(n) ||
      /error|Something went wrong|Failed/i.test(document.body.innerText), name, { timeout: 180000, polling: 250 });
  } catch (e) { err = String(e.message || e).split("\n")[0]; }
  const loadMs = Date.now() - t0;
  let title = "";
  try { title = await page.title(); ok = title.startsWith(name); } catch { ok = false; }
  if (crashed) err = "the page crashed (out of memory)";
  clearInterval(sampler);
  const size = fs.statSync(jsonFile).size;
  await browser.close();
  srv.close();
  return {
    viewer: "speedscope (Chrome JSON)", json_mb: +(size / 1e6).toFixed(0), loaded: ok,
    first_paint_ms: loadMs, peak_browser_pss_mb: +peakRss.toFixed(0), error: ok ? "" : (err || title),
  };
}

// The Chrome-JSON loader of Chrome DevTools' Performance panel (npm @paulirish/trace_engine, the
// panel's trace model built for use outside DevTools; Perfetto's UI is not on npm): a page fetches
// the same JSON, parses it and builds the model with every handler, as the panel does on "Load
// profile". Time until the model is built (or the error), peak PSS of the browser.
// third-party-web (CommonJS, so not loadable by a page as is) only names the companies behind
// URLs of network requests, which these traces have none of: a stub stands in for it.
const PEER_PAGE = `<!doctype html><meta charset="utf-8"><title>trace_engine</title>
<script type="importmap">{"imports": {"legacy-javascript": "/nm/legacy-javascript/legacy-javascript.js",
  "third-party-web": "/third-party-web-stub.js"}}</script><script type="module">
const t0 = performance.now();
const mark = (k) => { window.__peer[k] = +(performance.now() - t0).toFixed(0); };
window.__peer = {};
try {
  const Trace = await import("/nm/@paulirish/trace_engine/models/trace/trace.js");
  const r = await fetch("/trace/" + location.hash.slice(1));
  const text = await r.text(); mark("fetched_ms");
  const json = JSON.parse(text); mark("parsed_ms");
  const events = json.traceEvents ?? json;
  window.__peer.events = events.length;
  const model = Trace.TraceModel.Model.createWithAllHandlers();
  await model.parse(events); mark("model_ms");
  const t = model.parsedTrace();
  const data = t && (t.data || t);
  const procs = data && data.Renderer && data.Renderer.processes;  // the tracks it would draw
  window.__peer.threads = procs ? [...procs.values()].reduce((n, p) => n + p.threads.size, 0) : -1;
  window.__peer.model_keys = data ? Object.keys(data).length : 0;
  window.__peer.ok = !!t;
} catch (e) { window.__peer.error = String(e && e.message || e).slice(0, 200); }
window.__peer.done = true;
</script>`;
async function benchTraceEngine(nmDir) {  // node_modules holding @paulirish/trace_engine
  const name = path.basename(jsonFile);
  const srv = http.createServer((req, res) => {
    const u = decodeURIComponent(req.url.split("?")[0].split("#")[0]);
    if (u === "/peer.html") { res.setHeader("Content-Type", "text/html"); res.end(PEER_PAGE); return; }
    if (u === "/third-party-web-stub.js") {
      res.setHeader("Content-Type", "text/javascript");
      res.end("export default { getEntity: () => undefined, getRootDomain: (u) => new URL(u).hostname };");
      return;
    }
    const file = u === `/trace/${name}` ? jsonFile : u.startsWith("/nm/") ? path.join(nmDir, u.slice(4)) : "";
    if (!file || (file !== jsonFile && !file.startsWith(nmDir + "/"))) { res.statusCode = 404; res.end(); return; }
    fs.stat(file, (err, st) => {
      if (err) { res.statusCode = 404; res.end(); return; }
      res.setHeader("Content-Length", st.size);
      if (file.endsWith(".js")) res.setHeader("Content-Type", "text/javascript");
      fs.createReadStream(file).pipe(res);
    });
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const browser = await launcher.launch({ executablePath: chromium, headless: true, args: ARGS });
  const page = await browser.newPage({ viewport: { width: 1600, height: 900 } });
  let crashed = false;
  page.on("crash", () => { crashed = true; });
  let peakRss = 0;
  const sampler = setInterval(() => { try { peakRss = Math.max(peakRss, treeRssMb(browserPid())); } catch {} }, 250);
  const t0 = Date.now();
  let res = {}, err = "";
  try {
    await page.goto(`http://127.0.0.1:${srv.address().port}/peer.html#${name}`);
    await page.waitForFunction(() => window.__peer && window.__peer.done, null, { timeout: 180000, polling: 250 });
    res = await page.evaluate(() => window.__peer);
  } catch (e) {
    err = String(e.message || e).split("\n")[0];
    try { res = await page.evaluate(() => window.__peer); } catch { /* the page is gone */ }  // stages reached
  }
  const ms = Date.now() - t0;
  if (crashed) err = "the page crashed (out of memory)";
  clearInterval(sampler);
  const size = fs.statSync(jsonFile).size;
  await browser.close();
  srv.close();
  return {
    viewer: "DevTools trace_engine (Chrome JSON)", json_mb: +(size / 1e6).toFixed(0), loaded: !!res.ok,
    first_paint_ms: res.ok ? ms : null, ...res, peak_browser_pss_mb: +peakRss.toFixed(0),
    error: res.ok ? "" : (res.error || err || "no model"),
  };
}

if (process.env.ONLY_PEER !== "1") console.log(JSON.stringify(await benchView()));
if (ssApp && jsonFile && process.env.SPEEDSCOPE !== "0") console.log(JSON.stringify(await benchSpeedscope()));
if (jsonFile && process.env.TRACE_ENGINE) console.log(JSON.stringify(await benchTraceEngine(process.env.TRACE_ENGINE)));
