#include "engine/segment/segment_blocks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace tracedb::engine {
namespace {

TEST(EventsBlock, RoundTripsEveryKindAndField) {
  EventsBlockEncoder enc;
  enc.Reset(7);
  EventArgs all;
  all.mask = EventArgs::kAllFields;
  all.bytes = 1ull << 40;
  all.peer = -3;
  all.tag = 12345;
  all.comm = 0xfffffffe;
  all.seq = 99;
  all.flow = ~0ull;
  EventArgs some;
  some.mask = EventArgs::kBytes | EventArgs::kSeq;
  some.bytes = 8;
  some.seq = 1;
  enc.Add(EventKind::kBegin, 2, 1000, 5, 0, nullptr);
  enc.Add(EventKind::kEnd, 2, 999, 5, 0, &all);  // a timestamp going backwards
  enc.Add(EventKind::kInstant, 7, std::numeric_limits<int64_t>::max() / 2, 0, 65535, &some);
  enc.AddCounter(0, -5, 9, 3, -2.5);
  enc.AddCounter(0, -4, 9, 3, std::numeric_limits<double>::infinity());
  enc.AddWithInt(EventKind::kComplete, 4, 10, 11, 1, 123456789012, &all);
  enc.AddWithInt(EventKind::kStep, 7, 11, 1, 0, -7, nullptr);
  std::string raw;
  enc.Finish(&raw);

  uint32_t thread = 0;
  std::vector<SegmentEvent> ev;
  ASSERT_TRUE(DecodeEventsBlock(raw, &thread, &ev).ok());
  EXPECT_EQ(thread, 7u);
  ASSERT_EQ(ev.size(), 7u);
  EXPECT_EQ(ev[0].kind, EventKind::kBegin);
  EXPECT_EQ(ev[0].ts, 1000);
  EXPECT_EQ(ev[0].cat, 2);
  EXPECT_EQ(ev[0].name, 5u);
  EXPECT_FALSE(ev[0].has_args);
  EXPECT_EQ(ev[1].ts, 999);
  EXPECT_TRUE(ev[1].has_args);
  EXPECT_EQ(ev[1].args, all);
  EXPECT_EQ(ev[2].ts, std::numeric_limits<int64_t>::max() / 2);
  EXPECT_EQ(ev[2].lane, 65535u);
  EXPECT_EQ(ev[2].args, some);
  EXPECT_EQ(ev[3].kind, EventKind::kCounter);
  EXPECT_EQ(ev[3].ts, -5);
  EXPECT_EQ(ev[3].value, -2.5);
  EXPECT_TRUE(std::isinf(ev[4].value));
  EXPECT_EQ(ev[5].kind, EventKind::kComplete);
  EXPECT_EQ(ev[5].ival, 123456789012);
  EXPECT_EQ(ev[5].lane, 1u);
  EXPECT_EQ(ev[6].kind, EventKind::kStep);
  EXPECT_EQ(ev[6].ival, -7);
}

TEST(EventsBlock, EmptyBlockRoundTrips) {
  EventsBlockEncoder enc;
  enc.Reset(1);
  std::string raw;
  enc.Finish(&raw);
  uint32_t thread;
  std::vector<SegmentEvent> ev(3);
  ASSERT_TRUE(DecodeEventsBlock(raw, &thread, &ev).ok());
  EXPECT_TRUE(ev.empty());
}

TEST(EventsBlock, EveryTruncationIsCorruptionNotACrash) {
  EventsBlockEncoder enc;
  enc.Reset(1);
  EventArgs a;
  a.mask = EventArgs::kAllFields;
  for (int i = 0; i < 50; ++i) {
    enc.AddWithInt(EventKind::kComplete, 1, i * 1000, i, i % 3, i * 7, i % 2 ? &a : nullptr);
    enc.AddCounter(0, i, 1, 0, i);
  }
  std::string raw;
  enc.Finish(&raw);
  uint32_t thread;
  std::vector<SegmentEvent> ev;
  for (size_t n = 0; n < raw.size(); ++n) {
    EXPECT_FALSE(DecodeEventsBlock(std::string_view(raw.data(), n), &thread, &ev).ok()) << n;
  }
}

// The chunked decoder returns, chunk after chunk, exactly what the whole-block decoder returns,
// and fails on the same damaged inputs.
TEST(EventsBlock, ChunkedDecodeEqualsWholeDecode) {
  EventsBlockEncoder enc;
  enc.Reset(3);
  EventArgs a;
  a.mask = EventArgs::kPeer | EventArgs::kFlow;
  a.peer = -9;
  a.flow = 77;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000; ++i) {
    const int64_t ts = static_cast<int64_t>(rng() % 1000000) - 500000;
    switch (i % 5) {
      case 0:
        enc.AddWithInt(EventKind::kComplete, 1, ts, 1 + i % 7, 0, rng() % 99999, &a);
        break;
      case 1:
        enc.AddCounter(2, ts, 3, 1, static_cast<double>(i) / 3);
        break;
      case 2:
        enc.AddWithInt(EventKind::kStep, 7, ts, 0, 0, -i, nullptr);
        break;
      default:
        enc.Add(i % 2 ? EventKind::kBegin : EventKind::kEnd, 0, ts, 4, 0, i % 3 ? nullptr : &a);
    }
  }
  std::string raw;
  enc.Finish(&raw);
  uint32_t thread = 0;
  std::vector<SegmentEvent> whole;
  ASSERT_TRUE(DecodeEventsBlock(raw, &thread, &whole).ok());
  ASSERT_EQ(whole.size(), 1000u);
  for (size_t chunk : {1, 7, 256, 999, 1000, 5000}) {
    EventsBlockDecoder d;
    ASSERT_TRUE(d.Init(raw).ok());
    EXPECT_EQ(d.thread_index(), 3u);
    EXPECT_EQ(d.count(), 1000u);
    std::vector<SegmentEvent> part;
    size_t at = 0, calls = 0;
    while (!d.done()) {
      ASSERT_TRUE(d.Next(chunk, &part).ok()) << chunk;
      ASSERT_LE(part.size(), chunk);
      ++calls;
      for (const SegmentEvent& e : part) {
        ASSERT_LT(at, whole.size());
        const SegmentEvent& w = whole[at++];
        EXPECT_EQ(e.ts, w.ts);
        EXPECT_EQ(e.ival, w.ival);
        EXPECT_EQ(e.value, w.value);
        EXPECT_EQ(e.name, w.name);
        EXPECT_EQ(e.lane, w.lane);
        EXPECT_EQ(e.kind, w.kind);
        EXPECT_EQ(e.cat, w.cat);
        EXPECT_EQ(e.has_args, w.has_args);
        EXPECT_EQ(e.args, w.args);
      }
    }
    EXPECT_EQ(at, 1000u) << chunk;
    EXPECT_EQ(calls, (1000 + chunk - 1) / chunk) << chunk;
  }
  // A column holding one value too many is caught by the call that returns the last event.
  std::string longer;
  EventsBlockEncoder enc2;
  enc2.Reset(1);
  enc2.Add(EventKind::kInstant, 0, 5, 1, 0, nullptr);
  enc2.Finish(&longer);
  // Payload: thread, n=1, ts, then columns; append a byte to the last (args) column.
  longer.back() = 1;
  longer.push_back('\x05');
  EventsBlockDecoder d;
  ASSERT_TRUE(d.Init(longer).ok());
  std::vector<SegmentEvent> part;
  EXPECT_FALSE(d.Next(1, &part).ok());
  EXPECT_FALSE(DecodeEventsBlock(longer, &thread, &part).ok());
}

// NextColumns: each column in its own array, the sparse ones (durations and steps, values,
// arguments) holding one entry per event that has one, in event order. Known values put in:
// 20 complete events without arguments (the eight-at-a-time path), then one of every kind.
TEST(EventsBlock, ColumnsHoldWhatWasRecorded) {
  EventArgs a;
  a.mask = EventArgs::kPeer | EventArgs::kFlow;
  a.peer = -3;
  a.flow = 77;
  EventsBlockEncoder enc;
  enc.Reset(4);
  for (int i = 0; i < 20; ++i) {
    enc.AddWithInt(EventKind::kComplete, 1, 1000 + 10 * i, 1 + i % 3, 0, 5 + i, nullptr);
  }
  enc.Add(EventKind::kBegin, 2, 2000, 9, 0, nullptr);
  enc.AddWithInt(EventKind::kStep, 7, 2001, 0, 0, -4, nullptr);
  enc.AddCounter(0, 2002, 8, 0, 1.5);
  enc.AddWithInt(EventKind::kComplete, 3, 2003, 200, 6, 123456789012, &a);
  enc.Add(EventKind::kEnd, 2, 2004, 0, 0, &a);
  std::string raw;
  enc.Finish(&raw);

  for (size_t chunk : {size_t{1}, size_t{7}, size_t{64}}) {
    EventsBlockDecoder d;
    ASSERT_TRUE(d.Init(raw).ok());
    EventColumns c;
    size_t at = 0;
    std::vector<int64_t> ints;
    std::vector<double> values;
    std::vector<EventArgs> args;
    while (!d.done()) {
      ASSERT_TRUE(d.NextColumns(chunk, &c).ok()) << chunk;
      ASSERT_LE(c.n, chunk);
      for (size_t i = 0; i < c.n; ++i, ++at) {
        if (at < 20) {
          EXPECT_EQ(c.kind[i], static_cast<uint8_t>(EventKind::kComplete));
          EXPECT_EQ(c.ts[i], 1000 + 10 * static_cast<int64_t>(at));
          EXPECT_EQ(c.name[i], 1 + at % 3);
          EXPECT_EQ(c.cat[i], 1);
          EXPECT_EQ(c.lane[i], 0u);
        }
      }
      ints.insert(ints.end(), c.ints.begin(), c.ints.begin() + c.n_ints);
      values.insert(values.end(), c.values.begin(), c.values.begin() + c.n_values);
      args.insert(args.end(), c.args.begin(), c.args.begin() + c.n_args);
    }
    ASSERT_EQ(at, 25u) << chunk;
    // Last chunk's events (chunk 64: all 25 in one call).
    if (chunk == 64) {
      EXPECT_EQ(c.kind[20], static_cast<uint8_t>(EventKind::kBegin));
      EXPECT_EQ(c.ts[24], 2004);
      EXPECT_EQ(c.kind[23], static_cast<uint8_t>(EventKind::kComplete) | kKindHasArgs);
      EXPECT_EQ(c.lane[23], 6u);
      EXPECT_EQ(c.name[23], 200u);
      EXPECT_EQ(c.cat[21], 7);
    }
    std::vector<int64_t> want_ints;
    for (int i = 0; i < 20; ++i) want_ints.push_back(5 + i);
    want_ints.push_back(-4);  // the step
    want_ints.push_back(123456789012);
    EXPECT_EQ(ints, want_ints) << chunk;
    EXPECT_EQ(values, std::vector<double>{1.5}) << chunk;
    EXPECT_EQ(args, (std::vector<EventArgs>{a, a})) << chunk;
  }
}

// A duration past INT64_MAX (the encoder stores -1 as 2^64 - 1) is rejected, as is a block
// whose duration column holds fewer values than its complete events.
TEST(EventsBlock, ColumnsRejectBadDurations) {
  for (bool with_step : {false, true}) {
    EventsBlockEncoder enc;
    enc.Reset(1);
    if (with_step) enc.AddWithInt(EventKind::kStep, 7, 1, 0, 0, 3, nullptr);
    for (int i = 0; i < 9; ++i) enc.AddWithInt(EventKind::kComplete, 0, i, 1, 0, 1, nullptr);
    enc.AddWithInt(EventKind::kComplete, 0, 10, 1, 0, -1, nullptr);
    std::string raw;
    enc.Finish(&raw);
    EventsBlockDecoder d;
    ASSERT_TRUE(d.Init(raw).ok());
    EventColumns c;
    const Status s = d.NextColumns(100, &c);
    ASSERT_FALSE(s.ok()) << with_step;
    EXPECT_NE(s.message().find("EVENTS block: duration out of range"), std::string::npos)
        << s.ToString();
  }
  // Two complete events, one duration: kinds say two, the column holds one.
  EventsBlockEncoder enc;
  enc.Reset(1);
  enc.AddWithInt(EventKind::kComplete, 0, 1, 1, 0, 5, nullptr);
  enc.Add(EventKind::kComplete, 0, 2, 1, 0, nullptr);  // no duration written
  std::string raw;
  enc.Finish(&raw);
  EventsBlockDecoder d;
  ASSERT_TRUE(d.Init(raw).ok());
  EventColumns c;
  const Status s = d.NextColumns(100, &c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("truncated duration column"), std::string::npos) << s.ToString();
}

TEST(EventsBlock, RandomBytesNeverCrash) {
  std::mt19937 rng(42);
  uint32_t thread;
  std::vector<SegmentEvent> ev;
  uint64_t errors = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string junk(rng() % 64, 0);
    for (char& c : junk) c = static_cast<char>(rng() % 4 == 0 ? rng() : rng() % 3);
    const Status st = DecodeEventsBlock(junk, &thread, &ev);
    // OK or a clean error: a Corruption that names the block.
    if (!st.ok()) {
      ASSERT_TRUE(st.IsCorruption()) << st.ToString();
      ASSERT_NE(st.message().find("EVENTS block"), std::string::npos) << st.ToString();
      ++errors;
    }
  }
  EXPECT_GT(errors, 10000u);  // junk is rejected, not taken as events
}

TEST(MetaBlock, RoundTrip) {
  SegmentMeta m;
  m.rank = 3;
  m.world_size = 8;
  m.local_rank = 1;
  m.pid = 4242;
  m.host = "node-7";
  m.tool_version = "0.1.0";
  m.command = "python train.py --lr 0.1";
  m.clock = ClockKind::kTsc;
  m.anchor_realtime_ns = 1700000000123456789;
  m.anchor_clock_ns = 123456789;
  m.tsc_hz = 2500000000;
  m.start_step = 10;
  m.end_step = 20;
  std::string raw;
  EncodeMeta(m, &raw);
  SegmentMeta got;
  ASSERT_TRUE(DecodeMeta(raw, &got).ok());
  EXPECT_EQ(got.rank, 3);
  EXPECT_EQ(got.world_size, 8);
  EXPECT_EQ(got.local_rank, 1);
  EXPECT_EQ(got.pid, 4242u);
  EXPECT_EQ(got.host, "node-7");
  EXPECT_EQ(got.command, m.command);
  EXPECT_EQ(got.clock, ClockKind::kTsc);
  EXPECT_EQ(got.anchor_realtime_ns, m.anchor_realtime_ns);
  EXPECT_EQ(got.anchor_clock_ns, m.anchor_clock_ns);
  EXPECT_EQ(got.tsc_hz, m.tsc_hz);
  EXPECT_EQ(got.start_step, 10);
  EXPECT_EQ(got.end_step, 20);
  for (size_t n = 0; n < raw.size(); ++n) {
    EXPECT_FALSE(DecodeMeta(std::string_view(raw.data(), n), &got).ok()) << n;
  }
}

TEST(CatalogBlocks, RoundTrip) {
  std::string raw;
  EncodeStrings(5, {"a", "", "COMMUNICATE", std::string_view("nul\0in", 6)}, &raw);
  uint32_t first;
  std::vector<std::string> s;
  ASSERT_TRUE(DecodeStrings(raw, &first, &s).ok());
  EXPECT_EQ(first, 5u);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[2], "COMMUNICATE");
  EXPECT_EQ(s[3], std::string("nul\0in", 6));

  raw.clear();
  EncodeThreads({{1, 100, "main"}, {2, 101, ""}}, &raw);
  std::vector<ThreadInfo> t;
  ASSERT_TRUE(DecodeThreads(raw, &t).ok());
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name, "main");
  EXPECT_EQ(t[1].os_tid, 101u);

  raw.clear();
  EncodeLanes({{1, 9}, {2, 10}}, &raw);
  std::vector<LaneInfo> l;
  ASSERT_TRUE(DecodeLanes(raw, &l).ok());
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[1].name, 10u);

  raw.clear();
  EncodeSync({{0, 100, -50, 7}}, &raw);
  std::vector<SyncPoint> p;
  ASSERT_TRUE(DecodeSync(raw, &p).ok());
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].offset_ns, -50);
  EXPECT_EQ(p[0].uncertainty_ns, 7);

  raw.clear();
  EncodeAnchors({{1700000000000000000, 5, 20}}, &raw);
  std::vector<AnchorPoint> a;
  ASSERT_TRUE(DecodeAnchors(raw, &a).ok());
  EXPECT_EQ(a[0].realtime_ns, 1700000000000000000);

  raw.clear();
  EncodeStats({{0, 3}, {4, 1000000}}, &raw);
  std::vector<DropCount> d;
  ASSERT_TRUE(DecodeStats(raw, &d).ok());
  EXPECT_EQ(d[1].dropped, 1000000u);

  raw.clear();
  EncodeComms({{3, 4, 1, {0, 1, 5, 9}}, {4, 2, 0, {}}}, &raw);
  std::vector<CommInfo> comms;
  ASSERT_TRUE(DecodeComms(raw, &comms).ok());
  ASSERT_EQ(comms.size(), 2u);
  EXPECT_EQ(comms[0].members, (std::vector<int32_t>{0, 1, 5, 9}));
  EXPECT_EQ(comms[1].size, 2);

  raw.clear();
  EncodeEnd({12345}, &raw);
  SegmentEnd e;
  ASSERT_TRUE(DecodeEnd(raw, &e).ok());
  EXPECT_EQ(e.events, 12345u);
}

TEST(CatalogBlocks, HostileCountsAreRejected) {
  std::string raw;
  PutVarint64(&raw, 1);
  PutVarint64(&raw, 1ull << 60);  // count far larger than the payload
  uint32_t first;
  std::vector<std::string> s;
  EXPECT_FALSE(DecodeStrings(raw, &first, &s).ok());
  std::vector<ThreadInfo> t;
  std::string raw2;
  PutVarint64(&raw2, 1ull << 60);
  EXPECT_FALSE(DecodeThreads(raw2, &t).ok());
}

// Timestamps at both ends of the range round-trip (wrap-around deltas, no overflow).
TEST(EventsBlock, ExtremeTimestampsRoundTrip) {
  EventsBlockEncoder enc;
  enc.Reset(1);
  const int64_t ts[] = {INT64_MAX, INT64_MIN, 0, INT64_MIN, INT64_MAX, -1};
  for (int64_t t : ts) enc.Add(EventKind::kInstant, 0, t, 1, 0, nullptr);
  std::string raw;
  enc.Finish(&raw);
  uint32_t thread = 0;
  std::vector<SegmentEvent> events;
  ASSERT_TRUE(DecodeEventsBlock(raw, &thread, &events).ok());
  ASSERT_EQ(events.size(), std::size(ts));
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].ts, ts[i]) << i;
}

// ---- STEPSTATS ----

std::vector<StepStat> SomeStepStats() {
  StepStat a;
  a.step = 12;
  a.start_ns = 1700000000000000000;
  a.dur_ns = 250000000;
  a.compute_ns = 240000000;
  a.comm_ns = 3000000;
  a.wait_ns = 2000000;
  a.bytes = 1ull << 33;
  a.events = 7;
  a.top = {{5, 240000000}, {9, 2000000}, {3, 1000000}};
  StepStat b;  // negative step and start, nothing else
  b.step = -1;
  b.start_ns = -5;
  return {a, b};
}

TEST(StepStatsBlock, RoundTrip) {
  std::string raw;
  EncodeStepStats(SomeStepStats(), &raw);
  std::vector<StepStat> back;
  ASSERT_TRUE(DecodeStepStats(raw, &back).ok());
  EXPECT_EQ(back, SomeStepStats());
  raw.clear();
  EncodeStepStats({}, &raw);
  ASSERT_TRUE(DecodeStepStats(raw, &back).ok());
  EXPECT_TRUE(back.empty());
}

TEST(StepStatsBlock, EveryTruncationAndTrailingByteIsAnError) {
  std::string raw;
  EncodeStepStats(SomeStepStats(), &raw);
  std::vector<StepStat> out;
  for (size_t n = 0; n < raw.size(); ++n) {
    const Status s = DecodeStepStats(std::string_view(raw).substr(0, n), &out);
    EXPECT_FALSE(s.ok()) << "prefix of " << n << " bytes";
    EXPECT_NE(s.message().find("STEPSTATS"), std::string::npos) << s.message();
  }
  EXPECT_FALSE(DecodeStepStats(raw + '\0', &out).ok());
}

TEST(StepStatsBlock, HostileValuesAreRejected) {
  std::vector<StepStat> out;
  // A count far larger than the payload.
  std::string raw;
  PutVarint64(&raw, 1ull << 60);
  EXPECT_FALSE(DecodeStepStats(raw, &out).ok());
  // One entry whose fields are given by `fields` (step, start, dur, compute, comm, wait, bytes,
  // events, top count), then `tail`.
  auto entry = [](std::vector<uint64_t> fields, const std::string& tail = "") {
    std::string r;
    PutVarint64(&r, 1);
    PutVarsigned(&r, static_cast<int64_t>(fields[0]));
    PutVarsigned(&r, static_cast<int64_t>(fields[1]));
    for (size_t i = 2; i < fields.size(); ++i) PutVarint64(&r, fields[i]);
    return r + tail;
  };
  EXPECT_TRUE(DecodeStepStats(entry({1, 100, 10, 0, 0, 0, 0, 0, 0}), &out).ok());
  // A duration past INT64_MAX, and one whose end overflows.
  EXPECT_FALSE(DecodeStepStats(entry({1, 100, 1ull << 63, 0, 0, 0, 0, 0, 0}), &out).ok());
  EXPECT_FALSE(
      DecodeStepStats(entry({1, static_cast<uint64_t>(INT64_MAX - 5), 10, 0, 0, 0, 0, 0, 0}), &out)
          .ok());
  // A time sum past INT64_MAX.
  EXPECT_FALSE(DecodeStepStats(entry({1, 100, 10, ~0ull, 0, 0, 0, 0, 0}), &out).ok());
  // More top names than the format allows, with the bytes to hold them.
  std::string names;
  for (int i = 0; i < 17; ++i) {
    PutVarint64(&names, 1);
    PutVarint64(&names, 1);
  }
  EXPECT_FALSE(DecodeStepStats(entry({1, 100, 10, 0, 0, 0, 0, 0, 17}, names), &out).ok());
  EXPECT_TRUE(
      DecodeStepStats(entry({1, 100, 10, 0, 0, 0, 0, 0, 16}, names.substr(0, 32)), &out).ok());
  // A name id past 32 bits.
  std::string big;
  PutVarint64(&big, 1ull << 40);
  PutVarint64(&big, 1);
  EXPECT_FALSE(DecodeStepStats(entry({1, 100, 10, 0, 0, 0, 0, 0, 1}, big), &out).ok());
}

}  // namespace
}  // namespace tracedb::engine
