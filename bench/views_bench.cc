// Built-in views benchmark helper (measures; not a test). bench/run_views_bench.sh drives it.
//   views_bench export JOB.tdb OUTDIR
//       writes the rows DuckDB loads, read back through the database's own SQL surface:
//       OUTDIR/events.csv (every column of `events` but value and args) and the summary tables
//       the views read (ranks, comms, steps, blocks without their data, name_stats, strings).
//   views_bench time JOB.tdb [REPS] [VIEW...]
//       times every built-in view (views_bench_list.h: the full result of the aggregates,
//       count(*) of the row-level views) and prints "view wall_ms rows cpu_ms" lines, medians
//       of REPS runs (default 5); rows: the view's rows (count(*)'s value, or the rows read).
//       VIEWs: only those. report_mpi is `tracedb report mpi`'s computation (BuildMpiReport).
//   views_bench list
//       the views timed, one a line: "view<TAB>count" or "view<TAB>all".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "bench/views_bench_list.h"
#include "engine/db/sqlite.h"
#include "query/export/csv_text.h"
#include "query/open/query_db.h"
#include "query/report/mpi_report.h"

namespace {

using tracedb::engine::Db;

double CpuMs() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// Writes the rows of `sql` to `path` as CSV with a header; NULL is an empty field.
int ExportCsv(Db* db, const std::string& sql, const std::string& path) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db->raw(), sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "views_bench: %s: %s\n", sql.c_str(), sqlite3_errmsg(db->raw()));
    return 1;
  }
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::perror(path.c_str());
    sqlite3_finalize(st);
    return 1;
  }
  std::string line;
  const int n = sqlite3_column_count(st);
  for (int i = 0; i < n; ++i) {
    if (i) line.push_back(',');
    tracedb::query::csv::AppendField(&line, sqlite3_column_name(st, i));
  }
  line.push_back('\n');
  int rc;
  uint64_t rows = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    for (int i = 0; i < n; ++i) {
      if (i) line.push_back(',');
      if (sqlite3_column_type(st, i) == SQLITE_NULL) continue;
      const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(st, i));
      tracedb::query::csv::AppendField(
          &line, std::string_view(t, static_cast<size_t>(sqlite3_column_bytes(st, i))));
    }
    line.push_back('\n');
    if (line.size() > (1u << 20)) {
      std::fwrite(line.data(), 1, line.size(), f);
      line.clear();
    }
    ++rows;
  }
  std::fwrite(line.data(), 1, line.size(), f);
  const bool write_failed = std::fclose(f) != 0;
  if (rc != SQLITE_DONE || write_failed) {
    std::fprintf(stderr, "views_bench: %s: %s\n", path.c_str(),
                 write_failed ? "write failed" : sqlite3_errmsg(db->raw()));
    sqlite3_finalize(st);
    return 1;
  }
  sqlite3_finalize(st);
  std::printf("%s %llu rows\n", path.c_str(), static_cast<unsigned long long>(rows));
  return 0;
}

int Export(const std::string& path, const std::string& dir) {
  auto db = tracedb::query::OpenQueryDb(path);
  if (!db.ok()) {
    std::fprintf(stderr, "%s\n", db.status().ToString().c_str());
    return 1;
  }
  const std::pair<const char*, const char*> kTables[] = {
      {"events",
       "SELECT id, rank, tid, track, track_name, lane, name, cat, kind, ts, dur, end_ts, depth, "
       "parent, bytes, peer, tag, comm, seq, flow, step FROM events"},
      {"ranks", "SELECT * FROM main.ranks"},
      {"comms", "SELECT rank, comm, size, rank_in_comm FROM main.comms"},
      {"steps", "SELECT * FROM main.steps"},
      {"blocks", "SELECT block, rank, min_ts, max_end, max_dur, count FROM main.blocks"},
      {"name_stats",
       "SELECT rank, name, cat, kind, count, total_dur, min_dur, max_dur FROM main.name_stats"},
      {"strings", "SELECT id, s FROM main.strings"},
  };
  for (const auto& [name, sql] : kTables) {
    if (ExportCsv(db->get(), sql, dir + "/" + name + ".csv") != 0) return 1;
  }
  return 0;
}

int Time(const std::string& path, int reps, const std::vector<std::string>& only) {
  auto db = tracedb::query::OpenQueryDb(path);
  if (!db.ok()) {
    std::fprintf(stderr, "%s\n", db.status().ToString().c_str());
    return 1;
  }
  for (const ViewQuery& v : kViewQueries) {
    if (!only.empty() && std::find(only.begin(), only.end(), v.view) == only.end()) continue;
    const std::string sql = ViewSql(v);
    std::vector<double> ms, cpu_ms;
    uint64_t rows = 0;
    for (int r = 0; r < reps; ++r) {
      const double c0 = CpuMs();
      const auto t0 = std::chrono::steady_clock::now();
      if (std::strcmp(v.view, kReportMpi) == 0) {
        auto report = tracedb::query::BuildMpiReport(db->get());
        if (!report.ok()) {
          std::fprintf(stderr, "views_bench: %s\n", report.status().ToString().c_str());
          return 1;
        }
        rows = 0;
        for (const auto& r : report->ranks) rows += r.routines.size();
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
        cpu_ms.push_back(CpuMs() - c0);
        continue;
      }
      sqlite3_stmt* st = nullptr;
      if (sqlite3_prepare_v2((*db)->raw(), sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
        std::fprintf(stderr, "views_bench: %s: %s\n", sql.c_str(), sqlite3_errmsg((*db)->raw()));
        return 1;
      }
      rows = 0;
      int rc;
      while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        // Every value is read, as a client would.
        for (int i = 0; i < sqlite3_column_count(st); ++i) sqlite3_column_int64(st, i);
        // The view's rows: count(*)'s value, or the rows read.
        rows = v.count_only ? static_cast<uint64_t>(sqlite3_column_int64(st, 0)) : rows + 1;
      }
      if (rc != SQLITE_DONE) {
        std::fprintf(stderr, "views_bench: %s: %s\n", sql.c_str(), sqlite3_errmsg((*db)->raw()));
        sqlite3_finalize(st);
        return 1;
      }
      sqlite3_finalize(st);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      cpu_ms.push_back(CpuMs() - c0);
    }
    std::sort(ms.begin(), ms.end());
    std::sort(cpu_ms.begin(), cpu_ms.end());
    std::printf("%s %.3f %llu %.3f\n", v.view, ms[ms.size() / 2],
                static_cast<unsigned long long>(rows), cpu_ms[cpu_ms.size() / 2]);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && std::strcmp(argv[1], "export") == 0) return Export(argv[2], argv[3]);
  if (argc >= 3 && std::strcmp(argv[1], "time") == 0) {
    return Time(argv[2], argc > 3 ? std::max(1, std::atoi(argv[3])) : 5,
                std::vector<std::string>(argv + std::min(argc, 4), argv + argc));
  }
  if (argc == 2 && std::strcmp(argv[1], "list") == 0) {
    for (const ViewQuery& v : kViewQueries)
      std::printf("%s\t%s\n", v.view, v.count_only ? "count" : "all");
    return 0;
  }
  std::fprintf(stderr, "usage: %s export JOB.tdb OUTDIR | time JOB.tdb [REPS] [VIEW...] | list\n",
               argv[0]);
  return 2;
}
