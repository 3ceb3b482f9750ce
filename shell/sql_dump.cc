// DumpSql. See sql_dump.h.
#include "shell/sql_dump.h"

#include <vector>

namespace tracedb::shell {
namespace {

// "name" with quotes doubled: a safe SQL identifier.
std::string Ident(const std::string& name) {
  std::string q = "\"";
  for (char c : name) {
    q += c;
    if (c == '"') q += '"';
  }
  return q + "\"";
}

// 'text' with quotes doubled: a safe SQL string literal.
std::string Literal(const std::string& text) {
  std::string q = "'";
  for (char c : text) {
    q += c;
    if (c == '\'') q += '\'';
  }
  return q + "'";
}

}  // namespace

Status DumpSql(engine::Db* db, const std::string& pattern, FILE* out) {
  const std::string filter = pattern.empty() ? "" : " AND name LIKE " + Literal(pattern);
  struct Table {
    std::string name, sql;
  };
  std::vector<Table> tables;
  {
    TRACEDB_ASSIGN_OR_RETURN(
        engine::Stmt st,
        db->Prepare("SELECT name, sql FROM main.sqlite_master WHERE type = 'table' AND sql NOT "
                    "LIKE 'CREATE VIRTUAL TABLE%' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'" +
                    filter + " ORDER BY rowid"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      tables.push_back({std::string(st.Text(0)), std::string(st.Text(1))});
    }
  }
  std::fputs("PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n", out);
  for (const Table& t : tables) {
    std::fprintf(out, "%s;\n", t.sql.c_str());
    // One INSERT per row, built by SQLite's quote() (exact: integers, REALs to 17 digits,
    // text with quotes doubled, BLOBs as X'..').
    std::string values;
    {
      TRACEDB_ASSIGN_OR_RETURN(
          engine::Stmt cols,
          db->Prepare("SELECT name FROM pragma_table_info(" + Literal(t.name) + ") ORDER BY cid"));
      for (;;) {
        TRACEDB_ASSIGN_OR_RETURN(bool row, cols.Step());
        if (!row) break;
        values += values.empty() ? "" : " || ',' || ";
        values += "quote(" + Ident(std::string(cols.Text(0))) + ")";
      }
    }
    if (values.empty()) continue;
    TRACEDB_ASSIGN_OR_RETURN(
        engine::Stmt rows,
        db->Prepare("SELECT " + Literal("INSERT INTO " + Ident(t.name) + " VALUES(") + " || " +
                    values + " || ');' FROM main." + Ident(t.name)));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, rows.Step());
      if (!row) break;
      const std::string_view line = rows.Text(0);
      std::fwrite(line.data(), 1, line.size(), out);
      std::fputc('\n', out);
    }
  }
  // sqlite_sequence holds AUTOINCREMENT counters: restore them as sqlite3's .dump does.
  if (pattern.empty() && db->HasTable("sqlite_sequence")) {
    std::fputs("DELETE FROM sqlite_sequence;\n", out);
    TRACEDB_ASSIGN_OR_RETURN(
        engine::Stmt seq,
        db->Prepare("SELECT 'INSERT INTO sqlite_sequence VALUES(' || quote(name) || ',' || "
                    "quote(seq) || ');' FROM main.sqlite_sequence"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, seq.Step());
      if (!row) break;
      std::fprintf(out, "%s\n", std::string(seq.Text(0)).c_str());
    }
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(
        engine::Stmt st,
        db->Prepare("SELECT sql FROM main.sqlite_master WHERE type IN ('index', 'view', "
                    "'trigger') AND sql IS NOT NULL" +
                    (pattern.empty() ? std::string() : " AND tbl_name LIKE " + Literal(pattern)) +
                    " ORDER BY rowid"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      std::fprintf(out, "%s;\n", std::string(st.Text(0)).c_str());
    }
  }
  std::fputs("COMMIT;\n", out);
  return Status::Ok();
}

}  // namespace tracedb::shell
