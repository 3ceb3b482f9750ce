// The block store: the one reader of a trace database's event blocks. It owns
//   - the choice of blocks by their zone maps (`blocks`: rank, time range, longest duration;
//     `block_names`: names and categories), in the order a reader asks for;
//   - reading a block's bytes, decompressing and decoding the column groups asked for;
//   - a bounded cache of decoded blocks, emptied when the file changes;
//   - the string dictionary and the `meta` table as read by the query layer;
//   - the checks on every value it reads from disk before a caller trusts it: a block's declared
//     row count (1..kMaxBlockRows), its rank (a 32-bit integer), that the block still exists,
//     that it decodes, and that it holds exactly the rows its zone map declares. Each failure is
//     a Corruption naming the database and the block id.
// The `events` table, the Chrome exporter, the view's level of detail, the Python reader and the
// collective and negotiation views go through it; `tracedb verify` and the shard merge's block
// copy do not (docs/database-format.md, "Reading blocks", says why).
// Thread safety: a BlockStore is used by one thread at a time, over the caller's Db; readers that
// decode in parallel give each thread its own Db and its own BlockStore.
#pragma once

#include <climits>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/db/event_block.h"
#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::engine {

// A time window [lo, hi) in ns on the job's common clock.
struct TimeWindow {
  int64_t lo = INT64_MIN;
  int64_t hi = INT64_MAX;
  bool Empty() const { return lo >= hi; }
  bool All() const { return lo == INT64_MIN && hi == INT64_MAX; }
  // A block may hold an event overlapping the window.
  bool MayOverlap(int64_t min_ts, int64_t max_end) const { return min_ts < hi && max_end >= lo; }
  // A span overlaps [lo, hi); an instant (or empty span) lies in it.
  bool Overlaps(int64_t ts, int64_t dur) const {
    int64_t end;
    if (__builtin_add_overflow(ts, dur, &end)) end = dur > 0 ? INT64_MAX : INT64_MIN;
    return ts < hi && (end > lo || ts >= lo);
  }
};

// A block's zone map (its `blocks` row without the data), checked: `ok` is false when a value
// read from disk is out of its bounds (`error` says which); such a block must not be decoded
// (Read refuses it) and its count is 0.
struct BlockZoneRow {
  int64_t block = 0;
  int32_t rank = 0;
  int64_t min_ts = 0;
  int64_t max_end = 0;
  // The block's longest event; with a name or category selection, the longest of the events
  // whose (name, cat) matched (block_names.max_dur).
  int64_t max_dur = 0;
  uint64_t count = 0;  // 1..kMaxBlockRows when ok
  bool ok = true;
  std::string error;  // why not ok: names the database and the block
};

// Which blocks to list. Every condition is on the zone map and is optional (the defaults select
// every block); a block listed may still hold no matching event (the rows are the caller's to
// check).
struct BlockSelection {
  std::vector<int64_t> ranks;  // blocks of these ranks; empty: every rank
  // Blocks that may hold an event in [ts_lo, ts_hi] (both inclusive): max_end >= ts_lo and
  // min_ts <= ts_hi.
  int64_t ts_lo = INT64_MIN, ts_hi = INT64_MAX;
  int64_t min_ts_from = INT64_MIN;  // min_ts >= this (a bound from the longest block's span)
  int64_t min_dur = INT64_MIN;      // blocks whose longest (matching) event lasts at least this
  int64_t after_block = INT64_MIN;  // block ids above this one
  // Names and categories (string ids): blocks with a block_names row whose name is in `names`
  // and whose cat is in `cats` (an empty list: any). Each block is listed once.
  std::vector<int64_t> names, cats;
  // Categories OR'ed with the above: blocks with a block_names row whose cat is in `any_cats`
  // are selected too, whatever their names (a block_names row matches when it matches either
  // condition). Empty: no such alternative (with names and cats empty too, no name condition).
  std::vector<int64_t> any_cats;
  enum class Order {
    kBlock,       // block id
    kRankTime,    // rank, min_ts, block
    kMaxDurDesc,  // max_dur descending, then block id (the longest events first)
    kTimeDesc,    // min_ts descending
  } order = Order::kRankTime;
  // Sets [ts_lo, ts_hi] to the half-open window [w.lo, w.hi).
  void SetWindow(const TimeWindow& w);
};

class BlockStore {
 public:
  // The decoded blocks the cache keeps, in rows (about 64 bytes a row for every column).
  static constexpr size_t kCacheRows = 1 << 18;

  // `db` outlives the store. `label` names the database in messages (its path; empty: none).
  // `schema` qualifies the tables ("main" for a function that must not read a temp table of
  // the same name; empty: unqualified, as SQL resolves it).
  explicit BlockStore(Db* db, std::string label = {}, std::string schema = {});
  BlockStore(const BlockStore&) = delete;
  BlockStore& operator=(const BlockStore&) = delete;

  Db* db() const { return db_; }
  const std::string& label() const { return label_; }

  // Calls fn for each block `sel` selects, in its order, with the zone map checked (a block
  // that fails the checks is passed with ok = false: the caller skips it or fails). fn's error
  // stops the walk and is returned. The statements are prepared once per distinct query shape.
  Status ForEach(const BlockSelection& sel, const std::function<Status(const BlockZoneRow&)>& fn);
  // The same, into a vector.
  StatusOr<std::vector<BlockZoneRow>> Select(const BlockSelection& sel);
  // The selected blocks decoded (the column groups in `cols`), in one pass: each block's bytes
  // come from the statement that lists it (no lookup per block), decoded into one DecodedBlock
  // that fn sees until it returns. A block that fails a check or does not decode ends the walk
  // with its Corruption (as Read). With names or cats, max_dur is the block's own (not the
  // matching rows'), and sel.min_dur applies to it.
  Status ForEachDecoded(const BlockSelection& sel, uint32_t cols,
                        const std::function<Status(const BlockZoneRow&, DecodedBlock&)>& fn);
  // The distinct ranks that hold blocks, ascending.
  StatusOr<std::vector<int64_t>> Ranks();
  // The ids (ascending, distinct) of the blocks with a (name, cat) for which `match` holds.
  StatusOr<std::vector<int64_t>> BlocksWithNames(
      const std::function<bool(uint32_t name, uint32_t cat)>& match);
  // Per block, the kinds (bit 1 << RowKind) it may hold, from its (name, cat) pairs and their
  // kinds on its rank in name_stats; a pair name_stats lacks leaves every kind possible. A block
  // without block_names rows is absent (every kind possible). Empty for a file without these
  // summaries.
  Status BlockKinds(std::unordered_map<int64_t, uint8_t>* out);

  // Reads block `z`, decodes the column groups in `cols` into `out` (reusing its buffers) and
  // checks it holds exactly z.count rows. Corruption naming the database and the block when the
  // zone map failed its checks, the block is gone, does not decode or holds another count.
  Status Read(const BlockZoneRow& z, uint32_t cols, DecodedBlock* out);
  // Calls fn with block `block`'s stored bytes (compressed, as on disk; valid during the call
  // only) and returns true, or returns false when the file has no such block. The statement is
  // reset before returning (a stepped statement would hold the file's read lock).
  StatusOr<bool> ReadBytes(int64_t block, const std::function<Status(std::string_view)>& fn);
  // The same through the cache: a block decoded before is served again (with the column groups
  // in `cols` decoded when missing). The least recently used blocks leave beyond kCacheRows.
  StatusOr<std::shared_ptr<DecodedBlock>> ReadCached(const BlockZoneRow& z, uint32_t cols);
  // Empties the cache when `version` differs from the last one given (a caller passes what
  // changes with the file: its data version and change count).
  void SetVersion(int64_t data_version, int64_t changes);

  // The strings with ids in (after, DenseIdLimit(rows of strings)], ascending, to fn; returns
  // the largest id at or below that limit (`after` when there is none). Ids beyond the limit
  // (a hostile or damaged file) are left out (engine/db/block_check.h).
  StatusOr<int64_t> ForEachString(int64_t after,
                                  const std::function<void(int64_t id, std::string_view s)>& fn);
  // The `meta` table, key -> value (empty when the file has none).
  Status LoadMeta(std::map<std::string, std::string>* out);

 private:
  StatusOr<Stmt*> Statement(const std::string& sql);
  std::string Prefixed(std::string_view msg) const;

  // The zone-map query of `sel` (with the data column when `with_data`) and its parameters.
  std::string SelectionSql(const BlockSelection& sel, bool with_data,
                           std::vector<int64_t>* binds) const;
  // Fills z from columns 0..5 of st, with the checks of ForEach.
  void ZoneFrom(const Stmt& st, BlockZoneRow* z) const;

  Db* db_;
  std::string label_;
  std::string prefix_;  // "schema." or empty
  Stmt data_;           // SELECT data FROM blocks WHERE block = ?1
  std::map<std::string, Stmt> queries_;
  struct Entry {
    std::shared_ptr<DecodedBlock> blk;
    uint64_t last_use = 0;
  };
  std::unordered_map<int64_t, Entry> cache_;
  uint64_t tick_ = 0;
  size_t cache_rows_ = 0;
  int64_t data_version_ = -1, changes_ = -1;
};

}  // namespace tracedb::engine
