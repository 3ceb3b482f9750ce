// Database benchmark helper (measures; not a test):
//   db_bench queries JOB.tdb [REPS] [NAME...]
//       times the benchmark's queries on a trace database in-process (median of REPS runs):
//       top-10 slowest COMMUNICATE, a per-rank x name aggregate (over decoded events, and from
//       the summary table), a full-scan count; prints "name wall_ms rows cpu_ms" lines (medians).
//       NAMEs: only those.
//   db_bench sqlite-rows EVENTS.csv OUT.db [REPS]
//       loads the same events into a plain SQLite table with two indexes (the row-per-event
//       baseline) and prints its bytes per event; then times median and 95th percentile by name
//       over that table (SQLite's own floor for them: the index on (name, dur) serves the rows
//       in group order, no virtual table) as "sqlite_rows_NAME wall_ms rows cpu_ms" lines.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/db/sqlite.h"
#include "query/open/query_db.h"
#include "query/sql/functions.h"

namespace {

using tracedb::engine::Db;

struct Query {
  const char* name;
  const char* sql;
};

// The same names and rows as duckdb_bench.mjs (there a track is (rank, tid)).
const Query kQueries[] = {
    {"top10",
     "SELECT rank, ts, dur FROM events WHERE name = 'COMMUNICATE' "
     "ORDER BY dur DESC LIMIT 10"},
    {"rank_name_agg",
     "SELECT rank, name, count(*), sum(dur), max(dur) FROM events "
     "GROUP BY rank, name"},
    {"track_name_agg",
     "SELECT track, name, count(*), sum(dur), max(dur) FROM events "
     "GROUP BY track, name"},
    {"median_by_name", "SELECT name, median(dur) FROM events GROUP BY name"},
    {"p95_by_name", "SELECT name, percentile(dur, 95) FROM events GROUP BY name"},
    {"rank_name_summary",
     "SELECT rank, name, sum(count), sum(total_ns), max(max_ns) "
     "FROM name_summary GROUP BY rank, name"},
    {"count_scan", "SELECT count(*) FROM events WHERE dur >= 0"},
    // A count whose condition no zone map settles: every block's depth column is decoded
    // and checked (count_scan's `dur >= 0` is settled by name_stats: no block is decoded).
    {"count_depth", "SELECT count(*) FROM events WHERE depth >= 0"},
};

// CPU time of this process (every thread), ms: on a shared machine, wall time also counts
// the time other work held the cores.
double CpuMs() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// Runs `q` REPS times on `db`; prints "PREFIXname wall_ms rows cpu_ms" (medians).
int TimeQuery(Db* db, const Query& q, int reps, const char* prefix) {
  std::vector<double> ms, cpu_ms;
  uint64_t rows = 0;
  for (int r = 0; r < reps; ++r) {
    const double c0 = CpuMs();
    const auto t0 = std::chrono::steady_clock::now();
    auto st = db->Prepare(q.sql);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.status().ToString().c_str());
      return 1;
    }
    rows = 0;
    for (;;) {
      auto row = st->Step();
      if (!row.ok()) {
        std::fprintf(stderr, "%s\n", row.status().ToString().c_str());
        return 1;
      }
      if (!*row) break;
      ++rows;
    }
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    cpu_ms.push_back(CpuMs() - c0);
  }
  std::sort(ms.begin(), ms.end());
  std::sort(cpu_ms.begin(), cpu_ms.end());
  std::printf("%s%s %.3f %llu %.3f\n", prefix, q.name, ms[ms.size() / 2],
              static_cast<unsigned long long>(rows), cpu_ms[cpu_ms.size() / 2]);
  std::fflush(stdout);
  return 0;
}

int RunQueries(const std::string& path, int reps, const std::vector<std::string>& only) {
  auto db = tracedb::query::OpenQueryDb(path);
  if (!db.ok()) {
    std::fprintf(stderr, "%s\n", db.status().ToString().c_str());
    return 1;
  }
  for (const Query& q : kQueries) {
    if (!only.empty() && std::find(only.begin(), only.end(), q.name) == only.end()) continue;
    if (TimeQuery(db->get(), q, reps, "") != 0) return 1;
  }
  return 0;
}

int SqliteRows(const std::string& csv, const std::string& out, int reps) {
  std::filesystem::remove(out);
  auto db = Db::Open(out, Db::Mode::kCreate);
  if (!db.ok()) return 1;
  Db* d = db->get();
  tracedb::Status s = d->Exec(
      "PRAGMA journal_mode=MEMORY; PRAGMA synchronous=OFF; "
      "CREATE TABLE events(rank INTEGER, tid INTEGER, name TEXT, ts INTEGER, dur INTEGER, "
      "depth INTEGER); BEGIN");
  if (!s.ok()) return 1;
  auto ins = d->Prepare("INSERT INTO events VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
  if (!ins.ok()) return 1;
  FILE* f = std::fopen(csv.c_str(), "r");
  if (!f) {
    std::perror(csv.c_str());
    return 1;
  }
  char line[512];
  uint64_t n = 0;
  if (!std::fgets(line, sizeof(line), f)) return 1;  // header
  while (std::fgets(line, sizeof(line), f)) {
    int rank, tid, depth;
    char name[128];
    long long ts, dur;
    if (std::sscanf(line, "%d,%d,%127[^,],%lld,%lld,%d", &rank, &tid, name, &ts, &dur, &depth) !=
        6) {
      continue;
    }
    ins->Bind(1, rank)
        .Bind(2, tid)
        .Bind(3, std::string_view(name))
        .Bind(4, int64_t{ts})
        .Bind(5, int64_t{dur})
        .Bind(6, depth);
    if (!ins->Run().ok()) return 1;
    ++n;
  }
  std::fclose(f);
  if (!d->Exec("COMMIT; CREATE INDEX events_by_name_dur ON events(name, dur); "
               "CREATE INDEX events_by_rank_ts ON events(rank, ts); VACUUM;")
           .ok()) {
    return 1;
  }
  const auto bytes = std::filesystem::file_size(out);
  std::printf("sqlite_rows_events %llu\nsqlite_rows_bytes %llu\nsqlite_rows_bytes_per_event %.2f\n",
              static_cast<unsigned long long>(n), static_cast<unsigned long long>(bytes),
              static_cast<double>(bytes) / static_cast<double>(n));
  // The same median and percentile functions as over `events` (query/sql/functions.cc).
  if (tracedb::query::RegisterFunctions(d->raw()) != SQLITE_OK) {
    std::fprintf(stderr, "%s: registering the SQL functions failed\n", out.c_str());
    return 1;
  }
  for (const Query& q : kQueries) {
    const std::string name = q.name;
    if (name != "median_by_name" && name != "p95_by_name") continue;
    if (TimeQuery(d, q, reps, "sqlite_rows_") != 0) return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "queries") == 0) {
    return RunQueries(argv[2], argc > 3 ? std::atoi(argv[3]) : 5,
                      std::vector<std::string>(argv + std::min(argc, 4), argv + argc));
  }
  if (argc >= 4 && std::strcmp(argv[1], "sqlite-rows") == 0) {
    return SqliteRows(argv[2], argv[3], argc > 4 ? std::atoi(argv[4]) : 5);
  }
  std::fprintf(stderr, "usage: %s queries JOB.tdb [REPS] | sqlite-rows EVENTS.csv OUT.db [REPS]\n",
               argv[0]);
  return 2;
}
