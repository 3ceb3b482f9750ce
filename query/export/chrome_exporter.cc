// The Chrome trace exporter. See chrome_exporter.h; the mapping is documented in docs/export.md.
// Thread safety: an export runs on one thread; it shares nothing between calls.
#include "query/export/chrome_exporter.h"

#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <unordered_map>

#include "engine/db_schema.h"
#include "engine/event_block.h"
#include "engine/version.h"
#include "query/export/json_text.h"
#include "query/export/output_file.h"

namespace tracedb::query {
namespace {

using engine::Db;
using engine::DecodedBlock;
using engine::EventArgs;
using engine::RowKind;
using engine::Stmt;

constexpr uint64_t kNoFile = UINT64_MAX;

// Appends a string literal's bytes (without its terminating NUL) at p.
template <size_t N>
inline char* Put(char* p, const char (&lit)[N]) {
  std::memcpy(p, lit, N - 1);
  return p + N - 1;
}
inline char* Put(char* p, const std::string& s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
  return r;
}

// The time window of one rank: [lo, hi).
struct Window {
  int64_t lo = INT64_MIN;
  int64_t hi = INT64_MAX;
  bool Empty() const { return lo >= hi; }
  bool All() const { return lo == INT64_MIN && hi == INT64_MAX; }
  // A block may hold an event overlapping the window.
  bool MayOverlap(int64_t min_ts, int64_t max_end) const { return min_ts < hi && max_end >= lo; }
  // A span overlaps [lo, hi); an instant (or empty span) lies in it.
  bool Overlaps(int64_t ts, int64_t dur) const {
    return ts < hi && (SatAdd(ts, dur) > lo || ts >= lo);
  }
};

// The JSON literal (quotes included) and the text of every string used, loaded on first use.
class Strings {
 public:
  Status Init(Db* db) {
    TRACEDB_ASSIGN_OR_RETURN(st_, db->Prepare("SELECT s FROM strings WHERE id = ?1"));
    return Status::Ok();
  }
  const std::string& Literal(uint32_t id) { return Get(id).literal; }
  const std::string& Text(uint32_t id) { return Get(id).text; }
  const Status& status() const { return status_; }

 private:
  struct Entry {
    std::string text, literal;
  };
  const Entry& Get(uint32_t id) {
    if (id < slot_.size() && slot_[id] != 0) return entries_[slot_[id] - 1];
    Entry e;
    st_.Bind(1, static_cast<int64_t>(id));
    auto row = st_.Step();
    if (!row.ok()) {
      if (status_.ok()) status_ = row.status();
    } else if (*row) {
      e.text = std::string(st_.Text(0));
    }
    st_.Reset();
    json::AppendString(&e.literal, e.text);
    entries_.push_back(std::move(e));
    if (id >= slot_.size()) slot_.resize(std::max<size_t>(id + 1, slot_.size() * 2), 0);
    slot_[id] = static_cast<uint32_t>(entries_.size());
    return entries_.back();
  }
  Stmt st_;
  std::vector<uint32_t> slot_;  // id -> index + 1 into entries_ (0: not loaded)
  std::deque<Entry> entries_;
  Status status_;
};

struct RankOut {
  std::string pid;           // "pid":R
  std::string name_literal;  // "rank 3 (host)"
  int32_t rank = 0;
  uint64_t file = kNoFile;  // the last file given this process's metadata
};

struct TrackOut {
  int32_t pid = 0;
  bool global = false;       // tracks.kind = 'global': instants get scope "g"
  std::string prefix;        // "pid":R,"tid":T
  std::string name_literal;  // thread_name
  int64_t sort_index = 0;    // thread_sort_index
  uint64_t file = kNoFile;   // the last file given this thread's metadata
  bool extra = false;        // an end of an extra flow lies on this track
  RankOut* rank = nullptr;
};

// An end of a request flow waiting for its partner.
struct OpenFlow {
  int64_t ts = 0;
  uint32_t track = 0;
  uint32_t name = 0;
  uint64_t file = 0;
};

// An extra flow pair (ChromeExportOptions::extra_flows) and the ends seen so far.
struct ExtraPair {
  struct End {
    bool seen = false;
    int64_t ts = 0;
    uint32_t track = 0;
    uint64_t file = 0;
  } end[2];           // 0: from, 1: to
  bool done = false;  // drawn, or given up (an end cut off by a split)
};

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
      return "+" + std::to_string(b.value) + "ns";
    case ChromeTimeBound::Kind::kStep:
      return "step:" + std::to_string(b.value);
  }
  return "";
}

class ChromeExporter {
 public:
  ChromeExporter(Db* db, const ChromeExportOptions& o, ChromeExportStats* stats)
      : db_(db), o_(o), stats_(stats) {}

  Status Run();

 private:
  // What one row needs written with it in the current file; decided before writing, applied
  // once the row is known to fit.
  struct Plan {
    bool rank_meta = false, track_meta = false;
    enum class Flow { kNone, kOpen, kPair, kCut } flow = Flow::kNone;
    OpenFlow partner;
    enum class Extra { kRecord, kDraw, kCut };
    struct ExtraEnd {
      uint32_t pair;
      int end;  // this row's end of the pair: 0 from, 1 to
      Extra action;
    };
    std::vector<ExtraEnd> extra;
    size_t extra_drawn = 0;
  };

  Status CheckOptions();
  Status LoadJob();
  Status ResolveWindows();
  Status SelectBlocksByName();
  void BuildOtherData();
  Status OpenPart();
  Status ClosePart();
  Status ExportBlocks();
  Status ExportBlock(int64_t block, int32_t rank, uint64_t count);
  void SetupExtraFlows();
  void RemoveStaleParts();
  // Writes one row (with the metadata and flows it brings) into the current file, starting
  // the next file first when a split limit would be passed. False on an output error (status_).
  bool EmitRow(const DecodedBlock& b, size_t i, TrackOut* t);
  void MakePlan(const DecodedBlock& b, size_t i, TrackOut* t, uint64_t flow, int64_t id);
  void ApplyPlan(const DecodedBlock& b, size_t i, TrackOut* t, uint64_t flow);
  char* WriteArgs(char* p, const DecodedBlock& b, size_t i, uint32_t mask, size_t json_members);
  char* WriteFlowPair(char* p, uint64_t id, const TrackOut& from, int64_t from_ts,
                      const TrackOut& to, int64_t to_ts, const std::string& name_literal);
  char* WriteMeta(char* p, TrackOut* t);
  char* Sep(char* p) {
    if (file_empty_) {
      *p++ = '\n';
      file_empty_ = false;
    } else {
      p = Put(p, ",\n");
    }
    return p;
  }
  TrackOut* Track(uint32_t id, int32_t block_rank);
  RankOut* Rank(int32_t rank);
  bool RankSelected(int64_t rank) const;
  const Window& WindowOf(int32_t rank) const;
  bool NameMatches(uint32_t name);
  bool CatMatches(uint32_t cat) const {
    return cat_ids_.empty() || std::find(cat_ids_.begin(), cat_ids_.end(), cat) != cat_ids_.end();
  }
  void FinishRankFlows();
  void Progress();

  Db* db_;
  const ChromeExportOptions& o_;
  ChromeExportStats* stats_;

  Strings strings_;
  std::unordered_map<uint32_t, TrackOut> tracks_;
  std::unordered_map<int32_t, RankOut> ranks_;
  std::map<int32_t, std::string> hosts_;
  std::vector<int32_t> job_ranks_;  // ranks with events, filtered

  Window window_;  // when no bound is per rank
  bool per_rank_window_ = false;
  std::unordered_map<int32_t, Window> rank_windows_;
  const Window empty_window_{INT64_MAX, INT64_MIN};

  bool by_name_ = false;              // names or cats filter: blocks chosen from block_names
  std::vector<int64_t> name_blocks_;  // sorted
  std::vector<int8_t> name_match_;    // string id -> -1 unknown, 0, 1
  std::vector<uint32_t> cat_ids_;     // wanted category ids (empty: any)
  bool cat_filter_ = false;

  // Output.
  std::unique_ptr<OutputFile> out_;
  uint64_t file_index_ = 0;
  uint64_t events_in_file_ = 0;
  bool file_empty_ = true;
  bool file_oversize_ = false;
  std::string other_data_;  // the static members of otherData
  uint64_t footer_reserve_ = 0;
  int64_t origin_ = 0;  // subtracted from every ts
  int gzip_ = 0;

  // Flows.
  int32_t flow_rank_ = INT32_MIN;
  std::unordered_map<uint64_t, OpenFlow> open_flows_;
  uint64_t next_flow_id_ = 1;
  std::vector<ExtraPair> extra_pairs_;
  std::unordered_map<int64_t, std::vector<std::pair<uint32_t, int>>> extra_by_id_;
  std::unordered_map<uint32_t, bool> extra_tracks_;  // tracks holding an extra flow end
  std::string extra_name_literal_;

  Plan plan_;              // the current row's
  std::string args_json_;  // scratch: the current row's JSON args, re-written
  uint64_t blocks_since_progress_ = 0;
  Status status_;  // an output error met while writing rows
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

// Job facts: the first event, the ranks with events, hosts and tracks.
Status ChromeExporter::LoadJob() {
  TRACEDB_RETURN_IF_ERROR(engine::CheckSchema(db_));
  TRACEDB_RETURN_IF_ERROR(strings_.Init(db_));
  TRACEDB_ASSIGN_OR_RETURN(stats_->job_start_ns, db_->QueryInt("SELECT min(min_ts) FROM blocks"));
  origin_ = o_.relative_ts ? stats_->job_start_ns : 0;
  {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT DISTINCT rank FROM blocks ORDER BY 1"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      if (RankSelected(st.Int(0))) job_ranks_.push_back(static_cast<int32_t>(st.Int(0)));
    }
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT rank, host FROM ranks"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      if (!st.IsNull(1)) hosts_[static_cast<int32_t>(st.Int(0))] = std::string(st.Text(1));
    }
  }
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt st, db_->Prepare("SELECT track, rank, kind, name, tid, sort_index FROM tracks"));
  for (;;) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    const int64_t rank = st.Int(1);
    if (!RankSelected(rank)) continue;
    const auto id = static_cast<uint32_t>(st.Int(0));
    TrackOut& t = tracks_[id];
    t.pid = static_cast<int32_t>(rank);
    t.global = st.Text(2) == "global";
    std::string name(st.Text(3));
    if (st.IsNull(3) || name.empty()) {
      name = std::string(st.Text(2)) + " " +
             (st.IsNull(4) ? std::to_string(id) : std::to_string(st.Int(4)));
    }
    json::AppendString(&t.name_literal, name);
    t.sort_index = st.IsNull(5) ? static_cast<int64_t>(id) : st.Int(5);
  }
  for (auto& [id, t] : tracks_) {
    t.prefix = "\"pid\":" + std::to_string(t.pid) + ",\"tid\":" + std::to_string(id);
    t.rank = Rank(t.pid);
  }
  return Status::Ok();
}

RankOut* ChromeExporter::Rank(int32_t rank) {
  auto [it, inserted] = ranks_.try_emplace(rank);
  if (inserted) {
    it->second.rank = rank;
    it->second.pid = "\"pid\":" + std::to_string(rank);
    std::string name = "rank " + std::to_string(rank);
    auto h = hosts_.find(rank);
    if (h != hosts_.end() && !h->second.empty()) name += " (" + h->second + ")";
    json::AppendString(&it->second.name_literal, name);
  }
  return &it->second;
}

// A track missing from the tracks table (a damaged database) still gets a thread.
TrackOut* ChromeExporter::Track(uint32_t id, int32_t block_rank) {
  auto it = tracks_.find(id);
  if (it != tracks_.end()) return &it->second;
  TrackOut& t = tracks_[id];
  t.pid = block_rank;
  t.prefix = "\"pid\":" + std::to_string(t.pid) + ",\"tid\":" + std::to_string(id);
  json::AppendString(&t.name_literal, "track " + std::to_string(id));
  t.sort_index = id;
  t.extra = extra_tracks_.count(id) != 0;
  t.rank = Rank(t.pid);
  return &t;
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
        return SatAdd(start, b.value);
      default:
        return none;
    }
  };
  const bool from_step = o_.from.kind == Kind::kStep;
  const bool to_step = o_.to.kind == Kind::kStep;
  window_.lo = global(o_.from, INT64_MIN);
  window_.hi = global(o_.to, INT64_MAX);
  if (o_.to.kind == Kind::kAfterFrom && !from_step) {
    window_.hi = SatAdd(o_.from.kind == Kind::kNone ? start : window_.lo, o_.to.value);
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
      w.hi = SatAdd(w.lo, o_.to.value);
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
    if (cat_ids_.empty()) cat_ids_.push_back(UINT32_MAX);  // no such category: nothing matches
  }
  TRACEDB_ASSIGN_OR_RETURN(Stmt st, db_->Prepare("SELECT name, cat, block FROM block_names"));
  for (;;) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    const auto name = static_cast<uint32_t>(st.Int(0));
    const auto cat = static_cast<uint32_t>(st.Int(1));
    if (CatMatches(cat) && NameMatches(name)) name_blocks_.push_back(st.Int(2));
  }
  TRACEDB_RETURN_IF_ERROR(strings_.status());
  std::sort(name_blocks_.begin(), name_blocks_.end());
  name_blocks_.erase(std::unique(name_blocks_.begin(), name_blocks_.end()), name_blocks_.end());
  return Status::Ok();
}

// The members of otherData common to every file.
void ChromeExporter::BuildOtherData() {
  std::string& d = other_data_;
  d = "\"tracedb\":true,\"tool\":\"tracedb\",\"tool_version\":";
  json::AppendString(&d, engine::kTracedbVersion);
  d += ",\"schema_version\":" + std::to_string(engine::kSchemaVersion);
  d += ",\"source_db\":";
  json::AppendString(&d, o_.source_label.empty() ? db_->path() : o_.source_label);
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
        if (hi != lo) text += "-" + std::to_string(hi);
      }
    }
    json::AppendString(&d, text);
  }
  for (const auto& [key, b] : {std::pair{"from", &o_.from}, std::pair{"to", &o_.to}}) {
    d += ",\"";
    d += key;
    d += "\":";
    if (b->kind == ChromeTimeBound::Kind::kNone) {
      d += "null";
    } else {
      json::AppendString(&d, BoundText(*b));
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
      json::AppendString(&d, (*list)[i]);
    }
    d += ']';
  }
  d += ",\"max_file_bytes\":";
  d += o_.max_file_bytes ? std::to_string(o_.max_file_bytes) : "null";
  d += "},\"meta\":{";
  auto st = db_->Prepare("SELECT key, value FROM meta ORDER BY key");
  if (st.ok()) {
    bool first = true;
    for (;;) {
      auto row = st->Step();
      if (!row.ok() || !*row) break;
      if (!first) d += ',';
      first = false;
      json::AppendString(&d, st->Text(0));
      d += ':';
      json::AppendString(&d, st->Text(1));
    }
  }
  d += '}';
  // The per-file members that follow: ,"part":N,"events":N}} and the array's end before.
  footer_reserve_ = other_data_.size() + 128;
}

Status ChromeExporter::OpenPart() {
  const std::string path = ChromePartPath(o_.output, file_index_);
  TRACEDB_ASSIGN_OR_RETURN(out_, OutputFile::Create(path, gzip_));
  out_->Append(std::string("{\"traceEvents\":["));
  events_in_file_ = 0;
  file_empty_ = true;
  file_oversize_ = false;
  return Status::Ok();
}

Status ChromeExporter::ClosePart() {
  std::string tail = "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{";
  tail += other_data_;
  tail += ",\"part\":" + std::to_string(file_index_);
  tail += ",\"events\":" + std::to_string(events_in_file_) + "}}\n";
  out_->Append(tail);
  const uint64_t bytes = out_->bytes();
  TRACEDB_RETURN_IF_ERROR(out_->Close());
  stats_->files.push_back(out_->path());
  stats_->json_bytes += bytes;
  stats_->disk_bytes += out_->disk_bytes();
  if (file_oversize_ || (o_.max_file_bytes && bytes > o_.max_file_bytes)) stats_->oversize_files++;
  out_.reset();
  ++file_index_;
  return Status::Ok();
}

void ChromeExporter::FinishRankFlows() {
  stats_->flows_unmatched += open_flows_.size();
  open_flows_.clear();
}

void ChromeExporter::Progress() {
  if (!o_.progress) return;
  const uint64_t closed = stats_->json_bytes;
  stats_->json_bytes = closed + (out_ ? out_->bytes() : 0);
  o_.progress(*stats_);
  stats_->json_bytes = closed;
}

Status ChromeExporter::ExportBlocks() {
  TRACEDB_ASSIGN_OR_RETURN(Stmt list,
                           db_->Prepare("SELECT block, rank, min_ts, max_end, count FROM blocks "
                                        "ORDER BY rank, min_ts, block"));
  for (;;) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, list.Step());
    if (!row) break;
    const int64_t block = list.Int(0);
    const int64_t rank64 = list.Int(1);
    const auto count = static_cast<uint64_t>(std::max<int64_t>(0, list.Int(4)));
    stats_->blocks_total++;
    const auto rank = static_cast<int32_t>(rank64);
    bool take = RankSelected(rank64) && WindowOf(rank).MayOverlap(list.Int(2), list.Int(3));
    if (take && by_name_)
      take = std::binary_search(name_blocks_.begin(), name_blocks_.end(), block);
    if (!take) {
      stats_->events_filtered += count;
    } else {
      TRACEDB_RETURN_IF_ERROR(ExportBlock(block, rank, count));
    }
    if (++blocks_since_progress_ >= 64) {
      blocks_since_progress_ = 0;
      Progress();
    }
  }
  FinishRankFlows();
  for (const ExtraPair& p : extra_pairs_) stats_->extra_flows_missing += p.done ? 0 : 1;
  return Status::Ok();
}

Status ChromeExporter::ExportBlock(int64_t block, int32_t rank, uint64_t count) {
  static thread_local DecodedBlock b;
  {
    TRACEDB_ASSIGN_OR_RETURN(Stmt data, db_->Prepare("SELECT data FROM blocks WHERE block = ?1"));
    data.Bind(1, block);
    TRACEDB_ASSIGN_OR_RETURN(bool row, data.Step());
    uint32_t want = engine::kColKind | engine::kColName | engine::kColCat | engine::kColTs |
                    engine::kColArgs | engine::kColValue;
    if (!extra_pairs_.empty()) want |= engine::kColK;
    Status s = row ? engine::DecodeBlock(data.Blob(0), block, &b, want)
                   : Status::Corruption("block " + std::to_string(block) + " vanished");
    if (!s.ok()) {
      stats_->blocks_corrupt++;
      stats_->events_corrupt += count;
      return Status::Ok();
    }
  }
  stats_->blocks_decoded++;
  if (rank != flow_rank_) {
    FinishRankFlows();
    flow_rank_ = rank;
  }
  const Window& w = WindowOf(rank);
  const bool window = !w.All();
  const bool names = !o_.names.empty();
  TrackOut* t = nullptr;
  uint32_t t_id = 0;
  for (size_t i = 0; i < b.n; ++i) {
    if ((window && !w.Overlaps(b.ts[i], b.dur[i])) || (names && !NameMatches(b.name[i])) ||
        (cat_filter_ && !CatMatches(b.cat[i]))) {
      stats_->events_filtered++;
      continue;
    }
    if (t == nullptr || b.track[i] != t_id) {
      t_id = b.track[i];
      t = Track(t_id, rank);
    }
    if (!EmitRow(b, i, t)) return status_;
  }
  TRACEDB_RETURN_IF_ERROR(strings_.status());
  if (out_) TRACEDB_RETURN_IF_ERROR(out_->status());
  return Status::Ok();
}

void ChromeExporter::SetupExtraFlows() {
  json::AppendString(&extra_name_literal_, o_.extra_flow_name);
  extra_pairs_.resize(o_.extra_flows.size());
  for (size_t i = 0; i < o_.extra_flows.size(); ++i) {
    const auto [from, to] = o_.extra_flows[i];
    extra_by_id_[from].push_back({static_cast<uint32_t>(i), 0});
    extra_by_id_[to].push_back({static_cast<uint32_t>(i), 1});
    extra_tracks_[static_cast<uint32_t>(static_cast<uint64_t>(from) >> 32)] = true;
    extra_tracks_[static_cast<uint32_t>(static_cast<uint64_t>(to) >> 32)] = true;
  }
  for (auto& [id, t] : tracks_) t.extra = extra_tracks_.count(id) != 0;
}

// Decides what the row brings into the current file: the metadata of its process and thread
// (first event of each in this file) and the flows it completes.
void ChromeExporter::MakePlan(const DecodedBlock& b, size_t i, TrackOut* t, uint64_t flow,
                              int64_t id) {
  Plan& plan = plan_;
  plan.rank_meta = t->rank->file != file_index_;
  plan.track_meta = t->file != file_index_;
  plan.flow = Plan::Flow::kNone;
  if (flow != 0) {
    auto it = open_flows_.find(flow);
    if (it == open_flows_.end()) {
      plan.flow = Plan::Flow::kOpen;
    } else {
      plan.partner = it->second;
      plan.flow = it->second.file == file_index_ ? Plan::Flow::kPair : Plan::Flow::kCut;
    }
  }
  plan.extra.clear();
  plan.extra_drawn = 0;
  if (id < 0) return;
  auto it = extra_by_id_.find(id);
  if (it == extra_by_id_.end()) return;
  for (const auto& [pair, end] : it->second) {
    const ExtraPair& p = extra_pairs_[pair];
    if (p.done) continue;
    const bool self = o_.extra_flows[pair].first == o_.extra_flows[pair].second;
    if (self && end == 1) continue;  // a pair from an event to itself is drawn at end 0
    const ExtraPair::End& other = p.end[1 - end];
    Plan::Extra action = Plan::Extra::kRecord;
    if (self) {
      action = Plan::Extra::kDraw;
    } else if (other.seen) {
      action = other.file == file_index_ ? Plan::Extra::kDraw : Plan::Extra::kCut;
    }
    if (action == Plan::Extra::kDraw) plan.extra_drawn++;
    plan.extra.push_back({pair, end, action});
  }
  (void)b;
  (void)i;
}

void ChromeExporter::ApplyPlan(const DecodedBlock& b, size_t i, TrackOut* t, uint64_t flow) {
  const Plan& plan = plan_;
  if (plan.rank_meta) {
    t->rank->file = file_index_;
    stats_->metadata_events += 2;
  }
  if (plan.track_meta) {
    t->file = file_index_;
    stats_->metadata_events += 2;
  }
  switch (plan.flow) {
    case Plan::Flow::kNone:
      break;
    case Plan::Flow::kOpen: {
      open_flows_[flow] = OpenFlow{b.ts[i], b.track[i], b.name[i], file_index_};
      if (open_flows_.size() > o_.max_open_flows) {
        // Too many requests without their completion: drop the older half.
        std::vector<int64_t> ts;
        ts.reserve(open_flows_.size());
        for (const auto& [f, e] : open_flows_) ts.push_back(e.ts);
        std::nth_element(ts.begin(), ts.begin() + static_cast<ptrdiff_t>(ts.size() / 2), ts.end());
        const int64_t cut = ts[ts.size() / 2];
        for (auto e = open_flows_.begin(); e != open_flows_.end();) {
          if (e->second.ts <= cut && e->first != flow) {
            e = open_flows_.erase(e);
            stats_->flows_unmatched++;
          } else {
            ++e;
          }
        }
      }
      break;
    }
    case Plan::Flow::kPair:
      open_flows_.erase(flow);
      stats_->flows_written++;
      next_flow_id_++;
      break;
    case Plan::Flow::kCut:
      open_flows_.erase(flow);
      stats_->flows_cut++;
      break;
  }
  for (const Plan::ExtraEnd& e : plan.extra) {
    ExtraPair& p = extra_pairs_[e.pair];
    switch (e.action) {
      case Plan::Extra::kRecord:
        p.end[e.end] = ExtraPair::End{true, b.ts[i], b.track[i], file_index_};
        break;
      case Plan::Extra::kDraw:
        p.done = true;
        stats_->extra_flows_written++;
        next_flow_id_++;
        break;
      case Plan::Extra::kCut:
        p.done = true;
        stats_->extra_flows_missing++;
        break;
    }
  }
}

char* ChromeExporter::WriteMeta(char* p, TrackOut* t) {
  if (plan_.rank_meta) {
    const RankOut& r = *t->rank;
    p = Sep(p);
    p = Put(p, "{\"ph\":\"M\",");
    p = Put(p, r.pid);
    p = Put(p, ",\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":");
    p = Put(p, r.name_literal);
    p = Put(p, "}}");
    p = Sep(p);
    p = Put(p, "{\"ph\":\"M\",");
    p = Put(p, r.pid);
    p = Put(p, ",\"tid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":");
    p = json::WriteInt(p, r.rank);
    p = Put(p, "}}");
  }
  if (plan_.track_meta) {
    p = Sep(p);
    p = Put(p, "{\"ph\":\"M\",");
    p = Put(p, t->prefix);
    p = Put(p, ",\"name\":\"thread_name\",\"args\":{\"name\":");
    p = Put(p, t->name_literal);
    p = Put(p, "}}");
    p = Sep(p);
    p = Put(p, "{\"ph\":\"M\",");
    p = Put(p, t->prefix);
    p = Put(p, ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":");
    p = json::WriteInt(p, t->sort_index);
    p = Put(p, "}}");
  }
  return p;
}

// An "s" event at the first end and an "f" event binding to the slice enclosing the second.
char* ChromeExporter::WriteFlowPair(char* p, uint64_t id, const TrackOut& from, int64_t from_ts,
                                    const TrackOut& to, int64_t to_ts,
                                    const std::string& name_literal) {
  p = Sep(p);
  p = Put(p, "{\"ph\":\"s\",\"id\":");
  p = json::WriteUint(p, id);
  *p++ = ',';
  p = Put(p, from.prefix);
  p = Put(p, ",\"ts\":");
  p = json::WriteMicros(p, SatAdd(from_ts, -origin_));
  p = Put(p, ",\"name\":");
  p = Put(p, name_literal);
  p = Put(p, ",\"cat\":\"flow\"}");
  p = Sep(p);
  p = Put(p, "{\"ph\":\"f\",\"bp\":\"e\",\"id\":");
  p = json::WriteUint(p, id);
  *p++ = ',';
  p = Put(p, to.prefix);
  p = Put(p, ",\"ts\":");
  p = json::WriteMicros(p, SatAdd(to_ts, -origin_));
  p = Put(p, ",\"name\":");
  p = Put(p, name_literal);
  p = Put(p, ",\"cat\":\"flow\"}");
  return p;
}

// ,"args":{typed arguments in bit order, then the JSON arguments' members}
char* ChromeExporter::WriteArgs(char* p, const DecodedBlock& b, size_t i, uint32_t mask,
                                size_t json_members) {
  if ((mask & EventArgs::kAllFields) == 0 && json_members == 0) return p;
  p = Put(p, ",\"args\":{");
  const char* open = p;
  auto key = [&](char* q, const char* k, size_t n) {
    if (q != open) *q++ = ',';
    std::memcpy(q, k, n);
    return q + n;
  };
  if (mask & EventArgs::kBytes) p = json::WriteUint(key(p, "\"bytes\":", 8), b.bytes[i]);
  if (mask & EventArgs::kPeer) p = json::WriteInt(key(p, "\"peer\":", 7), b.peer[i]);
  if (mask & EventArgs::kTag) p = json::WriteInt(key(p, "\"tag\":", 6), b.tag[i]);
  if (mask & EventArgs::kComm) p = json::WriteUint(key(p, "\"comm\":", 7), b.comm[i]);
  if (mask & EventArgs::kSeq) p = json::WriteUint(key(p, "\"seq\":", 6), b.seq[i]);
  if (mask & EventArgs::kFlow) p = json::WriteUint(key(p, "\"flow\":", 7), b.flow[i]);
  if (json_members) {
    if (p != open) *p++ = ',';
    p = Put(p, args_json_);
  }
  *p++ = '}';
  return p;
}

bool ChromeExporter::EmitRow(const DecodedBlock& b, size_t i, TrackOut* t) {
  const uint8_t kind = b.kind[i];
  const uint32_t mask = b.arg_mask[i];
  const bool counter = kind == static_cast<uint8_t>(RowKind::kCounter);
  if (counter && !std::isfinite(b.value[i])) {
    stats_->counters_nonfinite++;
    return true;
  }
  size_t json_members = 0;
  args_json_.clear();
  if (!counter && (mask & DecodedBlock::kHasJson)) {
    if (!json::AppendObjectMembers(&args_json_, b.json[i], &json_members)) {
      stats_->bad_json_args++;
      args_json_ = "\"args_text\":";
      json::AppendString(&args_json_, b.json[i]);
      json_members = 1;
    }
  }
  const uint64_t flow = (mask & EventArgs::kFlow) ? b.flow[i] : 0;
  const int64_t id =
      t->extra ? static_cast<int64_t>((static_cast<uint64_t>(b.track[i]) << 32) | b.k[i]) : -1;
  const std::string& name = strings_.Literal(b.name[i]);
  const std::string* cat = nullptr;
  if (b.cat[i] != 0) {
    const std::string& c = strings_.Literal(b.cat[i]);
    if (c.size() > 2) cat = &c;  // "" is no category
  }
  const int64_t ts = b.ts[i];
  for (;;) {
    MakePlan(b, i, t, flow, id);
    const Plan& plan = plan_;
    const std::string* flow_name = nullptr;
    const TrackOut* partner = nullptr;
    if (plan.flow == Plan::Flow::kPair) {
      partner = Track(plan.partner.track, t->pid);
      // The flow is named after the event that starts it (the earlier end).
      flow_name = plan.partner.ts <= ts ? &strings_.Literal(plan.partner.name) : &name;
    }
    size_t bound = 640 + name.size() + (cat ? cat->size() : 0) + args_json_.size() +
                   t->prefix.size() + json::kMaxDouble;
    if (plan.rank_meta) bound += 256 + t->rank->name_literal.size();
    if (plan.track_meta) bound += 256 + t->name_literal.size() + 2 * t->prefix.size();
    if (flow_name) bound += 320 + 2 * flow_name->size() + t->prefix.size() + partner->prefix.size();
    bound += plan.extra_drawn * (320 + 2 * extra_name_literal_.size() + 128);
    char* p = out_->Reserve(bound);
    const uint64_t mark = out_->bytes();
    const bool was_empty = file_empty_;
    p = WriteMeta(p, t);
    p = Sep(p);
    if (kind == static_cast<uint8_t>(RowKind::kSpan)) {
      p = Put(p, "{\"ph\":\"X\",");
    } else if (counter) {
      p = Put(p, "{\"ph\":\"C\",");
    } else {  // instants and flow end-points
      p = Put(p, t->global ? "{\"ph\":\"i\",\"s\":\"g\"," : "{\"ph\":\"i\",\"s\":\"t\",");
    }
    p = Put(p, t->prefix);
    p = Put(p, ",\"ts\":");
    p = json::WriteMicros(p, SatAdd(ts, -origin_));
    if (kind == static_cast<uint8_t>(RowKind::kSpan)) {
      p = Put(p, ",\"dur\":");
      p = json::WriteMicros(p, b.dur[i]);
    }
    p = Put(p, ",\"name\":");
    p = Put(p, name);
    if (cat) {
      p = Put(p, ",\"cat\":");
      p = Put(p, *cat);
    }
    if (counter) {
      p = Put(p, ",\"args\":{");
      p = Put(p, name);
      *p++ = ':';
      p = json::WriteDouble(p, b.value[i]);
      *p++ = '}';
    } else {
      p = WriteArgs(p, b, i, mask, json_members);
    }
    *p++ = '}';
    uint64_t flow_id = next_flow_id_;
    if (flow_name) {
      const bool partner_first = plan.partner.ts <= ts;
      p = partner_first ? WriteFlowPair(p, flow_id, *partner, plan.partner.ts, *t, ts, *flow_name)
                        : WriteFlowPair(p, flow_id, *t, ts, *partner, plan.partner.ts, *flow_name);
      ++flow_id;
    }
    for (const Plan::ExtraEnd& e : plan.extra) {
      if (e.action != Plan::Extra::kDraw) continue;
      const ExtraPair::End& other = extra_pairs_[e.pair].end[1 - e.end];
      const bool self = o_.extra_flows[e.pair].first == o_.extra_flows[e.pair].second;
      const TrackOut& o = self ? *t : *Track(other.track, t->pid);
      const int64_t other_ts = self ? ts : other.ts;
      p = e.end == 0 ? WriteFlowPair(p, flow_id, *t, ts, o, other_ts, extra_name_literal_)
                     : WriteFlowPair(p, flow_id, o, other_ts, *t, ts, extra_name_literal_);
      ++flow_id;
    }
    out_->Commit(p);
    if (o_.max_file_bytes != 0 && out_->bytes() + footer_reserve_ > o_.max_file_bytes) {
      if (events_in_file_ > 0) {
        // Start the next file and write the row there, with its metadata.
        out_->Rewind(mark);
        file_empty_ = was_empty;
        status_ = ClosePart();
        if (status_.ok()) status_ = OpenPart();
        if (!status_.ok()) return false;
        continue;
      }
      file_oversize_ = true;  // one row alone is larger than the limit
    }
    ApplyPlan(b, i, t, flow);
    events_in_file_++;
    stats_->events_written++;
    return true;
  }
}

void ChromeExporter::RemoveStaleParts() {
  // Parts left by an earlier, larger export to the same name would read as part of this one.
  for (uint64_t k = std::max<uint64_t>(file_index_, 1);; ++k) {
    const std::string path = ChromePartPath(o_.output, k);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) break;
    ::unlink(path.c_str());
  }
}

Status ChromeExporter::Run() {
  TRACEDB_RETURN_IF_ERROR(CheckOptions());
  Status s = LoadJob();
  if (s.ok()) s = ResolveWindows();
  if (s.ok()) s = SelectBlocksByName();
  if (!s.ok()) {
    // The database cannot be read as asked: report it like a bad argument.
    if (s.code() == Status::Code::kInvalidArgument) return s;
    return Status::InvalidArgument(s.message());
  }
  SetupExtraFlows();
  BuildOtherData();
  TRACEDB_RETURN_IF_ERROR(OpenPart());
  s = ExportBlocks();
  if (s.ok()) s = ClosePart();
  if (!s.ok()) {
    // Leave nothing behind: the parts written so far and the one under way.
    if (out_) out_->Abandon();
    out_.reset();
    for (const std::string& f : stats_->files) ::unlink(f.c_str());
    stats_->files.clear();
    return s;
  }
  RemoveStaleParts();
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
