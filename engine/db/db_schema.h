// The trace database schema (a SQLite file): table definitions, the schema version, and the
// check that a file is a tracedb database this build can read.
// Thread safety: functions over a Db owned by the caller.
// Format: docs/database-format.md.
#pragma once

#include <string_view>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::engine {

// Version 2 stores each distinct communicator member list once (comm_groups, rank_comms, and
// comms as a view); version 1 DBs are read as they are and upgraded to 2 when opened for
// writing. Version 3: a new database holds the tables that a feature writes only when it does
// (EnsureTable), an empty view of the same columns in each one's place until then; version 2
// databases have them all as tables, and are read and written as they are.
inline constexpr int kSchemaVersion = 3;
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

// Puts table `name` (one of the tables created when first written: sync_points, steps, stats,
// step_stats, triggers, comm_groups, rank_comms, mpi_profile, mpi_msgsize, rank_times,
// mpi_callsites) in main where its empty view stands, or where it is missing (a database older
// than the table); a no-op when it is a table. Call it before writing the table, inside the
// writer's transaction (or alone: it is atomic either way). Corruption when something else
// has the name.
Status EnsureTable(Db* db, std::string_view name);

// EnsureTable for every one of them, in one transaction (a database opened for a user's SQL).
Status EnsureAllTables(Db* db);

// Whether main's `name` is the empty view in the place of a table created when first written.
StatusOr<bool> IsPlaceholderTable(Db* db, std::string_view name);

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
