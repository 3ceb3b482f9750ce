// `tracedb info PATH [--json]`: what a trace directory holds (ranks, events, drops, bytes,
// damage). Later versions also accept a trace database.
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "engine/compact/shard_catalog.h"
#include "engine/compact/shard_compact.h"
#include "engine/db/db_schema.h"
#include "engine/segment/segment_dir.h"
#include "engine/util/json_text.h"
#include "engine/util/saturating.h"
#include "query/open/query_db.h"
#include "shell/commands.h"
#include "shell/format.h"
#include "shell/verbosity.h"

namespace tracedb::shell {
namespace {

struct InfoOptions {
  std::string path;
  std::string format = "text";
  bool json = false;  // --json: the same as --format json (kept for scripts written before -f)
};

void PrintDirJson(const std::string& path, const engine::DirSummary& s) {
  std::string out = "{";
  out += "\"path\": " + engine::json::String(path);
  out += ", \"kind\": \"segments\"";
  out += ", \"ranks\": " + std::to_string(s.ranks);
  out += ", \"events\": " + std::to_string(s.events);
  out += ", \"dropped\": " + std::to_string(s.dropped);
  out += ", \"bytes\": " + std::to_string(s.bytes);
  out += ", \"files\": " + std::to_string(s.files);
  out += ", \"steps\": " + std::to_string(s.steps);
  out += ", \"corrupt_blocks\": " + std::to_string(s.corrupt_blocks);
  out += ", \"torn_tails\": " + std::to_string(s.torn_tails);
  out += ", \"open_files\": " + std::to_string(s.open_files);
  out += ", \"dead_writer_files\": " + std::to_string(s.dead_writer_files);
  out += ", \"unreadable_files\": " + std::to_string(s.unreadable_files);
  out += ", \"per_rank\": [";
  bool first = true;
  for (const auto& [rank, r] : s.per_rank) {
    if (!first) out += ", ";
    first = false;
    out += "{\"rank\": " + std::to_string(rank) + ", \"host\": " + engine::json::String(r.host) +
           ", \"files\": " + std::to_string(r.files) + ", \"events\": " + std::to_string(r.events) +
           ", \"dropped\": " + std::to_string(r.dropped) +
           ", \"bytes\": " + std::to_string(r.bytes) +
           ", \"span_ns\": " + std::to_string(r.last_ts - r.first_ts) +
           ", \"sync_points\": " + std::to_string(r.sync_points) + "}";
  }
  out += "], \"problems\": [";
  for (size_t i = 0; i < s.problems.size(); ++i) {
    if (i) out += ", ";
    out += engine::json::String(s.problems[i]);
  }
  out += "]}\n";
  std::fputs(out.c_str(), stdout);
}

void PrintDirText(const std::string& path, const engine::DirSummary& s) {
  std::printf("trace directory %s\n", path.c_str());
  std::printf("  ranks %llu, segment files %llu, events %s, dropped %s, %s on disk",
              static_cast<unsigned long long>(s.ranks), static_cast<unsigned long long>(s.files),
              WithCommas(s.events).c_str(), WithCommas(s.dropped).c_str(),
              HumanBytes(static_cast<double>(s.bytes)).c_str());
  if (s.events > 0) {
    std::printf(" (%.2f bytes/event)",
                static_cast<double>(s.bytes) / static_cast<double>(s.events));
  }
  std::printf("\n");
  if (s.steps > 0) std::printf("  step markers %s\n", WithCommas(s.steps).c_str());
  std::printf("\n  %6s  %-20s %6s %14s %10s %12s %12s\n", "rank", "host", "files", "events",
              "dropped", "bytes", "span");
  for (const auto& [rank, r] : s.per_rank) {
    std::printf(
        "  %6d  %-20.20s %6llu %14s %10s %12s %12s\n", rank, r.host.c_str(),
        static_cast<unsigned long long>(r.files), WithCommas(r.events).c_str(),
        WithCommas(r.dropped).c_str(), HumanBytes(static_cast<double>(r.bytes)).c_str(),
        HumanDuration(static_cast<double>(engine::SaturatingSub(r.last_ts, r.first_ts))).c_str());
  }
  if (s.corrupt_blocks || s.torn_tails || s.unreadable_files || s.open_files) {
    std::printf(
        "\n  damage: %llu corrupt blocks skipped, %llu torn tails (%llu bytes), %llu "
        "unreadable files, %llu files not closed (%llu of them by a writer that died)\n",
        static_cast<unsigned long long>(s.corrupt_blocks),
        static_cast<unsigned long long>(s.torn_tails),
        static_cast<unsigned long long>(s.torn_bytes),
        static_cast<unsigned long long>(s.unreadable_files),
        static_cast<unsigned long long>(s.open_files),
        static_cast<unsigned long long>(s.dead_writer_files));
  }
  for (const std::string& p : s.problems) std::printf("  problem: %s\n", p.c_str());
}

struct DbRankInfo {
  std::string host, method;
  int64_t events = 0, min_ts = 0, max_end = 0, uncertainty = -1;
};

struct DbInfo {
  int64_t events = 0, blocks = 0, min_ts = 0, max_end = 0, bytes = 0, dropped = 0;
  int64_t open_spans = 0;
  std::map<std::string, int64_t> stats;
  std::map<int64_t, DbRankInfo> ranks;
  int64_t profile_rows = 0;
};

StatusOr<DbInfo> ReadDbInfo(const std::string& given) {
  std::unique_ptr<engine::Db> db;
  DbInfo info;
  struct stat st;
  if (engine::IsManifest(given)) {
    // A shard manifest (compact --shard-by node, shards create): its shards as every reader sees
    // them, through their catalog; the bytes are the shards' and the catalog's.
    TRACEDB_ASSIGN_OR_RETURN(db, engine::OpenShardCatalog(given));
    TRACEDB_ASSIGN_OR_RETURN(std::vector<std::string> shards, engine::ReadManifest(given));
    shards.push_back(engine::CatalogPath(given));
    for (const std::string& f : shards) {
      if (::stat(f.c_str(), &st) == 0) info.bytes += st.st_size;
    }
  } else {
    TRACEDB_ASSIGN_OR_RETURN(db, engine::OpenTraceDb(given, false, /*read_only=*/true));
    if (::stat(given.c_str(), &st) == 0) info.bytes = st.st_size;
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(
        engine::Stmt q, db->Prepare("SELECT rank, sum(count), min(min_ts), max(max_end), count(*) "
                                    "FROM blocks GROUP BY rank"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      DbRankInfo& r = info.ranks[q.Int(0)];
      r.events = q.Int(1);
      r.min_ts = q.Int(2);
      r.max_end = q.Int(3);
      info.events += r.events;
      info.blocks += q.Int(4);
      if (info.min_ts == 0 || r.min_ts < info.min_ts) info.min_ts = r.min_ts;
      info.max_end = std::max(info.max_end, r.max_end);
    }
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(
        engine::Stmt q, db->Prepare("SELECT rank, host, clock_method, uncertainty_ns FROM ranks"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      DbRankInfo& r = info.ranks[q.Int(0)];
      r.host = std::string(q.Text(1));
      r.method = std::string(q.Text(2));
      r.uncertainty = q.IsNull(3) ? -1 : q.Int(3);
    }
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(engine::Stmt q,
                             db->Prepare("SELECT name, sum(value) FROM stats GROUP BY name"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, q.Step());
      if (!row) break;
      info.stats[std::string(q.Text(0))] = q.Int(1);
    }
  }
  info.dropped = info.stats.count("dropped") ? info.stats["dropped"] : 0;
  TRACEDB_ASSIGN_OR_RETURN(info.open_spans,
                           db->QueryInt("SELECT value FROM meta WHERE key = 'open_spans'", 0));
  TRACEDB_ASSIGN_OR_RETURN(info.profile_rows,
                           db->QueryInt("SELECT (SELECT count(*) FROM mpi_profile) + "
                                        "(SELECT count(*) FROM rank_times)",
                                        0));
  return info;
}

void PrintDbJson(const std::string& path, const DbInfo& d) {
  std::string out = "{\"path\": " + engine::json::String(path) + ", \"kind\": \"database\"";
  out += ", \"ranks\": " + std::to_string(d.ranks.size());
  out += ", \"events\": " + std::to_string(d.events);
  out += ", \"start_ns\": " + std::to_string(d.min_ts);
  out += ", \"end_ns\": " + std::to_string(d.max_end);
  out += ", \"span_ns\": " + std::to_string(d.max_end - d.min_ts);
  out += ", \"dropped\": " + std::to_string(d.dropped);
  out += ", \"bytes\": " + std::to_string(d.bytes);
  char bpe[32];
  std::snprintf(bpe, sizeof(bpe), "%.3f", d.events ? double(d.bytes) / double(d.events) : 0.0);
  out += ", \"bytes_per_event\": " + std::string(bpe);
  out += ", \"blocks\": " + std::to_string(d.blocks);
  out += ", \"open_spans\": " + std::to_string(d.open_spans);
  out += ", \"profile_rows\": " + std::to_string(d.profile_rows);
  out += ", \"stats\": {";
  bool first = true;
  for (const auto& [k, v] : d.stats) {
    if (!first) out += ", ";
    first = false;
    out += engine::json::String(k) + ": " + std::to_string(v);
  }
  out += "}, \"per_rank\": [";
  first = true;
  for (const auto& [rank, r] : d.ranks) {
    if (!first) out += ", ";
    first = false;
    out += "{\"rank\": " + std::to_string(rank) + ", \"host\": " + engine::json::String(r.host) +
           ", \"events\": " + std::to_string(r.events) +
           ", \"start_ns\": " + std::to_string(r.min_ts) +
           ", \"end_ns\": " + std::to_string(r.max_end) +
           ", \"clock\": " + engine::json::String(r.method) + ", \"uncertainty_ns\": " +
           (r.uncertainty >= 0 ? std::to_string(r.uncertainty) : "null") + "}";
  }
  out += "]}\n";
  std::fputs(out.c_str(), stdout);
}

void PrintDbText(const std::string& path, const DbInfo& d) {
  std::printf("trace database %s\n", path.c_str());
  std::printf("  ranks %zu, events %s, %s on disk", d.ranks.size(), WithCommas(d.events).c_str(),
              HumanBytes(static_cast<double>(d.bytes)).c_str());
  if (d.events) std::printf(" (%.2f bytes/event)", double(d.bytes) / double(d.events));
  std::printf(
      "\n  time span %s",
      HumanDuration(static_cast<double>(engine::SaturatingSub(d.max_end, d.min_ts))).c_str());
  std::printf(", %s blocks, dropped %s, open spans %s", WithCommas(d.blocks).c_str(),
              WithCommas(d.dropped).c_str(), WithCommas(d.open_spans).c_str());
  // Spans whose process ended first, written as rows flagged open (docs/hang.md).
  if (auto it = d.stats.find("open_spans_closed"); it != d.stats.end() && it->second > 0) {
    std::printf(" (and %s kept as open rows)", WithCommas(it->second).c_str());
  }
  std::printf("\n");
  if (d.profile_rows) std::printf("  MPI profile rows %s\n", WithCommas(d.profile_rows).c_str());
  std::printf("\n  %6s  %-20s %14s %12s  %-10s %s\n", "rank", "host", "events", "span", "clock",
              "uncertainty");
  for (const auto& [rank, r] : d.ranks) {
    std::printf(
        "  %6lld  %-20.20s %14s %12s  %-10s %s\n", static_cast<long long>(rank), r.host.c_str(),
        WithCommas(r.events).c_str(),
        HumanDuration(static_cast<double>(engine::SaturatingSub(r.max_end, r.min_ts))).c_str(),
        r.method.c_str(),
        r.uncertainty >= 0 ? HumanDuration(static_cast<double>(r.uncertainty)).c_str() : "unknown");
  }
  if (!d.stats.empty()) {
    std::printf("\n  stats:");
    for (const auto& [k, v] : d.stats)
      std::printf(" %s=%lld", k.c_str(), static_cast<long long>(v));
    std::printf("\n");
  }
}

int RunInfo(InfoOptions o) {
  if (o.format != "text" && o.format != "json") {
    std::fprintf(stderr, "tracedb info: unknown format '%s' (text, json)\n", o.format.c_str());
    return kExitUsage;
  }
  o.json = o.json || o.format == "json";
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  struct stat st;
  if (::stat(o.path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    StatusOr<DbInfo> d = ReadDbInfo(o.path);
    if (!d.ok()) {
      std::fprintf(stderr, "tracedb info: %s\n", d.status().message().c_str());
      return kExitError;
    }
    Verbose("info", "read the database %s (%s) in %.3f s", o.path.c_str(),
            HumanBytes(static_cast<double>(st.st_size)).c_str(), elapsed());
    if (o.json)
      PrintDbJson(o.path, *d);
    else
      PrintDbText(o.path, *d);
    return kExitOk;
  }
  StatusOr<engine::DirSummary> s = engine::SummarizeSegmentDir(o.path);
  if (!s.ok()) {
    std::fprintf(stderr, "tracedb info: %s\n", s.status().message().c_str());
    return kExitError;
  }
  Verbose("info", "scanned %llu segment files (%s) of %llu ranks in %.3f s",
          static_cast<unsigned long long>(s->files),
          HumanBytes(static_cast<double>(s->bytes)).c_str(),
          static_cast<unsigned long long>(s->ranks), elapsed());
  if (o.json) {
    PrintDirJson(o.path, *s);
  } else {
    PrintDirText(o.path, *s);
  }
  return kExitOk;
}

}  // namespace

void SetupInfo(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<InfoOptions>();
  CLI::App* sub = app.add_subcommand("info", "Summarise a trace directory or a trace database");
  sub->add_option("path", opts->path, "Trace directory (with rank-*/ subdirectories) or .tdb")
      ->required();
  sub->add_option("-f,--format", opts->format, "text (default) or json");
  sub->add_flag("--json", opts->json, "The same as --format json");
  AddVerbosityFlags(sub);
  sub->callback([opts, exit_code] { *exit_code = RunInfo(*opts); });
}

}  // namespace tracedb::shell
