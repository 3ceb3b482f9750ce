// Shards read in place. See shard_catalog.h; format in docs/database-format.md "Shards".
#include "engine/compact/shard_catalog.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>

#include "engine/compact/shard_merge.h"
#include "engine/db/block_store.h"
#include "engine/db/db_schema.h"
#include "engine/db/sqlite_guard.h"
#include "engine/util/atomic_file.h"
#include "engine/util/path.h"

namespace tracedb::engine {
namespace {

constexpr const char* kFunction = "tracedb_shard_block";

// A trace database made by OpenTraceDb becomes a catalog: `blocks` (empty) gives way to
// block_refs and a view of the same name and columns (block_refs is what marks a catalog; meta
// stays as a merged database's, since readers show it). The view is plain enough for SQLite to
// flatten into every query: `WHERE block = ?` searches block_refs' primary key, `WHERE rank = ?
// AND min_ts ...` its index, and `data` is only computed for the rows a query reads it from.
constexpr const char* kCatalogSql = R"sql(
DROP INDEX blocks_by_rank;
DROP TABLE blocks;
CREATE TABLE shard_files(
  shard INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, strings BLOB, tracks BLOB);
CREATE TABLE block_refs(
  block INTEGER PRIMARY KEY, rank INTEGER NOT NULL, min_ts INTEGER NOT NULL,
  max_end INTEGER NOT NULL, max_dur INTEGER NOT NULL, count INTEGER NOT NULL,
  shard INTEGER NOT NULL, shard_block INTEGER NOT NULL);
CREATE INDEX block_refs_by_rank ON block_refs(rank, min_ts);
)sql";
// Then the view, kShardCatalogBlocksView (engine/db/db_schema.h: CheckSchema accepts it).

Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Status::IOError(path + ": cannot remove: " + std::strerror(errno));
  }
  return Status::Ok();
}

// Opens (creating or converting) the catalog at `path` for writing.
StatusOr<std::unique_ptr<Db>> OpenCatalogForWrite(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || st.st_size == 0) {
    // Created here, schema and conversion in one transaction, with 1 KiB pages: a catalog is
    // mostly tables of a few rows, and at 4 KiB a page each its empty tables alone took 140 KB.
    TRACEDB_ASSIGN_OR_RETURN(auto raw, Db::Open(path, Db::Mode::kCreate));
    TRACEDB_RETURN_IF_ERROR(raw->Exec("PRAGMA journal_mode=DELETE; PRAGMA page_size=1024"));
    TRACEDB_RETURN_IF_ERROR(raw->Begin());
    if (raw->HasTable("meta")) {  // another process made it meanwhile
      raw->Rollback();
    } else {
      Status s = CreateSchema(raw.get());
      if (s.ok()) s = raw->Exec(kCatalogSql);
      if (s.ok()) s = raw->Exec(kShardCatalogBlocksView);
      if (!s.ok()) {
        raw->Rollback();
        return s.WithContext(path);
      }
      TRACEDB_RETURN_IF_ERROR(raw->Commit());
    }
  }
  TRACEDB_ASSIGN_OR_RETURN(auto db, OpenTraceDb(path, /*create=*/true, /*read_only=*/false));
  if (db->HasTable("block_refs")) return db;
  // Fresh from OpenTraceDb (or from a run killed before this transaction committed): no block.
  TRACEDB_RETURN_IF_ERROR(db->Begin());
  if (db->HasTable("block_refs")) {  // another process converted it meanwhile
    TRACEDB_RETURN_IF_ERROR(db->Commit());
    return db;
  }
  StatusOr<int64_t> blocks = db->QueryInt("SELECT count(*) FROM blocks");
  Status s = blocks.ok() ? Status::Ok() : blocks.status();
  if (s.ok() && *blocks != 0) {
    s = Status::InvalidArgument(path + ": a trace database with blocks, not a shard catalog");
  }
  if (s.ok()) s = db->Exec(kCatalogSql);
  if (s.ok()) s = db->Exec(kShardCatalogBlocksView);
  if (!s.ok()) {
    db->Rollback();
    return s;
  }
  TRACEDB_RETURN_IF_ERROR(db->Commit());
  return db;
}

// The state of tracedb_shard_block on one catalog connection: each shard's file and id maps,
// and the shard connections open now, most recently used first.
class ShardBlockSource {
 public:
  struct Shard {
    std::string path;
    IdMap strings, tracks;
    bool identity = true;  // every id maps to itself: the stored bytes are the answer
    std::unique_ptr<Db> db;
    std::unique_ptr<BlockStore> store;  // reads db's blocks (destroyed before db)
    std::list<int64_t>::iterator lru;
  };

  explicit ShardBlockSource(size_t max_open) : max_open_(max_open < 1 ? 1 : max_open) {}

  Status Load(Db* catalog, const std::string& manifest) {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, catalog->Prepare("SELECT shard, path, strings, tracks FROM "
                                                       "shard_files"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      Shard& s = shards_[st.Int(0)];
      const std::string p(st.Text(1));
      // The same rule as the manifest's (the catalog is only a cache of it).
      auto resolved = ResolveShardPath(manifest, p);
      if (!resolved.ok()) return resolved.status();
      s.path = *resolved;
      // NULL: a shard listed but not merged yet (its maps are written with its first blocks).
      Status d = DecodeIdMap(st.IsNull(2) ? std::string_view() : st.Blob(2), &s.strings);
      if (d.ok()) d = DecodeIdMap(st.IsNull(3) ? std::string_view() : st.Blob(3), &s.tracks);
      if (!d.ok()) return d.WithContext(catalog->path() + ": shard_files " + p);
      s.identity = IsIdentity(s.strings) && IsIdentity(s.tracks);
    }
    return Status::Ok();
  }

  // Calls emit(payload) with block `block` of shard `shard`, its ids mapped to the catalog's.
  // The shard's statement is reset before returning: a statement left stepped would hold the
  // shard's read lock between calls (for the rest of a `tracedb shell` session, say), and a
  // compaction writing that shard could not commit.
  template <typename Emit>
  Status Read(int64_t shard, int64_t block, const Emit& emit) {
    auto it = shards_.find(shard);
    if (it == shards_.end()) {
      return Status::Corruption("shard " + std::to_string(shard) +
                                " is not in the catalog's shard_files");
    }
    Shard& s = it->second;
    TRACEDB_RETURN_IF_ERROR(Connect(shard, &s));
    // The store resets its statement before returning.
    Status r;
    TRACEDB_ASSIGN_OR_RETURN(bool found, s.store->ReadBytes(block, [&](std::string_view data) {
      if (s.identity) {
        emit(data);
        return Status::Ok();
      }
      bool changed = false;
      r = RemapBlock(data, block, s.strings, s.tracks, &rewritten_, &changed, /*compress=*/false);
      if (r.ok()) emit(changed ? std::string_view(rewritten_) : data);
      return Status::Ok();
    }));
    if (!found) {
      return Status::Corruption(s.path + ": block " + std::to_string(block) +
                                " is missing (the shard changed since the catalog was built: "
                                "open the manifest again)");
    }
    return r.ok() ? r : r.WithContext(s.path);
  }

  ShardConnectionCounts counts() const { return counts_; }

 private:
  Status Connect(int64_t id, Shard* s) {
    if (s->db) {
      lru_.splice(lru_.begin(), lru_, s->lru);  // most recently used first
      return Status::Ok();
    }
    while (counts_.open >= max_open_ && !lru_.empty()) {
      Shard& old = shards_[lru_.back()];
      old.store.reset();
      old.db.reset();
      lru_.pop_back();
      counts_.open--;
    }
    auto db = OpenTraceDb(s->path, /*create=*/false, /*read_only=*/true);
    if (!db.ok()) return db.status().WithContext("shard " + s->path);
    s->db = std::move(*db);
    s->store = std::make_unique<BlockStore>(s->db.get(), s->path);
    lru_.push_front(id);
    s->lru = lru_.begin();
    counts_.open++;
    counts_.opened++;
    counts_.peak = std::max(counts_.peak, counts_.open);
    return Status::Ok();
  }

  const size_t max_open_;
  std::unordered_map<int64_t, Shard> shards_;
  std::list<int64_t> lru_;
  ShardConnectionCounts counts_;
  std::string rewritten_;
};

// The sources by catalog connection, for ShardConnections (SQLite gives a function's user data
// only to the function).
std::mutex g_sources_mu;
std::unordered_map<sqlite3*, ShardBlockSource*>& Sources() {
  static auto* m = new std::unordered_map<sqlite3*, ShardBlockSource*>();
  return *m;
}

void ShardBlockFn(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  auto* src = static_cast<ShardBlockSource*>(sqlite3_user_data(ctx));
  if (argc != 2 || sqlite3_value_type(argv[0]) != SQLITE_INTEGER ||
      sqlite3_value_type(argv[1]) != SQLITE_INTEGER) {
    sqlite3_result_error(ctx, "tracedb_shard_block(shard, shard_block): two integers", -1);
    return;
  }
  Status s = src->Read(sqlite3_value_int64(argv[0]), sqlite3_value_int64(argv[1]),
                       [ctx](std::string_view data) {
                         // SQLITE_TRANSIENT: SQLite copies it before the shard's row goes.
                         sqlite3_result_blob64(ctx, data.data(), data.size(), SQLITE_TRANSIENT);
                       });
  if (!s.ok()) sqlite3_result_error(ctx, s.message().c_str(), -1);
}

void DestroySource(void* p) {
  auto* src = static_cast<ShardBlockSource*>(p);
  {
    std::lock_guard<std::mutex> lock(g_sources_mu);
    for (auto it = Sources().begin(); it != Sources().end(); ++it) {
      if (it->second == src) {
        Sources().erase(it);
        break;
      }
    }
  }
  delete src;
}

// Is `path` under directory `dir` (both absolute, normalized)? Sets *rel to the rest.
bool Under(const std::string& path, const std::string& dir, std::string* rel) {
  const std::string prefix = dir == "/" ? dir : dir + "/";
  if (path.compare(0, prefix.size(), prefix) != 0) return false;
  *rel = path.substr(prefix.size());
  return true;
}

StatusOr<std::string> RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) {
    return Status::NotFound(path + ": " + std::strerror(errno));
  }
  return std::string(buf);
}

// Does the catalog at `path` list exactly the shards `listed` (resolved: `shards`), each with the
// fingerprint (change counter, inode, size, mtime) it has now? Then a refresh has nothing to check
// or write: the rank check and the per-shard merge (an open and an attach each, some 2-3 ms per
// shard) are skipped, and an open of a job of thousands of shards costs a header read per shard.
// Any doubt says no.
bool UpToDate(const std::string& path, const std::vector<std::string>& shards,
              const std::vector<std::string>& listed) {
  if (!PathExists(path) || PathExists(path + "-journal")) return false;
  auto db = Db::Open(path, Db::Mode::kReadOnly);
  if (!db.ok() || !(*db)->HasTable("block_refs")) return false;
  auto n = (*db)->QueryInt("SELECT count(*) FROM shard_files", -1);
  if (!n.ok() || *n != static_cast<int64_t>(listed.size())) return false;
  auto st = (*db)->Prepare(
      "SELECT CAST(s.value AS TEXT) FROM shard_files f JOIN state s "
      "ON s.key = 'shard_merge_file:' || f.path WHERE f.path = ?1");
  if (!st.ok()) return false;
  for (size_t i = 0; i < listed.size(); ++i) {
    st->Bind(1, listed[i]);
    auto row = st->Step();
    if (!row.ok() || !*row) return false;
    const std::string recorded(st->Text(0));
    st->Reset();
    const std::string now = ShardFingerprint(shards[i]);
    if (now.empty() || now != recorded) return false;
  }
  return true;
}

// A catalog is refreshed in a copy (or built from nothing) under a name of its own,
// `catalog.tdb.build-HOST-PID`, without a sync per shard (a job of 512 one-node shards took 17 s to
// open the first time, nearly all of it a synced transaction per shard), then synced once and
// renamed over catalog.tdb. A build killed at any moment leaves only its own file, which the
// next build removes once its process is gone: a catalog is derived from the shards, and is
// never seen half written. Since no writer changes catalog.tdb in place, a plain copy of it is
// a consistent one; two processes refreshing at once each put a whole catalog in place.
constexpr const char* kBuildInfix = ".build-";

// This host's name as build files carry it ("-" when it has none).
std::string HostTag() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "-";
  std::string h(host);
  for (char& c : h) {
    if (c == '/') c = '_';
  }
  return h;
}

// `catalog.tdb.build-HOST-PID`: the host too, since shards on a shared file system may be opened
// from several machines, and a process id says whether a build is alive only on its own host.
std::string BuildPath(const std::string& catalog) {
  return catalog + kBuildInfix + HostTag() + "-" + std::to_string(::getpid());
}

// Removes the build files of this host's processes that no longer run.
void RemoveDeadBuilds(const std::string& catalog) {
  const std::string dir = DirOf(catalog);
  const std::string prefix = catalog.substr(catalog.rfind('/') + 1) + kBuildInfix + HostTag() + "-";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
    if (pid <= 0 || end == name.c_str() + prefix.size()) continue;
    // ("-journal" files of a build follow their database.)
    if (*end != '\0' && std::strcmp(end, "-journal") != 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    (void)::unlink((dir + "/" + name).c_str());
  }
  ::closedir(d);
}

// Copies the catalog at `from` to a new file `to`.
Status CopyCatalog(const std::string& from, const std::string& to) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return Status::IOError(from + ": " + std::strerror(errno));
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (out < 0) {
    const int e = errno;
    ::close(in);
    return Status::IOError(to + ": cannot create: " + std::strerror(e));
  }
  std::string buf(1 << 20, '\0');
  Status s;
  for (;;) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      s = Status::IOError(from + ": read: " + std::strerror(errno));
      break;
    }
    if (n == 0) break;
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(out, buf.data() + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        s = Status::IOError(to + ": write: " + std::strerror(errno));
        break;
      }
      done += w;
    }
    if (!s.ok()) break;
  }
  ::close(in);
  if (::close(out) != 0 && s.ok()) s = Status::IOError(to + ": close: " + std::strerror(errno));
  return s;
}

// Makes the built catalog at `build` durable and puts it at `path` (replacing what is there).
Status InstallBuild(const std::string& build, const std::string& path) {
  return InstallFile(build, path);  // engine/util/atomic_file.h
}

// RefreshCatalog's merge of every shard into the open catalog `db` (at `path`, for errors).
Status MergeShardsInto(Db* db, const std::string& path, const std::vector<std::string>& shards,
                       const std::vector<std::string>& listed, MergeSummary* out) {
  TRACEDB_ASSIGN_OR_RETURN(Stmt add,
                           db->Prepare("INSERT OR IGNORE INTO shard_files(path) VALUES(?1)"));
  TRACEDB_ASSIGN_OR_RETURN(Stmt find, db->Prepare("SELECT shard FROM shard_files WHERE path = ?1"));
  MergeSummary sum;
  int64_t open_spans = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    TRACEDB_RETURN_IF_ERROR(add.Bind(1, listed[i]).Run());
    find.Bind(1, listed[i]);
    TRACEDB_ASSIGN_OR_RETURN(bool row, find.Step());
    if (!row) return Status::Internal(path + ": shard " + listed[i] + " not recorded");
    const int64_t id = find.Int(0);
    find.Reset();
    auto s = MergeShard(db, shards[i], listed[i], id);
    if (!s.ok()) return s.status().WithContext("shard " + shards[i]);
    sum.total.blocks += s->blocks;
    sum.total.rows += s->rows;
    sum.total.strings_added += s->strings_added;
    sum.total.tracks_added += s->tracks_added;
    sum.total.blocks_dropped += s->blocks_dropped;
    open_spans += s->open_spans;
    sum.shards++;
  }
  TRACEDB_RETURN_IF_ERROR(SetMeta(db, "open_spans", std::to_string(open_spans)));
  sum.total.open_spans = open_spans;
  *out = sum;
  return Status::Ok();
}

}  // namespace

std::string CatalogPath(const std::string& manifest) { return ShardDir(manifest) + "/catalog.tdb"; }

std::string LegacyMergedPath(const std::string& manifest) {
  return ShardDir(manifest) + "/merged.tdb";
}

// The catalog is written (and an older tracedb's merged copy deleted) in the manifest's shard
// directory: a symbolic link there would lead those writes elsewhere.
Status CheckShardDir(const std::string& manifest) {
  struct stat st;
  if (::lstat(ShardDir(manifest).c_str(), &st) == 0 && S_ISLNK(st.st_mode) &&
      !AllowExternalShards()) {
    return Status::InvalidArgument(ShardDir(manifest) +
                                   ": a symbolic link; the catalog is written only in a real "
                                   "directory beside the manifest (tracedb "
                                   "--allow-external-shards allows it)");
  }
  return Status::Ok();
}

StatusOr<MergeSummary> RefreshCatalog(const std::string& manifest) {
  TRACEDB_RETURN_IF_ERROR(CheckShardDir(manifest));
  std::vector<std::string> listed;
  TRACEDB_ASSIGN_OR_RETURN(std::vector<std::string> shards, ReadManifest(manifest, &listed));
  if (UpToDate(CatalogPath(manifest), shards, listed)) {
    MergeSummary sum;
    sum.shards = static_cast<int>(shards.size());
    return sum;
  }
  for (const std::string& shard : shards) {
    if (!PathExists(shard)) {
      return Status::NotFound("shard " + shard + " (listed in " + manifest + "): no such database");
    }
  }
  TRACEDB_RETURN_IF_ERROR(CheckDisjoint(shards));
  const std::string path = CatalogPath(manifest);
  if (!PathExists(ShardDir(manifest)) && ::mkdir(ShardDir(manifest).c_str(), 0777) != 0 &&
      errno != EEXIST) {
    return Status::IOError(ShardDir(manifest) + ": cannot create: " + std::strerror(errno));
  }
  // Every refresh writes a copy of the catalog (or a new one), without a sync per shard, and
  // puts it in place at the end: see BuildPath. (Its journal in memory and no sync: a build that
  // fails or dies is thrown away whole.)
  const std::string build = BuildPath(path);
  struct RemoveBuild {
    const std::string* path;
    bool armed = false;
    ~RemoveBuild() {
      if (armed) RemoveDbFiles(*path);
    }
  } remove_build{&build};
  RemoveDeadBuilds(path);
  TRACEDB_RETURN_IF_ERROR(RemoveFile(build));
  TRACEDB_RETURN_IF_ERROR(RemoveFile(build + "-journal"));
  remove_build.armed = true;
  std::unique_ptr<Db> db;
  // (A catalog written in place by an older tracedb that died mid-transaction has a hot journal:
  // a copy without it would be inconsistent, so it is built again.)
  bool fresh = !PathExists(path) || PathSize(path + "-journal") > 0;
  if (!fresh) {
    TRACEDB_RETURN_IF_ERROR(CopyCatalog(path, build));
    TRACEDB_ASSIGN_OR_RETURN(db, OpenCatalogForWrite(build));
    // A shard no longer listed (a manifest rewritten with fewer files): its rows cannot be taken
    // out of the per-name tables piecemeal, so the catalog (small) is built again.
    std::set<std::string> now(listed.begin(), listed.end());
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare("SELECT path FROM shard_files"));
    bool stale = false;
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      stale |= now.count(std::string(st.Text(0))) == 0;
    }
    st = Stmt();
    if (stale) {
      db.reset();
      TRACEDB_RETURN_IF_ERROR(RemoveFile(build));
      fresh = true;
    }
  }
  if (fresh) {
    TRACEDB_ASSIGN_OR_RETURN(db, OpenCatalogForWrite(build));
  }
  TRACEDB_RETURN_IF_ERROR(db->Exec("PRAGMA journal_mode=MEMORY; PRAGMA synchronous=OFF"));
  MergeSummary sum;
  TRACEDB_RETURN_IF_ERROR(MergeShardsInto(db.get(), path, shards, listed, &sum));
  db.reset();
  TRACEDB_RETURN_IF_ERROR(InstallBuild(build, path));
  remove_build.armed = false;
  return sum;
}

StatusOr<std::unique_ptr<Db>> OpenShardCatalog(const std::string& manifest, size_t max_open) {
  TRACEDB_ASSIGN_OR_RETURN(MergeSummary sum, RefreshCatalog(manifest));
  (void)sum;
  // The full copy an older tracedb kept of the shards' blocks: the catalog replaces it, and it
  // doubled the disk used (it is never brought up to date again).
  TRACEDB_RETURN_IF_ERROR(RemoveFile(LegacyMergedPath(manifest)));
  TRACEDB_RETURN_IF_ERROR(RemoveFile(LegacyMergedPath(manifest) + "-journal"));
  const std::string path = CatalogPath(manifest);
  TRACEDB_ASSIGN_OR_RETURN(auto db, OpenTraceDb(path, /*create=*/false, /*read_only=*/true));
  auto src = std::make_unique<ShardBlockSource>(max_open);
  TRACEDB_RETURN_IF_ERROR(src->Load(db.get(), manifest));
  ShardBlockSource* raw = src.release();
  {
    std::lock_guard<std::mutex> lock(g_sources_mu);
    Sources()[db->raw()] = raw;
  }
  // Innocuous: it reads only the files the catalog lists, by their number, and changes nothing,
  // so it may run from the catalog's view under SQLite's trusted_schema=OFF too.
  const int rc =
      sqlite3_create_function_v2(db->raw(), kFunction, 2, SQLITE_UTF8 | SQLITE_INNOCUOUS, raw,
                                 engine::Guarded<ShardBlockFn>(), nullptr, nullptr, DestroySource);
  if (rc != SQLITE_OK) return db->Error(rc, "installing tracedb_shard_block");
  return db;
}

ShardConnectionCounts ShardConnections(Db* catalog) {
  std::lock_guard<std::mutex> lock(g_sources_mu);
  auto it = Sources().find(catalog->raw());
  return it == Sources().end() ? ShardConnectionCounts{} : it->second->counts();
}

Status CreateManifest(const std::string& manifest, const std::vector<std::string>& dbs) {
  if (dbs.empty()) return Status::InvalidArgument("no database to list in " + manifest);
  if (PathExists(manifest)) {
    return Status::InvalidArgument(manifest + ": exists; a new manifest is written to a new file");
  }
  std::vector<std::string> real;
  for (const std::string& d : dbs) {
    TRACEDB_ASSIGN_OR_RETURN(std::string r, RealPath(d));
    if (IsManifest(r)) return Status::InvalidArgument(d + ": a manifest, not a trace database");
    // Each a readable trace database (the error names the file otherwise).
    TRACEDB_ASSIGN_OR_RETURN(auto db, OpenTraceDb(r, /*create=*/false, /*read_only=*/true));
    real.push_back(r);
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < real.size(); ++i) {
    if (!seen.insert(real[i]).second) {
      return Status::InvalidArgument(dbs[i] + ": listed twice");
    }
  }
  TRACEDB_RETURN_IF_ERROR(CheckDisjoint(real));
  TRACEDB_ASSIGN_OR_RETURN(std::string dir, RealPath(DirOf(manifest)));
  std::vector<ManifestEntry> entries;
  for (size_t i = 0; i < real.size(); ++i) {
    std::string rel;
    const bool inside = Under(real[i], dir, &rel);
    if (!inside && !AllowExternalShards()) {
      return Status::InvalidArgument(dbs[i] + ": outside " + dir +
                                     ", the manifest's directory; readers open only shards "
                                     "under it (move it there, or give tracedb "
                                     "--allow-external-shards, which readers then need too)");
    }
    entries.push_back({inside ? rel : real[i], ""});
  }
  return WriteManifest(manifest, entries);
}

}  // namespace tracedb::engine
