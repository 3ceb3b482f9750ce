// The block store (engine/db/block_store.h) against independent readings of the same file:
//   - its zone-map selection (ranks, time window, longest duration, names and categories, block
//     ids, each order) against plain SQL over the blocks and block_names tables run by sqlite3
//     itself, and the rows the selected blocks hold against the rows the test wrote;
//   - hostile values put by hand into a real file (counts of 0, -1, 65537 and 2^62, a rank of
//     2^40, a count that lies, a payload that is not a block, a string id of 4e12): each is
//     refused with a Corruption naming the file and the block, the other blocks still read;
//   - names OR categories (any_cats) against plain SQL on a file where a category lies in some
//     blocks only;
//   - the cache (a block decoded once, dropped when the file's version changes) and meta.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/db/block_store.h"
#include "engine/db/trace_writer.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

using engine::BlockSelection;
using engine::BlockStore;
using engine::BlockZoneRow;

// What the test wrote: one entry per event.
struct Written {
  int32_t rank;
  int64_t ts, dur;
  std::string name, cat;
};

constexpr int kRanks = 4, kBatches = 6, kRowsPerBatch = 50;
const char* const kNames[] = {"compute", "MPI_Allreduce", "MPI_Send", "io", "step"};

// 4 ranks x 6 batches, a block each (a batch's commit ends each rank's block): block b of rank r
// holds names {b % 5, (b + r) % 5} and durations that grow with the batch, so that names,
// categories, ranks, time and duration each select a different subset.
std::vector<Written> Build(const std::string& path) {
  std::vector<Written> rows;
  auto w = engine::TraceWriter::Open(path);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_TRUE((*w)->SetMeta("store.test", "yes").ok());
  int64_t ts = 1000;
  for (int batch = 0; batch < kBatches; ++batch) {
    EXPECT_TRUE((*w)->BeginBatch().ok());
    for (int32_t rank = 0; rank < kRanks; ++rank) {
      engine::TrackSpec spec;
      spec.rank = rank;
      spec.tid = 100 + rank;
      spec.pid = 10 + rank;
      const uint32_t track = (*w)->Track(spec);
      for (int i = 0; i < kRowsPerBatch; ++i) {
        engine::Row r;
        r.track = track;
        r.k = (*w)->TakeK(track);
        r.ts = ts + rank * 7 + i * 100;
        r.dur = 10 + batch * 1000 + i;
        const std::string name = kNames[(i % 2 ? batch : batch + rank) % 5];
        const std::string cat = i % 3 == 0 ? "mpi" : "cpu";
        r.name = (*w)->Intern(name);
        r.cat = (*w)->Intern(cat);
        rows.push_back({rank, r.ts, r.dur, name, cat});
        EXPECT_TRUE((*w)->AddRow(rank, std::move(r)).ok());
      }
    }
    EXPECT_TRUE((*w)->CommitBatch().ok());
    ts += kRowsPerBatch * 100 + 500;
  }
  return rows;
}

// Plain sqlite3 (no tracedb code): the first column of each row of `sql`.
std::vector<int64_t> PlainColumn(const std::string& db, const std::string& sql) {
  std::vector<int64_t> v;
  sqlite3* d = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db.c_str(), &d, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(d, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
  while (st != nullptr && sqlite3_step(st) == SQLITE_ROW) v.push_back(sqlite3_column_int64(st, 0));
  sqlite3_finalize(st);
  sqlite3_close_v2(d);
  return v;
}

void PlainExec(const std::string& db, const std::string& sql) {
  sqlite3* d = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &d), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(d, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
      << sql << ": " << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close_v2(d);
}

std::string List(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

int64_t StringId(const std::string& db, const std::string& s) {
  auto v = PlainColumn(db, "SELECT id FROM strings WHERE s = '" + s + "'");
  return v.empty() ? -1 : v[0];
}

std::vector<int64_t> Ids(const std::vector<BlockZoneRow>& z) {
  std::vector<int64_t> v;
  for (const BlockZoneRow& r : z) v.push_back(r.block);
  return v;
}

TEST(BlockStore, SelectionMatchesPlainSqlAndHoldsEveryMatchingRow) {
  TempDir tmp;
  const std::string path = tmp.Sub("t.tdb");
  const std::vector<Written> rows = Build(path);
  ASSERT_EQ(PlainColumn(path, "SELECT count(*) FROM blocks")[0], kRanks * kBatches);
  auto db = engine::Db::Open(path, engine::Db::Mode::kReadOnly);
  ASSERT_TRUE(db.ok());
  BlockStore store(db->get(), path);

  const int64_t compute = StringId(path, "compute"), send = StringId(path, "MPI_Send");
  const int64_t mpi = StringId(path, "mpi");
  const int64_t mid_lo = 1000 + 2 * (kRowsPerBatch * 100 + 500) + 250;  // inside batch 2
  const int64_t mid_hi = mid_lo + 9000;                                 // into batch 3 or 4
  struct Case {
    Case(std::vector<int64_t> r = {}, std::vector<int64_t> n = {}, std::vector<int64_t> c = {},
         int64_t lo_ = INT64_MIN, int64_t hi_ = INT64_MAX, int64_t min_dur_ = INT64_MIN,
         int64_t after_ = INT64_MIN,
         BlockSelection::Order order_ = BlockSelection::Order::kRankTime)
        : ranks(std::move(r)),
          names(std::move(n)),
          cats(std::move(c)),
          lo(lo_),
          hi(hi_),
          min_dur(min_dur_),
          after(after_),
          order(order_) {}
    std::vector<int64_t> ranks, names, cats;
    int64_t lo, hi, min_dur, after;
    BlockSelection::Order order;
  };
  // Bounds equal to a block's own max_end and min_ts (the comparisons are inclusive).
  const int64_t edge_lo = PlainColumn(
      path, "SELECT max_end FROM blocks WHERE rank = 1 ORDER BY min_ts LIMIT 1 OFFSET 2")[0];
  const int64_t edge_hi = PlainColumn(
      path, "SELECT min_ts FROM blocks WHERE rank = 2 ORDER BY min_ts LIMIT 1 OFFSET 4")[0];
  const int64_t edge_dur = PlainColumn(
      path, "SELECT max_dur FROM blocks WHERE rank = 3 ORDER BY min_ts LIMIT 1 OFFSET 3")[0];
  std::vector<Case> cases = {
      {},
      {{}, {}, {}, edge_lo, edge_hi},
      {{}, {}, {}, INT64_MIN, INT64_MAX, edge_dur},
      {{2}},
      {{0, 3}},
      {{}, {}, {}, mid_lo, mid_hi},
      {{1}, {}, {}, mid_lo, mid_hi},
      {{}, {}, {}, INT64_MIN, INT64_MAX, 3000},
      {{}, {compute}},
      {{}, {compute, send}, {}, INT64_MIN, INT64_MAX, 2000},
      {{}, {}, {mpi}},
      {{1, 2}, {send}, {mpi}, mid_lo, INT64_MAX},
      {{}, {}, {}, INT64_MIN, INT64_MAX, INT64_MIN, 10},
      {{}, {}, {}, INT64_MIN, INT64_MAX, INT64_MIN, INT64_MIN, BlockSelection::Order::kBlock},
      {{}, {}, {}, INT64_MIN, INT64_MAX, INT64_MIN, INT64_MIN, BlockSelection::Order::kMaxDurDesc},
      {{},
       {compute},
       {},
       INT64_MIN,
       INT64_MAX,
       INT64_MIN,
       INT64_MIN,
       BlockSelection::Order::kMaxDurDesc},
      // By name, longest first: block_names rows read in key order, a block listed once at
      // its largest matching max_dur (a name appears under two categories per block).
      {{},
       {compute},
       {mpi},
       INT64_MIN,
       INT64_MAX,
       2000,
       INT64_MIN,
       BlockSelection::Order::kMaxDurDesc},
      {{1, 3},
       {send},
       {},
       mid_lo,
       INT64_MAX,
       INT64_MIN,
       INT64_MIN,
       BlockSelection::Order::kMaxDurDesc},
      {{},
       {compute, send},
       {},
       INT64_MIN,
       INT64_MAX,
       INT64_MIN,
       INT64_MIN,
       BlockSelection::Order::kMaxDurDesc},
      {{3}, {}, {}, INT64_MIN, mid_hi, INT64_MIN, INT64_MIN, BlockSelection::Order::kTimeDesc},
      {{}, {}, {}, 5, 4},  // an empty window
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    SCOPED_TRACE("case " + std::to_string(ci));
    BlockSelection sel;
    sel.ranks = c.ranks;
    sel.names = c.names;
    sel.cats = c.cats;
    sel.ts_lo = c.lo;
    sel.ts_hi = c.hi;
    sel.min_dur = c.min_dur;
    sel.after_block = c.after;
    sel.order = c.order;
    auto got = store.Select(sel);
    ASSERT_TRUE(got.ok()) << got.status().ToString();

    // The reference: the same conditions written as plain SQL, a block's names matched with
    // EXISTS (one row of block_names with both the name and the category).
    const bool by_name = !c.names.empty() || !c.cats.empty();
    std::string named = "EXISTS (SELECT 1 FROM block_names n WHERE n.block = b.block";
    if (!c.names.empty()) named += " AND n.name IN (" + List(c.names) + ")";
    if (!c.cats.empty()) named += " AND n.cat IN (" + List(c.cats) + ")";
    if (c.min_dur != INT64_MIN) named += " AND n.max_dur >= " + std::to_string(c.min_dur);
    named += ")";
    std::string where = "1";
    if (!c.ranks.empty()) where += " AND b.rank IN (" + List(c.ranks) + ")";
    where += " AND b.max_end >= " + std::to_string(c.lo);
    where += " AND b.min_ts <= " + std::to_string(c.hi);
    where += " AND b.block > " + std::to_string(c.after);
    if (by_name) {
      where += " AND " + named;
    } else if (c.min_dur != INT64_MIN) {
      where += " AND b.max_dur >= " + std::to_string(c.min_dur);
    }
    std::string order;
    switch (c.order) {
      case BlockSelection::Order::kBlock:
        order = "b.block";
        break;
      case BlockSelection::Order::kRankTime:
        order = "b.rank, b.min_ts, b.block";
        break;
      case BlockSelection::Order::kTimeDesc:
        order = "b.min_ts DESC";
        break;
      case BlockSelection::Order::kMaxDurDesc:
        order =
            by_name
                ? "(SELECT max(n.max_dur) FROM block_names n WHERE n.block = b.block" +
                      std::string(c.names.empty() ? "" : " AND n.name IN (" + List(c.names) + ")") +
                      std::string(c.cats.empty() ? "" : " AND n.cat IN (" + List(c.cats) + ")") +
                      ") DESC, b.block"
                : "b.max_dur DESC, b.block";
        break;
    }
    const std::vector<int64_t> want =
        PlainColumn(path, "SELECT b.block FROM blocks b WHERE " + where + " ORDER BY " + order);
    EXPECT_EQ(List(Ids(*got)), List(want));
    if (c.lo <= c.hi) {
      EXPECT_FALSE(want.empty());  // every case but the empty window selects
    }

    // Every row the test wrote that meets the selection's conditions is in a selected block
    // (the zone maps never drop a match), counted by decoding the selected blocks.
    uint64_t expect = 0;
    std::map<std::string, int64_t> id_of;
    for (const char* n : kNames) id_of[n] = StringId(path, n);
    id_of["mpi"] = mpi;
    id_of["cpu"] = StringId(path, "cpu");
    for (const Written& w : rows) {
      if (!c.ranks.empty() && std::count(c.ranks.begin(), c.ranks.end(), w.rank) == 0) continue;
      if (w.ts + w.dur < c.lo || w.ts > c.hi) continue;
      if (c.min_dur != INT64_MIN && w.dur < c.min_dur) continue;
      if (!c.names.empty() && std::count(c.names.begin(), c.names.end(), id_of[w.name]) == 0) {
        continue;
      }
      if (!c.cats.empty() && std::count(c.cats.begin(), c.cats.end(), id_of[w.cat]) == 0) continue;
      if (c.after != INT64_MIN) continue;  // (not a row condition: left out of this count)
      ++expect;
    }
    uint64_t found = 0;
    engine::DecodedBlock b;
    for (const BlockZoneRow& z : *got) {
      ASSERT_TRUE(z.ok) << z.error;
      ASSERT_TRUE(store.Read(z, engine::kColAll, &b).ok());
      for (size_t i = 0; i < b.n; ++i) {
        if (c.after != INT64_MIN) break;
        if (b.ts[i] + b.dur[i] < c.lo || b.ts[i] > c.hi) continue;
        if (c.min_dur != INT64_MIN && b.dur[i] < c.min_dur) continue;
        if (!c.names.empty() && std::count(c.names.begin(), c.names.end(), b.name[i]) == 0) {
          continue;
        }
        if (!c.cats.empty() && std::count(c.cats.begin(), c.cats.end(), b.cat[i]) == 0) continue;
        ++found;
      }
    }
    EXPECT_EQ(found, expect);

    // The one-pass decoded walk lists the same blocks with the same rows (its max_dur order
    // with names is the block's own: compared as sets there).
    std::vector<int64_t> walked;
    uint64_t walked_rows = 0;
    ASSERT_TRUE(store
                    .ForEachDecoded(sel, engine::kColTs,
                                    [&](const BlockZoneRow& z, engine::DecodedBlock& d) {
                                      walked.push_back(z.block);
                                      walked_rows += d.n;
                                      return Status::Ok();
                                    })
                    .ok());
    std::vector<int64_t> listed = Ids(*got);
    uint64_t listed_rows = 0;
    for (const BlockZoneRow& z : *got) listed_rows += z.count;
    if (c.order == BlockSelection::Order::kMaxDurDesc) {
      std::sort(walked.begin(), walked.end());
      std::sort(listed.begin(), listed.end());
    }
    if (c.min_dur == INT64_MIN || c.names.empty()) {  // (min_dur applies to the block's max_dur)
      EXPECT_EQ(List(walked), List(listed));
      EXPECT_EQ(walked_rows, listed_rows);
    }
  }
  // Ranks, meta and the string dictionary against plain SQL.
  auto ranks = store.Ranks();
  ASSERT_TRUE(ranks.ok());
  EXPECT_EQ(List(*ranks), List(PlainColumn(path, "SELECT DISTINCT rank FROM blocks ORDER BY 1")));
  std::map<std::string, std::string> meta;
  ASSERT_TRUE(store.LoadMeta(&meta).ok());
  EXPECT_EQ(meta["store.test"], "yes");
  EXPECT_EQ(static_cast<int64_t>(meta.size()), PlainColumn(path, "SELECT count(*) FROM meta")[0]);
}

// Lists longer than a statement's parameters allow (SQLite: 32,766 at most, 999 before 3.32): a
// pattern over a job's names can match tens of thousands. The same selection with each list
// padded to 40,000 ids that name nothing (ranks, names and categories beyond any in the file)
// lists exactly the blocks of the short lists, in each order, listed and decoded, twice.
TEST(BlockStore, ListsBeyondSqlitesParameterLimitSelectTheSameBlocks) {
  TempDir tmp;
  const std::string path = tmp.Sub("long.tdb");
  Build(path);
  auto db = engine::Db::Open(path, engine::Db::Mode::kReadOnly);
  ASSERT_TRUE(db.ok());
  BlockStore store(db->get(), path);
  const int64_t compute = StringId(path, "compute"), send = StringId(path, "MPI_Send");
  const int64_t mpi = StringId(path, "mpi");
  auto padded = [](std::vector<int64_t> v, int64_t from) {
    for (int64_t i = 0; i < 40000; ++i) v.push_back(from + i);
    return v;
  };
  using Order = BlockSelection::Order;
  for (Order order : {Order::kBlock, Order::kRankTime, Order::kMaxDurDesc, Order::kTimeDesc}) {
    for (int shape = 0; shape < 3; ++shape) {
      SCOPED_TRACE("order " + std::to_string(static_cast<int>(order)) + " shape " +
                   std::to_string(shape));
      BlockSelection small;
      small.order = order;
      small.ranks = {1, 3};
      if (shape == 0) small.names = {compute, send};
      if (shape == 1) small.cats = {mpi};
      if (shape == 2) {
        small.names = {send};
        small.any_cats = {mpi};
      }
      BlockSelection large = small;
      large.ranks = padded(small.ranks, 1000);
      if (!small.names.empty()) large.names = padded(small.names, 1 << 30);
      if (!small.cats.empty()) large.cats = padded(small.cats, 1 << 30);
      if (!small.any_cats.empty()) large.any_cats = padded(small.any_cats, 1 << 30);
      auto want = store.Select(small);
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      ASSERT_FALSE(want->empty());
      std::vector<int64_t> want_decoded;
      ASSERT_TRUE(store
                      .ForEachDecoded(small, engine::kColTs,
                                      [&](const BlockZoneRow& z, engine::DecodedBlock&) {
                                        want_decoded.push_back(z.block);
                                        return Status::Ok();
                                      })
                      .ok());
      for (int round = 0; round < 2; ++round) {
        auto got = store.Select(large);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        EXPECT_EQ(List(Ids(*got)), List(Ids(*want)));
        std::vector<int64_t> got_decoded;
        const Status s = store.ForEachDecoded(large, engine::kColTs,
                                              [&](const BlockZoneRow& z, engine::DecodedBlock&) {
                                                got_decoded.push_back(z.block);
                                                return Status::Ok();
                                              });
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ(List(got_decoded), List(want_decoded));
      }
    }
  }
}

// Names OR categories (BlockSelection::any_cats, as the collective views select): a file where a
// category lies in some blocks only, against plain SQL over blocks/block_names (a block_names
// row matching either alternative) and against the rows the test wrote.
TEST(BlockStore, NamesOrCategoriesMatchPlainSql) {
  TempDir tmp;
  const std::string path = tmp.Sub("or.tdb");
  struct W {
    int32_t rank;
    std::string name, cat;
    int64_t dur;
  };
  std::vector<W> rows;
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    int64_t ts = 1000;
    // 3 ranks x 5 batches, a block each: "nccl" only in blocks with (batch + rank) % 3 == 0,
    // "gpu" only in batch 4, the names rotate with the batch and the rank.
    for (int batch = 0; batch < 5; ++batch) {
      ASSERT_TRUE((*w)->BeginBatch().ok());
      for (int32_t rank = 0; rank < 3; ++rank) {
        engine::TrackSpec spec;
        spec.rank = rank;
        spec.tid = 200 + rank;
        spec.pid = 20 + rank;
        const uint32_t track = (*w)->Track(spec);
        for (int i = 0; i < 12; ++i) {
          engine::Row r;
          r.track = track;
          r.k = (*w)->TakeK(track);
          r.ts = ts + i * 50;
          r.dur = 5 + batch * 100 + i;
          W x{rank, kNames[(batch + rank + i % 2) % 5], "cpu", r.dur};
          if (i == 3 && (batch + rank) % 3 == 0) x.cat = "nccl";
          if (i == 7 && batch == 4) x.cat = "gpu";
          r.name = (*w)->Intern(x.name);
          r.cat = (*w)->Intern(x.cat);
          rows.push_back(x);
          ASSERT_TRUE((*w)->AddRow(rank, std::move(r)).ok());
        }
      }
      ASSERT_TRUE((*w)->CommitBatch().ok());
      ts += 1000;
    }
  }
  auto db = engine::Db::Open(path, engine::Db::Mode::kReadOnly);
  ASSERT_TRUE(db.ok());
  BlockStore store(db->get(), path);
  std::map<std::string, int64_t> id;
  for (const char* s : {"compute", "MPI_Send", "io", "step", "cpu", "nccl", "gpu"}) {
    id[s] = StringId(path, s);
    ASSERT_GE(id[s], 0) << s;
  }
  struct Case {
    std::vector<int64_t> ranks, names, cats, any_cats;
    int64_t min_dur;
    BlockSelection::Order order;
  };
  const auto kBlock = BlockSelection::Order::kBlock;
  const std::vector<Case> cases = {
      {{}, {}, {}, {id["nccl"]}, INT64_MIN, kBlock},
      {{}, {id["compute"]}, {}, {id["nccl"]}, INT64_MIN, kBlock},
      {{},
       {id["io"], id["step"]},
       {},
       {id["nccl"], id["gpu"]},
       INT64_MIN,
       BlockSelection::Order::kRankTime},
      {{1, 2}, {id["MPI_Send"]}, {id["cpu"]}, {id["nccl"]}, INT64_MIN, kBlock},
      {{}, {id["compute"]}, {}, {id["gpu"]}, 300, BlockSelection::Order::kMaxDurDesc},
      {{0}, {}, {}, {id["gpu"], id["nccl"]}, INT64_MIN, BlockSelection::Order::kTimeDesc},
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    SCOPED_TRACE("case " + std::to_string(ci));
    BlockSelection sel;
    sel.ranks = c.ranks;
    sel.names = c.names;
    sel.cats = c.cats;
    sel.any_cats = c.any_cats;
    sel.min_dur = c.min_dur;
    sel.order = c.order;
    auto got = store.Select(sel);
    ASSERT_TRUE(got.ok()) << got.status().ToString();

    // The reference: a block_names row matching (name AND cat) OR an any_cats category.
    std::string alt = "(1";
    if (!c.names.empty()) alt += " AND n.name IN (" + List(c.names) + ")";
    if (!c.cats.empty()) alt += " AND n.cat IN (" + List(c.cats) + ")";
    alt += ")";
    const bool first = !c.names.empty() || !c.cats.empty();
    std::string match =
        "(" + (first ? alt + " OR " : std::string()) + "n.cat IN (" + List(c.any_cats) + "))";
    std::string dur =
        c.min_dur == INT64_MIN ? "" : " AND n.max_dur >= " + std::to_string(c.min_dur);
    std::string where =
        "EXISTS (SELECT 1 FROM block_names n WHERE n.block = b.block AND " + match + dur + ")";
    if (!c.ranks.empty()) where += " AND b.rank IN (" + List(c.ranks) + ")";
    std::string order = "b.block";
    if (c.order == BlockSelection::Order::kRankTime) order = "b.rank, b.min_ts, b.block";
    if (c.order == BlockSelection::Order::kTimeDesc) order = "b.min_ts DESC";
    if (c.order == BlockSelection::Order::kMaxDurDesc) {
      order = "(SELECT max(n.max_dur) FROM block_names n WHERE n.block = b.block AND " + match +
              dur + ") DESC, b.block";
    }
    const std::vector<int64_t> want =
        PlainColumn(path, "SELECT b.block FROM blocks b WHERE " + where + " ORDER BY " + order);
    ASSERT_FALSE(want.empty());
    EXPECT_LT(want.size(), 15u);  // each case leaves blocks out
    EXPECT_EQ(List(Ids(*got)), List(want));

    // Every written row meeting the conditions is in a selected block: counted by the walk.
    auto in = [](const std::vector<int64_t>& v, int64_t x) {
      return v.empty() || std::count(v.begin(), v.end(), x) > 0;
    };
    auto row_matches = [&](int64_t rank, int64_t name, int64_t cat, int64_t d) {
      if (!in(c.ranks, rank)) return false;
      if (c.min_dur != INT64_MIN && d < c.min_dur) return false;
      const bool by_any = std::count(c.any_cats.begin(), c.any_cats.end(), cat) > 0;
      return by_any || (first && in(c.names, name) && in(c.cats, cat));
    };
    uint64_t expect = 0;
    for (const W& w : rows) expect += row_matches(w.rank, id[w.name], id[w.cat], w.dur) ? 1 : 0;
    ASSERT_GT(expect, 0u);
    uint64_t found = 0;
    std::vector<int64_t> walked;
    ASSERT_TRUE(store
                    .ForEachDecoded(sel, engine::kColName | engine::kColCat | engine::kColDur,
                                    [&](const BlockZoneRow& z, engine::DecodedBlock& d) {
                                      walked.push_back(z.block);
                                      for (size_t i = 0; i < d.n; ++i) {
                                        found += row_matches(z.rank, d.name[i], d.cat[i], d.dur[i])
                                                     ? 1
                                                     : 0;
                                      }
                                      return Status::Ok();
                                    })
                    .ok());
    EXPECT_EQ(found, expect);
    if (c.min_dur == INT64_MIN && c.order != BlockSelection::Order::kMaxDurDesc) {
      EXPECT_EQ(List(walked), List(Ids(*got)));  // (min_dur applies to the block's max_dur)
    }
  }
}

// One hostile value per case, put into a real file by plain SQL; the store must refuse exactly
// the damaged block, with a Corruption naming the file and the block, and read the others.
TEST(BlockStore, HostileValuesAreRefusedNamingTheFileAndTheBlock) {
  TempDir tmp;
  const std::string base = tmp.Sub("base.tdb");
  Build(base);
  const int64_t victim =
      PlainColumn(base, "SELECT block FROM blocks ORDER BY block LIMIT 1 OFFSET 5")[0];
  struct Case {
    const char* what;
    std::string sql;
    bool zone_refused;    // refused by the zone map's checks (else by the read)
    const char* message;  // a part of the expected message
  };
  const std::string where = " WHERE block = " + std::to_string(victim);
  const std::vector<Case> cases = {
      {"count 0", "UPDATE blocks SET count = 0" + where, true, "declares"},
      {"count -1", "UPDATE blocks SET count = -1" + where, true, "declares"},
      {"count 65537", "UPDATE blocks SET count = 65537" + where, true, "declares"},
      {"count 2^62", "UPDATE blocks SET count = 4611686018427387904" + where, true, "declares"},
      {"rank 2^40", "UPDATE blocks SET rank = 1099511627776" + where, true, "rank"},
      {"count that lies", "UPDATE blocks SET count = count - 1" + where, false, "zone map says"},
      {"payload not a block", "UPDATE blocks SET data = x'00112233445566778899'" + where, false,
       ""},
      {"payload empty", "UPDATE blocks SET data = zeroblob(0)" + where, false, ""},
      {"payload truncated", "UPDATE blocks SET data = substr(data, 1, length(data) / 2)" + where,
       false, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = tmp.Sub(std::string("h") + std::to_string(&c - cases.data()) + ".tdb");
    std::filesystem::copy_file(base, path);
    PlainExec(path, c.sql);
    auto db = engine::Db::Open(path, engine::Db::Mode::kReadOnly);
    ASSERT_TRUE(db.ok());
    BlockStore store(db->get(), path);
    auto zones = store.Select(BlockSelection());
    ASSERT_TRUE(zones.ok()) << zones.status().ToString();
    ASSERT_EQ(zones->size(), static_cast<size_t>(kRanks * kBatches));
    int refused = 0;
    engine::DecodedBlock b;
    for (const BlockZoneRow& z : *zones) {
      Status s = store.Read(z, engine::kColAll, &b);
      if (z.block != victim) {
        EXPECT_TRUE(z.ok) << z.error;
        EXPECT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ(b.n, static_cast<size_t>(kRowsPerBatch));
        continue;
      }
      EXPECT_EQ(z.ok, !c.zone_refused) << z.error;
      if (c.zone_refused) {
        EXPECT_EQ(z.count, 0u);  // never a size to trust
        EXPECT_NE(z.error.find(path), std::string::npos) << z.error;
        EXPECT_NE(z.error.find("block " + std::to_string(victim)), std::string::npos) << z.error;
        EXPECT_NE(z.error.find(c.message), std::string::npos) << z.error;
      }
      ASSERT_FALSE(s.ok());
      ++refused;
      EXPECT_TRUE(s.IsCorruption()) << s.ToString();
      EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
      EXPECT_NE(s.message().find("block " + std::to_string(victim)), std::string::npos)
          << s.message();
      EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
      auto cached = store.ReadCached(z, engine::kColAll);
      EXPECT_FALSE(cached.ok());  // nor through the cache
    }
    EXPECT_EQ(refused, 1);
    // The decoded walk stops at the damaged block with the same kind of message.
    size_t before_victim = 0;
    Status walk = store.ForEachDecoded(BlockSelection(), engine::kColAll,
                                       [&](const BlockZoneRow&, engine::DecodedBlock&) {
                                         ++before_victim;
                                         return Status::Ok();
                                       });
    EXPECT_TRUE(walk.IsCorruption()) << walk.ToString();
    EXPECT_NE(walk.message().find(path), std::string::npos) << walk.message();
    EXPECT_NE(walk.message().find("block " + std::to_string(victim)), std::string::npos)
        << walk.message();
    EXPECT_LT(before_victim, static_cast<size_t>(kRanks * kBatches));
  }
}

TEST(BlockStore, HostileStringIdsAreLeftOutOfTheDictionary) {
  TempDir tmp;
  const std::string path = tmp.Sub("s.tdb");
  Build(path);
  PlainExec(path, "INSERT INTO strings(id, s) VALUES (4000000000000, 'far away')");
  auto db = engine::Db::Open(path, engine::Db::Mode::kReadOnly);
  ASSERT_TRUE(db.ok());
  BlockStore store(db->get(), path);
  std::vector<int64_t> ids;
  auto last = store.ForEachString(0, [&](int64_t id, std::string_view) { ids.push_back(id); });
  ASSERT_TRUE(last.ok());
  const std::vector<int64_t> want =
      PlainColumn(path, "SELECT id FROM strings WHERE id > 0 AND id < 1000000 ORDER BY id");
  EXPECT_EQ(List(ids), List(want));
  EXPECT_EQ(*last, want.back());
  // Read on from the last id: nothing new.
  ids.clear();
  auto again = store.ForEachString(*last, [&](int64_t id, std::string_view) { ids.push_back(id); });
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(ids.empty());
  EXPECT_EQ(*again, *last);
}

TEST(BlockStore, TheCacheServesABlockOnceAndForgetsItWhenTheFileChanges) {
  TempDir tmp;
  const std::string path = tmp.Sub("c.tdb");
  Build(path);
  auto db = engine::Db::Open(path, engine::Db::Mode::kReadOnly);
  ASSERT_TRUE(db.ok());
  BlockStore store(db->get(), path);
  auto zones = store.Select(BlockSelection());
  ASSERT_TRUE(zones.ok());
  store.SetVersion(1, 0);
  auto a = store.ReadCached((*zones)[0], engine::kColTs);
  auto b = store.ReadCached((*zones)[0], engine::kColName);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());                              // the same decoded block
  EXPECT_TRUE((*b)->has(engine::kColTs | engine::kColName));  // columns added on demand
  store.SetVersion(1, 0);
  auto c = store.ReadCached((*zones)[0], engine::kColTs);
  EXPECT_EQ(a->get(), c->get());
  store.SetVersion(2, 0);  // the file changed
  auto d = store.ReadCached((*zones)[0], engine::kColTs);
  ASSERT_TRUE(d.ok());
  EXPECT_NE(a->get(), d->get());
  EXPECT_EQ((*d)->n, (*a)->n);
}

}  // namespace
}  // namespace tracedb::testing
