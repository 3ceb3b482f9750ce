// Tab completion for `tracedb shell` (libedit): dot-commands at the start of a line; elsewhere
// SQL keywords and the names of the open database's tables, views, columns and SQL functions
// (including tracedb's own). Names are read from the database at each completion, so that a
// table created in the session completes too.
// Thread safety: one shell per process (libedit's completion hook is global).
#pragma once

#include <string>
#include <vector>

#include "engine/db/sqlite.h"

namespace tracedb::shell {

// Installs the completion hook for `db` (nullptr removes it). `db` must outlive the shell.
void InstallCompletion(engine::Db* db);

// The candidates for completing `word` when `line_start` is the text before it on the line,
// sorted and unique. (What the hook offers; exposed for the tests.)
std::vector<std::string> CompletionCandidates(engine::Db* db, const std::string& line_start,
                                              const std::string& word);

}  // namespace tracedb::shell
