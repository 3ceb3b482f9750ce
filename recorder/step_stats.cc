// StepStats implementation. See step_stats.h.
#include "recorder/step_stats.h"

#include <algorithm>

#include "engine/util/coding.h"
#include "recorder/catalog.h"
#include "tracedb/recorder.h"

namespace tracedb::recorder {

using engine::EventKind;

namespace {
constexpr uint32_t kMaxThreads = 1u << 16;   // past this index a thread's spans are not tracked
constexpr size_t kMaxDepth = 256;            // deeper begins are counted, not timed
constexpr uint32_t kMaxSlotName = 1u << 22;  // names past this id are found by search

bool IsComm(uint8_t cat) {
  return cat == TRACEDB_CAT_MPI || cat == TRACEDB_CAT_NCCL || cat == TRACEDB_CAT_COMM;
}
bool IsCompute(uint8_t cat) { return cat == TRACEDB_CAT_COMPUTE || cat == TRACEDB_CAT_CUDA; }
}  // namespace

void StepStats::RefreshNames() {
  std::vector<std::string_view> fresh;
  Catalog::Get().NewStrings(names_known_ + 1, &fresh);
  for (std::string_view s : fresh) ClassifyName(++names_known_, s);
}

void StepStats::ClassifyName(uint32_t id, std::string_view s) {
  // MPI_Isend, MPI_Irecv, MPI_Iallreduce...: they start an operation and return.
  const bool nb = s.size() > 5 && s.substr(0, 5) == "MPI_I" && s.substr(0, 8) != "MPI_Init";
  if (!nb) return;
  if (nonblocking_.size() <= id) nonblocking_.resize(id + 1, 0);
  nonblocking_[id] = 1;
}

StepStats::Thread* StepStats::ThreadState(uint32_t index) {
  if (index >= kMaxThreads) return nullptr;
  if (threads_.size() <= index) threads_.resize(index + 1);
  return &threads_[index];
}

StepStats::Step* StepStats::StepAt(int64_t ts) {
  Step& newest = pending_.back();  // the usual case: the open step
  if (ts >= newest.s.start_ns) return ts < newest.end ? &newest : nullptr;
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    if (ts >= it->s.start_ns) return ts < it->end ? &*it : nullptr;
  }
  return nullptr;  // before the first step
}

void StepStats::AddSpan(int64_t a, int64_t b, uint32_t name, uint8_t outer) {
  Step& newest = pending_.back();
  if (a >= newest.s.start_ns && b <= newest.end) {  // the usual case: inside the open step
    if (b <= a) return;
    const int64_t ov = b - a;
    AddName(&newest, true, name, ov);
    if (outer & kCompute) newest.s.compute_ns += ov;
    if (outer & kComm) newest.s.comm_ns += ov;
    if (outer & kWait) newest.s.wait_ns += ov;
    newest.last_ns = std::max(newest.last_ns, b);
    return;
  }
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    if (it->end <= a) break;  // this step and the ones before end before the span
    const int64_t lo = std::max(a, it->s.start_ns);
    const int64_t hi = std::min(b, it->end);
    if (hi <= lo) continue;
    const int64_t ov = hi - lo;
    AddName(&*it, it == pending_.rbegin(), name, ov);
    if (outer & kCompute) it->s.compute_ns += ov;
    if (outer & kComm) it->s.comm_ns += ov;
    if (outer & kWait) it->s.wait_ns += ov;
    it->last_ns = std::max(it->last_ns, hi);
  }
}

void StepStats::AddName(Step* st, bool newest, uint32_t name, int64_t ns) {
  if (newest && name < kMaxSlotName) {
    if (name >= name_slot_.size()) name_slot_.resize(name + 1, 0);
    uint32_t& slot = name_slot_[name];
    if (slot == 0) {
      st->names.emplace_back(name, 0);
      slot = static_cast<uint32_t>(st->names.size());
    }
    st->names[slot - 1].second += ns;
    return;
  }
  for (auto& [id, total] : st->names) {
    if (id == name) {
      total += ns;
      return;
    }
  }
  st->names.emplace_back(name, ns);
}

void StepStats::MarkStep(int64_t ts, int64_t step, bool* slow) {
  if (!pending_.empty() && pending_.back().end == INT64_MAX) {
    Step& prev = pending_.back();
    prev.end = std::max(ts, prev.s.start_ns);
    prev.s.dur_ns = prev.end - prev.s.start_ns;
    if (slow_factor_ > 0 && recent_.size() >= kSlowMinHistory) {
      std::vector<int64_t> v(recent_.begin(), recent_.end());
      std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
      const double median = static_cast<double>(v[v.size() / 2]);
      if (static_cast<double>(prev.s.dur_ns) > slow_factor_ * median &&
          static_cast<double>(prev.s.dur_ns) - median >= static_cast<double>(kSlowMinExcessNs)) {
        *slow = true;
        slow_step_ = prev.s.step;
      }
    }
    recent_.push_back(prev.s.dur_ns);
    if (recent_.size() > kSlowWindow) recent_.pop_front();
  }
  // The slots index the newest step's names: cleared for the new one.
  if (!pending_.empty()) {
    for (const auto& [name, ns] : pending_.back().names) {
      if (name < name_slot_.size()) name_slot_[name] = 0;
    }
  }
  Step& st = pending_.emplace_back();
  st.s.step = step;
  st.s.start_ns = ts;
  st.last_ns = ts;
}

bool StepStats::OnEvent(Thread* t, EventKind kind, uint8_t cat, int64_t ts, uint32_t name,
                        uint32_t lane, int64_t ival, const engine::EventArgs* args) {
  bool slow = false;
  if (kind == EventKind::kStep) MarkStep(ts, ival, &slow);
  if (pending_.empty()) return false;  // before the first step: not summarised
  if (Step* st = StepAt(ts)) {
    // The rows of the events table: a span once (at its begin), no step marker.
    if (kind != EventKind::kEnd && kind != EventKind::kStep) ++st->s.events;
    st->last_ns = std::max(st->last_ns, ts);
    if (args != nullptr && (args->mask & engine::EventArgs::kBytes) && IsComm(cat) &&
        (kind == EventKind::kBegin || kind == EventKind::kComplete)) {
      st->s.bytes += args->bytes;
    }
  }
  const uint8_t comm_class =
      IsComm(cat) ? static_cast<uint8_t>(
                        kComm | (cat != TRACEDB_CAT_NCCL && !NonBlocking(name) ? kWait : 0))
                  : 0;
  switch (kind) {
    case EventKind::kComplete: {
      // Outermost when nothing of its class is open on the thread's own track; a lane's
      // complete events (GPU kernels, async work) count whole.
      uint8_t outer = 0;
      if (IsCompute(cat) && (lane != 0 || t == nullptr || t->compute_depth == 0)) outer |= kCompute;
      if (comm_class && (lane != 0 || t == nullptr || t->comm_depth == 0)) outer |= comm_class;
      AddSpan(ts, engine::SaturatingAdd(ts, std::max<int64_t>(ival, 0)), name, outer);
      break;
    }
    case EventKind::kBegin: {
      if (t == nullptr || lane != 0) break;
      if (t->stack.size() >= kMaxDepth) {
        ++t->untracked;
        break;
      }
      uint8_t cls = 0, outer = 0;
      if (IsCompute(cat)) {
        cls |= kCompute;
        if (t->compute_depth++ == 0) outer |= kCompute;
      }
      if (comm_class) {
        cls |= kComm;
        if (t->comm_depth++ == 0) outer |= comm_class;
      }
      t->stack.push_back(Open{ts, name, cls, outer});
      break;
    }
    case EventKind::kEnd: {
      if (t == nullptr || lane != 0) break;
      if (t->untracked > 0) {
        --t->untracked;
        break;
      }
      if (t->stack.empty()) break;  // its begin was before the session (or a step window)
      const Open o = t->stack.back();
      t->stack.pop_back();
      if (o.cls & kCompute) --t->compute_depth;
      if (o.cls & kComm) --t->comm_depth;
      AddSpan(o.ts, std::max(ts, o.ts), o.name, o.outer);
      break;
    }
    default:
      break;
  }
  return slow;
}

void StepStats::Finish(Step* st, std::vector<engine::StepStat>* out) {
  top_scratch_.swap(st->names);
  const size_t n = std::min(kTopNames, top_scratch_.size());
  std::partial_sort(top_scratch_.begin(), top_scratch_.begin() + static_cast<std::ptrdiff_t>(n),
                    top_scratch_.end(), [](const auto& a, const auto& b) {
                      return a.second != b.second ? a.second > b.second : a.first < b.first;
                    });
  st->s.top.assign(top_scratch_.begin(), top_scratch_.begin() + static_cast<std::ptrdiff_t>(n));
  out->push_back(std::move(st->s));
}

void StepStats::TakeFinished(int64_t safe_ns, bool final, std::vector<engine::StepStat>* out) {
  while (!pending_.empty()) {
    Step& st = pending_.front();
    const bool closed = st.end != INT64_MAX;
    if (!final && !(closed && (st.end <= safe_ns || pending_.size() > kMaxPending))) break;
    if (!closed) st.s.dur_ns = std::max<int64_t>(0, st.last_ns - st.s.start_ns);
    if (pending_.size() == 1) {  // the newest step: its slots go with it
      for (const auto& [name, ns] : st.names) {
        if (name < name_slot_.size()) name_slot_[name] = 0;
      }
    }
    Finish(&st, out);
    pending_.pop_front();
  }
}

}  // namespace tracedb::recorder
