// Level of detail for `tracedb view`: what a timeline window of `px` pixels shows, computed from
// the zone maps and the event blocks, with at most a few thousand drawable items per track
// whatever the number of events in the window.
//
// A window whose blocks hold at most `decode_budget` events is decoded ("fine"): per track and
// depth, spans at least `min_px` pixels wide come whole (id, name, ts, dur), smaller spans and
// instants closer than a pixel to each other merge into runs (start, end, count; a run of one
// event is sent as the event), counters become per-pixel min/max/last, and a track whose items
// still exceed `max_items` is sent as per-pixel occupancy per depth (plus its widest events).
// A larger window is answered "coarse": per rank an event density per pixel from the blocks' zone
// maps (no decoding), plus the events wide enough to see, decoded only from blocks whose
// `max_dur` says they hold one (within the budget).
// Thread safety: one call per Db at a time; `cancelled` may be set from another thread.
// Docs: docs/view.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::view {

// The columns of one decoded block that a window reads. Kept between requests by BlockCache.
struct LodBlock {
  int64_t min_ts = 0;  // its zone map's min_ts and count: a cached block must still match them
  uint64_t count = 0;
  size_t n = 0;
  std::vector<int64_t> ts, dur;
  std::vector<uint64_t> k;
  std::vector<uint32_t> track, name, depth;
  std::vector<uint8_t> kind;
  std::vector<double> value;  // empty when the block holds no counter
  size_t Bytes() const;
};

// Decoded blocks shared between window requests, the least recently used dropped first once
// they hold more than `max_bytes`. Zooming and panning ask again and again for the blocks around
// the same place; decoding them (varints, LZ4, CRC) was most of the server's CPU per answer.
// The server's database is read-only and its blocks immutable, so a block id names the same
// rows for the server's life (the zone map's min_ts and count are checked all the same).
// Thread safety: every method may be called from any thread.
class BlockCache {
 public:
  explicit BlockCache(size_t max_bytes) : max_bytes_(max_bytes) {}
  // The block, or null when not cached (or cached with another min_ts or count).
  std::shared_ptr<const LodBlock> Find(int64_t block, int64_t min_ts, uint64_t count);
  void Insert(int64_t block, std::shared_ptr<const LodBlock> b);

  struct Stats {
    uint64_t hits = 0, misses = 0, blocks = 0, bytes = 0;
  };
  Stats stats() const;

 private:
  struct Entry {
    std::shared_ptr<const LodBlock> block;
    std::list<int64_t>::iterator lru;
  };
  mutable std::mutex mu_;
  const size_t max_bytes_;
  size_t bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
  std::list<int64_t> lru_;  // most recently used first
  std::unordered_map<int64_t, Entry> map_;
};

struct WindowRequest {
  int64_t t0 = 0, t1 = 0;           // [t0, t1), ns on the job's common clock
  int px = 1000;                    // pixels across the window
  std::vector<uint32_t> tracks;     // only these tracks (empty: every track)
  double min_px = 2;                // a span this many pixels wide is sent whole
  size_t max_items = 4000;          // per track
  uint64_t decode_budget = 500000;  // events decoded at most per request
  // The longest max_end - min_ts of any block (ns), or -1 if unknown. Known, the blocks are
  // listed rank by rank through blocks_by_rank within [t0 - max_block_span, t1), instead of a
  // scan of every zone map (a page read per block). MaxBlockSpan() computes it.
  int64_t max_block_span = -1;
  BlockCache* cache = nullptr;  // decoded blocks kept between requests (none: decode every time)
  // Polled between blocks: true stops the work with Status::Cancelled-like Aborted error.
  std::function<bool()> cancelled;
};

struct LodEvent {
  int64_t id = 0;
  int64_t ts = 0, dur = 0;
  uint32_t name = 0;  // strings.id
  uint32_t depth = 0;
  uint8_t kind = 0;  // engine::RowKind
};

struct LodRun {  // merged small events of one depth
  int64_t ts = 0, end = 0;
  uint32_t depth = 0;
  uint64_t count = 0;
  uint32_t name = 0;  // the name of its longest event (for its colour)
};

struct LodCounter {  // one pixel of a counter series
  uint32_t name = 0;
  int32_t x = 0;  // pixel
  double min = 0, max = 0, last = 0;
};

struct TrackLod {
  uint32_t track = 0;
  int32_t rank = 0;
  uint64_t events = 0;  // events of the track in the window (each in one item, or in occupancy)
  std::vector<LodEvent> items;
  std::vector<LodRun> runs;
  std::vector<LodCounter> counters;
  // When the track was too busy: per depth, px values 0..255 (fraction of the pixel covered).
  std::vector<std::vector<uint8_t>> occupancy;
};

struct RankDensity {
  int32_t rank = 0;
  std::vector<float> events_per_px;  // from the zone maps
};

struct WindowResult {
  bool coarse = false;
  uint64_t blocks = 0;          // blocks overlapping the window
  uint64_t blocks_decoded = 0;  // of them, decoded (or taken decoded from the cache)
  uint64_t blocks_cached = 0;   // of the decoded, taken from WindowRequest::cache
  uint64_t blocks_corrupt = 0;  // failed to decode (skipped)
  uint64_t events_in_blocks = 0;
  std::vector<TrackLod> tracks;    // tracks with something in the window, by track id
  std::vector<RankDensity> ranks;  // coarse only
};

// Computes the window. InvalidArgument for an unusable request (empty window, px out of
// 1..20000), Aborted when `cancelled` said so.
Status ComputeWindow(engine::Db* db, const WindowRequest& req, WindowResult* out);

// The longest time range of one block of `db` (ns): WindowRequest::max_block_span.
StatusOr<int64_t> MaxBlockSpan(engine::Db* db);

// The result as JSON (docs/view.md, "/api/window"); names are resolved through `name_of`.
std::string WindowJson(const WindowResult& r, const WindowRequest& req,
                       const std::function<std::string(uint32_t)>& name_of);

}  // namespace tracedb::view
