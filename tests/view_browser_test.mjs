// Drives the `tracedb view` page in headless Chromium (Debian's, through playwright-core) and
// prints what it saw as one JSON object; tests/view_browser_test.cc checks it against SQL.
// Usage: node view_browser_test.mjs PLAYWRIGHT_CORE_DIR CHROMIUM URL OUT_DIR
// Steps: the page loads and paints; the rows of every rank appear; W zooms in (the window the
// server answered changes); a click on an event shows its fields; a search outlines matches;
// the SQL box highlights its rows; the "critical path & waits" box draws /api/why's answer
// (and turning it off removes it); a screenshot (OUT_DIR/view.png) is not blank; a request
// without the token is refused.
import { createRequire } from "node:module";
import path from "node:path";

const [pwDir, chromium, url, outDir] = process.argv.slice(2);
const require = createRequire(path.resolve(pwDir) + "/");
const { chromium: launcher } = require(pwDir);

const out = { steps: [] };
const fail = (msg) => { out.error = msg; console.log(JSON.stringify(out)); process.exit(1); };

const browser = await launcher.launch({
  executablePath: chromium, headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--enable-precise-memory-info"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 700 } });
  const consoleErrors = [];
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  const t0 = Date.now();
  await page.goto(url);
  await page.waitForFunction(() => window.__tdb && window.__tdb.answered >= 1, null, { timeout: 20000 });
  out.first_paint_ms = Date.now() - t0;
  const st = () => page.evaluate(() => {
    const S = window.__tdb;
    return {
      v0: S.v0, v1: S.v1, answered: S.answered, paints: S.paints,
      win: S.win && { t0: S.win.t0, t1: S.win.t1, coarse: S.win.coarse, tracks: S.win.tracks.map((t) => t.track) },
      rankRows: S.rows.filter((r) => r.kind === "rank").map((r) => r.rank),
      trackRows: S.rows.filter((r) => r.kind === "track").map((r) => r.track),
      ranks: S.meta.ranks.map((r) => r.rank), errors: S.errors,
    };
  });
  const first = await st();
  out.ranks = first.ranks;
  out.rank_rows = first.rankRows;
  out.track_rows = first.trackRows;
  out.first_window = first.win;

  // Zoom in with W (four times), around the middle; the server's answer follows.
  await page.focus("#tl");
  for (let i = 0; i < 4; i++) await page.keyboard.press("w");
  await page.waitForFunction((n) => window.__tdb.answered > n && window.__tdb.win.t1 !== undefined &&
    window.__tdb.win.w1 - window.__tdb.win.base < (window.__tdb.meta.duration * 0.6), first.answered, { timeout: 20000 });
  const zoomed = await st();
  out.zoomed_window = zoomed.win;
  out.zoomed_view = [zoomed.v0, zoomed.v1];

  // A key press sends its request at once (no debounce) and draws the previous answer, moved,
  // at the next frame; then the answer replaces it.
  out.key_press = await page.evaluate(async () => {
    const S = window.__tdb;
    const n = S.requests, p = S.paints, a = S.answered;
    document.getElementById("tl").dispatchEvent(new KeyboardEvent("keydown", { key: "d", bubbles: true }));
    const sent = S.requests - n;
    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
    const previewed = S.paints > p || S.answered > a;
    return { sent, previewed };
  });

  const target = await page.evaluate(() => {
    const S = window.__tdb;
    S.v0 = 100 * 100000 + 40000; S.v1 = S.v0 + 60000;   // backward of step 100 lies inside
    return true;
  });
  if (!target) fail("could not set the view");
  const before = (await st()).answered;
  await page.keyboard.press("d");
  await page.keyboard.press("a");
  await page.waitForFunction((n) => window.__tdb.answered > n + 0 && window.__tdb.ctrl && window.__tdb.win, before, { timeout: 20000 });
  await page.waitForTimeout(200);
  const pick = await page.evaluate(() => {
    const S = window.__tdb;
    const row = S.rows.find((r) => r.kind === "track" && r.track === 1);
    const lod = S.win.byTrack.get(1);
    if (!row || !lod) return null;
    const it = lod.items.find((x) => S.win.names[x[3]] === "backward");
    if (!it) return null;
    const rect = document.getElementById("tl").getBoundingClientRect();
    const plotW = rect.width - 190;
    const mid = S.win.base + it[1] + it[2] / 2;
    const x = 190 + (mid - S.v0) / (S.v1 - S.v0) * plotW;
    const y = row.y + 1 + it[4] * 14 + 7;
    return { id: it[0], ts: it[1] + S.win.base, dur: it[2], x: rect.left + x, y: rect.top + y };
  });
  if (!pick) fail("no backward span drawn on track 1 after zooming in");
  await page.mouse.click(pick.x, pick.y);
  await page.waitForFunction((id) => window.__tdb.lastEvent && window.__tdb.lastEvent.event.fields.id !== undefined &&
    String(window.__tdb.lastEvent.event.fields.id) === id, pick.id, { timeout: 20000 });
  out.clicked = await page.evaluate(() => window.__tdb.lastEvent);
  out.clicked_pick = pick;
  out.details_text = await page.textContent("#details");

  // Search and SQL box.
  await page.fill("#search", "MPI_Send");
  await page.press("#search", "Enter");
  await page.waitForFunction(() => window.__tdb.lastSearch, null, { timeout: 20000 });
  out.search_rows = await page.evaluate(() => window.__tdb.lastSearch.rows.length);
  await page.fill("#sql", "SELECT id, ts, dur, name FROM events WHERE name = 'MPI_Allreduce' AND rank = 1 AND step < 3");
  await page.press("#sql", "Enter");
  await page.waitForFunction(() => window.__tdb.lastSql, null, { timeout: 20000 });
  out.sql_rows = await page.evaluate(() => window.__tdb.lastSql.rows.length);
  out.highlights = await page.evaluate(() => window.__tdb.hits.length);

  // The critical path and the waits: the box asks /api/why for the window and draws it. In a
  // window of one step (100 us), the reddish pixels of the longest wait's rectangle on its track
  // and of the rank headers' bars at a piece, with the overlay on and then off.
  await page.evaluate(() => { const S = window.__tdb; S.v0 = 200 * 100000; S.v1 = S.v0 + 100000; });
  const nWhy = (await st()).answered;
  await page.focus("#tl");
  await page.keyboard.press("a");
  await page.keyboard.press("d");
  await page.waitForFunction((n) => window.__tdb.answered > n, nWhy, { timeout: 20000 });
  await page.check("#why");
  await page.waitForFunction(() => window.__tdb.why && window.__tdb.why.pieces, null, { timeout: 60000 });
  const whyPixels = () => page.evaluate(() => {
    const S = window.__tdb, c = document.getElementById("tl"), g = c.getContext("2d");
    const dpr = window.devicePixelRatio || 1, W = c.clientWidth, plotW = W - 190;
    const xOf = (t) => 190 + ((t - S.v0) / (S.v1 - S.v0)) * plotW;
    const red = (x0, y0, x1, y1) => {
      const w = Math.max(1, Math.round((x1 - x0) * dpr)), h = Math.max(1, Math.round((y1 - y0) * dpr));
      const d = g.getImageData(Math.round(x0 * dpr), Math.round(y0 * dpr), w, h).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4) if (d[i] > d[i + 1] + 60 && d[i] > d[i + 2] + 60) n++;
      return n;
    };
    const why = S.last_why || S.why;
    S.last_why = why;
    const waits = why.waits.rows.filter((r) => xOf(r[1]) > 192 && xOf(r[1] + r[2]) < W - 2);
    waits.sort((a, b) => b[2] - a[2]);
    const w = waits[0];
    const track = w && Number(BigInt(w[5]) >> 32n);
    const row = w && S.rows.find((r) => r.kind === "track" && r.track === track);
    const p = why.pieces.rows.find((r) => xOf(r[1] + r[2]) - xOf(r[1]) > 6 && xOf(r[1]) > 192 && xOf(r[1] + r[2]) < W - 2);
    const hdr = p && S.rows.find((r) => r.kind === "rank" && r.rank === p[0]);
    return {
      pieces: why.pieces.rows.length, waits: why.waits.rows.length,
      wait: w ? { rank: w[0], pattern: w[3], dur: w[2], track, red: row ? red(xOf(w[1]), row.y + 1, xOf(w[1] + w[2]), row.y + row.h - 2) : -1 } : null,
      piece: p ? { rank: p[0], red: hdr ? red(xOf(p[1]) + 1, hdr.y + hdr.h - 3, xOf(p[1] + p[2]) - 1, hdr.y + hdr.h - 1) : -1 } : null,
      info: document.getElementById("whyinfo").textContent,
    };
  });
  out.why_on = await whyPixels();
  await page.screenshot({ path: `${outDir}/view-why.png` });
  await page.uncheck("#why");
  out.why_off = await whyPixels();

  // With more tracks than S.manyTracks, only the tracks on screen are asked for; a collapsed
  // rank by its first track. Here: rank 1 collapsed, so its other tracks are not in the answer.
  const nOnly = (await st()).answered;
  await page.evaluate(() => {
    const S = window.__tdb;
    S.manyTracks = 2;
    S.collapsedRank.add(1);
    document.getElementById("tl").dispatchEvent(new KeyboardEvent("keydown", { key: "d", bubbles: true }));
  });
  await page.waitForFunction((n) => window.__tdb.answered > n, nOnly, { timeout: 20000 });
  out.only_tracks = await page.evaluate(() => {
    const S = window.__tdb;
    const asked = new URLSearchParams(S.lastQuery).get("tracks");
    const answered = S.win.tracks.map((t) => t.track).sort((a, b) => a - b);
    S.manyTracks = 64;
    S.collapsedRank.delete(1);
    return { asked, answered };
  });

  // A screenshot of the whole-job view, and how many colours the canvas holds.
  await page.evaluate(() => { const S = window.__tdb; S.v0 = 0; S.v1 = S.meta.duration; S.hits = []; });
  const n0 = (await st()).answered;
  await page.focus("#tl");
  await page.keyboard.press("s");
  await page.waitForFunction((n) => window.__tdb.answered > n, n0, { timeout: 20000 });
  await page.evaluate(() => { const S = window.__tdb; S.v0 = 5 * 100000; S.v1 = 9 * 100000; });
  await page.keyboard.press("a");
  await page.keyboard.press("d");
  await page.waitForTimeout(600);
  await page.screenshot({ path: `${outDir}/view.png` });
  out.colours = await page.evaluate(() => {
    const c = document.getElementById("tl");
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    const seen = new Set();
    for (let i = 0; i < d.length; i += 4 * 7) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
    return seen.size;
  });
  out.js_heap_mb = await page.evaluate(() => performance.memory ? performance.memory.usedJSHeapSize / 1e6 : -1);

  // Without the token: refused.
  const u = new URL(url);
  const noToken = await page.evaluate(async (base) => (await fetch(base + "api/meta")).status, `${u.origin}/`);
  out.no_token_status = noToken;
  out.page_errors = consoleErrors.concat((await st()).errors);
  console.log(JSON.stringify(out));
} catch (e) {
  fail(String(e && e.stack || e));
} finally {
  await browser.close();
}
