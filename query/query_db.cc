// OpenQueryDb. See query_db.h.
#include "query/query_db.h"

#include "engine/db_schema.h"
#include "query/views.h"

namespace tracedb::query {

StatusOr<std::unique_ptr<engine::Db>> OpenQueryDb(const std::string& path, bool writable) {
  TRACEDB_ASSIGN_OR_RETURN(std::unique_ptr<engine::Db> db,
                           engine::OpenTraceDb(path, /*create=*/false, /*read_only=*/!writable));
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
