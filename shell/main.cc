// The tracedb command-line program: declares the subcommands (one file each) and runs the one
// the user named. CLI11 parse errors exit with code 2 and a usage message.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "engine/version.h"
#include "shell/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"tracedb: record, compact, query and export traces of distributed training jobs"};
  app.set_version_flag("--version", std::string("tracedb ") + tracedb::engine::kTracedbVersion,
                       "Print the version (tracedb X.Y.Z) and exit");
  app.require_subcommand(1);
  int exit_code = 0;
  tracedb::shell::SetupRecord(app, &exit_code);
  tracedb::shell::SetupCompact(app, &exit_code);
  tracedb::shell::SetupQuery(app, &exit_code);
  tracedb::shell::SetupShell(app, &exit_code);
  tracedb::shell::SetupReport(app, &exit_code);
  tracedb::shell::SetupInfo(app, &exit_code);
  tracedb::shell::SetupImport(app, &exit_code);
  tracedb::shell::SetupExport(app, &exit_code);
  tracedb::shell::SetupView(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with code 0; every real parse error is a usage error.
    return app.exit(e) == 0 ? tracedb::shell::kExitOk : tracedb::shell::kExitUsage;
  }
  return exit_code;
}
