// The aggregates of report html, diff and top. See report_data.h; docs/report.md.
#include "query/report/report_data.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "engine/util/percentile_rank.h"
#include "engine/util/saturating.h"
#include "query/sql/functions.h"

namespace tracedb::query {
namespace {

using engine::Db;
using engine::Stmt;

// What the spans of one rank count as, cached per (cat, name).
class ActivityCache {
 public:
  ActivityCache(std::string source, bool gpu) : source_(std::move(source)), gpu_(gpu) {}
  // 0 neither, 1 compute, 2 communication.
  int Of(std::string_view cat, std::string_view name) {
    key_.assign(cat);
    key_ += '\x1f';
    key_ += name;
    auto it = cache_.find(key_);
    if (it != cache_.end()) return it->second;
    const char* a = ActivityOf(source_, cat, name, gpu_);
    const int v = a == nullptr ? 0 : (std::string_view(a) == "compute" ? 1 : 2);
    cache_.emplace(key_, v);
    return v;
  }

 private:
  std::string source_;
  bool gpu_;
  std::string key_;
  std::unordered_map<std::string, int> cache_;
};

// Adds the part of each (merged) interval inside [t0, t0 + bins * bin_ns) to its bins.
// In 128 bits: the bins of a DB made elsewhere can span more than the int64 range (timestamps
// at both of its ends). A bin's total fits: the merged intervals are disjoint, so it is at most
// bin_ns.
void AddToBins(const std::vector<Interval>& merged, int64_t t0, int64_t bin_ns,
               std::vector<int64_t>* bins) {
  const __int128 lo = t0, width = bin_ns;
  const __int128 hi = lo + static_cast<__int128>(bins->size()) * width;
  for (const Interval& iv : merged) {
    __int128 b = std::max<__int128>(iv.begin, lo);
    const __int128 e = std::min<__int128>(iv.end, hi);
    while (b < e) {
      const __int128 i = (b - lo) / width;
      const __int128 stop = std::min(e, lo + (i + 1) * width);
      (*bins)[static_cast<size_t>(i)] += static_cast<int64_t>(stop - b);
      b = stop;
    }
  }
}

StatusOr<std::map<int32_t, std::string>> RankSources(Db* db) {
  std::map<int32_t, std::string> out;
  TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare("SELECT rank, coalesce(source, '') FROM "
                                                "main.ranks"));
  while (true) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out[static_cast<int32_t>(st.Int(0))] = std::string(st.Text(1));
  }
  return out;
}

StatusOr<std::set<int32_t>> GpuRanks(Db* db) {
  std::set<int32_t> out;
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt st, db->Prepare("SELECT DISTINCT ns.rank FROM main.name_stats ns JOIN main.strings c "
                           "ON c.id = ns.cat WHERE c.s = 'kernel'"));
  while (true) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.insert(static_cast<int32_t>(st.Int(0)));
  }
  return out;
}

StatusOr<std::vector<int32_t>> RanksWithEvents(Db* db) {
  std::vector<int32_t> out;
  TRACEDB_ASSIGN_OR_RETURN(Stmt st,
                           db->Prepare("SELECT DISTINCT rank FROM main.blocks ORDER BY rank"));
  while (true) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.push_back(static_cast<int32_t>(st.Int(0)));
  }
  return out;
}

double NormalSf(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

}  // namespace

int64_t MergeIntervals(std::vector<Interval>* v) {
  if (v->empty()) return 0;
  std::sort(v->begin(), v->end(),
            [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  size_t out = 0;
  for (size_t i = 1; i < v->size(); ++i) {
    Interval& last = (*v)[out];
    const Interval& cur = (*v)[i];
    if (cur.begin <= last.end) {
      last.end = std::max(last.end, cur.end);
    } else {
      (*v)[++out] = cur;
    }
  }
  v->resize(out + 1);
  __int128 total = 0;  // saturates: intervals of a DB made elsewhere can cover more than int64
  for (const Interval& iv : *v) total += static_cast<__int128>(iv.end) - iv.begin;
  return engine::SaturateInt64(total);
}

StatusOr<Overview> BuildOverview(Db* db, int bins, int64_t t0, int64_t t1) {
  if (bins < 1) return Status::InvalidArgument("overview: bins must be at least 1");
  Overview ov;
  const bool whole = t1 <= t0;
  if (whole) {
    TRACEDB_ASSIGN_OR_RETURN(t0, db->QueryInt("SELECT min(min_ts) FROM main.blocks", 0));
    TRACEDB_ASSIGN_OR_RETURN(t1, db->QueryInt("SELECT max(max_end) FROM main.blocks", 0));
    if (t1 <= t0) t1 = engine::SaturatingAdd(t0, 1);
  }
  ov.t0 = t0;
  ov.bins = bins;
  // In 128 bits (timestamps of a DB made elsewhere can lie at both ends of the int64 range); t1
  // saturates, so the last bin of such a DB ends at the int64 maximum.
  const __int128 span = static_cast<__int128>(t1) - t0;
  ov.bin_ns = engine::SaturateInt64(std::max<__int128>(1, (span + bins - 1) / bins));
  ov.t1 =
      engine::SaturateInt64(static_cast<__int128>(t0) + static_cast<__int128>(ov.bin_ns) * bins);
  TRACEDB_ASSIGN_OR_RETURN(auto sources, RankSources(db));
  TRACEDB_ASSIGN_OR_RETURN(auto gpu, GpuRanks(db));
  TRACEDB_ASSIGN_OR_RETURN(auto ranks, RanksWithEvents(db));
  std::string sql =
      "SELECT ts, dur, coalesce(cat, ''), name FROM events WHERE rank = ?1 AND kind = 'span'";
  if (!whole) sql += " AND end_ts > ?2 AND ts < ?3";
  TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare(sql));
  std::vector<Interval> compute, comm, busy;
  for (int32_t rank : ranks) {
    st.Reset();
    st.Bind(1, static_cast<int64_t>(rank));
    if (!whole) st.Bind(2, t0).Bind(3, ov.t1);
    ActivityCache act(sources.count(rank) ? sources[rank] : "", gpu.count(rank) > 0);
    RankActivity ra;
    ra.rank = rank;
    ra.first_ts = INT64_MAX;
    ra.last_end = INT64_MIN;
    compute.clear();
    comm.clear();
    busy.clear();
    while (true) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const int64_t ts = st.Int(0);
      const int64_t end = engine::SaturatingAdd(ts, std::max<int64_t>(0, st.Int(1)));
      ++ra.spans;
      ra.first_ts = std::min(ra.first_ts, ts);
      ra.last_end = std::max(ra.last_end, end);
      const int a = act.Of(st.Text(2), st.Text(3));
      if (a == 0 || end <= ts) continue;
      (a == 1 ? compute : comm).push_back({ts, end});
      busy.push_back({ts, end});
    }
    if (ra.spans == 0) continue;
    ra.wall_ns = engine::SaturatingSub(ra.last_end, ra.first_ts);
    ra.compute_ns = MergeIntervals(&compute);
    ra.comm_ns = MergeIntervals(&comm);
    ra.busy_ns = MergeIntervals(&busy);
    ra.compute_bins.assign(static_cast<size_t>(bins), 0);
    ra.comm_bins.assign(static_cast<size_t>(bins), 0);
    ra.busy_bins.assign(static_cast<size_t>(bins), 0);
    AddToBins(compute, ov.t0, ov.bin_ns, &ra.compute_bins);
    AddToBins(comm, ov.t0, ov.bin_ns, &ra.comm_bins);
    AddToBins(busy, ov.t0, ov.bin_ns, &ra.busy_bins);
    ov.ranks.push_back(std::move(ra));
  }
  return ov;
}

StatusOr<std::vector<StepPoint>> BuildStepSeries(Db* db) {
  std::map<int64_t, StepPoint> by_step;
  // Summed wide: a DB made elsewhere can hold durations whose int64 sum overflows (the mean of
  // int64 values always fits).
  std::map<int64_t, __int128> sums;
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt st, db->Prepare("SELECT rank, step, start_ts, dur FROM step_times ORDER BY step, rank"));
  while (true) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    if (st.IsNull(3)) continue;
    const int32_t rank = static_cast<int32_t>(st.Int(0));
    const int64_t step = st.Int(1);
    StepPoint& p = by_step[step];
    const int64_t dur = st.Int(3);
    if (p.ranks == 0) {
      p.step = step;
      p.start_ts = st.Int(2);
    }
    p.start_ts = std::min(p.start_ts, st.Int(2));
    if (p.ranks == 0 || dur > p.max_ns) {  // ties: the lowest rank (rows come by rank)
      p.max_ns = dur;
      p.slowest_rank = rank;
    }
    ++p.ranks;
    sums[step] += dur;
  }
  std::vector<StepPoint> out;
  out.reserve(by_step.size());
  for (auto& [step, p] : by_step) {
    p.mean_ns = engine::SaturateInt64(sums[step] / p.ranks);
    out.push_back(p);
  }
  if (out.size() >= 5) {
    std::vector<double> v;
    for (const auto& p : out) v.push_back(static_cast<double>(p.max_ns));
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    const double med = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    std::vector<double> dev;
    for (double x : v) dev.push_back(std::fabs(x - med));
    std::sort(dev.begin(), dev.end());
    const double mad = n % 2 ? dev[n / 2] : (dev[n / 2 - 1] + dev[n / 2]) / 2;
    // With a MAD of 0 (most steps identical), any step off the median by more than 1% is one.
    const double scale = mad > 0 ? 3.5 * 1.4826 * mad : 0.01 * med;
    for (auto& p : out) p.outlier = std::fabs(static_cast<double>(p.max_ns) - med) > scale;
  }
  return out;
}

StatusOr<std::vector<NameStats>> BuildNameStats(Db* db) {
  TRACEDB_ASSIGN_OR_RETURN(auto sources, RankSources(db));
  const std::string source = sources.empty() ? "" : sources.begin()->second;
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt st, db->Prepare("SELECT name, coalesce(cat, ''), rank, step, dur, bytes FROM events "
                           "WHERE kind = 'span'"));
  std::map<std::pair<std::string, std::string>, size_t> index;
  std::vector<NameStats> out;
  std::vector<std::vector<double>> durs;
  std::vector<std::map<int, uint64_t>> sizes;
  // (name index, step, rank) -> ns in that step.
  std::map<std::tuple<size_t, int64_t, int32_t>, int64_t> per_step;
  auto last_entry = per_step.end();
  std::pair<std::string, std::string> key;
  size_t last = SIZE_MAX;
  while (true) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    const std::string_view name = st.Text(0), cat = st.Text(1);
    size_t i = last;
    if (i == SIZE_MAX || out[i].name != name || out[i].cat != cat) {
      key.first.assign(name);
      key.second.assign(cat);
      auto it = index.find(key);
      if (it == index.end()) {
        it = index.emplace(key, out.size()).first;
        NameStats s;
        s.name = key.first;
        s.cat = key.second;
        const char* a = ActivityOf(source, cat, name, false);
        s.routine = a != nullptr && std::string_view(a) == "comm";
        out.push_back(std::move(s));
        durs.emplace_back();
        sizes.emplace_back();
      }
      i = it->second;
      last = i;
    }
    const int64_t dur = st.Int(4);
    NameStats& s = out[i];
    ++s.count;
    s.total_ns = engine::SaturatingAdd(s.total_ns, dur);  // a hostile DB's durations
    durs[i].push_back(static_cast<double>(dur));
    const int64_t bytes = st.Int(5);  // NULL reads 0
    if (bytes > 0) ++sizes[i][63 - __builtin_clzll(static_cast<uint64_t>(bytes))];
    if (st.IsNull(3)) continue;
    // Rows of a block share rank and mostly step: remember the last entry.
    const std::tuple<size_t, int64_t, int32_t> k{i, st.Int(3), static_cast<int32_t>(st.Int(2))};
    if (last_entry == per_step.end() || last_entry->first != k) {
      last_entry = per_step.try_emplace(k, 0).first;
    }
    last_entry->second = engine::SaturatingAdd(last_entry->second, dur);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    NameStats& s = out[i];
    // From the durations themselves, not total_ns, which saturates on a hostile DB's (the same
    // value otherwise: sums of int64 durations are exact in doubles up to 2^53 ns).
    double dsum = 0;
    for (double d : durs[i]) dsum += d;
    s.mean_ns = s.count ? dsum / static_cast<double>(s.count) : 0;
    s.p50_ns = engine::SaturateInt64(Percentile(&durs[i], 50));  // INT64_MAX rounds to 2^63
    s.p99_ns = engine::SaturateInt64(Percentile(&durs[i], 99));
    std::vector<double>().swap(durs[i]);
    s.size_buckets.assign(sizes[i].begin(), sizes[i].end());
  }
  // Per (name, step): the mean over the ranks that ran that name in that step.
  size_t cur_name = SIZE_MAX;
  int64_t cur_step = 0;
  double sum = 0, least = 0;
  int ranks = 0;
  auto flush = [&] {
    if (cur_name != SIZE_MAX && ranks > 0) {
      out[cur_name].per_step.push_back(sum / ranks);
      out[cur_name].per_step_fastest.push_back(least);
      out[cur_name].per_step_ids.push_back(cur_step);
    }
  };
  for (const auto& [k, ns] : per_step) {
    const auto& [name, step, rank] = k;
    if (name != cur_name || step != cur_step) {
      flush();
      cur_name = name;
      cur_step = step;
      sum = 0;
      ranks = 0;
    }
    least = ranks == 0 ? static_cast<double>(ns) : std::min(least, static_cast<double>(ns));
    sum += static_cast<double>(ns);
    ++ranks;
  }
  flush();
  std::sort(out.begin(), out.end(), [](const NameStats& a, const NameStats& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  return out;
}

StatusOr<CollectiveData> BuildCollectives(Db* db) {
  struct Call {
    int32_t rank;
    size_t coll;
    int64_t ts;
  };
  std::vector<Call> calls;
  std::map<std::pair<int64_t, int64_t>, size_t> index;  // (comm, seq) -> collective
  CollectiveData out;
  std::vector<int64_t> last_ts;
  {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare("SELECT rank, comm, seq, ts FROM "
                                                  "collective_calls"));
    while (true) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const int32_t rank = static_cast<int32_t>(st.Int(0));
      const int64_t ts = st.Int(3);
      auto [it, fresh] = index.emplace(std::pair{st.Int(1), st.Int(2)}, out.collectives.size());
      if (fresh) {
        CollectiveSkew c;
        c.first_arrival = ts;
        c.last_rank = rank;
        out.collectives.push_back(c);
        last_ts.push_back(ts);
      }
      CollectiveSkew& c = out.collectives[it->second];
      int64_t& last = last_ts[it->second];
      ++c.ranks;
      c.first_arrival = std::min(c.first_arrival, ts);
      if (ts > last || (ts == last && rank < c.last_rank)) {
        last = ts;
        c.last_rank = rank;
      }
      calls.push_back({rank, it->second, ts});
    }
  }
  std::map<int32_t, RankCollectives> ranks;
  for (size_t i = 0; i < out.collectives.size(); ++i) {
    CollectiveSkew& c = out.collectives[i];
    // Saturating, as the sums below: arrivals of a DB made elsewhere can be further apart than
    // int64 holds.
    c.skew_ns = engine::SaturatingSub(last_ts[i], c.first_arrival);
    if (c.ranks > 1) {
      RankCollectives& r = ranks[c.last_rank];
      r.rank = c.last_rank;
      ++r.times_last;
      r.caused_wait_ns = engine::SaturatingAdd(r.caused_wait_ns, c.skew_ns);
      r.max_skew_ns = std::max(r.max_skew_ns, c.skew_ns);
    }
  }
  for (const Call& call : calls) {
    RankCollectives& r = ranks[call.rank];
    r.rank = call.rank;
    ++r.collectives;
    r.waited_ns =
        engine::SaturatingAdd(r.waited_ns, engine::SaturatingSub(last_ts[call.coll], call.ts));
    r.late_ns = engine::SaturatingAdd(
        r.late_ns, engine::SaturatingSub(call.ts, out.collectives[call.coll].first_arrival));
  }
  for (auto& [rank, r] : ranks) out.ranks.push_back(r);
  std::sort(out.collectives.begin(), out.collectives.end(),
            [](const CollectiveSkew& a, const CollectiveSkew& b) {
              return a.first_arrival < b.first_arrival;
            });
  return out;
}

std::vector<SkewBin> BinSkew(const CollectiveData& cd, int64_t t0, int bins) {
  std::vector<SkewBin> out;
  std::vector<std::pair<__int128, int64_t>> points;  // (first arrival - t0, skew)
  for (const CollectiveSkew& c : cd.collectives) {
    if (c.ranks > 1) points.push_back({static_cast<__int128>(c.first_arrival) - t0, c.skew_ns});
  }
  if (points.empty() || bins < 1) return out;
  // BuildCollectives orders them by first arrival; a caller's data may not be.
  std::stable_sort(points.begin(), points.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  const __int128 lo = points.front().first, hi = points.back().first + 1;
  const __int128 width = std::max<__int128>(1, (hi - lo + bins - 1) / bins);
  for (size_t i = 0; i < points.size();) {
    const __int128 bin = (points[i].first - lo) / width;
    SkewBin b;
    __int128 sum = 0;  // skews of a DB made elsewhere can sum past int64
    size_t j = i;
    for (; j < points.size() && (points[j].first - lo) / width == bin; ++j) {
      b.max_ns = std::max(b.max_ns, points[j].second);
      sum += points[j].second;
      ++b.collectives;
    }
    b.t = engine::SaturateInt64(lo + bin * width + width / 2);
    b.mean_ns = static_cast<double>(sum) / static_cast<double>(b.collectives);
    out.push_back(b);
    i = j;
  }
  return out;
}

StatusOr<std::vector<int32_t>> FindStragglers(
    Db* db, int limit, std::string* basis, std::vector<std::pair<int32_t, int64_t>>* caused_wait) {
  std::vector<int32_t> out;
  basis->clear();
  if (caused_wait != nullptr) caused_wait->clear();
  {
    TRACEDB_ASSIGN_OR_RETURN(CollectiveData cd, BuildCollectives(db));
    std::vector<const RankCollectives*> order;
    for (const auto& r : cd.ranks) {
      if (r.times_last == 0) continue;
      order.push_back(&r);
      if (caused_wait != nullptr) caused_wait->push_back({r.rank, r.caused_wait_ns});
    }
    std::sort(order.begin(), order.end(), [](const RankCollectives* a, const RankCollectives* b) {
      return a->caused_wait_ns != b->caused_wait_ns ? a->caused_wait_ns > b->caused_wait_ns
                                                    : a->rank < b->rank;
    });
    for (size_t i = 0; i < order.size() && static_cast<int>(i) < limit; ++i) {
      out.push_back(order[i]->rank);
    }
  }
  if (!out.empty()) {
    *basis = "collectives";
    return out;
  }
  TRACEDB_ASSIGN_OR_RETURN(auto steps, BuildStepSeries(db));
  std::map<int32_t, int> slowest;
  std::set<int32_t> ranks;
  for (const auto& p : steps) {
    if (p.ranks > 1) ++slowest[p.slowest_rank];
  }
  std::vector<std::pair<int, int32_t>> order;
  for (const auto& [rank, n] : slowest) order.push_back({-n, rank});
  std::sort(order.begin(), order.end());
  for (size_t i = 0; i < order.size() && static_cast<int>(i) < limit; ++i) {
    out.push_back(order[i].second);
  }
  if (!out.empty()) *basis = "steps";
  return out;
}

StatusOr<RunSummary> BuildRunSummary(Db* db, const std::string& path) {
  RunSummary r;
  r.path = path;
  TRACEDB_ASSIGN_OR_RETURN(int64_t events, db->QueryInt("SELECT sum(count) FROM main.blocks", 0));
  r.events = static_cast<uint64_t>(events);
  TRACEDB_ASSIGN_OR_RETURN(r.names, BuildNameStats(db));
  TRACEDB_ASSIGN_OR_RETURN(auto steps, BuildStepSeries(db));
  for (const auto& p : steps) {
    r.step_ns.push_back(static_cast<double>(p.max_ns));
    r.step_ids.push_back(p.step);
  }
  TRACEDB_ASSIGN_OR_RETURN(Overview ov, BuildOverview(db, 1));
  r.ranks = static_cast<int32_t>(ov.ranks.size());
  double comm = 0, wall = 0;
  for (const auto& ra : ov.ranks) {
    comm += static_cast<double>(ra.comm_ns);
    wall += static_cast<double>(ra.wall_ns);
  }
  r.comm_share = wall > 0 ? comm / wall : 0;
  TRACEDB_ASSIGN_OR_RETURN(r.stragglers,
                           FindStragglers(db, 3, &r.straggler_basis, &r.caused_wait_ns));
  return r;
}

void CompareRuns(RunSummary a, RunSummary b, RunDiff* out) {
  out->a = std::move(a);
  out->b = std::move(b);
  out->names.clear();
  std::map<std::pair<std::string, std::string>, size_t> index;
  auto add = [&](const NameStats& s, bool is_b) {
    auto [it, fresh] = index.emplace(std::pair{s.name, s.cat}, out->names.size());
    if (fresh) {
      NameDiff d;
      d.name = s.name;
      d.cat = s.cat;
      d.routine = s.routine;
      out->names.push_back(d);
    }
    (is_b ? out->names[it->second].b : out->names[it->second].a) = &s;
  };
  for (const auto& s : out->b.names) add(s, true);
  for (const auto& s : out->a.names) add(s, false);
  for (NameDiff& d : out->names) {
    if (d.a == nullptr || d.b == nullptr) continue;
    d.has_change = d.a->mean_ns > 0;
    if (d.has_change) d.mean_change = (d.b->mean_ns - d.a->mean_ns) / d.a->mean_ns;
    if (d.a->total_ns > 0) {
      d.total_change =
          static_cast<double>(d.b->total_ns - d.a->total_ns) / static_cast<double>(d.a->total_ns);
    }
    d.has_test = !d.a->per_step.empty() && !d.b->per_step.empty();
    if (d.has_test) d.test = MannWhitneyU(d.a->per_step, d.b->per_step);
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  };
  out->step_mean_a = mean(out->a.step_ns);
  out->step_mean_b = mean(out->b.step_ns);
  out->step_change =
      out->step_mean_a > 0 ? (out->step_mean_b - out->step_mean_a) / out->step_mean_a : 0;
  out->has_step_test = !out->a.step_ns.empty() && !out->b.step_ns.empty();
  if (out->has_step_test) out->step_test = MannWhitneyU(out->a.step_ns, out->b.step_ns);
}

std::vector<StragglerWait> CompareStragglerWait(const RunSummary& a, const RunSummary& b) {
  std::vector<StragglerWait> out;
  if (a.straggler_basis != "collectives" && b.straggler_basis != "collectives") return out;
  auto wait_of = [](const RunSummary& r, int32_t rank) {
    for (const auto& [k, ns] : r.caused_wait_ns) {
      if (k == rank) return ns;
    }
    return int64_t{0};
  };
  std::set<int32_t> seen;
  for (const RunSummary* r : {&b, &a}) {
    if (r->straggler_basis != "collectives") continue;
    for (int32_t rank : r->stragglers) {
      if (!seen.insert(rank).second) continue;
      out.push_back({rank, wait_of(a, rank), wait_of(b, rank)});
    }
  }
  return out;
}

double Percentile(std::vector<double>* v, double p) {
  if (v->empty()) return 0;
  const size_t rank = engine::NearestRank(p, v->size());
  std::nth_element(v->begin(), v->begin() + static_cast<long>(rank - 1), v->end());
  return (*v)[rank - 1];
}

MannWhitney MannWhitneyU(const std::vector<double>& a, const std::vector<double>& b) {
  MannWhitney r;
  const size_t na = a.size(), nb = b.size();
  if (na == 0 || nb == 0) return r;
  // Mid-ranks of the pooled sample.
  std::vector<std::pair<double, int>> pooled;
  pooled.reserve(na + nb);
  for (double x : a) pooled.push_back({x, 0});
  for (double y : b) pooled.push_back({y, 1});
  std::sort(pooled.begin(), pooled.end());
  const size_t n = pooled.size();
  double rank_sum_a = 0;
  double tie_term = 0;  // sum of t^3 - t over groups of ties
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && pooled[j].first == pooled[i].first) ++j;
    const double mid = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2;
    const double t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    for (size_t k = i; k < j; ++k) {
      if (pooled[k].second == 0) rank_sum_a += mid;
    }
    i = j;
  }
  const double dna = static_cast<double>(na), dnb = static_cast<double>(nb);
  r.u_a = rank_sum_a - dna * (dna + 1) / 2;
  r.u_b = dna * dnb - r.u_a;
  r.effect = r.u_b / (dna * dnb);
  if (tie_term == 0 && na <= 20 && nb <= 20) {
    // Exact: the number of arrangements with U = u, by the recurrence on the largest value.
    // f[i][j][u]: arrangements of i values of a and j of b with U_a = u.
    const size_t umax = na * nb;
    std::vector<std::vector<std::vector<double>>> f(
        na + 1, std::vector<std::vector<double>>(nb + 1, std::vector<double>(umax + 1, 0)));
    for (size_t i = 0; i <= na; ++i) {
      for (size_t j = 0; j <= nb; ++j) {
        if (i == 0 || j == 0) {
          f[i][j][0] = 1;
          continue;
        }
        for (size_t u = 0; u <= i * j; ++u) {
          // The largest value is from a (it beats all j values of b) or from b.
          double v = f[i][j - 1][u];
          if (u >= j) v += f[i - 1][j][u - j];
          f[i][j][u] = v;
        }
      }
    }
    double total = 0;
    for (size_t u = 0; u <= umax; ++u) total += f[na][nb][u];
    const double u_small = std::min(r.u_a, r.u_b);
    double tail = 0;
    for (size_t u = 0; u <= umax && static_cast<double>(u) <= u_small; ++u) tail += f[na][nb][u];
    r.p = std::min(1.0, 2 * tail / total);
    r.exact = true;
    return r;
  }
  const double dn = dna + dnb;
  const double mean = dna * dnb / 2;
  const double var = dna * dnb / 12 * ((dn + 1) - tie_term / (dn * (dn - 1)));
  if (var <= 0) {
    r.p = 1;
    return r;
  }
  const double diff = std::fabs(r.u_a - mean);
  r.z = std::max(0.0, diff - 0.5) / std::sqrt(var);
  if (r.u_a < mean) r.z = -r.z;
  r.p = std::min(1.0, 2 * NormalSf(std::fabs(r.z)));
  return r;
}

}  // namespace tracedb::query
