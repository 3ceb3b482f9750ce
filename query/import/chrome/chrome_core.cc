// The generic Chrome trace-event mapping. See chrome_core.h; conventions in docs/importers.md.
#include "query/import/chrome/chrome_core.h"
#include "engine/util/hash.h"
#include "engine/util/parse_number.h"

#include <cstdlib>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/util/json_text.h"
#include "query/import/builder_pipe.h"
#include "query/import/event_sorter.h"
#include "query/import/json/json_scan.h"

namespace tracedb::query::chrome {
namespace {

using json::JsonId;
using json::TraceEvent;

FileId Own(const JsonId& id) {
  FileId f;
  f.present = id.present();
  f.is_int = id.is_int();
  f.num = id.num;
  f.text.assign(id.text);
  return f;
}

// A map key for a pid or tid: type-tagged so that 1 and "1" differ.
void AppendKey(const JsonId& id, std::string* key) {
  key->push_back(id.type == JsonId::Type::kNone ? 'n' : id.is_int() ? 'i' : 's');
  key->append(id.text);
  key->push_back('\x1f');
}

struct PairHash {
  size_t operator()(const std::pair<int64_t, int64_t>& p) const {
    return std::hash<int64_t>()(engine::FibonacciHash(static_cast<uint64_t>(p.first)) ^
                                static_cast<uint64_t>(p.second));
  }
};

struct ProcessInfo {
  std::string name;
  std::string labels;
  std::optional<int64_t> sort_index;
};
struct ThreadInfo {
  std::string name;
  std::string tracedb_kind;  // tracedb's export: the track's kind (lane, gpu…), "" for threads
  std::optional<int64_t> sort_index;
  // tracedb's export: the track's ids in the exported database.
  bool tracedb_ids = false;
  int64_t tracedb_tid = -1, tracedb_pid = -1, tracedb_local_id = -1;
};

// The args keys that tracedb's own Chrome export writes for typed arguments.
bool TypedArgKey(std::string_view key, int64_t v, engine::EventArgs* a) {
  using engine::EventArgs;
  if (key == "bytes") {
    a->bytes = static_cast<uint64_t>(v);
    a->mask |= EventArgs::kBytes;
  } else if (key == "peer") {
    a->peer = static_cast<int32_t>(v);
    a->mask |= EventArgs::kPeer;
  } else if (key == "tag") {
    a->tag = static_cast<int32_t>(v);
    a->mask |= EventArgs::kTag;
  } else if (key == "comm") {
    a->comm = static_cast<uint32_t>(v);
    a->mask |= EventArgs::kComm;
  } else if (key == "seq") {
    a->seq = static_cast<uint64_t>(v);
    a->mask |= EventArgs::kSeq;
  } else if (key == "flow") {
    a->flow = static_cast<uint64_t>(v);
    a->mask |= EventArgs::kFlow;
  } else {
    return false;
  }
  return true;
}

// The sort's memory budget: 64 MB, or TRACEDB_IMPORT_SORT_MB (a whole number of MiB, at least
// 1) where set, which lets a test cross the budget with a small file.
size_t SortBudgetBytes() {
  const char* env = std::getenv("TRACEDB_IMPORT_SORT_MB");
  int64_t mb = 0;
  if (env != nullptr && engine::ParseInt64(env, &mb) && mb >= 1 && mb <= (1 << 20)) {
    return static_cast<size_t>(mb) << 20;
  }
  return size_t{64} << 20;
}

class ChromeFile {
 public:
  ChromeFile(const ChromeFlavor& flavor, const ChromeOptions& options, engine::TraceWriter* w)
      : flavor_(flavor), options_(options), w_(w), pipe_(w), sorter_(SortBudgetBytes()) {}

  Status Run(const std::string& path, FileOutcome* out, std::vector<std::string>* warnings) {
    TRACEDB_ASSIGN_OR_RETURN(std::unique_ptr<json::EventReader> reader,
                             json::EventReader::Open(path));
    reader_ = reader.get();
    TraceEvent ev;
    uint64_t n = 0;
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool more, reader->Next(&ev));
      if (!more) break;
      TRACEDB_RETURN_IF_ERROR(OnEvent(ev));
      if ((++n & 0xffff) == 0 && options_.progress) {
        options_.progress(reader->source().raw_read(), reader->source().file_size());
      }
    }
    DecideRanks();
    TRACEDB_RETURN_IF_ERROR(Feed());
    out->path = path;
    out->format = flavor_.format();
    const bool multi_rank = ranks_seen_.size() > 1;
    out->rank = multi_rank ? -1 : ranks_seen_.empty() ? rank_ : *ranks_seen_.begin();
    out->world_size = world_size_;
    out->local_rank = options_.local_rank;
    out->events = rows_;
    out->first_ts = pipe_.min_ts();
    out->last_end = pipe_.max_end();
    out->skipped = reader->skipped() + bad_;
    out->truncated = reader->truncated_bytes();
    out->unmatched = unmatched_;
    out->ignored = ignored_;
    AddReaderWarnings(*reader, warnings);
    // One file of several ranks (tracedb's own export) writes their ranks rows here; a file of
    // one rank gets its row from RecordFile().
    if (multi_rank) {
      for (int32_t r : ranks_seen_) TRACEDB_RETURN_IF_ERROR(SetRank(r));
    }
    return Status::Ok();
  }

 private:
  Status SetRank(int32_t rank) {
    engine::RankRecord r;
    r.rank = rank;
    r.world_size = world_size_;
    r.local_rank = options_.local_rank;
    r.clock_method = "file";
    r.source = flavor_.format();
    return w_->SetRank(r);
  }

  Status OnEvent(const TraceEvent& ev) {
    const char ph = ev.phase();
    if (ph == 'M') {
      Meta(ev);
      return Status::Ok();
    }
    switch (ph) {
      case 'B':
      case 'E':
      case 'X':
      case 'i':
      case 'I':
      case 'R':
      case 's':
      case 't':
      case 'f':
      case 'b':
      case 'e':
      case 'n':
      case 'S':
      case 'T':
      case 'F':
      case 'C':
        break;
      default:
        if (ev.ph.empty()) {
          ++bad_;
        } else {
          ++ignored_;  // sample, object, context and other phases
        }
        return Status::Ok();
    }
    if (!ev.has_ts) {
      ++bad_;
      return Status::Ok();
    }
    PendingEvent p;
    p.seq = seq_++;
    p.ts = ev.ts;
    json_.clear();
    if (ph == 'C') return CounterEvent(ev, &p);
    p.name = pipe_.Name(ev.name);
    p.cat = pipe_.Cat(ev.cat);
    EventFacts facts;
    if (ph != 'E' && ph != 'e' && ph != 'F') flavor_.Annotate(ev, &facts);
    p.args = facts.args;
    if (ev.bind_id.present()) {
      p.args.flow = FlowId(ev.bind_id);
      p.args.mask |= engine::EventArgs::kFlow;
    }
    if (!ev.args.empty()) AppendArgsJson(ev.args, &json_);
    switch (ph) {
      case 'B':
      case 'E':
        p.op = ph == 'B' ? PendingOp::kBegin : PendingOp::kEnd;
        p.order = kBeginEndOrder;
        p.track = ThreadTrack(ev.pid, ev.tid);
        break;
      case 'X':
        p.op = PendingOp::kComplete;
        p.dur = ev.has_dur ? ev.dur : 0;
        p.order = -p.dur;
        p.track = ThreadTrack(ev.pid, ev.tid);
        break;
      case 'i':
      case 'I':
      case 'R':
        p.op = PendingOp::kInstant;
        // A flow end-point as tracedb's export writes it (an instant with flow_phase).
        if (ph == 'i' && json::FindMember(ev.args, "flow_phase")) p.op = PendingOp::kFlowInstant;
        if (ev.scope == "g") {
          p.track = GlobalTrack(ev.pid, ev.tid);
        } else if (ev.scope == "p") {
          p.track = SpecialTrack(TrackFacts::Type::kProcess, ev.pid, "");
        } else {
          p.track = ThreadTrack(ev.pid, ev.tid);
        }
        break;
      case 's':
      case 't':
      case 'f': {
        if (!ev.id.present()) {
          ++bad_;
          return Status::Ok();
        }
        p.op = PendingOp::kFlow;
        p.track = ThreadTrack(ev.pid, ev.tid);
        p.args.flow = FlowId(ev.id);
        p.args.mask |= engine::EventArgs::kFlow;
        const char phase[4] = {'"', ph, '"', '\0'};
        AddJsonMember(&json_, "flow_phase", phase);
        if (!ev.bp.empty()) {
          std::string bp;
          engine::json::AppendString(&bp, ev.bp);
          AddJsonMember(&json_, "bp", bp);
        }
        break;
      }
      default: {  // async: b/e/n, legacy S/F/T
        if (!ev.id.present()) {
          ++bad_;
          return Status::Ok();
        }
        const bool begin = ph == 'b' || ph == 'S';
        const bool end = ph == 'e' || ph == 'F';
        p.op = begin ? PendingOp::kBegin : end ? PendingOp::kEnd : PendingOp::kInstant;
        if (p.op != PendingOp::kInstant) p.order = kBeginEndOrder;
        std::string label = "async ";
        if (!ev.cat.empty()) label.append(ev.cat).push_back(' ');
        label.append(ev.id.text);
        p.track = SpecialTrack(TrackFacts::Type::kAsync, ev.pid, label);
        break;
      }
    }
    if (facts.gpu) tracks_[p.track].gpu = true;
    if (facts.step) steps_.emplace_back(ev.ts, *facts.step);
    return sorter_.Add(p, json_);
  }

  Status CounterEvent(const TraceEvent& ev, PendingEvent* p) {
    p->op = PendingOp::kCounter;
    const uint32_t cat = pipe_.Cat(ev.cat);
    Status st;
    const bool ok = json::ForEachMember(ev.args, [&](std::string_view key, std::string_view v) {
      double value;
      std::string_view num = v;
      std::optional<std::string> s;
      if (!v.empty() && v.front() == '"') {
        s = json::AsString(v);
        if (!s) return true;
        num = *s;
      }
      if (!json::ParseDouble(num, &value)) return true;  // a non-numeric series is not a counter
      PendingEvent c = *p;
      c.seq = seq_++;
      std::string label(ev.name);
      if (key == ev.name && ev.tid.present()) {
        // One series named as the counter, on a thread (tracedb's own export writes counters
        // so): it stays a counter of that thread's track.
        c.track = ThreadTrack(ev.pid, ev.tid);
      } else {
        label.push_back(' ');
        label.append(key);
        c.track = SpecialTrack(TrackFacts::Type::kCounter, ev.pid, label);
      }
      c.name = pipe_.Name(label);
      c.cat = cat;
      c.value = value;
      st = sorter_.Add(c, {});
      return st.ok();
    });
    if (!ok) ++bad_;
    return st;
  }

  void Meta(const TraceEvent& ev) {
    const std::string_view n = ev.name;
    if (n == "process_name" || n == "process_labels" || n == "process_sort_index") {
      std::string key;
      AppendKey(ev.pid, &key);
      ProcessInfo& p = processes_[key];
      if (n == "process_name") {
        if (auto v = json::FindMember(ev.args, "name")) p.name = json::AsString(*v).value_or("");
      } else if (n == "process_labels") {
        if (auto v = json::FindMember(ev.args, "labels")) {
          p.labels = json::AsString(*v).value_or("");
        }
      } else if (auto v = json::FindMember(ev.args, "sort_index")) {
        p.sort_index = json::AsInt(*v);
      }
    } else if (n == "thread_name" || n == "thread_sort_index") {
      std::string key;
      AppendKey(ev.pid, &key);
      AppendKey(ev.tid, &key);
      ThreadInfo& t = threads_[key];
      if (n == "thread_name") {
        if (auto v = json::FindMember(ev.args, "name")) t.name = json::AsString(*v).value_or("");
        if (auto v = json::FindMember(ev.args, "tracedb_kind")) {
          t.tracedb_kind = json::AsString(*v).value_or("");
        }
        for (const auto& [key, field] :
             {std::pair{"tracedb_tid", &t.tracedb_tid}, std::pair{"tracedb_pid", &t.tracedb_pid},
              std::pair{"tracedb_local_id", &t.tracedb_local_id}}) {
          if (auto v = json::FindMember(ev.args, key)) {
            if (auto n = json::AsInt(*v)) {
              *field = *n;
              t.tracedb_ids = true;
            }
          }
        }
      } else if (auto v = json::FindMember(ev.args, "sort_index")) {
        t.sort_index = json::AsInt(*v);
      }
    } else {
      ++ignored_;  // other metadata (e.g. num_cpus) has no row
    }
  }

  // The local track of the events of thread (pid, tid).
  uint32_t ThreadTrack(const JsonId& pid, const JsonId& tid) {
    if (pid.is_int() && tid.is_int()) {
      const std::pair<int64_t, int64_t> k(pid.num, tid.num);
      if (last_int_ == k && last_int_track_ != 0) return last_int_track_;
      auto [it, inserted] = int_tracks_.try_emplace(k, 0);
      if (inserted) it->second = NewTrack(TrackFacts::Type::kThread, pid, tid, "");
      last_int_ = k;
      last_int_track_ = it->second;
      return it->second;
    }
    key_.assign("T");
    AppendKey(pid, &key_);
    AppendKey(tid, &key_);
    auto [it, inserted] = other_tracks_.try_emplace(key_, 0);
    if (inserted) it->second = NewTrack(TrackFacts::Type::kThread, pid, tid, "");
    return it->second;
  }

  // Global instants: one track per (pid, tid) here; Resolve() gives them all the one "global"
  // track of the rank, except in tracedb's export, where a global track keeps its own name.
  uint32_t GlobalTrack(const JsonId& pid, const JsonId& tid) {
    key_.assign("G");
    AppendKey(pid, &key_);
    AppendKey(tid, &key_);
    auto [it, inserted] = other_tracks_.try_emplace(key_, 0);
    if (inserted) it->second = NewTrack(TrackFacts::Type::kGlobal, pid, tid, "");
    return it->second;
  }

  uint32_t SpecialTrack(TrackFacts::Type type, const JsonId& pid, std::string_view label) {
    key_.assign(1, static_cast<char>('0' + static_cast<int>(type)));
    AppendKey(pid, &key_);
    key_.append(label);
    auto [it, inserted] = other_tracks_.try_emplace(key_, 0);
    if (inserted) it->second = NewTrack(type, pid, JsonId(), label);
    return it->second;
  }

  uint32_t NewTrack(TrackFacts::Type type, const JsonId& pid, const JsonId& tid,
                    std::string_view label) {
    std::string pkey, tkey;
    AppendKey(pid, &pkey);
    tkey = pkey;
    AppendKey(tid, &tkey);
    meta_keys_.emplace_back(std::move(pkey), std::move(tkey));
    TrackFacts f;
    f.type = type;
    f.pid = Own(pid);
    f.tid = Own(tid);
    f.label.assign(label);
    tracks_.push_back(std::move(f));
    return static_cast<uint32_t>(tracks_.size() - 1);
  }

  static std::optional<int64_t> MemberInt(std::optional<std::string_view> obj, const char* key) {
    if (!obj) return std::nullopt;
    auto v = json::FindMember(*obj, key);
    return v ? json::AsInt(*v) : std::nullopt;
  }

  void DecideRanks() {
    const auto dist = reader_->Member("distributedInfo");
    const auto other = reader_->Member("otherData");
    std::optional<int64_t> rank = MemberInt(dist, "rank");
    if (!rank) rank = MemberInt(other, "rank");
    if (rank && *rank >= 0 && *rank <= INT32_MAX) {
      rank_ = static_cast<int32_t>(*rank);
    } else {
      rank_ = options_.rank_hint >= 0 ? options_.rank_hint : 0;
    }
    std::optional<int64_t> ws = MemberInt(dist, "world_size");
    if (!ws) ws = MemberInt(other, "world_size");
    if (ws && *ws > 0 && *ws <= INT32_MAX) world_size_ = static_cast<int32_t>(*ws);
    if (auto base = reader_->Member("baseTimeNanoseconds")) {
      base_ns_ = json::AsInt(*base).value_or(0);
    }
    if (other) {
      auto t = json::FindMember(*other, "tracedb");
      tracedb_export_ = t && *t == "true";
      // tracedb's export writes times from an origin it records (exact µs in doubles).
      if (tracedb_export_) {
        if (auto o = json::FindMember(*other, "ts_origin_ns"))
          base_ns_ += json::AsInt(*o).value_or(0);
      }
    }
    // Fill in what the M records said about each track.
    for (size_t i = 1; i < tracks_.size(); ++i) {
      TrackFacts& t = tracks_[i];
      const auto& [pkey, tkey] = meta_keys_[i];
      if (auto it = processes_.find(pkey); it != processes_.end()) {
        t.process_name = it->second.name;
        t.process_labels = it->second.labels;
        if (it->second.sort_index) t.sort_index = *it->second.sort_index;
      }
      if (t.type != TrackFacts::Type::kThread && t.type != TrackFacts::Type::kGlobal) continue;
      if (auto it = threads_.find(tkey); it != threads_.end()) {
        t.thread_name = it->second.name;
        t.tracedb_kind = it->second.tracedb_kind;
        t.tracedb_ids = it->second.tracedb_ids;
        t.tracedb_tid = it->second.tracedb_tid;
        t.tracedb_pid = it->second.tracedb_pid;
        t.tracedb_local_id = it->second.tracedb_local_id;
        if (it->second.sort_index) t.sort_index = *it->second.sort_index;
      }
    }
  }

  // tracedb's export: one process per rank, named "rank N".
  int32_t ExportRank(const TrackFacts& t) const {
    const std::string& pn = t.process_name;
    int64_t r;
    if (pn.size() > 5 && pn.compare(0, 5, "rank ") == 0 && json::ParseInt64(pn.substr(5), &r) &&
        r >= 0 && r <= INT32_MAX) {
      return static_cast<int32_t>(r);
    }
    if (t.pid.is_int && t.pid.num >= 0 && t.pid.num <= INT32_MAX) {
      return static_cast<int32_t>(t.pid.num);
    }
    return rank_;
  }

  uint32_t Resolve(uint32_t local) {
    TrackFacts& t = tracks_[local];
    engine::TrackSpec spec;
    spec.rank = tracedb_export_ ? ExportRank(t) : rank_;
    spec.sort_index = t.sort_index;
    switch (t.type) {
      case TrackFacts::Type::kThread:
        if (tracedb_export_ && !t.tracedb_kind.empty() && t.tracedb_kind != "thread") {
          // A lane, GPU stream… of the exported database: found again by kind and name.
          spec.kind = t.tracedb_kind;
          spec.name = !t.thread_name.empty() ? t.thread_name : "track " + t.tid.text;
          spec.tid = t.tracedb_tid;
          spec.pid = t.tracedb_pid;
          spec.local_id = t.tracedb_local_id;
        } else if (tracedb_export_) {
          spec.kind = "thread";
          spec.name = !t.thread_name.empty() ? t.thread_name : "thread " + t.tid.text;
          if (t.tracedb_ids) {  // the exported database's own ids
            spec.tid = t.tracedb_tid;
            spec.pid = t.tracedb_pid;
            spec.local_id = t.tracedb_local_id;
          } else {
            spec.tid = t.tid.is_int ? t.tid.num : -1;
            spec.local_id = t.tid.is_int ? t.tid.num : -1;
          }
        } else if (t.pid.is_int && t.tid.is_int) {
          spec.kind = "thread";
          spec.name = !t.thread_name.empty() ? t.thread_name : "thread " + t.tid.text;
          spec.pid = t.pid.num;
          spec.tid = t.tid.num;
          spec.local_id = t.tid.num;
        } else {
          spec.kind = "lane";
          if (!t.thread_name.empty()) {
            spec.name = t.thread_name;
          } else if (t.pid.present) {
            spec.name = t.pid.text + "/" + t.tid.text;
          } else {
            spec.name = t.tid.text;
          }
          spec.pid = t.pid.is_int ? t.pid.num : -1;
          spec.tid = t.tid.is_int ? t.tid.num : -1;
        }
        break;
      case TrackFacts::Type::kAsync:
        spec.kind = "lane";
        spec.name = t.label;
        spec.pid = t.pid.is_int ? t.pid.num : -1;
        break;
      case TrackFacts::Type::kCounter:
        spec.kind = "counter";
        spec.name = t.label;
        spec.pid = t.pid.is_int ? t.pid.num : -1;
        break;
      case TrackFacts::Type::kGlobal:
        spec.kind = "global";
        spec.name = tracedb_export_ && t.tracedb_kind == "global" && !t.thread_name.empty()
                        ? t.thread_name
                        : "global";
        break;
      case TrackFacts::Type::kProcess:
        spec.kind = "lane";
        spec.name = !t.process_name.empty() ? t.process_name : "process " + t.pid.text;
        spec.pid = t.pid.is_int ? t.pid.num : -1;
        break;
    }
    flavor_.NameTrack(t, &spec);
    ranks_seen_.insert(spec.rank);
    return pipe_.Track(spec);
  }

  Status Feed() {
    std::vector<uint32_t> resolved(tracks_.size(), 0);
    std::vector<int64_t> depth(tracks_.size(), 0);
    std::string typed_json;
    Status st = sorter_.Drain([&](const PendingEvent& e, std::string_view json) -> Status {
      uint32_t& track = resolved[e.track];
      if (track == 0) track = Resolve(e.track);
      const int64_t ts = e.ts + base_ns_;
      const engine::EventArgs* args = e.args.mask ? &e.args : nullptr;
      engine::EventArgs typed;
      if (tracedb_export_ && !json.empty()) {
        // Typed arguments come back from the args they were exported as.
        typed = e.args;
        typed_json.clear();
        SplitTypedArgs(json, &typed, &typed_json);
        json = typed_json;
        args = typed.mask ? &typed : nullptr;
      }
      switch (e.op) {
        case PendingOp::kBegin:
          ++depth[e.track];
          pipe_.Begin(track, ts, e.name, e.cat, args, json);
          break;
        case PendingOp::kEnd:
          if (depth[e.track] == 0) {
            ++unmatched_;
            break;
          }
          --depth[e.track];
          ++rows_;
          pipe_.End(track, ts, args, json);
          break;
        case PendingOp::kComplete:
          ++rows_;
          pipe_.Complete(track, ts, e.dur, e.name, e.cat, args, json);
          break;
        case PendingOp::kInstant:
          ++rows_;
          pipe_.Instant(track, ts, e.name, e.cat, args, json);
          break;
        case PendingOp::kFlow:
          // tracedb's export draws its flows as s/f pairs beside the flow rows themselves
          // (kFlowInstant): the drawing is not a row of the exported database.
          if (tracedb_export_) break;
          ++rows_;
          pipe_.Instant(track, ts, e.name, e.cat, args, json, engine::RowKind::kFlow);
          break;
        case PendingOp::kFlowInstant:
          ++rows_;
          pipe_.Instant(track, ts, e.name, e.cat, args, json,
                        tracedb_export_ ? engine::RowKind::kFlow : engine::RowKind::kInstant);
          break;
        case PendingOp::kCounter:
          ++rows_;
          pipe_.Counter(track, ts, e.name, e.cat, e.value);
          break;
      }
      return Status::Ok();
    });
    TRACEDB_RETURN_IF_ERROR(st);
    // The writer is ours again after this.
    TRACEDB_RETURN_IF_ERROR(pipe_.Finish());
    for (int64_t d : depth) unmatched_ += static_cast<uint64_t>(d);
    for (const auto& [ts, step] : steps_) w_->AddStep(rank_, ts + base_ns_, step);
    return Status::Ok();
  }

  // Moves integer members bytes/peer/tag/comm/seq/flow of `json` into *typed; the rest into
  // *rest.
  // tracedb's export writes the typed arguments first, in bit order (bytes, peer, tag, comm, seq,
  // flow), then the row's own JSON members; "tracedb_typed":N first says how many typed ones there
  // are when the JSON's first member has a typed name. So only that leading run is typed: a
  // "bytes" among the JSON members (Kineto's memcpy) stays in the JSON.
  static void SplitTypedArgs(std::string_view json, engine::EventArgs* typed, std::string* rest) {
    std::string members;
    bool leading = true;
    int64_t count = -1;  // typed arguments still to take; -1: the leading run in bit order
    json::ForEachMember(json, [&](std::string_view key, std::string_view v) {
      int64_t n;
      if (leading && members.empty() && count < 0 && key == "tracedb_typed" &&
          json::ParseInt64(v, &n) && n >= 0) {
        count = n;
        return true;
      }
      if (leading && count != 0 && json::ParseInt64(v, &n)) {
        const uint32_t before = typed->mask;
        engine::EventArgs trial = *typed;
        // Bit order: a key whose bit is not above every bit taken so far ends the run.
        if (TypedArgKey(key, n, &trial) && (trial.mask & ~before) > before) {
          *typed = trial;
          if (count > 0) --count;
          return true;
        }
      }
      leading = false;
      members.push_back(members.empty() ? '{' : ',');
      engine::json::AppendString(&members, key);
      members.push_back(':');
      members.append(v);
      return true;
    });
    if (!members.empty()) {
      members.push_back('}');
      rest->append(members);
    }
  }

  const ChromeFlavor& flavor_;
  const ChromeOptions& options_;
  engine::TraceWriter* w_;  // used by pipe_'s thread until pipe_.Finish()
  BuilderPipe pipe_;
  json::EventReader* reader_ = nullptr;
  EventSorter sorter_;
  std::vector<TrackFacts> tracks_{TrackFacts()};  // [0] unused: 0 means "not yet"
  // Per local track: the keys of its process and thread in processes_ / threads_.
  std::vector<std::pair<std::string, std::string>> meta_keys_{{}};
  std::unordered_map<std::pair<int64_t, int64_t>, uint32_t, PairHash> int_tracks_;
  std::unordered_map<std::string, uint32_t> other_tracks_;
  std::pair<int64_t, int64_t> last_int_{0, 0};
  uint32_t last_int_track_ = 0;
  std::unordered_map<std::string, ProcessInfo> processes_;
  std::unordered_map<std::string, ThreadInfo> threads_;
  std::vector<std::pair<int64_t, int64_t>> steps_;
  std::string key_;
  std::string json_;
  uint64_t seq_ = 0;
  uint64_t bad_ = 0;
  uint64_t ignored_ = 0;
  uint64_t unmatched_ = 0;
  uint64_t rows_ = 0;
  int32_t rank_ = 0;
  int32_t world_size_ = 0;
  int64_t base_ns_ = 0;
  bool tracedb_export_ = false;
  std::set<int32_t> ranks_seen_;  // the ranks of the tracks made
};

}  // namespace

uint64_t FlowId(const JsonId& id) {
  if (id.is_int()) return static_cast<uint64_t>(id.num);
  std::string_view t = id.text;
  uint64_t v = 0;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X') && t.size() <= 18) {
    bool ok = true;
    for (char c : t.substr(2)) {
      const int h = (c >= '0' && c <= '9')   ? c - '0'
                    : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                    : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                             : -1;
      if (h < 0) {
        ok = false;
        break;
      }
      v = v * 16 + static_cast<uint64_t>(h);
    }
    if (ok) return v;
  }
  int64_t n;
  if (json::ParseInt64(t, &n)) return static_cast<uint64_t>(n);
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (char c : t) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

Status ImportChromeFile(const std::string& path, const ChromeFlavor& flavor,
                        const ChromeOptions& options, engine::TraceWriter* writer,
                        FileOutcome* outcome, std::vector<std::string>* warnings) {
  ChromeFile file(flavor, options, writer);
  return file.Run(path, outcome, warnings);
}

Status ImportChromeInput(const ImportInput& input, const ChromeFlavor& flavor,
                         engine::TraceWriter* writer, ImportResult* result) {
  ChromeOptions options;
  options.rank_hint = input.rank_hint;
  options.progress = input.progress;
  FileOutcome f;
  TRACEDB_RETURN_IF_ERROR(
      ImportChromeFile(input.path, flavor, options, writer, &f, &result->warnings));
  TRACEDB_RETURN_IF_ERROR(RecordFile(writer, f));
  AddToResult(f, /*first=*/true, result);
  return Status::Ok();
}

}  // namespace tracedb::query::chrome
