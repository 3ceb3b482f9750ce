// Compaction implementation. See compactor.h; clocks and tables in docs/database-format.md.
#include "engine/compact/compactor.h"

#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "engine/compact/compactor_clocks.h"
#include "engine/db/clock_model.h"
#include "engine/db/db_schema.h"
#include "engine/db/flight_tables.h"
#include "engine/db/trace_builder.h"
#include "engine/segment/segment_dir.h"
#include "engine/segment/segment_reader.h"
#include "engine/segment/segment_writer.h"
#include "engine/util/coding.h"

namespace tracedb::engine {
namespace {

using compaction::BuildClocks;
using compaction::ProcessClock;
using compaction::ProcessKey;
using compaction::StoreRankClocks;

constexpr const char* kStateKey = "compaction.open_spans";
// Instants named so are flight-recorder triggers (recorder.h tracedb_trigger).
constexpr const char* kTriggerPrefix = "tracedb.trigger:";
// Segment events are decoded and compacted this many at a time: the columns of 1,024 events
// (about 26 KB) stay in the core's cache between the decoder and the builder, where a whole
// 64K-event block went through memory.
constexpr size_t kEventChunk = 1024;

struct SourceState {
  uint64_t offset = 0;
  bool finished = false;
};

// ---- Pre-pass: what every file says about its process (META, anchors, sync, comms). ----

class PrepassVisitor : public SegmentVisitor {
 public:
  void OnMeta(const SegmentMeta& m) override {
    if (!meta) meta = m;
  }
  void OnAnchors(const std::vector<AnchorPoint>& p) override {
    anchors.insert(anchors.end(), p.begin(), p.end());
  }
  void OnSync(const std::vector<SyncPoint>& p) override {
    sync.insert(sync.end(), p.begin(), p.end());
  }
  void OnComms(const std::vector<CommInfo>& c) override {
    comms.insert(comms.end(), c.begin(), c.end());
  }
  std::optional<SegmentMeta> meta;
  std::vector<AnchorPoint> anchors;
  std::vector<SyncPoint> sync;
  std::vector<CommInfo> comms;
};

Status StorePrepass(Db* db, const SegmentFileRef& f, const PrepassVisitor& v) {
  if (v.meta) {
    const SegmentMeta& m = *v.meta;
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt p, db->Prepare("INSERT OR REPLACE INTO processes(rank, pid, host, command, clock, "
                            "tsc_hz) VALUES(?1, ?2, ?3, ?4, ?5, ?6)"));
    p.Bind(1, f.rank)
        .Bind(2, static_cast<int64_t>(f.pid))
        .Bind(3, m.host)
        .Bind(4, m.command)
        .Bind(5, m.clock == ClockKind::kTsc ? "tsc" : "monotonic")
        .Bind(6, static_cast<int64_t>(m.tsc_hz));
    TRACEDB_RETURN_IF_ERROR(p.Run());
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt r, db->Prepare("INSERT INTO ranks(rank, host, world_size, local_rank, source) "
                            "VALUES(?1, ?2, ?3, ?4, 'segments') ON CONFLICT(rank) DO UPDATE SET "
                            "host = excluded.host, world_size = excluded.world_size, "
                            "local_rank = excluded.local_rank"));
    TRACEDB_RETURN_IF_ERROR(
        r.Bind(1, f.rank).Bind(2, m.host).Bind(3, m.world_size).Bind(4, m.local_rank).Run());
  }
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt a, db->Prepare("INSERT OR IGNORE INTO clock_knots(rank, pid, local_ns, common_ns, "
                          "uncertainty_ns, kind) VALUES(?1, ?2, ?3, ?4, ?5, 'anchor')"));
  for (const AnchorPoint& p : v.anchors) {
    TRACEDB_RETURN_IF_ERROR(a.Bind(1, f.rank)
                                .Bind(2, static_cast<int64_t>(f.pid))
                                .Bind(3, p.clock_ns)
                                .Bind(4, p.realtime_ns)
                                .Bind(5, p.uncertainty_ns)
                                .Run());
  }
  if (!v.sync.empty()) {
    TRACEDB_RETURN_IF_ERROR(EnsureTable(db, "sync_points"));
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt s, db->Prepare("INSERT OR IGNORE INTO sync_points(rank, pid, ref_rank, local_ns, "
                            "offset_ns, uncertainty_ns) VALUES(?1, ?2, ?3, ?4, ?5, ?6)"));
    for (const SyncPoint& p : v.sync) {
      TRACEDB_RETURN_IF_ERROR(s.Bind(1, f.rank)
                                  .Bind(2, static_cast<int64_t>(f.pid))
                                  .Bind(3, p.ref_rank)
                                  .Bind(4, p.local_ns)
                                  .Bind(5, p.offset_ns)
                                  .Bind(6, p.uncertainty_ns)
                                  .Run());
    }
  }
  // Each distinct member list is stored once (comm_groups, found again by its text: a re-run
  // or a later rank reuses the group); rank_comms points at it. `comms` is their view.
  if (v.comms.empty()) return Status::Ok();
  TRACEDB_RETURN_IF_ERROR(EnsureTable(db, "comm_groups"));
  TRACEDB_RETURN_IF_ERROR(EnsureTable(db, "rank_comms"));
  TRACEDB_ASSIGN_OR_RETURN(Stmt g,
                           db->Prepare("INSERT INTO comm_groups(size, members) VALUES(?1, ?2) "
                                       "ON CONFLICT(members) DO NOTHING"));
  TRACEDB_ASSIGN_OR_RETURN(Stmt gid,
                           db->Prepare("SELECT group_id FROM comm_groups WHERE members = ?1"));
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt c, db->Prepare("INSERT OR REPLACE INTO rank_comms(rank, comm, size, rank_in_comm, "
                          "group_id) VALUES(?1, ?2, ?3, ?4, ?5)"));
  for (const CommInfo& ci : v.comms) {
    c.Bind(1, f.rank).Bind(2, ci.comm).Bind(3, ci.size).Bind(4, ci.rank_in_comm);
    if (ci.members.empty()) {
      c.BindNull(5);
    } else {
      std::string members;
      for (size_t i = 0; i < ci.members.size(); ++i) {
        if (i) members += ",";
        members += std::to_string(ci.members[i]);
      }
      TRACEDB_RETURN_IF_ERROR(
          g.Bind(1, static_cast<int64_t>(ci.members.size())).Bind(2, members).Run());
      gid.Bind(1, members);
      TRACEDB_ASSIGN_OR_RETURN(bool found, gid.Step());
      if (!found) {
        gid.Reset();
        return Status::Internal(f.path + ": comm " + std::to_string(ci.comm) +
                                ": its member group was not stored in comm_groups");
      }
      c.Bind(5, gid.Int(0));
      gid.Reset();
    }
    TRACEDB_RETURN_IF_ERROR(c.Run());
  }
  return Status::Ok();
}

// ---- The events pass ----

class EventsVisitor : public SegmentVisitor {
 public:
  EventsVisitor(TraceWriter* w, TraceBuilder* b, const ClockModel* model, int32_t rank,
                uint32_t pid)
      : w_(w), b_(b), model_(model), rank_(rank), pid_(pid) {
    for (uint8_t c = 0; c < kNumCategories; ++c) cats_[c] = w->Intern(CategoryName(c));
  }

  void OnStrings(uint32_t first, const std::vector<std::string>& s) override {
    // A writer numbers its strings from 1 without gaps; a block far past the known ones is
    // damage, ignored rather than allowed to size the table (its names read "<unknown …>").
    if (first - 1 > strings_.size() + kMaxStringGap) return;
    if (strings_.size() < first - 1 + s.size()) strings_.resize(first - 1 + s.size());
    for (size_t i = 0; i < s.size(); ++i) strings_[first - 1 + i] = s[i];
  }
  void OnLanes(const std::vector<LaneInfo>& lanes) override {
    for (const LaneInfo& l : lanes) lane_names_[l.lane] = l.name;
  }
  void OnThreads(const std::vector<ThreadInfo>& threads) override {
    for (const ThreadInfo& t : threads) threads_[t.index] = t;
  }
  void OnStats(const std::vector<DropCount>& drops) override {
    if (!count_stats_) return;
    for (const DropCount& d : drops) {
      w_->AddStat("dropped", rank_, static_cast<int64_t>(d.dropped));
      dropped += d.dropped;
    }
  }
  void OnStepStats(const std::vector<StepStat>& rows) override {
    if (status_.ok()) status_ = InsertStepStats(w_->db(), rank_, rows, *model_, strings_);
  }
  // The events of a block, as the decoder's columns (ScanOptions::event_columns): runs of
  // complete events are read from the arrays straight into the builder's RunEvents.
  void OnEventColumns(uint32_t thread, const EventColumns& c) override {
    if (!status_.ok() || c.n == 0) return;
    // The process was seen at its last event's start (a thread's events come in start order).
    last_seen = std::max(last_seen, model_->Map(c.ts[c.n - 1]));
    const uint32_t thread_track = ThreadTrack(thread);
    constexpr uint8_t kCompleteKind = static_cast<uint8_t>(EventKind::kComplete);
    const uint8_t* const kinds = c.kind;
    const uint8_t* const cats = c.cat;
    const int64_t* const tss = c.ts.data();
    const uint32_t* const names = c.name.data();
    const uint32_t* const lanes = c.lane.data();
    const int64_t* const ints = c.ints.data();
    size_t ii = 0, vi = 0, ai = 0;  // the next entry of the sparse columns
    size_t i = 0;
    while (i < c.n) {
      const uint8_t k = kinds[i];
      if ((k & kKindMask) == kCompleteKind) {
        // A run of complete events of one track goes to the builder in one call
        // (TraceBuilder::CompleteRun): a call and a Status per event cost about a tenth of
        // compaction. The clock and names are mapped in the same order as one by one. (Runs
        // were of one category too: a Horovod lane, whose tensors' phases and collectives
        // alternate, then made runs of 3.7 events on average on the billion bench.)
        const uint32_t lane = lanes[i];
        const uint32_t track = lane == 0 ? thread_track : LaneTrack(lane);
        // The run's events, with their times mapped by the clock's offset at the first one
        // (the common case: a clock of rate 1 over the run). The run's local time range is
        // checked after (durations are >= 0: the decoder checks them): when one offset does not
        // map all of it, the run is mapped again, by its clock segment's arithmetic when it lies
        // in one (AffineOver: a clock of another rate), else with Map, event by event.
        int64_t off = 0;
        const bool by_offset = model_->OffsetOver(tss[i], tss[i], &off);
        // The run's extent first, then its events in a loop of their own: in one loop, the
        // values both need did not fit in registers and the loop kept its pointers (the run's
        // next entry among them) on the stack, loaded and stored for every event.
        const size_t limit = std::min(c.n, i + kRunEvents);
        size_t end = i + 1;
        bool any_args = (k & kKindHasArgs) != 0;
        while (end < limit && (kinds[end] & kKindMask) == kCompleteKind && lanes[end] == lane) {
          any_args |= (kinds[end] & kKindHasArgs) != 0;
          ++end;
        }
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        {
          const size_t n = end - i;
          const int64_t* const t = tss + i;
          const int64_t* const d = ints + ii;
          const uint32_t* const nm = names + i;
          const uint8_t* const sc = cats + i;
          const uint32_t* const cat_ids = cats_;
          TraceBuilder::RunEvent* const run = run_;
          // The name cache in locals (a store into the run could alias the vector's
          // pointers); reloaded after a miss, which may grow it.
          const uint32_t* cache = name_cache_.data();
          size_t cache_size = name_cache_.size();
          for (size_t j = 0; j < n; ++j) {
            const int64_t t0 = t[j];
            const int64_t t1 = SaturatingAdd(t0, d[j]);
            lo = std::min(lo, t0);
            hi = std::max(hi, t1);
            const uint32_t local = nm[j];
            uint32_t name = local < cache_size ? cache[local] : 0;
            if (name == 0) [[unlikely]] {
              name = NameMiss(local);
              cache = name_cache_.data();
              cache_size = name_cache_.size();
            }
            TraceBuilder::RunEvent& r = run[j];
            // Wrapping (unsigned) addition: when the offset does not hold for the run (checked
            // below), these times are replaced, and a hostile t0 must not overflow meanwhile.
            r.ts = static_cast<int64_t>(static_cast<uint64_t>(t0) + static_cast<uint64_t>(off));
            r.dur = t1 - t0;
            r.name = name;
            r.cat = cat_ids[sc[j] < kNumCategories ? sc[j] : 0];
            r.args = nullptr;
          }
          if (any_args) [[unlikely]] {
            for (size_t j = 0; j < n; ++j) {
              if (kinds[i + j] & kKindHasArgs) run[j].args = &c.args[ai++];
            }
          }
        }
        const size_t n = end - i;
        int64_t range_off;
        const bool offset_holds =
            by_offset && model_->OffsetOver(lo, hi, &range_off) && range_off == off;
        ClockModel::Affine affine;
        if (!offset_holds && model_->AffineOver(lo, hi, &affine)) {
          // A clock of another rate (drift) over one of its segments, with Map's own arithmetic.
          // Durations are >= 0 and the map is monotonic: no end maps before its start.
          for (size_t j = 0; j < n; ++j) {
            const int64_t t0 = tss[i + j];
            const int64_t ts = affine.At(t0);
            TraceBuilder::RunEvent& r = run_[j];
            r.ts = ts;
            r.dur = affine.At(SaturatingAdd(t0, ints[ii + j])) - ts;
          }
        } else if (!offset_holds) {
          for (size_t j = 0; j < n; ++j) {  // names and arguments are set already
            const int64_t t0 = tss[i + j];
            const int64_t ts = model_->Map(t0);
            TraceBuilder::RunEvent& r = run_[j];
            r.ts = ts;
            r.dur = SaturatingSub(model_->Map(SaturatingAdd(t0, ints[ii + j])), ts);
          }
        }
        ii += n;
        i = end;
        count.events += n;
        const Status s = b_->CompleteRun(track, run_, n);
        if (!s.ok()) {
          status_ = s;
          return;
        }
        continue;
      }
      const auto kind = static_cast<EventKind>(k & kKindMask);
      const uint32_t lane = lanes[i];
      const uint32_t track = lane == 0 ? thread_track : LaneTrack(lane);
      const int64_t ts = model_->Map(tss[i]);
      const uint32_t cat = cats_[cats[i] < kNumCategories ? cats[i] : 0];
      const EventArgs* args = (k & kKindHasArgs) ? &c.args[ai++] : nullptr;
      Status s;
      switch (kind) {
        case EventKind::kBegin:
          ++count.events;
          s = b_->Begin(track, ts, Name(names[i]), cat, args);
          break;
        case EventKind::kEnd:
          ++count.ends;
          s = b_->End(track, ts, args);
          break;
        case EventKind::kInstant: {
          ++count.events;
          const uint32_t name = Name(names[i]);
          s = b_->Instant(track, ts, name, cat, args);
          if (s.ok() && !trigger_names_.empty()) {
            auto t = trigger_names_.find(name);
            if (t != trigger_names_.end()) s = InsertTrigger(w_->db(), rank_, ts, t->second);
          }
          break;
        }
        case EventKind::kCounter:
          ++count.events;
          s = b_->Counter(track, ts, Name(names[i]), cat, c.values[vi++]);
          break;
        case EventKind::kComplete:  // taken above
          break;
        case EventKind::kStep:
          ++count.steps;
          w_->AddStep(rank_, ts, ints[ii++]);
          break;
      }
      if (!s.ok()) {
        status_ = s;
        return;
      }
      ++i;
    }
  }

  void set_count_stats(bool v) { count_stats_ = v; }
  const Status& status() const { return status_; }
  SegmentEventCount count;  // as `tracedb info` counts them (segment_dir.h)
  uint64_t dropped = 0;
  int64_t last_seen = INT64_MIN;  // common clock: the latest event start read

 private:
  static constexpr size_t kMaxStringGap = 1u << 20;
  static constexpr size_t kRunEvents = 256;

  // The string id of a segment-local name id: a cache hit inline, the rest out of line.
  uint32_t Name(uint32_t local) {
    if (local < name_cache_.size() && name_cache_[local] != 0) return name_cache_[local];
    return NameMiss(local);
  }
  [[gnu::noinline]] uint32_t NameMiss(uint32_t local) {
    if (local == 0) return w_->Intern("");
    // Ids past the catalog (damage) are few: a map, so that no file sizes the cache.
    uint32_t* slot;
    if (local <= strings_.size() + kMaxStringGap) {
      if (local >= name_cache_.size()) name_cache_.resize(local + 1, 0);
      slot = &name_cache_[local];
    } else {
      slot = &unknown_names_[local];
    }
    uint32_t& id = *slot;
    if (id == 0) {
      id = local <= strings_.size() ? w_->Intern(strings_[local - 1])
                                    : w_->Intern("<unknown name " + std::to_string(local) + ">");
      // A flight-recorder trigger's instant (recorder.h tracedb_trigger): also a `triggers` row.
      if (local <= strings_.size() && strings_[local - 1].rfind(kTriggerPrefix, 0) == 0) {
        trigger_names_[id] = strings_[local - 1].substr(std::strlen(kTriggerPrefix));
      }
    }
    return id;
  }
  uint32_t ThreadTrack(uint32_t index) {
    auto it = thread_tracks_.find(index);
    if (it != thread_tracks_.end()) return it->second;
    TrackSpec spec;
    spec.rank = rank_;
    spec.kind = "thread";
    spec.pid = pid_;
    spec.local_id = index;
    auto t = threads_.find(index);
    if (t != threads_.end()) {
      spec.tid = t->second.os_tid;
      spec.name = t->second.name;
    }
    if (spec.name.empty()) spec.name = "thread " + std::to_string(spec.tid >= 0 ? spec.tid : index);
    spec.sort_index = index;
    const uint32_t id = w_->Track(spec);
    thread_tracks_[index] = id;
    return id;
  }
  uint32_t LaneTrack(uint32_t lane) {
    // A thread's events usually alternate between its own track and one lane: the last lane's
    // track without a map walk.
    if (lane == last_lane_ && last_lane_track_ != 0) return last_lane_track_;
    last_lane_ = lane;
    auto it = lane_tracks_.find(lane);
    if (it != lane_tracks_.end()) return last_lane_track_ = it->second;
    TrackSpec spec;
    spec.rank = rank_;
    spec.kind = "lane";
    auto n = lane_names_.find(lane);
    if (n != lane_names_.end() && n->second >= 1 && n->second <= strings_.size()) {
      spec.name = strings_[n->second - 1];
    } else {
      spec.name = "lane " + std::to_string(lane);
    }
    spec.sort_index = 1000000 + lane;
    const uint32_t id = w_->Track(spec);
    lane_tracks_[lane] = id;
    return last_lane_track_ = id;
  }

  TraceWriter* w_;
  TraceBuilder* b_;
  const ClockModel* model_;
  int32_t rank_;
  uint32_t pid_;
  bool count_stats_ = false;
  Status status_;
  uint32_t cats_[kNumCategories];
  TraceBuilder::RunEvent run_[kRunEvents];  // OnEvents' run of complete events
  std::vector<std::string> strings_;
  std::vector<uint32_t> name_cache_;
  std::map<uint32_t, uint32_t> unknown_names_;
  std::map<uint32_t, std::string> trigger_names_;  // string id -> the trigger's reason
  std::map<uint32_t, uint32_t> lane_names_;
  std::map<uint32_t, ThreadInfo> threads_;
  std::map<uint32_t, uint32_t> thread_tracks_;
  std::map<uint32_t, uint32_t> lane_tracks_;
  uint32_t last_lane_ = 0, last_lane_track_ = 0;  // LaneTrack's last answer (track 0: none)
};

// This host's name, as the recorder writes it in META blocks by default (gethostname).
std::string LocalHostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "";
  return host;
}

// Is process `pid`, recorded on this host, gone? (kill(pid, 0): ESRCH.) A pid reused since
// reads as alive: its spans then wait for a later pass or `finish`.
bool LocalProcessGone(uint32_t pid) {
  if (pid == 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

int64_t FileAgeSeconds(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(::time(nullptr)) - static_cast<int64_t>(st.st_mtime);
}

}  // namespace

StatusOr<CompactStats> Compact(TraceWriter* w, const CompactOptions& options,
                               const std::function<void(const CompactProgress&)>& progress) {
  Db* db = w->db();
  CompactStats stats;

  // Every segment file of every input, rank 0 first (it is the clock reference).
  std::vector<SegmentFileRef> files;
  // A shard reads rank 0's files too (pass 1 only): they define the common clock.
  std::function<bool(int32_t)> listed;
  if (options.take_rank) {
    listed = [&options](int32_t rank) { return rank == 0 || options.take_rank(rank); };
  }
  for (const std::string& dir : options.inputs) {
    TRACEDB_ASSIGN_OR_RETURN(std::vector<SegmentFileRef> f, ListSegmentFiles(dir, listed));
    for (SegmentFileRef& ref : f) {
      if (!listed || listed(ref.rank)) files.push_back(std::move(ref));
    }
  }
  auto taken = [&](int32_t rank) { return !options.take_rank || options.take_rank(rank); };
  std::sort(files.begin(), files.end(), [](const SegmentFileRef& a, const SegmentFileRef& b) {
    return std::tie(a.rank, a.pid, a.seq, a.path) < std::tie(b.rank, b.pid, b.seq, b.path);
  });
  stats.files = files.size();
  // The last file of each process (the highest seq): when it is taken whole and the process is
  // gone, the process's spans still open are written open (compactor.h, "Open spans").
  std::map<ProcessKey, const SegmentFileRef*> last_file;
  for (const SegmentFileRef& f : files) {
    if (!taken(f.rank)) continue;
    const SegmentFileRef*& slot = last_file[{f.rank, f.pid}];
    if (slot == nullptr || f.seq > slot->seq) slot = &f;
  }
  std::map<ProcessKey, int64_t> ended;  // processes over -> when last seen (common clock)
  std::map<ProcessKey, int64_t> seen;   // every process read -> the latest event start read

  std::map<std::string, SourceState> sources;
  {
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st,
        db->Prepare("SELECT path, offset, finished FROM sources WHERE format = 'segment'"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      sources[std::string(st.Text(0))] =
          SourceState{static_cast<uint64_t>(st.Int(1)), st.Int(2) != 0};
    }
  }
  std::vector<const SegmentFileRef*> work;
  std::vector<const SegmentFileRef*> work_clock_only;
  uint64_t bytes_total = 0;
  for (const SegmentFileRef& f : files) {
    if (!taken(f.rank)) {
      work_clock_only.push_back(&f);  // rank 0's file in another shard: its anchors only
      continue;
    }
    const SourceState& s = sources[f.path];
    if (s.finished) continue;
    // A file read to its end but not finished is taken again (to finish it, nothing new to
    // read) when its process may be over: with `finish`, or when its writer is gone. That is
    // what writes the spans its process left open (compactor.h, "Open spans").
    if (s.offset >= f.size && !options.finish && ProbeSegmentWriter(f.path) != WriterState::kGone) {
      // Still written, nothing new since the last pass (a quiet job between flushes): it waits
      // all the same. (Uncounted, a `compact --watch` whose passes came faster than the
      // recorder's flushes found every file "closed and taken" and ended beside a live job.)
      stats.files_waiting++;
      continue;
    }
    work.push_back(&f);
    bytes_total += f.size - std::min(s.offset, f.size);
  }
  // Nothing new to read. With `finish`, spans a previous pass left pending (their process was
  // alive then) are still to be written open, below.
  if (work.empty()) {
    if (!options.finish) return stats;
    TRACEDB_ASSIGN_OR_RETURN(
        int64_t pending,
        db->QueryInt("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'open_spans'", 0));
    if (pending <= 0) return stats;
  }
  // Pass 1 reads these too; pass 2 goes over `work` only.
  std::vector<const SegmentFileRef*> prepass_files = work_clock_only;
  prepass_files.insert(prepass_files.end(), work.begin(), work.end());

  // Is each file's writer still running? Asked before any byte is read: a writer seen gone has
  // written its last byte, so the file can be taken whole up to the size read below. A writer
  // that dies after this check is found gone by the next pass ("Writer lock").
  std::map<std::string, WriterState> writers;
  for (const SegmentFileRef* f : prepass_files) writers[f->path] = ProbeSegmentWriter(f->path);

  // Pass 1: what each file says about its process and clock (idempotent inserts).
  // It also tells where each file ends and whether its writer closed it.
  std::map<std::string, StatusOr<SegmentScan>> probes;
  std::map<std::string, std::string> file_host;  // path -> the host its META names
  const std::string this_host = LocalHostName();
  TRACEDB_RETURN_IF_ERROR(w->BeginBatch());
  std::set<int32_t> clocks_stored;  // ranks whose clock row this run has written
  // Every file of both passes is read into these buffers (engine/util/read_buffer.h).
  ScanBuffers scan_buffers;
  for (const SegmentFileRef* f : prepass_files) {
    // The EVENTS blocks, nearly all of a file, are passed over unread (pass 2 reads and checks
    // them); a file in which that scan meets a block not whole and valid (a damaged one, a torn
    // tail) is scanned again with every block checked, as this pass did before.
    PrepassVisitor v;
    ScanOptions o;
    o.events = false;
    o.skip_unread_events = true;
    o.buffers = &scan_buffers;
    StatusOr<SegmentScan> scan = ScanSegment(f->path, &v, o);
    if (scan.ok() && scan->skip_stopped) {
      v = PrepassVisitor();
      o.skip_unread_events = false;
      scan = ScanSegment(f->path, &v, o);
    }
    if (scan.ok()) TRACEDB_RETURN_IF_ERROR(StorePrepass(db, *f, v));
    // A lock seen free says nothing about a writer on another host (a filesystem whose locks
    // are local to each node, e.g. Lustre's localflock): only this host's writers are judged.
    WriterState& writer = writers[f->path];
    if (writer == WriterState::kGone && v.meta && !v.meta->host.empty() &&
        v.meta->host != this_host) {
      writer = WriterState::kUnknown;
    }
    if (v.meta) file_host[f->path] = v.meta->host;
    probes.emplace(f->path, std::move(scan));
  }
  TRACEDB_RETURN_IF_ERROR(w->CommitBatch());
  TRACEDB_ASSIGN_OR_RETURN(auto clocks, BuildClocks(db));
  std::set<int32_t> ranks_with_clock;
  for (const auto& entry : clocks) ranks_with_clock.insert(entry.first.first);
  const size_t clock_ranks = ranks_with_clock.size();

  // Pass 2: the events, one transaction per batch of files. A transaction holds whole files:
  // their blocks with their `sources` progress and the saved open spans, so a kill leaves the
  // database as after the last whole batch. Batches end at kBatchFiles files, kBatchEvents
  // events (the rows waiting for their blocks stay few MB) or kBatchTime, whichever comes
  // first: one commit (an fsync) per file made a job of thousands of small rank files wait
  // on the disk (docs/bench-compaction.md "4,096 ranks").
  constexpr size_t kBatchFiles = 64;
  constexpr uint64_t kBatchEvents = 1u << 17;
  constexpr auto kBatchTime = std::chrono::seconds(1);
  TraceBuilder builder(w);
  TRACEDB_RETURN_IF_ERROR(builder.LoadState(kStateKey));
  uint64_t bytes_done = 0;
  const uint64_t rows_at_start = w->rows_written();
  bool batch_open = false;
  size_t batch_files = 0;
  uint64_t batch_events = 0;
  auto batch_start = std::chrono::steady_clock::now();
  // Writes the open spans of the processes found over (in the last batch's transaction, with
  // the progress that made them over). A lane track (no process) ends with its rank: when every
  // process of the rank that this run knows of is over.
  auto close_ended = [&]() -> Status {
    if (ended.empty()) return Status::Ok();
    std::map<int32_t, int64_t> rank_end;  // ranks whose every known process ended -> last seen
    std::set<int32_t> rank_alive;
    for (const auto& [key, f] : last_file) {
      auto e = ended.find(key);
      if (e == ended.end()) {
        rank_alive.insert(key.first);
      } else {
        int64_t& r = rank_end.try_emplace(key.first, INT64_MIN).first->second;
        r = std::max(r, e->second);
      }
    }
    for (uint32_t track : builder.TracksWithOpenSpans()) {
      const TrackSpec& spec = w->TrackSpecOf(track);
      int64_t end = INT64_MIN;
      if (spec.pid >= 0) {
        auto e = ended.find({spec.rank, static_cast<uint32_t>(spec.pid)});
        if (e == ended.end()) continue;
        end = e->second;
      } else {
        auto e = rank_end.find(spec.rank);
        if (e == rank_end.end() || rank_alive.count(spec.rank)) continue;
        end = e->second;
      }
      TRACEDB_ASSIGN_OR_RETURN(uint64_t n, builder.CloseOpenSpans(track, end));
      stats.open_spans_closed += n;
    }
    return Status::Ok();
  };
  // Counts file `i` into the open batch and commits the batch when it is full or the last.
  auto file_done = [&](size_t i) -> Status {
    ++batch_files;
    if (i + 1 < work.size() && batch_files < kBatchFiles && batch_events < kBatchEvents &&
        std::chrono::steady_clock::now() - batch_start < kBatchTime) {
      return Status::Ok();
    }
    if (i + 1 == work.size()) TRACEDB_RETURN_IF_ERROR(close_ended());
    // The open spans, once per transaction (they walk every track of the job).
    TRACEDB_RETURN_IF_ERROR(builder.SaveState(kStateKey));
    TRACEDB_RETURN_IF_ERROR(w->SetMeta("open_spans", std::to_string(builder.open_spans())));
    TRACEDB_RETURN_IF_ERROR(w->CommitBatch());
    batch_open = false;
    stats.rows = w->rows_written() - rows_at_start;
    return Status::Ok();
  };
  for (size_t i = 0; i < work.size(); ++i) {
    const SegmentFileRef& f = *work[i];
    const SourceState prev = sources[f.path];
    if (progress) {
      progress(CompactProgress{i + 1, work.size(), f.path, bytes_done, bytes_total, stats.rows});
    }
    if (!batch_open) {
      TRACEDB_RETURN_IF_ERROR(w->BeginBatch());
      batch_open = true;
      batch_files = 0;
      batch_events = 0;
      batch_start = std::chrono::steady_clock::now();
    }
    ClockModel identity;
    auto clock_it = clocks.find({f.rank, f.pid});
    const ClockModel* model = clock_it != clocks.end() ? &clock_it->second.model : &identity;
    EventsVisitor v(w, &builder, model, f.rank, f.pid);

    // The catalog before the resume point, then everything new.
    ScanOptions head;
    head.events = false;
    head.end_offset = prev.offset;
    head.buffers = &scan_buffers;
    const StatusOr<SegmentScan>& probe_or = probes.at(f.path);
    StatusOr<SegmentScan> scan = probe_or.ok() ? ScanSegment(f.path, &v, head) : probe_or;
    if (!scan.ok()) {
      stats.unreadable_files++;
      if (stats.problems.size() < 32) stats.problems.push_back(scan.status().message());
      w->AddStat("unreadable_files", f.rank, 1);
      TRACEDB_ASSIGN_OR_RETURN(
          Stmt st,
          db->Prepare("INSERT OR REPLACE INTO sources(path, format, rank, pid, offset, "
                      "size, finished, events) VALUES(?1, 'segment', ?2, ?3, 0, ?4, 1, 0)"));
      TRACEDB_RETURN_IF_ERROR(st.Bind(1, f.path)
                                  .Bind(2, f.rank)
                                  .Bind(3, static_cast<int64_t>(f.pid))
                                  .Bind(4, static_cast<int64_t>(f.size))
                                  .Run());
      TRACEDB_RETURN_IF_ERROR(file_done(i));
      continue;
    }
    // Where to stop: the whole file when it is complete (closed, its writer gone, or the caller
    // says so), else its last anchor. The file's age decides only where the lock cannot.
    const SegmentScan& probe = *probe_or;
    const WriterState writer = writers.at(f.path);
    const bool dead_writer = !probe.closed && writer == WriterState::kGone;
    const bool whole =
        probe.closed || options.finish || dead_writer ||
        (writer == WriterState::kUnknown && FileAgeSeconds(f.path) >= options.stale_after_s);
    if (dead_writer) {
      stats.files_dead_writer++;
      w->AddStat("dead_writer_files", f.rank, 1);
    }
    const uint64_t stop = whole ? probe.file_size : std::max(probe.anchor_end, prev.offset);
    ScanOptions body;
    body.start_offset = prev.offset;
    body.end_offset = stop;
    body.event_chunk = kEventChunk;
    body.event_columns = true;
    body.buffers = &scan_buffers;
    v.set_count_stats(true);
    StatusOr<SegmentScan> got = ScanSegment(f.path, &v, body);
    if (!got.ok()) return got.status();
    TRACEDB_RETURN_IF_ERROR(v.status().WithContext(f.path));
    const uint64_t new_offset = whole ? probe.file_size : got->end_offset;
    const bool finished = whole;
    if (!whole) stats.files_waiting++;
    stats.corrupt_blocks += got->corrupt_blocks;
    if (got->corrupt_blocks)
      w->AddStat("corrupt_blocks", f.rank, static_cast<int64_t>(got->corrupt_blocks));
    if (whole && probe.torn_tail_bytes > 0) {
      stats.torn_tails++;
      w->AddStat("torn_tails", f.rank, 1);
      w->AddStat("torn_bytes", f.rank, static_cast<int64_t>(probe.torn_tail_bytes));
    }
    for (const std::string& p : got->problems) {
      if (stats.problems.size() < 32) stats.problems.push_back(f.path + ": " + p);
    }
    // Is the process over? Only its last file can say (compactor.h, "Open spans").
    const ProcessKey pkey{f.rank, f.pid};
    int64_t& pseen = seen.try_emplace(pkey, INT64_MIN).first->second;
    pseen = std::max(pseen, v.last_seen);
    if (whole && last_file[pkey] == &f) {
      const std::string& host = file_host[f.path];
      const bool local = host.empty() || host == this_host;
      const bool gone_after_close =
          probe.closed && (writer != WriterState::kAlive) && (!local || LocalProcessGone(f.pid)) &&
          !std::filesystem::exists(std::filesystem::path(f.path).parent_path() /
                                   SegmentFileName(f.pid, f.seq + 1));
      if (options.finish || dead_writer || gone_after_close || !probe.closed) {
        // (!closed and whole without a dead writer or finish: untouched for stale_after_s.)
        int64_t last = pseen;
        if (auto c = clocks.find(pkey); c != clocks.end() && !c->second.model.empty()) {
          last = std::max(last, c->second.model.Map(c->second.last_anchor_local));
        }
        ended[pkey] = last;
      }
    }
    stats.segment_events += v.count.events;
    stats.step_markers += v.count.steps;
    stats.dropped += v.dropped;
    stats.bytes_read += new_offset - prev.offset;
    bytes_done += new_offset - prev.offset;
    stats.files_read++;

    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st, db->Prepare("INSERT INTO sources(path, format, rank, pid, offset, size, "
                             "finished, events) VALUES(?1, 'segment', ?2, ?3, ?4, ?5, ?6, ?7) "
                             "ON CONFLICT(path) DO UPDATE SET offset = excluded.offset, "
                             "size = excluded.size, finished = excluded.finished, "
                             "events = events + excluded.events"));
    TRACEDB_RETURN_IF_ERROR(st.Bind(1, f.path)
                                .Bind(2, f.rank)
                                .Bind(3, static_cast<int64_t>(f.pid))
                                .Bind(4, static_cast<int64_t>(new_offset))
                                .Bind(5, static_cast<int64_t>(probe.file_size))
                                .Bind(6, finished ? 1 : 0)
                                .Bind(7, static_cast<int64_t>(v.count.events))
                                .Run());
    TRACEDB_RETURN_IF_ERROR(StoreRankClocks(db, clocks, clock_ranks, &clocks_stored));
    batch_events += v.count.events + v.count.steps;
    TRACEDB_RETURN_IF_ERROR(file_done(i));
  }
  // `finish`: the job is over, whatever is still open too (the spans of processes whose last
  // file an earlier pass finished while they were alive): written open, ending at their
  // process's last anchor (a lane's: its rank's latest).
  if (options.finish && builder.open_spans() > 0) {
    TRACEDB_RETURN_IF_ERROR(w->BeginBatch());
    std::map<int32_t, int64_t> rank_last;
    std::map<ProcessKey, int64_t> proc_last;
    for (const auto& [key, pc] : clocks) {
      if (pc.model.empty() || pc.last_anchor_local == INT64_MIN) continue;
      const int64_t t = pc.model.Map(pc.last_anchor_local);
      proc_last[key] = t;
      auto [it, fresh] = rank_last.try_emplace(key.first, t);
      if (!fresh) it->second = std::max(it->second, t);
    }
    for (uint32_t track : builder.TracksWithOpenSpans()) {
      const TrackSpec& spec = w->TrackSpecOf(track);
      int64_t end = INT64_MIN;  // unknown: each span then ends at its start
      if (spec.pid >= 0) {
        auto p = proc_last.find({spec.rank, static_cast<uint32_t>(spec.pid)});
        if (p != proc_last.end()) end = p->second;
      } else if (auto r = rank_last.find(spec.rank); r != rank_last.end()) {
        end = r->second;
      }
      TRACEDB_ASSIGN_OR_RETURN(uint64_t n, builder.CloseOpenSpans(track, end));
      stats.open_spans_closed += n;
    }
    TRACEDB_RETURN_IF_ERROR(builder.SaveState(kStateKey));
    TRACEDB_RETURN_IF_ERROR(w->SetMeta("open_spans", std::to_string(builder.open_spans())));
    TRACEDB_RETURN_IF_ERROR(w->CommitBatch());
    stats.rows = w->rows_written() - rows_at_start;
  }
  if (progress) {
    progress(CompactProgress{work.size(), work.size(), "", bytes_done, bytes_total, stats.rows});
  }
  return stats;
}

}  // namespace tracedb::engine
