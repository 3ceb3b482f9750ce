// `tracedb archive JOB.tdb [--keep-last DURATION] [--keep-steps N] [--recompress] …`: applies a
// retention policy to a trace database (engine/compact/archive.h) and says what it did: events kept
// and dropped, blocks recompressed, the file's size before and after. The database stays valid
// whatever happens (one transaction, then VACUUM); a compaction running beside it waits.
#include <cstdio>
#include <limits>
#include <memory>
#include <string>

#include "engine/compact/archive.h"
#include "engine/util/json_text.h"
#include "shell/commands.h"
#include "shell/export_args.h"
#include "shell/format.h"
#include "shell/verbosity.h"

namespace tracedb::shell {
namespace {

struct ArchiveCmdOptions {
  std::string db;
  std::string keep_last;  // a duration (6h, 90min, 30s)
  int64_t keep_steps = -1;
  bool recompress = false;
  std::string recompress_older;  // a duration before the newest event; "" = every block
  int hc_level = 12;
  bool no_vacuum = false;
  std::string format = "text";
};

// "6h", "90min", "2.5s" -> ns (units of ParseTimeBound: ns, us, ms, s, min, h).
bool ParseDuration(const std::string& option, const std::string& text, int64_t* ns) {
  query::ChromeTimeBound b;
  const Status s = ParseTimeBound(text, false, &b);
  if (!s.ok() || b.kind != query::ChromeTimeBound::Kind::kSinceStart) {
    std::fprintf(stderr,
                 "tracedb archive: bad %s '%s': expected a duration with a unit (ns, us, ms, s, "
                 "min, h), e.g. 6h or 90min\n",
                 option.c_str(), text.c_str());
    return false;
  }
  *ns = b.value;
  return true;
}

std::string ReportJson(const engine::ArchiveReport& r) {
  std::string j = "{";
  auto field = [&](const char* k, int64_t v) {
    if (j.size() > 1) j += ",";
    engine::json::AppendString(&j, k);
    j += ":";
    char buf[24];
    j.append(buf, engine::json::WriteInt(buf, v));
  };
  field("events_before", static_cast<int64_t>(r.events_before));
  field("events_after", static_cast<int64_t>(r.events_after));
  field("events_dropped", static_cast<int64_t>(r.events_before - r.events_after));
  field("blocks_before", static_cast<int64_t>(r.blocks_before));
  field("blocks_dropped", static_cast<int64_t>(r.blocks_dropped));
  field("blocks_considered", static_cast<int64_t>(r.blocks_considered));
  field("blocks_recompressed", static_cast<int64_t>(r.blocks_recompressed));
  field("block_bytes_before", static_cast<int64_t>(r.block_bytes_before));
  field("block_bytes_after", static_cast<int64_t>(r.block_bytes_after));
  field("file_bytes_before", static_cast<int64_t>(r.file_bytes_before));
  field("file_bytes_after", static_cast<int64_t>(r.file_bytes_after));
  field("cutoff_min_ns", r.cutoff_min_ns);
  field("cutoff_max_ns", r.cutoff_max_ns);
  field("vacuumed", r.vacuumed ? 1 : 0);
  return j + "}\n";
}

int RunArchive(const ArchiveCmdOptions& o) {
  engine::ArchiveOptions ao;
  if (!o.keep_last.empty() && !ParseDuration("--keep-last", o.keep_last, &ao.keep_last_ns)) {
    return kExitUsage;
  }
  ao.keep_steps = o.keep_steps;
  ao.recompress = o.recompress || !o.recompress_older.empty();
  ao.hc_level = o.hc_level;
  ao.vacuum = !o.no_vacuum;
  if (!o.recompress_older.empty()) {
    if (!ParseDuration("--recompress-older-than", o.recompress_older,
                       &ao.recompress_older_than_ns)) {
      return kExitUsage;
    }
  }
  if (ao.keep_last_ns < 0 && ao.keep_steps < 0 && !ao.recompress && !ao.vacuum) {
    std::fprintf(stderr,
                 "tracedb archive: nothing to do: give --keep-last, --keep-steps or --recompress "
                 "(or leave out --no-vacuum)\n");
    return kExitUsage;
  }
  auto r = engine::ArchiveDb(o.db, ao);
  if (!r.ok()) {
    std::fprintf(stderr, "tracedb archive: %s\n", r.status().message().c_str());
    return kExitError;
  }
  if (o.format == "json") {
    std::fputs(ReportJson(*r).c_str(), stdout);
    return kExitOk;
  }
  if (GetVerbosity() == Verbosity::kQuiet) return kExitOk;
  const uint64_t dropped = r->events_before - r->events_after;
  std::printf("events: %s kept, %s dropped (%s blocks of %s)\n",
              WithCommas(r->events_after).c_str(), WithCommas(dropped).c_str(),
              WithCommas(r->blocks_dropped).c_str(), WithCommas(r->blocks_before).c_str());
  if (ao.recompress) {
    std::printf("recompressed with LZ4-HC level %d: %s of %s blocks looked at were smaller\n",
                ao.hc_level, WithCommas(r->blocks_recompressed).c_str(),
                WithCommas(r->blocks_considered).c_str());
  }
  std::printf("event blocks: %s -> %s\n", HumanBytes(double(r->block_bytes_before)).c_str(),
              HumanBytes(double(r->block_bytes_after)).c_str());
  std::printf("file: %s -> %s%s\n", HumanBytes(double(r->file_bytes_before)).c_str(),
              HumanBytes(double(r->file_bytes_after)).c_str(),
              r->vacuumed ? "" : " (not vacuumed: freed pages stay in the file for reuse)");
  return kExitOk;
}

}  // namespace

void SetupArchive(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ArchiveCmdOptions>();
  CLI::App* sub = app.add_subcommand(
      "archive",
      "Apply a retention policy to a trace database (drop old events, keep the summaries)");
  sub->add_option("db", o->db, "Trace database")->required()->check(CLI::ExistingFile);
  sub->add_option("--keep-last", o->keep_last,
                  "Keep every event that ends within this duration of the newest (6h, 90min)");
  sub->add_option("--keep-steps", o->keep_steps, "Keep every event of the last N training steps")
      ->check(CLI::Range(int64_t{1}, std::numeric_limits<int64_t>::max()));
  sub->add_flag("--recompress", o->recompress,
                "Recompress the blocks with LZ4-HC (smaller, slower to write, as fast to read)");
  sub->add_option("--recompress-older-than", o->recompress_older,
                  "Recompress only blocks that ended this long before the newest event "
                  "(implies --recompress)");
  sub->add_option("--level", o->hc_level, "LZ4-HC level, 1..12 (default 12)")
      ->check(CLI::Range(1, 12));
  sub->add_flag("--no-vacuum", o->no_vacuum,
                "Do not VACUUM afterwards (the freed pages are reused, the file does not shrink)");
  sub->add_option("-f,--format", o->format, "text (default) or json")
      ->check(CLI::IsMember({"text", "json"}));
  AddVerbosityFlags(sub);
  sub->callback([o, exit_code] { *exit_code = RunArchive(*o); });
}

}  // namespace tracedb::shell
