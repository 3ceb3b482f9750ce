// `tracedb view`'s level of detail (view/lod.h), checked against SQL over the same database:
// every event of a window is in exactly one drawn item, run or occupancy row of its track; the
// whole events are the rows SQL returns for their ids; the spans wide enough to see all come
// whole; counters per pixel are SQL's min/max; the coarse answer's density adds up to the zone
// maps' counts; items stay bounded whatever the window; cancellation stops the work.
#include "view/lod.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "engine/db/trace_builder.h"
#include "engine/db/trace_writer.h"
#include "query/open/query_db.h"
#include "tests/test_util.h"
#include "tests/view_fixture.h"

namespace tracedb::testing {
namespace {

using view::ComputeWindow;
using view::WindowRequest;
using view::WindowResult;

class ViewLodTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    db_path_ = tmp_->Sub("view.tdb");
    ASSERT_NO_FATAL_FAILURE(WriteViewFixture(db_path_));
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  void SetUp() override {
    auto db = query::OpenQueryDb(db_path_, false);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
  }

  // Per track: SQL's count of the window's events (the same overlap rule as the viewer).
  std::map<int64_t, int64_t> SqlCounts(int64_t t0, int64_t t1, const char* extra = "") {
    std::map<int64_t, int64_t> out;
    auto st = db_->Prepare(std::string("SELECT track, count(*) FROM events WHERE ts < ?2 AND "
                                       "(end_ts > ?1 OR ts >= ?1) ") +
                           extra + " GROUP BY track");
    EXPECT_TRUE(st.ok());
    st->Bind(1, t0);
    st->Bind(2, t1);
    while (*st->Step()) out[st->Int(0)] = st->Int(1);
    return out;
  }

  static TempDir* tmp_;
  static std::string db_path_;
  std::unique_ptr<engine::Db> db_;
};

TempDir* ViewLodTest::tmp_ = nullptr;
std::string ViewLodTest::db_path_;

// Every item against its SQL row; every event counted once.
void CheckFine(engine::Db* db, const WindowRequest& req, const WindowResult& r,
               const std::map<int64_t, int64_t>& counts,
               const std::map<int64_t, int64_t>& counter_counts) {
  ASSERT_FALSE(r.coarse);
  std::map<int64_t, int64_t> seen;
  auto row = db->Prepare(
      "SELECT ts, dur, depth, (SELECT id FROM strings WHERE s = name), kind FROM events "
      "WHERE rank = ?1 AND ts = ?2 AND id = ?3");
  ASSERT_TRUE(row.ok());
  for (const view::TrackLod& t : r.tracks) {
    EXPECT_EQ(static_cast<int64_t>(t.events), counts.count(t.track) ? counts.at(t.track) : 0)
        << "track " << t.track;
    EXPECT_LE(t.items.size() + t.runs.size(), req.max_items) << "track " << t.track;
    if (!t.occupancy.empty()) continue;  // the busy case is checked on its own
    int64_t n = 0;
    for (const view::LodRun& u : t.runs) {
      EXPECT_GE(u.count, 2u);
      EXPECT_LT(u.ts, req.t1);
      n += static_cast<int64_t>(u.count);
    }
    for (const view::LodEvent& e : t.items) {
      n++;
      row->Reset();
      row->Bind(1, static_cast<int64_t>(t.rank));
      row->Bind(2, e.ts);
      row->Bind(3, e.id);
      auto got = row->Step();
      ASSERT_TRUE(got.ok() && *got) << "no SQL row for item " << e.id;
      EXPECT_EQ(row->Int(1), e.dur);
      EXPECT_EQ(row->Int(2), static_cast<int64_t>(e.depth));
      EXPECT_EQ(row->Int(3), static_cast<int64_t>(e.name));
      EXPECT_EQ(static_cast<int64_t>(e.id >> 32), static_cast<int64_t>(t.track));
    }
    const int64_t counters = counter_counts.count(t.track) ? counter_counts.at(t.track) : 0;
    EXPECT_EQ(n + counters, static_cast<int64_t>(t.events)) << "track " << t.track;
    seen[t.track] = static_cast<int64_t>(t.events);
  }
  for (const auto& [track, c] : counts) {
    EXPECT_TRUE(seen.count(track) || c == 0) << "track " << track << " missing";
  }
}

TEST_F(ViewLodTest, WholeJobAndZoomsMatchSql) {
  const int64_t start = kViewEpoch;
  const int64_t end = kViewEpoch + kViewSteps * kViewStepNs;
  const std::vector<std::pair<int64_t, int64_t>> windows = {
      {start, end},                                                            // everything
      {start + 5 * kViewStepNs, start + 7 * kViewStepNs},                      // two steps
      {start + 100 * kViewStepNs + 20000, start + 100 * kViewStepNs + 30000},  // inside forward
      {start - 1000000, start + 1},                                            // the first ns
      {end + 1000, end + 2000},  // after the job: nothing
  };
  for (auto [t0, t1] : windows) {
    SCOPED_TRACE("window " + std::to_string(t0 - start) + " " + std::to_string(t1 - start));
    WindowRequest req;
    req.t0 = t0;
    req.t1 = t1;
    req.px = 1200;
    WindowResult r;
    ASSERT_TRUE(ComputeWindow(db_.get(), req, &r).ok());
    const auto counts = SqlCounts(t0, t1);
    const auto counters = SqlCounts(t0, t1, "AND kind = 'counter'");
    CheckFine(db_.get(), req, r, counts, counters);
    // Every span at least min_px wide is drawn whole.
    auto st = db_->Prepare(
        "SELECT id FROM events WHERE kind = 'span' AND ts < ?2 AND end_ts > ?1 AND dur >= ?3");
    ASSERT_TRUE(st.ok());
    st->Bind(1, t0);
    st->Bind(2, t1);
    st->Bind(3, static_cast<int64_t>(std::ceil((t1 - t0) / 1200.0 * req.min_px)));
    std::set<int64_t> whole;
    for (const auto& t : r.tracks) {
      for (const auto& e : t.items) whole.insert(e.id);
    }
    int64_t wide = 0;
    while (*st->Step()) {
      wide++;
      EXPECT_TRUE(whole.count(st->Int(0))) << "wide span " << st->Int(0) << " not whole";
    }
    if (t1 - t0 == 2 * kViewStepNs) {
      EXPECT_GT(wide, 10);
    }
    // Listed through the rank index with the longest block span (what the server does), the
    // same blocks and the same answer.
    WindowRequest fast = req;
    auto span = view::MaxBlockSpan(db_.get());
    ASSERT_TRUE(span.ok());
    EXPECT_EQ(*span, *db_->QueryInt("SELECT max(max_end - min_ts) FROM blocks"));
    fast.max_block_span = *span;
    WindowResult rf;
    ASSERT_TRUE(ComputeWindow(db_.get(), fast, &rf).ok());
    EXPECT_EQ(rf.blocks, r.blocks);
    EXPECT_EQ(rf.events_in_blocks, r.events_in_blocks);
    EXPECT_EQ(rf.blocks_decoded, r.blocks_decoded);
    ASSERT_EQ(rf.tracks.size(), r.tracks.size());
    for (size_t i = 0; i < r.tracks.size(); ++i) {
      EXPECT_EQ(rf.tracks[i].track, r.tracks[i].track);
      EXPECT_EQ(rf.tracks[i].events, r.tracks[i].events);
      ASSERT_EQ(rf.tracks[i].items.size(), r.tracks[i].items.size());
      for (size_t k = 0; k < r.tracks[i].items.size(); ++k) {
        EXPECT_EQ(rf.tracks[i].items[k].id, r.tracks[i].items[k].id);
      }
      EXPECT_EQ(rf.tracks[i].runs.size(), r.tracks[i].runs.size());
    }
  }
}

TEST_F(ViewLodTest, CountersArePerPixelMinMax) {
  WindowRequest req;
  req.t0 = kViewEpoch;
  req.t1 = kViewEpoch + 50 * kViewStepNs;
  req.px = 20;
  WindowResult r;
  ASSERT_TRUE(ComputeWindow(db_.get(), req, &r).ok());
  // (track, name id, x) -> min, max
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::pair<double, double>> lod;
  for (const auto& t : r.tracks) {
    for (const auto& c : t.counters) lod[{t.track, c.name, c.x}] = {c.min, c.max};
  }
  auto st = db_->Prepare(
      "SELECT track, (SELECT id FROM strings WHERE s = name), (ts - ?1) * ?3 / (?2 - ?1), "
      "min(value), max(value) FROM events "
      "WHERE kind = 'counter' AND ts >= ?1 AND ts < ?2 GROUP BY 1, 2, 3");
  ASSERT_TRUE(st.ok());
  st->Bind(1, req.t0);
  st->Bind(2, req.t1);
  st->Bind(3, static_cast<int64_t>(req.px));
  size_t n = 0;
  while (*st->Step()) {
    n++;
    auto it = lod.find({st->Int(0), st->Int(1), st->Int(2)});
    ASSERT_NE(it, lod.end()) << "track " << st->Int(0) << " pixel " << st->Int(2);
    EXPECT_DOUBLE_EQ(it->second.first, sqlite3_column_double(st->raw(), 3));
    EXPECT_DOUBLE_EQ(it->second.second, sqlite3_column_double(st->raw(), 4));
  }
  EXPECT_EQ(n, lod.size());
  EXPECT_GT(n, 0u);
}

TEST_F(ViewLodTest, CoarseAnswerUsesZoneMaps) {
  WindowRequest req;
  req.t0 = kViewEpoch;
  req.t1 = kViewEpoch + kViewSteps * kViewStepNs;
  req.px = 800;
  req.decode_budget = 1000;  // far less than the job: density, and only the wide events
  req.min_px = 0.5;          // the step spans (1/kViewSteps of the job) are wide enough
  WindowResult r;
  ASSERT_TRUE(ComputeWindow(db_.get(), req, &r).ok());
  EXPECT_TRUE(r.coarse);
  EXPECT_LT(r.blocks_decoded, r.blocks);
  // The density adds up to the events of the blocks (all inside the window here).
  double total = 0;
  for (const auto& d : r.ranks) {
    EXPECT_EQ(d.events_per_px.size(), 800u);
    for (float v : d.events_per_px) total += v;
  }
  const int64_t events = *db_->QueryInt("SELECT count(*) FROM events");
  EXPECT_NEAR(total, static_cast<double>(events), events * 1e-4);
  EXPECT_EQ(r.ranks.size(), 2u);
  {
    // With a list of tracks, only their ranks' blocks: rank 1's density adds up to its events.
    WindowRequest one = req;
    one.tracks = {static_cast<uint32_t>(
        *db_->QueryInt("SELECT min(track) FROM tracks WHERE rank = 1 AND kind != 'counter'"))};
    WindowResult r1;
    ASSERT_TRUE(ComputeWindow(db_.get(), one, &r1).ok());
    ASSERT_EQ(r1.ranks.size(), 1u);
    EXPECT_EQ(r1.ranks[0].rank, 1);
    double sum = 0;
    for (float v : r1.ranks[0].events_per_px) sum += v;
    const int64_t rank1 = *db_->QueryInt("SELECT count(*) FROM events WHERE rank = 1");
    EXPECT_NEAR(sum, static_cast<double>(rank1), rank1 * 1e-4);
    EXPECT_EQ(static_cast<int64_t>(r1.events_in_blocks), rank1);
    EXPECT_LT(r1.blocks, r.blocks);
    for (const auto& t : r1.tracks) EXPECT_EQ(t.track, one.tracks[0]);
  }
  // Only events at least min_px wide, each one SQL's row.
  const int64_t min_dur = static_cast<int64_t>(std::ceil((req.t1 - req.t0) / 800.0 * 0.5));
  auto st = db_->Prepare("SELECT dur, name FROM events WHERE id = ?1 AND ts = ?2");
  for (const auto& t : r.tracks) {
    for (const auto& e : t.items) {
      EXPECT_GE(e.dur, min_dur);
      st->Reset();
      st->Bind(1, e.id);
      st->Bind(2, e.ts);
      ASSERT_TRUE(*st->Step());
      EXPECT_EQ(st->Int(0), e.dur);
    }
  }
}

TEST_F(ViewLodTest, BusyTracksBecomeOccupancy) {
  WindowRequest req;
  req.t0 = kViewEpoch;
  req.t1 = kViewEpoch + 40 * kViewStepNs;
  req.px = 4000;
  req.max_items = 50;
  WindowResult r;
  ASSERT_TRUE(ComputeWindow(db_.get(), req, &r).ok());
  bool any = false;
  for (const auto& t : r.tracks) {
    EXPECT_LE(t.items.size() + t.runs.size(), req.max_items);
    if (t.occupancy.empty()) continue;
    any = true;
    EXPECT_TRUE(t.runs.empty());
    for (const auto& d : t.occupancy) EXPECT_EQ(d.size(), 4000u);
    // The step spans (depth 0) cover every step's first 90%: mostly full pixels there.
    size_t full = 0;
    for (uint8_t v : t.occupancy[0]) full += v >= 250;
    if (t.track == 1) {
      EXPECT_GT(full, 3000u);
    }
  }
  EXPECT_TRUE(any);
}

TEST_F(ViewLodTest, BadRequestsAndCancellation) {
  WindowRequest req;
  WindowResult r;
  req.t0 = 10;
  req.t1 = 10;
  EXPECT_EQ(ComputeWindow(db_.get(), req, &r).code(), Status::Code::kInvalidArgument);
  req.t1 = 11;
  req.px = 0;
  EXPECT_EQ(ComputeWindow(db_.get(), req, &r).code(), Status::Code::kInvalidArgument);
  req.px = 20001;
  EXPECT_EQ(ComputeWindow(db_.get(), req, &r).code(), Status::Code::kInvalidArgument);
  // A huge window is fine: bounded output.
  req.t0 = INT64_MIN;
  req.t1 = INT64_MAX;
  req.px = 1000;
  ASSERT_TRUE(ComputeWindow(db_.get(), req, &r).ok());
  for (const auto& t : r.tracks) EXPECT_LE(t.items.size() + t.runs.size(), req.max_items);
  // A newer request arrived: the older one gives up between blocks.
  std::atomic<int> polls{0};
  req.cancelled = [&] { return ++polls > 2; };
  EXPECT_EQ(ComputeWindow(db_.get(), req, &r).code(), Status::Code::kAborted);
  // Only some tracks.
  req.cancelled = nullptr;
  req.tracks = {2};
  ASSERT_TRUE(ComputeWindow(db_.get(), req, &r).ok());
  ASSERT_EQ(r.tracks.size(), 1u);
  EXPECT_EQ(r.tracks[0].track, 2u);
}

// Decoded blocks taken from the cache give the answer decoding them gives, byte for byte, in
// fine and coarse answers; a small cache stays within its bytes; a block whose zone map no
// longer matches is not taken.
TEST_F(ViewLodTest, BlockCacheGivesTheSameAnswer) {
  const int64_t start = kViewEpoch;
  const int64_t end = kViewEpoch + kViewSteps * kViewStepNs;
  auto json = [](WindowResult r, const WindowRequest& req) {
    r.blocks_cached = 0;  // the one field that may differ
    return view::WindowJson(r, req, [](uint32_t id) { return std::to_string(id); });
  };
  struct Case {
    int64_t t0, t1;
    uint64_t budget;
    double min_px;
  };
  const std::vector<Case> cases = {
      {start, end, 500000, 2},                                        // the whole job, decoded
      {start + 5 * kViewStepNs, start + 7 * kViewStepNs, 500000, 2},  // two steps
      // coarse (a third of the events within budget): only the blocks that hold wide events
      {start, end, static_cast<uint64_t>(*db_->QueryInt("SELECT sum(count) FROM blocks") / 3), 0.1},
  };
  // Small: room for about three of the largest blocks (45 bytes per event), so some go out.
  const int64_t blocks = *db_->QueryInt("SELECT count(*) FROM blocks");
  const size_t small =
      static_cast<size_t>(*db_->QueryInt("SELECT max(count) FROM blocks")) * 45 * 3;
  ASSERT_GT(blocks, 6);
  for (size_t cap : {size_t{64} << 20, small}) {
    view::BlockCache cache(cap);
    for (const Case& c : cases) {
      SCOPED_TRACE("cache " + std::to_string(cap) + " window " + std::to_string(c.t0 - start) +
                   " budget " + std::to_string(c.budget));
      WindowRequest req;
      req.t0 = c.t0;
      req.t1 = c.t1;
      req.px = 1200;
      req.decode_budget = c.budget;
      req.min_px = c.min_px;
      WindowResult plain;
      ASSERT_TRUE(ComputeWindow(db_.get(), req, &plain).ok());
      ASSERT_GT(plain.blocks_decoded, 0u);
      EXPECT_EQ(plain.coarse, c.budget < 500000);
      EXPECT_EQ(plain.blocks_cached, 0u);
      req.cache = &cache;
      for (int pass = 0; pass < 2; ++pass) {
        WindowResult r;
        ASSERT_TRUE(ComputeWindow(db_.get(), req, &r).ok());
        EXPECT_EQ(r.blocks_decoded, plain.blocks_decoded);
        EXPECT_EQ(json(r, req), json(plain, req)) << "pass " << pass;
        if (pass == 1 && cap != small) {
          EXPECT_EQ(r.blocks_cached, r.blocks_decoded);  // everything from the first pass
        }
        EXPECT_LE(cache.stats().bytes, cap);
      }
    }
    const view::BlockCache::Stats st = cache.stats();
    EXPECT_GT(st.hits, 0u);
    EXPECT_GT(st.misses, 0u);
    if (cap == small) {
      EXPECT_LT(st.blocks, static_cast<uint64_t>(blocks));
    }
  }
  // A cached block is taken only with the zone map it was cached with.
  view::BlockCache cache(1 << 20);
  auto b = std::make_shared<view::LodBlock>();
  b->min_ts = 5;
  b->count = 3;
  cache.Insert(7, b);
  EXPECT_EQ(cache.Find(7, 5, 3), b);
  EXPECT_EQ(cache.Find(7, 5, 4), nullptr);
  EXPECT_EQ(cache.Find(7, 6, 3), nullptr);
  EXPECT_EQ(cache.Find(8, 5, 3), nullptr);
}

// Counter values go out through the one JSON writer (engine::json::AppendNumber): whole numbers
// in integer digits, others in their shortest exact form, NaN and infinities as null (the view
// wrote 1e6 as "1e+06" with a writer of its own before issue 20).
TEST(ViewLodJson, CountersAreWrittenByTheOneJsonWriter) {
  WindowResult r;
  view::TrackLod t;
  t.track = 7;
  t.rank = 1;
  t.events = 3;
  t.counters.push_back({5, 3, 1e6, 0.1, std::nan("")});
  t.counters.push_back({5, 4, -2.5, 1e300, -INFINITY});
  r.tracks.push_back(t);
  WindowRequest req;
  req.t0 = 0;
  req.t1 = 100;
  const std::string json =
      view::WindowJson(r, req, [](uint32_t id) { return "n" + std::to_string(id); });
  EXPECT_NE(json.find("\"counters\":[[5,3,1000000,0.1,null],[5,4,-2.5,1e+300,null]]"),
            std::string::npos)
      << json;
}

}  // namespace
}  // namespace tracedb::testing
