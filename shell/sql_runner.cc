// RunSql. See sql_runner.h.
#include "shell/sql_runner.h"

namespace tracedb::shell {

Status RunSql(engine::Db* db, std::string_view sql, const PrintOptions& options, FILE* out) {
  while (!sql.empty()) {
    size_t used = 0;
    TRACEDB_ASSIGN_OR_RETURN(engine::Stmt st, db->PrepareFirst(sql, &used));
    sql.remove_prefix(std::min(used, sql.size()));
    if (st.raw() == nullptr) {
      if (used == 0) break;
      continue;
    }
    StatusOr<uint64_t> rows = PrintRows(&st, options, out);
    if (!rows.ok()) return rows.status();
  }
  return Status::Ok();
}

}  // namespace tracedb::shell
