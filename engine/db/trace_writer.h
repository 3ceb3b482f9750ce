// TraceWriter: appends to a trace database. Compaction and every importer write through it.
//
// Work is done in batches: BeginBatch() opens a SQLite transaction, CommitBatch() writes what is
// buffered (full and partial event blocks with their zone maps, new strings and tracks, name
// statistics, steps, stats) and commits, so a process killed at any moment leaves the database
// as of the last commit. Rows are buffered per rank as columns (RowColumns, event_block.h),
// which TraceBuilder::CompleteRun fills directly, and cut into blocks of about kBlockRows events:
// a rank whose blocks are alike gets the row count that fills whole pages (block_fit.h).
// Thread safety: one thread at a time.
// Format: docs/database-format.md.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/db/block_fit.h"
#include "engine/db/event_block.h"
#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::engine {

// A track: a thread of a process, or a named lane (a tensor, a GPU stream, a queue…).
struct TrackSpec {
  int32_t rank = 0;
  std::string kind = "thread";  // "thread", "lane", "gpu", "counter", "global", …
  std::string name;             // display name; for kind != "thread" also the lookup key
  int64_t tid = -1;             // OS or file thread id, -1 when none
  int64_t pid = -1;             // process id, -1 when none
  int64_t local_id = -1;        // recorder thread index, or -1: tracks are then found by name
  int64_t sort_index = 0;
};

struct RankRecord {
  int32_t rank = 0;
  std::string host;
  int32_t world_size = 0;
  int32_t local_rank = 0;
  std::string clock_method;  // "sync", "realtime", "file"
  int64_t offset_ns = 0;     // common - local clock at the rank's first event
  double drift_ppm = 0;
  int64_t uncertainty_ns = 0;
  int64_t sync_points = 0;
  std::string source;  // e.g. "segments", "horovod", "kineto"
};

class TraceWriter {
 public:
  // A block's rows by default; a fitted block has between half and twice as many
  // (block_fit.h), at most kMaxFitRows.
  static constexpr size_t kBlockRows = 16384;
  static constexpr size_t kMaxFitRows = 2 * kBlockRows;

  // Creates `path` or opens it to append.
  static StatusOr<std::unique_ptr<TraceWriter>> Open(const std::string& path);
  ~TraceWriter();  // an uncommitted batch is rolled back

  Db* db() { return db_.get(); }

  Status BeginBatch();
  Status CommitBatch();
  bool in_batch() const { return in_batch_; }

  // The id of `s` in the strings table (created in this batch when new). Never 0.
  uint32_t Intern(std::string_view s);
  // Finds or creates a track; returns its id.
  uint32_t Track(const TrackSpec& spec);
  // Takes the next event ordinal of `track` (see Row::k).
  uint64_t TakeK(uint32_t track) { return tracks_[track].next_k++; }
  // Takes the next m ordinals of `track` at once; returns the first.
  uint64_t TakeKs(uint32_t track, uint64_t m) {
    const uint64_t k = tracks_[track].next_k;
    tracks_[track].next_k = k + m;
    return k;
  }
  int32_t TrackRank(uint32_t track) const { return tracks_.at(track).spec.rank; }
  const TrackSpec& TrackSpecOf(uint32_t track) const { return tracks_.at(track).spec; }
  size_t track_count() const { return tracks_.size(); }

  // Buffers one finished event of `rank`. Full blocks are encoded right away.
  Status AddRow(int32_t rank, Row row);
  // The same without a Row argument: NewRow() returns a default row (the writer's one scratch
  // Row) to fill in place, then CommitRow() appends it to the rank's pending columns (and may
  // encode a full block). REQUIRES: nothing else touches the writer in between.
  Row& NewRow(int32_t rank, uint32_t track) {
    tracks_[track].dirty = true;
    if (rank != last_rank_ || last_rows_ == nullptr) SelectRank(rank);
    ResetRow(&scratch_);
    scratch_.track = track;
    return scratch_;
  }
  Status CommitRow() {
    MakeRoom(last_rows_, 1);
    last_rows_->cols.Append(scratch_);
    if (last_rows_->cols.n >= last_rows_->target) return WriteBlock(last_rank_, last_rows_);
    return Status::Ok();
  }
  // The pending columns of `rank`, for a caller that writes rows straight into them, with room
  // for at least min(want, PendingLimit() - n) more, marking `track` written; after writing m
  // rows (m <= PendingLimit() - n) it sets n += m and calls FinishColumns().
  // (TraceBuilder::CompleteRun: a run's column pointers then stay in registers, where PutSpan
  // reloads them from the vectors after every store.) REQUIRES: want >= 1.
  RowColumns& PendingColumns(int32_t rank, uint32_t track, size_t want) {
    tracks_[track].dirty = true;
    if (rank != last_rank_ || last_rows_ == nullptr) SelectRank(rank);
    MakeRoom(last_rows_, want);
    return last_rows_->cols;
  }
  // The rows PendingColumns() may hold: its capacity, never past the rank's block.
  size_t PendingLimit() const { return std::min(last_rows_->cols.capacity(), last_rows_->target); }
  // Encodes the block of PendingColumns() once it is full.
  Status FinishColumns() {
    if (last_rows_->cols.n >= last_rows_->target) return WriteBlock(last_rank_, last_rows_);
    return Status::Ok();
  }
  // A span without JSON, not open, straight into the rank's pending columns: what NewRow(),
  // the fields and CommitRow() do, without a Row written and read back (RowColumns::PutSpan).
  // Inline: it runs once per complete event of a compaction.
  Status PutSpan(int32_t rank, uint32_t track, int64_t ts, int64_t dur, uint32_t name, uint32_t cat,
                 uint64_t k, uint32_t depth, uint64_t parent_k, const EventArgs* args) {
    tracks_[track].dirty = true;
    if (rank != last_rank_ || last_rows_ == nullptr) SelectRank(rank);
    RowColumns& c = last_rows_->cols;
    MakeRoom(last_rows_, 1);
    c.PutSpan(ts, dur, track, name, cat, k, depth, parent_k, args);
    if (c.n >= last_rows_->target) return WriteBlock(last_rank_, last_rows_);
    return Status::Ok();
  }
  void AddStep(int32_t rank, int64_t ts, int64_t step);
  // Adds `delta` to stats(name, rank); rank -1 is the whole job.
  void AddStat(std::string_view name, int32_t rank, int64_t delta);

  Status SetRank(const RankRecord& r);
  Status SetMeta(std::string_view key, std::string_view value);
  // Persistent blobs for incremental work (e.g. compaction's open spans).
  Status SaveState(std::string_view key, std::string_view value);
  StatusOr<std::optional<std::string>> LoadState(std::string_view key);

  uint64_t rows_written() const { return rows_written_; }
  uint64_t blocks_written() const { return blocks_written_; }

 private:
  struct TrackInfo {
    TrackSpec spec;
    uint64_t next_k = 0;
    bool dirty = false;  // next_k or the row itself must be written
  };
  struct NameStat {
    uint64_t count = 0;
    int64_t total = 0;
    int64_t min = INT64_MAX;
    int64_t max = INT64_MIN;
    std::array<uint64_t, 64> hist{};  // log2 buckets of dur (bucket i: [2^i, 2^(i+1)) ns)
  };

  explicit TraceWriter(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  Status Load();
  // Rows of one rank not yet in a block, as columns sized for a block once (kept between
  // blocks of the batch), the rows of its block, and the rows of its full blocks so far in the
  // batch (a rank not fitted cuts its blocks at multiples of kBlockRows from the batch's start).
  struct PendingRows {
    RowColumns cols;
    size_t target = kBlockRows;
    size_t written = 0;
  };
  // What a rank's full blocks so far say of its next (block_fit.h), kept between batches.
  struct BlockFit {
    size_t rows = kBlockRows;  // a fitted count, or kBlockRows
    BlockHistory history;
  };
  // Encodes and inserts the pending rows as a block; a block of `pending->target` rows also
  // sets the rank's next row count.
  Status WriteBlock(int32_t rank, PendingRows* pending);
  // Makes `rank`'s pending rows the ones NewRow() and PutSpan() append to.
  void SelectRank(int32_t rank);
  // Room in the columns for min(want, target - n) more rows. The columns grow as a rank's
  // rows come (doubling, from 1,024 rows, up to a block), not a block's worth at once: a batch
  // holds the pending rows of up to 64 ranks, and a rank with few events then costs what it
  // writes. REQUIRES: n < target.
  static void MakeRoom(PendingRows* p, size_t want) {
    RowColumns* c = &p->cols;
    const size_t need = c->n + std::min(want, p->target - c->n);
    if (need > c->capacity()) [[unlikely]] {
      c->Reserve(std::min(p->target, std::max({need, 2 * c->capacity(), size_t{1024}})));
    }
  }
  // Back to Row's defaults, field by field (the scratch Row's json keeps its capacity); the
  // caller sets the track.
  static void ResetRow(Row* r) {
    r->ts = 0;
    r->dur = 0;
    r->name = 0;
    r->cat = 0;
    r->kind = RowKind::kSpan;
    r->depth = 0;
    r->k = 0;
    r->parent_k = 0;
    r->args = EventArgs();
    r->open = false;
    r->value = 0;
    r->json.clear();
  }

  std::unique_ptr<Db> db_;
  bool in_batch_ = false;
  std::unordered_map<std::string, uint32_t> string_ids_;
  std::vector<std::pair<uint32_t, std::string>> new_strings_;
  uint32_t next_string_id_ = 1;
  std::vector<TrackInfo> tracks_;  // index = track id; [0] unused
  std::map<std::tuple<int32_t, std::string, int64_t, int64_t>, uint32_t> track_by_local_;
  std::map<std::tuple<int32_t, std::string, std::string>, uint32_t> track_by_name_;
  std::map<int32_t, PendingRows> pending_;      // rank -> rows not yet in a block
  std::unordered_map<int32_t, BlockFit> fits_;  // rank -> its blocks' fit
  PageGeometry pages_{16384};                   // the database's (Load())
  // The columns of the last batch's ranks, emptied, for the next batch's: grown again from
  // nothing, each batch copied its ranks' rows at every doubling. As many as a batch had ranks.
  std::vector<RowColumns> spare_cols_;
  int32_t last_rank_ = INT32_MIN;  // NewRow's cache of pending_[last_rank_]
  PendingRows* last_rows_ = nullptr;
  Row scratch_;  // NewRow()'s row, until CommitRow()
  std::map<std::tuple<int32_t, uint32_t, uint32_t, uint8_t>, NameStat> name_stats_;
  std::vector<std::tuple<int32_t, int64_t, int64_t>> steps_;
  std::map<std::pair<std::string, int32_t>, int64_t> stats_;
  // AddStat's cache: the entry it added to last (a job with a defect usually repeats it, e.g.
  // improper nesting on every step), null after stats_ is cleared.
  std::pair<std::string, int32_t> last_stat_key_;
  int64_t* last_stat_ = nullptr;
  uint64_t rows_written_ = 0;
  uint64_t blocks_written_ = 0;
  std::string block_scratch_;
};

}  // namespace tracedb::engine
