// The block scan of the `events` table and the top-n search: zone maps, constraints evaluated
// a block at a time into a selection vector (blocks whose zone map proves every row matches
// are served without decoding what nobody reads), the decoded-block cache, the id index, and
// ORDER BY dur DESC LIMIT n. The grouped scan is in events_group.cc. See events_internal.h.
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "engine/db/block_check.h"
#include "engine/util/saturating.h"
#include "query/sql/events_internal.h"

namespace tracedb::query::events {

using engine::DecodedBlock;

int Fail(sqlite3_vtab* vtab, const std::string& msg) {
  sqlite3_free(vtab->zErrMsg);
  vtab->zErrMsg = sqlite3_mprintf("%s", msg.c_str());
  return SQLITE_ERROR;
}

// ---- zone maps ----

namespace {

bool BlockMayMatch(const Constraints& f, const BlockRef& b) {
  if (!f.rank.Contains(b.rank)) return false;
  // Durations are never negative (the builder clamps them), so ts <= end <= max_end.
  if (b.max_end < f.ts.lo || b.min_ts > f.ts.hi) return false;
  if (b.max_end < f.end.lo) return false;
  if (b.max_dur < f.dur.lo) return false;
  if (f.kind && (b.kinds & (1u << *f.kind)) == 0) return false;
  if (!f.step.All()) {
    auto it = f.step_ts.find(b.rank);
    if (it == f.step_ts.end()) return false;
    if (b.max_end < it->second.lo || b.min_ts > it->second.hi) return false;
  }
  return true;
}

}  // namespace

RowChecks ChecksFor(const Constraints& f, const BlockRef& b, const DbCatalog& cat) {
  RowChecks k;
  const int64_t min_dur = std::max<int64_t>(0, cat.MinDur(b.rank));
  k.name = f.name.has_value();
  k.cat = f.cat.has_value();
  // Settled by the block's kinds when it can hold no other kind (BlockMayMatch drops a block
  // that cannot hold the wanted one).
  k.kind = f.kind && (b.kinds & ~(1u << *f.kind)) != 0;
  k.track = f.track.set;
  k.dur = f.dur.set && !(min_dur >= f.dur.lo && b.max_dur <= f.dur.hi);
  k.ts = f.ts.set && !(b.min_ts >= f.ts.lo && b.max_end <= f.ts.hi);
  // end >= lo for every row when min_ts + min_dur >= lo (min_dur >= 0: no overflow below).
  const bool end_lo = f.end.lo <= INT64_MIN + min_dur || b.min_ts >= f.end.lo - min_dur;
  k.end = f.end.set && !(end_lo && b.max_end <= f.end.hi);
  k.id = f.id.set;
  k.parent = f.parent.set;
  k.step = f.step.set;
  k.depth = f.depth.set;
  k.args = f.bytes.set || f.peer.set || f.tag.set || f.comm.set || f.seq.set || f.flow.set;
  if (k.depth) k.cols |= engine::kColDepth;
  if (k.args) k.cols |= engine::kColArgs;
  if (k.name) k.cols |= engine::kColName;
  if (k.cat) k.cols |= engine::kColCat;
  if (k.kind) k.cols |= engine::kColKind;
  if (k.dur) k.cols |= engine::kColDur;
  if (k.ts || k.end || k.step) k.cols |= engine::kColTs;
  if (k.id) k.cols |= engine::kColK;
  if (k.parent) k.cols |= engine::kColParent;
  return k;
}

// Keeps in `sel` the rows (of `n`) for which `keep` holds; `first` when `sel` is not built yet.
namespace {

template <typename Keep>
void Refine(bool* first, size_t n, std::vector<uint32_t>* sel, Keep keep) {
  if (*first) {
    sel->resize(n);
    size_t o = 0;
    for (uint32_t i = 0; i < n; ++i) {
      (*sel)[o] = i;
      o += keep(i) ? 1 : 0;
    }
    sel->resize(o);
    *first = false;
    return;
  }
  size_t o = 0;
  for (uint32_t i : *sel) {
    (*sel)[o] = i;
    o += keep(i) ? 1 : 0;
  }
  sel->resize(o);
}

}  // namespace

// The rows of `b` that meet the checks, into `sel`.
void Select(const Constraints& f, const RowChecks& k, const DecodedBlock& b, int32_t rank,
            const DbCatalog& cat, std::vector<uint32_t>* sel) {
  bool first = true;
  const size_t n = b.n;
  if (k.id && f.id.lo == f.id.hi) {
    // A block's rows are ordered by (track, k) (EncodeBlock): one binary search finds the event.
    const auto track = static_cast<uint32_t>(static_cast<uint64_t>(f.id.lo) >> 32);
    const uint64_t key = static_cast<uint64_t>(f.id.lo) & 0xffffffffu;
    auto less = [&](size_t i) {
      return b.track[i] < track || (b.track[i] == track && b.k[i] < key);
    };
    size_t lo = 0, hi = n;
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (less(mid))
        lo = mid + 1;
      else
        hi = mid;
    }
    sel->clear();
    for (size_t i = lo; i < n && b.track[i] == track && b.k[i] == key; ++i) {
      sel->push_back(static_cast<uint32_t>(i));
    }
    first = false;
  }
  if (k.name) {
    const uint32_t v = *f.name;
    Refine(&first, n, sel, [&](uint32_t i) { return b.name[i] == v; });
  }
  if (k.cat) {
    const uint32_t v = *f.cat;
    Refine(&first, n, sel, [&](uint32_t i) { return b.cat[i] == v; });
  }
  if (k.kind) {
    const uint8_t v = *f.kind;
    Refine(&first, n, sel, [&](uint32_t i) { return b.kind[i] == v; });
  }
  if (k.track) {
    Refine(&first, n, sel, [&](uint32_t i) { return f.track.Contains(b.track[i]); });
  }
  if (k.dur) {
    const int64_t lo = f.dur.lo, hi = f.dur.hi;
    Refine(&first, n, sel, [&](uint32_t i) { return b.dur[i] >= lo && b.dur[i] <= hi; });
  }
  if (k.ts) {
    const int64_t lo = f.ts.lo, hi = f.ts.hi;
    Refine(&first, n, sel, [&](uint32_t i) { return b.ts[i] >= lo && b.ts[i] <= hi; });
  }
  if (k.end) {
    Refine(&first, n, sel,
           [&](uint32_t i) { return f.end.Contains(engine::SaturatingAdd(b.ts[i], b.dur[i])); });
  }
  if (k.id) {
    Refine(&first, n, sel, [&](uint32_t i) {
      return f.id.Contains((static_cast<int64_t>(b.track[i]) << 32) | static_cast<int64_t>(b.k[i]));
    });
  }
  if (k.parent) {
    Refine(&first, n, sel, [&](uint32_t i) {
      return b.parent_k[i] != 0 && f.parent.Contains((static_cast<int64_t>(b.track[i]) << 32) |
                                                     static_cast<int64_t>(b.parent_k[i] - 1));
    });
  }
  if (k.step) {
    Refine(&first, n, sel, [&](uint32_t i) {
      auto s = cat.StepAt(rank, b.ts[i]);
      return s && f.step.Contains(*s);
    });
  }
  if (k.depth) {
    Refine(&first, n, sel, [&](uint32_t i) { return f.depth.Contains(b.depth[i]); });
  }
  if (k.args) {
    // An absent argument is NULL: no constraint on it holds.
    auto arg = [&](const Range& r, uint32_t bit, auto value) {
      if (!r.set) return;
      Refine(&first, n, sel,
             [&](uint32_t i) { return (b.arg_mask[i] & bit) != 0 && r.Contains(value(i)); });
    };
    using engine::EventArgs;
    arg(f.bytes, EventArgs::kBytes, [&](uint32_t i) { return static_cast<int64_t>(b.bytes[i]); });
    arg(f.peer, EventArgs::kPeer, [&](uint32_t i) { return int64_t{b.peer[i]}; });
    arg(f.tag, EventArgs::kTag, [&](uint32_t i) { return int64_t{b.tag[i]}; });
    arg(f.comm, EventArgs::kComm, [&](uint32_t i) { return int64_t{b.comm[i]}; });
    arg(f.seq, EventArgs::kSeq, [&](uint32_t i) { return static_cast<int64_t>(b.seq[i]); });
    arg(f.flow, EventArgs::kFlow, [&](uint32_t i) { return static_cast<int64_t>(b.flow[i]); });
  }
  if (first) {  // no check: every row
    sel->resize(n);
    for (uint32_t i = 0; i < n; ++i) (*sel)[i] = i;
  }
}

namespace {

// The store's zone map of a block this scan selected (its checks passed in CollectBlocks).
engine::BlockZoneRow ZoneOf(const BlockRef& ref) {
  engine::BlockZoneRow z;
  z.block = ref.block;
  z.rank = ref.rank;
  z.min_ts = ref.min_ts;
  z.max_end = ref.max_end;
  z.max_dur = ref.max_dur;
  z.count = static_cast<uint64_t>(ref.count);
  return z;
}

}  // namespace

int LoadBlock(EventsCursor* c, const BlockRef& ref, DecodedBlock* out, uint32_t want) {
  tracedb::Status s = c->vtab->store->Read(ZoneOf(ref), want, out);
  if (!s.ok()) return Fail(&c->vtab->base, s.message());
  return SQLITE_OK;
}

// A block from the store's cache (decoding it, and the columns in `want`, when needed).
int CachedBlock(EventsCursor* c, const BlockRef& ref, uint32_t want,
                std::shared_ptr<DecodedBlock>* out) {
  const DbCatalog& cat = c->vtab->catalog;
  engine::BlockStore& store = *c->vtab->store;
  store.SetVersion(cat.seen_data_version, cat.seen_changes);
  auto blk = store.ReadCached(ZoneOf(ref), want);
  if (!blk.ok()) return Fail(&c->vtab->base, blk.status().message());
  *out = std::move(*blk);
  return SQLITE_OK;
}

// ---- block scan ----

// Prepares the next block of the scan with at least one selected row; eof when none is left.
int NextScanBlock(EventsCursor* c) {
  const DbCatalog& cat = c->vtab->catalog;
  const Constraints& f = c->f;
  while (c->next_block < c->blocks.size()) {
    const BlockRef& ref = c->blocks[c->next_block++];
    const RowChecks k = ChecksFor(f, ref, cat);
    c->cur_ref = &ref;
    c->rank = ref.rank;
    c->pos = 0;
    c->blk = &c->scan_blk;
    if (!k.any()) {
      // Every row matches: nothing to decode until a column is read (never, for count(*)).
      c->scan_loaded = false;
      c->sel_all = true;
      c->sel_n = static_cast<size_t>(ref.count);
      c->row = 0;
      return SQLITE_OK;
    }
    // The constraints' columns; the statement's are decoded when first read (xColumn), as
    // colUsed also names the columns of constraints pushed down and omitted.
    int rc;
    if (c->blocks.size() <= kMaxCachedScanBlocks) {
      rc = CachedBlock(c, ref, k.cols, &c->scan_cached);
      c->blk = c->scan_cached.get();
    } else {
      rc = LoadBlock(c, ref, &c->scan_blk, k.cols);
    }
    if (rc != SQLITE_OK) return rc;
    c->scan_loaded = true;
    if (!k.any()) {
      c->sel_all = true;
      c->sel_n = c->blk->n;
    } else {
      c->sel_all = false;
      Select(f, k, *c->blk, ref.rank, cat, &c->sel);
      c->sel_n = c->sel.size();
    }
    if (c->sel_n == 0) continue;
    c->row = c->sel_all ? 0 : c->sel[0];
    return SQLITE_OK;
  }
  c->eof = true;
  return SQLITE_OK;
}

namespace {

bool RowMatches(const EventsCursor& c, const DecodedBlock& b, size_t i, int32_t rank) {
  const Constraints& f = c.f;
  if (f.name && b.name[i] != *f.name) return false;
  if (f.cat && b.cat[i] != *f.cat) return false;
  if (f.kind && b.kind[i] != *f.kind) return false;
  // Only the columns a constraint reads are decoded (Constraints::filter_cols).
  if (!f.track.Contains(b.track[i])) return false;
  if (!f.dur.All() && !f.dur.Contains(b.dur[i])) return false;
  if (!f.ts.All() && !f.ts.Contains(b.ts[i])) return false;
  if (!f.end.All() && !f.end.Contains(engine::SaturatingAdd(b.ts[i], b.dur[i]))) return false;
  if (!f.id.All()) {
    const int64_t id = (static_cast<int64_t>(b.track[i]) << 32) | static_cast<int64_t>(b.k[i]);
    if (!f.id.Contains(id)) return false;
  }
  if (!f.parent.All()) {
    if (b.parent_k[i] == 0) return false;
    const int64_t p =
        (static_cast<int64_t>(b.track[i]) << 32) | static_cast<int64_t>(b.parent_k[i] - 1);
    if (!f.parent.Contains(p)) return false;
  }
  if (!f.step.All()) {
    auto s = c.vtab->catalog.StepAt(rank, b.ts[i]);
    if (!s || !f.step.Contains(*s)) return false;
  }
  if (f.depth.set && !f.depth.Contains(b.depth[i])) return false;
  using engine::EventArgs;
  // (Whether the arguments were decoded, not whether arg_mask is empty: a block reused from the
  // connection's scratch holds the arrays of whatever was decoded into it before.)
  const uint32_t m = b.has(engine::kColArgs) ? b.arg_mask[i] : 0;
  if (f.bytes.set &&
      !((m & EventArgs::kBytes) && f.bytes.Contains(static_cast<int64_t>(b.bytes[i]))))
    return false;
  if (f.peer.set && !((m & EventArgs::kPeer) && f.peer.Contains(b.peer[i]))) return false;
  if (f.tag.set && !((m & EventArgs::kTag) && f.tag.Contains(b.tag[i]))) return false;
  if (f.comm.set && !((m & EventArgs::kComm) && f.comm.Contains(b.comm[i]))) return false;
  if (f.seq.set && !((m & EventArgs::kSeq) && f.seq.Contains(static_cast<int64_t>(b.seq[i]))))
    return false;
  if (f.flow.set && !((m & EventArgs::kFlow) && f.flow.Contains(static_cast<int64_t>(b.flow[i]))))
    return false;
  return true;
}

// Indexes the k ranges of the blocks added since the last call.
int UpdateKIndex(EventsCursor* c) {
  KIndex& x = c->vtab->k_index;
  engine::BlockSelection sel;
  sel.after_block = x.max_block;
  sel.order = engine::BlockSelection::Order::kBlock;
  std::vector<BlockRef> pending;
  tracedb::Status s = c->vtab->store->ForEach(sel, [&](const engine::BlockZoneRow& z) {
    if (!z.ok) return tracedb::Status::Corruption(z.error);
    pending.push_back(BlockRef{z.block, z.rank, 0, 0, 0, static_cast<int64_t>(z.count)});
    return tracedb::Status::Ok();
  });
  if (!s.ok()) return Fail(&c->vtab->base, s.message());
  DecodedBlock b;
  for (const BlockRef& ref : pending) {
    int rc = LoadBlock(c, ref, &b, engine::kColK);
    if (rc != SQLITE_OK) return rc;
    std::vector<KIndex::Span>& spans = x.blocks[ref.block];
    for (size_t i = 0; i < b.n; ++i) {
      if (spans.empty() || spans.back().track != b.track[i]) {
        spans.push_back(KIndex::Span{b.track[i], b.k[i], b.k[i]});
      } else {
        spans.back().min_k = std::min(spans.back().min_k, b.k[i]);
        spans.back().max_k = std::max(spans.back().max_k, b.k[i]);
      }
    }
    x.max_block = std::max(x.max_block, ref.block);
  }
  return SQLITE_OK;
}

// With `id = x` only the blocks whose track holds k(x) can match; with `parent = x` only those
// whose track has events started after x.
bool KIndexMayMatch(const Constraints& f, const KIndex& x, int64_t block) {
  auto it = x.blocks.find(block);
  if (it == x.blocks.end()) return true;
  const bool by_id = f.id.set && f.id.lo == f.id.hi;
  const bool by_parent = f.parent.set && f.parent.lo == f.parent.hi;
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 0 && !by_id) continue;
    if (pass == 1 && !by_parent) continue;
    const int64_t v = pass == 0 ? f.id.lo : f.parent.lo;
    const auto track = static_cast<uint32_t>(static_cast<uint64_t>(v) >> 32);
    const auto k = static_cast<uint64_t>(v) & 0xffffffffu;
    bool hit = false;
    for (const KIndex::Span& s : it->second) {
      if (s.track != track) continue;
      hit = pass == 0 ? s.min_k <= k && k <= s.max_k : s.max_k > k;
      if (hit) break;
    }
    if (!hit) return false;
  }
  return true;
}

// The kinds each block may hold (EventsVtab::block_kinds), rebuilt when the file changed: a
// block holds only the kinds its (name, cat) pairs have on its rank in name_stats. A pair that
// name_stats lacks, or a kind it does not know, leaves every kind possible.
int UpdateBlockKinds(EventsCursor* c) {
  EventsVtab* v = c->vtab;
  const DbCatalog& cat = v->catalog;
  if (v->block_kinds_version == cat.seen_data_version &&
      v->block_kinds_changes == cat.seen_changes && cat.seen_data_version >= 0) {
    return SQLITE_OK;
  }
  tracedb::Status s = v->store->BlockKinds(&v->block_kinds);
  if (!s.ok()) return Fail(&v->base, s.message());
  v->block_kinds_version = cat.seen_data_version;
  v->block_kinds_changes = cat.seen_changes;
  return SQLITE_OK;
}

}  // namespace

namespace {

// The zone-map selection of the scan's constraints (the blocks that may hold a match).
engine::BlockSelection SelectionFor(const Constraints& f) {
  engine::BlockSelection sel;
  if (f.name) sel.names.push_back(*f.name);
  if (f.cat) sel.cats.push_back(*f.cat);
  if (!f.name && !f.cat && f.rank.lo == f.rank.hi) sel.ranks.push_back(f.rank.lo);
  sel.order = f.top_by_dur ? engine::BlockSelection::Order::kMaxDurDesc
                           : engine::BlockSelection::Order::kBlock;
  return sel;
}

// Walks the blocks the constraints select, in the selection's order, calling fn with each
// block that may hold a match (zone map, kinds, id index). fn returns false to stop the walk.
// The kinds and the id index are brought up to date first.
int WalkBlocks(EventsCursor* c, const std::function<int(const BlockRef&, bool* more)>& fn) {
  const Constraints& f = c->f;
  if (f.kind) {
    int rc = UpdateBlockKinds(c);
    if (rc != SQLITE_OK) return rc;
  }
  const bool by_k = (f.id.set && f.id.lo == f.id.hi && f.id.lo >= 0) ||
                    (f.parent.set && f.parent.lo == f.parent.hi && f.parent.lo >= 0);
  if (by_k) {
    int rc = UpdateKIndex(c);
    if (rc != SQLITE_OK) return rc;
  }
  const auto& kinds = c->vtab->block_kinds;
  const KIndex& x = c->vtab->k_index;
  int rc = SQLITE_OK;
  bool stopped = false;
  tracedb::Status s = c->vtab->store->ForEach(SelectionFor(f), [&](const engine::BlockZoneRow& z) {
    // count(*) trusts the count without decoding: 1..65536 or an error (the store's checks).
    if (!z.ok) return tracedb::Status::Corruption(z.error);
    BlockRef ref{z.block, z.rank, z.max_dur, z.min_ts, z.max_end, static_cast<int64_t>(z.count)};
    if (f.kind) {
      // A block without any block_names row is not described: every kind stays possible.
      auto it = kinds.find(ref.block);
      if (it != kinds.end()) ref.kinds = it->second;
    }
    if (!BlockMayMatch(f, ref)) return tracedb::Status::Ok();
    if (by_k && !KIndexMayMatch(f, x, ref.block)) return tracedb::Status::Ok();
    bool more = true;
    rc = fn(ref, &more);
    if (rc != SQLITE_OK || !more) {
      stopped = true;
      return tracedb::Status::Aborted("the walk stopped");  // not an error: see below
    }
    return tracedb::Status::Ok();
  });
  if (rc != SQLITE_OK) return rc;
  if (!s.ok() && !stopped) return Fail(&c->vtab->base, s.message());
  return SQLITE_OK;
}

}  // namespace

int CollectBlocks(EventsCursor* c) {
  c->blocks.clear();
  // The top-n search walks the blocks itself, longest first, and stops early (RunTopN).
  if (c->f.top_by_dur) return SQLITE_OK;
  return WalkBlocks(c, [&](const BlockRef& ref, bool*) {
    c->blocks.push_back(ref);
    return SQLITE_OK;
  });
}

int StartScan(EventsCursor* c) {
  c->next_block = 0;
  return NextScanBlock(c);
}

int NextScan(EventsCursor* c) {
  if (++c->pos < c->sel_n) {
    c->row = c->sel_all ? c->pos : c->sel[c->pos];
    return SQLITE_OK;
  }
  return NextScanBlock(c);
}

int EnsureScanBlock(EventsCursor* c) {
  if (c->mode != EventsCursor::Mode::kScan || c->scan_loaded) return SQLITE_OK;
  int rc;
  if (c->blocks.size() <= kMaxCachedScanBlocks) {
    rc = CachedBlock(c, *c->cur_ref, engine::kColTrack, &c->scan_cached);
    c->blk = c->scan_cached.get();
  } else {
    rc = LoadBlock(c, *c->cur_ref, &c->scan_blk, engine::kColTrack);
    c->blk = &c->scan_blk;
  }
  if (rc != SQLITE_OK) return rc;
  c->scan_loaded = true;
  return SQLITE_OK;
}

int RunTopN(EventsCursor* c) {
  // The rows SQLite will read: limit + offset, or all of them (LIMIT -1).
  const int64_t want = c->f.limit < 0                         ? INT64_MAX
                       : c->f.limit > INT64_MAX - c->f.offset ? INT64_MAX
                                                              : c->f.limit + c->f.offset;
  // The `want` largest so far, a heap whose front is the smallest (TopRow's order).
  std::vector<TopRow> heap;
  // The decoded blocks that rows of the heap came from, kept (up to kMaxKeptBlocks of them) so
  // that the winners are materialised from them instead of from a second read, decompression,
  // check and decode of the same blocks: for a small LIMIT that second pass was half the work.
  // A block that is not kept is loaded again below. The blocks' buffers come from and go back
  // to the connection's scratch: fresh ones cost more in page faults than the decode saves.
  constexpr size_t kMaxKeptBlocks = 16;
  ScanScratch& scratch = c->vtab->scratch;
  std::map<int64_t, DecodedBlock> kept;
  DecodedBlock blk = scratch.TakeBlock();
  auto give_back = [&] {
    scratch.GiveBlock(std::move(blk));
    for (auto& [block, b] : kept) scratch.GiveBlock(std::move(b));
    kept.clear();
  };
  int64_t seq = 0;
  // Blocks come longest first (their largest matching duration): once the heap holds `want`
  // rows and a block's longest is shorter than the heap's shortest, no later block can enter.
  // The walk stops there, so only the blocks read so far are listed (c->blocks: the winners'
  // blocks are found there below).
  int rc = WalkBlocks(c, [&](const BlockRef& ref, bool* more) {
    if (static_cast<int64_t>(heap.size()) >= want && ref.max_dur < heap.front().dur) {
      *more = false;
      return SQLITE_OK;
    }
    c->blocks.push_back(ref);
    int lrc = LoadBlock(c, ref, &blk, c->f.filter_cols | engine::kColDur);
    if (lrc != SQLITE_OK) return lrc;
    bool entered = false;
    for (size_t i = 0; i < blk.n; ++i) {
      if (static_cast<int64_t>(heap.size()) >= want && blk.dur[i] <= heap.front().dur) continue;
      if (!RowMatches(*c, blk, i, ref.rank)) continue;
      heap.push_back(TopRow{blk.dur[i], seq++, ref.rank, ref.block, static_cast<uint32_t>(i), {}});
      std::push_heap(heap.begin(), heap.end());
      if (static_cast<int64_t>(heap.size()) > want) {
        std::pop_heap(heap.begin(), heap.end());
        heap.pop_back();
      }
      entered = true;
    }
    if (!entered) return SQLITE_OK;
    if (kept.size() >= kMaxKeptBlocks) {
      // Give back the kept blocks whose rows have all left the heap since.
      std::vector<int64_t> live;
      for (const TopRow& t : heap) live.push_back(t.block);
      std::sort(live.begin(), live.end());
      for (auto it = kept.begin(); it != kept.end();) {
        if (std::binary_search(live.begin(), live.end(), it->first)) {
          ++it;
        } else {
          scratch.GiveBlock(std::move(it->second));
          it = kept.erase(it);
        }
      }
    }
    if (kept.size() < kMaxKeptBlocks) {
      kept.emplace(ref.block, std::move(blk));
      blk = scratch.TakeBlock();
    }
    return SQLITE_OK;
  });
  if (rc != SQLITE_OK) {
    give_back();
    return rc;
  }
  std::sort_heap(heap.begin(), heap.end());  // largest first (ties in discovery order)
  c->top = std::move(heap);
  // Materialise the winners, one decode per block (none for a kept block: its other columns
  // are decoded from the payload it holds).
  std::map<int64_t, std::vector<TopRow*>> by_block;
  for (TopRow& t : c->top) by_block[t.block].push_back(&t);
  // A winner's block that was not kept is loaded again from its own BlockRef: its declared
  // count is checked against the decode (engine::CheckDecodedCount), so it must be the real one.
  std::unordered_map<int64_t, const BlockRef*> refs;
  if (by_block.size() > kept.size()) {
    for (const BlockRef& r : c->blocks) {
      if (by_block.count(r.block) != 0 && kept.count(r.block) == 0) refs.emplace(r.block, &r);
    }
  }
  const uint32_t cols = c->f.used_cols | c->f.filter_cols | engine::kColK | engine::kColDur;
  for (auto& [block, rows] : by_block) {
    DecodedBlock* b = &blk;
    auto it = kept.find(block);
    if (it != kept.end()) {
      b = &it->second;
      tracedb::Status s = b->Need(cols);
      if (!s.ok()) rc = Fail(&c->vtab->base, s.message());
    } else {
      const auto ref = refs.find(block);  // every winner came from a block of this scan
      rc = ref == refs.end()
               ? Fail(&c->vtab->base, "block " + std::to_string(block) + " left the scan")
               : LoadBlock(c, *ref->second, b, cols);
    }
    if (rc != SQLITE_OK) break;
    for (TopRow* t : rows) t->row = b->RowAt(t->index);
  }
  give_back();
  if (rc != SQLITE_OK) return rc;
  c->top_pos = 0;  // SQLite skips the OFFSET rows itself
  c->eof = c->top.empty();
  return SQLITE_OK;
}

}  // namespace tracedb::query::events
