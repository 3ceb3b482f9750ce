#include "query/import/event_sorter.h"

#include <gtest/gtest.h>

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
