// The GPU views: NCCL operations and their summary per rank (from the NCCL profiler plugin),
// CUDA kernels (from CUPTI activity), and per step the GPU kernel time, the NCCL time and their
// overlap. TEMP views over `events`, like query/views/views.h; docs/gpu-capture.md lists their
// columns. Thread safety: as the connection they are installed on.
#pragma once

#include "engine/db/sqlite.h"
#include "engine/db/sqlite_api.h"
#include "engine/util/status.h"

namespace tracedb::query {

// The SQL that creates the GPU views (idempotent: CREATE TEMP VIEW IF NOT EXISTS). Needs the
// `events` table and the functions of query/sql/functions.h on the connection.
const char* GpuViewsSql();

// Creates the GPU views on `db`. Returns an SQLite result code; *err (sqlite3_malloc'ed)
// explains a failure.
int InstallGpuViews(sqlite3* db, char** err);
Status InstallGpuViews(engine::Db* db);

}  // namespace tracedb::query
