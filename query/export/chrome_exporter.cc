// The Chrome trace exporter. See chrome_exporter.h; the mapping is documented in docs/export.md.
// Thread safety: an export runs on one thread; it shares nothing between calls.
#include "query/export/chrome_exporter.h"

#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

#include "engine/db/block_check.h"
#include "engine/db/block_store.h"
#include "engine/db/db_schema.h"
#include "engine/db/event_block.h"
#include "engine/util/coding.h"
#include "engine/util/json_text.h"
#include "engine/util/version.h"
#include "query/export/chrome_writer.h"

namespace tracedb::query {
namespace {

using engine::Db;
using engine::DecodedBlock;
using engine::Stmt;

// The time window of one rank: [lo, hi) (engine/db/block_store.h).
using Window = engine::TimeWindow;

std::string BoundText(const ChromeTimeBound& b) {
  if (!b.text.empty()) return b.text;
  switch (b.kind) {
    case ChromeTimeBound::Kind::kNone:
      return "";
    case ChromeTimeBound::Kind::kEpochNs:
      return std::to_string(b.value);
    case ChromeTimeBound::Kind::kSinceStart:
      return std::to_string(b.value) + "ns";
    case ChromeTimeBound::Kind::kAfterFrom:
      return std::string(1, '+').append(std::to_string(b.value)).append("ns");
    case ChromeTimeBound::Kind::kStep:
      return std::string("step:").append(std::to_string(b.value));
  }
  return "";
}

// One export: chooses the blocks and rows, and hands the rows to a ChromeTraceWriter.
class ChromeExporter {
 public:
  ChromeExporter(Db* db, const ChromeExportOptions& o, ChromeExportStats* stats)
      : db_(db), o_(o), stats_(stats), store_(db, db->path()) {}

  Status Run();

 private:
  Status RunInSnapshot();
  Status CheckOptions();
  Status LoadJob();
  Status ResolveWindows();
  Status SelectBlocksByName();
  std::string OtherData();
  Status ExportBlocks();
  Status ExportBlock(const engine::BlockZoneRow& z);
  bool RankSelected(int64_t rank) const;
  const Window& WindowOf(int32_t rank) const;
  bool NameMatches(uint32_t name);
  bool CatMatches(uint32_t cat) const {
    return std::find(cat_ids_.begin(), cat_ids_.end(), cat) != cat_ids_.end();
  }
  void Progress();

  Db* db_;
  const ChromeExportOptions& o_;
  ChromeExportStats* stats_;
  engine::BlockStore store_;  // zone maps, block reads and decodes, meta

  StringCache strings_;
  std::unique_ptr<ChromeTraceWriter> writer_;
  std::vector<int32_t> job_ranks_;  // ranks with events, filtered
  int gzip_ = 0;
  int64_t origin_ = 0;

  Window window_;  // when no bound is per rank
  bool per_rank_window_ = false;
  std::unordered_map<int32_t, Window> rank_windows_;
  const Window empty_window_{INT64_MAX, INT64_MIN};

  bool by_name_ = false;              // names or cats filter: blocks chosen from block_names
  std::vector<int64_t> name_blocks_;  // sorted
  std::vector<int8_t> name_match_;    // string id -> -1 unknown, 0, 1
  bool cat_filter_ = false;
  std::vector<uint32_t> cat_ids_;  // wanted category ids

  engine::DecodedBlock block_;
  int32_t block_rank_ = INT32_MIN;
  uint64_t blocks_since_progress_ = 0;
};

bool ChromeExporter::RankSelected(int64_t rank) const {
  if (o_.ranks.empty()) return true;
  for (const auto& [lo, hi] : o_.ranks) {
    if (rank >= lo && rank <= hi) return true;
  }
  return false;
}

const Window& ChromeExporter::WindowOf(int32_t rank) const {
  if (!per_rank_window_) return window_;
  auto it = rank_windows_.find(rank);
  return it == rank_windows_.end() ? empty_window_ : it->second;
}

bool ChromeExporter::NameMatches(uint32_t name) {
  if (o_.names.empty()) return true;
  if (name >= name_match_.size()) name_match_.resize(std::max<size_t>(name + 1, 64), -1);
  int8_t& m = name_match_[name];
  if (m < 0) {
    const std::string& text = strings_.Text(name);
    m = 0;
    for (const std::string& glob : o_.names) {
      if (fnmatch(glob.c_str(), text.c_str(), 0) == 0) {
        m = 1;
        break;
      }
    }
  }
  return m == 1;
}

Status ChromeExporter::CheckOptions() {
  if (o_.output.empty()) return Status::InvalidArgument("no output file given");
  for (const auto& [lo, hi] : o_.ranks) {
    if (lo > hi) {
      return Status::InvalidArgument("rank range " + std::to_string(lo) + "-" + std::to_string(hi) +
                                     " is empty");
    }
  }
  if (o_.from.kind == ChromeTimeBound::Kind::kAfterFrom) {
    return Status::InvalidArgument("--from cannot be relative to itself (+DURATION is for --to)");
  }
  for (const std::string& g : o_.names) {
    if (g.empty()) return Status::InvalidArgument("empty name pattern");
  }
  if (o_.max_file_bytes != 0 && o_.max_file_bytes < 4096) {
    return Status::InvalidArgument("a split file must be allowed at least 4096 bytes");
  }
  // Renaming the finished file onto the database would replace the trace with its export.
  struct stat out_st, db_st;
  if (::stat(o_.output.c_str(), &out_st) == 0 && ::stat(db_->path().c_str(), &db_st) == 0 &&
      out_st.st_dev == db_st.st_dev && out_st.st_ino == db_st.st_ino) {
    return Status::InvalidArgument("the output " + o_.output + " is the database itself");
  }
  const bool gz = o_.output.size() > 3 && o_.output.compare(o_.output.size() - 3, 3, ".gz") == 0;
  if (gz) {
    if (o_.gzip_level < 1 || o_.gzip_level > 9) {
      return Status::InvalidArgument("gzip level " + std::to_string(o_.gzip_level) +
                                     " not in 1..9");
    }
    gzip_ = o_.gzip_level;
  }
  return Status::Ok();
}

// Job facts: the first event, the ranks with events, their hosts and tracks.
Status ChromeExporter::LoadJob() {
  TRACEDB_RETURN_IF_ERROR(engine::CheckSchema(db_));
  TRACEDB_RETURN_IF_ERROR(strings_.Init(db_));
  TRACEDB_ASSIGN_OR_RETURN(stats_->job_start_ns, db_->QueryInt("SELECT min(min_ts) FROM blocks"));
  origin_ = o_.epoch_ts ? 0 : stats_->job_start_ns;
  ChromeWriterOptions wo;
  wo.output = o_.output;
  wo.max_file_bytes = o_.max_file_bytes;
  wo.gzip_level = gzip_;
  wo.origin_ns = origin_;
  wo.extra_flows = o_.extra_flows;
  wo.extra_flow_name = o_.extra_flow_name;
  wo.max_open_flows = std::max<size_t>(1, o_.max_open_flows);
  writer_ = std::make_unique<ChromeTraceWriter>(std::move(wo), &strings_, stats_);
  {
    TRACEDB_ASSIGN_OR_RETURN(std::vector<int64_t> ranks, store_.Ranks());
    for (int64_t rank : ranks) {
      if (RankSelected(rank)) job_ranks_.push_back(static_cast<int32_t>(rank));
    }
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT rank, host FROM ranks"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      if (RankSelected(st.Int(0))) writer_->AddRank(static_cast<int32_t>(st.Int(0)), st.Text(1));
    }
  }
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt st, db_->Prepare("SELECT track, rank, kind, name, tid, sort_index, pid, local_id "
                            "FROM tracks"));
  for (;;) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    if (!RankSelected(st.Int(1))) continue;
    const auto id = static_cast<uint32_t>(st.Int(0));
    std::string name(st.Text(3));
    if (name.empty()) {
      // Unnamed: the kind and the OS thread id (or the track id).
      name = std::string(st.Text(2)) + " " +
             (st.IsNull(4) ? std::to_string(id) : std::to_string(st.Int(4)));
    }
    ChromeTraceWriter::TrackIds ids;
    if (!st.IsNull(4)) ids.tid = st.Int(4);
    if (!st.IsNull(6)) ids.pid = st.Int(6);
    if (!st.IsNull(7)) ids.local_id = st.Int(7);
    writer_->AddTrack(id, static_cast<int32_t>(st.Int(1)), st.Text(2), name,
                      st.IsNull(5) ? static_cast<int64_t>(id) : st.Int(5), ids);
  }
  return Status::Ok();
}

// The window of each rank, from the bounds: absolute, relative to the job start, or per rank
// through the step markers.
Status ChromeExporter::ResolveWindows() {
  using Kind = ChromeTimeBound::Kind;
  const int64_t start = stats_->job_start_ns;
  auto global = [&](const ChromeTimeBound& b, int64_t none) -> int64_t {
    switch (b.kind) {
      case Kind::kEpochNs:
        return b.value;
      case Kind::kSinceStart:
        return engine::SaturatingAdd(start, b.value);
      default:
        return none;
    }
  };
  const bool from_step = o_.from.kind == Kind::kStep;
  const bool to_step = o_.to.kind == Kind::kStep;
  window_.lo = global(o_.from, INT64_MIN);
  window_.hi = global(o_.to, INT64_MAX);
  if (o_.to.kind == Kind::kAfterFrom && !from_step) {
    window_.hi =
        engine::SaturatingAdd(o_.from.kind == Kind::kNone ? start : window_.lo, o_.to.value);
  }
  if (!from_step && !to_step) {
    if (window_.Empty()) {
      return Status::InvalidArgument("empty time window: --from " + BoundText(o_.from) +
                                     " is not before --to " + BoundText(o_.to));
    }
    return Status::Ok();
  }
  TRACEDB_ASSIGN_OR_RETURN(int64_t markers, db_->QueryInt("SELECT count(*) FROM steps"));
  if (markers == 0) {
    return Status::InvalidArgument(db_->path() +
                                   ": the database has no step markers, so step:N bounds "
                                   "select nothing");
  }
  // Per rank: from = the first marker with step >= A; to = the first marker with step > B.
  auto first_marker = [&](const char* sql, int64_t step,
                          std::unordered_map<int32_t, int64_t>* out) -> Status {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, db_->Prepare(sql));
    st.Bind(1, step);
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      (*out)[static_cast<int32_t>(st.Int(0))] = st.Int(1);
    }
    return Status::Ok();
  };
  std::unordered_map<int32_t, int64_t> from_ts, to_ts;
  if (from_step) {
    TRACEDB_RETURN_IF_ERROR(first_marker(
        "SELECT rank, min(ts) FROM steps WHERE step >= ?1 GROUP BY rank", o_.from.value, &from_ts));
  }
  if (to_step) {
    TRACEDB_RETURN_IF_ERROR(first_marker(
        "SELECT rank, min(ts) FROM steps WHERE step > ?1 GROUP BY rank", o_.to.value, &to_ts));
  }
  per_rank_window_ = true;
  for (int32_t rank : job_ranks_) {
    Window w = window_;
    if (from_step) {
      auto it = from_ts.find(rank);
      if (it == from_ts.end()) continue;  // no such step on this rank: nothing from it
      w.lo = it->second;
    }
    if (to_step) {
      auto it = to_ts.find(rank);
      w.hi = it == to_ts.end() ? INT64_MAX : it->second;
    } else if (o_.to.kind == Kind::kAfterFrom) {
      w.hi = engine::SaturatingAdd(w.lo, o_.to.value);
    }
    rank_windows_[rank] = w;
  }
  return Status::Ok();
}

// With a names or categories filter, only blocks whose block_names rows match are read.
Status ChromeExporter::SelectBlocksByName() {
  by_name_ = !o_.names.empty() || !o_.cats.empty();
  if (!by_name_) return Status::Ok();
  if (!o_.cats.empty()) {
    cat_filter_ = true;
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT id FROM strings WHERE s = ?1"));
    for (const std::string& c : o_.cats) {
      st.Bind(1, std::string_view(c));
      for (;;) {
        TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
        if (!row) break;
        cat_ids_.push_back(static_cast<uint32_t>(st.Int(0)));
      }
      st.Reset();
    }
  }
  TRACEDB_ASSIGN_OR_RETURN(name_blocks_, store_.BlocksWithNames([&](uint32_t name, uint32_t cat) {
    return (!cat_filter_ || CatMatches(cat)) && NameMatches(name);
  }));
  TRACEDB_RETURN_IF_ERROR(strings_.status());
  return Status::Ok();
}

// The members of otherData common to every file.
std::string ChromeExporter::OtherData() {
  std::string d = "\"tracedb\":true,\"tool\":\"tracedb\",\"tool_version\":";
  engine::json::AppendString(&d, engine::kTracedbVersion);
  d += ",\"schema_version\":" + std::to_string(engine::kSchemaVersion);
  d += ",\"source_db\":";
  engine::json::AppendString(&d, o_.source_label.empty() ? db_->path() : o_.source_label);
  d += ",\"job_start_ns\":" + std::to_string(stats_->job_start_ns);
  d += ",\"ts_unit\":\"us\",\"ts_origin_ns\":" + std::to_string(origin_);
  d += ",\"ranks\":[";
  for (size_t i = 0; i < job_ranks_.size(); ++i) {
    if (i) d += ',';
    d += std::to_string(job_ranks_[i]);
  }
  d += "],\"filters\":{\"ranks\":";
  if (o_.ranks.empty()) {
    d += "null";
  } else {
    std::string text = o_.ranks_text;
    if (text.empty()) {
      for (const auto& [lo, hi] : o_.ranks) {
        if (!text.empty()) text += ',';
        text += std::to_string(lo);
        if (hi != lo) text.append(1, '-').append(std::to_string(hi));
      }
    }
    engine::json::AppendString(&d, text);
  }
  for (const auto& [key, b] : {std::pair{"from", &o_.from}, std::pair{"to", &o_.to}}) {
    d += ",\"";
    d += key;
    d += "\":";
    if (b->kind == ChromeTimeBound::Kind::kNone) {
      d += "null";
    } else {
      engine::json::AppendString(&d, BoundText(*b));
    }
  }
  if (!per_rank_window_) {
    d += ",\"window_ns\":[";
    d += window_.lo == INT64_MIN ? "null" : std::to_string(window_.lo);
    d += ',';
    d += window_.hi == INT64_MAX ? "null" : std::to_string(window_.hi);
    d += ']';
  }
  for (const auto& [key, list] : {std::pair{"names", &o_.names}, std::pair{"cats", &o_.cats}}) {
    d += ",\"";
    d += key;
    d += "\":[";
    for (size_t i = 0; i < list->size(); ++i) {
      if (i) d += ',';
      engine::json::AppendString(&d, (*list)[i]);
    }
    d += ']';
  }
  d += ",\"max_file_bytes\":";
  d += o_.max_file_bytes ? std::to_string(o_.max_file_bytes) : "null";
  d += "},\"meta\":{";
  std::map<std::string, std::string> meta;
  if (store_.LoadMeta(&meta).ok()) {
    bool first = true;
    for (const auto& [key, value] : meta) {
      if (!first) d += ',';
      first = false;
      engine::json::AppendString(&d, key);
      d += ':';
      engine::json::AppendString(&d, value);
    }
  }
  d += '}';
  return d;
}

void ChromeExporter::Progress() {
  if (!o_.progress) return;
  const uint64_t closed = stats_->json_bytes;
  stats_->json_bytes = writer_->json_bytes();
  o_.progress(*stats_);
  stats_->json_bytes = closed;
}

Status ChromeExporter::ExportBlocks() {
  // Rank by rank, in time order.
  engine::BlockSelection every;
  every.order = engine::BlockSelection::Order::kRankTime;
  return store_.ForEach(every, [&](const engine::BlockZoneRow& z) -> Status {
    stats_->blocks_total++;
    bool take = RankSelected(z.rank) && WindowOf(z.rank).MayOverlap(z.min_ts, z.max_end);
    if (take && by_name_)
      take = std::binary_search(name_blocks_.begin(), name_blocks_.end(), z.block);
    if (!take) {
      stats_->events_filtered += z.count;
    } else if (!z.ok) {
      stats_->blocks_corrupt++;  // a zone map out of bounds: damaged, skipped and counted
    } else {
      TRACEDB_RETURN_IF_ERROR(ExportBlock(z));
    }
    if (++blocks_since_progress_ >= 64) {
      blocks_since_progress_ = 0;
      Progress();
    }
    return Status::Ok();
  });
}

Status ChromeExporter::ExportBlock(const engine::BlockZoneRow& z) {
  const int32_t rank = z.rank;
  if (!store_.Read(z, writer_->columns(), &block_).ok()) {
    // One damaged block is skipped and counted; the rest of the trace still exports.
    stats_->blocks_corrupt++;
    stats_->events_corrupt += z.count;
    return Status::Ok();
  }
  stats_->blocks_decoded++;
  if (rank != block_rank_) {
    writer_->BeginRank();
    block_rank_ = rank;
  }
  const DecodedBlock& b = block_;
  const Window& w = WindowOf(rank);
  const bool window = !w.All();
  const bool names = !o_.names.empty();
  for (size_t i = 0; i < b.n; ++i) {
    if ((window && !w.Overlaps(b.ts[i], b.dur[i])) || (names && !NameMatches(b.name[i])) ||
        (cat_filter_ && !CatMatches(b.cat[i]))) {
      stats_->events_filtered++;
      continue;
    }
    if (!writer_->Write(b, i, rank)) return writer_->status();
  }
  TRACEDB_RETURN_IF_ERROR(strings_.status());
  return writer_->status();
}

Status ChromeExporter::Run() {
  TRACEDB_RETURN_IF_ERROR(CheckOptions());
  // One read transaction: the tracks, strings and blocks of one snapshot, even while a
  // compaction appends to the database (within a caller's transaction, that one serves).
  const bool own_txn = db_->Exec("BEGIN").ok();
  Status s = RunInSnapshot();
  if (own_txn && !db_->Exec("COMMIT").ok()) db_->Rollback();  // a read: nothing to keep
  return s;
}

Status ChromeExporter::RunInSnapshot() {
  Status s = LoadJob();
  if (s.ok()) s = ResolveWindows();
  if (s.ok()) s = SelectBlocksByName();
  if (!s.ok()) {
    // The database cannot be read as asked: reported like a bad argument.
    if (s.code() == Status::Code::kInvalidArgument) return s;
    return Status::InvalidArgument(s.message());
  }
  s = writer_->Start(OtherData());
  if (s.ok()) s = ExportBlocks();
  if (s.ok()) s = writer_->Finish();
  if (!s.ok()) {
    writer_->Abandon();  // leave nothing behind
    return s;
  }
  Progress();
  return Status::Ok();
}

}  // namespace

std::string ChromePartPath(const std::string& output, uint64_t part) {
  if (part == 0) return output;
  auto ends_with = [](const std::string& s, const char* suffix) {
    const size_t n = std::strlen(suffix);
    return s.size() > n && s.compare(s.size() - n, n, suffix) == 0;
  };
  std::string base = output, suffix;
  if (ends_with(base, ".gz")) {
    suffix = ".gz";
    base.resize(base.size() - 3);
  }
  if (ends_with(base, ".json")) {
    suffix = ".json" + suffix;
    base.resize(base.size() - 5);
  }
  return base + "." + std::to_string(part) + suffix;
}

Status ExportChrome(engine::Db* db, const ChromeExportOptions& o, ChromeExportStats* stats) {
  *stats = ChromeExportStats();
  ChromeExporter e(db, o, stats);
  return e.Run();
}

}  // namespace tracedb::query
