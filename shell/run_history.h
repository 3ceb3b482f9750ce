// Baseline lists of `tracedb check` and `tracedb report html --baseline`: trace database paths,
// or runs:LABEL[:N] for the last N runs of LABEL in the run history (query/check/run_catalog.h).
// Implemented in shell/cmd_runs.cc. docs/check.md "The run history".
#pragma once

#include <string>
#include <vector>

namespace tracedb::shell {

// Runs of a label taken by runs:LABEL without :N.
inline constexpr int kDefaultHistoryRuns = 5;

// Appends to *paths each spec that is a path, and the paths of the runs each runs:LABEL[:N]
// names (oldest first), leaving out `exclude` (the run being compared) when it is among them.
// `catalog` empty: query::check::CatalogPath(). On error prints "tracedb CMD: message" and
// returns false.
bool ResolveRunPaths(const char* cmd, const std::vector<std::string>& specs,
                     const std::string& catalog, const std::string& exclude,
                     std::vector<std::string>* paths);

}  // namespace tracedb::shell
