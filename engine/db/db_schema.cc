// Trace database schema. See db_schema.h; documented in docs/database-format.md.
#include "engine/db/db_schema.h"

#include <sys/stat.h>

#include "engine/util/version.h"

namespace tracedb::engine {
namespace {

// WITHOUT ROWID tables declare their primary-key columns first, in key order: SQLite 3.40's
// integrity_check reports NOT NULL columns after reordered key columns as NULL.
constexpr const char* kSchemaSql = R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
CREATE TABLE strings(id INTEGER PRIMARY KEY, s TEXT NOT NULL);
CREATE TABLE ranks(
  rank INTEGER PRIMARY KEY, host TEXT, world_size INTEGER, local_rank INTEGER,
  clock_method TEXT, offset_ns INTEGER, drift_ppm REAL, uncertainty_ns INTEGER,
  sync_points INTEGER, source TEXT);
CREATE TABLE processes(
  rank INTEGER NOT NULL, pid INTEGER NOT NULL, host TEXT, command TEXT, clock TEXT,
  tsc_hz INTEGER, PRIMARY KEY(rank, pid)) WITHOUT ROWID;
CREATE TABLE clock_knots(
  rank INTEGER NOT NULL, pid INTEGER NOT NULL, local_ns INTEGER NOT NULL, kind TEXT NOT NULL,
  common_ns INTEGER NOT NULL, uncertainty_ns INTEGER NOT NULL,
  PRIMARY KEY(rank, pid, local_ns, kind)) WITHOUT ROWID;
CREATE TABLE tracks(
  track INTEGER PRIMARY KEY, rank INTEGER NOT NULL, kind TEXT NOT NULL, name TEXT,
  tid INTEGER, pid INTEGER, local_id INTEGER, sort_index INTEGER, next_k INTEGER NOT NULL);
CREATE INDEX tracks_by_rank ON tracks(rank);
CREATE TABLE blocks(
  block INTEGER PRIMARY KEY, rank INTEGER NOT NULL, min_ts INTEGER NOT NULL,
  max_end INTEGER NOT NULL, max_dur INTEGER NOT NULL, count INTEGER NOT NULL,
  data BLOB NOT NULL);
CREATE INDEX blocks_by_rank ON blocks(rank, min_ts);
CREATE TABLE block_names(
  name INTEGER NOT NULL, max_dur INTEGER NOT NULL, block INTEGER NOT NULL, cat INTEGER NOT NULL,
  count INTEGER NOT NULL, PRIMARY KEY(name, max_dur, block, cat)) WITHOUT ROWID;
CREATE INDEX block_names_by_cat ON block_names(cat, block);
CREATE TABLE name_stats(
  rank INTEGER NOT NULL, name INTEGER NOT NULL, cat INTEGER NOT NULL, kind INTEGER NOT NULL,
  count INTEGER NOT NULL, total_dur INTEGER NOT NULL, min_dur INTEGER NOT NULL,
  max_dur INTEGER NOT NULL, hist BLOB,
  PRIMARY KEY(rank, name, cat, kind)) WITHOUT ROWID;
CREATE TABLE sources(
  path TEXT PRIMARY KEY, format TEXT NOT NULL, rank INTEGER, pid INTEGER,
  offset INTEGER NOT NULL DEFAULT 0, size INTEGER NOT NULL DEFAULT 0,
  finished INTEGER NOT NULL DEFAULT 0, events INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
CREATE TABLE state(key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID;
)sql";

// The tables a trace holds rows in only when a feature writes them (docs/database-format.md,
// "Tables created when first written"): clock sync points, steps, counters, the flight
// recorder's step statistics and triggers, communicators, the MPI profiles of an mpitrace or
// mpiP import. A new database has, in each one's place, an empty view of the same name and
// columns (PlaceholderSql): every reader, ours or sqlite3's, sees an empty table, and no page is
// spent on it (a table's root page is 16 KiB: a one-event DB was 442,368 bytes with them, is
// 262,144 without). A writer calls EnsureTable first, which puts the table in the view's place
// in its own transaction.
struct LazyTable {
  const char* name;
  const char* columns;  // in the table's order: the view's, and `SELECT *`'s
  const char* create;
};
constexpr LazyTable kLazyTables[] = {
    {"sync_points", "rank, pid, local_ns, ref_rank, offset_ns, uncertainty_ns",
     "CREATE TABLE sync_points(\n"
     "  rank INTEGER NOT NULL, pid INTEGER NOT NULL, local_ns INTEGER NOT NULL,\n"
     "  ref_rank INTEGER NOT NULL, offset_ns INTEGER NOT NULL, uncertainty_ns INTEGER NOT NULL,\n"
     "  PRIMARY KEY(rank, pid, local_ns)) WITHOUT ROWID"},
    {"steps", "rank, ts, step",
     "CREATE TABLE steps(\n"
     "  rank INTEGER NOT NULL, ts INTEGER NOT NULL, step INTEGER NOT NULL,\n"
     "  PRIMARY KEY(rank, ts)) WITHOUT ROWID"},
    {"stats", "name, rank, value",
     "CREATE TABLE stats(\n"
     "  name TEXT NOT NULL, rank INTEGER NOT NULL, value INTEGER NOT NULL,\n"
     "  PRIMARY KEY(name, rank)) WITHOUT ROWID"},
    {"step_stats",
     "rank, step, start_ns, end_ns, dur_ns, compute_ns, comm_ns, wait_ns, bytes, events, "
     "top_names",
     "CREATE TABLE step_stats(\n"
     "  rank INTEGER NOT NULL, step INTEGER NOT NULL, start_ns INTEGER NOT NULL,\n"
     "  end_ns INTEGER NOT NULL, dur_ns INTEGER NOT NULL, compute_ns INTEGER NOT NULL,\n"
     "  comm_ns INTEGER NOT NULL, wait_ns INTEGER NOT NULL, bytes INTEGER NOT NULL,\n"
     "  events INTEGER NOT NULL, top_names TEXT NOT NULL,\n"
     "  PRIMARY KEY(rank, step, start_ns)) WITHOUT ROWID"},
    {"triggers", "rank, ts, reason",
     "CREATE TABLE triggers(\n"
     "  rank INTEGER NOT NULL, ts INTEGER NOT NULL, reason TEXT NOT NULL,\n"
     "  PRIMARY KEY(rank, ts, reason)) WITHOUT ROWID"},
    {"comm_groups", "group_id, size, members",
     "CREATE TABLE comm_groups(\n"
     "  group_id INTEGER PRIMARY KEY, size INTEGER NOT NULL, members TEXT NOT NULL UNIQUE)"},
    {"rank_comms", "rank, comm, size, rank_in_comm, group_id",
     "CREATE TABLE rank_comms(\n"
     "  rank INTEGER NOT NULL, comm INTEGER NOT NULL, size INTEGER NOT NULL,\n"
     "  rank_in_comm INTEGER NOT NULL, group_id INTEGER, PRIMARY KEY(rank, comm)) WITHOUT ROWID"},
    {"mpi_profile", "rank, routine, calls, bytes, time_ns, source",
     "CREATE TABLE mpi_profile(\n"
     "  rank INTEGER NOT NULL, routine TEXT NOT NULL, calls INTEGER NOT NULL,\n"
     "  bytes REAL NOT NULL, time_ns INTEGER NOT NULL, source TEXT,\n"
     "  PRIMARY KEY(rank, routine)) WITHOUT ROWID"},
    {"mpi_msgsize", "rank, routine, min_bytes, max_bytes, calls, avg_bytes, time_ns",
     "CREATE TABLE mpi_msgsize(\n"
     "  rank INTEGER NOT NULL, routine TEXT NOT NULL, min_bytes INTEGER NOT NULL,\n"
     "  max_bytes INTEGER NOT NULL, calls INTEGER NOT NULL, avg_bytes REAL NOT NULL,\n"
     "  time_ns INTEGER NOT NULL, PRIMARY KEY(rank, routine, min_bytes)) WITHOUT ROWID"},
    {"rank_times", "rank, host, comm_ns, elapsed_ns, user_ns, system_ns, maxrss_bytes, source",
     "CREATE TABLE rank_times(\n"
     "  rank INTEGER PRIMARY KEY, host TEXT, comm_ns INTEGER, elapsed_ns INTEGER, user_ns "
     "INTEGER,\n"
     "  system_ns INTEGER, maxrss_bytes INTEGER, source TEXT)"},
    {"mpi_callsites",
     "rank, site, routine, calls, max_ns, mean_ns, min_ns, app_pct, mpi_pct, bytes_sum, location",
     "CREATE TABLE mpi_callsites(\n"
     "  rank INTEGER NOT NULL, site INTEGER NOT NULL, routine TEXT NOT NULL, calls INTEGER NOT "
     "NULL,\n"
     "  max_ns INTEGER, mean_ns INTEGER, min_ns INTEGER, app_pct REAL, mpi_pct REAL,\n"
     "  bytes_sum REAL, location TEXT, PRIMARY KEY(rank, site, routine)) WITHOUT ROWID"},
};

const LazyTable* FindLazyTable(std::string_view name) {
  for (const LazyTable& t : kLazyTables)
    if (name == t.name) return &t;
  return nullptr;
}

// "CREATE VIEW steps(rank, ts, step) AS SELECT NULL, NULL, NULL WHERE 0": no row, the table's
// columns. CheckSchema accepts exactly this text in the table's place.
std::string PlaceholderSql(const LazyTable& t) {
  std::string sql = std::string("CREATE VIEW ") + t.name + "(" + t.columns + ") AS SELECT NULL";
  for (const char* c = t.columns; *c; ++c)
    if (*c == ',') sql += ", NULL";
  return sql + " WHERE 0";
}

// The communicators with the columns of schema version 1's comms table. One table with a
// scalar subquery, not a join: SQLite then flattens the view into the events views' LEFT JOIN
// (a search of rank_comms' key) instead of materializing every member list first.
constexpr const char* kCommsViewSql = R"sql(
CREATE VIEW comms(rank, comm, size, rank_in_comm, members) AS
  SELECT r.rank, r.comm, r.size, r.rank_in_comm,
         (SELECT g.members FROM comm_groups g WHERE g.group_id = r.group_id)
  FROM rank_comms r;
)sql";

// Version 1 -> 2: each rank's communicators kept one full copy of their member list (the
// world's list 4,096 times at 4,096 ranks); version 2 stores each distinct list once in
// comm_groups. The group's size is its member count (commas + 1).
constexpr const char* kUpgradeV1Sql = R"sql(
CREATE TABLE comm_groups(
  group_id INTEGER PRIMARY KEY, size INTEGER NOT NULL, members TEXT NOT NULL UNIQUE);
CREATE TABLE rank_comms(
  rank INTEGER NOT NULL, comm INTEGER NOT NULL, size INTEGER NOT NULL,
  rank_in_comm INTEGER NOT NULL, group_id INTEGER, PRIMARY KEY(rank, comm)) WITHOUT ROWID;
INSERT INTO comm_groups(size, members)
  SELECT length(members) - length(replace(members, ',', '')) + 1, members
  FROM comms WHERE members IS NOT NULL AND members != '' GROUP BY members ORDER BY min(rank);
INSERT INTO rank_comms(rank, comm, size, rank_in_comm, group_id)
  SELECT c.rank, c.comm, c.size, c.rank_in_comm, g.group_id
  FROM comms c LEFT JOIN comm_groups g ON g.members = c.members;
DROP TABLE comms;
UPDATE meta SET value = '2' WHERE key = 'schema_version';
)sql";

// The schema version written in `db`'s meta table ("" when absent).
StatusOr<std::string> SchemaVersion(Db* db) {
  TRACEDB_ASSIGN_OR_RETURN(Stmt st,
                           db->Prepare("SELECT value FROM meta WHERE key = 'schema_version'"));
  TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
  return row ? std::string(st.Text(0)) : std::string();
}

}  // namespace

Status CreateSchema(Db* db) {
  TRACEDB_RETURN_IF_ERROR(db->Exec(kSchemaSql));
  for (const LazyTable& t : kLazyTables) TRACEDB_RETURN_IF_ERROR(db->Exec(PlaceholderSql(t)));
  TRACEDB_RETURN_IF_ERROR(db->Exec(kCommsViewSql));
  TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare("INSERT INTO meta(key, value) VALUES(?1, ?2)"));
  TRACEDB_RETURN_IF_ERROR(st.Bind(1, "format").Bind(2, "tracedb").Run());
  TRACEDB_RETURN_IF_ERROR(
      st.Bind(1, "schema_version").Bind(2, std::to_string(kSchemaVersion)).Run());
  TRACEDB_RETURN_IF_ERROR(st.Bind(1, "tool_version").Bind(2, kTracedbVersion).Run());
  return Status::Ok();
}

namespace {
// Runs of whitespace as one space, trimmed: the text SQLite keeps of a CREATE statement is the
// statement as it was written, line breaks and indentation included.
std::string CollapseSpaces(std::string_view s) {
  std::string out;
  bool space = false;
  for (char c : s) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}
}  // namespace

Status CheckSchema(Db* db) {
  if (!db->HasTable("meta")) {
    return Status::InvalidArgument(db->path() + ": not a tracedb database (no meta table)");
  }
  // The readers' tables must be tables: a view in their place (a recursive CTE under `meta`,
  // say) would make every reader, this check's next query first, run its SQL for ever
  // (docs/security.md).
  // (Two exceptions, each word for word: a shard catalog's `blocks`, the view of block_refs
  // that engine/compact/shard_catalog.cc creates, and the empty view in the place of a table
  // created when first written, kLazyTables.)
  auto objects = db->Prepare(
      "SELECT name, type, sql FROM sqlite_master WHERE type <> 'table' AND name IN ('meta', "
      "'strings', 'ranks', 'processes', 'clock_knots', 'sync_points', 'tracks', 'blocks', "
      "'block_names', 'name_stats', 'steps', 'stats', 'comm_groups', 'rank_comms', 'sources', "
      "'state', 'mpi_profile', 'mpi_msgsize', 'rank_times', 'mpi_callsites', 'step_stats', "
      "'triggers')");
  if (!objects.ok()) return objects.status();
  for (;;) {
    auto other = objects->Step();
    if (!other.ok()) return other.status();
    if (!*other) break;
    const std::string name(objects->Text(0)), type(objects->Text(1));
    if (name == "blocks" && type == "view" &&
        CollapseSpaces(objects->Text(2)) == CollapseSpaces(kShardCatalogBlocksView)) {
      continue;
    }
    const LazyTable* lazy = FindLazyTable(name);
    if (lazy && type == "view" && objects->Text(2) == PlaceholderSql(*lazy)) continue;
    return Status::Corruption(db->path() + ": `" + name + "` is a " + type +
                              ", not a table: not a database tracedb wrote, refused");
  }
  auto st = db->Prepare("SELECT value FROM meta WHERE key = 'schema_version'");
  if (!st.ok()) return st.status();
  auto row = st->Step();
  if (!row.ok()) return row.status();
  if (!*row) return Status::InvalidArgument(db->path() + ": not a tracedb database");
  const std::string v(st->Text(0));
  bool known = false;
  for (int i = kOldestSchemaVersion; i <= kSchemaVersion; ++i) known |= v == std::to_string(i);
  if (!known) {
    return Status::NotSupported(
        db->path() + ": schema version " + v + ", this build reads versions " +
        std::to_string(kOldestSchemaVersion) + " to " + std::to_string(kSchemaVersion));
  }
  return Status::Ok();
}

Status UpgradeSchema(Db* db) {
  TRACEDB_ASSIGN_OR_RETURN(std::string v, SchemaVersion(db));
  // Version 3 differs from 2 only in what a new database holds (placeholders for the tables
  // created when first written): a version 2 database has them all, and stays version 2.
  if (v == std::to_string(kSchemaVersion) || v == "2") return Status::Ok();
  if (v != "1") {
    return Status::NotSupported(db->path() + ": cannot upgrade schema version " + v);
  }
  TRACEDB_RETURN_IF_ERROR(db->Begin());
  // Re-read inside the write transaction: another writer may have upgraded meanwhile.
  StatusOr<std::string> again = SchemaVersion(db);
  Status s = again.ok() ? Status::Ok() : again.status();
  if (s.ok() && *again == "1") {
    s = db->Exec(kUpgradeV1Sql);
    if (s.ok()) s = db->Exec(kCommsViewSql);
  }
  if (!s.ok()) {
    db->Rollback();
    return s.WithContext(db->path() + ": upgrading schema version 1 to 2");
  }
  return db->Commit();
}

namespace {
// What main holds under a table created when first written.
enum class Shape { kMissing, kTable, kPlaceholder, kOther };
StatusOr<Shape> ShapeOf(Db* db, const LazyTable& t, std::string* type) {
  TRACEDB_ASSIGN_OR_RETURN(Stmt st,
                           db->Prepare("SELECT type, sql FROM main.sqlite_master WHERE name = ?1"));
  st.Bind(1, t.name);
  TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return Shape::kMissing;
  *type = std::string(st.Text(0));
  if (*type == "table") return Shape::kTable;
  return *type == "view" && st.Text(1) == PlaceholderSql(t) ? Shape::kPlaceholder : Shape::kOther;
}
}  // namespace

StatusOr<bool> IsPlaceholderTable(Db* db, std::string_view name) {
  const LazyTable* t = FindLazyTable(name);
  if (!t) return false;
  std::string type;
  TRACEDB_ASSIGN_OR_RETURN(Shape shape, ShapeOf(db, *t, &type));
  return shape == Shape::kPlaceholder;
}

Status EnsureTable(Db* db, std::string_view name) {
  const LazyTable* t = FindLazyTable(name);
  if (!t)
    return Status::InvalidArgument("EnsureTable: `" + std::string(name) +
                                   "` is not a table created when first written");
  std::string type;
  TRACEDB_ASSIGN_OR_RETURN(Shape shape, ShapeOf(db, *t, &type));
  std::string sql;
  switch (shape) {
    case Shape::kTable:
      return Status::Ok();
    case Shape::kMissing:
      sql = t->create;  // a database older than the table (step_stats, triggers)
      break;
    case Shape::kPlaceholder:
      sql = std::string("DROP VIEW main.") + t->name + "; " + t->create;
      break;
    case Shape::kOther:
      return Status::Corruption(db->path() + ": `" + t->name + "` is a " + type +
                                ", not a table: not a database tracedb wrote, refused");
  }
  // One savepoint: the view is never dropped without the table taking its place, within the
  // caller's transaction or in one of its own.
  TRACEDB_RETURN_IF_ERROR(db->Exec("SAVEPOINT tracedb_ensure_table"));
  Status s = db->Exec(sql);
  if (!s.ok()) {
    (void)db->Exec("ROLLBACK TO tracedb_ensure_table; RELEASE tracedb_ensure_table");
    return s.WithContext(db->path() + ": creating table " + t->name);
  }
  return db->Exec("RELEASE tracedb_ensure_table");
}

Status EnsureAllTables(Db* db) {
  TRACEDB_RETURN_IF_ERROR(db->Exec("SAVEPOINT tracedb_ensure_all"));
  for (const LazyTable& t : kLazyTables) {
    Status s = EnsureTable(db, t.name);
    if (!s.ok()) {
      (void)db->Exec("ROLLBACK TO tracedb_ensure_all; RELEASE tracedb_ensure_all");
      return s;
    }
  }
  return db->Exec("RELEASE tracedb_ensure_all");
}

StatusOr<std::unique_ptr<Db>> OpenTraceDb(const std::string& path, bool create, bool read_only) {
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0 && st.st_size > 0;
  if (!exists && !create) {
    if (::stat((path + kBuildAsideSuffix).c_str(), &st) == 0) {
      return Status::NotFound(path + ": no database yet (" + path + kBuildAsideSuffix +
                              " is a compaction's unfinished build of it)");
    }
    return Status::NotFound(path + ": no such database");
  }
  // A read-only open never writes (docs/security.md): a hot rollback journal left by a writer
  // that died mid-transaction (compact, archive, import) is not rolled back here. SQLite sees
  // it on the first read (SQLITE_READONLY_ROLLBACK), and CheckSchema's error says what to do.
  // (A journal whose writer is alive is no hot journal: the reader sees the last commit.)
  TRACEDB_ASSIGN_OR_RETURN(
      std::unique_ptr<Db> db,
      Db::Open(path, read_only ? Db::Mode::kReadOnly
                               : (create ? Db::Mode::kCreate : Db::Mode::kReadWrite)));
  if (!read_only) {
    TRACEDB_RETURN_IF_ERROR(db->Exec("PRAGMA synchronous=NORMAL;"));
    // One rollback-journal file at rest. A compaction that ended while a reader had the file
    // open leaves it in WAL mode (engine/compact/output_lock.h): switched back here when no reader
    // holds it, else left so (a busy reader must not make this writer fail).
    sqlite3_busy_timeout(db->raw(), 0);
    const Status journal = db->Exec("PRAGMA journal_mode=DELETE");
    sqlite3_busy_timeout(db->raw(), 10000);
    if (!journal.ok() && journal.code() != Status::Code::kIOError) return journal;
  }
  bool empty = !exists;
  if (exists && create && !read_only) {
    // A run killed while creating the file leaves it without a committed schema (SQLite rolls
    // the hot journal back on this first read): an empty database, created again.
    TRACEDB_ASSIGN_OR_RETURN(int64_t objects, db->QueryInt("SELECT count(*) FROM sqlite_master"));
    empty = objects == 0;
  }
  if (empty) {
    // 16 KiB pages: an event block (tens of KB) is a chain of a few pages, not of 4 KiB ones;
    // compaction then writes, logs and checkpoints a quarter as many pages, one system call
    // each (docs/bench-compaction.md, "Many tracks, drifting clocks, larger pages"). A one-event
    // DB is 16 pages (256 KiB): the tables created when first written take none until then.
    TRACEDB_RETURN_IF_ERROR(db->Exec("PRAGMA page_size=16384"));
    TRACEDB_RETURN_IF_ERROR(db->Begin());
    Status s = CreateSchema(db.get());
    if (!s.ok()) {
      db->Rollback();
      return s;
    }
    TRACEDB_RETURN_IF_ERROR(db->Commit());
    return db;
  }
  // Reading a file that is not SQLite fails here with a clear message.
  Status s = CheckSchema(db.get());
  if (!s.ok() && read_only && sqlite3_extended_errcode(db->raw()) == SQLITE_READONLY_ROLLBACK) {
    return Status::IOError(
        path + ": a writer died mid-transaction and left its rollback journal " + path +
        "-journal; a read-only open never writes, so it cannot roll the file back to its last "
        "commit: open it once for writing (`tracedb shell --writable " +
        path + " .quit`, or `sqlite3 " + path + " 'PRAGMA quick_check'`), then read it");
  }
  if (!s.ok()) return s;
  // An older DB opened for writing is upgraded first, so that writers see one layout; read-only
  // opens read the old layout as it is (version 1's comms table has today's view's columns).
  if (!read_only) TRACEDB_RETURN_IF_ERROR(UpgradeSchema(db.get()));
  return db;
}

}  // namespace tracedb::engine
