// SQLite values as JSON. See json_rows.h.
#include "query/export/json_rows.h"

#include "engine/util/json_text.h"

namespace tracedb::query::json {

void AppendInt(std::string* out, int64_t v, BigInts big) {
  constexpr int64_t kExact = int64_t{1} << 53;
  const bool quote = big == BigInts::kString && (v > kExact || v < -kExact);
  char buf[24];
  if (quote) out->push_back('"');
  out->append(buf, engine::json::WriteInt(buf, v));
  if (quote) out->push_back('"');
}

void AppendColumn(std::string* out, const engine::Stmt& st, int col, BigInts big) {
  switch (st.ColumnType(col)) {
    case SQLITE_NULL:
      out->append("null");
      break;
    case SQLITE_INTEGER:
      AppendInt(out, st.Int(col), big);
      break;
    case SQLITE_FLOAT:
      engine::json::AppendNumber(out, st.Double(col));
      break;
    case SQLITE_BLOB:
      out->append("\"<blob " + std::to_string(st.Blob(col).size()) + " bytes>\"");
      break;
    default:
      engine::json::AppendString(out, st.Text(col));
  }
}

}  // namespace tracedb::query::json
