// The settings every connection tracedb opens gets (docs/security.md): trusted_schema off (no
// function or virtual table with side effects runs from a file's views, triggers, CHECK or
// DEFAULT expressions) and SQLITE_DBCONFIG_DEFENSIVE on (SQL cannot corrupt the file's
// structure: no writable_schema, no journal_mode=OFF tricks). Db::Open applies it; the loadable
// extension exposes it as tracedb_harden() for connections a host opened (the Python package).
// Thread safety: as the connection.
#pragma once

#include "engine/db/sqlite_api.h"

namespace tracedb::engine {

void HardenConnection(sqlite3* db);

}  // namespace tracedb::engine
