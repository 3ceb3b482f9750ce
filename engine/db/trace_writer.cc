// TraceWriter implementation. See trace_writer.h; format in docs/database-format.md.
#include "engine/db/trace_writer.h"

#include "engine/db/db_schema.h"
#include "engine/util/coding.h"

namespace tracedb::engine {

StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Open(const std::string& path) {
  TRACEDB_ASSIGN_OR_RETURN(std::unique_ptr<Db> db, OpenTraceDb(path, /*create=*/true,
                                                               /*read_only=*/false));
  std::unique_ptr<TraceWriter> w(new TraceWriter(std::move(db)));
  TRACEDB_RETURN_IF_ERROR(w->Load());
  return w;
}

TraceWriter::~TraceWriter() {
  if (in_batch_) db_->Rollback();
}

Status TraceWriter::Load() {
  {
    // Blocks are fitted to the file's pages (an older file may have other pages than 16 KiB).
    TRACEDB_ASSIGN_OR_RETURN(int64_t page, db_->QueryInt("PRAGMA page_size", 16384));
    if (page >= 512 && page <= 65536) pages_ = PageGeometry(static_cast<size_t>(page));
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT id, s FROM strings"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const auto id = static_cast<uint32_t>(st.Int(0));
      string_ids_.emplace(std::string(st.Text(1)), id);
      next_string_id_ = std::max(next_string_id_, id + 1);
    }
  }
  tracks_.assign(1, TrackInfo());
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt st, db_->Prepare("SELECT track, rank, kind, name, tid, pid, local_id, sort_index, "
                            "next_k FROM tracks ORDER BY track"));
  for (;;) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    const auto id = static_cast<uint32_t>(st.Int(0));
    if (id >= tracks_.size()) tracks_.resize(id + 1);
    TrackInfo& t = tracks_[id];
    t.spec.rank = static_cast<int32_t>(st.Int(1));
    t.spec.kind = std::string(st.Text(2));
    t.spec.name = std::string(st.Text(3));
    t.spec.tid = st.IsNull(4) ? -1 : st.Int(4);
    t.spec.pid = st.IsNull(5) ? -1 : st.Int(5);
    t.spec.local_id = st.IsNull(6) ? -1 : st.Int(6);
    t.spec.sort_index = st.Int(7);
    t.next_k = static_cast<uint64_t>(st.Int(8));
    if (t.spec.local_id >= 0) {
      track_by_local_[{t.spec.rank, t.spec.kind, t.spec.pid, t.spec.local_id}] = id;
    } else {
      track_by_name_[{t.spec.rank, t.spec.kind, t.spec.name}] = id;
    }
  }
  return Status::Ok();
}

Status TraceWriter::BeginBatch() {
  if (in_batch_) return Status::Internal("batch already open");
  TRACEDB_RETURN_IF_ERROR(db_->Begin());
  in_batch_ = true;
  return Status::Ok();
}

uint32_t TraceWriter::Intern(std::string_view s) {
  auto it = string_ids_.find(std::string(s));
  if (it != string_ids_.end()) return it->second;
  const uint32_t id = next_string_id_++;
  string_ids_.emplace(std::string(s), id);
  new_strings_.emplace_back(id, std::string(s));
  return id;
}

uint32_t TraceWriter::Track(const TrackSpec& spec) {
  if (spec.local_id >= 0) {
    auto key = std::make_tuple(spec.rank, spec.kind, spec.pid, spec.local_id);
    auto it = track_by_local_.find(key);
    if (it != track_by_local_.end()) {
      TrackInfo& t = tracks_[it->second];
      if (!spec.name.empty() && spec.name != t.spec.name) {
        t.spec.name = spec.name;  // a thread named after its first events
        t.dirty = true;
      }
      return it->second;
    }
    const auto id = static_cast<uint32_t>(tracks_.size());
    tracks_.push_back(TrackInfo{spec, 0, true});
    track_by_local_[key] = id;
    return id;
  }
  auto key = std::make_tuple(spec.rank, spec.kind, spec.name);
  auto it = track_by_name_.find(key);
  if (it != track_by_name_.end()) return it->second;
  const auto id = static_cast<uint32_t>(tracks_.size());
  tracks_.push_back(TrackInfo{spec, 0, true});
  track_by_name_[key] = id;
  return id;
}

void TraceWriter::SelectRank(int32_t rank) {
  auto [it, fresh] = pending_.try_emplace(rank);
  if (fresh && !spare_cols_.empty()) {
    it->second.cols = std::move(spare_cols_.back());
    spare_cols_.pop_back();
  }
  if (fresh) it->second.target = fits_[rank].rows;
  last_rows_ = &it->second;
  last_rank_ = rank;
}

Status TraceWriter::AddRow(int32_t rank, Row row) {
  const uint32_t track = row.track;
  NewRow(rank, track) = std::move(row);
  return CommitRow();
}

void TraceWriter::AddStep(int32_t rank, int64_t ts, int64_t step) {
  steps_.emplace_back(rank, ts, step);
}

void TraceWriter::AddStat(std::string_view name, int32_t rank, int64_t delta) {
  if (last_stat_ == nullptr || last_stat_key_.second != rank || last_stat_key_.first != name) {
    last_stat_key_ = {std::string(name), rank};
    last_stat_ = &stats_[last_stat_key_];
  }
  *last_stat_ += delta;
}

Status TraceWriter::WriteBlock(int32_t rank, PendingRows* pending) {
  if (pending->cols.n == 0) return Status::Ok();
  BlockZone zone;
  EncodeBlock(pending->cols, &block_scratch_, &zone);
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt ins,
      db_->PrepareCached("INSERT INTO blocks(rank, min_ts, max_end, max_dur, count, data) "
                         "VALUES(?1, ?2, ?3, ?4, ?5, ?6)"));
  ins.Bind(1, rank)
      .Bind(2, zone.min_ts)
      .Bind(3, zone.max_end)
      .Bind(4, zone.max_dur)
      .Bind(5, static_cast<int64_t>(zone.count))
      .BindBlob(6, block_scratch_);
  TRACEDB_RETURN_IF_ERROR(ins.Run());
  const int64_t block = db_->LastInsertRowid();
  if (pending->cols.n == pending->target) {
    // A full block: the rows of the rank's next one (block_fit.h), fitted to the pages, or
    // the rest of the default's grid: a fitted stretch ends at a multiple of kBlockRows rows
    // of the batch, where the default would have cut.
    BlockFit& fit = fits_[rank];
    const size_t n = pending->cols.n, blob = block_scratch_.size();
    fit.history.Add(static_cast<double>(blob) / static_cast<double>(n));
    fit.rows = FitBlockRows(pages_, kBlockRows, kMaxFitRows, n,
                            BlockRecordBytes(rank, zone.min_ts, zone.max_end, zone.max_dur,
                                             static_cast<int64_t>(zone.count), blob),
                            blob, fit.history.Spread());
    pending->written += n;
    const size_t off = pending->written % kBlockRows;
    pending->target = fit.rows != kBlockRows  ? fit.rows
                      : off == 0              ? kBlockRows
                      : off <= kBlockRows / 2 ? kBlockRows - off
                                              : 2 * kBlockRows - off;
  }
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt names, db_->PrepareCached("INSERT INTO block_names(name, cat, block, count, max_dur) "
                                     "VALUES(?1, ?2, ?3, ?4, ?5)"));
  // One block_names row per (name, cat) over every kind; name_stats per (name, cat, kind).
  std::map<std::pair<uint32_t, uint32_t>, std::pair<uint64_t, int64_t>> per_name;
  for (const BlockNameInfo& n : zone.names) {
    auto& [count, max_dur] = per_name[{n.name, n.cat}];
    if (count == 0) max_dur = n.max_dur;
    count += n.count;
    max_dur = std::max(max_dur, n.max_dur);
    NameStat& ns = name_stats_[{rank, n.name, n.cat, static_cast<uint8_t>(n.kind)}];
    ns.count += n.count;
    ns.total = SaturatingAdd(ns.total, n.total_dur);
    ns.min = std::min(ns.min, n.min_dur);
    ns.max = std::max(ns.max, n.max_dur);
    for (size_t b = 0; b < ns.hist.size(); ++b) ns.hist[b] += n.hist[b];
  }
  for (const auto& [key, v] : per_name) {
    names.Bind(1, key.first)
        .Bind(2, key.second)
        .Bind(3, block)
        .Bind(4, static_cast<int64_t>(v.first))
        .Bind(5, v.second);
    TRACEDB_RETURN_IF_ERROR(names.Run());
  }
  rows_written_ += pending->cols.n;
  blocks_written_++;
  pending->cols.Clear();
  return Status::Ok();
}

Status TraceWriter::SetRank(const RankRecord& r) {
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt st,
      db_->PrepareCached("INSERT OR REPLACE INTO ranks(rank, host, world_size, local_rank, "
                         "clock_method, offset_ns, drift_ppm, uncertainty_ns, sync_points, "
                         "source) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"));
  st.Bind(1, r.rank)
      .Bind(2, r.host)
      .Bind(3, r.world_size)
      .Bind(4, r.local_rank)
      .Bind(5, r.clock_method)
      .Bind(6, r.offset_ns)
      .Bind(7, r.drift_ppm)
      .Bind(8, r.uncertainty_ns)
      .Bind(9, r.sync_points)
      .Bind(10, r.source);
  return st.Run();
}

Status TraceWriter::SetMeta(std::string_view key, std::string_view value) {
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt st, db_->PrepareCached("INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)"));
  return st.Bind(1, key).Bind(2, value).Run();
}

Status TraceWriter::SaveState(std::string_view key, std::string_view value) {
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt st, db_->PrepareCached("INSERT OR REPLACE INTO state(key, value) VALUES(?1, ?2)"));
  return st.Bind(1, key).BindBlob(2, value).Run();
}

StatusOr<std::optional<std::string>> TraceWriter::LoadState(std::string_view key) {
  TRACEDB_ASSIGN_OR_RETURN(Stmt st, db_->PrepareCached("SELECT value FROM state WHERE key = ?1"));
  st.Bind(1, key);
  TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return std::optional<std::string>();
  return std::optional<std::string>(std::string(st.Blob(0)));
}

Status TraceWriter::CommitBatch() {
  if (!in_batch_) return Status::Internal("no batch open");
  for (auto& [rank, rows] : pending_) TRACEDB_RETURN_IF_ERROR(WriteBlock(rank, &rows));
  for (auto& [rank, rows] : pending_) spare_cols_.push_back(std::move(rows.cols));
  pending_.clear();
  last_rows_ = nullptr;
  // Each section below is skipped when it has nothing to write: a small batch (one text
  // profile, a compaction pass with little new) touches few of them.
  if (!new_strings_.empty()) {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st,
                             db_->PrepareCached("INSERT INTO strings(id, s) VALUES(?1, ?2)"));
    for (const auto& [id, s] : new_strings_)
      TRACEDB_RETURN_IF_ERROR(st.Bind(1, id).Bind(2, s).Run());
    new_strings_.clear();
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt ins,
        db_->PrepareCached("INSERT OR REPLACE INTO tracks(track, rank, kind, name, tid, pid, "
                           "local_id, sort_index, next_k) "
                           "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"));
    for (size_t id = 1; id < tracks_.size(); ++id) {
      TrackInfo& t = tracks_[id];
      if (!t.dirty) continue;
      ins.Bind(1, static_cast<int64_t>(id))
          .Bind(2, t.spec.rank)
          .Bind(3, t.spec.kind)
          .Bind(4, t.spec.name);
      if (t.spec.tid >= 0)
        ins.Bind(5, t.spec.tid);
      else
        ins.BindNull(5);
      if (t.spec.pid >= 0)
        ins.Bind(6, t.spec.pid);
      else
        ins.BindNull(6);
      if (t.spec.local_id >= 0)
        ins.Bind(7, t.spec.local_id);
      else
        ins.BindNull(7);
      ins.Bind(8, t.spec.sort_index).Bind(9, static_cast<int64_t>(t.next_k));
      TRACEDB_RETURN_IF_ERROR(ins.Run());
      t.dirty = false;
    }
  }
  if (!name_stats_.empty()) {
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt sel,
        db_->PrepareCached("SELECT count, total_dur, min_dur, max_dur, hist FROM name_stats "
                           "WHERE rank=?1 AND name=?2 AND cat=?3 AND kind=?4"));
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt ins, db_->PrepareCached(
                      "INSERT OR REPLACE INTO name_stats(rank, name, cat, kind, count, total_dur, "
                      "min_dur, max_dur, hist) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"));
    std::string hist;
    for (auto& [key, ns] : name_stats_) {
      const auto& [rank, name, cat, kind] = key;
      sel.Bind(1, rank).Bind(2, name).Bind(3, cat).Bind(4, static_cast<int64_t>(kind));
      TRACEDB_ASSIGN_OR_RETURN(bool row, sel.Step());
      if (row) {
        ns.count += static_cast<uint64_t>(sel.Int(0));
        ns.total = SaturatingAdd(ns.total, sel.Int(1));
        ns.min = std::min(ns.min, sel.Int(2));
        ns.max = std::max(ns.max, sel.Int(3));
        Reader r(sel.Blob(4));
        for (uint64_t& h : ns.hist) {
          uint64_t v = 0;
          if (!r.GetVarint64(&v)) break;
          h += v;
        }
      }
      sel.Reset();
      hist.clear();
      for (uint64_t h : ns.hist) PutVarint64(&hist, h);
      ins.Bind(1, rank)
          .Bind(2, name)
          .Bind(3, cat)
          .Bind(4, static_cast<int64_t>(kind))
          .Bind(5, static_cast<int64_t>(ns.count))
          .Bind(6, ns.total)
          .Bind(7, ns.min)
          .Bind(8, ns.max)
          .BindBlob(9, hist);
      TRACEDB_RETURN_IF_ERROR(ins.Run());
    }
    name_stats_.clear();
  }
  if (!steps_.empty()) {
    TRACEDB_RETURN_IF_ERROR(EnsureTable(db_.get(), "steps"));
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st,
        db_->PrepareCached("INSERT OR REPLACE INTO steps(rank, ts, step) VALUES(?1, ?2, ?3)"));
    for (const auto& [rank, ts, step] : steps_) {
      TRACEDB_RETURN_IF_ERROR(st.Bind(1, rank).Bind(2, ts).Bind(3, step).Run());
    }
    steps_.clear();
  }
  if (!stats_.empty()) {
    TRACEDB_RETURN_IF_ERROR(EnsureTable(db_.get(), "stats"));
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st, db_->PrepareCached("INSERT INTO stats(name, rank, value) VALUES(?1, ?2, ?3) "
                                    "ON CONFLICT(name, rank) DO UPDATE SET value = value + ?3"));
    for (const auto& [key, v] : stats_) {
      TRACEDB_RETURN_IF_ERROR(st.Bind(1, key.first).Bind(2, key.second).Bind(3, v).Run());
    }
    stats_.clear();
    last_stat_ = nullptr;
  }
  TRACEDB_RETURN_IF_ERROR(db_->Commit());
  in_batch_ = false;
  return Status::Ok();
}

}  // namespace tracedb::engine
