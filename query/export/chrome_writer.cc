// Chrome trace JSON writer. See chrome_writer.h; the mapping is documented in docs/export.md.
// Thread safety: one thread at a time.
#include "query/export/chrome_writer.h"
#include "engine/util/coding.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>

#include "engine/util/json_text.h"

namespace tracedb::query {
namespace {

using engine::DecodedBlock;
using engine::EventArgs;
using engine::RowKind;

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

}  // namespace

Status StringCache::Init(engine::Db* db) {
  TRACEDB_ASSIGN_OR_RETURN(st_, db->Prepare("SELECT s FROM strings WHERE id = ?1"));
  return Status::Ok();
}

const StringCache::Entry& StringCache::Load(uint32_t id) {
  Entry e;
  st_.Bind(1, static_cast<int64_t>(id));
  auto row = st_.Step();
  if (!row.ok()) {
    if (status_.ok()) status_ = row.status();
  } else if (*row) {
    e.text = std::string(st_.Text(0));
  }
  st_.Reset();
  engine::json::AppendString(&e.literal, e.text);
  entries_.push_back(std::move(e));
  if (id >= slot_.size()) slot_.resize(std::max<size_t>(id + 1, slot_.size() * 2), 0);
  slot_[id] = static_cast<uint32_t>(entries_.size());
  return entries_.back();
}

ChromeTraceWriter::ChromeTraceWriter(ChromeWriterOptions o, StringCache* strings,
                                     ChromeExportStats* stats)
    : o_(std::move(o)), strings_(strings), stats_(stats) {
  engine::json::AppendString(&extra_name_literal_, o_.extra_flow_name);
  extra_pairs_.resize(o_.extra_flows.size());
  for (size_t i = 0; i < o_.extra_flows.size(); ++i) {
    const auto [from, to] = o_.extra_flows[i];
    extra_by_id_[from].emplace_back(static_cast<uint32_t>(i), 0);
    extra_by_id_[to].emplace_back(static_cast<uint32_t>(i), 1);
    extra_tracks_[static_cast<uint32_t>(static_cast<uint64_t>(from) >> 32)] = true;
    extra_tracks_[static_cast<uint32_t>(static_cast<uint64_t>(to) >> 32)] = true;
  }
}

ChromeTraceWriter::~ChromeTraceWriter() = default;

uint32_t ChromeTraceWriter::columns() const {
  uint32_t c = engine::kColKind | engine::kColName | engine::kColCat | engine::kColTs |
               engine::kColArgs | engine::kColValue;
  if (!extra_pairs_.empty()) c |= engine::kColK;  // event ids
  return c;
}

void ChromeTraceWriter::AddRank(int32_t rank, std::string_view host) {
  RankOut* r = Rank(rank);
  r->name_literal.clear();
  std::string name = "rank " + std::to_string(rank);
  if (!host.empty()) name += " (" + std::string(host) + ")";
  engine::json::AppendString(&r->name_literal, name);
}

ChromeTraceWriter::RankOut* ChromeTraceWriter::Rank(int32_t rank) {
  auto& slot = ranks_[rank];
  if (!slot) {
    slot = std::make_unique<RankOut>();
    slot->rank = rank;
    slot->pid = "\"pid\":" + std::to_string(rank);
    engine::json::AppendString(&slot->name_literal, "rank " + std::to_string(rank));
  }
  return slot.get();
}

void ChromeTraceWriter::AddTrack(uint32_t track, int32_t rank, std::string_view kind,
                                 std::string_view name, int64_t sort_index, TrackIds ids) {
  auto& slot = tracks_[track];
  slot = std::make_unique<TrackOut>();
  TrackOut& t = *slot;
  t.pid = rank;
  t.global = kind == "global";
  t.extra = extra_tracks_.count(track) != 0;
  t.prefix = "\"pid\":" + std::to_string(rank) + ",\"tid\":" + std::to_string(track);
  engine::json::AppendString(&t.name_literal, name);
  if (kind != "thread") engine::json::AppendString(&t.kind_literal, kind);
  for (const auto& [key, v] :
       {std::pair{",\"tracedb_tid\":", ids.tid}, std::pair{",\"tracedb_pid\":", ids.pid},
        std::pair{",\"tracedb_local_id\":", ids.local_id}}) {
    if (v >= 0) t.ids_members.append(key).append(std::to_string(v));
  }
  t.sort_index = sort_index;
  t.rank = Rank(rank);
  last_track_ = nullptr;
}

// A track missing from the tracks table (a damaged database) still gets a thread.
ChromeTraceWriter::TrackOut* ChromeTraceWriter::Track(uint32_t id, int32_t block_rank) {
  auto it = tracks_.find(id);
  if (it != tracks_.end()) return it->second.get();
  AddTrack(id, block_rank, "thread", "track " + std::to_string(id), id, TrackIds());
  return tracks_[id].get();
}

Status ChromeTraceWriter::Start(std::string other_data) {
  other_data_ = std::move(other_data);
  // Room for the members each file adds (,"part":N,"events":N}}) and the array's end.
  footer_reserve_ = other_data_.size() + 128;
  return OpenPart();
}

void ChromeTraceWriter::BeginRank() { FinishRankFlows(); }

char* ChromeTraceWriter::Sep(char* p) {
  if (file_empty_) {
    *p++ = '\n';
    file_empty_ = false;
  } else {
    p = Put(p, ",\n");
  }
  return p;
}

uint64_t ChromeTraceWriter::json_bytes() const {
  return stats_->json_bytes + (out_ ? out_->bytes() : 0);
}

Status ChromeTraceWriter::OpenPart() {
  const std::string path = ChromePartPath(o_.output, file_index_);
  TRACEDB_ASSIGN_OR_RETURN(out_, OutputFile::Create(path, o_.gzip_level));
  out_->Append(std::string("{\"traceEvents\":["));
  events_in_file_ = 0;
  file_empty_ = true;
  file_oversize_ = false;
  return Status::Ok();
}

Status ChromeTraceWriter::ClosePart() {
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

void ChromeTraceWriter::FinishRankFlows() {
  stats_->flows_unmatched += open_flows_.size();
  open_flows_.clear();
}

// Decides what the row brings into the current file: the metadata of its process and thread
// (first event of each in this file) and the flows it completes.
void ChromeTraceWriter::MakePlan(TrackOut* t, uint64_t flow, int64_t id) {
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
}

void ChromeTraceWriter::ApplyPlan(const DecodedBlock& b, size_t i, TrackOut* t, uint64_t flow) {
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

char* ChromeTraceWriter::WriteMeta(char* p, TrackOut* t) {
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
    p = engine::json::WriteInt(p, r.rank);
    p = Put(p, "}}");
  }
  if (plan_.track_meta) {
    p = Sep(p);
    p = Put(p, "{\"ph\":\"M\",");
    p = Put(p, t->prefix);
    p = Put(p, ",\"name\":\"thread_name\",\"args\":{\"name\":");
    p = Put(p, t->name_literal);
    if (!t->kind_literal.empty()) {
      // The track's kind, so that `tracedb import` recreates lanes and GPU streams as such.
      p = Put(p, ",\"tracedb_kind\":");
      p = Put(p, t->kind_literal);
    }
    p = Put(p, t->ids_members);
    p = Put(p, "}}");
    p = Sep(p);
    p = Put(p, "{\"ph\":\"M\",");
    p = Put(p, t->prefix);
    p = Put(p, ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":");
    p = engine::json::WriteInt(p, t->sort_index);
    p = Put(p, "}}");
  }
  return p;
}

// An "s" event at the first end and an "f" event binding to the slice enclosing the second.
char* ChromeTraceWriter::WriteFlowPair(char* p, uint64_t id, const TrackOut& from, int64_t from_ts,
                                       const TrackOut& to, int64_t to_ts,
                                       const std::string& name_literal) {
  p = Sep(p);
  p = Put(p, "{\"ph\":\"s\",\"id\":");
  p = engine::json::WriteUint(p, id);
  *p++ = ',';
  p = Put(p, from.prefix);
  p = Put(p, ",\"ts\":");
  p = engine::json::WriteMicros(p, engine::SaturatingSub(from_ts, o_.origin_ns));
  p = Put(p, ",\"name\":");
  p = Put(p, name_literal);
  p = Put(p, ",\"cat\":\"flow\"}");
  p = Sep(p);
  p = Put(p, "{\"ph\":\"f\",\"bp\":\"e\",\"id\":");
  p = engine::json::WriteUint(p, id);
  *p++ = ',';
  p = Put(p, to.prefix);
  p = Put(p, ",\"ts\":");
  p = engine::json::WriteMicros(p, engine::SaturatingSub(to_ts, o_.origin_ns));
  p = Put(p, ",\"name\":");
  p = Put(p, name_literal);
  p = Put(p, ",\"cat\":\"flow\"}");
  return p;
}

// ,"args":{typed arguments in bit order, then the JSON arguments' members}. When the first JSON
// member has the name of a typed argument, "tracedb_typed":N comes first and says how many typed
// arguments follow, so that `tracedb import` tells them apart (docs/export.md).
char* ChromeTraceWriter::WriteArgs(char* p, const DecodedBlock& b, size_t i, uint32_t mask,
                                   size_t json_members) {
  if ((mask & EventArgs::kAllFields) == 0 && json_members == 0) return p;
  p = Put(p, ",\"args\":{");
  const char* open = p;
  auto key = [&](char* q, const char* k, size_t n) {
    if (q != open) *q++ = ',';
    std::memcpy(q, k, n);
    return q + n;
  };
  if (json_members) {
    for (const char* k :
         {"\"bytes\":", "\"peer\":", "\"tag\":", "\"comm\":", "\"seq\":", "\"flow\":"}) {
      if (args_json_.rfind(k, 0) == 0) {
        p = engine::json::WriteUint(
            key(p, "\"tracedb_typed\":", 16),
            static_cast<uint64_t>(std::popcount(mask & EventArgs::kAllFields)));
        break;
      }
    }
  }
  if (mask & EventArgs::kBytes) p = engine::json::WriteUint(key(p, "\"bytes\":", 8), b.bytes[i]);
  if (mask & EventArgs::kPeer) p = engine::json::WriteInt(key(p, "\"peer\":", 7), b.peer[i]);
  if (mask & EventArgs::kTag) p = engine::json::WriteInt(key(p, "\"tag\":", 6), b.tag[i]);
  if (mask & EventArgs::kComm) p = engine::json::WriteUint(key(p, "\"comm\":", 7), b.comm[i]);
  if (mask & EventArgs::kSeq) p = engine::json::WriteUint(key(p, "\"seq\":", 6), b.seq[i]);
  if (mask & EventArgs::kFlow) p = engine::json::WriteUint(key(p, "\"flow\":", 7), b.flow[i]);
  if (json_members) {
    if (p != open) *p++ = ',';
    p = Put(p, args_json_);
  }
  *p++ = '}';
  return p;
}

bool ChromeTraceWriter::Write(const DecodedBlock& b, size_t i, int32_t rank) {
  if (last_track_ == nullptr || b.track[i] != last_track_id_) {
    last_track_id_ = b.track[i];
    last_track_ = Track(last_track_id_, rank);
  }
  TrackOut* t = last_track_;
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
    if (!engine::json::AppendObjectMembers(&args_json_, b.json[i], &json_members)) {
      stats_->bad_json_args++;
      args_json_ = "\"args_text\":";
      engine::json::AppendString(&args_json_, b.json[i]);
      json_members = 1;
    }
  }
  if (mask & DecodedBlock::kOpen) {  // a span still open when its process ended
    if (json_members) args_json_ += ',';
    args_json_ += "\"open\":1";
    ++json_members;
  }
  const uint64_t flow = (mask & EventArgs::kFlow) ? b.flow[i] : 0;
  const int64_t id =
      t->extra ? static_cast<int64_t>((static_cast<uint64_t>(b.track[i]) << 32) | b.k[i]) : -1;
  const std::string& name = strings_->Literal(b.name[i]);
  const std::string* cat = nullptr;
  if (b.cat[i] != 0) {
    const std::string& c = strings_->Literal(b.cat[i]);
    if (c.size() > 2) cat = &c;  // "" is no category
  }
  const int64_t ts = b.ts[i];
  for (;;) {
    MakePlan(t, flow, id);
    const Plan& plan = plan_;
    const std::string* flow_name = nullptr;
    const TrackOut* partner = nullptr;
    if (plan.flow == Plan::Flow::kPair) {
      partner = Track(plan.partner.track, t->pid);
      // The flow is named after the event that starts it (the earlier end).
      flow_name = plan.partner.ts <= ts ? &strings_->Literal(plan.partner.name) : &name;
    }
    size_t bound = 640 + name.size() + (cat ? cat->size() : 0) + args_json_.size() +
                   t->prefix.size() + engine::json::kMaxDouble;
    if (plan.rank_meta) bound += 256 + t->rank->name_literal.size();
    if (plan.track_meta) {
      bound += 256 + t->name_literal.size() + t->kind_literal.size() + t->ids_members.size() +
               2 * t->prefix.size();
    }
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
    p = engine::json::WriteMicros(p, engine::SaturatingSub(ts, o_.origin_ns));
    if (kind == static_cast<uint8_t>(RowKind::kSpan)) {
      p = Put(p, ",\"dur\":");
      p = engine::json::WriteMicros(p, b.dur[i]);
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
      p = engine::json::WriteDouble(p, b.value[i]);
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

Status ChromeTraceWriter::Finish() {
  for (const ExtraPair& p : extra_pairs_) stats_->extra_flows_missing += p.done ? 0 : 1;
  extra_pairs_.clear();
  FinishRankFlows();
  if (!status_.ok()) return status_;
  if (out_) TRACEDB_RETURN_IF_ERROR(ClosePart());
  // Parts left by an earlier, larger export to the same name would read as part of this one.
  for (uint64_t k = std::max<uint64_t>(file_index_, 1);; ++k) {
    const std::string path = ChromePartPath(o_.output, k);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) break;
    ::unlink(path.c_str());
  }
  return Status::Ok();
}

void ChromeTraceWriter::Abandon() {
  if (out_) out_->Abandon();
  out_.reset();
  for (const std::string& f : stats_->files) ::unlink(f.c_str());
  stats_->files.clear();
}

}  // namespace tracedb::query
