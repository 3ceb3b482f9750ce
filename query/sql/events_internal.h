// Internals of the `events` virtual table (query/sql/events_vtab.h), shared by its parts:
//   events_catalog.cc  the database's dictionaries (strings, tracks, steps, per-rank facts)
//   events_plan.cc     xBestIndex (what is pushed down and promised to SQLite) and the decoding
//                      of xFilter's arguments into Constraints
//   events_scan.cc     zone maps, the block scan with selection vectors, the top-n search
//   events_group.cc    the grouped scan (rows sorted by the GROUP BY / ORDER BY columns)
//   events_columns.cc  xColumn and xRowid
//   events_vtab.cc     the module: connect, open, filter, next, eof
// The promises made to SQLite are documented in docs/sql.md, "What is promised to SQLite".
// Thread safety: per SQLite connection.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/db/block_store.h"
#include "engine/db/event_block.h"
#include "engine/db/sqlite.h"
#include "engine/db/sqlite_api.h"

namespace tracedb::query::events {

enum Col : int {
  kId,
  kRank,
  kTid,
  kTrack,
  kTrackName,
  kLane,
  kName,
  kCat,
  kKind,
  kTs,
  kDur,
  kEndTs,
  kDepth,
  kParent,
  kBytes,
  kPeer,
  kTag,
  kComm,
  kSeq,
  kFlow,
  kValue,
  kStep,
  kArgs,
  kOpen,  // 1: a span still open when its process ended (Row::open)
  kNumCols
};

inline constexpr const char* kSchema =
    "CREATE TABLE x(id INTEGER, rank INTEGER, tid INTEGER, track INTEGER, track_name TEXT, "
    "lane TEXT, name TEXT, cat TEXT, kind TEXT, ts INTEGER, dur INTEGER, end_ts INTEGER, "
    "depth INTEGER, parent INTEGER, bytes INTEGER, peer INTEGER, tag INTEGER, comm INTEGER, "
    "seq INTEGER, flow INTEGER, value REAL, step INTEGER, args TEXT, open INTEGER)";

// Operators in idxStr, one letter each followed by the column letter ('A' + Col) or '-'.
enum Op : char {
  kEq = '=',
  kGt = '>',
  kGe = 'g',
  kLt = '<',
  kLe = 'l',
  kLimit = 'L',
  kOffset = 'O',
  kTopN = 'T',       // "T-": ORDER BY dur DESC served in order (top-n search)
  kGroup = 'G',      // "G" + column: rows ordered by these columns (ascending), so groups
  kGroupDesc = 'H',  //   are adjacent; "H": descending
};

// The database's dictionaries, refreshed when they grow (a compaction may be appending).
struct DbCatalog {
  std::deque<std::string> strings;  // index = id (stable addresses: results use SQLITE_STATIC)
  std::unordered_map<std::string_view, uint32_t> ids;
  struct Track {
    int32_t rank = 0;
    int64_t tid = -1;
    bool lane = false;
    std::string name;
    // Dense keys of the values this track gives its rows (grouped scan): tid, track_name, lane.
    uint32_t tid_key = 0, name_key = 0, lane_key = 0;
  };
  std::vector<Track> tracks;
  // rank -> (ts, step), read only for a query that uses the step column (LoadSteps): a long
  // job's steps table has millions of rows, which a query without steps need not hold.
  std::map<int32_t, std::vector<std::pair<int64_t, int64_t>>> steps;
  bool steps_loaded = false;
  std::map<int32_t, int64_t> rank_min_dur;  // from name_stats: no row of the rank is shorter
  int64_t max_string = 0, max_track = 0, step_count = -1, data_version = -1;
  int64_t seen_data_version = -1, seen_changes = -1;
  engine::Stmt data_version_stmt;  // "PRAGMA data_version", prepared once

  void Refresh(engine::Db* db);
  std::optional<uint32_t> Id(std::string_view s) const {
    auto it = ids.find(s);
    if (it == ids.end()) return std::nullopt;
    return it->second;
  }
  // Reads the steps table when Refresh found it changed since it was last read.
  void LoadSteps(engine::Db* db);
  // The step in effect at `ts` on `rank`, if any. REQUIRES: LoadSteps since the last Refresh.
  std::optional<int64_t> StepAt(int32_t rank, int64_t ts) const;
  int64_t MinDur(int32_t rank) const {
    auto it = rank_min_dur.find(rank);
    return it == rank_min_dur.end() ? INT64_MIN : it->second;
  }
};

// Per block, the k range of each track in it, for `id =` and `parent =` (built on first use).
struct KIndex {
  struct Span {
    uint32_t track;
    uint64_t min_k, max_k;
  };
  std::unordered_map<int64_t, std::vector<Span>> blocks;  // block -> spans
  int64_t max_block = 0;                                  // blocks up to here are indexed
};

// Scans of at most this many blocks read through the block store's cache of decoded blocks (the
// inner side of a nested-loop join touches few blocks again and again); larger scans decode
// into the cursor instead.
inline constexpr size_t kMaxCachedScanBlocks = 16;

// The memory of finished grouped scans, for the next one on the connection. A grouped scan
// holds its partition decoded (the whole table for `GROUP BY name`); allocated afresh, every
// 4 KiB of it costs a page fault, and freed, it goes back to the kernel: at 10M rows that was a
// fifth of the time of `SELECT name, median(dur) FROM events GROUP BY name`. Decoding into a
// kept block reuses its buffers. At most kMaxBytes are kept (10M events grouped by name, with
// `dur` read, hold about 400 MB: 114 MB of block payloads, 160 MB of decoded columns, 120 MB
// of row order and group ids).
class ScanScratch {
 public:
  static constexpr size_t kMaxBytes = size_t{512} << 20;
  // A block to decode into: a kept one when there is one, else a new one.
  engine::DecodedBlock TakeBlock();
  // Keeps `b` for reuse while the budget allows (else frees it).
  void GiveBlock(engine::DecodedBlock&& b);
  // Moves every block of `v` here (or frees it) and empties `v`.
  void GiveBlocks(std::vector<engine::DecodedBlock>* v);
  // The same for plain arrays (a grouped scan's row order and group ids); Take returns an
  // empty vector with the kept capacity.
  std::vector<uint64_t> TakeOrder() { return Take(&order_); }
  void GiveOrder(std::vector<uint64_t>* v) { Give(v, &order_); }
  std::vector<uint32_t> TakeIds() { return Take(&ids_); }
  void GiveIds(std::vector<uint32_t>* v) { Give(v, &ids_); }

 private:
  template <typename T>
  std::vector<T> Take(std::vector<T>* kept) {
    std::vector<T> v = std::move(*kept);
    *kept = std::vector<T>();
    bytes_ -= v.capacity() * sizeof(T);
    v.clear();
    return v;
  }
  template <typename T>
  void Give(std::vector<T>* v, std::vector<T>* kept) {
    const size_t add = v->capacity() * sizeof(T), have = kept->capacity() * sizeof(T);
    if (add > have && bytes_ - have + add <= kMaxBytes) {
      bytes_ = bytes_ - have + add;
      *kept = std::move(*v);
    }
    *v = std::vector<T>();
  }

  std::vector<engine::DecodedBlock> blocks_;
  std::vector<uint64_t> order_;
  std::vector<uint32_t> ids_;
  size_t bytes_ = 0;  // held by the members above
};

struct EventsVtab {
  sqlite3_vtab base;  // must be first
  std::unique_ptr<engine::Db> db;
  DbCatalog catalog;
  KIndex k_index;
  // The one reader of the file's blocks: zone maps, reads, decodes, the decoded-block cache.
  std::unique_ptr<engine::BlockStore> store;
  // Per block, the kinds it may hold (BlockRef::kinds), for the file as it was when the
  // catalog last saw it (the catalog's data version and change count); built on first use.
  std::unordered_map<int64_t, uint8_t> block_kinds;
  int64_t block_kinds_version = -1, block_kinds_changes = -1;
  ScanScratch scratch;  // grouped scans' memory, reused
};

// A set of integers [lo, hi] that a column must fall in. `set` once any constraint applies (so
// that a nullable column, parent or step, excludes NULL even when the range is full).
struct Range {
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  bool set = false;
  void Apply(char op, int64_t v);
  // `col op d` for a real d (SQLite compares integers and reals exactly).
  void ApplyReal(char op, double d);
  // `col op t` for a text or blob t: SQLite orders every number before every text and blob.
  void ApplyText(char op);
  void Nothing() {
    set = true;
    lo = INT64_MAX;
    hi = INT64_MIN;
  }
  bool Contains(int64_t v) const { return v >= lo && v <= hi; }
  bool Empty() const { return lo > hi; }
  bool All() const { return !set; }
};

struct Constraints {
  bool none = false;  // a constraint no row can meet (e.g. an unknown name)
  Range rank, ts, end, dur, track, step, id, parent;
  // Checked row by row only (no zone map): depth and the typed arguments (NULL when absent).
  Range depth, bytes, peer, tag, comm, seq, flow;
  std::optional<uint32_t> name, cat;
  std::optional<uint8_t> kind;
  int64_t limit = -1, offset = 0;
  bool top_by_dur = false;
  std::vector<int> group_cols;               // grouped scan: the columns of the groups,
  std::vector<bool> group_desc;              //   in ORDER BY order, and their directions
  std::map<int32_t, Range> step_ts;          // per rank: the ts range of the wanted steps
  uint32_t filter_cols = engine::kColTrack;  // the block columns the constraints read
  uint32_t used_cols = engine::kColTrack;    // the block columns the statement reads
};

// A block that may hold matching rows, with its zone map.
struct BlockRef {
  int64_t block;
  int32_t rank;
  int64_t max_dur;
  int64_t min_ts = INT64_MIN, max_end = INT64_MAX;
  int64_t count = 0;
  // The kinds (bit 1 << RowKind) the block may hold: from its (name, cat) pairs (block_names)
  // and their kinds on its rank (name_stats); filled only when a kind is constrained.
  uint8_t kinds = kAllKinds;
  static constexpr uint8_t kAllKinds = (1u << engine::kNumRowKinds) - 1;
};

struct TopRow {
  int64_t dur;
  int64_t seq;  // tie-break: discovery order
  int32_t rank;
  int64_t block;
  uint32_t index;                          // row in the block
  engine::Row row;                         // filled for the winners only
  bool operator<(const TopRow& o) const {  // min-heap on dur via std::priority_queue
    return dur != o.dur ? dur > o.dur : seq < o.seq;
  }
};

struct EventsCursor {
  sqlite3_vtab_cursor base;  // must be first
  EventsVtab* vtab = nullptr;
  Constraints f;
  std::vector<BlockRef> blocks;
  size_t next_block = 0;
  bool eof = true;
  enum class Mode { kScan, kGrouped, kTop } mode = Mode::kScan;

  // The current row: row `row` of block `*blk` of rank `rank` (scan and grouped modes).
  engine::DecodedBlock* blk = nullptr;
  size_t row = 0;
  int32_t rank = 0;

  // Scan mode: the block being read and its selected rows (`all` = every row, none decoded
  // when neither constraints nor columns need it; `cur_ref` then loads it on demand).
  engine::DecodedBlock scan_blk;                      // the block, decoded here, or
  std::shared_ptr<engine::DecodedBlock> scan_cached;  // the cache's copy (small scans)
  bool scan_loaded = false;
  const BlockRef* cur_ref = nullptr;
  std::vector<uint32_t> sel;
  bool sel_all = false;
  size_t sel_n = 0, pos = 0;

  // Grouped mode: the blocks of one partition (a rank, or the whole table) and the order of
  // their rows, group after group.
  std::vector<engine::DecodedBlock> part_blocks;
  std::vector<int32_t> part_ranks;
  std::vector<uint64_t> part_order;  // (block index << 32) | row, group after group
  size_t part_pos = 0;
  size_t next_part_block = 0;  // index into `blocks` of the next partition's first block
  bool per_rank = false;       // partitions are ranks (else one partition: every block)

  // Top-n mode: rows computed in xFilter, served in order.
  std::vector<TopRow> top;
  size_t top_pos = 0;
};

// ---- events_plan.cc ----
int BestIndex(sqlite3_vtab* tab, sqlite3_index_info* info);
// Decodes xFilter's arguments into c->f; sets c->eof when no row can match.
int ParseConstraints(EventsCursor* c, int col_used, const char* idx, int argc,
                     sqlite3_value** argv);
// The block column group a SQL column reads.
uint32_t ColumnGroup(int col);

// ---- events_scan.cc ----
int Fail(sqlite3_vtab* vtab, const std::string& msg);
// The constraints a block's zone map does not settle, to be checked row by row.
struct RowChecks {
  bool name = false, cat = false, kind = false, track = false, dur = false, ts = false, end = false,
       id = false, parent = false, step = false, depth = false, args = false;
  uint32_t cols = 0;  // the column groups they read
  bool any() const {
    return name || cat || kind || track || dur || ts || end || id || parent || step || depth ||
           args;
  }
};
RowChecks ChecksFor(const Constraints& f, const BlockRef& b, const DbCatalog& cat);
// The rows of `b` that meet the checks `k`, into `sel`.
void Select(const Constraints& f, const RowChecks& k, const engine::DecodedBlock& b, int32_t rank,
            const DbCatalog& cat, std::vector<uint32_t>* sel);
// Reads and decodes block `ref` (the column groups in `want`) into `out`.
int LoadBlock(EventsCursor* c, const BlockRef& ref, engine::DecodedBlock* out, uint32_t want);
// Lists the blocks the constraints select into c->blocks; for the top-n search none (RunTopN
// walks them longest first and stops early, listing those it read).
int CollectBlocks(EventsCursor* c);
int StartScan(EventsCursor* c);
int NextScan(EventsCursor* c);
// Loads the current scan block when it was skipped (no column was needed) and a column is.
int EnsureScanBlock(EventsCursor* c);
int RunTopN(EventsCursor* c);

// ---- events_group.cc ----
int StartGrouped(EventsCursor* c);
int NextGrouped(EventsCursor* c);
// Hands a grouped scan's memory to the vtab's scratch (at the scan's end, a new xFilter,
// xClose).
void ReleaseGrouped(EventsCursor* c);

// ---- events_columns.cc ----
int Column(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col);
int Rowid(sqlite3_vtab_cursor* cur, sqlite3_int64* out);

}  // namespace tracedb::query::events
