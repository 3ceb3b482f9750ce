// Rows of SQL as JSON: the one place a SQLite value becomes a JSON value, for the shell's
// `--format json`, the data of `tracedb report html` and the viewer's /api/sql, /api/search and
// event fields. Strings go through the one writer (engine/util/json_text.h: invalid UTF-8 replaced
// by U+FFFD), reals in their shortest exact form (null for NaN and infinities), blobs as the text
// "<blob N bytes>". Integers are numbers; a caller whose reader is JavaScript (the viewer) asks
// for those beyond ±2^53, which a double cannot hold, as decimal strings instead.
// Thread safety: pure functions (the statement belongs to the caller's thread).
#pragma once

#include <cstdint>
#include <string>

#include "engine/db/sqlite.h"

namespace tracedb::query::json {

// How integers beyond what a double holds exactly are written.
enum class BigInts : uint8_t {
  kNumber,  // digits, exact (jq, Python and SQLite read them back whole)
  kString,  // "digits" when |v| > 2^53 (a JavaScript reader would round them)
};

// Appends `v`: digits, or with BigInts::kString and |v| > 2^53 quoted digits.
void AppendInt(std::string* out, int64_t v, BigInts big);

// Appends the value of column `col` of `st`'s current row.
void AppendColumn(std::string* out, const engine::Stmt& st, int col,
                  BigInts big = BigInts::kNumber);

}  // namespace tracedb::query::json
