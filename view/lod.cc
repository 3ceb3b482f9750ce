// Level of detail for `tracedb view`. See lod.h; the JSON is documented in docs/view.md.
#include "view/lod.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "engine/db/block_store.h"
#include "engine/db/event_block.h"
#include "engine/util/json_text.h"
#include "engine/util/saturating.h"

namespace tracedb::view {
namespace {

using engine::BlockZoneRow;
using engine::DecodedBlock;
using engine::RowKind;
using engine::TimeWindow;

constexpr uint32_t kMaxDepth = 63;  // deeper rows are drawn at this depth
// Pixel bins of small events per request at most (about 80 bytes each): a window of more
// tracks x depths x pixels than this is answered as an overview.
constexpr uint64_t kMaxPixelSlots = uint64_t{4} << 20;

// A small event waiting to be merged, or a whole one.
struct Small {
  int64_t ts, end;
  int64_t id;
  uint32_t depth, name;
  uint8_t kind;
};

// The small events of one depth of a track, binned by pixel (no sort: O(events + px)).
struct PixelRow {
  explicit PixelRow(int px)
      : count(px, 0),
        occupied(px, 0),
        first(px),
        lo(px, INT64_MAX),
        hi(px, INT64_MIN),
        longest_name(px, 0),
        longest_dur(px, -1),
        cover(px, 0.f) {}
  std::vector<uint32_t> count;    // events starting in the pixel
  std::vector<uint8_t> occupied;  // some small event covers the pixel
  std::vector<Small> first;       // the first event starting there
  std::vector<int64_t> lo, hi;    // earliest start, latest end of the events starting there
  std::vector<uint32_t> longest_name;
  std::vector<int64_t> longest_dur;
  std::vector<float> cover;  // fraction of the pixel covered (instants: 1)
};

struct TrackWork {
  int32_t rank = 0;
  uint64_t events = 0;
  std::vector<LodEvent> whole;
  std::vector<std::unique_ptr<PixelRow>> small;  // by depth
  // counter name -> per pixel (x -> min, max, last, last ts)
  struct Px {
    double min, max, last;
    int64_t last_ts;
  };
  std::map<std::pair<uint32_t, int32_t>, Px> counters;
};

class WindowBuilder {
 public:
  WindowBuilder(const WindowRequest& req, WindowResult* out)
      : req_(req), out_(out), w_{req.t0, req.t1} {
    // In doubles and clamped: a client's window can span the whole int64 range.
    t0_ = static_cast<double>(req.t0);
    span_ = static_cast<double>(req.t1) - t0_;
    ns_per_px_ = span_ / req.px;
    min_dur_ = engine::SaturateInt64(std::ceil(ns_per_px_ * req.min_px));
    for (uint32_t t : req.tracks) only_.insert(t);
  }

  Status Run(engine::Db* db);

 private:
  // The pixel position of `ts` in the window, unclamped (in doubles: a client's window can span
  // the whole int64 range).
  double PxOf(int64_t ts) const { return (static_cast<double>(ts) - t0_) / ns_per_px_; }
  int32_t PixelOf(int64_t ts) const {
    return static_cast<int32_t>(std::clamp(PxOf(ts), 0.0, static_cast<double>(req_.px - 1)));
  }
  bool Cancelled() const { return req_.cancelled && req_.cancelled(); }
  Status Decode(engine::BlockStore* store, const BlockZoneRow& z, bool big_only);
  void AddSmall(TrackWork* tw, const Small& s);
  void AddDensity(const BlockZoneRow& z);
  void Finish();
  void FinishTrack(uint32_t track, TrackWork& w, TrackLod* t);

  const WindowRequest& req_;
  WindowResult* out_;
  TimeWindow w_;
  double t0_ = 0, span_ = 0, ns_per_px_ = 1;  // t0_: req_.t0 as a double
  int64_t min_dur_ = 1;
  std::unordered_set<uint32_t> only_;
  std::map<uint32_t, TrackWork> work_;
  std::map<int32_t, std::vector<float>> density_;
  DecodedBlock block_;  // the decoder's buffers (its columns move into a LodBlock)
  uint64_t pixel_slots_ = 0;
  bool too_many_rows_ = false;
};

Status WindowBuilder::Run(engine::Db* db) {
  engine::BlockStore store(db, db->path());
  std::vector<BlockZoneRow> zones;
  engine::BlockSelection sel;
  sel.SetWindow(w_);
  sel.order = engine::BlockSelection::Order::kRankTime;
  if (only_.empty() && req_.max_block_span < 0) {
    TRACEDB_ASSIGN_OR_RETURN(zones, store.Select(sel));
  } else {
    // The blocks are listed rank by rank through blocks_by_rank(rank, min_ts): a scan of every
    // zone map reads a page per block (the zone maps share their rows with the blocks' data),
    // 24 MB per answer at 100M events. With a list of tracks, only the ranks that hold them
    // count, make the overview's density and are decoded: a page that shows 40 of 4,096 ranks
    // pays for 40. A block overlaps [t0, t1) only if min_ts < t1 and max_end >= t0, so, with
    // max_end <= min_ts + max_block_span, only if min_ts >= t0 - max_block_span.
    std::set<int64_t> ranks;
    if (only_.empty()) {
      TRACEDB_ASSIGN_OR_RETURN(std::vector<int64_t> all, store.Ranks());
      ranks.insert(all.begin(), all.end());
    } else {
      TRACEDB_ASSIGN_OR_RETURN(engine::Stmt rk,
                               db->Prepare("SELECT rank FROM tracks WHERE track = ?1"));
      for (uint32_t t : only_) {
        rk.Reset();
        rk.Bind(1, static_cast<int64_t>(t));
        TRACEDB_ASSIGN_OR_RETURN(bool row, rk.Step());
        if (row) ranks.insert(rk.Int(0));
      }
    }
    sel.min_ts_from = req_.max_block_span < 0 || w_.lo < INT64_MIN + req_.max_block_span
                          ? INT64_MIN
                          : w_.lo - req_.max_block_span;
    for (int64_t rank : ranks) {
      sel.ranks = {rank};
      TRACEDB_RETURN_IF_ERROR(store.ForEach(sel, [&](const BlockZoneRow& z) {
        if (!z.ok) {  // a zone map out of bounds: the block is damaged, skipped
          out_->blocks_corrupt++;
        } else {
          zones.push_back(z);
        }
        return Status::Ok();
      }));
    }
  }
  out_->blocks = zones.size();
  for (const BlockZoneRow& z : zones) out_->events_in_blocks += z.count;
  out_->coarse = out_->events_in_blocks > req_.decode_budget;
  if (!out_->coarse) {
    for (const BlockZoneRow& z : zones) {
      if (Cancelled()) return Status::Aborted("superseded by a newer request");
      TRACEDB_RETURN_IF_ERROR(Decode(&store, z, false));
      if (too_many_rows_) break;
    }
    if (too_many_rows_) {  // too many tracks and depths for this width: an overview
      work_.clear();
      out_->coarse = true;
      out_->blocks_decoded = 0;
      out_->blocks_cached = 0;
      out_->blocks_corrupt = 0;
    }
  }
  if (out_->coarse) {
    // Density from every zone map; then the blocks that may hold an event wide enough to
    // see, the widest first, while the budget lasts.
    std::vector<const BlockZoneRow*> big;
    for (const BlockZoneRow& z : zones) {
      AddDensity(z);
      if (z.max_dur >= min_dur_) big.push_back(&z);
    }
    std::stable_sort(big.begin(), big.end(), [](const BlockZoneRow* a, const BlockZoneRow* b) {
      return a->max_dur > b->max_dur;
    });
    uint64_t decoded = 0;
    for (const BlockZoneRow* z : big) {
      if (decoded + z->count > req_.decode_budget) break;
      if (Cancelled()) return Status::Aborted("superseded by a newer request");
      decoded += z->count;
      TRACEDB_RETURN_IF_ERROR(Decode(&store, *z, true));
    }
  }
  if (Cancelled()) return Status::Aborted("superseded by a newer request");
  Finish();
  return Status::Ok();
}

void WindowBuilder::AddDensity(const BlockZoneRow& z) {
  std::vector<float>& d = density_[static_cast<int32_t>(z.rank)];
  if (d.empty()) d.assign(req_.px, 0.f);
  const int64_t lo = std::max(z.min_ts, req_.t0);
  const int64_t hi = std::min(z.max_end, req_.t1 - 1);
  if (hi < lo) return;
  // The block's events spread evenly over the part of its time range in the window.
  const double in = static_cast<double>(hi - lo + 1);
  const double full = static_cast<double>(z.max_end - z.min_ts + 1);
  const double events = static_cast<double>(z.count) * std::min(1.0, in / full);
  const int32_t x0 = PixelOf(lo), x1 = PixelOf(hi);
  const float per = static_cast<float>(events / (x1 - x0 + 1));
  for (int32_t x = x0; x <= x1; ++x) d[x] += per;
}

Status WindowBuilder::Decode(engine::BlockStore* store, const BlockZoneRow& z, bool big_only) {
  std::shared_ptr<const LodBlock> got =
      req_.cache ? req_.cache->Find(z.block, z.min_ts, z.count) : nullptr;
  if (got) {
    out_->blocks_cached++;
  } else {
    const uint32_t cols = engine::kColTrack | engine::kColK | engine::kColDepth | engine::kColKind |
                          engine::kColName | engine::kColTs | engine::kColDur | engine::kColValue;
    if (!store->Read(z, cols, &block_).ok()) {
      out_->blocks_corrupt++;  // one damaged block is skipped (and not cached); the rest shows
      return Status::Ok();
    }
    // The columns move out of the decoder (no copy); it allocates new ones for the next block.
    auto fresh = std::make_shared<LodBlock>();
    fresh->min_ts = z.min_ts;
    fresh->count = z.count;
    fresh->n = block_.n;
    fresh->ts = std::move(block_.ts);
    fresh->dur = std::move(block_.dur);
    fresh->k = std::move(block_.k);
    fresh->track = std::move(block_.track);
    fresh->name = std::move(block_.name);
    fresh->depth = std::move(block_.depth);
    fresh->kind = std::move(block_.kind);
    if (std::find(fresh->kind.begin(), fresh->kind.end(),
                  static_cast<uint8_t>(RowKind::kCounter)) != fresh->kind.end()) {
      fresh->value = std::move(block_.value);
    }
    if (req_.cache) req_.cache->Insert(z.block, fresh);
    got = std::move(fresh);
  }
  out_->blocks_decoded++;
  const LodBlock& b = *got;
  uint32_t last_track = UINT32_MAX;
  TrackWork* tw = nullptr;
  for (size_t i = 0; i < b.n; ++i) {
    if (!w_.Overlaps(b.ts[i], b.dur[i])) continue;
    if (big_only && b.dur[i] < min_dur_) continue;
    const uint32_t track = b.track[i];
    if (track != last_track) {
      last_track = track;
      tw = nullptr;
      if (only_.empty() || only_.count(track)) {
        tw = &work_[track];
        tw->rank = static_cast<int32_t>(z.rank);
      }
    }
    if (tw == nullptr) continue;
    tw->events++;
    const auto kind = static_cast<RowKind>(b.kind[i]);
    const int64_t id = (static_cast<int64_t>(track) << 32) | static_cast<int64_t>(b.k[i]);
    const uint32_t depth = std::min(b.depth[i], kMaxDepth);
    if (kind == RowKind::kCounter) {
      auto [it, fresh] = tw->counters.try_emplace({b.name[i], PixelOf(b.ts[i])});
      TrackWork::Px& p = it->second;
      const double v = b.value[i];
      if (fresh) {
        p = {v, v, v, b.ts[i]};
      } else {
        p.min = std::min(p.min, v);
        p.max = std::max(p.max, v);
        if (b.ts[i] >= p.last_ts) p.last = v, p.last_ts = b.ts[i];
      }
      continue;
    }
    if (kind == RowKind::kSpan && b.dur[i] >= min_dur_) {
      tw->whole.push_back({id, b.ts[i], b.dur[i], b.name[i], depth, b.kind[i]});
    } else {
      AddSmall(tw, {b.ts[i], engine::SaturatingAdd(b.ts[i], std::max<int64_t>(b.dur[i], 0)), id,
                    depth, b.name[i], b.kind[i]});
    }
  }
  return Status::Ok();
}

void WindowBuilder::AddSmall(TrackWork* tw, const Small& s) {
  if (tw->small.size() <= s.depth) tw->small.resize(s.depth + 1);
  std::unique_ptr<PixelRow>& row = tw->small[s.depth];
  if (!row) {
    pixel_slots_ += static_cast<uint64_t>(req_.px);
    if (pixel_slots_ > kMaxPixelSlots) {
      too_many_rows_ = true;
      return;
    }
    row = std::make_unique<PixelRow>(req_.px);
  }
  PixelRow& r = *row;
  const int32_t x0 = PixelOf(s.ts);
  const int32_t x1 = s.end > s.ts ? PixelOf(s.end - 1) : x0;
  if (r.count[x0]++ == 0) r.first[x0] = s;
  r.lo[x0] = std::min(r.lo[x0], s.ts);
  r.hi[x0] = std::max(r.hi[x0], s.end);
  if (s.end - s.ts > r.longest_dur[x0]) {
    r.longest_dur[x0] = s.end - s.ts;
    r.longest_name[x0] = s.name;
  }
  if (x1 == x0) {
    r.occupied[x0] = 1;
    r.cover[x0] += s.end > s.ts ? static_cast<float>((s.end - s.ts) / ns_per_px_) : 1.f;
    return;
  }
  const double from = PxOf(s.ts), to = PxOf(s.end);
  for (int32_t x = x0; x <= x1; ++x) {
    r.occupied[x] = 1;
    const double a = std::max(from, double(x));
    const double b = std::min(to, x + 1.0);
    if (b > a) r.cover[x] += static_cast<float>(b - a);
  }
}

void WindowBuilder::FinishTrack(uint32_t track, TrackWork& w, TrackLod* t) {
  t->track = track;
  t->rank = w.rank;
  t->events = w.events;
  // Small events: neighbouring occupied pixels of a depth merge into one run; a run of one
  // event is sent as the event.
  for (uint32_t depth = 0; depth < w.small.size(); ++depth) {
    if (!w.small[depth]) continue;
    const PixelRow& r = *w.small[depth];
    int32_t x = 0;
    while (x < req_.px) {
      if (!r.occupied[x]) {
        ++x;
        continue;
      }
      uint64_t n = 0;
      int64_t lo = INT64_MAX, hi = INT64_MIN, ldur = -1;
      uint32_t lname = 0;
      int32_t single = -1;
      for (; x < req_.px && r.occupied[x]; ++x) {
        if (r.count[x] == 0) continue;
        n += r.count[x];
        single = x;
        lo = std::min(lo, r.lo[x]);
        hi = std::max(hi, r.hi[x]);
        if (r.longest_dur[x] > ldur) {
          ldur = r.longest_dur[x];
          lname = r.longest_name[x];
        }
      }
      if (n == 1) {
        const Small& s = r.first[single];
        t->items.push_back({s.id, s.ts, s.end - s.ts, s.name, s.depth, s.kind});
      } else if (n > 1) {
        t->runs.push_back({lo, hi, depth, n, lname});
      }
    }
  }
  t->items.insert(t->items.end(), w.whole.begin(), w.whole.end());
  for (const auto& [key, p] : w.counters) {
    t->counters.push_back({key.first, key.second, p.min, p.max, p.last});
  }
  if (t->items.size() + t->runs.size() <= req_.max_items) {
    std::sort(t->items.begin(), t->items.end(),
              [](const LodEvent& a, const LodEvent& b) { return a.ts < b.ts; });
    return;
  }
  // Too busy to draw item by item: occupancy per depth, and the widest events.
  uint32_t depths = 0;
  for (const LodEvent& e : t->items) depths = std::max(depths, e.depth + 1);
  depths = std::max<uint32_t>(depths, static_cast<uint32_t>(w.small.size()));
  std::vector<std::vector<double>> cover(depths, std::vector<double>(req_.px, 0.0));
  auto add = [&](uint32_t depth, int64_t ts, int64_t end) {
    const double a = std::max(0.0, PxOf(ts));
    const double b = std::min<double>(req_.px, PxOf(end));
    if (b <= a) {  // an instant: marks its pixel
      cover[depth][PixelOf(ts)] += 1.0;
      return;
    }
    for (int32_t x = static_cast<int32_t>(a); x < req_.px && x < b; ++x) {
      cover[depth][x] += std::min<double>(b, x + 1) - std::max<double>(a, x);
    }
  };
  for (const LodEvent& e : t->items) {
    if (e.kind == static_cast<uint8_t>(RowKind::kSpan) && e.dur >= min_dur_) {
      // (The small ones are in the pixel rows.)
      add(e.depth, e.ts, engine::SaturatingAdd(e.ts, e.dur));
    }
  }
  for (uint32_t d = 0; d < w.small.size(); ++d) {
    if (!w.small[d]) continue;
    for (int32_t x = 0; x < req_.px; ++x) cover[d][x] += w.small[d]->cover[x];
  }
  t->occupancy.resize(depths);
  for (uint32_t d = 0; d < depths; ++d) {
    t->occupancy[d].resize(req_.px);
    for (int32_t x = 0; x < req_.px; ++x) {
      t->occupancy[d][x] = static_cast<uint8_t>(std::lround(std::min(1.0, cover[d][x]) * 255));
    }
  }
  t->runs.clear();
  std::vector<LodEvent> keep;
  for (const LodEvent& e : t->items) {
    if (e.kind == static_cast<uint8_t>(RowKind::kSpan) && e.dur >= min_dur_) keep.push_back(e);
  }
  std::sort(keep.begin(), keep.end(),
            [](const LodEvent& a, const LodEvent& b) { return a.dur > b.dur; });
  if (keep.size() > req_.max_items / 2) keep.resize(req_.max_items / 2);
  std::sort(keep.begin(), keep.end(),
            [](const LodEvent& a, const LodEvent& b) { return a.ts < b.ts; });
  t->items = std::move(keep);
}

void WindowBuilder::Finish() {
  for (auto& [track, w] : work_) {
    out_->tracks.emplace_back();
    FinishTrack(track, w, &out_->tracks.back());
    w = TrackWork();  // frees the work as it goes
  }
  for (auto& [rank, d] : density_) out_->ranks.push_back({rank, std::move(d)});
}

void AppendInt(std::string* s, int64_t v) { s->append(std::to_string(v)); }

}  // namespace

size_t LodBlock::Bytes() const {
  return sizeof(LodBlock) + ts.capacity() * 8 + dur.capacity() * 8 + k.capacity() * 8 +
         (track.capacity() + name.capacity() + depth.capacity()) * 4 + kind.capacity() +
         value.capacity() * 8;
}

std::shared_ptr<const LodBlock> BlockCache::Find(int64_t block, int64_t min_ts, uint64_t count) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = map_.find(block);
  if (it == map_.end() || it->second.block->min_ts != min_ts || it->second.block->count != count) {
    misses_++;
    return nullptr;
  }
  hits_++;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.block;
}

void BlockCache::Insert(int64_t block, std::shared_ptr<const LodBlock> b) {
  const size_t bytes = b->Bytes();
  if (bytes > max_bytes_) return;
  std::lock_guard<std::mutex> l(mu_);
  auto it = map_.find(block);
  if (it != map_.end()) {  // decoded meanwhile by another request, or stale: replace
    bytes_ -= it->second.block->Bytes();
    lru_.erase(it->second.lru);
    map_.erase(it);
  }
  lru_.push_front(block);
  map_[block] = {std::move(b), lru_.begin()};
  bytes_ += bytes;
  while (bytes_ > max_bytes_) {
    auto last = map_.find(lru_.back());
    bytes_ -= last->second.block->Bytes();
    map_.erase(last);
    lru_.pop_back();
  }
}

BlockCache::Stats BlockCache::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return {hits_, misses_, map_.size(), bytes_};
}

StatusOr<int64_t> MaxBlockSpan(engine::Db* db) {
  TRACEDB_ASSIGN_OR_RETURN(engine::Stmt st,
                           db->Prepare("SELECT coalesce(max(max_end - min_ts), 0) FROM blocks"));
  TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
  return row ? std::max<int64_t>(0, st.Int(0)) : 0;
}

Status ComputeWindow(engine::Db* db, const WindowRequest& req, WindowResult* out) {
  *out = WindowResult();
  if (req.t1 <= req.t0) {
    return Status::InvalidArgument("empty window: t1 (" + std::to_string(req.t1) +
                                   ") must be after t0 (" + std::to_string(req.t0) + ")");
  }
  if (req.px < 1 || req.px > 20000) {
    return Status::InvalidArgument("px " + std::to_string(req.px) + " not in 1..20000");
  }
  WindowBuilder b(req, out);
  return b.Run(db);
}

std::string WindowJson(const WindowResult& r, const WindowRequest& req,
                       const std::function<std::string(uint32_t)>& name_of) {
  // Times are sent as ns after `origin` (the request's t0), which doubles hold exactly.
  std::string s;
  s.reserve(1 << 16);
  std::unordered_map<uint32_t, bool> names;
  s += "{\"t0\":\"";
  AppendInt(&s, req.t0);
  s += "\",\"t1\":\"";
  AppendInt(&s, req.t1);
  s += "\",\"px\":";
  AppendInt(&s, req.px);
  s += ",\"coarse\":";
  s += r.coarse ? "true" : "false";
  s += ",\"blocks\":";
  AppendInt(&s, static_cast<int64_t>(r.blocks));
  s += ",\"blocks_decoded\":";
  AppendInt(&s, static_cast<int64_t>(r.blocks_decoded));
  s += ",\"blocks_cached\":";
  AppendInt(&s, static_cast<int64_t>(r.blocks_cached));
  s += ",\"blocks_corrupt\":";
  AppendInt(&s, static_cast<int64_t>(r.blocks_corrupt));
  s += ",\"events_in_blocks\":";
  AppendInt(&s, static_cast<int64_t>(r.events_in_blocks));
  s += ",\"tracks\":[";
  bool first = true;
  for (const TrackLod& t : r.tracks) {
    if (!first) s += ',';
    first = false;
    s += "{\"track\":";
    AppendInt(&s, t.track);
    s += ",\"rank\":";
    AppendInt(&s, t.rank);
    s += ",\"events\":";
    AppendInt(&s, static_cast<int64_t>(t.events));
    // items: [id (string), ts - t0, dur, name id, depth, kind]
    s += ",\"items\":[";
    for (size_t i = 0; i < t.items.size(); ++i) {
      const LodEvent& e = t.items[i];
      if (i) s += ',';
      s += "[\"";
      AppendInt(&s, e.id);
      s += "\",";
      AppendInt(&s, engine::SaturatingSub(e.ts, req.t0));
      s += ',';
      AppendInt(&s, e.dur);
      s += ',';
      AppendInt(&s, e.name);
      s += ',';
      AppendInt(&s, e.depth);
      s += ',';
      AppendInt(&s, e.kind);
      s += ']';
      names[e.name] = true;
    }
    // runs: [ts - t0, end - t0, depth, count, name id]
    s += "],\"runs\":[";
    for (size_t i = 0; i < t.runs.size(); ++i) {
      const LodRun& u = t.runs[i];
      if (i) s += ',';
      s += '[';
      AppendInt(&s, engine::SaturatingSub(u.ts, req.t0));
      s += ',';
      AppendInt(&s, engine::SaturatingSub(u.end, req.t0));
      s += ',';
      AppendInt(&s, u.depth);
      s += ',';
      AppendInt(&s, static_cast<int64_t>(u.count));
      s += ',';
      AppendInt(&s, u.name);
      s += ']';
      names[u.name] = true;
    }
    // counters: [name id, x, min, max, last]
    s += "],\"counters\":[";
    for (size_t i = 0; i < t.counters.size(); ++i) {
      const LodCounter& c = t.counters[i];
      if (i) s += ',';
      s += '[';
      AppendInt(&s, c.name);
      s += ',';
      AppendInt(&s, c.x);
      s += ',';
      engine::json::AppendNumber(&s, c.min);
      s += ',';
      engine::json::AppendNumber(&s, c.max);
      s += ',';
      engine::json::AppendNumber(&s, c.last);
      s += ']';
      names[c.name] = true;
    }
    // occupancy: per depth, px values 0..255 as lowercase hex pairs
    s += "],\"occupancy\":[";
    static const char kHex[] = "0123456789abcdef";
    for (size_t d = 0; d < t.occupancy.size(); ++d) {
      if (d) s += ',';
      s += '"';
      for (uint8_t v : t.occupancy[d]) {
        s += kHex[v >> 4];
        s += kHex[v & 15];
      }
      s += '"';
    }
    s += "]}";
  }
  s += "],\"ranks\":[";
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    if (i) s += ',';
    s += "{\"rank\":";
    AppendInt(&s, r.ranks[i].rank);
    s += ",\"density\":[";
    const std::vector<float>& d = r.ranks[i].events_per_px;
    for (size_t x = 0; x < d.size(); ++x) {
      if (x) s += ',';
      engine::json::AppendNumber(&s, std::round(d[x] * 100) / 100);
    }
    s += "]}";
  }
  s += "],\"names\":{";
  first = true;
  for (const auto& [id, unused] : names) {
    if (!first) s += ',';
    first = false;
    s += '"';
    AppendInt(&s, id);
    s += "\":";
    engine::json::AppendString(&s, name_of(id));
  }
  s += "}}";
  return s;
}

}  // namespace tracedb::view
