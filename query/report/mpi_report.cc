// The MPI report. See mpi_report.h.
#include "query/report/mpi_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/db/block_check.h"
#include "engine/db/block_store.h"
#include "engine/db/event_block.h"
#include "engine/util/saturating.h"

namespace tracedb::query {
namespace {

using engine::Db;
using engine::Stmt;

// Names the interposer records that are not MPI routines a user called, or that bracket the run.
bool Excluded(std::string_view name) {
  return name == "MPI_Init" || name == "MPI_Init_thread" || name == "MPI_Finalize" ||
         name == "mpi_request_start" || name == "mpi_request_complete";
}

// mpitrace's bins as the SQL `CASE WHEN bytes = 0 THEN 0 WHEN bytes <= 4 THEN 4 ELSE
// 1 << (log2_bucket(bytes - 1) + 1) END` computes the upper bound (log2_bucket: the floor of the
// double's log2, query/sql/functions.cc; SQLite's << gives 0 from a shift of 64 on).
int64_t BinUpperBound(int64_t bytes) {
  if (bytes == 0) return 0;
  if (bytes <= 4) return 4;
  const double x = static_cast<double>(bytes - 1);
  const int64_t shift = (x < 1 ? 0 : static_cast<int64_t>(std::floor(std::log2(x)))) + 1;
  return shift >= 64 ? 0 : static_cast<int64_t>(uint64_t{1} << shift);
}

// Sums as SQL's sum(dur) (an integer; overflow is an error) and total(bytes) (a double: the
// exact sum, rounded once, which is SQLite's value while the partial sums are exact).
struct Sums {
  uint64_t calls = 0;
  __int128 bytes = 0, dur = 0;
};

// What the events of category 'mpi' give the report, in one pass over their decoded blocks
// (block_names finds them): per (rank, name) the calls, bytes and time; per (rank, name,
// message-size bin) the same; per rank the first MPI_Init[_thread] and the last MPI_Finalize
// end. The same values, groups and order as the SQL
//   SELECT rank, name, count(*), total(bytes), sum(dur) FROM events WHERE cat = 'mpi'
//   GROUP BY rank, name   (and the bins: GROUP BY rank, name, hi ORDER BY rank, name, hi)
// which ran each as a scan of `events` through SQLite's row engine (9x DuckDB's CPU time for
// the same queries at 10M events, docs/bench-db.md); tests/mpi_report_events_test.cc compares
// them.
Status FromEvents(Db* db, MpiReport* out) {
  // The strings as the events table reads them: an id past the last string is a NULL name
  // (kNull), an id inside without a row reads "" (query/sql/events_catalog.cc); category 0 or one
  // whose text is not 'mpi' is not 'mpi'. Names are grouped by text.
  constexpr int32_t kNull = -1;
  std::vector<int32_t> name_of_id;  // string id -> index into names
  std::vector<std::string> names;
  std::vector<uint8_t> is_mpi;
  enum : uint8_t { kInit = 1, kFinalize = 2 };
  std::vector<uint8_t> name_flags;  // by index into names
  std::vector<int64_t> mpi_ids;
  {
    std::map<std::string, int32_t> index;
    std::vector<std::pair<int64_t, int32_t>> ids;
    // Tables indexed by id are sized by the row count, not the largest id (a hostile file's
    // one row at id 4e9 would ask for gigabytes): ids past DenseIdLimit are left out, as by
    // the events table (engine/db/block_check.h).
    TRACEDB_ASSIGN_OR_RETURN(int64_t nstrings,
                             db->QueryInt("SELECT count(*) FROM main.strings", 0));
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare("SELECT id, s FROM main.strings ORDER BY id"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const int64_t id = st.Int(0);
      if (!engine::DenseIdOk(id, nstrings) || id > UINT32_MAX) continue;
      std::string text(st.Text(1));
      if (id != 0 && text == "mpi") {
        mpi_ids.push_back(id);
        if (is_mpi.size() <= static_cast<size_t>(id)) is_mpi.resize(static_cast<size_t>(id) + 1);
        is_mpi[static_cast<size_t>(id)] = 1;
      }
      auto [it, fresh] = index.try_emplace(std::move(text), static_cast<int32_t>(names.size()));
      if (fresh) names.push_back(it->first);
      ids.emplace_back(id, it->second);
    }
    if (mpi_ids.empty()) {
      out->source = "recorded";
      return Status::Ok();
    }
    const size_t size = ids.empty() ? 0 : static_cast<size_t>(ids.back().first) + 1;
    int32_t empty = -1;  // a hole reads ""
    name_of_id.assign(size, -2);
    for (auto [id, idx] : ids) name_of_id[static_cast<size_t>(id)] = idx;
    for (int32_t& idx : name_of_id) {
      if (idx != -2) continue;
      if (empty < 0) {
        auto [it, fresh] = index.try_emplace("", static_cast<int32_t>(names.size()));
        if (fresh) names.push_back("");
        empty = it->second;
      }
      idx = empty;
    }
    name_flags.assign(names.size(), 0);
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == "MPI_Init" || names[i] == "MPI_Init_thread") name_flags[i] = kInit;
      if (names[i] == "MPI_Finalize") name_flags[i] = kFinalize;
    }
  }
  // Groups, keyed by (rank, name index + 1, hi): name index 0 is NULL.
  std::map<std::pair<int64_t, int32_t>, Sums> by_name;
  std::map<std::tuple<int64_t, int32_t, int64_t>, Sums> by_bin;
  struct Elapsed {
    bool has_init = false, has_finalize = false;
    int64_t init = 0, finalize = 0;
  };
  std::map<int64_t, Elapsed> elapsed;
  constexpr uint32_t kWant =
      engine::kColName | engine::kColCat | engine::kColTs | engine::kColDur | engine::kColArgs;
  // The last group touched, to skip the map search for runs of one routine.
  std::pair<int64_t, int32_t> last_key{0, -3};
  Sums* last = nullptr;
  // The blocks that hold an event of category "mpi", decoded in one pass (the block store,
  // which checks each one's zone map and row count).
  engine::BlockStore store(db, db->path(), "main");
  engine::BlockSelection sel;
  sel.cats = mpi_ids;
  sel.order = engine::BlockSelection::Order::kBlock;
  auto per_block = [&](const engine::BlockZoneRow& z, engine::DecodedBlock& b) -> Status {
    const int64_t rank = z.rank;
    for (size_t i = 0; i < b.n; ++i) {
      const uint32_t c = b.cat[i];
      if (c >= is_mpi.size() || !is_mpi[c]) continue;
      const uint32_t n = b.name[i];
      const int32_t name = n < name_of_id.size() ? name_of_id[n] : kNull;
      const std::pair<int64_t, int32_t> key{rank, name + 1};
      if (last == nullptr || key != last_key) {
        last = &by_name[key];
        last_key = key;
      }
      const int64_t dur = b.dur[i];
      last->calls++;
      last->dur += dur;
      if (b.arg_mask[i] & engine::EventArgs::kBytes) {
        const auto bytes = static_cast<int64_t>(b.bytes[i]);  // as the events table's column
        last->bytes += bytes;
        Sums& bin = by_bin[{rank, name + 1, BinUpperBound(bytes)}];
        bin.calls++;
        bin.bytes += bytes;
        bin.dur += dur;
      }
      const uint8_t flags = name == kNull ? 0 : name_flags[static_cast<size_t>(name)];
      if (flags == 0) continue;
      Elapsed& e = elapsed[rank];
      if (flags == kInit) {
        if (!e.has_init || b.ts[i] < e.init) e.init = b.ts[i];
        e.has_init = true;
      } else {
        const int64_t end = engine::SaturatingAdd(b.ts[i], dur);  // as events.end_ts
        if (!e.has_finalize || end > e.finalize) e.finalize = end;
        e.has_finalize = true;
      }
    }
    return Status::Ok();
  };
  TRACEDB_RETURN_IF_ERROR(store.ForEachDecoded(sel, kWant, per_block));
  auto to_int64 = [](__int128 v, int64_t* out) {
    if (v > INT64_MAX || v < INT64_MIN) return Status::Corruption("integer overflow");
    *out = static_cast<int64_t>(v);
    return Status::Ok();
  };
  // Group order: rank, then name (NULL first, then by bytes as SQLite's BINARY), then bin.
  std::vector<int32_t> order(names.size() + 1);
  {
    std::vector<int32_t> idx(names.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
    std::sort(idx.begin(), idx.end(), [&](int32_t x, int32_t y) { return names[x] < names[y]; });
    order[0] = 0;
    for (size_t i = 0; i < idx.size(); ++i)
      order[static_cast<size_t>(idx[i]) + 1] = static_cast<int32_t>(i + 1);
  }
  auto text = [&](int32_t key) { return key == 0 ? std::string() : names[key - 1]; };
  std::map<int32_t, RankMpi> ranks;
  for (const auto& [key, sums] : by_name) {
    const auto rank = static_cast<int32_t>(key.first);
    RankMpi& r = ranks[rank];
    r.rank = rank;
    r.has_calls = true;
    const std::string name = text(key.second);
    if (Excluded(name)) continue;
    RoutineStat s{name, sums.calls, static_cast<double>(sums.bytes), 0};
    TRACEDB_RETURN_IF_ERROR(to_int64(sums.dur, &s.time_ns));
    r.comm_ns = engine::SaturatingAdd(r.comm_ns, s.time_ns);
    r.routines.push_back(std::move(s));
  }
  std::vector<std::pair<std::tuple<int64_t, int32_t, int64_t>, const Sums*>> bins;
  for (const auto& [key, sums] : by_bin) bins.emplace_back(key, &sums);
  std::sort(bins.begin(), bins.end(), [&](const auto& x, const auto& y) {
    const auto& [xr, xn, xh] = x.first;
    const auto& [yr, yn, yh] = y.first;
    if (xr != yr) return xr < yr;
    if (xn != yn) return order[xn] < order[yn];
    return xh < yh;
  });
  for (const auto& [key, sums] : bins) {
    const auto& [rank, name_key, hi] = key;
    const std::string name = text(name_key);
    if (Excluded(name)) continue;
    SizeBin bin;
    bin.routine = name;
    bin.max_bytes = hi;
    MessageSizeBin(bin.max_bytes, &bin.min_bytes, &bin.max_bytes);
    bin.calls = sums->calls;
    bin.bytes = static_cast<double>(sums->bytes);
    TRACEDB_RETURN_IF_ERROR(to_int64(sums->dur, &bin.time_ns));
    ranks[static_cast<int32_t>(rank)].bins.push_back(std::move(bin));
  }
  // Elapsed: MPI_Init to MPI_Finalize when both were recorded, else the rank's time span.
  for (const auto& [rank, e] : elapsed) {
    auto it = ranks.find(static_cast<int32_t>(rank));
    if (it != ranks.end() && e.has_init && e.has_finalize) {
      it->second.elapsed_ns = engine::SaturatingSub(e.finalize, e.init);
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
        it->second.elapsed_ns = engine::SaturatingSub(st.Int(2), st.Int(1));
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
      for (const RoutineStat& s : r.routines)
        r.comm_ns = engine::SaturatingAdd(r.comm_ns, s.time_ns);
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
      s.time_ns = engine::SaturatingAdd(s.time_ns, st->time_ns);
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
