// The run history's SQLite catalog. See run_catalog.h; docs/check.md "The run history".
#include "query/check/run_catalog.h"

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <system_error>

#include "query/check/regression_check.h"

namespace tracedb::query::check {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS runs(
  id INTEGER PRIMARY KEY,
  label TEXT NOT NULL,
  path TEXT NOT NULL,
  added_at INTEGER NOT NULL,
  ranks INTEGER, events INTEGER, steps INTEGER,
  step_median_ns REAL, comm_share REAL,
  command TEXT, git_rev TEXT, host TEXT, env TEXT);
CREATE INDEX IF NOT EXISTS runs_by_label ON runs(label, id);
)sql";

}  // namespace

std::string CatalogPath() {
  if (const char* p = std::getenv("TRACEDB_RUNS"); p != nullptr && *p != '\0') return p;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x != nullptr && *x != '\0') {
    return std::string(x) + "/tracedb/runs.db";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && *home != '\0' ? home : ".") +
         "/.local/share/tracedb/runs.db";
}

StatusOr<std::map<std::string, std::string>> ReadRecordMeta(engine::Db* db) {
  std::map<std::string, std::string> out;
  if (!db->HasTable("meta")) return out;
  TRACEDB_ASSIGN_OR_RETURN(
      engine::Stmt st,
      db->Prepare("SELECT key, value FROM main.meta WHERE key LIKE 'record.%' ORDER BY key"));
  while (true) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out[std::string(st.Text(0).substr(7))] = std::string(st.Text(1));
  }
  return out;
}

StatusOr<std::unique_ptr<RunCatalog>> RunCatalog::Open(const std::string& path, bool create) {
  if (create) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) {
      return Status::IOError("cannot create the folder of the run catalog " + path + ": " +
                             ec.message());
    }
  } else if (!std::filesystem::exists(path)) {
    return Status::NotFound("no run catalog at " + path +
                            " (tracedb runs add makes it; TRACEDB_RUNS names another)");
  }
  TRACEDB_ASSIGN_OR_RETURN(auto db, engine::Db::Open(path, create ? engine::Db::Mode::kCreate
                                                                  : engine::Db::Mode::kReadOnly));
  if (create) {
    Status s = db->Exec(kSchema);
    if (!s.ok()) return Status::InvalidArgument(path + ": not a run catalog: " + s.message());
  } else if (!db->HasTable("runs")) {
    return Status::InvalidArgument(path + ": not a run catalog (no runs table)");
  }
  return std::unique_ptr<RunCatalog>(new RunCatalog(std::move(db)));
}

Status RunCatalog::Add(RunEntry* e) {
  if (e->added_at == 0) e->added_at = static_cast<int64_t>(std::time(nullptr));
  TRACEDB_ASSIGN_OR_RETURN(
      engine::Stmt st,
      db_->Prepare("INSERT INTO runs(label, path, added_at, ranks, events, steps, step_median_ns, "
                   "comm_share, command, git_rev, host, env) "
                   "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"));
  st.Bind(1, e->label)
      .Bind(2, e->path)
      .Bind(3, e->added_at)
      .Bind(4, e->ranks)
      .Bind(5, e->events)
      .Bind(6, e->steps)
      .Bind(7, e->step_median_ns)
      .Bind(8, e->comm_share);
  auto opt = [&st](int i, const std::string& v) {
    if (v.empty()) {
      st.BindNull(i);
    } else {
      st.Bind(i, v);
    }
  };
  opt(9, e->command);
  opt(10, e->git_rev);
  opt(11, e->host);
  opt(12, e->env);
  TRACEDB_RETURN_IF_ERROR(st.Run());
  e->id = db_->LastInsertRowid();
  return Status::Ok();
}

StatusOr<std::vector<RunEntry>> RunCatalog::List(const std::string& label, int limit) const {
  // The last `limit` rows (newest first), then put oldest first.
  std::string sql =
      "SELECT id, label, path, added_at, coalesce(ranks, 0), coalesce(events, 0), "
      "coalesce(steps, 0), coalesce(step_median_ns, 0), coalesce(comm_share, 0), "
      "coalesce(command, ''), coalesce(git_rev, ''), coalesce(host, ''), coalesce(env, '') "
      "FROM runs";
  if (!label.empty()) sql += " WHERE label = ?1";
  sql += " ORDER BY id DESC";
  if (limit > 0) sql += " LIMIT " + std::to_string(limit);
  TRACEDB_ASSIGN_OR_RETURN(engine::Stmt st, db_->Prepare(sql));
  if (!label.empty()) st.Bind(1, label);
  std::vector<RunEntry> out;
  while (true) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    RunEntry e;
    e.id = st.Int(0);
    e.label = std::string(st.Text(1));
    e.path = std::string(st.Text(2));
    e.added_at = st.Int(3);
    e.ranks = static_cast<int32_t>(st.Int(4));
    e.events = st.Int(5);
    e.steps = st.Int(6);
    e.step_median_ns = st.Double(7);
    e.comm_share = st.Double(8);
    e.command = std::string(st.Text(9));
    e.git_rev = std::string(st.Text(10));
    e.host = std::string(st.Text(11));
    e.env = std::string(st.Text(12));
    out.push_back(std::move(e));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

RunEntry MakeEntry(const std::string& path, const std::string& label, const RunSummary& summary,
                   const std::map<std::string, std::string>& meta) {
  RunEntry e;
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec);
  e.path = ec ? path : abs.lexically_normal().string();
  e.label = label;
  e.ranks = summary.ranks;
  e.events = static_cast<int64_t>(summary.events);
  e.steps = static_cast<int64_t>(summary.step_ns.size());
  e.step_median_ns = Median(summary.step_ns);
  e.comm_share = summary.comm_share;
  auto get = [&meta](const char* key) {
    auto it = meta.find(key);
    return it == meta.end() ? std::string() : it->second;
  };
  e.command = get("command");
  e.git_rev = get("git_rev");
  e.host = get("host");
  e.env = get("env");
  return e;
}

}  // namespace tracedb::query::check
