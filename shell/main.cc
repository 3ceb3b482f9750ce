// The tracedb command-line program: declares the subcommands (one file each) and runs the one
// the user named. Exit codes (shell/commands.h, docs/cli.md): 0 ok, 1 the work failed, 2 bad
// arguments (printed on one line, as "tracedb SUB: what is wrong (see tracedb SUB --help)").
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

#include "engine/compact/shard_compact.h"
#include "engine/util/interrupt_cleanup.h"
#include "engine/util/version.h"
#include "shell/commands.h"
#include "shell/man_page.h"
#include "shell/verbosity.h"

namespace {

// "tracedb" followed by the subcommands that were recognised before the error.
std::string CommandPath(const CLI::App& app) {
  std::string path = "tracedb";
  const CLI::App* cur = &app;
  while (!cur->get_subcommands().empty()) {
    cur = cur->get_subcommands().front();
    path += " " + cur->get_name();
  }
  return path;
}

}  // namespace

int main(int argc, char** argv) {
  namespace ts = tracedb::shell;
  CLI::App app{"tracedb: record, compact, query and export traces of distributed training jobs"};
  app.set_version_flag("--version", std::string("tracedb ") + tracedb::engine::kTracedbVersion,
                       "Print the version (tracedb X.Y.Z) and exit");
  app.require_subcommand(1);
  // -q/-v here (before the subcommand) or after any subcommand that prints more than its results.
  ts::AddVerbosityFlags(&app);
  ts::AddManPageFlag(&app);  // hidden: tracedb --help-man writes docs/tracedb.1
  app.add_flag_callback(
      "--allow-external-shards", [] { tracedb::engine::SetAllowExternalShards(true); },
      "Let a shard manifest list databases outside its own directory (absolute paths, '..', "
      "symbolic links); refused by default, since a manifest may come from someone else");
  int exit_code = 0;
  ts::SetupRecord(app, &exit_code);
  ts::SetupCompact(app, &exit_code);
  ts::SetupQuery(app, &exit_code);
  ts::SetupShell(app, &exit_code);
  ts::SetupReport(app, &exit_code);
  ts::SetupInfo(app, &exit_code);
  ts::SetupImport(app, &exit_code);
  ts::SetupExport(app, &exit_code);
  ts::SetupView(app, &exit_code);
  ts::SetupDiff(app, &exit_code);
  ts::SetupTop(app, &exit_code);
  ts::SetupExplain(app, &exit_code);
  ts::SetupArchive(app, &exit_code);
  ts::SetupShards(app, &exit_code);
  ts::SetupCheck(app, &exit_code);
  ts::SetupRuns(app, &exit_code);
  ts::SetupVerify(app, &exit_code);
  // Ctrl-C or SIGTERM removes the file a command was writing (export, report html, import).
  tracedb::engine::InstallInterruptCleanupHandler();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with code 0; every real parse error is a usage error.
    if (e.get_exit_code() == 0) return app.exit(e) == 0 ? ts::kExitOk : ts::kExitUsage;
    const std::string where = CommandPath(app);
    std::string what = e.what();
    // CLI11 says "A subcommand is required" for a word that names no subcommand.
    if (where == "tracedb" && argc > 1 && argv[1][0] != '-') {
      what = std::string("unknown subcommand '") + argv[1] + "'";
    }
    std::fprintf(stderr, "%s: %s (see %s --help)\n", where.c_str(), what.c_str(), where.c_str());
    return ts::kExitUsage;
  } catch (const std::exception& e) {
    // The subcommands return Status; this is for what escapes them (out of memory, a bug).
    std::fprintf(stderr, "%s: %s\n", CommandPath(app).c_str(), e.what());
    return ts::kExitError;
  }
  return exit_code;
}
