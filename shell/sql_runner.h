// Runs a string of one or more SQL statements against a trace database and prints the rows of
// each (shared by `tracedb query` and `tracedb shell`).
#pragma once

#include <cstdio>
#include <string_view>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"
#include "shell/result_format.h"

namespace tracedb::shell {

// Returns the first error; statements before it have run and printed.
Status RunSql(engine::Db* db, std::string_view sql, const PrintOptions& options, FILE* out);
inline Status RunSql(engine::Db* db, std::string_view sql, OutputFormat format, FILE* out) {
  PrintOptions options;
  options.format = format;
  return RunSql(db, sql, options, out);
}

}  // namespace tracedb::shell
