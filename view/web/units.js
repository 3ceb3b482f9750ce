// Human units for tracedb's web pages: the `tracedb view` timeline (served as /units.js) and the
// `tracedb report html` page (inlined into it at build time by shell/embed_file.cmake). The one
// JavaScript twin of query/human_units.cc: humanDuration() and humanBytes() print what the SQL
// functions human_duration() and human_bytes() print, character for character (tests/units_js_test
// compares them), so a number reads the same in the terminal, the report and the timeline.

// x with d decimals as C's printf("%.*f") writes it: the nearest decimal, exact ties to even
// (toFixed rounds them away from zero: 1.125 -> "1.13" where printf gives "1.12"). toFixed(100)
// is x's exact decimal expansion for the magnitudes printed here (a double below 2^53 with a
// fraction has at most 52 fractional binary digits, so at most 52 decimal ones).
function tracedbFixed(x, d) {
  const s = x.toFixed(d);
  if (!(Math.abs(x) < 1e21)) return s;
  const exact = x.toFixed(100);
  const rest = exact.slice(exact.indexOf(".") + 1 + d);
  if (!/^50*$/.test(rest)) return s;  // not a tie: toFixed took the nearest
  // A tie: of the two neighbours, the one whose last digit is even.
  const down = exact.slice(0, exact.indexOf(".") + 1 + d).replace(/\.$/, "");
  const last = Number(down[down.length - 1]);
  if (last % 2 === 0) return down === "-0" ? "-0" : down;
  return s;  // toFixed went away from zero, to the odd digit's even neighbour
}

// Nanoseconds: "812 ns", "3.40 us", "12.35 ms", "1.250 s" (HumanDuration).
function humanDuration(ns) {
  const a = Math.abs(ns);
  if (a < 1e3) return tracedbFixed(ns, 0) + " ns";
  if (a < 1e6) return tracedbFixed(ns / 1e3, 2) + " us";
  if (a < 1e9) return tracedbFixed(ns / 1e6, 2) + " ms";
  return tracedbFixed(ns / 1e9, 3) + " s";
}

// Bytes in powers of 1000: "512 B", "1.5 KB", "3.2 MB" (HumanBytes).
function humanBytes(bytes) {
  const units = ["B", "KB", "MB", "GB", "TB", "PB"];
  let u = 0;
  while (Math.abs(bytes) >= 1000 && u < 5) {
    bytes /= 1000;
    ++u;
  }
  return tracedbFixed(bytes, u === 0 ? 0 : 1) + " " + units[u];
}

if (typeof module !== "undefined") module.exports = { humanDuration, humanBytes };
