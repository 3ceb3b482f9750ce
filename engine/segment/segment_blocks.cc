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

namespace {

// v's first n elements, grown (never shrunk) to hold them: a chunk's arrays are reused.
template <typename T>
T* Sized(std::vector<T>* v, size_t n) {
  if (v->size() < n) v->resize(n);
  return v->data();
}

// One event's arguments from the args column (docs/segment-format.md "EVENTS block").
Status GetArgs(Reader* r, EventArgs* a) {
  uint64_t v;
  *a = EventArgs();
  if (!r->GetVarint32(&a->mask) || (a->mask & ~EventArgs::kAllFields)) {
    return Bad("EVENTS", "bad argument mask");
  }
  if ((a->mask & EventArgs::kBytes) && !r->GetVarint64(&a->bytes)) {
    return Bad("EVENTS", "truncated args column");
  }
  if (a->mask & EventArgs::kPeer) {
    if (!r->GetVarint64(&v) || UnZigZag(v) < INT32_MIN || UnZigZag(v) > INT32_MAX) {
      return Bad("EVENTS", "bad peer");
    }
    a->peer = static_cast<int32_t>(UnZigZag(v));
  }
  if (a->mask & EventArgs::kTag) {
    if (!r->GetVarint64(&v) || UnZigZag(v) < INT32_MIN || UnZigZag(v) > INT32_MAX) {
      return Bad("EVENTS", "bad tag");
    }
    a->tag = static_cast<int32_t>(UnZigZag(v));
  }
  if ((a->mask & EventArgs::kComm) && !r->GetVarint32(&a->comm)) {
    return Bad("EVENTS", "truncated args column");
  }
  if ((a->mask & EventArgs::kSeq) && !r->GetVarint64(&a->seq)) {
    return Bad("EVENTS", "truncated args column");
  }
  if ((a->mask & EventArgs::kFlow) && !r->GetVarint64(&a->flow)) {
    return Bad("EVENTS", "truncated args column");
  }
  return Status::Ok();
}

// A column's next varint at p (before end), p moved past it; false when end cuts it off or it
// is longer than 64 bits. Values below 2^28 (4 bytes: most times and durations) take a 32-bit
// gather of two steps instead of Reader's three 64-bit ones.
inline bool ColumnVarint(const char*& p, const char* end, uint64_t* v) {
  if (end - p >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    const auto low = static_cast<uint32_t>(~w & 0x80808080u);  // bit 7 clear: the last byte
    if (low != 0) {
      uint32_t x = static_cast<uint32_t>(w) & (low ^ (low - 1)) & 0x7f7f7f7fu;
      x = (x & 0x007f007fu) | ((x & 0x7f007f00u) >> 1);
      *v = (x & 0x3fffu) | ((x & 0x3fff0000u) >> 2);
      p += (__builtin_ctz(low) >> 3) + 1;
      return true;
    }
  }
  Reader r(p, static_cast<size_t>(end - p));
  if (!r.GetVarint64(v)) return false;
  p = r.data();
  return true;
}

// The same for a 32-bit id, most often one byte (a name, a lane).
inline bool ColumnId(const char*& p, const char* end, uint32_t* v) {
  if (p != end && static_cast<unsigned char>(*p) < 0x80) {
    *v = static_cast<unsigned char>(*p++);
    return true;
  }
  Reader r(p, static_cast<size_t>(end - p));
  if (!r.GetVarint32(v)) return false;
  p = r.data();
  return true;
}

// What is left of a column read up to p.
Reader Rest(const char* p, const Reader& col) {
  return Reader(p, col.remaining() - static_cast<size_t>(p - col.data()));
}

}  // namespace

// Each column is decoded in a loop of its own into an array, where one loop per event decoded
// every column and filled an 88-byte SegmentEvent (compaction read it back): the loops keep
// their reader in registers and run without a switch on the kind.
Status EventsBlockDecoder::NextColumns(size_t max, EventColumns* cols) {
  const size_t m = static_cast<size_t>(std::min<uint64_t>(max, n_ - done_));
  cols->n = 0;
  cols->n_ints = cols->n_values = cols->n_args = 0;
  // Kinds and categories: one byte per event each, exactly n_ of them (Init). The kinds say
  // how many entries the sparse columns hold.
  const auto* kinds = reinterpret_cast<const uint8_t*>(kinds_.data());
  const auto* cats = reinterpret_cast<const uint8_t*>(cats_.data());
  uint32_t bad = 0;
  size_t n_ints = 0, n_steps = 0, n_values = 0, n_args = 0;
  // Most chunks are complete events without arguments only: eight kinds at a time while so.
  constexpr uint64_t kEightComplete =
      0x0101010101010101ull * static_cast<uint8_t>(EventKind::kComplete);
  size_t i0 = 0;
  for (; i0 + 8 <= m; i0 += 8) {
    uint64_t w;
    std::memcpy(&w, kinds + i0, 8);
    if (w != kEightComplete) break;
  }
  n_ints = i0;
  for (size_t i = i0; i < m; ++i) {
    const uint8_t k = kinds[i];
    const uint8_t kind = k & kKindMask;
    bad |= (k & ~(kKindMask | kKindHasArgs)) | (kind >= kNumEventKinds ? 1u : 0u);
    n_ints += (kind == static_cast<uint8_t>(EventKind::kComplete)) |
              (kind == static_cast<uint8_t>(EventKind::kStep));
    n_steps += kind == static_cast<uint8_t>(EventKind::kStep);
    n_values += kind == static_cast<uint8_t>(EventKind::kCounter);
    n_args += (k & kKindHasArgs) != 0;
  }
  if (bad != 0) return Bad("EVENTS", "unknown event kind");
  kinds_.Skip(m);
  cats_.Skip(m);

  // Times (zigzag deltas from the previous event; wrap-around: hostile deltas never overflow),
  // names and lanes, and the durations and steps when every event has one (runs of complete
  // events, the common case). One loop: each column's position depends on the length of the
  // varint before it, so the columns' chains overlap only when decoded side by side.
  int64_t* ts = Sized(&cols->ts, m);
  uint32_t* names = Sized(&cols->name, m);
  uint32_t* lanes = Sized(&cols->lane, m);
  int64_t* ints = Sized(&cols->ints, n_ints);
  const bool ints_inline = n_ints == m;
  uint64_t high = 0;  // the OR of the raw int values: bit 63 set when one is past INT64_MAX
  {
    const char *pt = tss_.data(), *pn = names_.data(), *pl = lanes_.data(), *pi = ints_.data();
    const char* const et = pt + tss_.remaining();
    const char* const en = pn + names_.remaining();
    const char* const el = pl + lanes_.remaining();
    const char* const ei = pi + ints_.remaining();
    int64_t t = ts_;
    for (size_t i = 0; i < m; ++i) {
      uint64_t delta;
      if (!ColumnVarint(pt, et, &delta)) return Bad("EVENTS", "truncated ts column");
      t = WrapAdd(t, UnZigZag(delta));
      ts[i] = t;
      if (!ColumnId(pn, en, &names[i])) return Bad("EVENTS", "truncated name column");
      if (!ColumnId(pl, el, &lanes[i])) return Bad("EVENTS", "truncated lane column");
      if (ints_inline) {
        uint64_t d;
        if (!ColumnVarint(pi, ei, &d)) {
          return Bad("EVENTS",
                     n_steps ? "truncated duration or step column" : "truncated duration column");
        }
        ints[i] = static_cast<int64_t>(d);
        high |= d;
      }
    }
    tss_ = Rest(pt, tss_);
    names_ = Rest(pn, names_);
    lanes_ = Rest(pl, lanes_);
    ints_ = Rest(pi, ints_);
    ts_ = t;
  }
  // Durations (kComplete: a varint, at most INT64_MAX) and steps (kStep: zigzag), in event order.
  if (!ints_inline) {
    Reader r = ints_;
    for (size_t j = 0; j < n_ints; ++j) {
      uint64_t d;
      if (!r.GetVarint64(&d)) {
        return Bad("EVENTS",
                   n_steps ? "truncated duration or step column" : "truncated duration column");
      }
      ints[j] = static_cast<int64_t>(d);
      high |= d;
    }
    ints_ = r;
  }
  if (n_steps != 0) {
    // Steps are zigzag: undo it, and check the durations one by one.
    high = 0;
    for (size_t i = 0, j = 0; i < m; ++i) {
      const uint8_t kind = kinds[i] & kKindMask;
      if (kind == static_cast<uint8_t>(EventKind::kComplete)) {
        high |= static_cast<uint64_t>(ints[j++]);
      } else if (kind == static_cast<uint8_t>(EventKind::kStep)) {
        ints[j] = UnZigZag(static_cast<uint64_t>(ints[j]));
        ++j;
      }
    }
  }
  if (high > static_cast<uint64_t>(INT64_MAX)) return Bad("EVENTS", "duration out of range");
  double* values = Sized(&cols->values, n_values);
  for (size_t j = 0; j < n_values; ++j) {
    uint64_t bits;
    if (!values_.GetFixed64(&bits)) return Bad("EVENTS", "truncated value column");
    std::memcpy(&values[j], &bits, 8);
  }
  EventArgs* args = Sized(&cols->args, n_args);
  for (size_t j = 0; j < n_args; ++j) TRACEDB_RETURN_IF_ERROR(GetArgs(&args_, &args[j]));

  done_ += m;
  if (done_ == n_ && (!tss_.empty() || !names_.empty() || !lanes_.empty() || !ints_.empty() ||
                      !values_.empty() || !args_.empty())) {
    return Bad("EVENTS", "columns hold more values than events");
  }
  cols->n = m;
  cols->kind = kinds;
  cols->cat = cats;
  cols->n_ints = n_ints;
  cols->n_values = n_values;
  cols->n_args = n_args;
  return Status::Ok();
}

Status EventsBlockDecoder::Next(size_t max, std::vector<SegmentEvent>* events) {
  TRACEDB_RETURN_IF_ERROR(NextColumns(max, &cols_));
  const EventColumns& c = cols_;
  events->resize(c.n);
  size_t ii = 0, vi = 0, ai = 0;
  for (size_t i = 0; i < c.n; ++i) {
    SegmentEvent& e = (*events)[i];
    e.ts = c.ts[i];
    e.kind = static_cast<EventKind>(c.kind[i] & kKindMask);
    e.cat = c.cat[i];
    e.name = c.name[i];
    e.lane = c.lane[i];
    e.ival = 0;
    e.value = 0;
    if (e.kind == EventKind::kComplete || e.kind == EventKind::kStep) {
      e.ival = c.ints[ii++];
    } else if (e.kind == EventKind::kCounter) {
      e.value = c.values[vi++];
    }
    e.has_args = (c.kind[i] & kKindHasArgs) != 0;
    e.args = e.has_args ? c.args[ai++] : EventArgs();
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
