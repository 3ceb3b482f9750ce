// The grouped scan of the `events` table: for ORDER BY / GROUP BY / DISTINCT on groupable
// columns, a partition of the table (one rank, or every block) is decoded and its rows served
// sorted by those columns, group after group, so SQLite runs no sorter. See events_internal.h
// and docs/sql.md ("Grouped scan", "Grouped order").
#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

#include "query/sql/events_internal.h"

namespace tracedb::query::events {

using engine::DecodedBlock;

namespace {

// Dense numbers for raw key values: a flat table for small values, a map beyond.
class DenseKeys {
 public:
  uint32_t Get(uint64_t v) {
    if (v < flat_.size()) {
      uint32_t& d = flat_[v];
      if (d != 0) return d - 1;
    }
    if (v < kFlat) {
      if (flat_.size() <= v) flat_.resize(v + 1, 0);
      uint32_t& d = flat_[v];
      if (d == 0) d = ++count_;
      return d - 1;
    }
    auto [it, fresh] = big_.emplace(v, count_);
    if (fresh) ++count_;
    return it->second;
  }
  uint32_t count() const { return count_; }

 private:
  static constexpr uint64_t kFlat = 1u << 22;
  std::vector<uint32_t> flat_;
  std::unordered_map<uint64_t, uint32_t> big_;
  uint32_t count_ = 0;
};

// The raw key value of row i of b for a group column (equal SQL values, equal keys).
uint64_t KeyValue(int col, const DecodedBlock& b, size_t i, int32_t rank, const DbCatalog& cat) {
  const uint32_t track = b.track[i];
  const DbCatalog::Track* t = track < cat.tracks.size() ? &cat.tracks[track] : nullptr;
  switch (col) {
    case kRank:
      return static_cast<uint32_t>(rank);
    case kTrack:
      return track;
    case kTid:
      return t ? t->tid_key : UINT32_MAX;
    case kTrackName:
      return t ? t->name_key : UINT32_MAX;
    case kLane:
      return t ? t->lane_key : UINT32_MAX;
    case kName:
      return b.name[i];
    case kCat: {
      const uint32_t id = b.cat[i];
      return id < cat.strings.size() && cat.strings[id].empty() ? 0 : id;
    }
    case kKind:
      return b.kind[i];
    case kDepth:
      return b.depth[i];
    default:
      return 0;
  }
}

// A group column's SQL value of a row: NULL, an integer or a text.
struct SqlValue {
  int type = 0;  // 0 NULL, 1 integer, 2 text
  int64_t i = 0;
  std::string_view t;
};

SqlValue ValueOf(int col, const DecodedBlock& b, size_t i, int32_t rank, const DbCatalog& cat) {
  const uint32_t track = b.track[i];
  const DbCatalog::Track* t = track < cat.tracks.size() ? &cat.tracks[track] : nullptr;
  auto text = [&](uint32_t id) {
    return id < cat.strings.size() ? SqlValue{2, 0, cat.strings[id]} : SqlValue{};
  };
  switch (col) {
    case kRank:
      return SqlValue{1, rank, {}};
    case kTrack:
      return SqlValue{1, track, {}};
    case kTid:
      return t && t->tid >= 0 ? SqlValue{1, t->tid, {}} : SqlValue{};
    case kTrackName:
      return t ? SqlValue{2, 0, t->name} : SqlValue{};
    case kLane:
      return t && t->lane ? SqlValue{2, 0, t->name} : SqlValue{};
    case kName:
      return text(b.name[i]);
    case kCat: {
      const uint32_t id = b.cat[i];
      return id != 0 && id < cat.strings.size() && !cat.strings[id].empty() ? text(id) : SqlValue{};
    }
    case kKind:
      return SqlValue{2, 0, engine::RowKindName(static_cast<engine::RowKind>(b.kind[i]))};
    case kDepth:
      return SqlValue{1, b.depth[i], {}};
    default:
      return SqlValue{};
  }
}

// SQLite's order: NULL < integers < texts (BINARY: bytes, then length).
int CompareSql(int col, const DecodedBlock& ba, size_t ia, int32_t rank_a, const DecodedBlock& bb,
               size_t ib, int32_t rank_b, const DbCatalog& cat) {
  const SqlValue a = ValueOf(col, ba, ia, rank_a, cat), b = ValueOf(col, bb, ib, rank_b, cat);
  if (a.type != b.type) return a.type < b.type ? -1 : 1;
  if (a.type == 1) return a.i < b.i ? -1 : a.i > b.i ? 1 : 0;
  if (a.type == 2) return a.t.compare(b.t) < 0 ? -1 : a.t.compare(b.t) > 0 ? 1 : 0;
  return 0;
}

// Loads the next partition (the blocks of one rank when the groups are within a rank, else
// every block) and orders its selected rows group after group. Per selected row it keeps only
// a group id while loading (4 bytes) and the row's (block << 32) | row code in the order (8
// bytes): at 10M rows the temporaries' page faults cost more than the grouping itself.
int LoadPartition(EventsCursor* c) {
  const DbCatalog& cat = c->vtab->catalog;
  const Constraints& f = c->f;
  ScanScratch& scratch = c->vtab->scratch;
  scratch.GiveBlocks(&c->part_blocks);  // the previous partition's, decoded into again
  c->part_ranks.clear();
  if (c->part_order.capacity() == 0) c->part_order = scratch.TakeOrder();
  c->part_order.clear();
  c->part_pos = 0;
  const bool per_rank = c->per_rank;
  const bool one_col = f.group_cols.size() == 1;
  uint32_t key_cols = 0;
  for (int col : f.group_cols) key_cols |= ColumnGroup(col);
  // One dense number per group column and row; with one column it is the group id itself.
  std::vector<DenseKeys> dense(f.group_cols.size());
  std::vector<std::vector<uint32_t>> keys(f.group_cols.size());
  keys.front() = scratch.TakeIds();
  std::vector<uint64_t> rep;  // per group (one column): its first row, (block << 32) | row
  // The selected rows of blocks not selected whole (a block selected whole keeps none).
  std::vector<std::vector<uint32_t>> part_sel;
  std::vector<uint32_t> sel;
  // Room for every row the partition's blocks hold (their zone maps say how many), so the
  // arrays are not regrown (and their pages faulted in again) while the blocks are read.
  size_t expect_rows = 0, expect_blocks = 0;
  for (size_t b = c->next_part_block; b < c->blocks.size(); ++b) {
    if (per_rank && c->blocks[b].rank != c->blocks[c->next_part_block].rank) break;
    expect_rows += static_cast<size_t>(std::max<int64_t>(0, c->blocks[b].count));
    ++expect_blocks;
  }
  c->part_blocks.reserve(expect_blocks);
  c->part_ranks.reserve(expect_blocks);
  std::vector<size_t> sel_start;  // per block: the selected rows before it
  sel_start.reserve(expect_blocks + 1);
  part_sel.reserve(expect_blocks);
  for (auto& k : keys) k.reserve(expect_rows);
  size_t selected = 0;
  while (c->next_part_block < c->blocks.size()) {
    const BlockRef& ref = c->blocks[c->next_part_block];
    if (per_rank && !c->part_blocks.empty() && ref.rank != c->part_ranks.back()) break;
    ++c->next_part_block;
    const RowChecks k = ChecksFor(f, ref, cat);
    DecodedBlock b = scratch.TakeBlock();
    int rc = LoadBlock(c, ref, &b, k.cols);
    if (rc != SQLITE_OK) return rc;
    Select(f, k, b, ref.rank, cat, &sel);
    if (sel.empty()) {
      scratch.GiveBlock(std::move(b));
      continue;
    }
    tracedb::Status s = b.Need(key_cols);
    if (!s.ok()) return Fail(&c->vtab->base, s.message());
    const uint64_t bi = c->part_blocks.size();
    for (size_t j = 0; j < f.group_cols.size(); ++j) {
      const int col = f.group_cols[j];
      std::vector<uint32_t>& out = keys[j];
      DenseKeys& d = dense[j];
      auto add = [&](uint32_t i, uint64_t v) {
        const uint32_t before = d.count();
        out.push_back(d.Get(v));
        if (one_col && d.count() != before) rep.push_back((bi << 32) | i);
      };
      // The common keys read their column directly; the others go through KeyValue.
      if (col == kName) {
        for (uint32_t i : sel) add(i, b.name[i]);
      } else if (col == kTrack) {
        for (uint32_t i : sel) add(i, b.track[i]);
      } else if (col == kRank) {
        add(sel.front(), static_cast<uint32_t>(ref.rank));
        out.insert(out.end(), sel.size() - 1, out.back());
      } else {
        for (uint32_t i : sel) add(i, KeyValue(col, b, i, ref.rank, cat));
      }
    }
    sel_start.push_back(selected);
    selected += sel.size();
    part_sel.emplace_back();
    if (sel.size() != b.n) part_sel.back() = sel;
    c->part_blocks.push_back(std::move(b));
    c->part_ranks.push_back(ref.rank);
  }
  sel_start.push_back(selected);
  const size_t n = keys.front().size();
  if (n == 0) {
    scratch.GiveIds(&keys.front());
    return SQLITE_OK;
  }
  // Each selected row, in block order, with its code (block << 32) | row.
  auto for_each_row = [&](auto fn) {
    size_t r = 0;
    for (size_t bi = 0; bi < c->part_blocks.size(); ++bi) {
      const uint64_t base = static_cast<uint64_t>(bi) << 32;
      if (part_sel[bi].empty()) {
        const size_t rows_here = c->part_blocks[bi].n;
        for (size_t i = 0; i < rows_here; ++i) fn(r++, base | i);
      } else {
        for (uint32_t i : part_sel[bi]) fn(r++, base | i);
      }
    }
  };
  // Group ids: with one column its dense keys; else mixed-radix numbers of the dense keys when
  // they fit a flat table, else a map.
  std::vector<uint32_t>& gid = keys.front();  // overwritten with the group ids
  uint32_t ngroups = 0;
  if (one_col) {
    ngroups = dense.front().count();
  } else {
    uint64_t groups = 1;
    for (const DenseKeys& d : dense) {
      groups = groups > (uint64_t{1} << 40) / std::max<uint32_t>(1, d.count())
                   ? (uint64_t{1} << 41)
                   : groups * std::max<uint32_t>(1, d.count());
    }
    // The first row of each group, found by walking the rows in block order.
    std::vector<uint64_t> first;
    if (groups <= (uint64_t{1} << 22)) {
      std::vector<uint32_t> table(groups, 0);
      for (size_t r = 0; r < n; ++r) {
        uint64_t g = 0;
        for (size_t j = 0; j < keys.size(); ++j) g = g * dense[j].count() + keys[j][r];
        uint32_t& id = table[g];
        if (id == 0) {
          id = ++ngroups;
          first.push_back(r);
        }
        gid[r] = id - 1;
      }
    } else {
      std::map<std::vector<uint32_t>, uint32_t> ids;
      std::vector<uint32_t> key(keys.size());
      for (size_t r = 0; r < n; ++r) {
        for (size_t j = 0; j < keys.size(); ++j) key[j] = keys[j][r];
        auto [it, fresh] = ids.emplace(key, ngroups);
        if (fresh) {
          ++ngroups;
          first.push_back(r);
        }
        gid[r] = it->second;
      }
    }
    for (size_t j = 1; j < keys.size(); ++j) std::vector<uint32_t>().swap(keys[j]);
    // The groups' first rows as (block << 32) | row: selected row r is in the last block
    // whose selected rows start at or before r.
    rep.resize(ngroups);
    for (size_t g = 0; g < first.size(); ++g) {
      const size_t r = static_cast<size_t>(first[g]);
      const size_t bi = static_cast<size_t>(
          std::upper_bound(sel_start.begin(), sel_start.end(), r) - sel_start.begin() - 1);
      const size_t j = r - sel_start[bi];
      const uint64_t i = part_sel[bi].empty() ? j : part_sel[bi][j];
      rep[g] = (static_cast<uint64_t>(bi) << 32) | i;
    }
  }
  // The groups in ORDER BY order (SQL values compared as SQLite does), then a counting sort
  // of the rows by their group's place (stable: within a group, rows stay in block order).
  std::vector<uint32_t> groups_sorted(ngroups);
  for (uint32_t g = 0; g < ngroups; ++g) groups_sorted[g] = g;
  std::stable_sort(groups_sorted.begin(), groups_sorted.end(), [&](uint32_t a, uint32_t b) {
    const uint64_t ra = rep[a], rb = rep[b];
    for (size_t j = 0; j < f.group_cols.size(); ++j) {
      const int cmp = CompareSql(f.group_cols[j], c->part_blocks[ra >> 32], ra & 0xffffffffu,
                                 c->part_ranks[ra >> 32], c->part_blocks[rb >> 32],
                                 rb & 0xffffffffu, c->part_ranks[rb >> 32], cat);
      if (cmp != 0) return f.group_desc[j] ? cmp > 0 : cmp < 0;
    }
    return false;
  });
  std::vector<uint32_t> place(ngroups);
  for (uint32_t p = 0; p < ngroups; ++p) place[groups_sorted[p]] = p;
  std::vector<size_t> start(ngroups + 1, 0);
  for (uint32_t g : gid) ++start[place[g] + 1];
  for (uint32_t g = 0; g < ngroups; ++g) start[g + 1] += start[g];
  c->part_order.resize(n);
  uint64_t* order = c->part_order.data();
  for_each_row([&](size_t r, uint64_t code) { order[start[place[gid[r]]]++] = code; });
  scratch.GiveIds(&gid);
  return SQLITE_OK;
}

void SetGroupedRow(EventsCursor* c) {
  const uint64_t code = c->part_order[c->part_pos];
  const size_t bi = static_cast<size_t>(code >> 32);
  c->blk = &c->part_blocks[bi];
  c->row = static_cast<size_t>(code & 0xffffffffu);
  c->rank = c->part_ranks[bi];
}

}  // namespace

DecodedBlock ScanScratch::TakeBlock() {
  if (blocks_.empty()) return DecodedBlock();
  DecodedBlock b = std::move(blocks_.back());
  blocks_.pop_back();
  bytes_ -= b.CapacityBytes();
  return b;
}

void ScanScratch::GiveBlock(DecodedBlock&& b) {
  DecodedBlock mine = std::move(b);  // freed here unless kept
  const size_t add = mine.CapacityBytes();
  if (add == 0 || bytes_ + add > kMaxBytes) return;
  blocks_.push_back(std::move(mine));
  bytes_ += add;
}

void ScanScratch::GiveBlocks(std::vector<DecodedBlock>* v) {
  for (DecodedBlock& b : *v) GiveBlock(std::move(b));
  v->clear();
}

void ReleaseGrouped(EventsCursor* c) {
  c->vtab->scratch.GiveBlocks(&c->part_blocks);
  c->vtab->scratch.GiveOrder(&c->part_order);
  c->part_ranks.clear();
  c->part_pos = 0;
}

int StartGrouped(EventsCursor* c) {
  // Rank by rank when that keeps the ORDER BY: the first column is the rank, or the track and
  // the ranks' track ids do not interleave. Otherwise one partition holds every block.
  const DbCatalog& cat = c->vtab->catalog;
  const int first = c->f.group_cols.front();
  std::map<int32_t, std::pair<int64_t, int64_t>> span;  // rank -> its track ids [lo, hi]
  for (size_t t = 1; t < cat.tracks.size(); ++t) {
    auto [it, fresh] = span.emplace(cat.tracks[t].rank, std::make_pair(t, t));
    if (!fresh) it->second.second = static_cast<int64_t>(t);
  }
  std::map<int32_t, int64_t> order;  // rank -> place of its partition
  if (first == kRank) {
    for (const BlockRef& b : c->blocks) order.emplace(b.rank, b.rank);
  } else if (first == kTrack) {
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (const auto& [rank, r] : span) {
      order[rank] = r.first;
      ranges.push_back(r);
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i) {
      if (ranges[i].first <= ranges[i - 1].second) order.clear();  // interleaved
    }
    if (order.empty()) span.clear();
    for (const BlockRef& b : c->blocks) {
      if (!order.empty() && !order.count(b.rank)) order.clear();  // a rank without tracks
    }
  }
  c->per_rank = !order.empty();
  if (c->per_rank) {
    const bool desc = c->f.group_desc.front();
    std::stable_sort(c->blocks.begin(), c->blocks.end(), [&](const BlockRef& a, const BlockRef& b) {
      const int64_t pa = order[a.rank], pb = order[b.rank];
      return desc ? pa > pb : pa < pb;
    });
  }
  c->next_part_block = 0;
  c->part_order.clear();
  return NextGrouped(c);
}

int NextGrouped(EventsCursor* c) {
  if (!c->part_order.empty() && ++c->part_pos < c->part_order.size()) {
    SetGroupedRow(c);
    return SQLITE_OK;
  }
  while (c->next_part_block < c->blocks.size()) {
    int rc = LoadPartition(c);
    if (rc != SQLITE_OK) return rc;
    if (!c->part_order.empty()) {
      SetGroupedRow(c);
      return SQLITE_OK;
    }
  }
  ReleaseGrouped(c);
  c->eof = true;
  return SQLITE_OK;
}

// ORDER BY dur DESC LIMIT n: visits blocks by their largest duration, decodes only the columns
// the constraints need (and dur), keeps the n largest rows, and stops when no block left can
// beat the n-th; then decodes the winners' blocks whole to materialise their rows.
}  // namespace tracedb::query::events
