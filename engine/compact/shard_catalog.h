// Shards read in place: a shard manifest (engine/compact/shard_compact.h) opened as one trace
// database without copying the shards' event blocks.
//
// The *catalog* is a trace database beside the manifest (CatalogPath) holding every table of the
// merged database MergeShard would build (strings, tracks, ranks, name_stats, block_names, ...:
// the same id mapping) except the block payloads: its `block_refs` table keeps each block's zone
// map (rank, min_ts, max_end, max_dur, count) and where the block is (shard, block in the shard),
// and `blocks` is a view over it whose `data` column is the SQL function
// tracedb_shard_block(shard, shard_block): the block read from that shard's file, its string and
// track ids mapped to the catalog's exactly as the merge does (RemapBlock; a shard whose ids all
// map to themselves is returned byte for byte). Every reader of `blocks` (the events table, the
// views, the reports, export, view) thus runs unchanged, with zone-map pruning per shard block.
// The catalog is brought up to date on every open (only the shards' new blocks are listed), with
// MergeShard's incremental, crash-safe logic.
//
// The function keeps at most `max_open` shard connections (one file descriptor each), closing
// the least recently used, so a job of thousands of shards stays within the process's limit.
// Format: docs/database-format.md "Shards".
// Thread safety: a catalog connection belongs to one thread, like any Db; refreshes of one
// catalog are serialized by SQLite's lock.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "engine/compact/shard_compact.h"
#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::engine {

// Where the catalog of manifest `manifest` lives (in its shard directory).
std::string CatalogPath(const std::string& manifest);
// Where an older tracedb merged the shards of `manifest` (a full copy of their blocks); the
// catalog replaces it, and OpenShardCatalog deletes it.
std::string LegacyMergedPath(const std::string& manifest);

// Brings the catalog of `manifest` up to date with its shards (created when missing).
// InvalidArgument naming both files when two shards hold the same rank.
StatusOr<MergeSummary> RefreshCatalog(const std::string& manifest);

inline constexpr size_t kDefaultMaxShardConnections = 64;

// Refreshes the catalog of `manifest`, deletes a stale merged copy left by an older tracedb, and
// opens the catalog read-only with tracedb_shard_block installed.
StatusOr<std::unique_ptr<Db>> OpenShardCatalog(const std::string& manifest,
                                               size_t max_open = kDefaultMaxShardConnections);

// How many shard connections `catalog` (opened by OpenShardCatalog) holds open now, and the
// most it held at once: for tests of the bound.
struct ShardConnectionCounts {
  size_t open = 0;
  size_t peak = 0;
  size_t opened = 0;  // connections opened in all (an evicted shard read again is opened again)
};
ShardConnectionCounts ShardConnections(Db* catalog);

// Writes a manifest at `manifest` listing the trace databases `dbs` (made by any compaction:
// per-node shards, or databases of distinct ranks of one job), after checking that their ranks
// are disjoint. Paths are stored relative to the manifest's directory when they lie under it,
// absolute otherwise. InvalidArgument when `manifest` exists and is not a manifest.
Status CreateManifest(const std::string& manifest, const std::vector<std::string>& dbs);

}  // namespace tracedb::engine
