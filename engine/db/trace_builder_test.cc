// TraceBuilder: a stream cut into batches, with the open spans saved and loaded between them,
// gives the rows of the same stream built in one batch. The stack mixes finished complete events
// and open spans with arguments and JSON, which the builder keeps apart and must save in order.
#include "engine/db/trace_builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "engine/db/event_block.h"
#include "engine/db/trace_writer.h"
#include "engine/util/coding.h"
#include "tests/db_invariants.h"
#include "tests/db_rows.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

struct Op {
  enum Kind { kBegin, kEnd, kComplete, kInstant, kCounter } kind;
  uint32_t track_index;
  int64_t ts, dur;
  int name;
  bool with_args;
  std::string json;
};

// A deterministic stream over three tracks: nested begin/end pairs, complete events inside and
// around them (some still unfinished when a batch ends), instants and counters.
std::vector<Op> MakeOps(uint32_t seed, size_t n) {
  std::mt19937 rng(seed);
  std::vector<Op> ops;
  int64_t ts[3] = {1000, 1000, 1000};
  int open[3] = {0, 0, 0};
  for (size_t i = 0; i < n; ++i) {
    const uint32_t t = rng() % 3;
    ts[t] += 1 + rng() % 50;
    Op op{Op::kInstant, t, ts[t], 0, static_cast<int>(rng() % 5), rng() % 3 == 0, ""};
    if (rng() % 4 == 0) op.json = "{\"i\": " + std::to_string(i) + "}";
    switch (rng() % 6) {
      case 0:
      case 1:
        op.kind = Op::kBegin;
        ++open[t];
        break;
      case 2:
        if (open[t] > 0) {
          op.kind = Op::kEnd;
          --open[t];
        }
        break;
      case 3:
        op.kind = Op::kComplete;
        op.dur = rng() % 200;
        break;
      case 4:
        op.kind = Op::kCounter;
        break;
      default:
        break;
    }
    ops.push_back(op);
  }
  for (uint32_t t = 0; t < 3; ++t) {
    for (; open[t] > 0; --open[t]) ops.push_back({Op::kEnd, t, ts[t] += 1000, 0, 0, true, ""});
  }
  return ops;
}

// Writes `ops` to a new DB at `path`, one batch per `batch` ops, the builder's state saved at
// the end of each batch and loaded by a new builder at the start of the next.
void Build(const std::string& path, const std::vector<Op>& ops, size_t batch) {
  auto w = engine::TraceWriter::Open(path);
  ASSERT_TRUE(w.ok());
  engine::TraceWriter& tw = **w;
  for (size_t start = 0; start < ops.size(); start += batch) {
    ASSERT_TRUE(tw.BeginBatch().ok());
    uint32_t tracks[3];
    for (int i = 0; i < 3; ++i) {
      engine::TrackSpec spec;
      spec.rank = i % 2;
      spec.name = "t" + std::to_string(i);
      spec.local_id = i;
      tracks[i] = tw.Track(spec);
    }
    engine::TraceBuilder b(&tw);
    ASSERT_TRUE(b.LoadState("test.state").ok());
    for (size_t i = start; i < std::min(ops.size(), start + batch); ++i) {
      const Op& op = ops[i];
      const uint32_t track = tracks[op.track_index];
      const uint32_t name = tw.Intern("n" + std::to_string(op.name));
      engine::EventArgs args;
      args.mask = engine::EventArgs::kBytes | engine::EventArgs::kPeer | engine::EventArgs::kSeq;
      args.bytes = 100 + i;
      args.peer = static_cast<int32_t>(i % 7);
      args.seq = i;
      const engine::EventArgs* a = op.with_args ? &args : nullptr;
      Status s;
      switch (op.kind) {
        case Op::kBegin:
          s = b.Begin(track, op.ts, name, 0, a, op.json);
          break;
        case Op::kEnd:
          s = b.End(track, op.ts, a, op.json);
          break;
        case Op::kComplete:
          s = b.Complete(track, op.ts, op.dur, name, 0, a, op.json);
          break;
        case Op::kInstant:
          s = b.Instant(track, op.ts, name, 0, a, op.json);
          break;
        case Op::kCounter:
          s = b.Counter(track, op.ts, name, 0, static_cast<double>(i));
          break;
      }
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    ASSERT_TRUE(b.SaveState("test.state").ok());
    ASSERT_TRUE(tw.CommitBatch().ok());
  }
}

// The rows as CSV, then each row's ids (k, parent_k), which the CSV leaves out.
std::string RowsOf(const std::vector<DbRow>& rows) {
  std::string out = RowsCsv(rows);
  for (const DbRow& r : rows) {
    out += std::to_string(r.k) + " " + std::to_string(r.parent_k) + "\n";
  }
  return out;
}

TEST(TraceBuilderState, BatchesWithSavedOpenSpansEqualOneBatch) {
  TempDir tmp;
  const std::vector<Op> ops = MakeOps(7, 6000);
  const std::string one = tmp.Sub("one.tdb");
  Build(one, ops, ops.size());
  const std::vector<DbRow> rows = ReadDbRows(one);
  // A span is one row, written at its end.
  size_t expected = 0;
  for (const Op& op : ops) expected += op.kind == Op::kBegin ? 0 : 1;
  EXPECT_EQ(rows.size(), expected);
  // The stream holds what the state must carry: nested spans with JSON and arguments.
  size_t nested = 0, with_json = 0, with_args = 0, counters = 0;
  for (const DbRow& r : rows) {
    nested += r.depth > 0 ? 1 : 0;
    with_json += r.json.empty() ? 0 : 1;
    with_args += r.args.mask != 0 ? 1 : 0;
    counters += r.kind == "counter" ? 1 : 0;
  }
  EXPECT_GT(nested, 1000u);
  EXPECT_GT(with_json, 500u);
  EXPECT_GT(with_args, 1000u);
  EXPECT_GT(counters, 500u);
  const std::string want = RowsOf(rows);
  for (size_t batch : {29, 250, 997}) {
    const std::string cut = tmp.Sub("cut" + std::to_string(batch) + ".tdb");
    Build(cut, ops, batch);
    EXPECT_TRUE(RowsOf(ReadDbRows(cut)) == want) << "batches of " << batch << " differ";
  }
}

// CompleteRun gives what Complete gives event by event: the same rows, ids, nesting and defect
// counts (negative durations, improper nesting), also where a run crosses a full block.
void BuildCompletes(const std::string& path, bool runs) {
  auto w = engine::TraceWriter::Open(path);
  ASSERT_TRUE(w.ok());
  engine::TraceWriter& tw = **w;
  ASSERT_TRUE(tw.BeginBatch().ok());
  uint32_t tracks[2];
  for (int i = 0; i < 2; ++i) {
    engine::TrackSpec spec;
    spec.rank = i;
    spec.name = "t" + std::to_string(i);
    spec.local_id = i;
    tracks[i] = tw.Track(spec);
  }
  const uint32_t names[3] = {tw.Intern("a"), tw.Intern("b"), tw.Intern("c")};
  engine::EventArgs args;
  args.mask = engine::EventArgs::kPeer | engine::EventArgs::kFlow;
  args.peer = 3;
  args.flow = 77;
  engine::TraceBuilder b(&tw);
  std::mt19937 rng(11);
  int64_t ts = 1000;
  std::vector<engine::TraceBuilder::RunEvent> run;
  // Runs of 1 to 300 events on one track, then the other: 3 blocks' worth of rows in all.
  size_t made = 0;
  for (int r = 0; made < 3 * engine::TraceWriter::kBlockRows; ++r) {
    const uint32_t track = tracks[r % 2];
    run.clear();
    for (size_t n = 1 + rng() % 300; n > 0; --n) {
      ts += rng() % 40;
      const uint32_t pick = rng() % 100;
      // Mostly nested or disjoint; a few overlapping (improper) or negative.
      const int64_t dur = pick < 3 ? -5 : static_cast<int64_t>(rng() % 120);
      run.push_back({ts, dur, names[rng() % 3], names[rng() % 2], pick % 4 == 0 ? &args : nullptr});
    }
    made += run.size();
    if (runs) {
      ASSERT_TRUE(b.CompleteRun(track, run.data(), run.size()).ok());
    } else {
      for (const engine::TraceBuilder::RunEvent& e : run) {
        ASSERT_TRUE(b.Complete(track, e.ts, e.dur, e.name, e.cat, e.args).ok());
      }
    }
  }
  ASSERT_TRUE(tw.CommitBatch().ok());
}

TEST(TraceBuilderRuns, CompleteRunEqualsCompleteOneByOne) {
  TempDir tmp;
  const std::string one = tmp.Sub("one.tdb"), runs = tmp.Sub("runs.tdb");
  BuildCompletes(one, false);
  BuildCompletes(runs, true);
  const std::vector<DbRow> rows = ReadDbRows(one);
  ASSERT_GE(rows.size(), 3 * engine::TraceWriter::kBlockRows);
  size_t nested = 0, with_args = 0;
  for (const DbRow& r : rows) {
    nested += r.depth > 0 ? 1 : 0;
    with_args += r.args.mask != 0 ? 1 : 0;
  }
  EXPECT_GT(nested, 1000u);
  EXPECT_GT(with_args, 1000u);
  EXPECT_TRUE(RowsOf(ReadDbRows(runs)) == RowsOf(rows));
  const std::string stats = "SELECT name, rank, value FROM stats";
  const std::string want = QueryRows(one, stats);
  EXPECT_NE(want.find("negative_duration"), std::string::npos) << want;
  EXPECT_NE(want.find("improper_nesting"), std::string::npos) << want;
  EXPECT_EQ(QueryRows(runs, stats), want);
  const std::string blocks = "SELECT rank, min_ts, max_end, max_dur, count, hex(data) FROM blocks";
  EXPECT_EQ(QueryRows(runs, blocks), QueryRows(one, blocks));
}

// The one track of rank 0 that the tests below write: thread "main", recorder index 0.
uint32_t MainTrack(engine::TraceWriter* tw) {
  engine::TrackSpec spec;
  spec.rank = 0;
  spec.name = "main";
  spec.local_id = 0;
  return tw->Track(spec);
}

// Complete events that overlap without nesting: each starts 10 ns after the one before and lasts
// a random 0-1 ms (spans recorded after the fact with a clock read: the default random_spans
// workload). By the nesting rule each is the child of the one before (depth = its index); the
// stack keeps every ended frame under a running one, so before the pruning it held every frame:
// 1.2 GB of peak RSS and a 318 MB saved state for 10M events. Known answers: the depth and
// parent of every row from a plain stack of the rule, never pruned, as runs and one by one, in
// batches with the state saved and loaded between them; the last saved state's frames, set by
// the events still running (about 100,000 of 200,000 here), not by the events seen.
struct Overlap {
  int64_t ts, dur;
};
std::vector<Overlap> OverlappingSpans(size_t n) {
  std::mt19937_64 rng(7);
  std::vector<Overlap> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = {1000000 + static_cast<int64_t>(i) * 10, static_cast<int64_t>(rng() % 1000000)};
  }
  return out;
}

// Builds `spans` on one track in batches of `batch` (as runs of up to 700, or one by one),
// saving and loading the stack between batches; returns the frames of the last saved state.
size_t BuildOverlapping(const std::string& path, const std::vector<Overlap>& spans, size_t batch,
                        bool runs) {
  auto w = engine::TraceWriter::Open(path);
  EXPECT_TRUE(w.ok());
  engine::TraceWriter& tw = **w;
  uint64_t frames = 0;
  for (size_t start = 0; start < spans.size(); start += batch) {
    EXPECT_TRUE(tw.BeginBatch().ok());
    const uint32_t track = MainTrack(&tw);
    const uint32_t name = tw.Intern("span");
    engine::TraceBuilder b(&tw);
    EXPECT_TRUE(b.LoadState("test.state").ok());
    const size_t end = std::min(spans.size(), start + batch);
    std::vector<engine::TraceBuilder::RunEvent> run;
    for (size_t i = start; i < end; ++i) {
      if (!runs) {
        EXPECT_TRUE(b.Complete(track, spans[i].ts, spans[i].dur, name, 0, nullptr).ok());
        continue;
      }
      run.push_back({spans[i].ts, spans[i].dur, name, 0, nullptr});
      if (run.size() == 700 || i + 1 == end) {
        EXPECT_TRUE(b.CompleteRun(track, run.data(), run.size()).ok());
        run.clear();
      }
    }
    EXPECT_TRUE(b.SaveState("test.state").ok());
    // Format 2: format, tracks, the track's id, its frames.
    auto state = tw.LoadState("test.state");
    EXPECT_TRUE(state.ok() && state->has_value());
    if (state.ok() && state->has_value()) {
      engine::Reader r(**state);
      uint64_t format = 0, tracks = 0, id = 0;
      EXPECT_TRUE(r.GetVarint64(&format) && r.GetVarint64(&tracks) && r.GetVarint64(&id) &&
                  r.GetVarint64(&frames));
      EXPECT_EQ(format, 2u);
    }
    EXPECT_TRUE(tw.CommitBatch().ok());
  }
  return frames;
}

TEST(TraceBuilderStack, OverlappingCompletesKeepABoundedStack) {
  TempDir tmp;
  const std::vector<Overlap> spans = OverlappingSpans(200000);
  // The rule on a plain stack: pop what ended at or before ts; the top is the parent.
  struct Ref {
    uint64_t k;
    int64_t end;
  };
  std::vector<Ref> stack;
  std::string want;
  for (size_t i = 0; i < spans.size(); ++i) {
    while (!stack.empty() && stack.back().end <= spans[i].ts) stack.pop_back();
    want += std::to_string(spans[i].ts) + " " + std::to_string(spans[i].dur) + " " +
            std::to_string(stack.size()) + " " +
            std::to_string(stack.empty() ? 0 : stack.back().k + 1) + "\n";
    stack.push_back({i, spans[i].ts + spans[i].dur});
  }
  EXPECT_GT(stack.size(), 190000u);  // what the stack held without pruning
  auto rows_of = [](const std::string& path) {
    std::string out;
    for (const DbRow& r : ReadDbRows(path)) {
      out += std::to_string(r.ts) + " " + std::to_string(r.dur) + " " + std::to_string(r.depth) +
             " " + std::to_string(r.parent_k) + "\n";
    }
    return out;
  };
  // The events still running at the end: those the rule keeps, besides those a pruned stack
  // has not yet dropped (it prunes at twice what it kept, from 4,096 frames).
  size_t running = 0;
  for (const Overlap& o : spans) running += o.ts + o.dur > spans.back().ts ? 1 : 0;
  const std::string runs = tmp.Sub("runs.tdb"), one = tmp.Sub("one.tdb");
  const size_t frames_runs = BuildOverlapping(runs, spans, 70000, true);
  const size_t frames_one = BuildOverlapping(one, spans, 70000, false);
  EXPECT_TRUE(rows_of(runs) == want);
  EXPECT_TRUE(rows_of(one) == want);
  EXPECT_LT(running, 110000u);
  EXPECT_LE(frames_runs, 2 * running + 4096) << running;
  EXPECT_LE(frames_one, 2 * running + 4096) << running;
  EXPECT_GE(frames_runs, running);  // every running frame is kept
}

// A span begun inside a complete event that ends first (improper), then buried under 5,000
// overlapping complete events, so that the stack is pruned after its parent ended: when the span
// ends, its parent is still the complete event it began in, as on a plain stack.
TEST(TraceBuilderStack, AnOpenSpanKeepsItsEndedParentThroughPruning) {
  TempDir tmp;
  const std::string path = tmp.Sub("open.tdb");
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok());
    engine::TraceWriter& tw = **w;
    ASSERT_TRUE(tw.BeginBatch().ok());
    const uint32_t track = MainTrack(&tw);
    const uint32_t name = tw.Intern("x"), outer = tw.Intern("outer"), open = tw.Intern("open");
    engine::TraceBuilder b(&tw);
    ASSERT_TRUE(b.Complete(track, 0, 100, outer, 0, nullptr).ok());  // k 0
    ASSERT_TRUE(b.Begin(track, 10, open, 0, nullptr).ok());          // k 1, inside k 0
    for (int64_t i = 0; i < 5000; ++i) {                             // k 2.., each inside the last
      ASSERT_TRUE(b.Complete(track, 200 + i, 1000000000, name, 0, nullptr).ok());
    }
    ASSERT_TRUE(b.End(track, 300000).ok());
    ASSERT_TRUE(tw.CommitBatch().ok());
  }
  int seen = 0;
  for (const DbRow& r : ReadDbRows(path)) {
    if (r.name == "open") {
      ++seen;
      EXPECT_EQ(r.k, 1u);
      EXPECT_EQ(r.depth, 1u);
      EXPECT_EQ(r.parent_k, 1u);  // k 0 + 1
      EXPECT_EQ(r.dur, 300000 - 10);
    } else if (r.name == "x" && r.k == 4001) {
      ++seen;
      EXPECT_EQ(r.depth, 4001u);  // under the open span and 3,999 before it
    }
  }
  EXPECT_EQ(seen, 2);
}

// A saved state of format 1 (before frames kept their depth: a frame's depth was its index)
// still loads: two spans begun in one batch, ended in the next, get depths 0 and 1.
TEST(TraceBuilderStack, StateFormatOneStillLoads) {
  TempDir tmp;
  const std::string path = tmp.Sub("v1.tdb");
  auto w = engine::TraceWriter::Open(path);
  ASSERT_TRUE(w.ok());
  engine::TraceWriter& tw = **w;
  ASSERT_TRUE(tw.BeginBatch().ok());
  const uint32_t track = MainTrack(&tw);
  const uint32_t outer = tw.Intern("outer"), inner = tw.Intern("inner");
  ASSERT_EQ(tw.TakeKs(track, 2), 0u);
  // Format 1: format, tracks, then per track its id, frames, and per frame k, ts, end, name,
  // cat, 7 argument varints, JSON.
  std::string blob;
  engine::PutVarint64(&blob, 1);
  engine::PutVarint64(&blob, 1);
  engine::PutVarint64(&blob, track);
  engine::PutVarint64(&blob, 2);
  for (uint32_t f = 0; f < 2; ++f) {
    engine::PutVarint64(&blob, f);
    engine::PutVarsigned(&blob, 100 + 10 * f);
    engine::PutVarsigned(&blob, INT64_MAX);
    engine::PutVarint64(&blob, f == 0 ? outer : inner);
    engine::PutVarint64(&blob, 0);
    for (int a = 0; a < 7; ++a) engine::PutVarint64(&blob, 0);
    engine::PutVarint64(&blob, 0);
  }
  ASSERT_TRUE(tw.SaveState("test.state", blob).ok());
  ASSERT_TRUE(tw.CommitBatch().ok());
  ASSERT_TRUE(tw.BeginBatch().ok());
  engine::TraceBuilder b(&tw);
  ASSERT_TRUE(b.LoadState("test.state").ok());
  ASSERT_TRUE(b.End(track, 200).ok());
  ASSERT_TRUE(b.End(track, 300).ok());
  ASSERT_TRUE(tw.CommitBatch().ok());
  const std::vector<DbRow> rows = ReadDbRows(path);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "outer");
  EXPECT_EQ(rows[0].depth, 0u);
  EXPECT_EQ(rows[0].dur, 200);
  EXPECT_EQ(rows[1].name, "inner");
  EXPECT_EQ(rows[1].depth, 1u);
  EXPECT_EQ(rows[1].parent_k, 1u);
  EXPECT_EQ(rows[1].dur, 90);
}

// Block fitting (block_fit.h) through the writer, with known input: back-to-back spans of random
// 20-bit durations and 8 random names (the case of issue 24), in two batches. After kFitWindow
// blocks of the default 16,384 rows, the blocks take the fitted row count, whether the rows come
// as runs (CompleteRun, which must stop at the fitted count) or one by one: the same blocks. The
// rows read back are the ones written, and the blocks table leaves under 1% of its pages unused
// besides its last leaf (16,384 rows a block left 3%: a 47.7 KB record on 3 whole pages).
void BuildRandomDurations(const std::string& path, bool runs, size_t n, uint64_t* sums) {
  auto w = engine::TraceWriter::Open(path);
  ASSERT_TRUE(w.ok());
  engine::TraceWriter& tw = **w;
  const uint32_t track = MainTrack(&tw);
  uint32_t names[8];
  for (int i = 0; i < 8; ++i) names[i] = tw.Intern("n" + std::to_string(i));
  engine::TraceBuilder b(&tw);
  std::mt19937_64 rng(24);
  int64_t ts = 1700000000000000000;
  std::vector<engine::TraceBuilder::RunEvent> run;
  size_t made = 0;
  for (int batch = 0; batch < 2; ++batch) {
    ASSERT_TRUE(tw.BeginBatch().ok());
    while (made < n * (batch + 1) / 2) {
      run.clear();
      for (size_t m = std::min<size_t>(1 + rng() % 5000, n * (batch + 1) / 2 - made); m > 0; --m) {
        const auto dur = static_cast<int64_t>(rng() % 1000000);
        const uint32_t pick = static_cast<uint32_t>(rng() % 8);
        run.push_back({ts, dur, names[pick], 0, nullptr});
        sums[0] += static_cast<uint64_t>(dur);
        sums[1] += static_cast<uint64_t>(ts % 65537) * static_cast<uint64_t>(dur % 65521);
        sums[2] += pick * static_cast<uint64_t>(dur);
        ts += dur;
      }
      made += run.size();
      if (runs) {
        ASSERT_TRUE(b.CompleteRun(track, run.data(), run.size()).ok());
      } else {
        for (const engine::TraceBuilder::RunEvent& e : run) {
          ASSERT_TRUE(b.Complete(track, e.ts, e.dur, e.name, e.cat, nullptr).ok());
        }
      }
    }
    ASSERT_TRUE(tw.CommitBatch().ok());
  }
}

TEST(TraceWriterFit, RandomDurationsFillTheirPages) {
  TempDir tmp;
  const std::string one = tmp.Sub("one.tdb"), runs = tmp.Sub("runs.tdb");
  constexpr size_t kRows = 1200000;
  uint64_t want[3] = {0, 0, 0}, again[3] = {0, 0, 0};
  BuildRandomDurations(runs, true, kRows, want);
  BuildRandomDurations(one, false, kRows, again);
  const std::string blocks =
      "SELECT block, rank, min_ts, max_end, max_dur, count, hex(data) "
      "FROM blocks ORDER BY block";
  EXPECT_TRUE(QueryRows(runs, blocks, false) == QueryRows(one, blocks, false));
  // The rows written: their count, durations, names and (ts, dur) pairs.
  EXPECT_EQ(QueryRows(runs,
                      "SELECT count(*), sum(dur), sum((ts % 65537) * (dur % 65521)), "
                      "sum(CAST(substr(name, 2) AS INTEGER) * dur) FROM events"),
            std::to_string(kRows) + "|" + std::to_string(want[0]) + "|" + std::to_string(want[1]) +
                "|" + std::to_string(want[2]) + "\n");
  // Blocks in order: kFitWindow of 16,384 rows, then the fitted count (within 1%: each block's
  // follows its predecessor's bytes per row), but for the batches' last blocks; never past twice
  // the default.
  const std::string counts = QueryRows(runs, "SELECT count FROM blocks ORDER BY block", false);
  std::vector<size_t> c;
  for (size_t at = 0; at < counts.size();) {
    const size_t eol = counts.find('\n', at);
    c.push_back(std::stoul(counts.substr(at, eol - at)));
    at = eol + 1;
  }
  const size_t w = engine::kFitWindow;
  ASSERT_GE(c.size(), 60u);
  for (size_t i = 0; i < w; ++i) EXPECT_EQ(c[i], 16384u) << i;
  EXPECT_GT(c[w], 16384u);
  EXPECT_LE(c[w], 32768u);
  size_t fitted = 0;
  for (size_t x : c) fitted += x >= c[w] * 99 / 100 && x <= c[w] * 101 / 100 ? 1 : 0;
  EXPECT_GE(fitted + w + 2, c.size()) << counts;  // besides the default ones and two batch ends
  // Unused bytes of the blocks table's leaf and overflow pages, its least filled leaf (the last)
  // aside.
  const std::string use =
      QueryRows(runs,
                "SELECT sum(pgsize), sum(unused) - (SELECT max(unused) FROM dbstat WHERE "
                "name='blocks' AND pagetype='leaf') FROM dbstat WHERE name='blocks' AND "
                "pagetype!='internal'");
  const size_t bar = use.find('|');
  const double pages = std::stod(use.substr(0, bar)), unused = std::stod(use.substr(bar + 1));
  EXPECT_LT(unused / pages, 0.01) << use;
}

// A lane shared by threads (the PyTorch observer's "c10d N" lanes: complete events written at
// completion by gloo's worker threads, each thread's buffer reaching the segment on its own)
// delivers events out of start order. Known answers: disjoint spans never nest whatever their
// arrival; a late event inside an open span gets that span, and one inside nothing gets no
// parent. Checked with plain SQL on the DB (containment of every parent) and the invariants.
TEST(TraceBuilderNesting, LateArrivalsNestByContainmentNotArrival) {
  TempDir tmp;
  const std::string path = tmp.Sub("late.tdb");
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok());
    engine::TraceWriter& tw = **w;
    ASSERT_TRUE(tw.BeginBatch().ok());
    engine::TrackSpec lane_spec;
    lane_spec.rank = 0;
    lane_spec.kind = "lane";
    lane_spec.name = "c10d 0";
    const uint32_t lane = tw.Track(lane_spec);
    engine::TrackSpec outer_spec;
    outer_spec.rank = 0;
    outer_spec.kind = "lane";
    outer_spec.name = "outer";
    const uint32_t outer = tw.Track(outer_spec);
    const uint32_t op = tw.Intern("gloo:all_reduce"), big = tw.Intern("big"),
                   tick = tw.Intern("tick");
    engine::TraceBuilder b(&tw);
    // Disjoint spans of two "threads", arriving as their buffers are flushed: 3, 1, 4, 0, 2.
    const int64_t starts[] = {3000, 1000, 4000, 0, 2000};
    for (int64_t ts : starts) ASSERT_TRUE(b.Complete(lane, ts, 900, op, 0, nullptr).ok());
    ASSERT_TRUE(b.Instant(lane, 500, tick, 0, nullptr).ok());  // late, inside nothing
    // On another track: a big span, a later child, then late arrivals inside the big span.
    ASSERT_TRUE(b.Complete(outer, 0, 10000, big, 0, nullptr).ok());
    ASSERT_TRUE(b.Complete(outer, 6000, 1000, op, 0, nullptr).ok());
    ASSERT_TRUE(b.Complete(outer, 1000, 500, op, 0, nullptr).ok());  // late: parent big
    ASSERT_TRUE(b.Instant(outer, 2000, tick, 0, nullptr).ok());      // late: parent big
    ASSERT_TRUE(tw.CommitBatch().ok());
  }
  // Every parent contains its child, on its track (plain SQL, the issue's own query).
  EXPECT_EQ(QueryRows(path,
                      "SELECT count(*), sum(c.ts >= p.ts AND c.end_ts <= p.end_ts AND "
                      "c.track = p.track AND c.depth = p.depth + 1) FROM events c JOIN events p "
                      "ON c.parent = p.id"),
            "3|3\n");
  EXPECT_EQ(QueryRows(path,
                      "SELECT c.name, c.ts, c.depth, p.name FROM events c LEFT JOIN events p "
                      "ON c.parent = p.id WHERE c.track_name = 'c10d 0' ORDER BY c.ts",
                      false),
            "gloo:all_reduce|0|0|NULL\ntick|500|0|NULL\ngloo:all_reduce|1000|0|NULL\n"
            "gloo:all_reduce|2000|0|NULL\ngloo:all_reduce|3000|0|NULL\n"
            "gloo:all_reduce|4000|0|NULL\n");
  EXPECT_EQ(QueryRows(path,
                      "SELECT c.name, c.ts, c.depth, p.name FROM events c LEFT JOIN events p "
                      "ON c.parent = p.id WHERE c.track_name = 'outer' ORDER BY c.ts",
                      false),
            "big|0|0|NULL\ngloo:all_reduce|1000|1|big\ntick|2000|1|big\n"
            "gloo:all_reduce|6000|1|big\n");
  EXPECT_EQ(QueryRows(path, "SELECT name, value FROM stats"), "late_arrivals|6\n");
  ExpectDbInvariants(path, {.check_info = false});
}

// TraceWriter::AddStat keeps the entry it added to last: repeats, a change of name or rank, and
// a batch's commit (which empties its map) between two additions must all land in their rows.
TEST(TraceWriterStats, AddStatSumsEveryNameAndRankAcrossBatches) {
  TempDir tmp;
  const std::string path = tmp.Sub("stats.tdb");
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok());
    engine::TraceWriter& tw = **w;
    ASSERT_TRUE(tw.BeginBatch().ok());
    tw.AddStat("late_arrivals", 0, 2);
    tw.AddStat("late_arrivals", 0, 3);
    tw.AddStat("improper_nesting", 0, 1);
    tw.AddStat("late_arrivals", 1, 7);
    tw.AddStat(std::string("late_") + "arrivals", 0, 1);  // equal text, another buffer
    ASSERT_TRUE(tw.CommitBatch().ok());
    ASSERT_TRUE(tw.BeginBatch().ok());
    tw.AddStat("late_arrivals", 0, 10);  // the entry added to last is gone with the batch
    tw.AddStat("improper_nesting", -1, 4);
    ASSERT_TRUE(tw.CommitBatch().ok());
  }
  EXPECT_EQ(QueryRows(path, "SELECT name, rank, value FROM stats ORDER BY name, rank"),
            "improper_nesting|-1|4\nimproper_nesting|0|1\nlate_arrivals|0|16\n"
            "late_arrivals|1|7\n");
}

// The invariant checker itself, on rows written past the builder with known defects: a parent
// that starts after its child, one that ends before its child, a depth that is not the parent's
// plus one, and a name_stats count changed behind the rows' back. Each must be reported under its
// rule.
TEST(DbInvariants, CatchWrongParentsDepthsAndCounts) {
  TempDir tmp;
  const std::string path = tmp.Sub("bad.tdb");
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok());
    engine::TraceWriter& tw = **w;
    ASSERT_TRUE(tw.BeginBatch().ok());
    engine::TrackSpec spec;
    spec.rank = 0;
    spec.name = "main";
    spec.local_id = 1;
    const uint32_t track = tw.Track(spec);
    const uint32_t name = tw.Intern("x");
    struct R {
      int64_t ts, dur;
      uint32_t depth;
      uint64_t parent_k;  // k(parent) + 1, 0: none
    };
    // k 0: [100, 150] at the top; k 1: [300, 310] under k 0 (ends after it); k 2: [110, 115]
    // under k 0 at depth 2 (should be 1); k 3: [50, 60] under k 0 (starts before it).
    const R rows[] = {{100, 50, 0, 0}, {300, 10, 1, 1}, {110, 5, 2, 1}, {50, 10, 1, 1}};
    for (const R& r : rows) {
      engine::Row& row = tw.NewRow(0, track);
      row.ts = r.ts;
      row.dur = r.dur;
      row.name = name;
      row.kind = engine::RowKind::kSpan;
      row.k = tw.TakeK(track);
      row.depth = r.depth;
      row.parent_k = r.parent_k;
      ASSERT_TRUE(tw.CommitRow().ok());
    }
    ASSERT_TRUE(tw.CommitBatch().ok());
  }
  int rc = 0;
  RunCommand("sqlite3 " + ShellQuote(path) + " 'UPDATE name_stats SET count = count + 1' 2>&1",
             &rc);
  ASSERT_EQ(rc, 0);
  const std::vector<std::string> bad = DbInvariantViolations(path, {.check_info = false});
  std::string all;
  for (const std::string& b : bad) all += b + "\n";
  for (const char* rule : {"3 parent starts at or before its child",
                           "3 parent ends at or after its child", "4 depth", "6 name_stats"}) {
    EXPECT_NE(all.find(rule), std::string::npos) << rule << " not reported in:\n" << all;
  }
  EXPECT_EQ(all.find("1 unique ids"), std::string::npos) << all;
  EXPECT_EQ(all.find("5 step"), std::string::npos) << all;
}

// The builder's columns (RowColumns, filled by Append and PutSpan) encode to the same bytes and
// zone map as the same rows given as Rows, and decode back to the rows put in: blocks in
// (track, k) order and out of it, with arguments, JSON, open spans, counters, instants, flows,
// negative and huge times, names past the dense table. Each shape again with plain spans only
// (no arguments, JSON, open flag or other kinds: the encoder's passes over the arrays,
// ColumnPass), sorted into (track, k) order but for the shuffled shape, which that pass must
// hand back to the sorting path.
TEST(RowColumns, EncodeEqualsTheRowsEncodedAndDecodesToThem) {
  std::mt19937_64 rng(2424);
  for (int round = 0; round < 12; ++round) {
    const int shape = round % 6;
    const bool plain = round >= 6;
    const size_t n = shape == 0 ? 1 : 1 + rng() % (shape == 5 ? 16384 : 3000);
    std::vector<engine::Row> rows(n);
    uint64_t k[4] = {0, 0, 0, 0};
    int64_t ts = shape == 3 ? INT64_MAX - 4000000000 : -5000;
    for (size_t i = 0; i < n; ++i) {
      engine::Row& r = rows[i];
      r.track =
          1 + (shape == 1 ? static_cast<uint32_t>(i * 4 / n) : static_cast<uint32_t>(rng() % 4));
      r.k = k[r.track - 1]++;
      ts += static_cast<int64_t>(rng() % 1000);
      r.ts = ts;
      r.dur = shape == 4 ? static_cast<int64_t>(rng() >> 1) : static_cast<int64_t>(rng() % 5000);
      r.name = static_cast<uint32_t>(rng() % 7 == 0 ? (1u << 22) + rng() % 9 : 1 + rng() % 40);
      r.cat = static_cast<uint32_t>(rng() % 3);
      r.kind = static_cast<engine::RowKind>(rng() % 10 < 7 ? 0 : rng() % engine::kNumRowKinds);
      r.depth = static_cast<uint32_t>(rng() % 3);
      r.parent_k = r.depth == 0 || r.k == 0 ? 0 : r.k;  // the previous row of the track + 1
      if (rng() % 5 == 0) {
        r.args.mask = static_cast<uint32_t>(rng() % 64);
        r.args.bytes = rng();
        r.args.peer = static_cast<int32_t>(rng());
        r.args.tag = -3;
        r.args.comm = 7;
        r.args.seq = rng() % 100;
        r.args.flow = rng();
      }
      if (rng() % 9 == 0) r.json = "{\"i\":" + std::to_string(i) + "}";
      if (r.kind == engine::RowKind::kCounter) r.value = static_cast<double>(rng() % 1000) / 7;
      r.open = r.kind == engine::RowKind::kSpan && rng() % 50 == 0;
      if (r.kind != engine::RowKind::kSpan) r.dur = 0;
      if (plain) {
        r.kind = engine::RowKind::kSpan;
        r.args = engine::EventArgs();
        r.json.clear();
        r.open = false;
        r.value = 0;
      }
    }
    if (plain && shape != 2) {
      std::stable_sort(rows.begin(), rows.end(), [](const engine::Row& a, const engine::Row& b) {
        return a.track != b.track ? a.track < b.track : a.k < b.k;
      });
    }
    if (shape == 2) std::shuffle(rows.begin(), rows.end(), rng);  // out of (track, k) order
    engine::RowColumns cols;
    cols.Reserve(n);
    for (const engine::Row& r : rows) {
      // Spans without JSON and not open go through PutSpan, as the builder writes them.
      if (r.kind == engine::RowKind::kSpan && r.json.empty() && !r.open) {
        cols.PutSpan(r.ts, r.dur, r.track, r.name, r.cat, r.k, r.depth, r.parent_k,
                     r.args.mask != 0 ? &r.args : nullptr);
      } else {
        cols.Append(r);
      }
    }
    ASSERT_EQ(cols.n, n);
    if (plain) {
      EXPECT_EQ(cols.special, 0u) << "round " << round;
    }
    std::string from_rows, from_cols;
    engine::BlockZone zone_rows, zone_cols;
    engine::EncodeBlock(rows, &from_rows, &zone_rows);
    engine::EncodeBlock(cols, &from_cols, &zone_cols);
    EXPECT_EQ(from_cols, from_rows) << "round " << round;
    EXPECT_EQ(zone_cols.min_ts, zone_rows.min_ts);
    EXPECT_EQ(zone_cols.max_end, zone_rows.max_end);
    EXPECT_EQ(zone_cols.max_dur, zone_rows.max_dur);
    EXPECT_EQ(zone_cols.count, n);
    ASSERT_EQ(zone_cols.names.size(), zone_rows.names.size());
    for (size_t i = 0; i < zone_rows.names.size(); ++i) {
      EXPECT_EQ(zone_cols.names[i].name, zone_rows.names[i].name);
      EXPECT_EQ(zone_cols.names[i].cat, zone_rows.names[i].cat);
      EXPECT_EQ(zone_cols.names[i].kind, zone_rows.names[i].kind);
      EXPECT_EQ(zone_cols.names[i].count, zone_rows.names[i].count);
      EXPECT_EQ(zone_cols.names[i].min_dur, zone_rows.names[i].min_dur);
      EXPECT_EQ(zone_cols.names[i].max_dur, zone_rows.names[i].max_dur);
      EXPECT_EQ(zone_cols.names[i].total_dur, zone_rows.names[i].total_dur);
      EXPECT_EQ(zone_cols.names[i].hist, zone_rows.names[i].hist);
    }
    // Decoded: the rows put in (in (track, k) order), field by field, and RowAt gives them too.
    engine::DecodedBlock d;
    ASSERT_TRUE(engine::DecodeBlock(from_cols, 1, &d).ok());
    ASSERT_EQ(d.n, n);
    std::vector<engine::Row> sorted = rows;
    std::stable_sort(sorted.begin(), sorted.end(), [](const engine::Row& a, const engine::Row& b) {
      return a.track != b.track ? a.track < b.track : a.k < b.k;
    });
    for (size_t i = 0; i < n; ++i) {
      const engine::Row got = d.RowAt(i);
      const engine::Row& want = sorted[i];
      ASSERT_EQ(got.ts, want.ts) << i;
      ASSERT_EQ(got.dur, want.dur) << i;
      ASSERT_EQ(got.track, want.track) << i;
      ASSERT_EQ(got.k, want.k) << i;
      ASSERT_EQ(got.name, want.name) << i;
      ASSERT_EQ(got.kind, want.kind) << i;
      ASSERT_EQ(got.json, want.json) << i;
      ASSERT_EQ(got.open, want.open) << i;
      ASSERT_EQ(got.args.mask, want.args.mask & engine::EventArgs::kAllFields) << i;
      if (want.args.mask & engine::EventArgs::kFlow) {
        ASSERT_EQ(got.args.flow, want.args.flow) << i;
      }
      if (want.kind == engine::RowKind::kCounter) {
        ASSERT_EQ(got.value, want.value) << i;
      }
    }
    for (size_t i = 0; i < n; i += 97) {
      const engine::Row back = cols.RowAt(i);
      EXPECT_EQ(back.ts, rows[i].ts);
      EXPECT_EQ(back.json, rows[i].json);
      EXPECT_EQ(back.open, rows[i].open);
      EXPECT_EQ(back.args.mask & engine::EventArgs::kAllFields,
                rows[i].args.mask & engine::EventArgs::kAllFields);
    }
  }
}

// The duration residuals the encoder codes (engine/db/block_column_codec.cc) against a plain
// computation: a row whose next row in its track is deeper is coded as the zigzag of its
// duration less the sum of its children's (the rows one deeper, up to the next row of its depth
// or less; rows 64 deep or deeper count for nothing), other rows as themselves. The bit-length
// counts it gathers must be those of the residuals: the column coded with them is the column
// coded with counts taken afresh.
TEST(DurationResiduals, EqualAPlainSumOfChildren) {
  constexpr uint32_t kPredictDepth = 64;
  std::mt19937_64 rng(24);
  for (int round = 0; round < 120; ++round) {
    const size_t n = 1 + rng() % 5000;
    std::vector<uint64_t> dur(n);
    std::vector<uint32_t> depth(n), track(n);
    uint32_t t = 1, d = 0;
    for (size_t i = 0; i < n; ++i) {
      dur[i] = round % 3 == 0 ? rng() : rng() % (round % 3 == 1 ? 100 : 100000);
      // Mostly a walk of nesting (siblings, a step in, steps out), sometimes a hostile depth.
      const uint64_t step = rng() % 8;
      d = step < 3 ? d : step < 6 ? d + 1 : static_cast<uint32_t>(rng() % (d + 1));
      if (round % 4 == 3 && d > 50) d = 62 + static_cast<uint32_t>(rng() % 4);
      depth[i] = rng() % 200 == 0 ? static_cast<uint32_t>(rng()) : d;
      if (rng() % 700 == 0) ++t, d = 0;
      track[i] = t;
    }
    std::vector<uint64_t> want = dur;
    for (size_t i = 0; i < n; ++i) {
      if (depth[i] >= kPredictDepth || i + 1 == n || track[i + 1] != track[i] ||
          depth[i + 1] <= depth[i]) {
        continue;
      }
      uint64_t children = 0;
      for (size_t j = i + 1; j < n && track[j] == track[i] && depth[j] > depth[i]; ++j) {
        if (depth[j] == depth[i] + 1 && depth[j] < kPredictDepth) children += dur[j];
      }
      want[i] = engine::ZigZag(static_cast<int64_t>(dur[i] - children));
    }
    std::vector<uint64_t> got = dur;
    engine::HuffmanColumnStats stats;
    engine::DurationsToResiduals(got.data(), depth.data(), track.data(), n, &stats);
    ASSERT_EQ(got, want) << round;
    stats.VoteSample(got.data(), n);
    std::string with_stats, afresh;
    engine::PutHuffmanBitLengthColumn(got.data(), n, stats, &with_stats);
    engine::PutHuffmanBitLengthColumn(got.data(), n, &afresh);
    ASSERT_EQ(with_stats, afresh) << round;
    std::vector<uint64_t> back(n);
    ASSERT_TRUE(engine::GetHuffmanBitLengthColumn(with_stats, n, back.data())) << round;
    ASSERT_EQ(back, got) << round;
  }
}

}  // namespace
}  // namespace tracedb::testing
