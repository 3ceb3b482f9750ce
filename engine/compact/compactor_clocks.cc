// Compaction's clocks. See compactor_clocks.h.
#include "engine/compact/compactor_clocks.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "engine/segment/segment_format.h"

namespace tracedb::engine::compaction {
namespace {

// dv * dt / span for 0 <= dt <= span (a linear interpolation), exact in 128 bits when the
// product fits, else in long double; values from hostile files never overflow.
__int128 Interpolate(int64_t dv, __int128 dt, __int128 span) {
  if (span <= 0) return 0;
  constexpr __int128 kLimit = static_cast<__int128>(1) << 62;
  if (dt >= -kLimit && dt <= kLimit) return static_cast<__int128>(dv) * dt / span;
  return static_cast<__int128>(static_cast<long double>(dv) * static_cast<long double>(dt) /
                               static_cast<long double>(span));
}

}  // namespace

StatusOr<std::map<ProcessKey, ProcessClock>> BuildClocks(Db* db) {
  std::map<ProcessKey, std::string> hosts;
  {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare("SELECT rank, pid, host FROM processes"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      hosts[{static_cast<int32_t>(st.Int(0)), static_cast<uint32_t>(st.Int(1))}] =
          std::string(st.Text(2));
    }
  }
  std::map<ProcessKey, ClockModel> anchor_models;
  std::map<ProcessKey, int64_t> anchor_unc;
  std::map<ProcessKey, int64_t> anchor_last;
  {
    // Built at once per process (ClockModel::FromKnots): knot by knot was quadratic.
    std::map<ProcessKey, std::vector<std::pair<int64_t, int64_t>>> knots;
    TRACEDB_ASSIGN_OR_RETURN(Stmt st,
                             db->Prepare("SELECT rank, pid, local_ns, common_ns, uncertainty_ns "
                                         "FROM clock_knots WHERE kind = 'anchor'"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const ProcessKey key{static_cast<int32_t>(st.Int(0)), static_cast<uint32_t>(st.Int(1))};
      knots[key].emplace_back(st.Int(2), st.Int(3));
      anchor_unc[key] = std::max(anchor_unc[key], st.Int(4));
      auto [last, fresh] = anchor_last.try_emplace(key, st.Int(2));
      if (!fresh) last->second = std::max(last->second, st.Int(2));
    }
    for (auto& [key, k] : knots) anchor_models[key] = ClockModel::FromKnots(std::move(k));
  }
  std::map<ProcessKey, std::vector<SyncPoint>> syncs;
  {
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st, db->Prepare("SELECT rank, pid, ref_rank, local_ns, offset_ns, uncertainty_ns "
                             "FROM sync_points WHERE ref_rank = 0 ORDER BY local_ns"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      syncs[{static_cast<int32_t>(st.Int(0)), static_cast<uint32_t>(st.Int(1))}].push_back(
          SyncPoint{static_cast<int32_t>(st.Int(2)), st.Int(3), st.Int(4), st.Int(5)});
    }
  }
  // The reference: rank 0's process whose anchors start first (then the lowest pid). The common
  // clock is its recorder clock plus one offset (realtime at its first anchor), so its times
  // and durations are exactly what it recorded. `to_common` maps realtime onto it: the
  // reference's anchors inverted (realtime -> its clock), then the offset.
  const ProcessKey* ref = nullptr;
  for (const auto& [key, anchors] : anchor_models) {
    if (key.first != 0 || anchors.empty()) continue;
    const int64_t start = SaturatingAdd(anchors.first_local(), anchors.offset_ns());
    if (ref == nullptr ||
        start < SaturatingAdd(anchor_models[*ref].first_local(), anchor_models[*ref].offset_ns())) {
      ref = &key;
    }
  }
  std::string host0;  // the reference's host (else any rank-0 process's)
  for (const auto& [key, host] : hosts) {
    if (key.first == 0 && (host0.empty() || (ref != nullptr && key == *ref))) host0 = host;
  }
  ClockModel to_common;  // realtime -> common; empty (identity) without a reference
  int64_t ref_unc = 0;
  if (ref != nullptr) {
    const ClockModel& a0 = anchor_models[*ref];
    const ClockModel back = a0.Inverted();  // realtime -> reference clock
    to_common = ClockModel::Compose(back, ClockModel::Offset(a0.first_local(), a0.offset_ns()));
    ref_unc = anchor_unc[*ref];
  }

  std::map<ProcessKey, ProcessClock> out;
  // Rank 0's processes first: the sync points of other hosts are measured against them.
  std::vector<std::pair<const ClockModel*, const ClockModel*>> rank0_models;  // (anchors, model)
  for (const auto& [key, anchors] : anchor_models) {
    if (key.first != 0) continue;
    ProcessClock& pc = out[key];
    pc.last_anchor_local = anchor_last[key];  // when it was last seen (open spans end there)
    const auto sync_it = syncs.find(key);
    pc.sync_points = sync_it != syncs.end() ? static_cast<int64_t>(sync_it->second.size()) : 0;
    if (ref != nullptr && key == *ref) {
      pc.model = ClockModel::Offset(anchors.first_local(), anchors.offset_ns());
      pc.method = "reference";
      pc.uncertainty_ns = 0;
    } else {
      // Another process of rank 0: through realtime, as a process on rank 0's host.
      pc.model = ClockModel::Compose(anchors, to_common);
      pc.method = "same-host";
      pc.uncertainty_ns = SaturatingAdd(anchor_unc[key], ref_unc);
    }
    rank0_models.emplace_back(&anchors, &pc.model);
  }
  // The model of the rank-0 process whose anchors cover rank-0 clock time t (else the first).
  auto rank0_at = [&](int64_t t) -> const ClockModel* {
    for (const auto& [a, m] : rank0_models) {
      if (a->first_local() <= t && t <= a->last_local()) return m;
    }
    return rank0_models.empty() ? nullptr : rank0_models.front().second;
  };

  for (const auto& [key, anchors] : anchor_models) {
    if (key.first == 0) continue;
    ProcessClock& pc = out[key];
    pc.last_anchor_local = anchor_last[key];
    const auto host_it = hosts.find(key);
    const bool same_host = host_it != hosts.end() && !host0.empty() && host_it->second == host0;
    const auto sync_it = syncs.find(key);
    const bool have_sync = sync_it != syncs.end() && !sync_it->second.empty();
    pc.sync_points = have_sync ? static_cast<int64_t>(sync_it->second.size()) : 0;
    if (same_host || !have_sync || rank0_models.empty()) {
      // Realtime onto the common clock: exact for rank 0's host (one realtime clock), as good
      // as NTP for another host without sync points.
      pc.model = ClockModel::Compose(anchors, to_common);
      pc.method = same_host ? "same-host" : "realtime";
      pc.uncertainty_ns = same_host ? SaturatingAdd(anchor_unc[key], ref_unc) : -1;
      continue;
    }
    // Another host: subtract the realtime difference to rank 0's host, measured at each sync
    // point and interpolated between them (delta(t) = realtime_r(t) - common(t)).
    std::vector<std::pair<int64_t, int64_t>> delta;  // (local, delta)
    int64_t sync_unc = 0;
    // Saturating arithmetic throughout: sync points and anchors come from files.
    for (const SyncPoint& s : sync_it->second) {
      const int64_t ref_local = SaturatingAdd(s.local_ns, s.offset_ns);
      const ClockModel* m0 = rank0_at(ref_local);
      const int64_t common = m0->Map(ref_local);
      delta.emplace_back(s.local_ns, SaturatingSub(anchors.Map(s.local_ns), common));
      sync_unc = std::max(sync_unc, s.uncertainty_ns);
    }
    auto delta_at = [&](int64_t t) -> int64_t {
      if (t <= delta.front().first) return delta.front().second;
      if (t >= delta.back().first) return delta.back().second;
      auto it = std::upper_bound(delta.begin(), delta.end(), t,
                                 [](int64_t v, const auto& p) { return v < p.first; });
      const auto& b = *it;
      const auto& a = *std::prev(it);
      return SaturateInt64(a.second + Interpolate(SaturatingSub(b.second, a.second),
                                                  static_cast<__int128>(t) - a.first,
                                                  static_cast<__int128>(b.first) - a.first));
    };
    ClockModel model;
    for (const auto& [local, d] : delta) model.AddKnot(local, SaturatingSub(anchors.Map(local), d));
    // Anchors keep the rate of the process's clock right between sync points.
    ClockModel probe = anchors;
    const int64_t lo = anchors.first_local(), hi = anchors.last_local();
    for (int64_t t : {lo, hi}) model.AddKnot(t, SaturatingSub(probe.Map(t), delta_at(t)));
    pc.model = model;
    pc.method = "sync";
    pc.uncertainty_ns = SaturatingAdd(sync_unc, anchor_unc[key]);
  }
  return out;
}

// Writes every rank's clock columns into `ranks`. `stored` holds the ranks whose row this run
// has already updated (clocks do not change during a run): they are skipped, so that calling
// this after every file costs O(ranks) comparisons, not O(ranks) UPDATEs (O(ranks^2) in all:
// 26.6 -> 15 s of CPU at 4,096 ranks). A rank whose row does not exist yet stays out of
// `stored`. Once every rank of `clocks` is stored it returns at once: walking the map and
// building `done` per file was still O(ranks) per file (docs/bench-compaction.md "4,096 ranks").
Status StoreRankClocks(Db* db, const std::map<ProcessKey, ProcessClock>& clocks, size_t clock_ranks,
                       std::set<int32_t>* stored) {
  if (stored->size() >= clock_ranks) return Status::Ok();
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt st, db->Prepare("UPDATE ranks SET clock_method = ?2, offset_ns = ?3, drift_ppm = ?4, "
                           "uncertainty_ns = ?5, sync_points = ?6 WHERE rank = ?1"));
  // The rank's first process speaks for it; for rank 0, the reference process.
  std::map<int32_t, const ProcessClock*> speaker;
  for (const auto& [key, pc] : clocks) {
    const ProcessClock*& sp = speaker[key.first];
    if (sp == nullptr || (pc.method == "reference" && sp->method != "reference")) sp = &pc;
  }
  for (const auto& [key, pc] : clocks) {
    if (speaker[key.first] != &pc) continue;
    if (stored->count(key.first)) continue;
    st.Bind(1, key.first)
        .Bind(2, pc.method)
        .Bind(3, pc.model.offset_ns())
        .Bind(4, pc.model.drift_ppm());
    if (pc.uncertainty_ns >= 0)
      st.Bind(5, pc.uncertainty_ns);
    else
      st.BindNull(5);
    st.Bind(6, pc.sync_points);
    TRACEDB_RETURN_IF_ERROR(st.Run());
    if (db->Changes() > 0) stored->insert(key.first);
  }
  return Status::Ok();
}

}  // namespace tracedb::engine::compaction
