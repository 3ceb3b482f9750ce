// How much the tracedb program says besides its results: -q/--quiet and -v/--verbose, given
// before the subcommand (`tracedb -q compact …`) or after it (`tracedb compact -q …`, every
// subcommand that prints more than its results), mean the same. Set while the arguments are
// parsed, read by any subcommand. Not thread-safe to set; set before any subcommand runs.
#pragma once

#include <CLI/CLI.hpp>

namespace tracedb::shell {

enum class Verbosity {
  kQuiet,    // results and errors only: no banner, no summary line, no progress
  kNormal,   // the default
  kVerbose,  // also what the command is doing, step by step (on stderr)
};

Verbosity GetVerbosity();
void SetVerbosity(Verbosity v);

// Adds -q/--quiet and -v/--verbose to `app` (the program or a subcommand). Giving both, before
// or after the subcommand, is a usage error ("-q and -v exclude each other").
void AddVerbosityFlags(CLI::App* app);

// Prints "tracedb SUB: " + the printf-formatted text + "\n" on stderr when verbose (-v).
void Verbose(const char* sub, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace tracedb::shell
