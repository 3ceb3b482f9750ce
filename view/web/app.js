// tracedb view: the timeline page. It asks the server (view/view_server.cc) for what the current
// window shows at the screen's detail (/api/window) and draws it on one canvas: a row per rank
// (and host) that collapses, a row per track with its spans by depth, merged runs, occupancy,
// counters as area charts, flows, step markers on the time axis, and on request the critical
// path and the wait states (/api/why; docs/why.md). API: docs/view.md.
"use strict";
(() => {
const TOKEN = window.TRACEDB_TOKEN;
const LABEL_W = 190, AXIS_H = 22, ROW_H = 14, HDR_H = 16, COUNTER_H = 32;
const canvas = document.getElementById("tl");
const ctx = canvas.getContext("2d");
const statusEl = document.getElementById("status");
const detailsEl = document.getElementById("details");
const resultsEl = document.getElementById("results");
const whyEl = document.getElementById("whyinfo");

// State, also read by the browser tests (window.__tdb).
const S = {
  meta: null, v0: 0, v1: 1, win: null, flows: null, hits: [], selected: null,
  collapsedRank: new Set(), collapsedHost: new Set(), depthOf: new Map(),
  rows: [], seq: 0, client: Math.random().toString(36).slice(2), ctrl: null,
  paints: 0, requests: 0, answered: 0, cancelled: 0, lastMs: 0, timings: [], errors: [],
  names: new Map(), scrollY: 0,
  manyTracks: 64,  // above this many tracks, only those on screen are asked for
  whyOn: false, why: null,  // the critical path and waits (the "critical path & waits" box)
};
window.__tdb = S;

function api(path, params, signal) {
  const q = new URLSearchParams(params);
  return fetch(`${path}?${q}`, { headers: { "X-Tracedb-Token": TOKEN }, signal })
    .then(async (r) => {
      const body = await r.json().catch(() => ({ error: `HTTP ${r.status}` }));
      if (!r.ok) { const e = new Error(body.error || `HTTP ${r.status}`); e.status = r.status; throw e; }
      return body;
    });
}

const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
const colors = new Map();  // name -> CSS colour, computed once (parsing a colour is not free)
function color(name) {
  let c = colors.get(name);
  if (c === undefined) {
    let h = 0;
    for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) | 0;
    c = `hsl(${((h >>> 0) % 360)},55%,${62 + ((h >>> 9) % 14)}%)`;
    if (colors.size < 100000) colors.set(name, c);
  }
  return c;
}
// The canvas's size in CSS pixels, read once per frame: reading clientWidth per item forced a
// layout each time (the first profile's hottest function).
const box = { W: 1, H: 1 };
function measure() { box.W = canvas.clientWidth; box.H = canvas.clientHeight; }
const plotW = () => Math.max(1, box.W - LABEL_W);
const xOf = (t) => LABEL_W + ((t - S.v0) / (S.v1 - S.v0)) * plotW();
const tOf = (x) => S.v0 + ((x - LABEL_W) / plotW()) * (S.v1 - S.v0);

// ---- layout: hosts > ranks > tracks ----
function layout() {
  const rows = [];
  let y = AXIS_H - S.scrollY;
  const byRank = new Map();
  for (const t of S.meta.tracks) {
    if (!byRank.has(t.rank)) byRank.set(t.rank, []);
    byRank.get(t.rank).push(t);
  }
  const hosts = new Map();
  for (const r of S.meta.ranks) {
    const h = r.host || "";
    if (!hosts.has(h)) hosts.set(h, []);
    hosts.get(h).push(r);
  }
  const manyHosts = hosts.size > 1;
  for (const [host, ranks] of hosts) {
    if (manyHosts) {
      rows.push({ kind: "host", host, y, h: HDR_H });
      y += HDR_H;
      if (S.collapsedHost.has(host)) continue;
    }
    for (const r of ranks) {
      rows.push({ kind: "rank", rank: r.rank, host, y, h: HDR_H });
      y += HDR_H;
      if (S.collapsedRank.has(r.rank)) continue;
      for (const t of byRank.get(r.rank) || []) {
        const lod = S.win && S.win.byTrack.get(t.track);
        const counter = lod && lod.counters.length > 0 && lod.items.length === 0;
        const depths = Math.max(1, S.depthOf.get(t.track) || 1);
        const h = counter ? COUNTER_H : depths * ROW_H + 2;
        rows.push({ kind: "track", track: t.track, rank: t.rank, name: t.name, y, h, counter });
        y += h;
      }
    }
  }
  S.rows = rows;
  S.contentH = y + S.scrollY;
}

// ---- drawing ----
function draw() {
  const dpr = window.devicePixelRatio || 1;
  measure();
  const W = box.W, H = box.H;
  if (canvas.width !== W * dpr || canvas.height !== H * dpr) {
    canvas.width = W * dpr; canvas.height = H * dpr;
  }
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, H);
  if (!S.meta) return;
  layout();
  const win = S.win;
  // The answer was for [w0, w1): shift it into the current view (pan/zoom before it arrives).
  const wx = (rel) => win ? xOf(win.base + rel) : 0;
  ctx.font = "11px system-ui, sans-serif";
  ctx.textBaseline = "middle";
  for (const row of S.rows) {
    if (row.y + row.h < AXIS_H || row.y > H) continue;
    if (row.kind === "host" || row.kind === "rank") {
      ctx.fillStyle = row.kind === "host" ? "#dde3ec" : "#eef1f5";
      ctx.fillRect(0, row.y, W, row.h);
      ctx.fillStyle = "#223";
      const open = row.kind === "host" ? !S.collapsedHost.has(row.host) : !S.collapsedRank.has(row.rank);
      const label = row.kind === "host" ? `host ${row.host}` : `rank ${row.rank}${row.host ? " (" + row.host + ")" : ""}`;
      ctx.fillText(`${open ? "▾" : "▸"} ${label}`, 4, row.y + row.h / 2);
      if (row.kind === "rank" && win && win.byRank.has(row.rank)) {
        // Zone-map density of the rank (coarse answers).
        const d = win.byRank.get(row.rank).density;
        let max = 0;
        for (const v of d) max = Math.max(max, v);
        ctx.fillStyle = "#7a8fb0";
        const step = (win.w1 - win.base) / d.length;
        for (let x = 0; x < d.length; x++) {
          if (!d[x]) continue;
          const h = Math.max(1, (row.h - 2) * Math.sqrt(d[x] / max));
          const x0 = wx(x * step), x1 = wx((x + 1) * step);
          ctx.fillRect(Math.max(LABEL_W, x0), row.y + row.h - 1 - h, Math.max(1, x1 - x0), h);
        }
      }
      continue;
    }
    // a track
    ctx.fillStyle = "#fafbfc";
    ctx.fillRect(LABEL_W, row.y, W - LABEL_W, row.h);
    ctx.strokeStyle = "#eee";
    ctx.beginPath(); ctx.moveTo(0, row.y + row.h - 0.5); ctx.lineTo(W, row.y + row.h - 0.5); ctx.stroke();
    ctx.fillStyle = "#334";
    ctx.fillText(`  ${row.name}`, 8, row.y + Math.min(row.h, ROW_H) / 2 + 1);
    const lod = win && win.byTrack.get(row.track);
    if (!lod) continue;
    ctx.save();
    ctx.beginPath(); ctx.rect(LABEL_W, row.y, W - LABEL_W, row.h); ctx.clip();
    if (row.counter) drawCounters(lod, row, win, wx);
    // occupancy (a busy track), then runs, then whole events; rectangles are batched by
    // colour (one fillStyle per colour and track), labels drawn only where they fit.
    drawOccupancy(lod, row, win, wx);
    drawRuns(lod, row, win, wx, W);
    drawItems(lod, row, win, wx, W);
    ctx.restore();
  }
  drawHighlights();
  drawFlows();
  drawWhy();
  drawAxis(W);
  S.paints++;
}

// Rectangles grouped by fill style, filled group by group. The coordinates go into typed arrays
// kept from frame to frame (one per style), so drawing allocates next to nothing.
const rectPool = new Map();  // fill style -> { a: Float32Array, n, batch }
let batchIds = 0;
class Batch {
  constructor() { this.id = ++batchIds; this.used = []; }
  add(style, x, y, w, h) {
    let g = rectPool.get(style);
    if (!g) { g = { style, a: new Float32Array(64), n: 0, batch: 0 }; rectPool.set(style, g); }
    if (g.batch !== this.id) { g.batch = this.id; g.n = 0; this.used.push(g); }
    if (g.n + 4 > g.a.length) { const b = new Float32Array(g.a.length * 2); b.set(g.a); g.a = b; }
    const a = g.a;
    a[g.n] = x; a[g.n + 1] = y; a[g.n + 2] = w; a[g.n + 3] = h;
    g.n += 4;
  }
  fill() {
    for (const g of this.used) {
      ctx.fillStyle = g.style;
      const a = g.a;
      for (let i = 0; i < g.n; i += 4) ctx.fillRect(a[i], a[i + 1], a[i + 2], a[i + 3]);
    }
  }
}
const OCC_STYLES = Array.from({ length: 8 }, (_, i) => `rgba(70,90,140,${(0.25 + 0.75 * (i + 1) / 8).toFixed(2)})`);
function drawOccupancy(lod, row, win, wx) {
  // Per depth and pixel the covered fraction, in 8 shades; a run of pixels of one shade is one
  // rectangle.
  const b = new Batch();
  lod.occ.forEach((v, depth) => {
    const n = v.length, step = (win.w1 - win.base) / n, y = row.y + 1 + depth * ROW_H;
    for (let x = 0; x < n;) {
      const q = v[x] ? Math.min(7, (v[x] * 8) >> 8) : -1;
      let e = x + 1;
      while (e < n && (v[e] ? Math.min(7, (v[e] * 8) >> 8) : -1) === q) e++;
      if (q >= 0) {
        const x0 = wx(x * step), x1 = wx(e * step);
        if (x1 >= LABEL_W && x0 <= box.W) b.add(OCC_STYLES[q], x0, y, Math.max(1, x1 - x0), ROW_H - 1);
      }
      x = e;
    }
  });
  b.fill();
}
function drawRuns(lod, row, win, wx, W) {
  // Merged runs: the colour of their longest event, lighter, with a count when wide.
  if (!lod.runs.length) return;
  const b = new Batch(), labels = [];
  for (const [ts, end, depth, count, nameId] of lod.runs) {
    const x0 = wx(ts), x1 = wx(end);
    if (x1 < LABEL_W || x0 > W) continue;
    const y = row.y + 1 + depth * ROW_H;
    b.add(color(win.names[nameId] ?? ""), x0, y + 2, Math.max(1, x1 - x0), ROW_H - 5);
    if (x1 - x0 > 60) labels.push(x0, x1, y, count, nameId);
  }
  ctx.globalAlpha = 0.6;
  b.fill();
  ctx.globalAlpha = 1;
  ctx.fillStyle = "#111";
  for (let i = 0; i < labels.length; i += 5) {
    const [x0, x1, y, count, nameId] = labels.slice(i, i + 5);
    const cx = Math.max(x0, LABEL_W) + 2;
    ctx.fillText(fit(`${count} × ${win.names[nameId] ?? ""}…`, Math.min(x1, W) - cx - 2), cx, y + ROW_H / 2);
  }
}
function drawItems(lod, row, win, wx, W) {
  const b = new Batch(), labels = [], marks = [];
  for (const it of lod.items) {
    const ts = it[1], dur = it[2], depth = it[4], kind = it[5];
    const x0 = wx(ts), x1 = wx(ts + dur);
    if (x1 < LABEL_W - 4 || x0 > W + 4) continue;
    const y = row.y + 1 + depth * ROW_H;
    if (kind === 0) {
      const name = win.names[it[3]] ?? "";
      const w = Math.max(1, x1 - x0);
      b.add(color(name), x0, y, w, ROW_H - 1);
      if (w > 24) labels.push([name, x0, x1, y]);
    } else {
      marks.push(x0, y, kind);
    }
  }
  b.fill();
  ctx.fillStyle = "#111";
  for (const [name, x0, x1, y] of labels) {
    const cx = Math.max(x0, LABEL_W) + 2;
    ctx.fillText(fit(name, Math.min(x1, W) - cx - 2), cx, y + ROW_H / 2);
  }
  for (let i = 0; i < marks.length; i += 3) {
    const x0 = marks[i], y = marks[i + 1];
    ctx.fillStyle = marks[i + 2] === 3 ? "#c60" : "#333";
    ctx.beginPath(); ctx.moveTo(x0, y); ctx.lineTo(x0 + 4, y + ROW_H / 2); ctx.lineTo(x0, y + ROW_H - 1);
    ctx.lineTo(x0 - 4, y + ROW_H / 2); ctx.fill();
  }
}

const textWidths = new Map();  // label -> width in px at the canvas font
function textWidth(text) {
  let w = textWidths.get(text);
  if (w === undefined) {
    w = ctx.measureText(text).width;
    if (textWidths.size < 100000) textWidths.set(text, w);
  }
  return w;
}
function fit(text, w) {
  if (w <= 0) return "";
  if (w < 12) return "";
  const full = textWidth(text);
  if (full <= w) return text;
  // Cut where the average glyph width says, then shorten until it fits.
  let n = Math.floor(text.length * (w - 8) / full);
  while (n > 0 && ctx.measureText(text.slice(0, n) + "…").width > w) n--;
  return n > 0 ? text.slice(0, n) + "…" : "";
}
function drawCounters(lod, row, win, wx) {
  // One area chart per counter name: per pixel max (fill) and last (line).
  const series = new Map();
  for (const c of lod.counters) {
    if (!series.has(c[0])) series.set(c[0], []);
    series.get(c[0]).push(c);
  }
  const step = (win.w1 - win.base) / win.px;
  let k = 0;
  for (const [nameId, pts] of series) {
    let lo = Infinity, hi = -Infinity;
    for (const p of pts) { lo = Math.min(lo, p[2]); hi = Math.max(hi, p[3]); }
    lo = Math.min(lo, 0);
    const scale = hi > lo ? (row.h - 4) / (hi - lo) : 0;
    const yOf = (v) => row.y + row.h - 2 - (v - lo) * scale;
    const name = win.names[nameId] ?? "";
    // A step chart: each pixel's max holds until the next sample.
    ctx.fillStyle = color(name).replace("hsl", "hsla").replace(")", ",0.45)");
    ctx.beginPath();
    ctx.moveTo(wx(pts[0][1] * step), row.y + row.h - 2);
    for (let i = 0; i < pts.length; i++) {
      const y = yOf(pts[i][3]);
      const xEnd = i + 1 < pts.length ? wx(pts[i + 1][1] * step) : wx((pts[i][1] + 1) * step);
      ctx.lineTo(wx(pts[i][1] * step), y); ctx.lineTo(xEnd, y);
    }
    ctx.lineTo(wx((pts[pts.length - 1][1] + 1) * step), row.y + row.h - 2);
    ctx.fill();
    ctx.fillStyle = "#223";
    ctx.fillText(`${name} ≤ ${hi.toPrecision(4)}`, LABEL_W + 4 + 130 * k++, row.y + 8);
  }
}

function rowOfTrack(track) { return S.rows.find((r) => r.kind === "track" && r.track === track); }
function trackOfId(id) { return Number(BigInt(id) >> 32n); }

function drawHighlights() {
  ctx.strokeStyle = "#e00"; ctx.lineWidth = 2;
  for (const h of S.hits) {
    const row = rowOfTrack(h.track);
    if (!row) continue;
    const x0 = xOf(h.ts), x1 = xOf(h.ts + (h.dur || 0));
    if (x1 < LABEL_W || x0 > box.W) continue;
    ctx.strokeRect(Math.max(LABEL_W, x0) - 1, row.y, Math.max(3, x1 - x0) + 2, row.h - 1);
  }
  if (S.selected) {
    const row = rowOfTrack(S.selected.track);
    if (row) {
      ctx.strokeStyle = "#000";
      const x0 = xOf(S.selected.ts), x1 = xOf(S.selected.ts + S.selected.dur);
      ctx.strokeRect(x0 - 1, row.y + 1 + S.selected.depth * ROW_H, Math.max(3, x1 - x0) + 2, ROW_H);
    }
  }
  ctx.lineWidth = 1;
}

function drawFlows() {
  if (!S.flows) return;
  const arrow = (idA, tA, idB, tB, style) => {
    const ra = rowOfTrack(trackOfId(idA)), rb = rowOfTrack(trackOfId(idB));
    if (!ra || !rb) return;
    const xa = xOf(tA), xb = xOf(tB), ya = ra.y + ROW_H / 2, yb = rb.y + ROW_H / 2;
    if (Math.max(xa, xb) < LABEL_W || Math.min(xa, xb) > box.W) return;
    ctx.strokeStyle = style;
    ctx.beginPath(); ctx.moveTo(xa, ya);
    ctx.bezierCurveTo(xa + 20, ya, xb - 20, yb, xb, yb); ctx.stroke();
    ctx.fillStyle = style;
    ctx.beginPath(); ctx.arc(xb, yb, 2, 0, 7); ctx.fill();
  };
  for (const r of S.flows.messages.rows) arrow(r[1], r[2], r[3], r[4], "rgba(200,80,0,.7)");
  for (const r of S.flows.collectives.rows) arrow(r[1], r[2], r[3], r[4], "rgba(0,120,60,.5)");
}

function drawAxis(W) {
  ctx.fillStyle = "#f4f6f9"; ctx.fillRect(0, 0, W, AXIS_H);
  ctx.fillStyle = "#223";
  ctx.fillText(`${humanDuration(S.v1 - S.v0)} shown`, 4, AXIS_H / 2);
  const span = S.v1 - S.v0;
  let step = Math.pow(10, Math.floor(Math.log10(span / 8)));
  if (span / step > 16) step *= 5; else if (span / step > 8) step *= 2;
  ctx.strokeStyle = "#ccd";
  for (let t = Math.ceil(S.v0 / step) * step; t < S.v1; t += step) {
    const x = xOf(t);
    ctx.beginPath(); ctx.moveTo(x, AXIS_H - 6); ctx.lineTo(x, AXIS_H); ctx.stroke();
    ctx.fillText(humanDuration(t), x + 2, AXIS_H / 2 - 2);
  }
  // Step markers (the lowest rank that has them).
  const steps = S.meta.steps;
  let lo = 0, hi = steps.length;
  while (lo < hi) { const m = (lo + hi) >> 1; if (steps[m][0] < S.v0) lo = m + 1; else hi = m; }
  let lastX = -1e9;
  ctx.strokeStyle = "rgba(160,0,160,.35)";
  for (let i = lo; i < steps.length && steps[i][0] <= S.v1; i++) {
    const x = xOf(steps[i][0]);
    if (x - lastX < 3) continue;
    ctx.beginPath(); ctx.moveTo(x, AXIS_H); ctx.lineTo(x, box.H); ctx.stroke();
    if (x - lastX > 40) { ctx.fillStyle = "#808"; ctx.fillText(`step ${steps[i][1]}`, x + 2, AXIS_H - 5); }
    lastX = x;
  }
}

// ---- fetching the window ----
// With many tracks (thousands of ranks), only those on screen (and a screen above and below)
// are asked for; null: every track. A collapsed rank is asked for by its first track (its
// density). At most 1,000, to keep the URI short.
function visibleTracks() {
  if (!S.meta || S.meta.tracks.length <= S.manyTracks) return null;
  layout();  // the rows as they are now (a rank may have been collapsed since the last frame)
  const lo = AXIS_H - box.H, hi = 2 * box.H, out = new Set();
  for (const r of S.rows) {
    if (r.y + r.h < lo || r.y > hi) continue;
    if (r.kind === "track") out.add(r.track);
    else if (r.kind === "rank" && S.collapsedRank.has(r.rank)) {
      const t = S.meta.tracks.find((x) => x.rank === r.rank);
      if (t) out.add(t.track);
    }
    if (out.size >= 1000) break;
  }
  return out.size ? [...out] : [S.meta.tracks[0].track];
}
// A key press asks at once; a stream of wheel or drag events asks at most every 30 ms (the last
// position always goes out). The request leaves before the preview is drawn.
let timer = 0, lastSent = -1e9;
function request(now) {
  clearTimeout(timer);
  const wait = now ? 0 : lastSent + 30 - performance.now();
  if (wait <= 0) fetchWindow(); else timer = setTimeout(fetchWindow, wait);
}
// The preview: the previous answer shifted and scaled into the new view, drawn at the next frame
// (several moves in one frame draw once).
let frame = 0;
function redraw() {
  if (!frame) frame = requestAnimationFrame(() => { frame = 0; draw(); });
}
// A lowercase hex digit's value ("0"-"9", "a"-"f"; the server sends nothing else).
const hexDigit = (c) => (c <= 57 ? c - 48 : c - 87);
function fetchWindow() {
  clearTimeout(timer);
  lastSent = performance.now();
  if (S.ctrl) { S.ctrl.abort(); }
  const ctrl = new AbortController();
  S.ctrl = ctrl;
  const seq = ++S.seq;
  const v0 = Math.floor(S.v0), v1 = Math.max(Math.ceil(S.v1), Math.floor(S.v0) + 1);
  const px = Math.max(1, Math.min(20000, Math.round(plotW())));
  const t = performance.now();
  S.requests++;
  const q = new URLSearchParams({ t0: v0, t1: v1, px, client: S.client, seq });
  const only = visibleTracks();
  if (only) q.set("tracks", only.join(","));
  S.lastQuery = q.toString();
  let tHead = 0, tBody = 0, kb = 0;
  fetch(`api/window?${q}`, { headers: { "X-Tracedb-Token": TOKEN }, signal: ctrl.signal })
    .then(async (r) => {
      tHead = performance.now();
      const text = await r.text();
      tBody = performance.now();
      kb = text.length / 1024;
      let body;
      try { body = JSON.parse(text); } catch { body = { error: `HTTP ${r.status}` }; }
      if (!r.ok) { const e = new Error(body.error || `HTTP ${r.status}`); e.status = r.status; throw e; }
      return body;
    }).then((w) => {
    if (seq !== S.seq) return;
    w.base = v0; w.w1 = v1;
    w.byTrack = new Map(w.tracks.map((x) => [x.track, x]));
    w.byRank = new Map(w.ranks.map((x) => [x.rank, x]));
    for (const tr of w.tracks) {
      // Occupancy: a hex string per depth, decoded once into bytes, digit by digit (substr and
      // parseInt made a string per pixel and depth, garbage for the collector).
      tr.occ = tr.occupancy.map((hex) => {
        const v = new Uint8Array(hex.length >> 1);
        for (let i = 0; i < v.length; i++) v[i] = (hexDigit(hex.charCodeAt(2 * i)) << 4) | hexDigit(hex.charCodeAt(2 * i + 1));
        return v;
      });
      tr.occupancy = null;  // the strings are not needed once decoded
      let d = tr.occ.length;
      for (const it of tr.items) d = Math.max(d, it[4] + 1);
      for (const r of tr.runs) d = Math.max(d, r[2] + 1);
      if (d > (S.depthOf.get(tr.track) || 0)) S.depthOf.set(tr.track, d);
    }
    S.win = w;
    const tDecoded = performance.now();
    S.answered++;
    if (frame) { cancelAnimationFrame(frame); frame = 0; }  // this draw replaces the preview
    draw();
    const tDrawn = performance.now();
    S.lastMs = tDrawn - t;
    if (S.timings.length >= 1000) S.timings.shift();  // the latest 1,000: a long session does not grow
    S.timings.push(S.lastMs);
    // Where the time of this answer went (ms): waiting for the server's headers, the body,
    // decoding, drawing; read by bench/view_bench.mjs.
    S.lastParts = { wait: tHead - t, body: tBody - tHead, decode: tDecoded - tBody, draw: tDrawn - tDecoded, kb };
    const items = w.tracks.reduce((n, x) => n + x.items.length + x.runs.length, 0);
    statusEl.textContent = `${humanDuration(v1 - v0)} · ${w.coarse ? "overview" : "detail"} · ` +
      `${items} items · ${w.blocks_decoded}/${w.blocks} blocks · ${S.lastMs.toFixed(0)} ms`;
    fetchFlows(v0, v1, seq);
    fetchWhy(v0, v1, seq);
    settled();
  }).catch((e) => {
    if (e.name === "AbortError" || e.status === 409) { S.cancelled++; settled(); return; }
    S.errors.push(String(e.message));
    statusEl.innerHTML = `<span class="err">${esc(e.message)}</span>`;
    settled();
  });
}
// Each window request ends (answered and drawn, superseded, or failed) with a "tdb-settled" event
// on window: a test or benchmark waits for it instead of polling every frame, which kept the
// renderer and the compositor busy producing frames while the request was out.
function settled() { window.dispatchEvent(new Event("tdb-settled")); }
function fetchFlows(v0, v1, seq) {
  // Arrows only in detail windows; the server matches them once over the job (pending meanwhile).
  // A job without any (job_flows 0) is not asked again, and a window without arrows, after one
  // without, is not drawn again: both were a second request and a second draw per answer.
  if (S.win.coarse) { S.flows = null; return; }
  if (S.noFlows) return;
  api("api/flows", { t0: v0, t1: v1 }).then((f) => {
    if (seq !== S.seq) return;
    if (f.pending) { setTimeout(() => { if (seq === S.seq) fetchFlows(v0, v1, seq); }, 1000); return; }
    if (f.job_flows === 0) S.noFlows = true;
    const arrows = (x) => !!x && x.messages.rows.length + x.collectives.rows.length > 0;
    const redraw = arrows(S.flows) || arrows(f);
    S.flows = f;
    if (redraw) draw();
  }).catch(() => { S.flows = null; });
}

// ---- the critical path and the wait states (/api/why) ----
// A wait (the waiting rank's time in a communication call until the late rank arrived) is
// hatched on the track of its event; a piece of the critical path is a red outline around its
// rank's rows, with a red bar on the rank's header and a line to the next piece on another rank.
let hatch = null;
function hatchStyle() {
  if (hatch) return hatch;
  const c = document.createElement("canvas");
  c.width = c.height = 8;
  const g = c.getContext("2d");
  g.fillStyle = "rgba(192,57,43,.18)"; g.fillRect(0, 0, 8, 8);
  g.strokeStyle = "rgba(150,30,20,.85)"; g.lineWidth = 1.5;
  g.beginPath(); g.moveTo(-2, 10); g.lineTo(10, -2); g.moveTo(-2, 2); g.lineTo(2, -2);
  g.moveTo(6, 10); g.lineTo(10, 6); g.stroke();
  hatch = ctx.createPattern(c, "repeat");
  return hatch;
}
// Per rank: its header row and the rows below it (y from the header's top to the last track's
// bottom), for the rows laid out now.
// Also each track's row (a wait looks its row up by track: thousands of waits, thousands of rows).
function rankBlocks() {
  const out = new Map(), tracks = new Map();
  for (const r of S.rows) {
    if (r.kind === "rank") out.set(r.rank, { hdr: r, top: r.y, bottom: r.y + r.h });
    else if (r.kind === "track") {
      tracks.set(r.track, r);
      if (out.has(r.rank)) out.get(r.rank).bottom = r.y + r.h;
    }
  }
  return { out, tracks };
}
function drawWhy() {
  const w = S.why;
  if (!w || !S.whyOn) return;
  const { out: blocks, tracks } = rankBlocks();
  ctx.save();
  ctx.beginPath(); ctx.rect(LABEL_W, AXIS_H, box.W - LABEL_W, box.H - AXIS_H); ctx.clip();
  ctx.fillStyle = hatchStyle();
  for (const r of w.waits.rows) {
    const x0 = xOf(r[1]), x1 = xOf(r[1] + r[2]);
    if (x1 < LABEL_W || x0 > box.W) continue;
    const row = tracks.get(trackOfId(r[5])) || (blocks.get(r[0]) || {}).hdr;
    if (!row) continue;
    ctx.fillRect(x0, row.y, Math.max(2, x1 - x0), row.h - 1);
  }
  // Consecutive pieces of one rank (a phase split at its children, the self time between
  // them) are one stretch on screen: one outline, one bar.
  const runs = [];
  for (const p of w.pieces.rows) {
    const last = runs[runs.length - 1];
    if (last && last.rank === p[0] && last.step === p[4] && xOf(p[1]) - xOf(last.end) < 1) {
      last.end = Math.max(last.end, p[1] + p[2]);
    } else {
      runs.push({ rank: p[0], step: p[4], ts: p[1], end: p[1] + p[2] });
    }
  }
  ctx.strokeStyle = "rgba(220,0,0,.9)"; ctx.lineWidth = 2;
  let prev = null;
  for (const r of runs) {
    const b = blocks.get(r.rank);
    const x0 = xOf(r.ts), x1 = xOf(r.end);
    if (b && x1 >= LABEL_W && x0 <= box.W) {
      ctx.fillStyle = "rgba(220,0,0,.75)";
      ctx.fillRect(x0, b.hdr.y + b.hdr.h - 4, Math.max(2, x1 - x0), 4);
      ctx.strokeRect(x0, b.top + 1, Math.max(2, x1 - x0), b.bottom - b.top - 2);
    }
    // The hand-over to the next rank on the path, within a step.
    if (b && prev && prev.b && prev.rank !== r.rank && prev.step === r.step) {
      const xp = xOf(prev.end), yp = (prev.b.top + prev.b.bottom) / 2, y = (b.top + b.bottom) / 2;
      ctx.beginPath(); ctx.moveTo(xp, yp); ctx.lineTo(x0, y); ctx.stroke();
    }
    prev = { b, rank: r.rank, step: r.step, end: r.end };
  }
  ctx.restore();
  ctx.lineWidth = 1;
}
function showWhy(w) {
  const s = w.summary;
  let h = "<h3>why: root causes</h3>";
  if (!s.causes.length) h += "<div>none stands out from the noise</div>";
  else h += "<ol>" + s.causes.map((c) => `<li>${esc(c.text)}</li>`).join("") + "</ol>";
  h += `<div>${s.wait_states.length ? s.wait_states.map((p) => `${esc(p.pattern)}: ${p.waits} waits, ${humanDuration(p.wait_ns)}`).join("<br>") : "no waits found"}</div>`;
  if (w.truncated) h += "<div>(this window has more than the pieces and waits drawn: zoom in)</div>";
  whyEl.innerHTML = h;
}
function fetchWhy(v0, v1, seq) {
  if (!S.whyOn) return;
  api("api/why", { t0: v0, t1: v1 }).then((w) => {
    if (seq !== S.seq || !S.whyOn) return;
    if (w.pending) { setTimeout(() => { if (seq === S.seq) fetchWhy(v0, v1, seq); }, 1000); return; }
    S.why = w;
    showWhy(w);
    draw();
    window.dispatchEvent(new Event("tdb-why"));
  }).catch((e) => {
    S.why = null;
    S.errors.push(String(e.message));
    whyEl.innerHTML = `<span class="err">${esc(e.message)}</span>`;
  });
}
document.getElementById("why").addEventListener("change", (e) => {
  S.whyOn = e.target.checked;
  if (!S.whyOn) { S.why = null; whyEl.innerHTML = ""; draw(); return; }
  whyEl.textContent = "analysing the job…";
  fetchWhy(Math.floor(S.v0), Math.max(Math.ceil(S.v1), Math.floor(S.v0) + 1), S.seq);
});

// ---- interaction ----
function scrollRows(dy) {
  S.scrollY = Math.max(0, Math.min(S.scrollY + dy, Math.max(0, (S.contentH || 0) - box.H / 2)));
  if (S.meta && S.meta.tracks.length > S.manyTracks) request(false);  // other rows, other tracks
  redraw();
}
function zoom(factor, atX, now) {
  const t = tOf(atX);
  const span = Math.max(100, (S.v1 - S.v0) * factor);
  const f = (t - S.v0) / (S.v1 - S.v0);
  S.v0 = t - f * span; S.v1 = S.v0 + span;
  request(now); redraw();
}
function pan(dx, now) {
  const dt = (dx / plotW()) * (S.v1 - S.v0);
  S.v0 += dt; S.v1 += dt;
  request(now); redraw();
}
canvas.addEventListener("wheel", (e) => {
  e.preventDefault();
  if (e.shiftKey) { scrollRows(e.deltaY); return; }
  zoom(Math.pow(1.0015, e.deltaY), e.offsetX);
}, { passive: false });
let drag = null;
canvas.addEventListener("mousedown", (e) => { drag = { x: e.offsetX, y: e.offsetY, moved: false }; });
window.addEventListener("mouseup", (e) => {
  if (drag && !drag.moved) click(drag.x, drag.y);
  drag = null;
});
canvas.addEventListener("mousemove", (e) => {
  if (!drag) return;
  const dx = e.offsetX - drag.x, dy = e.offsetY - drag.y;
  if (Math.abs(dx) + Math.abs(dy) > 2) drag.moved = true;
  if (!drag.moved) return;
  drag.x = e.offsetX; drag.y = e.offsetY;
  if (dy) scrollRows(-dy);
  pan(-dx);
});
canvas.addEventListener("keydown", (e) => {
  const k = e.key.toLowerCase(), mid = LABEL_W + plotW() / 2;
  if (k === "w") zoom(0.8, mid, true);
  else if (k === "s") zoom(1.25, mid, true);
  else if (k === "a") pan(-plotW() * 0.1, true);
  else if (k === "d") pan(plotW() * 0.1, true);
  else return;
  e.preventDefault();
});
window.addEventListener("resize", () => { measure(); request(true); redraw(); });

function click(x, y) {
  canvas.focus();
  const row = S.rows.find((r) => y >= r.y && y < r.y + r.h);
  if (!row) return;
  if (row.kind === "host") { toggle(S.collapsedHost, row.host); return; }
  if (row.kind === "rank") { toggle(S.collapsedRank, row.rank); return; }
  if (x < LABEL_W || !S.win) return;
  const lod = S.win.byTrack.get(row.track);
  if (!lod) return;
  const depth = Math.floor((y - row.y - 1) / ROW_H);
  const t = tOf(x) - S.win.base, slack = 3 * (S.v1 - S.v0) / plotW();
  let best = null;
  for (const it of lod.items) {
    if (it[4] !== depth) continue;
    if (t >= it[1] - slack && t <= it[1] + it[2] + slack) {
      if (!best || Math.abs(it[1] - t) < Math.abs(best[1] - t) || (t >= it[1] && t <= it[1] + it[2])) best = it;
    }
  }
  if (!best) { detailsEl.innerHTML = ""; S.selected = null; draw(); return; }
  select(best[0], S.win.base + best[1], best[2], row.track, best[4]);
}
function toggle(set, key) {
  if (set.has(key)) set.delete(key); else set.add(key);
  draw();
  if (S.meta.tracks.length > S.manyTracks) request(true);  // other rows are on screen now
}

function select(id, relTs, dur, track, depth) {
  S.selected = { id, ts: relTs, dur, track, depth };
  draw();
  const abs = (BigInt(S.meta.origin) + BigInt(Math.round(relTs))).toString();
  api("api/event", { id, ts: abs }).then((ev) => {
    S.lastEvent = ev;
    const f = ev.event.fields;
    let h = `<h3>${esc(f.name)}</h3><table>`;
    for (const [k, v] of Object.entries(f)) h += `<tr><td>${esc(k)}</td><td>${esc(v === null ? "NULL" : v)}</td></tr>`;
    h += `</table><h3>SQL</h3><pre>${esc(ev.event.sql)}</pre>`;
    if (ev.parents.length) {
      h += "<h3>parents</h3><table>";
      for (const p of ev.parents) h += `<tr><td>${esc(p.fields.depth)}</td><td>${esc(p.fields.name)}</td><td>${humanDuration(p.fields.dur)}</td></tr>`;
      h += "</table>";
    }
    detailsEl.innerHTML = h;
  }).catch((e) => { detailsEl.innerHTML = `<span class="err">${esc(e.message)}</span>`; });
}

function showResults(title, res, idCol, tsCol, durCol) {
  S.hits = [];
  let h = `<h3>${esc(title)}${res.truncated ? " (first rows)" : ""}</h3><table><tr>`;
  for (const c of res.columns) h += `<th>${esc(c)}</th>`;
  h += "</tr>";
  res.rows.forEach((r, i) => {
    const hit = idCol >= 0 && tsCol >= 0 && r[idCol] !== null && r[tsCol] !== null;
    if (hit) {
      const rel = Number(BigInt(r[tsCol]) - BigInt(S.meta.origin));
      S.hits.push({ id: String(r[idCol]), track: trackOfId(r[idCol]), ts: rel, dur: durCol >= 0 ? Number(r[durCol]) : 0 });
    }
    h += `<tr class="${hit ? "hit" : ""}" data-i="${hit ? S.hits.length - 1 : -1}">` +
      r.map((v) => `<td>${esc(v === null ? "NULL" : v)}</td>`).join("") + "</tr>";
  });
  resultsEl.innerHTML = h + "</table>";
  draw();
}
resultsEl.addEventListener("click", (e) => {
  const tr = e.target.closest("tr.hit");
  if (!tr) return;
  const hit = S.hits[Number(tr.dataset.i)];
  const span = Math.max(hit.dur * 4, 2000);
  S.v0 = hit.ts - span / 2 + hit.dur / 2; S.v1 = S.v0 + span;
  request(true); redraw();
});
document.getElementById("search").addEventListener("keydown", (e) => {
  if (e.key !== "Enter") return;
  api("api/search", { glob: e.target.value }).then((res) => {
    S.lastSearch = res;
    showResults(`search ${e.target.value}: ${res.rows.length} events (longest first)`, res, 0, 6, 5);
  }).catch((err) => { resultsEl.innerHTML = `<span class="err">${esc(err.message)}</span>`; });
});
document.getElementById("sql").addEventListener("keydown", (e) => {
  if (e.key !== "Enter") return;
  api("api/sql", { q: e.target.value }).then((res) => {
    S.lastSql = res;
    showResults(`${res.rows.length} rows`, res, res.columns.indexOf("id"), res.columns.indexOf("ts"), res.columns.indexOf("dur"));
  }).catch((err) => { resultsEl.innerHTML = `<span class="err">${esc(err.message)}</span>`; });
});

// ---- start ----
api("api/meta", {}).then((m) => {
  S.meta = m;
  document.getElementById("dbname").textContent = `${m.db} · ${m.ranks.length} ranks · ${m.events} events`;
  S.v0 = 0; S.v1 = Math.max(1000, m.duration);
  draw();
  fetchWindow();
}).catch((e) => { statusEl.innerHTML = `<span class="err">${esc(e.message)}</span>`; S.errors.push(e.message); });
})();
