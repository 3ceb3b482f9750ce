// `.dump` of the tracedb shell: the database as SQL text (CREATE statements and INSERTs) that the
// stock sqlite3 reads back into an equal database, as sqlite3's own .dump does.
#pragma once

#include <cstdio>
#include <string>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::shell {

// Writes the schema and rows of every table of `db`'s main schema whose name is LIKE `pattern`
// (every table when empty), then its indexes, views and triggers, inside one transaction.
// Virtual tables (the events table of a query connection is a temporary one) are not dumped:
// their rows are the stored blocks'. Returns the first SQL error.
Status DumpSql(engine::Db* db, const std::string& pattern, FILE* out);

}  // namespace tracedb::shell
