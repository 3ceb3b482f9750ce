// Prints the rows of an SQL statement as a table, CSV, JSON or Markdown.
//   table:    aligned columns with a header rule (NULL shown as empty)
//   csv:      a header line, then rows (RFC 4180 quoting; NULL is an empty field)
//   json:     an array of objects, one per row (NULL as null, numbers as numbers)
//   markdown: a pipe table
//   box:      the table framed with Unicode box-drawing lines (as sqlite3's .mode box)
//   line:     one "column = value" line per column, a blank line between rows (sqlite3's
//             .mode line)
// Thread safety: none needed.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::shell {

enum class OutputFormat { kTable, kCsv, kJson, kMarkdown, kBox, kLine };

// The names ParseOutputFormat accepts, for messages: "table, box, line, csv, json, markdown".
extern const char* const kOutputFormatNames;

// Parses "table" (also "column"), "box", "line", "csv", "json", "markdown" (also "md").
bool ParseOutputFormat(std::string_view s, OutputFormat* out);
// The name of `f` as ParseOutputFormat takes it.
const char* OutputFormatName(OutputFormat f);

// How rows are printed (the shell's .mode, .headers, .nullvalue, .width).
struct PrintOptions {
  OutputFormat format = OutputFormat::kTable;
  bool headers = true;     // the header line of table, box and csv (markdown always has one)
  std::string null_value;  // NULL in every format but json (where it is null)
  // table and box: the minimum width of column i (0: as wide as its widest value); a longer value
  // is shown whole, never cut.
  std::vector<int> widths;
};

// Steps `stmt` to completion, printing its rows to `out`. Returns the number of rows, or the
// statement's error (for example "interrupted" after Ctrl-C).
StatusOr<uint64_t> PrintRows(engine::Stmt* stmt, const PrintOptions& options, FILE* out);
inline StatusOr<uint64_t> PrintRows(engine::Stmt* stmt, OutputFormat format, FILE* out) {
  PrintOptions options;
  options.format = format;
  return PrintRows(stmt, options, out);
}

}  // namespace tracedb::shell
