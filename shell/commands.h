// The tracedb CLI's subcommands: each has an options struct, a Setup…() that declares it on the
// CLI11 app, and a Run…() that returns the process exit code. Only shell/ prints.
#pragma once

#include <CLI/CLI.hpp>

namespace tracedb::shell {

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;  // the input could not be read or the work failed
inline constexpr int kExitUsage = 2;  // bad arguments (CLI11's own code for parse errors)

// Each Setup…() adds its subcommand to `app`; when that subcommand runs, its exit code is stored
// in *exit_code.
void SetupInfo(CLI::App& app, int* exit_code);
void SetupCompact(CLI::App& app, int* exit_code);
void SetupQuery(CLI::App& app, int* exit_code);
void SetupShell(CLI::App& app, int* exit_code);
void SetupReport(CLI::App& app, int* exit_code);
void SetupRecord(CLI::App& app, int* exit_code);
void SetupImport(CLI::App& app, int* exit_code);
void SetupExport(CLI::App& app, int* exit_code);
void SetupView(CLI::App& app, int* exit_code);

void SetupDiff(CLI::App& app, int* exit_code);
void SetupTop(CLI::App& app, int* exit_code);
void SetupExplain(CLI::App& app, int* exit_code);
void SetupArchive(CLI::App& app, int* exit_code);
void SetupShards(CLI::App& app, int* exit_code);
void SetupCheck(CLI::App& app, int* exit_code);
void SetupRuns(CLI::App& app, int* exit_code);
void SetupVerify(CLI::App& app, int* exit_code);

}  // namespace tracedb::shell
