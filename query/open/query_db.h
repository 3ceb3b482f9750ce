// Opens a trace database for SQL: checks the schema and installs the `events` table, the SQL
// functions and the views on the connection (query/views/views.h).
// Thread safety: the returned Db belongs to the caller's thread.
#pragma once

#include <memory>
#include <string>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::query {

// `path` may also be a shard manifest (`tracedb compact --shard-by node`, `tracedb shards
// create`, engine/compact/shard_compact.h): its shards are then read in place through their catalog
// (engine/compact/shard_catalog.h), brought up to date first; a manifest opens read-only.
// `writable` (tracedb shell --writable) also makes every table created when first written a
// table (engine/db/db_schema.h, EnsureAllTables), so that the user's SQL may write any.
StatusOr<std::unique_ptr<engine::Db>> OpenQueryDb(const std::string& path, bool writable = false);

}  // namespace tracedb::query
