// The hostile-database harness. See db_fuzz.h.
#include "query/fuzz/db_fuzz.h"

#include <sqlite3.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <string_view>

#include "engine/compact/archive.h"
#include "engine/db/trace_writer.h"
#include "engine/verify/verify.h"
#include "python/src/event_columns.h"
#include "query/export/chrome_exporter.h"
#include "query/open/query_db.h"
#include "query/report/mpi_report.h"
#include "query/report/report_data.h"
#include "view/lod.h"

namespace tracedb::query::fuzz {
namespace {

namespace fs = std::filesystem;

// The process's scratch directory, removed when the process exits (never destroyed before the
// exit handler that removes it runs).
const std::string& TmpRoot() {
  static const std::string* root = [] {
    const char* t = std::getenv("TRACEDB_FUZZ_TMP");
    auto* r = new std::string(std::string(t && *t ? t : "/tmp") + "/tracedb-hostile-" +
                              std::to_string(static_cast<long>(::getpid())));
    fs::create_directories(*r);
    return r;
  }();
  static const bool cleanup = [] {
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(*root, ec);
    });
    return true;
  }();
  (void)cleanup;
  return *root;
}

Status BuildBase(const std::string& path) {
  TRACEDB_ASSIGN_OR_RETURN(auto w, engine::TraceWriter::Open(path));
  TRACEDB_RETURN_IF_ERROR(w->SetMeta("fuzz.base", "1"));
  const char* names[] = {"compute", "MPI_Allreduce", "MPI_Send", "step", "queue"};
  int64_t ts = 1000;
  for (int batch = 0; batch < 3; ++batch) {
    TRACEDB_RETURN_IF_ERROR(w->BeginBatch());
    for (int32_t rank = 0; rank < 2; ++rank) {
      engine::TrackSpec thread;
      thread.rank = rank;
      thread.tid = 100 + rank;
      thread.pid = 10 + rank;
      thread.local_id = 0;
      const uint32_t t = w->Track(thread);
      engine::TrackSpec lane;
      lane.rank = rank;
      lane.kind = "lane";
      lane.name = "tensor.w" + std::to_string(rank);
      const uint32_t l = w->Track(lane);
      w->AddStep(rank, ts, batch);
      for (int i = 0; i < 120; ++i) {
        engine::Row r;
        r.track = i % 7 == 0 ? l : t;
        r.k = w->TakeK(r.track);
        r.ts = ts + i * 50;
        r.dur = (i % 5) * 13 + 1;
        r.name = w->Intern(names[i % 5]);
        r.cat = w->Intern(i % 5 == 1 || i % 5 == 2 ? "mpi" : i % 2 ? "comm" : "compute");
        r.kind = i % 11 == 0   ? engine::RowKind::kInstant
                 : i % 13 == 0 ? engine::RowKind::kCounter
                               : engine::RowKind::kSpan;
        if (r.kind != engine::RowKind::kSpan) r.dur = 0;
        if (r.kind == engine::RowKind::kCounter) r.value = i * 0.5;
        if (i % 3 == 0) {
          r.args.mask = engine::EventArgs::kBytes | engine::EventArgs::kPeer;
          r.args.bytes = static_cast<uint64_t>(i) * 8;
          r.args.peer = 1 - rank;
        }
        if (i % 17 == 0) r.json = "{\"k\":" + std::to_string(i) + "}";
        TRACEDB_RETURN_IF_ERROR(w->AddRow(rank, std::move(r)));
      }
    }
    ts += 120 * 50 + 100;
    TRACEDB_RETURN_IF_ERROR(w->CommitBatch());
  }
  return Status::Ok();
}

// Values that have broken readers, or might: sizes, counts and ids at the edges.
constexpr int64_t kValues[] = {-1,
                               0,
                               1,
                               2,
                               7,
                               255,
                               65535,
                               65536,
                               65537,
                               INT32_MAX,
                               int64_t{1} << 31,
                               int64_t{1} << 32,
                               (int64_t{1} << 32) + 1,
                               30000000,
                               4000000000000,
                               int64_t{1} << 62,
                               INT64_MAX,
                               INT64_MIN,
                               -10,
                               20};

class ByteReader {
 public:
  ByteReader(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool more() const { return i_ < n_; }
  uint8_t U8() { return i_ < n_ ? d_[i_++] : 0; }
  int64_t Value() {
    const uint8_t b = U8();
    if (b < 0xF0) return kValues[b % (sizeof(kValues) / sizeof(kValues[0]))];
    uint64_t v = 0;
    for (int k = 0; k < 8; ++k) v = (v << 8) | U8();
    return static_cast<int64_t>(v);
  }

 private:
  const uint8_t* d_;
  size_t n_, i_ = 0;
};

std::string V(int64_t v) { return std::to_string(v); }

// An outcome of one reader: OK, or an error that says something.
struct Outcomes {
  DbResult* r;
  void Note(const std::string& reader, const Status& s) {
    if (s.ok()) {
      r->opened++;
      return;
    }
    r->errors++;
    r->messages.push_back(reader + ": " + s.message());
    if (s.message().empty() && r->clean) {
      r->clean = false;
      r->detail = reader + ": an error without a message";
    }
  }
  // Runs `fn`; an exception out of a reader is unclean (it would have ended the host process).
  void Run(const std::string& reader, const std::function<Status()>& fn) {
    try {
      Note(reader, fn());
    } catch (const std::exception& e) {
      if (r->clean) {
        r->clean = false;
        r->detail = reader + ": exception escaped: " + e.what();
      }
    }
  }
};

Status RunQuery(engine::Db* db, const std::string& sql) {
  TRACEDB_ASSIGN_OR_RETURN(engine::Stmt st, db->Prepare(sql));
  for (int rows = 0; rows < 100000; ++rows) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    for (int c = 0; c < st.ColumnCount(); ++c) (void)st.Text(c);
  }
  return Status::Ok();
}

}  // namespace

const std::string& BaseDb() {
  static const std::string path = [] {
    const std::string p = TmpRoot() + "/base.tdb";
    fs::remove(p);
    Status s = BuildBase(p);
    if (!s.ok()) {
      std::fprintf(stderr, "hostile_db: cannot build the base database: %s\n", s.message().c_str());
      std::abort();
    }
    return p;
  }();
  return path;
}

void MakeHostileCopy(const std::string& path, const std::vector<std::string>& statements) {
  fs::remove(path);
  fs::remove(path + "-journal");
  fs::copy_file(BaseDb(), path);
  // The attacker's connection: plain SQLite, none of tracedb's defences.
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    sqlite3_close_v2(db);
    return;
  }
  for (const std::string& sql : statements)
    sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
  sqlite3_close_v2(db);
}

std::vector<std::string> MutationsFromBytes(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  std::vector<std::string> out;
  static const char* kBlockCols[] = {"rank", "min_ts", "max_end", "max_dur", "count", "block"};
  static const char* kNameCols[] = {"name", "max_dur", "block", "cat", "count"};
  static const char* kStatCols[] = {"rank",  "name",      "cat",     "kind",
                                    "count", "total_dur", "min_dur", "max_dur"};
  static const char* kTables[] = {"meta",  "strings",     "tracks",     "blocks",
                                  "steps", "block_names", "name_stats", "ranks"};
  while (in.more() && out.size() < 16) {
    const uint8_t op = in.U8() % 14;
    const int64_t which = in.U8() % 8;  // a row: blocks and ids of the base are small
    switch (op) {
      case 0:
        out.push_back("UPDATE blocks SET " + std::string(kBlockCols[in.U8() % 6]) + " = " +
                      V(in.Value()) + " WHERE block = " + V(which + 1));
        break;
      case 1: {  // a byte of a block's payload
        const int64_t at = in.U8();
        out.push_back("UPDATE blocks SET data = substr(data, 1, " + V(at) + ") || x'" +
                      [&] {
                        char hex[3];
                        std::snprintf(hex, sizeof(hex), "%02x", in.U8());
                        return std::string(hex);
                      }() +
                      "' || substr(data, " + V(at + 2) + ") WHERE block = " + V(which + 1));
        break;
      }
      case 2:
        out.push_back("INSERT OR REPLACE INTO strings VALUES(" + V(in.Value()) + ", 'x" + V(which) +
                      "')");
        break;
      case 3:
        out.push_back("UPDATE strings SET id = " + V(in.Value()) + " WHERE id = " + V(which));
        break;
      case 4:
        out.push_back(std::string("UPDATE tracks SET ") + (in.U8() % 2 ? "rank" : "track") + " = " +
                      V(in.Value()) + " WHERE track = " + V(which));
        break;
      case 5:
        out.push_back("INSERT OR REPLACE INTO steps VALUES(" + V(which % 3) + ", " + V(in.Value()) +
                      ", " + V(in.Value()) + ")");
        break;
      case 6:
        out.push_back("UPDATE block_names SET " + std::string(kNameCols[in.U8() % 5]) + " = " +
                      V(in.Value()) + " WHERE block = " + V(which + 1));
        break;
      case 7:
        out.push_back("UPDATE name_stats SET " + std::string(kStatCols[in.U8() % 8]) + " = " +
                      V(in.Value()) + " WHERE rank = " + V(which % 2));
        break;
      case 8:
        out.push_back("UPDATE meta SET value = '" + V(in.Value()) +
                      "' WHERE key = 'schema_version'");
        break;
      case 9:
        out.push_back("DELETE FROM " + std::string(kTables[which]) +
                      " WHERE rowid % 3 = " + V(in.U8() % 3));
        break;
      case 10: {  // a table replaced by a view, recursive or plain
        const std::string t = kTables[which];
        out.push_back("ALTER TABLE " + t + " RENAME TO old_" + t);
        out.push_back(in.U8() % 2
                          ? "CREATE VIEW " + t +
                                " AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
                                "FROM r) SELECT * FROM old_" +
                                t + ", r"
                          : "CREATE VIEW " + t + " AS SELECT * FROM old_" + t);
        break;
      }
      case 11:
        out.push_back("DROP TABLE " + std::string(kTables[which]));
        break;
      case 12:
        out.push_back("INSERT INTO blocks SELECT " + V(100 + which) + ", rank, min_ts, max_end, " +
                      "max_dur, " + V(in.Value()) +
                      ", data FROM blocks WHERE block = " + V(which % 6 + 1));
        break;
      default:
        out.push_back("UPDATE blocks SET data = zeroblob(" + V(in.U8()) +
                      ") WHERE block = " + V(which + 1));
        break;
    }
  }
  return out;
}

DbResult ReadEverything(const std::string& path, const std::string& scratch) {
  DbResult r;
  Outcomes o{&r};
  fs::create_directories(scratch);
  // The events table and the views, as `tracedb query` runs them.
  auto db = OpenQueryDb(path);
  o.Note("open", db.ok() ? Status::Ok() : db.status());
  if (db.ok()) {
    engine::Db* d = db->get();
    for (const char* sql :
         {"SELECT count(*) FROM events", "SELECT * FROM events LIMIT 300",
          "SELECT name, count(*), sum(dur), max(depth) FROM events GROUP BY name",
          "SELECT * FROM events WHERE name = 'MPI_Send' AND dur > 10",
          "SELECT * FROM events WHERE id = 4294967297", "SELECT * FROM events WHERE parent = 5",
          "SELECT * FROM events WHERE cat = 'comm' AND kind = 'span' ORDER BY dur DESC LIMIT 5",
          "SELECT rank, step, count(*) FROM events GROUP BY rank, step",
          "SELECT * FROM name_summary", "SELECT * FROM step_times", "SELECT * FROM span_stats",
          "SELECT * FROM rank_time_split", "SELECT * FROM collectives LIMIT 50",
          "SELECT * FROM stragglers LIMIT 50",
          "SELECT median(dur), percentile(dur, 90) FROM events"}) {
      o.Run(std::string("query ") + sql, [&] { return RunQuery(d, sql); });
    }
    // The report's data (report html).
    o.Run("report overview", [&] { return BuildOverview(d, 100).status(); });
    o.Run("report steps", [&] { return BuildStepSeries(d).status(); });
    o.Run("report names", [&] { return BuildNameStats(d).status(); });
    o.Run("report summary", [&] { return BuildRunSummary(d, path).status(); });
    o.Run("report collectives", [&]() -> Status {
      auto cd = BuildCollectives(d);
      if (!cd.ok()) return cd.status();
      // report html's skew over time, from the trace's first timestamp as the page has it.
      auto ov = BuildOverview(d, 100);
      BinSkew(*cd, ov.ok() ? ov->t0 : 0, 500);
      return Status::Ok();
    });
    o.Run("report mpi", [&] { return BuildMpiReport(d).status(); });
    // export --chrome
    o.Run("export", [&] {
      ChromeExportOptions eo;
      eo.output = scratch + "/out.json";
      ChromeExportStats stats;
      return ExportChrome(d, eo, &stats);
    });
    // The view's level of detail.
    o.Run("view", [&] {
      view::WindowRequest req;
      req.t0 = 0;
      req.t1 = int64_t{1} << 40;
      req.px = 800;
      view::WindowResult wr;
      return view::ComputeWindow(d, req, &wr);
    });
  }
  // The Python reader's decode path.
  o.Run("python events()", [&] {
    python::Query q;
    q.path = path;
    for (int c = 0; c < python::kNumCols; ++c) q.want[c] = true;
    python::ScanResult sr;
    python::ScanEvents(q, &sr);
    return sr.error.empty() ? Status::Ok() : Status::Corruption(sr.error);
  });
  // verify, then archive (which writes: a copy of its own).
  o.Run("verify", [&] { return engine::VerifyDb(path).status(); });
  o.Run("archive", [&] {
    const std::string copy = scratch + "/archive.tdb";
    fs::remove(copy);
    fs::remove(copy + "-journal");
    std::error_code ec;
    fs::copy_file(path, copy, ec);
    if (ec) return Status::IOError(copy + ": " + ec.message());
    engine::ArchiveOptions ao;
    ao.keep_steps = 1;
    ao.recompress = true;
    ao.busy_timeout_ms = 1000;
    return engine::ArchiveDb(copy, ao).status();
  });
  return r;
}

DbResult HostileDb(const uint8_t* data, size_t size) {
  const std::string& dir = TmpRoot();
  const std::string path = dir + "/hostile.tdb";
  MakeHostileCopy(path, MutationsFromBytes(data, size));
  return ReadEverything(path, dir + "/scratch");
}

std::vector<std::pair<std::string, std::vector<std::string>>> HostileCases() {
  return {
      {"negative_and_lying_counts",
       {"UPDATE blocks SET count = -10 WHERE block = 1",
        "UPDATE blocks SET count = 20 WHERE block = 2"}},
      {"count_minus_one", {"UPDATE blocks SET count = -1 WHERE block = 1"}},
      {"count_2_62", {"UPDATE blocks SET count = 4611686018427387904 WHERE block = 1"}},
      {"count_lies_within_range", {"UPDATE blocks SET count = count + 3 WHERE block = 2"}},
      {"string_id_30M", {"INSERT INTO strings VALUES(30000000, 'x')"}},
      {"string_id_4e12", {"INSERT INTO strings VALUES(4000000000000, 'x')"}},
      {"string_id_negative", {"INSERT INTO strings VALUES(-5, 'x')"}},
      {"mpi_category_at_4e9", {"INSERT INTO strings VALUES(4000000000, 'mpi')"}},
      {"track_id_4e12", {"UPDATE tracks SET track = 4000000000000 WHERE track = 1"}},
      {"track_on_other_rank", {"UPDATE tracks SET rank = 7 WHERE track = 1"}},
      {"recursive_meta_view",
       {"ALTER TABLE meta RENAME TO old_meta",
        "CREATE VIEW meta AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
        "SELECT 'k' AS key, x AS value FROM r"}},
      {"recursive_strings_view",
       {"ALTER TABLE strings RENAME TO old_strings",
        "CREATE VIEW strings AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
        "SELECT x AS id, 'n' AS s FROM r"}},
      {"recursive_placeholder_view",  // the empty view of a table created when first written
       {"DROP VIEW mpi_profile",
        "CREATE VIEW mpi_profile(rank, routine, calls, bytes, time_ns, source) AS WITH RECURSIVE "
        "r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x, 'r', 1, 1.0, 1, NULL FROM r"}},
      {"zone_map_ts_lies",
       {"UPDATE blocks SET min_ts = min_ts + 500, max_dur = 0 WHERE block = 1"}},
      {"block_names_missing", {"DELETE FROM block_names WHERE block = 1"}},
      {"name_stats_lie", {"UPDATE name_stats SET count = count + 1"}},
      {"payload_zeroed", {"UPDATE blocks SET data = zeroblob(64) WHERE block = 1"}},
      {"payload_empty", {"UPDATE blocks SET data = x'' WHERE block = 2"}},
      {"steps_extreme",
       {"INSERT INTO steps VALUES(0, -9223372036854775808, 9223372036854775807)",
        "INSERT INTO steps VALUES(1, 9223372036854775807, -9223372036854775808)"}},
      {"schema_version_garbage", {"UPDATE meta SET value = 'x' WHERE key = 'schema_version'"}},
      {"blocks_dropped", {"DROP TABLE blocks"}},
      {"duplicate_block_other_count",
       {"INSERT INTO blocks SELECT 99, rank, min_ts, max_end, max_dur, 65536, data FROM blocks "
        "WHERE block = 1"}},
  };
}

}  // namespace tracedb::query::fuzz
