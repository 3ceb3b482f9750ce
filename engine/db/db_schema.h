// The trace database schema (a SQLite file): table definitions, the schema version, and the
// check that a file is a tracedb database this build can read.
// Thread safety: functions over a Db owned by the caller.
// Format: docs/database-format.md.
#pragma once

#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::engine {

// Version 2 stores each distinct communicator member list once (comm_groups, rank_comms, and
// comms as a view); version 1 DBs are read as they are and upgraded when opened for writing.
inline constexpr int kSchemaVersion = 2;
inline constexpr int kOldestSchemaVersion = 1;

// A shard catalog's `blocks`: a view of its block_refs that reads each block from its shard
// (engine/compact/shard_catalog.h). CheckSchema accepts this view, and no other, in place of the
// table.
inline constexpr const char* kShardCatalogBlocksView =
    "CREATE VIEW blocks(block, rank, min_ts, max_end, max_dur, count, data) AS "
    "SELECT block, rank, min_ts, max_end, max_dur, count, tracedb_shard_block(shard, shard_block) "
    "FROM block_refs";

// Creates every table in an empty database (inside the caller's transaction or not).
Status CreateSchema(Db* db);

// Checks that `db` is a tracedb database of a version this build reads: InvalidArgument
// ("not a tracedb database") or NotSupported ("schema version N") otherwise.
Status CheckSchema(Db* db);

// Rewrites an older schema version's tables into today's, in one transaction (a no-op on a
// current DB). Called by OpenTraceDb for writable opens.
Status UpgradeSchema(Db* db);

// A new database being written aside, at PATH + this suffix, until it is put in place whole
// (engine/compact/output_lock.h, FreshBuild).
inline constexpr const char* kBuildAsideSuffix = ".partial";

// Opens (or creates, when `create`) a trace database and checks or creates its schema. A
// database that does not exist yet is NotFound; when it is being built aside the message says so.
StatusOr<std::unique_ptr<Db>> OpenTraceDb(const std::string& path, bool create, bool read_only);

}  // namespace tracedb::engine
