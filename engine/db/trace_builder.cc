// TraceBuilder implementation. See trace_builder.h.
#include "engine/db/trace_builder.h"

#include <algorithm>
#include <cstring>

#include "engine/util/coding.h"

namespace tracedb::engine {
namespace {

void MergeArgs(const EventArgs& from, EventArgs* into) {
  if (from.mask & EventArgs::kBytes) into->bytes = from.bytes;
  if (from.mask & EventArgs::kPeer) into->peer = from.peer;
  if (from.mask & EventArgs::kTag) into->tag = from.tag;
  if (from.mask & EventArgs::kComm) into->comm = from.comm;
  if (from.mask & EventArgs::kSeq) into->seq = from.seq;
  if (from.mask & EventArgs::kFlow) into->flow = from.flow;
  into->mask |= from.mask;
}

// Merges two JSON object texts ("{...}") into one; either may be empty.
std::string MergeJson(const std::string& a, std::string_view b) {
  if (b.empty()) return a;
  if (a.empty()) return std::string(b);
  if (a.size() < 2 || b.size() < 2 || a.front() != '{' || b.front() != '{') return a;
  const bool a_empty = a.find_first_not_of(" \t\r\n", 1) == a.size() - 1;
  const bool b_empty = b.find_first_not_of(" \t\r\n", 1) == b.size() - 1;
  if (b_empty) return a;
  if (a_empty) return std::string(b);
  std::string out = a.substr(0, a.rfind('}'));
  out += ",";
  out.append(b.substr(1));
  return out;
}

void PutArgs(const EventArgs& a, std::string* dst) {
  PutVarint64(dst, a.mask);
  PutVarint64(dst, a.bytes);
  PutVarsigned(dst, a.peer);
  PutVarsigned(dst, a.tag);
  PutVarint64(dst, a.comm);
  PutVarint64(dst, a.seq);
  PutVarint64(dst, a.flow);
}

bool GetArgs(Reader* r, EventArgs* a) {
  int64_t peer, tag;
  if (!r->GetVarint32(&a->mask) || !r->GetVarint64(&a->bytes) || !r->GetVarsigned(&peer) ||
      !r->GetVarsigned(&tag) || !r->GetVarint32(&a->comm) || !r->GetVarint64(&a->seq) ||
      !r->GetVarint64(&a->flow)) {
    return false;
  }
  a->peer = static_cast<int32_t>(peer);
  a->tag = static_cast<int32_t>(tag);
  return true;
}

}  // namespace

Status TraceBuilder::Begin(uint32_t track, int64_t ts, uint32_t name, uint32_t cat,
                           const EventArgs* args, std::string_view json) {
  TrackState& s = State(track);
  PopFinished(&s, ts);
  PushFrame(&s, w_->TakeK(track), ts, INT64_MAX);
  OpenSpan& o = s.open.emplace_back();
  o.name = name;
  o.cat = cat;
  if (args) o.args = *args;
  o.json.assign(json.data(), json.size());
  return Status::Ok();
}

Status TraceBuilder::End(uint32_t track, int64_t ts, const EventArgs* args, std::string_view json) {
  TrackState& s = State(track);
  // Finished complete events still on the stack cannot enclose what follows the end.
  while (!s.stack.empty() && s.stack.back().end != INT64_MAX) {
    if (s.stack.back().end > ts) w_->AddStat("improper_nesting", w_->TrackRank(track), 1);
    s.stack.pop_back();
  }
  if (s.stack.empty()) {
    w_->AddStat("unmatched_end", w_->TrackRank(track), 1);
    return Status::Ok();
  }
  const Frame f = s.stack.back();
  OpenSpan e = std::move(s.open.back());
  s.stack.pop_back();
  s.open.pop_back();
  Row row;
  row.ts = f.ts;
  row.dur = SaturateInt64(static_cast<__int128>(ts) - f.ts);  // hostile input: clamped
  if (row.dur < 0) {
    w_->AddStat("negative_duration", w_->TrackRank(track), 1);
    row.dur = 0;
  }
  row.track = track;
  row.name = e.name;
  row.cat = e.cat;
  row.kind = RowKind::kSpan;
  row.k = f.k;
  FillParent(s, &row);
  row.args = e.args;
  if (args) MergeArgs(*args, &row.args);
  row.json = MergeJson(e.json, json);
  return w_->AddRow(w_->TrackRank(track), std::move(row));
}

// Inlined into both callers: out of line it was a call per event again.
[[gnu::always_inline]] inline TraceBuilder::Placed TraceBuilder::PlaceComplete(
    TrackState* s, int32_t rank, uint32_t track, int64_t ts, int64_t dur) {
  if (dur < 0) {
    w_->AddStat("negative_duration", rank, 1);
    dur = 0;
  }
  PopFinished(s, ts);
  // Clamped below INT64_MAX, which marks a span still open.
  const int64_t end = std::min(SaturatingAdd(ts, dur), INT64_MAX - 1);
  const bool late = ArrivedLate(*s, ts);
  if (!late && !s->stack.empty() && s->stack.back().end < end) {
    w_->AddStat("improper_nesting", rank, 1);
  }
  Placed p;
  p.dur = dur;
  p.k = w_->TakeK(track);
  if (late) [[unlikely]] {
    // Placed by containment and not pushed (trace_builder.h).
    FillParentByContainment(*s, ts, end, &p.depth, &p.parent_k);
    w_->AddStat("late_arrivals", rank, 1);
    return p;
  }
  p.depth = s->stack.empty() ? 0 : s->stack.back().depth + 1;
  p.parent_k = s->stack.empty() ? 0 : s->stack.back().k + 1;
  PushFrame(s, p.k, ts, end);
  return p;
}

Status TraceBuilder::Complete(uint32_t track, int64_t ts, int64_t dur, uint32_t name, uint32_t cat,
                              const EventArgs* args, std::string_view json) {
  const int32_t rank = w_->TrackRank(track);
  const Placed p = PlaceComplete(&State(track), rank, track, ts, dur);
  if (json.empty())
    return w_->PutSpan(rank, track, ts, p.dur, name, cat, p.k, p.depth, p.parent_k, args);
  Row& row = w_->NewRow(rank, track);
  row.ts = ts;
  row.dur = p.dur;
  row.name = name;
  row.cat = cat;
  row.kind = RowKind::kSpan;
  row.k = p.k;
  row.depth = p.depth;
  row.parent_k = p.parent_k;
  if (args) row.args = *args;
  row.json.assign(json.data(), json.size());
  return w_->CommitRow();
}

Status TraceBuilder::CompleteRun(uint32_t track, const RunEvent* events, size_t n) {
  TrackState& s = State(track);
  const int32_t rank = w_->TrackRank(track);
  auto& stack = s.stack;
  size_t i = 0;
  while (i < n) {
    // As many as the rank's pending block has room for, written through local pointers.
    RowColumns& c = w_->PendingColumns(rank, track, n - i);
    const size_t at = c.n;
    const size_t m = std::min(n - i, w_->PendingLimit() - at);
    int64_t* const ts_col = c.ts.data() + at;
    int64_t* const dur_col = c.dur.data() + at;
    uint32_t* const track_col = c.track.data() + at;
    uint32_t* const name_col = c.name.data() + at;
    uint32_t* const cat_col = c.cat.data() + at;
    uint32_t* const depth_col = c.depth.data() + at;
    uint64_t* const k_col = c.k.data() + at;
    uint64_t* const parent_col = c.parent_k.data() + at;
    // Constant columns, and those set only for the rare event with arguments, before the loop.
    std::memset(c.kind.data() + at, static_cast<int>(RowKind::kSpan), m);
    std::memset(c.mask.data() + at, 0, m * sizeof(uint32_t));
    std::memset(c.extra.data() + at, 0, m * sizeof(uint32_t));
    // PlaceComplete's work on locals: the stack as an array with its size in a register (each
    // event pushes at most one frame, so m more slots are room enough), and the track's k
    // taken for the m events at once. Through the vector and TakeK, both were loaded again
    // after every store into the columns (stores of integers may alias them).
    size_t depth = stack.size();
    stack.resize(depth + m);
    Frame* const f = stack.data();
    uint64_t k = w_->TakeKs(track, m);
    for (size_t j = 0; j < m; ++j, ++k) {
      const RunEvent& e = events[i + j];
      const int64_t ts = e.ts;
      int64_t dur = e.dur;
      if (dur < 0) [[unlikely]] {
        w_->AddStat("negative_duration", rank, 1);
        dur = 0;
      }
      while (depth > 0 && f[depth - 1].end <= ts) {  // PopFinished
        // Only an event at ts INT64_MAX (hostile input) pops an open span here.
        if (f[depth - 1].end == INT64_MAX) s.open.pop_back();
        --depth;
      }
      // Clamped below INT64_MAX, which marks a span still open.
      const int64_t end = std::min(SaturatingAdd(ts, dur), INT64_MAX - 1);
      ts_col[j] = ts;
      dur_col[j] = dur;
      track_col[j] = track;
      name_col[j] = e.name;
      cat_col[j] = e.cat;
      k_col[j] = k;
      if (depth > 0 && f[depth - 1].ts > ts) [[unlikely]] {
        // Arrived late: placed by containment and not pushed (trace_builder.h).
        uint32_t d = 0;
        uint64_t parent = 0;
        for (size_t q = depth; q-- > 0;) {
          if (f[q].ts <= ts && end <= f[q].end) {
            d = f[q].depth + 1;
            parent = f[q].k + 1;
            break;
          }
        }
        depth_col[j] = d;
        parent_col[j] = parent;
        w_->AddStat("late_arrivals", rank, 1);
      } else {
        if (depth > 0 && f[depth - 1].end < end) w_->AddStat("improper_nesting", rank, 1);
        const uint32_t d = depth == 0 ? 0 : f[depth - 1].depth + 1;
        depth_col[j] = d;
        parent_col[j] = depth == 0 ? 0 : f[depth - 1].k + 1;
        Frame& top = f[depth++];
        top.k = k;
        top.ts = ts;
        top.end = end;
        top.depth = d;
        // As PushFrame: the frames left fit in the room made for the run.
        if (depth >= s.prune_at) [[unlikely]]
          depth = PruneEnded(f, depth, ts, &s.prune_at);
      }
      if (e.args != nullptr && (e.args->mask & EventArgs::kAllFields) != 0) [[unlikely]] {
        c.mask[at + j] = e.args->mask & EventArgs::kAllFields;
        c.NewExtra(at + j).args = *e.args;
        ++c.special;
      }
    }
    stack.resize(depth);
    c.n = at + m;
    i += m;
    TRACEDB_RETURN_IF_ERROR(w_->FinishColumns());
  }
  return Status::Ok();
}

Status TraceBuilder::Instant(uint32_t track, int64_t ts, uint32_t name, uint32_t cat,
                             const EventArgs* args, std::string_view json, RowKind kind) {
  TrackState& s = State(track);
  PopFinished(&s, ts);
  Row& row = w_->NewRow(w_->TrackRank(track), track);
  row.ts = ts;
  row.name = name;
  row.cat = cat;
  row.kind = kind;
  row.k = w_->TakeK(track);
  if (ArrivedLate(s, ts)) [[unlikely]] {
    FillParentByContainment(s, ts, ts, &row.depth, &row.parent_k);
    w_->AddStat("late_arrivals", w_->TrackRank(track), 1);
  } else {
    FillParent(s, &row);
  }
  if (args) row.args = *args;
  if (!json.empty()) row.json.assign(json.data(), json.size());
  return w_->CommitRow();
}

Status TraceBuilder::Counter(uint32_t track, int64_t ts, uint32_t name, uint32_t cat,
                             double value) {
  Row& row = w_->NewRow(w_->TrackRank(track), track);
  row.ts = ts;
  row.name = name;
  row.cat = cat;
  row.kind = RowKind::kCounter;
  row.k = w_->TakeK(track);
  row.value = value;
  return w_->CommitRow();
}

std::vector<uint32_t> TraceBuilder::TracksWithOpenSpans() const {
  std::vector<uint32_t> out;
  for (size_t t = 0; t < tracks_.size(); ++t) {
    if (!tracks_[t].open.empty()) out.push_back(static_cast<uint32_t>(t));
  }
  return out;
}

StatusOr<uint64_t> TraceBuilder::CloseOpenSpans(uint32_t track, int64_t end_ts) {
  if (track >= tracks_.size()) return uint64_t{0};
  TrackState& s = tracks_[track];
  uint64_t n = 0;
  // Innermost first: each span's parent is the frame under it, as End() would have found.
  while (!s.stack.empty()) {
    const Frame f = s.stack.back();
    s.stack.pop_back();
    if (f.end != INT64_MAX) continue;  // a finished complete event: already written
    OpenSpan e = std::move(s.open.back());
    s.open.pop_back();
    Row row;
    row.ts = f.ts;
    row.dur = std::max<int64_t>(0, SaturateInt64(static_cast<__int128>(end_ts) - f.ts));
    row.track = track;
    row.name = e.name;
    row.cat = e.cat;
    row.kind = RowKind::kSpan;
    row.k = f.k;
    FillParent(s, &row);
    row.args = e.args;
    row.open = true;
    row.json = std::move(e.json);
    TRACEDB_RETURN_IF_ERROR(w_->AddRow(w_->TrackRank(track), std::move(row)));
    ++n;
  }
  s.open.clear();
  if (n > 0) w_->AddStat("open_spans_closed", w_->TrackRank(track), static_cast<int64_t>(n));
  return n;
}

size_t TraceBuilder::PruneEnded(Frame* f, size_t n, int64_t ts, size_t* prune_at) {
  // Kept: a frame not ended, an open one (end INT64_MAX: only an event at INT64_MAX, hostile
  // input, would have ended it), and one under an open frame, its parent when it ends (End and
  // CloseOpenSpans take the frame under it).
  size_t left = 0;
  for (size_t i = 0; i < n; ++i) {
    if (f[i].end > ts || f[i].end == INT64_MAX || (i + 1 < n && f[i + 1].end == INT64_MAX)) {
      f[left++] = f[i];
    }
  }
  *prune_at = std::max(kPruneFrames, 2 * left);
  return left;
}

uint64_t TraceBuilder::open_spans() const {
  uint64_t n = 0;
  for (const TrackState& s : tracks_) n += s.open.size();
  return n;
}

Status TraceBuilder::SaveState(std::string_view state_key) {
  std::string blob;
  PutVarint64(&blob, 2);  // state format: 1 without depths (a frame's depth was its index)
  uint64_t ntracks = 0;
  for (const TrackState& s : tracks_) ntracks += s.stack.empty() ? 0 : 1;
  PutVarint64(&blob, ntracks);
  for (size_t track = 0; track < tracks_.size(); ++track) {
    const TrackState& s = tracks_[track];
    if (s.stack.empty()) continue;
    PutVarint64(&blob, track);
    PutVarint64(&blob, s.stack.size());
    // A finished frame is saved as before frames and open spans were kept apart: no name, no
    // category, default arguments, no JSON.
    static const OpenSpan kFinished;
    size_t next_open = 0;
    for (const Frame& f : s.stack) {
      const OpenSpan& e = f.end == INT64_MAX ? s.open[next_open++] : kFinished;
      PutVarint64(&blob, f.k);
      PutVarsigned(&blob, f.ts);
      PutVarsigned(&blob, f.end);
      PutVarint64(&blob, f.depth);
      PutVarint64(&blob, e.name);
      PutVarint64(&blob, e.cat);
      PutArgs(e.args, &blob);
      PutLengthPrefixed(&blob, e.json);
    }
  }
  return w_->SaveState(state_key, blob);
}

Status TraceBuilder::LoadState(std::string_view state_key) {
  TRACEDB_ASSIGN_OR_RETURN(std::optional<std::string> blob, w_->LoadState(state_key));
  tracks_.clear();
  if (!blob) return Status::Ok();
  Reader r(*blob);
  uint64_t format, ntracks;
  auto bad = [&] {
    return Status::Corruption("saved state '" + std::string(state_key) + "' is damaged");
  };
  if (!r.GetVarint64(&format) || (format != 1 && format != 2) || !r.GetVarint64(&ntracks)) {
    return bad();
  }
  for (uint64_t t = 0; t < ntracks; ++t) {
    uint32_t track;
    uint64_t n;
    if (!r.GetVarint32(&track) || !r.GetVarint64(&n) || n > r.remaining() ||
        track >= w_->track_count()) {
      return bad();
    }
    TrackState& s = State(track);
    s.stack.clear();
    s.open.clear();
    s.stack.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      Frame f;
      OpenSpan e;
      std::string_view json;
      f.depth = static_cast<uint32_t>(i);
      if (!r.GetVarint64(&f.k) || !r.GetVarsigned(&f.ts) || !r.GetVarsigned(&f.end) ||
          (format == 2 && !r.GetVarint32(&f.depth)) || !r.GetVarint32(&e.name) ||
          !r.GetVarint32(&e.cat) || !GetArgs(&r, &e.args) || !r.GetLengthPrefixed(&json)) {
        return bad();
      }
      s.stack.push_back(f);
      // A finished frame's name, arguments and JSON are never read (only End uses them, and it
      // closes open spans only), so they are not kept.
      if (f.end == INT64_MAX) {
        e.json.assign(json.data(), json.size());
        s.open.push_back(std::move(e));
      }
    }
  }
  return Status::Ok();
}

}  // namespace tracedb::engine
