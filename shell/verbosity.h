// How much the tracedb program says besides its results: set once by main() from the global
// flags (`tracedb -q SUB …`, `tracedb -v SUB …`), read by any subcommand. A subcommand's own
// -q (compact, export) means the same for that run. Not thread-safe to set; set before any
// subcommand runs.
#pragma once

namespace tracedb::shell {

enum class Verbosity {
  kQuiet,    // errors only: no banner, no summary line, no progress
  kNormal,   // the default
  kVerbose,  // also what the command is doing, step by step (on stderr)
};

Verbosity GetVerbosity();
void SetVerbosity(Verbosity v);

}  // namespace tracedb::shell
