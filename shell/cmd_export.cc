// `tracedb export --chrome JOB.tdb -o FILE.json [--ranks 0,2-5] [--from T] [--to T]
// [--names GLOB,...] [--cat CAT,...] [--max-mb N] [--absolute] [-q]`: writes a slice of a trace
// database as Chrome trace JSON (chrome://tracing, Perfetto UI, speedscope). A name ending in
// .gz writes gzip. Exit codes: 0 done; 2 bad arguments or a database that cannot be read;
// 1 the output cannot be written. Mapping and options: docs/export.md.
// Thread safety: runs on the main thread.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/compact/shard_catalog.h"
#include "engine/compact/shard_compact.h"
#include "engine/db/db_schema.h"
#include "query/export/chrome_exporter.h"
#include "query/open/query_db.h"
#include "query/views/comm_match.h"
#include "shell/commands.h"
#include "shell/export_args.h"
#include "shell/format.h"
#include "shell/progress.h"
#include "shell/verbosity.h"

namespace tracedb::shell {
namespace {

struct ExportCmdOptions {
  bool chrome = false;
  std::string format;  // -f/--format: "chrome" (the same as --chrome)
  std::string db;
  std::string output;
  std::string ranks, from, to;
  std::vector<std::string> names, cats;
  double max_mb = 0;
  int gzip_level = 1;
  bool absolute = false;
  bool no_messages = false;
};

// True when some block holds both a send and a receive of MPI point-to-point messages (by the
// matcher's names, query/views/comm_match.h), read from the dictionary and the block_names
// index: the matching decodes every block holding a communication event, which costs minutes
// on a billion-event job, and a job of collectives only has no message to draw.
StatusOr<bool> MayHoldMessages(engine::Db* db) {
  std::vector<int64_t> sends, receives;
  TRACEDB_ASSIGN_OR_RETURN(engine::Stmt names,
                           db->Prepare("SELECT id, s FROM main.strings WHERE s GLOB 'MPI_*'"));
  for (;;) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, names.Step());
    if (!row) break;
    const uint8_t role = query::comm_match::RoleOfName(names.Text(1));
    if (role & query::comm_match::kSend) sends.push_back(names.Int(0));
    if (role & (query::comm_match::kRecv | query::comm_match::kPost))
      receives.push_back(names.Int(0));
  }
  TRACEDB_ASSIGN_OR_RETURN(engine::Stmt used,
                           db->Prepare("SELECT 1 FROM main.block_names WHERE name = ? LIMIT 1"));
  auto any_used = [&](const std::vector<int64_t>& ids) -> StatusOr<bool> {
    for (int64_t id : ids) {
      used.Reset();
      used.Bind(1, id);
      TRACEDB_ASSIGN_OR_RETURN(bool row, used.Step());
      if (row) return true;
    }
    return false;
  };
  TRACEDB_ASSIGN_OR_RETURN(bool has_sends, any_used(sends));
  if (!has_sends) return false;
  return any_used(receives);
}

// Matched point-to-point messages (the p2p_messages view), drawn as flows from each send to its
// receive. Nothing when the database holds no send or no receive.
Status MessageFlows(const std::string& path, std::vector<std::pair<int64_t, int64_t>>* out) {
  TRACEDB_ASSIGN_OR_RETURN(auto db, query::OpenQueryDb(path));
  TRACEDB_ASSIGN_OR_RETURN(bool may, MayHoldMessages(db.get()));
  if (!may) return Status::Ok();
  TRACEDB_ASSIGN_OR_RETURN(engine::Stmt st,
                           db->Prepare("SELECT send_id, recv_id FROM p2p_messages"));
  for (;;) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out->emplace_back(st.Int(0), st.Int(1));
  }
  return Status::Ok();
}

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "tracedb export: %s\n", msg.c_str());
  return code;
}

void PrintSummary(const ExportCmdOptions& o, const query::ChromeExportStats& s, double seconds) {
  const uint64_t skipped = s.events_total() - s.events_written;
  std::fprintf(
      stderr, "exported %s of %s events from %s in %.2f s (%s events/s)\n",
      WithCommas(s.events_written).c_str(), WithCommas(s.events_total()).c_str(), o.db.c_str(),
      seconds,
      WithCommas(static_cast<uint64_t>(seconds > 0 ? s.events_written / seconds : 0)).c_str());
  std::fprintf(stderr, "  skipped %s: %s filtered out, %s in corrupt blocks, %s NaN/inf counters\n",
               WithCommas(skipped).c_str(), WithCommas(s.events_filtered).c_str(),
               WithCommas(s.events_corrupt).c_str(), WithCommas(s.counters_nonfinite).c_str());
  std::fprintf(stderr, "  blocks: %s of %s decoded (the zone maps ruled out the rest)\n",
               WithCommas(s.blocks_decoded).c_str(), WithCommas(s.blocks_total).c_str());
  if (s.flows_written || s.flows_unmatched || s.flows_cut || s.extra_flows_written ||
      s.extra_flows_missing) {
    std::fprintf(stderr,
                 "  flows: %s request flows (%s ends without a partner, %s cut by splits), %s "
                 "extra (%s not drawn)\n",
                 WithCommas(s.flows_written).c_str(), WithCommas(s.flows_unmatched).c_str(),
                 WithCommas(s.flows_cut).c_str(), WithCommas(s.extra_flows_written).c_str(),
                 WithCommas(s.extra_flows_missing).c_str());
  }
  std::fprintf(stderr, "  wrote %zu file%s, %s of JSON, %s on disk:", s.files.size(),
               s.files.size() == 1 ? "" : "s", HumanBytes(double(s.json_bytes)).c_str(),
               HumanBytes(double(s.disk_bytes)).c_str());
  for (const std::string& f : s.files) std::fprintf(stderr, " %s", f.c_str());
  std::fprintf(stderr, "\n");
  if (s.blocks_corrupt) {
    std::fprintf(stderr, "  warning: %s blocks failed to decode and were skipped (%s events)\n",
                 WithCommas(s.blocks_corrupt).c_str(), WithCommas(s.events_corrupt).c_str());
  }
  if (s.bad_json_args) {
    std::fprintf(stderr,
                 "  warning: %s events had JSON args that are not an object; written as "
                 "args.args_text\n",
                 WithCommas(s.bad_json_args).c_str());
  }
  if (s.oversize_files) {
    std::fprintf(stderr, "  warning: %s files exceed --max-mb (a single event is larger)\n",
                 WithCommas(s.oversize_files).c_str());
  }
}

int RunExport(const ExportCmdOptions& o) {
  if (!o.format.empty() && o.format != "chrome") {
    return Fail(kExitUsage, "unknown format '" + o.format + "' (chrome)");
  }
  if (!o.chrome && o.format.empty()) {
    return Fail(kExitUsage, "choose the output format: --chrome or -f chrome (Chrome trace JSON)");
  }
  const bool quiet = GetVerbosity() == Verbosity::kQuiet;
  query::ChromeExportOptions eo;
  eo.output = o.output;
  eo.source_label = o.db;
  if (!o.ranks.empty()) {
    Status s = ParseRankList(o.ranks, &eo.ranks);
    if (!s.ok()) return Fail(kExitUsage, "--ranks: " + s.message());
    eo.ranks_text = o.ranks;
  }
  if (!o.from.empty()) {
    Status s = ParseTimeBound(o.from, false, &eo.from);
    if (!s.ok()) return Fail(kExitUsage, s.message());
  }
  if (!o.to.empty()) {
    Status s = ParseTimeBound(o.to, true, &eo.to);
    if (!s.ok()) return Fail(kExitUsage, s.message());
  }
  for (const std::string& n : o.names) {
    if (n.empty()) return Fail(kExitUsage, "--names: empty pattern");
    eo.names.push_back(n);
  }
  for (const std::string& c : o.cats) {
    if (c.empty()) return Fail(kExitUsage, "--cat: empty category");
    eo.cats.push_back(c);
  }
  if (!(o.max_mb >= 0)) return Fail(kExitUsage, "--max-mb must be positive");  // (NaN too)
  // A size past uint64 is no limit at all (the conversion would be undefined).
  eo.max_file_bytes =
      o.max_mb * 1e6 >= 18446744073709551615.0 ? UINT64_MAX : static_cast<uint64_t>(o.max_mb * 1e6);
  if (o.max_mb > 0 && eo.max_file_bytes < 4096) {
    return Fail(kExitUsage, "--max-mb must allow at least 4096 bytes per file");
  }
  eo.gzip_level = o.gzip_level;
  eo.epoch_ts = o.absolute;

  // A shard manifest is exported from its shards in place (engine/compact/shard_catalog.h).
  auto db = engine::IsManifest(o.db)
                ? engine::OpenShardCatalog(o.db)
                : engine::OpenTraceDb(o.db, /*create=*/false, /*read_only=*/true);
  // A missing or unreadable database is the work failing (docs/cli.md "Exit codes"), not usage.
  if (!db.ok()) return Fail(kExitError, db.status().message());
  const double t_flows = Now();
  if (!o.no_messages) {
    Status m = MessageFlows(o.db, &eo.extra_flows);
    if (!m.ok()) {
      // The events themselves are still exported (damaged blocks are skipped and counted).
      std::fprintf(stderr, "tracedb export: warning: no message flows: %s\n", m.message().c_str());
      eo.extra_flows.clear();
    }
    Verbose("export", "%s: %s matched MPI messages to draw as flows, found in %.3f s", o.db.c_str(),
            WithCommas(eo.extra_flows.size()).c_str(), Now() - t_flows);
  }

  const double t0 = Now();
  ProgressLine line("export");
  eo.progress = [&](const query::ChromeExportStats& s) {
    ProgressState st;
    st.events = s.events_written;
    st.bytes_done = s.json_bytes;
    st.units_done = s.blocks_decoded + s.blocks_corrupt;
    st.units_total = s.blocks_total;
    line.Update(st);
  };
  query::ChromeExportStats stats;
  Status s = query::ExportChrome(db->get(), eo, &stats);
  line.Finish();
  if (!s.ok()) {
    const bool usage = s.code() == Status::Code::kInvalidArgument ||
                       s.code() == Status::Code::kNotSupported ||
                       s.code() == Status::Code::kNotFound;
    return Fail(usage ? kExitUsage : kExitError, s.message());
  }
  if (!quiet) PrintSummary(o, stats, Now() - t0);
  if (stats.events_total() == 0) {
    // An imported mpitrace/mpiP profile is tables of totals, which a Chrome trace cannot carry.
    auto profile_rows = (*db)->QueryInt(
        "SELECT (SELECT count(*) FROM main.mpi_profile) + (SELECT count(*) FROM main.rank_times)",
        0);
    if (profile_rows.ok() && *profile_rows > 0) {
      std::fprintf(stderr,
                   "tracedb export: warning: %s holds no events, only MPI profile tables "
                   "(mpi_profile, mpi_msgsize, rank_times: %s rows), which a Chrome trace "
                   "cannot carry; see tracedb report mpi\n",
                   o.db.c_str(), WithCommas(static_cast<uint64_t>(*profile_rows)).c_str());
    }
  }
  return kExitOk;
}

}  // namespace

void SetupExport(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ExportCmdOptions>();
  CLI::App* sub = app.add_subcommand(
      "export", "Write a slice of a trace database for a trace viewer (Chrome trace JSON)");
  sub->add_flag("--chrome", o->chrome,
                "Chrome Trace Event JSON: chrome://tracing, Perfetto UI, speedscope");
  sub->add_option("-f,--format", o->format, "The output format: chrome (the same as --chrome)");
  sub->add_option("db", o->db, "Trace database (.tdb)")->required();
  sub->add_option("-o,--output", o->output, "Output FILE.json (FILE.json.gz: gzip)")->required();
  sub->add_option("--ranks", o->ranks, "Ranks to export: 0,2-5");
  sub->add_option("--from", o->from,
                  "Window start: ns since the epoch, a time since the job start (2.5s), or "
                  "step:N");
  sub->add_option("--to", o->to,
                  "Window end (exclusive): as --from, or +DURATION after --from (+500ms)");
  sub->add_option("--names", o->names, "Event name globs (fnmatch), comma-separated")
      ->delimiter(',');
  sub->add_option("--cat", o->cats, "Categories, comma-separated")->delimiter(',');
  sub->add_flag("--no-messages", o->no_messages,
                "Do not draw matched MPI point-to-point messages as flows");
  sub->add_option("--max-mb", o->max_mb,
                  "Split into files of at most N MB (10^6 bytes) of JSON each: FILE.json, "
                  "FILE.1.json, ...");
  sub->add_option("--gzip-level", o->gzip_level, "zlib level for .gz output (1-9)")
      ->check(CLI::Range(1, 9));
  sub->add_flag("--absolute", o->absolute,
                "Timestamps in µs since the Unix epoch (default: since the job's first event; "
                "viewers hold epoch times only to ~0.25 µs)");
  AddVerbosityFlags(sub);
  sub->callback([o, exit_code] { *exit_code = RunExport(*o); });
}

}  // namespace tracedb::shell
