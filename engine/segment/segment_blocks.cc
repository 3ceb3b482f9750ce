// Block payload codecs. See segment_blocks.h; format in docs/segment-format.md.
#include "engine/segment/segment_blocks.h"

namespace tracedb::engine {
namespace {

Status Bad(const char* block, const char* what) {
  return Status::Corruption(std::string(block) + " block: " + what);
}

void PutColumn(const ByteBuf& col, std::string* dst) {
  PutVarint64(dst, col.size());
  dst->append(col.data(), col.size());
}

bool GetColumn(Reader* r, Reader* col) {
  std::string_view v;
  if (!r->GetLengthPrefixed(&v)) return false;
  *col = Reader(v);
  return true;
}

bool GetI32(Reader* r, int32_t* v) {
  int64_t x;
  if (!r->GetVarsigned(&x) || x < INT32_MIN || x > INT32_MAX) return false;
  *v = static_cast<int32_t>(x);
  return true;
}

bool GetString(Reader* r, std::string* s) {
  std::string_view v;
  if (!r->GetLengthPrefixed(&v)) return false;
  s->assign(v.data(), v.size());
  return true;
}

// A varint that is most often one byte (a name id, a lane: small numbers), read without the
// general 8-byte gather when it is.
inline bool GetSmallVarint32(Reader* r, uint32_t* v) {
  if (!r->empty() && static_cast<unsigned char>(*r->data()) < 0x80) {
    *v = static_cast<unsigned char>(*r->data());
    r->Skip(1);
    return true;
  }
  return r->GetVarint32(v);
}

// Every list block starts with a count; a count larger than the bytes left cannot be honest
// (each entry takes at least one byte), which bounds the allocation.
bool GetCount(Reader* r, uint64_t* n) { return r->GetVarint64(n) && *n <= r->remaining(); }

}  // namespace

const char* CategoryName(uint8_t cat) {
  static const char* const kNames[kNumCategories] = {"user", "compute", "comm", "phase",
                                                     "mpi",  "nccl",    "cuda", "step"};
  return cat < kNumCategories ? kNames[cat] : "user";
}

// ---- EVENTS ----

void EventsBlockEncoder::Reset(uint32_t thread_index) {
  thread_index_ = thread_index;
  count_ = 0;
  first_ts_ = prev_ts_ = 0;
  for (ByteBuf* b : {&kinds_, &cats_, &ts_, &names_, &lanes_, &ints_, &values_, &args_}) {
    b->Clear();
  }
}

void EventsBlockEncoder::PutArgs(const EventArgs& a) {
  args_.Reserve(1 + 10 + 5 + 5 + 5 + 10 + 10);
  args_.PutVarint(a.mask & EventArgs::kAllFields);
  if (a.mask & EventArgs::kBytes) args_.PutVarint(a.bytes);
  if (a.mask & EventArgs::kPeer) args_.PutVarint(ZigZag(a.peer));
  if (a.mask & EventArgs::kTag) args_.PutVarint(ZigZag(a.tag));
  if (a.mask & EventArgs::kComm) args_.PutVarint(a.comm);
  if (a.mask & EventArgs::kSeq) args_.PutVarint(a.seq);
  if (a.mask & EventArgs::kFlow) args_.PutVarint(a.flow);
}

void EventsBlockEncoder::Finish(std::string* dst) const {
  PutVarint64(dst, thread_index_);
  PutVarint64(dst, count_);
  PutVarsigned(dst, first_ts_);
  for (const ByteBuf* b : {&kinds_, &cats_, &ts_, &names_, &lanes_, &ints_, &values_, &args_}) {
    PutColumn(*b, dst);
  }
}

Status EventsBlockDecoder::Init(std::string_view payload) {
  Reader r(payload);
  n_ = done_ = 0;
  if (!r.GetVarint32(&thread_index_) || !r.GetVarint64(&n_) || !r.GetVarsigned(&ts_)) {
    n_ = 0;
    return Bad("EVENTS", "truncated header");
  }
  if (!GetColumn(&r, &kinds_) || !GetColumn(&r, &cats_) || !GetColumn(&r, &tss_) ||
      !GetColumn(&r, &names_) || !GetColumn(&r, &lanes_) || !GetColumn(&r, &ints_) ||
      !GetColumn(&r, &values_) || !GetColumn(&r, &args_)) {
    n_ = 0;
    return Bad("EVENTS", "truncated column");
  }
  if (kinds_.remaining() != n_ || cats_.remaining() != n_) {
    n_ = 0;
    return Bad("EVENTS", "kind/category column length differs from the event count");
  }
  return Status::Ok();
}

Status EventsBlockDecoder::Next(size_t max, std::vector<SegmentEvent>* events) {
  const size_t m = static_cast<size_t>(std::min<uint64_t>(max, n_ - done_));
  events->resize(m);
  int64_t ts = ts_;
  for (size_t i = 0; i < m; ++i) {
    SegmentEvent& e = (*events)[i];
    uint8_t k = 0, c = 0;
    uint64_t delta;
    kinds_.GetU8(&k);  // both columns hold exactly n_ bytes (Init)
    cats_.GetU8(&c);
    if ((k & kKindMask) >= kNumEventKinds || (k & ~(kKindMask | kKindHasArgs)) != 0) {
      return Bad("EVENTS", "unknown event kind");
    }
    if (!tss_.GetVarint64(&delta)) return Bad("EVENTS", "truncated ts column");
    ts = WrapAdd(ts, UnZigZag(delta));  // wrap-around: hostile deltas never overflow
    e.ts = ts;
    e.kind = static_cast<EventKind>(k & kKindMask);
    e.cat = c;
    if (!GetSmallVarint32(&names_, &e.name)) return Bad("EVENTS", "truncated name column");
    if (!GetSmallVarint32(&lanes_, &e.lane)) return Bad("EVENTS", "truncated lane column");
    e.ival = 0;
    e.value = 0;
    if (e.kind == EventKind::kComplete) {
      uint64_t d;
      if (!ints_.GetVarint64(&d) || d > static_cast<uint64_t>(INT64_MAX)) {
        return Bad("EVENTS", "truncated duration column");
      }
      e.ival = static_cast<int64_t>(d);
    } else if (e.kind == EventKind::kStep) {
      if (!ints_.GetVarsigned(&e.ival)) return Bad("EVENTS", "truncated step column");
    } else if (e.kind == EventKind::kCounter) {
      uint64_t bits;
      if (!values_.GetFixed64(&bits)) return Bad("EVENTS", "truncated value column");
      std::memcpy(&e.value, &bits, 8);
    }
    e.has_args = (k & kKindHasArgs) != 0;
    e.args = EventArgs();
    if (e.has_args) {
      EventArgs& a = e.args;
      uint64_t v;
      if (!args_.GetVarint32(&a.mask) || (a.mask & ~EventArgs::kAllFields)) {
        return Bad("EVENTS", "bad argument mask");
      }
      if ((a.mask & EventArgs::kBytes) && !args_.GetVarint64(&a.bytes)) {
        return Bad("EVENTS", "truncated args column");
      }
      if (a.mask & EventArgs::kPeer) {
        if (!args_.GetVarint64(&v) || UnZigZag(v) < INT32_MIN || UnZigZag(v) > INT32_MAX) {
          return Bad("EVENTS", "bad peer");
        }
        a.peer = static_cast<int32_t>(UnZigZag(v));
      }
      if (a.mask & EventArgs::kTag) {
        if (!args_.GetVarint64(&v) || UnZigZag(v) < INT32_MIN || UnZigZag(v) > INT32_MAX) {
          return Bad("EVENTS", "bad tag");
        }
        a.tag = static_cast<int32_t>(UnZigZag(v));
      }
      if ((a.mask & EventArgs::kComm) && !args_.GetVarint32(&a.comm)) {
        return Bad("EVENTS", "truncated args column");
      }
      if ((a.mask & EventArgs::kSeq) && !args_.GetVarint64(&a.seq)) {
        return Bad("EVENTS", "truncated args column");
      }
      if ((a.mask & EventArgs::kFlow) && !args_.GetVarint64(&a.flow)) {
        return Bad("EVENTS", "truncated args column");
      }
    }
  }
  ts_ = ts;
  done_ += m;
  if (done_ == n_ && (!tss_.empty() || !names_.empty() || !lanes_.empty() || !ints_.empty() ||
                      !values_.empty() || !args_.empty())) {
    return Bad("EVENTS", "columns hold more values than events");
  }
  return Status::Ok();
}

Status DecodeEventsBlock(std::string_view payload, uint32_t* thread_index,
                         std::vector<SegmentEvent>* events) {
  EventsBlockDecoder d;
  TRACEDB_RETURN_IF_ERROR(d.Init(payload));
  *thread_index = d.thread_index();
  return d.Next(static_cast<size_t>(std::min<uint64_t>(d.count(), SIZE_MAX)), events);
}

// ---- META ----

void EncodeMeta(const SegmentMeta& m, std::string* dst) {
  PutVarsigned(dst, m.rank);
  PutVarsigned(dst, m.world_size);
  PutVarsigned(dst, m.local_rank);
  PutVarint64(dst, m.pid);
  PutLengthPrefixed(dst, m.host);
  PutLengthPrefixed(dst, m.tool_version);
  PutLengthPrefixed(dst, m.command);
  dst->push_back(static_cast<char>(m.clock));
  PutVarsigned(dst, m.anchor_realtime_ns);
  PutVarsigned(dst, m.anchor_clock_ns);
  PutVarint64(dst, m.tsc_hz);
  PutVarsigned(dst, m.start_step);
  PutVarsigned(dst, m.end_step);
}

Status DecodeMeta(std::string_view payload, SegmentMeta* m) {
  Reader r(payload);
  uint64_t pid;
  uint8_t clock;
  if (!GetI32(&r, &m->rank) || !GetI32(&r, &m->world_size) || !GetI32(&r, &m->local_rank) ||
      !r.GetVarint64(&pid) || pid > UINT32_MAX || !GetString(&r, &m->host) ||
      !GetString(&r, &m->tool_version) || !GetString(&r, &m->command) || !r.GetU8(&clock) ||
      !r.GetVarsigned(&m->anchor_realtime_ns) || !r.GetVarsigned(&m->anchor_clock_ns) ||
      !r.GetVarint64(&m->tsc_hz) || !r.GetVarsigned(&m->start_step) ||
      !r.GetVarsigned(&m->end_step)) {
    return Bad("META", "truncated");
  }
  if (clock != static_cast<uint8_t>(ClockKind::kTsc) &&
      clock != static_cast<uint8_t>(ClockKind::kMonotonic)) {
    return Bad("META", "unknown clock kind");
  }
  if (m->rank < 0 || m->world_size < 1) return Bad("META", "bad rank or world size");
  m->pid = static_cast<uint32_t>(pid);
  m->clock = static_cast<ClockKind>(clock);
  // Fields added by later versions follow; they are ignored here (forward compatibility).
  return Status::Ok();
}

// ---- STRINGS ----

void EncodeStrings(uint32_t first_id, const std::vector<std::string_view>& strings,
                   std::string* dst) {
  PutVarint64(dst, first_id);
  PutVarint64(dst, strings.size());
  for (std::string_view s : strings) PutLengthPrefixed(dst, s);
}

Status DecodeStrings(std::string_view payload, uint32_t* first_id,
                     std::vector<std::string>* strings) {
  Reader r(payload);
  uint64_t n;
  if (!r.GetVarint32(first_id) || *first_id == 0 || !GetCount(&r, &n) ||
      *first_id + n > UINT32_MAX) {
    return Bad("STRINGS", "bad header");
  }
  strings->clear();
  strings->reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    strings->emplace_back();
    if (!GetString(&r, &strings->back())) return Bad("STRINGS", "truncated string");
  }
  return Status::Ok();
}

// ---- THREADS ----

void EncodeThreads(const std::vector<ThreadInfo>& threads, std::string* dst) {
  PutVarint64(dst, threads.size());
  for (const ThreadInfo& t : threads) {
    PutVarint64(dst, t.index);
    PutVarint64(dst, t.os_tid);
    PutLengthPrefixed(dst, t.name);
  }
}

Status DecodeThreads(std::string_view payload, std::vector<ThreadInfo>* threads) {
  Reader r(payload);
  uint64_t n;
  if (!GetCount(&r, &n)) return Bad("THREADS", "bad count");
  threads->resize(n);
  for (ThreadInfo& t : *threads) {
    if (!r.GetVarint32(&t.index) || !r.GetVarint32(&t.os_tid) || !GetString(&r, &t.name)) {
      return Bad("THREADS", "truncated entry");
    }
  }
  return Status::Ok();
}

// ---- LANES ----

void EncodeLanes(const std::vector<LaneInfo>& lanes, std::string* dst) {
  PutVarint64(dst, lanes.size());
  for (const LaneInfo& l : lanes) {
    PutVarint64(dst, l.lane);
    PutVarint64(dst, l.name);
  }
}

Status DecodeLanes(std::string_view payload, std::vector<LaneInfo>* lanes) {
  Reader r(payload);
  uint64_t n;
  if (!GetCount(&r, &n)) return Bad("LANES", "bad count");
  lanes->resize(n);
  for (LaneInfo& l : *lanes) {
    if (!r.GetVarint32(&l.lane) || !r.GetVarint32(&l.name) || l.lane == 0) {
      return Bad("LANES", "bad entry");
    }
  }
  return Status::Ok();
}

// ---- SYNC ----

void EncodeSync(const std::vector<SyncPoint>& points, std::string* dst) {
  PutVarint64(dst, points.size());
  for (const SyncPoint& p : points) {
    PutVarsigned(dst, p.ref_rank);
    PutVarsigned(dst, p.local_ns);
    PutVarsigned(dst, p.offset_ns);
    PutVarsigned(dst, p.uncertainty_ns);
  }
}

Status DecodeSync(std::string_view payload, std::vector<SyncPoint>* points) {
  Reader r(payload);
  uint64_t n;
  if (!GetCount(&r, &n)) return Bad("SYNC", "bad count");
  points->resize(n);
  for (SyncPoint& p : *points) {
    if (!GetI32(&r, &p.ref_rank) || !r.GetVarsigned(&p.local_ns) || !r.GetVarsigned(&p.offset_ns) ||
        !r.GetVarsigned(&p.uncertainty_ns) || p.uncertainty_ns < 0) {
      return Bad("SYNC", "bad entry");
    }
  }
  return Status::Ok();
}

// ---- ANCHOR ----

void EncodeAnchors(const std::vector<AnchorPoint>& points, std::string* dst) {
  PutVarint64(dst, points.size());
  for (const AnchorPoint& p : points) {
    PutVarsigned(dst, p.realtime_ns);
    PutVarsigned(dst, p.clock_ns);
    PutVarsigned(dst, p.uncertainty_ns);
  }
}

Status DecodeAnchors(std::string_view payload, std::vector<AnchorPoint>* points) {
  Reader r(payload);
  uint64_t n;
  if (!GetCount(&r, &n)) return Bad("ANCHOR", "bad count");
  points->resize(n);
  for (AnchorPoint& p : *points) {
    if (!r.GetVarsigned(&p.realtime_ns) || !r.GetVarsigned(&p.clock_ns) ||
        !r.GetVarsigned(&p.uncertainty_ns) || p.uncertainty_ns < 0) {
      return Bad("ANCHOR", "bad entry");
    }
  }
  return Status::Ok();
}

// ---- STATS ----

void EncodeStats(const std::vector<DropCount>& drops, std::string* dst) {
  PutVarint64(dst, drops.size());
  for (const DropCount& d : drops) {
    PutVarint64(dst, d.thread_index);
    PutVarint64(dst, d.dropped);
  }
}

Status DecodeStats(std::string_view payload, std::vector<DropCount>* drops) {
  Reader r(payload);
  uint64_t n;
  if (!GetCount(&r, &n)) return Bad("STATS", "bad count");
  drops->resize(n);
  for (DropCount& d : *drops) {
    if (!r.GetVarint32(&d.thread_index) || !r.GetVarint64(&d.dropped)) {
      return Bad("STATS", "bad entry");
    }
  }
  return Status::Ok();
}

// ---- COMMS ----

void EncodeComms(const std::vector<CommInfo>& comms, std::string* dst) {
  PutVarint64(dst, comms.size());
  for (const CommInfo& c : comms) {
    PutVarint64(dst, c.comm);
    PutVarsigned(dst, c.size);
    PutVarsigned(dst, c.rank_in_comm);
    PutVarint64(dst, c.members.size());
    for (int32_t m : c.members) PutVarsigned(dst, m);
  }
}

Status DecodeComms(std::string_view payload, std::vector<CommInfo>* comms) {
  Reader r(payload);
  uint64_t n;
  if (!GetCount(&r, &n)) return Bad("COMMS", "bad count");
  comms->resize(n);
  for (CommInfo& c : *comms) {
    uint64_t members;
    if (!r.GetVarint32(&c.comm) || !GetI32(&r, &c.size) || !GetI32(&r, &c.rank_in_comm) ||
        !GetCount(&r, &members) || c.size < 0) {
      return Bad("COMMS", "bad entry");
    }
    c.members.resize(members);
    for (int32_t& m : c.members) {
      if (!GetI32(&r, &m)) return Bad("COMMS", "truncated member list");
    }
  }
  return Status::Ok();
}

// ---- STEPSTATS ----

void EncodeStepStats(const std::vector<StepStat>& steps, std::string* dst) {
  PutVarint64(dst, steps.size());
  for (const StepStat& st : steps) {
    PutVarsigned(dst, st.step);
    PutVarsigned(dst, st.start_ns);
    PutVarint64(dst, static_cast<uint64_t>(st.dur_ns));
    PutVarint64(dst, static_cast<uint64_t>(st.compute_ns));
    PutVarint64(dst, static_cast<uint64_t>(st.comm_ns));
    PutVarint64(dst, static_cast<uint64_t>(st.wait_ns));
    PutVarint64(dst, st.bytes);
    PutVarint64(dst, st.events);
    PutVarint64(dst, st.top.size());
    for (const auto& [name, ns] : st.top) {
      PutVarint64(dst, name);
      PutVarint64(dst, static_cast<uint64_t>(ns));
    }
  }
}

namespace {
// A non-negative int64 stored as a varint.
bool GetNonNegative(Reader* r, int64_t* v) {
  uint64_t u;
  if (!r->GetVarint64(&u) || u > static_cast<uint64_t>(INT64_MAX)) return false;
  *v = static_cast<int64_t>(u);
  return true;
}
}  // namespace

Status DecodeStepStats(std::string_view payload, std::vector<StepStat>* steps) {
  Reader r(payload);
  uint64_t n;
  if (!GetCount(&r, &n)) return Bad("STEPSTATS", "bad count");
  steps->clear();
  steps->resize(n);
  for (StepStat& st : *steps) {
    uint64_t top;
    if (!r.GetVarsigned(&st.step) || !r.GetVarsigned(&st.start_ns) ||
        !GetNonNegative(&r, &st.dur_ns) || !GetNonNegative(&r, &st.compute_ns) ||
        !GetNonNegative(&r, &st.comm_ns) || !GetNonNegative(&r, &st.wait_ns) ||
        !r.GetVarint64(&st.bytes) || !r.GetVarint64(&st.events) || !r.GetVarint64(&top)) {
      return Bad("STEPSTATS", "truncated entry");
    }
    if (st.start_ns > INT64_MAX - st.dur_ns) return Bad("STEPSTATS", "step end out of range");
    if (top > StepStat::kMaxTopNames) return Bad("STEPSTATS", "too many top names");
    st.top.resize(top);
    for (auto& [name, ns] : st.top) {
      if (!r.GetVarint32(&name) || !GetNonNegative(&r, &ns)) {
        return Bad("STEPSTATS", "truncated top names");
      }
    }
  }
  if (r.remaining() != 0) return Bad("STEPSTATS", "trailing bytes");
  return Status::Ok();
}

// ---- END ----

void EncodeEnd(const SegmentEnd& e, std::string* dst) { PutVarint64(dst, e.events); }

Status DecodeEnd(std::string_view payload, SegmentEnd* e) {
  Reader r(payload);
  if (!r.GetVarint64(&e->events)) return Bad("END", "truncated");
  return Status::Ok();
}

}  // namespace tracedb::engine
