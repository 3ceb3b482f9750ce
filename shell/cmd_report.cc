// `tracedb report mpi JOB.tdb [--format text|csv|json] [--all-ranks]`: the MPI report in the
// layout of IBM mpitrace (per routine #calls, avg. bytes, time; message size distributions;
// minimum/median/maximum communication time; a timing table for all ranks) plus mpiP's spread
// across ranks, from recorded MPI events or imported mpitrace/mpiP profiles.
// `tracedb report stragglers JOB.tdb`: which rank arrives last to collectives, from the
// collectives matched across ranks.
// `tracedb report hang JOB.tdb|SEGMENT_DIR [-f text|json]`: where every rank stood when the job
// stopped (query/hang/, docs/hang.md); a segment directory (a job still running) is compacted
// first into a temporary database, every file taken whole.
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/compact/compactor.h"
#include "engine/compact/output_lock.h"
#include "engine/db/trace_writer.h"
#include "engine/util/json_text.h"
#include "engine/util/saturating.h"
#include "query/export/csv_text.h"
#include "query/hang/hang_report.h"
#include "query/open/query_db.h"
#include "query/report/mpi_report.h"
#include "shell/commands.h"
#include "shell/format.h"
#include "shell/report_html.h"
#include "shell/result_format.h"
#include "shell/sql_runner.h"
#include "shell/verbosity.h"

namespace tracedb::shell {
namespace {

struct ReportOptions {
  std::string db;
  std::string format = "text";
  bool all_ranks = false;
  int limit = 20;
};

double Sec(int64_t ns) { return static_cast<double>(ns) / 1e9; }

void RoutineTable(std::string* out, const std::vector<query::RoutineStat>& routines) {
  *out += "-----------------------------------------------------------------------\n";
  *out += "MPI Routine                        #calls     avg. bytes      time(sec)\n";
  *out += "-----------------------------------------------------------------------\n";
  for (const auto& s : routines) {
    *out += Fmt("%-28s %12llu %14.1f %14.3f\n", s.routine.c_str(),
                static_cast<unsigned long long>(s.calls), s.calls ? s.bytes / s.calls : 0.0,
                Sec(s.time_ns));
  }
  *out += "-----------------------------------------------------------------------\n";
}

void RankSection(std::string* out, const query::MpiReport& r, const query::RankMpi& rank) {
  *out += Fmt("\nData for MPI rank %d of %d%s:\n", rank.rank, r.world_size,
              rank.host.empty() ? "" : (" on " + rank.host).c_str());
  *out += "Times from MPI_Init() to MPI_Finalize().\n";
  RoutineTable(out, rank.routines);
  for (const auto& [e, which] : {std::pair{&r.min, "minimum"}, std::pair{&r.median, "median"},
                                 std::pair{&r.max, "maximum"}}) {
    if (e->rank == rank.rank) {
      *out +=
          Fmt("MPI task %d of %d had the %s communication time.\n", rank.rank, r.world_size, which);
    }
  }
  *out += Fmt("total communication time = %.3f seconds.\n", Sec(rank.comm_ns));
  *out += Fmt("total elapsed time       = %.3f seconds.\n", Sec(rank.elapsed_ns));
  if (rank.user_ns) *out += Fmt("user cpu time            = %.3f seconds.\n", Sec(*rank.user_ns));
  if (rank.system_ns)
    *out += Fmt("system time              = %.3f seconds.\n", Sec(*rank.system_ns));
  if (rank.maxrss_bytes) {
    *out += Fmt("max resident set size    = %.3f MiB.\n", *rank.maxrss_bytes / 1048576.0);
  }
  if (!rank.bins.empty()) {
    *out += "\nMessage size distributions:\n";
    std::string current;
    for (const auto& b : rank.bins) {
      if (b.routine != current) {
        current = b.routine;
        *out += Fmt("\n%-25s %6s %13s %14s   %s\n", current.c_str(), "#calls", "avg. bytes",
                    "time(sec)", "bin (bytes)");
      }
      *out += Fmt("%32llu %13.1f %14.3f   %lld-%lld\n", static_cast<unsigned long long>(b.calls),
                  b.calls ? b.bytes / b.calls : 0.0, Sec(b.time_ns),
                  static_cast<long long>(b.min_bytes), static_cast<long long>(b.max_bytes));
    }
  }
}

// "ranks 0, 1, 2" for a list of ranks.
std::string RankList(const std::vector<int32_t>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

std::string RenderText(const std::string& path, const query::MpiReport& r, bool all_ranks) {
  std::string out;
  std::vector<int32_t> with_calls, without_calls;
  for (const auto& x : r.ranks) (x.has_calls ? with_calls : without_calls).push_back(x.rank);
  out += Fmt("MPI report for %s: %d of %d ranks with calls (source: %s)\n", path.c_str(),
             r.ranks_with_calls, r.world_size, r.source.c_str());
  // The calls of the ranks present, together: every rank's only when every rank is present.
  const auto spread = query::SpreadAcrossRanks(r);
  std::vector<query::RoutineStat> total;
  int64_t comm = 0;
  for (const auto& s : spread) total.push_back({s.routine, s.calls, s.bytes, s.time_ns});
  for (const auto& x : r.ranks) comm = engine::SaturatingAdd(comm, x.has_calls ? x.comm_ns : 0);
  if (r.all_ranks_have_calls()) {
    out += "\nSummary for all tasks (every rank's calls together):\n";
  } else if (with_calls.size() == 1) {
    out += Fmt("\nCalls of %s only (the input holds 1 of the job's %d ranks):\n",
               RankList(with_calls).c_str(), r.world_size);
  } else {
    out += Fmt("\nCalls of %s together (the input holds %zu of the job's %d ranks):\n",
               RankList(with_calls).c_str(), with_calls.size(), r.world_size);
  }
  RoutineTable(&out, total);
  out += Fmt("total communication time = %.3f seconds over %s.\n", Sec(comm),
             r.all_ranks_have_calls() ? "all ranks" : RankList(with_calls).c_str());
  // mpitrace's own lines (rank 0's "Summary for all tasks"), stated by the profile or computed.
  out += "\n";
  for (const auto& [e, label] : {std::pair{&r.min, "minimum"}, std::pair{&r.median, "median "},
                                 std::pair{&r.max, "maximum"}}) {
    if (e->rank >= 0) {
      out +=
          Fmt("  %s communication time = %.3f sec for task %d\n", label, Sec(e->comm_ns), e->rank);
    } else {
      out +=
          Fmt("  %s communication time: unknown (the input holds %d of the job's %d ranks "
              "and does not state it)\n",
              label, static_cast<int>(r.ranks.size()), r.world_size);
    }
  }
  // mpiP's view: how evenly each routine's time is spread over the ranks.
  if (with_calls.size() > 1) {
    out += Fmt("\nSpread across %s (COV = standard deviation / mean of the per-rank time):\n",
               RankList(with_calls).c_str());
    out += Fmt("%-28s %6s %12s %12s %6s %12s %6s %8s\n", "MPI Routine", "ranks", "mean(sec)",
               "min(sec)", "rank", "max(sec)", "rank", "COV");
    for (const auto& s : spread) {
      out += Fmt("%-28s %6d %12.4f %12.4f %6d %12.4f %6d %8.3f\n", s.routine.c_str(), s.ranks,
                 s.mean_ns / 1e9, s.min_ns / 1e9, s.min_rank, s.max_ns / 1e9, s.max_rank, s.cov);
    }
  }
  // Per rank with calls: rank 0 and the minimum, median and maximum ranks (as mpitrace writes
  // files for), or every rank.
  for (const auto& rank : r.ranks) {
    if (!rank.has_calls) continue;
    if (all_ranks || rank.rank == 0 || rank.rank == r.min.rank || rank.rank == r.median.rank ||
        rank.rank == r.max.rank) {
      RankSection(&out, r, rank);
    }
  }
  if (!without_calls.empty()) {
    out += Fmt("\nNo calls in the input for %s (only their times, below).\n",
               RankList(without_calls).c_str());
  }
  out += "\nMPI timing summary for all ranks:\n";
  out += Fmt("%6s %18s %10s %11s %10s %10s %11s\n", "taskid", "host", "comm(s)", "elapsed(s)",
             "user(s)", "system(s)", "size(MiB)");
  for (const auto& x : r.ranks) {
    out += Fmt("%6d %18.18s %10.3f %11.3f %10s %10s %11s\n", x.rank, x.host.c_str(), Sec(x.comm_ns),
               Sec(x.elapsed_ns), x.user_ns ? Fmt("%.2f", Sec(*x.user_ns)).c_str() : "-",
               x.system_ns ? Fmt("%.2f", Sec(*x.system_ns)).c_str() : "-",
               x.maxrss_bytes ? Fmt("%.2f", *x.maxrss_bytes / 1048576.0).c_str() : "-");
  }
  return out;
}

// One table: section, rank (-1: all ranks), routine, calls, bytes, time_ns, min/max bytes.
std::string RenderCsv(const query::MpiReport& r) {
  std::string out =
      "section,rank,host,routine,calls,bytes,time_ns,min_bytes,max_bytes,"
      "comm_ns,elapsed_ns,cov\n";
  for (const auto& s : query::SpreadAcrossRanks(r)) {
    out += Fmt("routine,-1,,%s,%llu,%.0f,%lld,,,,,%.6f\n", query::csv::Field(s.routine).c_str(),
               static_cast<unsigned long long>(s.calls), s.bytes, static_cast<long long>(s.time_ns),
               s.cov);
  }
  for (const auto& x : r.ranks) {
    out += Fmt("rank,%d,%s,,,,,,,%lld,%lld,\n", x.rank, query::csv::Field(x.host).c_str(),
               static_cast<long long>(x.comm_ns), static_cast<long long>(x.elapsed_ns));
    for (const auto& s : x.routines) {
      out +=
          Fmt("routine,%d,,%s,%llu,%.0f,%lld,,,,,\n", x.rank, query::csv::Field(s.routine).c_str(),
              static_cast<unsigned long long>(s.calls), s.bytes, static_cast<long long>(s.time_ns));
    }
    for (const auto& b : x.bins) {
      out += Fmt("msgsize,%d,,%s,%llu,%.0f,%lld,%lld,%lld,,,\n", x.rank,
                 query::csv::Field(b.routine).c_str(), static_cast<unsigned long long>(b.calls),
                 b.bytes, static_cast<long long>(b.time_ns), static_cast<long long>(b.min_bytes),
                 static_cast<long long>(b.max_bytes));
    }
  }
  return out;
}

// A double as an exact JSON number (null when not finite).
std::string JsonNumber(double v) {
  std::string s;
  engine::json::AppendNumber(&s, v);
  return s;
}

std::string RenderJson(const query::MpiReport& r) {
  std::string out = "{\"source\": " + engine::json::String(r.source) +
                    ", \"world_size\": " + std::to_string(r.world_size) +
                    ", \"ranks_with_calls\": " + std::to_string(r.ranks_with_calls);
  // The minimum, median and maximum communication time (null when unknown).
  for (const auto& [e, key] :
       {std::pair{&r.min, "min"}, std::pair{&r.median, "median"}, std::pair{&r.max, "max"}}) {
    out += Fmt(", \"%s\": ", key);
    out += e->rank < 0 ? std::string("null")
                       : Fmt("{\"rank\": %d, \"comm_ns\": %lld, \"stated\": %s}", e->rank,
                             static_cast<long long>(e->comm_ns), e->stated ? "true" : "false");
  }
  out += ", \"routines\": [";
  bool first = true;
  for (const auto& s : query::SpreadAcrossRanks(r)) {
    out += first ? "" : ", ";
    first = false;
    out +=
        Fmt("{\"routine\": %s, \"calls\": %llu, \"bytes\": %s, \"time_ns\": %lld, "
            "\"ranks\": %d, \"mean_ns\": %s, \"min_ns\": %s, \"min_rank\": %d, "
            "\"max_ns\": %s, \"max_rank\": %d, \"cov\": %s}",
            engine::json::String(s.routine).c_str(), static_cast<unsigned long long>(s.calls),
            JsonNumber(s.bytes).c_str(), static_cast<long long>(s.time_ns), s.ranks,
            JsonNumber(s.mean_ns).c_str(), JsonNumber(s.min_ns).c_str(), s.min_rank,
            JsonNumber(s.max_ns).c_str(), s.max_rank, JsonNumber(s.cov).c_str());
  }
  out += "], \"ranks\": [";
  first = true;
  for (const auto& x : r.ranks) {
    out += first ? "" : ", ";
    first = false;
    out +=
        Fmt("{\"rank\": %d, \"host\": %s, \"has_calls\": %s, \"comm_ns\": %lld, "
            "\"elapsed_ns\": %lld, \"routines\": [",
            x.rank, engine::json::String(x.host).c_str(), x.has_calls ? "true" : "false",
            static_cast<long long>(x.comm_ns), static_cast<long long>(x.elapsed_ns));
    for (size_t i = 0; i < x.routines.size(); ++i) {
      const auto& s = x.routines[i];
      out += Fmt("%s{\"routine\": %s, \"calls\": %llu, \"bytes\": %s, \"time_ns\": %lld}",
                 i ? ", " : "", engine::json::String(s.routine).c_str(),
                 static_cast<unsigned long long>(s.calls), JsonNumber(s.bytes).c_str(),
                 static_cast<long long>(s.time_ns));
    }
    out += "], \"message_sizes\": [";
    for (size_t i = 0; i < x.bins.size(); ++i) {
      const auto& b = x.bins[i];
      out +=
          Fmt("%s{\"routine\": %s, \"min_bytes\": %lld, \"max_bytes\": %lld, \"calls\": %llu, "
              "\"bytes\": %s, \"time_ns\": %lld}",
              i ? ", " : "", engine::json::String(b.routine).c_str(),
              static_cast<long long>(b.min_bytes), static_cast<long long>(b.max_bytes),
              static_cast<unsigned long long>(b.calls), JsonNumber(b.bytes).c_str(),
              static_cast<long long>(b.time_ns));
    }
    out += "]}";
  }
  out += "]}\n";
  return out;
}

int RunMpiReport(const ReportOptions& o) {
  if (o.format != "text" && o.format != "csv" && o.format != "json") {
    std::fprintf(stderr, "tracedb report mpi: unknown format '%s' (text, csv, json)\n",
                 o.format.c_str());
    return kExitUsage;
  }
  auto db = query::OpenQueryDb(o.db);
  if (!db.ok()) {
    std::fprintf(stderr, "tracedb report mpi: %s\n", db.status().message().c_str());
    return kExitError;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto report = query::BuildMpiReport(db->get());
  if (!report.ok()) {
    std::fprintf(stderr, "tracedb report mpi: %s\n", report.status().message().c_str());
    return kExitError;
  }
  Verbose("report mpi", "%s: %d of %d ranks with calls (source: %s), built in %.3f s", o.db.c_str(),
          report->ranks_with_calls, report->world_size, report->source.c_str(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  std::string out;
  if (o.format == "text")
    out = RenderText(o.db, *report, o.all_ranks);
  else if (o.format == "csv")
    out = RenderCsv(*report);
  else
    out = RenderJson(*report);
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

int RunStragglers(const ReportOptions& o) {
  OutputFormat format = OutputFormat::kTable;
  if (o.format != "text" && !ParseOutputFormat(o.format, &format)) {
    std::fprintf(stderr, "tracedb report stragglers: unknown format '%s'\n", o.format.c_str());
    return kExitUsage;
  }
  auto db = query::OpenQueryDb(o.db);
  if (!db.ok()) {
    std::fprintf(stderr, "tracedb report stragglers: %s\n", db.status().message().c_str());
    return kExitError;
  }
  if (format == OutputFormat::kTable) {
    std::printf(
        "Which rank arrives last to collectives (matched across ranks by communicator "
        "and sequence number):\n\n");
  }
  Status s = RunSql(db->get(),
                    "SELECT rank, times_last, human_duration(caused_wait_ns) AS others_waited, "
                    "human_duration(max_skew_ns) AS worst_skew FROM stragglers "
                    "ORDER BY caused_wait_ns DESC, rank;",
                    format, stdout);
  if (s.ok() && format == OutputFormat::kTable) {
    std::printf("\nThe collectives with the largest arrival skew:\n\n");
    s = RunSql(db->get(),
               "SELECT name, comm, seq, ranks, last_rank, human_duration(skew_ns) AS skew "
               "FROM collectives WHERE ranks > 1 ORDER BY skew_ns DESC LIMIT " +
                   std::to_string(o.limit) + ";",
               format, stdout);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "tracedb report stragglers: %s\n", s.message().c_str());
    return kExitError;
  }
  return kExitOk;
}

// A temporary directory, removed with what it holds.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base ? base : "/tmp") + "/tracedb-hang-XXXXXX";
    if (mkdtemp(templ.data()) != nullptr) path_ = templ;
  }
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

int RunHangReport(const ReportOptions& o) {
  if (o.format != "text" && o.format != "json") {
    std::fprintf(stderr, "tracedb report hang: unknown format '%s' (text or json)\n",
                 o.format.c_str());
    return kExitUsage;
  }
  std::string db_path = o.db;
  TempDir tmp;
  std::error_code ec;
  if (std::filesystem::is_directory(o.db, ec)) {
    // A segment directory, perhaps of a job still running: every file is taken whole (its
    // spans still open are then written open, ending when each process was last seen).
    if (tmp.path().empty()) {
      std::fprintf(stderr, "tracedb report hang: cannot create a temporary directory\n");
      return kExitError;
    }
    db_path = tmp.path() + "/job.tdb";
    auto writer = engine::TraceWriter::Open(db_path);
    if (writer.ok()) {
      // A private database, removed whole whatever happens: written as a build aside is
      // (engine/compact/output_lock.h), without a journal or syncs.
      if (const Status s = engine::FreshBuild::Configure((*writer)->db()); !s.ok()) writer = s;
    }
    if (!writer.ok()) {
      std::fprintf(stderr, "tracedb report hang: %s\n", writer.status().message().c_str());
      return kExitError;
    }
    engine::CompactOptions co;
    co.inputs = {o.db};
    co.finish = true;
    auto stats = engine::Compact(writer->get(), co);
    writer->reset();
    if (!stats.ok()) {
      std::fprintf(stderr, "tracedb report hang: compacting %s: %s\n", o.db.c_str(),
                   stats.status().message().c_str());
      return kExitError;
    }
    Verbose("report", "compacted %llu segment files of %s into %s",
            static_cast<unsigned long long>(stats->files), o.db.c_str(), db_path.c_str());
  }
  auto db = query::OpenQueryDb(db_path);
  if (!db.ok()) {
    std::fprintf(stderr, "tracedb report hang: %s\n", db.status().message().c_str());
    return kExitError;
  }
  auto rep = query::hang::BuildHangReport(db->get());
  if (!rep.ok()) {
    std::fprintf(stderr, "tracedb report hang: %s: %s\n", o.db.c_str(),
                 rep.status().message().c_str());
    return kExitError;
  }
  const std::string out =
      o.format == "json" ? query::hang::HangReportJson(*rep) : query::hang::HangReportText(*rep);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return kExitOk;
}

}  // namespace

void SetupReport(CLI::App& app, int* exit_code) {
  CLI::App* report = app.add_subcommand("report", "Reports over a trace database");
  report->require_subcommand(1);
  auto o = std::make_shared<ReportOptions>();
  CLI::App* mpi = report->add_subcommand(
      "mpi", "MPI report as IBM mpitrace prints it, with mpiP's spread across ranks");
  mpi->add_option("db", o->db, "Trace database (.tdb)")->required();
  mpi->add_option("-f,--format", o->format, "text, csv or json");
  mpi->add_flag("--all-ranks", o->all_ranks,
                "A section for every rank (default: rank 0 and the min/median/max ranks)");
  AddVerbosityFlags(mpi);
  mpi->callback([o, exit_code] { *exit_code = RunMpiReport(*o); });

  auto so = std::make_shared<ReportOptions>();
  CLI::App* st = report->add_subcommand(
      "stragglers", "Which rank arrives last to each collective, and what it costs the others");
  st->add_option("db", so->db, "Trace database (.tdb)")->required();
  st->add_option("-f,--format", so->format, "text, csv, json or markdown");
  st->add_option("-n,--limit", so->limit, "Collectives to list");
  AddVerbosityFlags(st);
  st->callback([so, exit_code] { *exit_code = RunStragglers(*so); });

  auto ho = std::make_shared<ReportOptions>();
  CLI::App* hang = report->add_subcommand(
      "hang", "Where every rank stood when the job stopped: open spans, blocked calls, culprits");
  hang->add_option("db", ho->db,
                   "Trace database (.tdb), or the segment directory of a job (running or not)")
      ->required();
  hang->add_option("-f,--format", ho->format, "text or json");
  AddVerbosityFlags(hang);
  hang->callback([ho, exit_code] { *exit_code = RunHangReport(*ho); });

  SetupReportHtml(report, exit_code);  // report html: shell/report_html.cc
}

}  // namespace tracedb::shell
