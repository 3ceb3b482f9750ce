// The MPI report. See mpi_report.h.
#include "query/mpi_report.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace tracedb::query {
namespace {

using engine::Db;
using engine::Stmt;

// Names the interposer records that are not MPI routines a user called, or that bracket the run.
bool Excluded(std::string_view name) {
  return name == "MPI_Init" || name == "MPI_Init_thread" || name == "MPI_Finalize" ||
         name == "mpi_request_start" || name == "mpi_request_complete";
}

Status FromEvents(Db* db, MpiReport* out) {
  std::map<int32_t, RankMpi> ranks;
  {
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st, db->Prepare("SELECT rank, name, count(*), total(bytes), sum(dur) FROM events "
                             "WHERE cat = 'mpi' GROUP BY rank, name"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const auto rank = static_cast<int32_t>(st.Int(0));
      RankMpi& r = ranks[rank];
      r.rank = rank;
      r.has_calls = true;
      const std::string name(st.Text(1));
      if (Excluded(name)) continue;
      RoutineStat s{name, static_cast<uint64_t>(st.Int(2)), st.Double(3), st.Int(4)};
      r.comm_ns += s.time_ns;
      r.routines.push_back(std::move(s));
    }
  }
  // mpitrace's bins: 0 bytes, 1-4, then (2^k, 2^(k+1)].
  {
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st,
        db->Prepare("SELECT rank, name, CASE WHEN bytes = 0 THEN 0 WHEN bytes <= 4 THEN 4 "
                    "ELSE 1 << (log2_bucket(bytes - 1) + 1) END AS hi, count(*), total(bytes), "
                    "sum(dur) FROM events WHERE cat = 'mpi' AND bytes IS NOT NULL "
                    "GROUP BY rank, name, hi ORDER BY rank, name, hi"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const std::string name(st.Text(1));
      if (Excluded(name)) continue;
      SizeBin b;
      b.routine = name;
      b.max_bytes = st.Int(2);
      MessageSizeBin(b.max_bytes, &b.min_bytes, &b.max_bytes);
      b.calls = static_cast<uint64_t>(st.Int(3));
      b.bytes = st.Double(4);
      b.time_ns = st.Int(5);
      ranks[static_cast<int32_t>(st.Int(0))].bins.push_back(std::move(b));
    }
  }
  // Elapsed: MPI_Init to MPI_Finalize when both were recorded, else the rank's time span.
  {
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st, db->Prepare("SELECT rank, min(ts) FILTER (WHERE name IN ('MPI_Init', "
                             "'MPI_Init_thread')), max(end_ts) FILTER (WHERE name = "
                             "'MPI_Finalize') FROM events WHERE cat = 'mpi' GROUP BY rank"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      auto it = ranks.find(static_cast<int32_t>(st.Int(0)));
      if (it != ranks.end() && !st.IsNull(1) && !st.IsNull(2)) {
        it->second.elapsed_ns = st.Int(2) - st.Int(1);
      }
    }
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st,
        db->Prepare("SELECT rank, min(min_ts), max(max_end) FROM main.blocks GROUP BY rank"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      auto it = ranks.find(static_cast<int32_t>(st.Int(0)));
      if (it != ranks.end() && it->second.elapsed_ns == 0) {
        it->second.elapsed_ns = st.Int(2) - st.Int(1);
      }
    }
  }
  for (auto& [rank, r] : ranks) out->ranks.push_back(std::move(r));
  out->source = "recorded";
  return Status::Ok();
}

Status FromProfiles(Db* db, MpiReport* out) {
  std::map<int32_t, RankMpi> ranks;
  {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st,
                             db->Prepare("SELECT rank, routine, calls, bytes, time_ns, source FROM "
                                         "main.mpi_profile WHERE rank >= 0"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const auto rank = static_cast<int32_t>(st.Int(0));
      RankMpi& r = ranks[rank];
      r.rank = rank;
      r.has_calls = true;
      RoutineStat s{std::string(st.Text(1)), static_cast<uint64_t>(st.Int(2)), st.Double(3),
                    st.Int(4)};
      r.routines.push_back(std::move(s));
      if (out->source.empty() && !st.IsNull(5)) out->source = std::string(st.Text(5));
    }
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st, db->Prepare("SELECT rank, routine, min_bytes, max_bytes, calls, avg_bytes, "
                             "time_ns FROM main.mpi_msgsize ORDER BY rank, routine, min_bytes"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      SizeBin b;
      b.routine = std::string(st.Text(1));
      b.min_bytes = st.Int(2);
      b.max_bytes = st.Int(3);
      b.calls = static_cast<uint64_t>(st.Int(4));
      b.bytes = st.Double(5) * static_cast<double>(b.calls);
      b.time_ns = st.Int(6);
      const auto rank = static_cast<int32_t>(st.Int(0));
      ranks[rank].rank = rank;
      ranks[rank].bins.push_back(std::move(b));
    }
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st, db->Prepare("SELECT rank, host, comm_ns, elapsed_ns, user_ns, system_ns, "
                             "maxrss_bytes FROM main.rank_times WHERE rank >= 0"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const auto rank = static_cast<int32_t>(st.Int(0));
      RankMpi& r = ranks[rank];
      r.rank = rank;
      if (!st.IsNull(1)) r.host = std::string(st.Text(1));
      if (!st.IsNull(2)) r.comm_ns = st.Int(2);
      if (!st.IsNull(3)) r.elapsed_ns = st.Int(3);
      if (!st.IsNull(4)) r.user_ns = st.Int(4);
      if (!st.IsNull(5)) r.system_ns = st.Int(5);
      if (!st.IsNull(6)) r.maxrss_bytes = st.Int(6);
    }
  }
  for (auto& [rank, r] : ranks) {
    if (r.comm_ns == 0) {
      for (const RoutineStat& s : r.routines) r.comm_ns += s.time_ns;
    }
    out->ranks.push_back(std::move(r));
  }
  if (out->source.empty()) out->source = "profile";
  return Status::Ok();
}

// The extremes an imported mpitrace profile states: rank 0's "minimum/median/maximum
// communication time = X sec for task T" and every file's "MPI task T of N had the ...
// communication time." (keys written by the mpitrace importer).
Status StatedExtremes(Db* db, MpiReport* report) {
  TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare("SELECT key, value FROM main.meta WHERE key LIKE "
                                                "'mpitrace.comm_time_%'"));
  std::map<std::string, int64_t> v;
  for (;;) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    v[std::string(st.Text(0))] = st.Int(1);
  }
  const std::pair<const char*, CommExtreme*> which[] = {
      {"min", &report->min}, {"med", &report->median}, {"max", &report->max}};
  for (const auto& [key, e] : which) {
    const std::string prefix = std::string("mpitrace.comm_time_") + key;
    auto task = v.find(prefix + "_task");
    if (task == v.end()) continue;
    e->rank = static_cast<int32_t>(task->second);
    e->stated = true;
    auto ns = v.find(prefix + "_ns");
    if (ns != v.end()) {
      e->comm_ns = ns->second;
    } else {
      for (const RankMpi& r : report->ranks) {
        if (r.rank == e->rank) e->comm_ns = r.comm_ns;
      }
    }
  }
  return Status::Ok();
}

// The extremes the input does not state, computed as mpitrace does (sort by time, take the
// first, the lower median and the last), but only when every rank of the job has a time.
void ComputeExtremes(MpiReport* report) {
  std::vector<const RankMpi*> v;
  for (const RankMpi& r : report->ranks) v.push_back(&r);
  if (v.empty() || static_cast<int32_t>(v.size()) != report->world_size) return;
  std::sort(v.begin(), v.end(), [](const RankMpi* a, const RankMpi* b) {
    return a->comm_ns != b->comm_ns ? a->comm_ns < b->comm_ns : a->rank < b->rank;
  });
  const std::pair<const RankMpi*, CommExtreme*> picks[] = {{v.front(), &report->min},
                                                           {v[(v.size() - 1) / 2], &report->median},
                                                           {v.back(), &report->max}};
  for (const auto& [r, e] : picks) {
    if (e->stated) continue;
    e->rank = r->rank;
    e->comm_ns = r->comm_ns;
  }
}

}  // namespace

void MessageSizeBin(int64_t bytes, int64_t* lo, int64_t* hi) {
  if (bytes <= 0) {
    *lo = *hi = 0;
  } else if (bytes <= 4) {
    *lo = 1;
    *hi = 4;
  } else {
    int64_t p = 8;
    while (p < bytes && p < (int64_t{1} << 62)) p *= 2;
    *lo = p / 2 + 1;
    *hi = p;
  }
}

StatusOr<MpiReport> BuildMpiReport(Db* db) {
  MpiReport report;
  TRACEDB_ASSIGN_OR_RETURN(
      int64_t recorded,
      db->QueryInt("SELECT count(*) FROM main.block_names bn JOIN main.strings s ON s.id = bn.cat "
                   "WHERE s.s = 'mpi'",
                   0));
  if (recorded > 0) {
    TRACEDB_RETURN_IF_ERROR(FromEvents(db, &report));
  } else {
    TRACEDB_ASSIGN_OR_RETURN(int64_t profiled,
                             db->QueryInt("SELECT (SELECT count(*) FROM main.mpi_profile) + "
                                          "(SELECT count(*) FROM main.rank_times)",
                                          0));
    if (profiled == 0) {
      return Status::NotFound(db->path() +
                              ": no MPI data (no events of category 'mpi', no imported "
                              "mpitrace or mpiP profile)");
    }
    TRACEDB_RETURN_IF_ERROR(FromProfiles(db, &report));
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare("SELECT rank, host, world_size FROM main.ranks"));
    std::map<int32_t, std::pair<std::string, int32_t>> hosts;
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      hosts[static_cast<int32_t>(st.Int(0))] = {std::string(st.Text(1)),
                                                static_cast<int32_t>(st.Int(2))};
    }
    for (RankMpi& r : report.ranks) {
      auto it = hosts.find(r.rank);
      if (it == hosts.end()) continue;
      if (r.host.empty()) r.host = it->second.first;
      report.world_size = std::max(report.world_size, it->second.second);
    }
  }
  if (report.source == "mpitrace") {
    // The world size every profile states ("Data for MPI rank R of N").
    TRACEDB_ASSIGN_OR_RETURN(
        int64_t n, db->QueryInt("SELECT coalesce(max(CAST(value AS INTEGER)), 0) FROM main.meta "
                                "WHERE key = 'mpitrace.world_size'",
                                0));
    report.world_size = std::max<int32_t>(report.world_size, static_cast<int32_t>(n));
  }
  report.world_size =
      std::max<int32_t>(report.world_size, static_cast<int32_t>(report.ranks.size()));
  for (const RankMpi& r : report.ranks) report.ranks_with_calls += r.has_calls ? 1 : 0;
  if (report.source == "mpitrace") TRACEDB_RETURN_IF_ERROR(StatedExtremes(db, &report));
  ComputeExtremes(&report);
  for (RankMpi& r : report.ranks) {
    std::sort(r.routines.begin(), r.routines.end(), [](const RoutineStat& a, const RoutineStat& b) {
      return a.time_ns != b.time_ns ? a.time_ns > b.time_ns : a.routine < b.routine;
    });
  }
  return report;
}

std::vector<RoutineSpread> SpreadAcrossRanks(const MpiReport& r) {
  std::map<std::string, std::vector<std::pair<int32_t, const RoutineStat*>>> by_routine;
  for (const RankMpi& rank : r.ranks) {
    for (const RoutineStat& s : rank.routines) by_routine[s.routine].emplace_back(rank.rank, &s);
  }
  std::vector<RoutineSpread> out;
  for (const auto& [name, per_rank] : by_routine) {
    RoutineSpread s;
    s.routine = name;
    s.ranks = static_cast<int>(per_rank.size());
    s.min_ns = 1e300;
    double sum = 0, sum2 = 0;
    for (const auto& [rank, st] : per_rank) {
      s.calls += st->calls;
      s.bytes += st->bytes;
      s.time_ns += st->time_ns;
      const double t = static_cast<double>(st->time_ns);
      sum += t;
      sum2 += t * t;
      if (t < s.min_ns) {
        s.min_ns = t;
        s.min_rank = rank;
      }
      if (t >= s.max_ns) {
        s.max_ns = t;
        s.max_rank = rank;
      }
    }
    s.mean_ns = sum / s.ranks;
    const double var = std::max(0.0, sum2 / s.ranks - s.mean_ns * s.mean_ns);
    s.cov = s.mean_ns > 0 ? std::sqrt(var) / s.mean_ns : 0;
    out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [](const RoutineSpread& a, const RoutineSpread& b) {
    return a.time_ns != b.time_ns ? a.time_ns > b.time_ns : a.routine < b.routine;
  });
  return out;
}

}  // namespace tracedb::query
