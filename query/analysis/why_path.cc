// The critical path per step window, traced backwards as Böhme et al. trace it (IPDPS 2012):
// from the step's last end, along the rank that got there, back through its activities; at a
// synchronisation where that rank waited, the path leaves it for the rank it waited for, at
// that rank's entry. Pieces between synchronisations are split by the rank's self-time
// segments (its busiest thread track). docs/why.md "Critical path".
#include <algorithm>
#include <map>
#include <memory_resource>
#include <tuple>

#include "query/analysis/why_internal.h"

namespace tracedb::query::analysis::internal {

void ComputePath(const Model& m, Analysis* out) {
  // The wait each event suffered (the longest, when it suffered more than one).
  // Map nodes from a pool: no malloc per node, freed at once (docs/why.md "Speed").
  std::pmr::unsynchronized_pool_resource pool;
  std::pmr::unordered_map<int64_t, const WaitState*> wait_at(&pool);
  wait_at.reserve(out->waits.size());
  for (const WaitState& w : out->waits) {
    auto [it, fresh] = wait_at.try_emplace(w.id, &w);
    if (!fresh && w.wait_ns > it->second->wait_ns) it->second = &w;
  }
  // Synchronisations per rank by entry.
  std::map<int64_t, std::vector<const Sync*>> by_ts;
  for (const auto& [rank, rd] : m.ranks) {
    auto& v = by_ts[rank];
    // rd.by_entry holds rd.syncs sorted so (ts, id).
    for (const Sync& s : rd.by_entry) v.push_back(&s);
  }
  // Step windows over all ranks (one window with no step when no rank has steps).
  struct Window {
    int64_t a = INT64_MAX, b = INT64_MIN, rank = 0;
  };
  std::map<std::pair<bool, int64_t>, Window> windows;
  for (const auto& [rank, rd] : m.ranks) {
    if (rd.steps.empty()) {
      if (rd.last_end <= rd.first_ts) continue;
      Window& w = windows[{false, 0}];
      w.a = std::min(w.a, rd.first_ts);
      if (rd.last_end > w.b) w.b = rd.last_end, w.rank = rank;
      continue;
    }
    for (size_t i = 0; i < rd.steps.size(); ++i) {
      const int64_t a = rd.steps[i].first;
      const int64_t b = std::max(a, i + 1 < rd.steps.size() ? rd.steps[i + 1].first : rd.last_end);
      Window& w = windows[{true, rd.steps[i].second}];
      w.a = std::min(w.a, a);
      if (b > w.b) w.b = b, w.rank = rank;
    }
  }
  // The windows are made disjoint, in step order: a step's window starts no earlier than the
  // latest end of the steps before it (when the last rank finished them). Ranks that drift
  // apart (pipelines, or clocks no synchronisation ties together) made windows span dozens of
  // steps, each traced again for every step it overlapped: 60M path pieces for 10M events, and
  // names' shares counting the same time many times. Disjoint, the path is traced once through
  // the job and each instant is in one step. docs/why.md "Critical path".
  int64_t done = INT64_MIN;
  for (auto& entry : windows) {
    Window& w = entry.second;
    if (!entry.first.first) continue;  // the window without steps: no other
    w.a = std::min(w.b, std::max(w.a, done));
    done = std::max(done, w.b);
  }
  const int32_t no_span = m.name_index.at(kNoSpan);
  std::vector<PathPiece> pieces, fwd;
  for (const auto& entry : windows) {
    // (Named, not structured bindings: clang 14 cannot capture a binding in the lambdas below.)
    const auto& key = entry.first;
    const Window& win = entry.second;
    out->steps.push_back(StepPath{key.first, key.second, win.a, win.b});
    pieces.clear();
    auto emit_compute = [&](int64_t rank, int64_t a, int64_t b) {
      // Split [a, b) by the rank's main track, backwards (the path is built from the end).
      const RankData& rd = m.ranks.at(rank);
      fwd.clear();
      int64_t cur = a;
      if (rd.main_track >= 0) {
        const std::vector<Seg>& segs = rd.tracks[static_cast<size_t>(rd.main_track)];
        auto it = std::upper_bound(segs.begin(), segs.end(), a,
                                   [](int64_t t, const Seg& s) { return t < s.a; });
        if (it != segs.begin()) --it;
        for (; it != segs.end() && it->a < b; ++it) {
          const int64_t x = std::max(a, it->a), y = std::min(b, it->b);
          if (y <= x) continue;
          if (x > cur)
            fwd.push_back(PathPiece{key.first, key.second, 0, rank, no_span, cur, x - cur});
          fwd.push_back(PathPiece{key.first, key.second, 0, rank, it->name, x, y - x});
          cur = y;
        }
      }
      if (b > cur) fwd.push_back(PathPiece{key.first, key.second, 0, rank, no_span, cur, b - cur});
      for (auto it = fwd.rbegin(); it != fwd.rend(); ++it) pieces.push_back(*it);
    };
    auto emit = [&](int64_t rank, int32_t name, int64_t a, int64_t b) {
      if (b > a) pieces.push_back(PathPiece{key.first, key.second, 0, rank, name, a, b - a});
    };
    int64_t x = win.rank, t = win.b;
    size_t guard = 0;
    const size_t max_steps = 4 * static_cast<size_t>(m.comm_events) + 4 * m.ranks.size() + 16;
    while (t > win.a && guard++ < max_steps) {
      const auto& syncs = by_ts[x];
      // The latest synchronisation of x that started before t.
      auto it = std::lower_bound(syncs.begin(), syncs.end(), t,
                                 [](const Sync* s, int64_t v) { return s->ts < v; });
      if (it == syncs.begin() || (*std::prev(it))->end <= win.a) {
        emit_compute(x, win.a, t);
        break;
      }
      const Sync* e = *std::prev(it);
      if (e->end < t) {
        emit_compute(x, std::max(win.a, e->end), t);
        t = e->end;
        if (t <= win.a) break;
      }
      auto w = wait_at.find(e->id);
      if (w != wait_at.end() && w->second->waited_for != x && w->second->late_ts > e->ts &&
          w->second->late_ts < t && m.ranks.count(w->second->waited_for)) {
        emit(x, e->name, w->second->late_ts, t);
        x = w->second->waited_for;
        t = w->second->late_ts;
      } else {
        emit(x, e->name, std::max(win.a, e->ts), t);
        t = e->ts;
      }
    }
    int64_t order = 0;
    std::pmr::map<std::pair<int64_t, int32_t>, int64_t> on_path(&pool);  // (rank, name) -> ns
    for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
      it->order = order++;
      out->path.push_back(*it);
      on_path[{it->rank, it->name}] += it->dur;
    }
    const size_t first = out->what_if.size();
    for (const auto& [rn, ns] : on_path) {
      Analysis::NameTime k{key.first, key.second, rn.first, rn.second, 0, 0};
      auto t = std::lower_bound(out->name_times.begin(), out->name_times.end(), k,
                                [](const Analysis::NameTime& p, const Analysis::NameTime& q) {
                                  return std::tie(p.has_step, p.step, p.rank, p.name) <
                                         std::tie(q.has_step, q.step, q.rank, q.name);
                                });
      if (t == out->name_times.end() || t->has_step != key.first || t->step != key.second ||
          t->rank != rn.first || t->name != rn.second || t->ns <= t->median_ns)
        continue;
      Analysis::WhatIf w;
      w.has_step = key.first;
      w.step = key.second;
      w.rank = rn.first;
      w.name = rn.second;
      w.ns = t->ns;
      w.median_ns = t->median_ns;
      w.on_path_ns = ns;
      w.step_ns = win.b - win.a;
      w.whatif_step_ns = w.step_ns - std::min(t->ns - t->median_ns, ns);
      out->what_if.push_back(w);
    }
    std::sort(out->what_if.begin() + static_cast<long>(first), out->what_if.end(),
              [](const Analysis::WhatIf& p, const Analysis::WhatIf& q) {
                if (p.whatif_step_ns != q.whatif_step_ns)
                  return p.whatif_step_ns < q.whatif_step_ns;
                return std::tie(p.rank, p.name) < std::tie(q.rank, q.name);
              });
  }
}

}  // namespace tracedb::query::analysis::internal
