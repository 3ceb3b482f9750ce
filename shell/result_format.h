// Prints the rows of an SQL statement as a table, CSV, JSON or Markdown.
//   table:    aligned columns with a header rule (NULL shown as empty)
//   csv:      a header line, then rows (RFC 4180 quoting; NULL is an empty field)
//   json:     an array of objects, one per row (NULL as null, numbers as numbers)
//   markdown: a pipe table
// Thread safety: none needed.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "engine/sqlite.h"
#include "engine/status.h"

namespace tracedb::shell {

enum class OutputFormat { kTable, kCsv, kJson, kMarkdown };

// Parses "table", "csv", "json", "markdown" (also "md", "box" for table).
bool ParseOutputFormat(std::string_view s, OutputFormat* out);

// Steps `stmt` to completion, printing its rows to `out`. Returns the number of rows, or the
// statement's error (for example "interrupted" after Ctrl-C).
StatusOr<uint64_t> PrintRows(engine::Stmt* stmt, OutputFormat format, FILE* out);

}  // namespace tracedb::shell
