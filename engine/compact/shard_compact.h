// Compaction in shards: the ranks of a job split among several compaction processes (an MPI job:
// `tracedb compact --mpi`) or among the job's nodes (`tracedb compact --shard-by node`), each
// shard an ordinary trace database compacted incrementally, then either merged into one database
// by copying encoded blocks (engine/compact/shard_merge.h) or listed in a manifest that the query
// path opens as one database.
//
// Layout (docs/database-format.md "Shards"): the shards of OUT live in the directory
// `OUT.shards/`: `mpi-P-of-K.tdb` for compaction process P of K (ranks r with r mod K == P), and
// `node-HOST.tdb` for the ranks whose segments name HOST. Shards persist: the next run compacts
// only what is new into each, and the merge copies only their new blocks.
// A manifest is a small SQLite file: meta(key, value) with format = tracedb-manifest, and
// shards(path, host) with paths relative to the manifest's directory.
// Thread safety: one call per output at a time (SQLite's locks enforce it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/compact/compactor.h"
#include "engine/compact/shard_merge.h"
#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::engine {

// The shard directory of output database `output` and the file of process `p` of `k`.
std::string ShardDir(const std::string& output);
std::string MpiShardPath(const std::string& output, int p, int k);

// Compacts the ranks of process `p` of `k` (r mod k == p) into its shard of `output`.
// `base` gives the inputs and options (its take_rank is replaced).
StatusOr<CompactStats> CompactMpiShard(const CompactOptions& base, const std::string& output, int p,
                                       int k);

struct MergeSummary {
  ShardMergeStats total;
  int shards = 0;
};

// Merges the shards of `output` made by `k` processes into `output` (created when missing).
// InvalidArgument when `output` was made by another number of processes (its ranks' events are
// in the other processes' shards: rerun with that number, or start a new database).
StatusOr<MergeSummary> MergeMpiShards(const std::string& output, int k);

// `tracedb compact --shard-by node`: one shard per host (the host of each rank's META) in
// ShardDir(manifest), and a manifest at `manifest` listing them. Returns per-shard stats.
struct NodeShard {
  std::string host;
  std::string path;
  CompactStats stats;
};
StatusOr<std::vector<NodeShard>> CompactByNode(const CompactOptions& base,
                                               const std::string& manifest);

// Writes manifest `manifest` (created, or extended when it exists) listing `shards`: each a path
// as stored (relative to the manifest's directory, or absolute) and the host it holds ("" when
// unknown).
struct ManifestEntry {
  std::string path;
  std::string host;
};
Status WriteManifest(const std::string& manifest, const std::vector<ManifestEntry>& shards);

// Where manifest entry `entry` is: relative to the manifest's directory. A manifest travels
// (attached to a ticket, copied from a cluster): an entry that is absolute, contains "..", or
// leads outside the manifest's directory through a symbolic link is refused (InvalidArgument
// naming the manifest and the entry) unless external shards are allowed: the CLI's global
// --allow-external-shards, or TRACEDB_ALLOW_EXTERNAL_SHARDS=1 in the environment.
StatusOr<std::string> ResolveShardPath(const std::string& manifest, const std::string& entry);
void SetAllowExternalShards(bool allow);
bool AllowExternalShards();

// Is `path` a shard manifest? (false for a trace database or anything else).
bool IsManifest(const std::string& path);
// The shard paths a manifest lists, resolved against its directory (ResolveShardPath); *listed
// (when given) gets them as written in the manifest (relative or absolute), in the same order.
StatusOr<std::vector<std::string>> ReadManifest(const std::string& path,
                                                std::vector<std::string>* listed = nullptr);

// Shards must own disjoint ranks (a merge replaces a rank's rows with its shard's, and a query
// would see a rank's events twice): InvalidArgument naming both files and the rank otherwise,
// e.g. for a manifest listing two jobs' shards. Files that do not exist are skipped.
Status CheckDisjoint(const std::vector<std::string>& shards);

}  // namespace tracedb::engine
