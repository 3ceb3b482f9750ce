// `tracedb verify DB`: decodes every event block and compares it with its zone map, its
// block_names rows, name_stats and the dictionaries (engine/verify/verify.h); lists what lies.
// Exit 0 when nothing does, 1 when something does or the file cannot be read (docs/cli.md).
#include <cstdio>
#include <memory>
#include <string>

#include "engine/verify/verify.h"
#include "shell/commands.h"
#include "shell/format.h"
#include "shell/verbosity.h"

namespace tracedb::shell {
namespace {

struct VerifyCmdOptions {
  std::string db;
  size_t max_listed = 200;
  bool no_sqlite_check = false;
};

int RunVerify(const VerifyCmdOptions& o) {
  engine::VerifyOptions vo;
  vo.max_listed = o.max_listed;
  vo.sqlite_check = !o.no_sqlite_check;
  auto r = engine::VerifyDb(o.db, vo);
  if (!r.ok()) {
    std::fprintf(stderr, "tracedb verify: %s\n", r.status().message().c_str());
    return kExitError;
  }
  for (const std::string& line : r->listed) std::printf("%s: %s\n", o.db.c_str(), line.c_str());
  if (r->problems > r->listed.size()) {
    std::printf("%s: ... and %s more problems (--max-listed)\n", o.db.c_str(),
                WithCommas(r->problems - r->listed.size()).c_str());
  }
  if (!r->ok()) {
    std::fprintf(stderr, "tracedb verify: %s: %s problem%s in %s blocks, %s events\n", o.db.c_str(),
                 WithCommas(r->problems).c_str(), r->problems == 1 ? "" : "s",
                 WithCommas(r->blocks).c_str(), WithCommas(r->events).c_str());
    return kExitError;
  }
  if (GetVerbosity() != Verbosity::kQuiet) {
    std::printf("%s: ok (%s blocks, %s events, %s strings, %s tracks, %s name_stats rows)\n",
                o.db.c_str(), WithCommas(r->blocks).c_str(), WithCommas(r->events).c_str(),
                WithCommas(r->strings).c_str(), WithCommas(r->tracks).c_str(),
                WithCommas(r->name_stats).c_str());
  }
  return kExitOk;
}

}  // namespace

void SetupVerify(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<VerifyCmdOptions>();
  CLI::App* sub = app.add_subcommand(
      "verify", "Check that a trace database's zone maps, counts and statistics match its events");
  sub->add_option("db", o->db, "Trace database")->required()->check(CLI::ExistingFile);
  sub->add_option("--max-listed", o->max_listed,
                  "List at most this many problems (default 200; the rest are counted)");
  sub->add_flag("--no-sqlite-check", o->no_sqlite_check,
                "Skip SQLite's own PRAGMA quick_check (it reads every page of the file)");
  AddVerbosityFlags(sub);
  sub->callback([o, exit_code] { *exit_code = RunVerify(*o); });
}

}  // namespace tracedb::shell
