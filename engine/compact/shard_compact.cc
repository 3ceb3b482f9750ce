// Compaction in shards. See shard_compact.h; layout in docs/database-format.md "Shards".
#include "engine/compact/shard_compact.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "engine/compact/output_lock.h"
#include "engine/db/db_schema.h"
#include "engine/db/trace_writer.h"
#include "engine/segment/segment_dir.h"
#include "engine/segment/segment_reader.h"
#include "engine/util/path.h"

namespace tracedb::engine {
namespace {

constexpr const char* kManifestFormat = "tracedb-manifest";
constexpr const char* kMpiMetaKey = "mpi_processes";

Status MakeDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
    return Status::IOError(dir + ": cannot create: " + std::strerror(errno));
  }
  return Status::Ok();
}

// A host name as a file name: letters, digits, '.', '-' and '_' kept, anything else '_'.
std::string FileSafe(const std::string& s) {
  std::string out = s.empty() ? "unknown" : s;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  }
  if (out[0] == '.') out[0] = '_';
  return out;
}

// A run that made a database that is not a shard merge must not be extended by one (its ranks'
// progress is in the database itself, not in shards), nor one made by another process count.
Status CheckMpiOutput(const std::string& output, int k) {
  if (!NonEmptyPathExists(output)) return Status::Ok();
  {
    // Read-write: a hot journal left by a killed run is rolled back here; a file whose creation
    // was killed before its schema committed is then empty, as good as none.
    TRACEDB_ASSIGN_OR_RETURN(auto raw, Db::Open(output, Db::Mode::kReadWrite));
    TRACEDB_ASSIGN_OR_RETURN(int64_t objects, raw->QueryInt("SELECT count(*) FROM sqlite_master"));
    if (objects == 0) return Status::Ok();
  }
  TRACEDB_ASSIGN_OR_RETURN(auto db, OpenTraceDb(output, false, true));
  TRACEDB_ASSIGN_OR_RETURN(
      int64_t made_by,
      db->QueryInt(
          std::string("SELECT CAST(value AS INTEGER) FROM meta WHERE key = '") + kMpiMetaKey + "'",
          0));
  if (made_by == 0) {
    TRACEDB_ASSIGN_OR_RETURN(int64_t sources, db->QueryInt("SELECT count(*) FROM sources", 0));
    if (sources == 0) return Status::Ok();
    return Status::InvalidArgument(output +
                                   ": made by a single-process compaction; extend it with "
                                   "`tracedb compact` without --mpi, or write a new database");
  }
  if (made_by != k) {
    return Status::InvalidArgument(
        output + ": made by an MPI compaction of " + std::to_string(made_by) +
        " processes; its shards hold the ranks of that many: run with -np " +
        std::to_string(made_by) + ", or write a new database");
  }
  return Status::Ok();
}

}  // namespace

std::string ShardDir(const std::string& output) { return output + ".shards"; }

std::string MpiShardPath(const std::string& output, int p, int k) {
  return ShardDir(output) + "/mpi-" + std::to_string(p) + "-of-" + std::to_string(k) + ".tdb";
}

Status CheckDisjoint(const std::vector<std::string>& shards) {
  std::map<int64_t, std::string> owner;
  for (const std::string& shard : shards) {
    if (!NonEmptyPathExists(shard)) continue;
    TRACEDB_ASSIGN_OR_RETURN(auto db, OpenTraceDb(shard, false, true));
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare("SELECT DISTINCT rank FROM sources"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      auto [it, added] = owner.emplace(st.Int(0), shard);
      if (!added) {
        return Status::InvalidArgument("rank " + std::to_string(st.Int(0)) + " is in two shards, " +
                                       it->second + " and " + shard +
                                       ": shards must hold disjoint ranks of one job");
      }
    }
  }
  return Status::Ok();
}

StatusOr<CompactStats> CompactMpiShard(const CompactOptions& base, const std::string& output, int p,
                                       int k) {
  if (k < 1 || p < 0 || p >= k) {
    return Status::InvalidArgument("process " + std::to_string(p) + " of " + std::to_string(k));
  }
  TRACEDB_RETURN_IF_ERROR(CheckMpiOutput(output, k));
  TRACEDB_RETURN_IF_ERROR(MakeDir(ShardDir(output)));
  CompactOptions o = base;
  o.take_rank = [p, k](int32_t rank) { return ((rank % k) + k) % k == p; };
  TRACEDB_ASSIGN_OR_RETURN(auto writer, TraceWriter::Open(MpiShardPath(output, p, k)));
  return Compact(writer.get(), o);
}

StatusOr<MergeSummary> MergeMpiShards(const std::string& output, int k) {
  TRACEDB_RETURN_IF_ERROR(CheckMpiOutput(output, k));
  TRACEDB_ASSIGN_OR_RETURN(auto db, OpenTraceDb(output, true, false));
  TRACEDB_RETURN_IF_ERROR(SetMeta(db.get(), kMpiMetaKey, std::to_string(k)));
  std::vector<std::string> shards;
  for (int p = 0; p < k; ++p) shards.push_back(MpiShardPath(output, p, k));
  TRACEDB_RETURN_IF_ERROR(CheckDisjoint(shards));
  MergeSummary sum;
  int64_t open_spans = 0;
  for (int p = 0; p < k; ++p) {
    const std::string shard = MpiShardPath(output, p, k);
    if (!NonEmptyPathExists(shard)) continue;  // a process whose ranks had no segments yet
    TRACEDB_ASSIGN_OR_RETURN(ShardMergeStats s, MergeShard(db.get(), shard, BaseOf(shard)));
    sum.total.blocks += s.blocks;
    sum.total.blocks_rewritten += s.blocks_rewritten;
    sum.total.rows += s.rows;
    sum.total.bytes += s.bytes;
    sum.total.strings_added += s.strings_added;
    sum.total.tracks_added += s.tracks_added;
    sum.total.blocks_dropped += s.blocks_dropped;
    open_spans += s.open_spans;
    sum.shards++;
  }
  TRACEDB_RETURN_IF_ERROR(SetMeta(db.get(), "open_spans", std::to_string(open_spans)));
  sum.total.open_spans = open_spans;
  return sum;
}

StatusOr<std::vector<NodeShard>> CompactByNode(const CompactOptions& base,
                                               const std::string& manifest) {
  // Each rank's host, from the META of its first segment file.
  std::map<int32_t, std::string> host_of;
  ScanBuffers buffers;  // one for every file (engine/util/read_buffer.h)
  for (const std::string& dir : base.inputs) {
    TRACEDB_ASSIGN_OR_RETURN(std::vector<SegmentFileRef> files, ListSegmentFiles(dir));
    for (const SegmentFileRef& f : files) {
      if (host_of.count(f.rank) && !host_of[f.rank].empty()) continue;
      StatusOr<SegmentMetaScan> scan = ScanSegmentMeta(f.path, &buffers);
      host_of[f.rank] = scan.ok() && scan->meta ? scan->meta->host : "";
    }
  }
  std::map<std::string, std::set<int32_t>> ranks_of;
  for (const auto& [rank, host] : host_of) ranks_of[host].insert(rank);

  // (An empty file is one the caller's writer lock created: engine/compact/output_lock.h.)
  struct stat st;
  const bool empty_file =
      ::stat(manifest.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0;
  if (!IsManifest(manifest) && NonEmptyPathExists(manifest) && !empty_file) {
    return Status::InvalidArgument(manifest + ": exists and is not a shard manifest");
  }
  TRACEDB_RETURN_IF_ERROR(MakeDir(ShardDir(manifest)));
  std::vector<NodeShard> out;
  for (const auto& [host, ranks] : ranks_of) {
    NodeShard s;
    s.host = host.empty() ? "unknown" : host;
    s.path = ShardDir(manifest) + "/node-" + FileSafe(host) + ".tdb";
    CompactOptions o = base;
    const std::set<int32_t> mine = ranks;
    o.take_rank = [mine](int32_t rank) { return mine.count(rank) > 0; };
    // Each shard's own writer lock too: a plain `compact -o` of a shard is a writer of it.
    TRACEDB_ASSIGN_OR_RETURN(std::unique_ptr<OutputLock> shard_lock, OutputLock::Acquire(s.path));
    TRACEDB_ASSIGN_OR_RETURN(auto writer, TraceWriter::Open(s.path));
    auto stats = Compact(writer.get(), o);
    writer.reset();  // closed before its lock goes (output_lock.h)
    if (!stats.ok()) return stats.status().WithContext(s.path);
    s.stats = *stats;
    out.push_back(std::move(s));
  }
  // The manifest, written last: it lists only shards that exist.
  std::vector<ManifestEntry> entries;
  for (const NodeShard& s : out) {
    entries.push_back({BaseOf(ShardDir(manifest)) + "/" + BaseOf(s.path), s.host});
  }
  TRACEDB_RETURN_IF_ERROR(WriteManifest(manifest, entries));
  return out;
}

Status WriteManifest(const std::string& manifest, const std::vector<ManifestEntry>& shards) {
  TRACEDB_ASSIGN_OR_RETURN(auto db, Db::Open(manifest, Db::Mode::kCreate));
  TRACEDB_RETURN_IF_ERROR(db->Exec(
      "PRAGMA journal_mode=DELETE; BEGIN IMMEDIATE;"
      "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;"
      "CREATE TABLE IF NOT EXISTS shards(path TEXT PRIMARY KEY, host TEXT) WITHOUT ROWID;"));
  TRACEDB_ASSIGN_OR_RETURN(Stmt m,
                           db->Prepare("INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)"));
  TRACEDB_RETURN_IF_ERROR(m.Bind(1, "format").Bind(2, kManifestFormat).Run());
  TRACEDB_ASSIGN_OR_RETURN(Stmt ins,
                           db->Prepare("INSERT OR REPLACE INTO shards(path, host) VALUES(?1, ?2)"));
  for (const ManifestEntry& e : shards) {
    TRACEDB_RETURN_IF_ERROR(ins.Bind(1, e.path).Bind(2, e.host).Run());
  }
  return db->Commit();
}

bool IsManifest(const std::string& path) {
  if (!NonEmptyPathExists(path)) return false;
  auto db = Db::Open(path, Db::Mode::kReadOnly);
  if (!db.ok()) return false;
  if (!(*db)->HasTable("shards") || !(*db)->HasTable("meta")) return false;
  auto st = (*db)->Prepare("SELECT value FROM meta WHERE key = 'format'");
  if (!st.ok()) return false;
  auto row = st->Step();
  return row.ok() && *row && st->Text(0) == kManifestFormat;
}

namespace {
std::atomic<bool> g_allow_external_shards{false};
}  // namespace

void SetAllowExternalShards(bool allow) { g_allow_external_shards.store(allow); }

bool AllowExternalShards() {
  if (g_allow_external_shards.load()) return true;
  const char* env = std::getenv("TRACEDB_ALLOW_EXTERNAL_SHARDS");
  return env != nullptr && std::strcmp(env, "1") == 0;
}

StatusOr<std::string> ResolveShardPath(const std::string& manifest, const std::string& entry) {
  const std::string dir = DirOf(manifest);
  if (entry.empty()) return Status::Corruption(manifest + ": a shard with an empty path");
  const bool absolute = entry[0] == '/';
  const std::string path = absolute ? entry : dir + "/" + entry;
  if (AllowExternalShards()) return path;
  const char* flag =
      " (a manifest from elsewhere must not reach other files; "
      "tracedb --allow-external-shards or TRACEDB_ALLOW_EXTERNAL_SHARDS=1 "
      "allows it)";
  if (absolute) {
    return Status::InvalidArgument(manifest + ": shard '" + entry +
                                   "' is an absolute path, outside the manifest's directory" +
                                   flag);
  }
  for (size_t b = 0; b <= entry.size();) {
    size_t e = entry.find('/', b);
    if (e == std::string::npos) e = entry.size();
    if (entry.compare(b, e - b, "..") == 0 && e - b == 2) {
      return Status::InvalidArgument(manifest + ": shard '" + entry +
                                     "' leaves the manifest's directory ('..')" + flag);
    }
    b = e + 1;
  }
  // A symbolic link on the way may lead out too: compare the real paths (when the file exists;
  // a missing shard is reported by its reader).
  char real_dir[PATH_MAX], real_path[PATH_MAX];
  if (::realpath(dir.c_str(), real_dir) != nullptr &&
      ::realpath(path.c_str(), real_path) != nullptr) {
    const std::string d = real_dir, r = real_path;
    const std::string prefix = d == "/" ? d : d + "/";
    if (r.compare(0, prefix.size(), prefix) != 0) {
      return Status::InvalidArgument(manifest + ": shard '" + entry + "' is " + r +
                                     " through a symbolic link, outside the manifest's "
                                     "directory" +
                                     flag);
    }
  }
  return path;
}

StatusOr<std::vector<std::string>> ReadManifest(const std::string& path,
                                                std::vector<std::string>* listed) {
  if (!IsManifest(path)) return Status::InvalidArgument(path + ": not a shard manifest");
  TRACEDB_ASSIGN_OR_RETURN(auto db, Db::Open(path, Db::Mode::kReadOnly));
  TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare("SELECT path FROM shards ORDER BY path"));
  std::vector<std::string> out;
  for (;;) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    std::string p(st.Text(0));
    if (listed) listed->push_back(p);
    TRACEDB_ASSIGN_OR_RETURN(std::string resolved, ResolveShardPath(path, p));
    out.push_back(std::move(resolved));
  }
  if (out.empty()) return Status::InvalidArgument(path + ": a shard manifest without shards");
  return out;
}

}  // namespace tracedb::engine
