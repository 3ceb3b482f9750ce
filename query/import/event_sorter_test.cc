#include "query/import/event_sorter.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace tracedb::query {
namespace {

struct Got {
  uint32_t track;
  int64_t ts, order;
  uint64_t seq;
  std::string json;
};

std::vector<Got> SortSome(size_t budget, int n, size_t* runs) {
  std::mt19937_64 rng(11);
  EventSorter sorter(budget);
  for (int i = 0; i < n; ++i) {
    PendingEvent e;
    e.track = static_cast<uint32_t>(rng() % 5);
    e.ts = static_cast<int64_t>(rng() % 1000);
    e.op = rng() % 3 == 0 ? PendingOp::kBegin : PendingOp::kComplete;
    e.dur = static_cast<int64_t>(rng() % 50);
    e.order = e.op == PendingOp::kBegin ? kBeginEndOrder : -e.dur;
    e.seq = static_cast<uint64_t>(i);
    // JSON of varying length, some empty, tied to the event so that a mix-up shows.
    const std::string json = i % 4 == 0 ? "" : "{\"i\":" + std::to_string(i) + "}";
    EXPECT_TRUE(sorter.Add(e, json).ok());
  }
  *runs = sorter.runs_spilled();
  std::vector<Got> out;
  EXPECT_TRUE(sorter
                  .Drain([&](const PendingEvent& e, std::string_view json) {
                    out.push_back(Got{e.track, e.ts, e.order, e.seq, std::string(json)});
                    return Status::Ok();
                  })
                  .ok());
  EXPECT_EQ(sorter.size(), 0u);
  return out;
}

TEST(EventSorter, OrdersByTrackTimeOrderAndFileOrder) {
  size_t runs;
  const std::vector<Got> got = SortSome(1 << 30, 5000, &runs);
  EXPECT_EQ(runs, 0u);
  ASSERT_EQ(got.size(), 5000u);
  for (size_t i = 1; i < got.size(); ++i) {
    const Got& a = got[i - 1];
    const Got& b = got[i];
    EXPECT_LT(std::tie(a.track, a.ts, a.order, a.seq), std::tie(b.track, b.ts, b.order, b.seq));
  }
  for (const Got& g : got) {
    EXPECT_EQ(g.json, g.seq % 4 == 0 ? "" : "{\"i\":" + std::to_string(g.seq) + "}");
  }
}

TEST(EventSorter, SpilledRunsMergeToTheSameOrder) {
  size_t runs_mem, runs_disk;
  const std::vector<Got> in_memory = SortSome(1 << 30, 20000, &runs_mem);
  const std::vector<Got> spilled = SortSome(64 << 10, 20000, &runs_disk);
  EXPECT_GT(runs_disk, 10u);
  ASSERT_EQ(spilled.size(), in_memory.size());
  for (size_t i = 0; i < spilled.size(); ++i) {
    EXPECT_EQ(spilled[i].seq, in_memory[i].seq) << i;
    EXPECT_EQ(spilled[i].json, in_memory[i].json) << i;
  }
}

// Every field of an event, as text, for comparing a spilled sort with an in-memory one.
std::string Fields(const PendingEvent& e, std::string_view json) {
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "%u %d %lld %lld %lld %llu %u %u %.17g %u %llu %d %d %u %llu %llu ", e.track,
                static_cast<int>(e.op), static_cast<long long>(e.ts), static_cast<long long>(e.dur),
                static_cast<long long>(e.order), static_cast<unsigned long long>(e.seq), e.name,
                e.cat, e.value, e.args.mask, static_cast<unsigned long long>(e.args.bytes),
                e.args.peer, e.args.tag, e.args.comm, static_cast<unsigned long long>(e.args.seq),
                static_cast<unsigned long long>(e.args.flow));
  return buf + std::string(json);
}

// Events with every field set in turn (zero or not, an order that follows from dur or not,
// counters' values, typed args, long JSON), on tracks `track_of(i)`, in file order or not.
std::vector<std::string> SortAll(size_t budget, int n, uint32_t (*track_of)(int), bool in_order,
                                 size_t* runs) {
  std::mt19937_64 rng(5);
  EventSorter sorter(budget);
  for (int i = 0; i < n; ++i) {
    PendingEvent e;
    e.track = track_of(i);
    e.op = static_cast<PendingOp>(rng() % 7);
    e.ts = in_order ? i * 10 : static_cast<int64_t>(rng() % 100000) - 50000;
    e.dur = rng() % 3 == 0 ? 0 : static_cast<int64_t>(rng() % 5000);
    const int kind = static_cast<int>(rng() % 4);
    e.order = kind == 0 ? 0 : kind == 1 ? kBeginEndOrder : kind == 2 ? -e.dur : -7;
    if (i % 97 == 0) e.dur = INT64_MIN;  // -dur would overflow: the order is written out
    e.seq = static_cast<uint64_t>(i);
    e.name = static_cast<uint32_t>(rng() % 40);
    e.cat = static_cast<uint32_t>(rng() % 3);
    e.value = rng() % 2 ? 0.0 : (i % 5 == 0 ? -0.0 : static_cast<double>(rng() % 1000) / 7);
    if (rng() % 2) {
      e.args.mask = static_cast<uint32_t>(rng() % 63) + 1;
      e.args.bytes = rng();
      e.args.peer = static_cast<int32_t>(rng() % 64) - 1;
      e.args.tag = 3;
      e.args.comm = 2;
      e.args.seq = rng();
      e.args.flow = rng();
    }
    const std::string json = i % 3 == 0 ? "" : std::string(rng() % 300, 'a' + i % 26);
    EXPECT_TRUE(sorter.Add(e, json).ok());
  }
  *runs = sorter.runs_spilled();
  std::vector<std::string> out;
  EXPECT_TRUE(sorter
                  .Drain([&](const PendingEvent& e, std::string_view json) {
                    out.push_back(Fields(e, json));
                    return Status::Ok();
                  })
                  .ok());
  return out;
}

uint32_t FewTracks(int i) { return static_cast<uint32_t>(i % 7); }
uint32_t SparseTracks(int i) { return static_cast<uint32_t>((i % 5) * 100000 + 1); }

TEST(EventSorter, SpilledEventsKeepEveryField) {
  for (bool in_order : {false, true}) {
    for (auto track_of : {&FewTracks, &SparseTracks}) {
      size_t runs_mem, runs_disk;
      const std::vector<std::string> mem = SortAll(1 << 30, 6000, track_of, in_order, &runs_mem);
      const std::vector<std::string> disk = SortAll(64 << 10, 6000, track_of, in_order, &runs_disk);
      EXPECT_EQ(runs_mem, 0u);
      EXPECT_GT(runs_disk, 5u);
      ASSERT_EQ(mem.size(), 6000u);
      EXPECT_EQ(mem, disk) << "in order " << in_order;
    }
  }
}

TEST(EventSorter, InOrderTracksComeOutInOrder) {
  // Interleaved tracks, each in order in the file: only the counting sort by track runs.
  EventSorter sorter;
  for (int i = 0; i < 3000; ++i) {
    PendingEvent e;
    e.track = static_cast<uint32_t>(2 - i % 3);
    e.ts = i;
    e.seq = static_cast<uint64_t>(i);
    ASSERT_TRUE(sorter.Add(e, {}).ok());
  }
  std::vector<std::pair<uint32_t, int64_t>> got;
  ASSERT_TRUE(sorter
                  .Drain([&](const PendingEvent& e, std::string_view) {
                    got.emplace_back(e.track, e.ts);
                    return Status::Ok();
                  })
                  .ok());
  ASSERT_EQ(got.size(), 3000u);
  for (size_t k = 0; k < got.size(); ++k) {
    // Track 0 holds ts 2, 5, 8, ... (i % 3 == 2), then track 1, then track 2.
    const uint32_t track = static_cast<uint32_t>(k / 1000);
    EXPECT_EQ(got[k].first, track);
    EXPECT_EQ(got[k].second, static_cast<int64_t>((k % 1000) * 3 + (2 - track)));
  }
}

TEST(EventSorter, DrainStopsAtTheFirstError) {
  EventSorter sorter;
  PendingEvent e;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(sorter.Add(e, {}).ok());
  int calls = 0;
  Status s = sorter.Drain([&](const PendingEvent&, std::string_view) {
    ++calls;
    return Status::Aborted("stop");
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(s.code(), Status::Code::kAborted);
}

}  // namespace
}  // namespace tracedb::query
