// OpenQueryDb. See query_db.h.
#include "query/query_db.h"

#include "engine/db_schema.h"
#include "engine/shard_compact.h"
#include "query/views.h"

namespace tracedb::query {

std::string MergedShardsPath(const std::string& manifest) {
  return engine::ShardDir(manifest) + "/merged.tdb";
}

StatusOr<std::unique_ptr<engine::Db>> OpenQueryDb(const std::string& path, bool writable) {
  std::string db_path = path;
  if (engine::IsManifest(path)) {
    // Shards as one: their blocks (not decoded) copied into one database beside them, brought
    // up to date on every open (only the shards' new blocks are copied).
    if (writable) return Status::InvalidArgument(path + ": a shard manifest opens read-only");
    db_path = MergedShardsPath(path);
    TRACEDB_ASSIGN_OR_RETURN(auto merged, engine::MergeManifest(path, db_path));
    (void)merged;
  }
  TRACEDB_ASSIGN_OR_RETURN(std::unique_ptr<engine::Db> db,
                           engine::OpenTraceDb(db_path, /*create=*/false, /*read_only=*/!writable));
  char* err = nullptr;
  const int rc = InstallSqlSurface(db->raw(), &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return Status::Internal(path + ": " + msg);
  }
  return db;
}

}  // namespace tracedb::query
