// OpenQueryDb. See query_db.h.
#include "query/open/query_db.h"

#include "engine/compact/shard_catalog.h"
#include "engine/compact/shard_compact.h"
#include "engine/db/db_schema.h"
#include "query/views/views.h"

namespace tracedb::query {

StatusOr<std::unique_ptr<engine::Db>> OpenQueryDb(const std::string& path, bool writable) {
  std::unique_ptr<engine::Db> db;
  if (engine::IsManifest(path)) {
    // Shards as one, read in place: the catalog beside them (brought up to date on every open)
    // lists their blocks, which are read from the shard files as queries ask for them.
    if (writable) return Status::InvalidArgument(path + ": a shard manifest opens read-only");
    TRACEDB_ASSIGN_OR_RETURN(db, engine::OpenShardCatalog(path));
  } else {
    TRACEDB_ASSIGN_OR_RETURN(db,
                             engine::OpenTraceDb(path, /*create=*/false, /*read_only=*/!writable));
    // The user's SQL may write any table (`INSERT INTO steps ...`): the tables created when
    // first written are made tables now, not left as their empty views.
    if (writable) TRACEDB_RETURN_IF_ERROR(engine::EnsureAllTables(db.get()));
  }
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
