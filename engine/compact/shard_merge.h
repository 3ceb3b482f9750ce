// Shards of a trace database: several databases, each holding every event of a disjoint set of
// ranks (one per MPI compaction process, or one per node), merged into one by copying their
// encoded event blocks.
//
// A shard numbers its strings and tracks on its own; the merge maps them onto the target's
// (strings by text, tracks by their identity: rank, kind, pid and recorder thread index, or
// rank, kind and name) and rewrites only the header of each copied block (its name and category
// dictionaries) and its track column: the other columns are copied byte for byte, never
// decoded. Blocks whose ids all map to themselves are copied unchanged.
//
// The merge is incremental and crash-safe: the target records, per shard, the last shard block
// it holds (`state` key `shard_merge:KEY`), and every shard is merged in one transaction that
// also replaces the shard's ranks' rows of the per-rank tables (ranks, processes, clock_knots,
// sync_points, comms, name_stats, steps, stats, sources), so a merge killed at any moment leaves
// the target as of its last whole shard, and the next one goes on from there.
// The ranks of a shard are those of its `sources` rows (a shard may hold rank 0's clock rows
// without its events: they stay out).
// Thread safety: one merge per target at a time (SQLite's lock enforces it); RemapBlock is a
// pure function. Format: docs/database-format.md "Shards".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::engine {

struct ShardMergeStats {
  uint64_t blocks = 0;            // blocks copied
  uint64_t blocks_rewritten = 0;  // of which had ids to map
  uint64_t rows = 0;              // events in the blocks copied
  uint64_t bytes = 0;             // block bytes written
  uint64_t strings_added = 0;
  uint64_t tracks_added = 0;
  uint64_t blocks_dropped = 0;  // earlier blocks taken out: the shard no longer held them as merged
  int64_t open_spans = 0;       // the shard's meta open_spans
};

// An id map: map[shard id] = target id; ids past its end, or mapped to 0, are unknown.
using IdMap = std::vector<uint32_t>;

// Rewrites encoded block `data` (docs/database-format.md "Event blocks") with its string ids
// mapped through `strings` and its track ids through `tracks`, into *out. *changed is false
// (and *out untouched) when every id maps to itself. Block formats 1 and 2 are rewritten in
// place (header and track column); any other format is decoded and encoded again. Corruption
// naming `block` for malformed data or an id the maps do not know. With `compress` false the
// rewritten block is stored raw (codec 0): for a block read once and decoded at once (a shard
// read in place, engine/compact/shard_catalog.h), LZ4 would cost a compression and a decompression.
Status RemapBlock(std::string_view data, int64_t block, const IdMap& strings, const IdMap& tracks,
                  std::string* out, bool* changed, bool compress = true);

// An id map as stored in a shard catalog (shard_files.strings / .tracks): varint size, then
// map[1..size-1] as varints (identity maps too: an id past a map's end is unknown to RemapBlock,
// so a map cannot be left out for one kind of id only). DecodeIdMap is bounds-checked.
std::string EncodeIdMap(const IdMap& map);
Status DecodeIdMap(std::string_view bytes, IdMap* map);
// Does `map` send every id it knows to itself?
bool IsIdentity(const IdMap& map);

// What identifies the present version of the SQLite database file at `path`: its change
// counter (header offset 24, big-endian, bumped by every commit in rollback-journal mode), inode,
// size and modification time, as text; "" when the file cannot be read. MergeShard records it per
// shard (`state` key `shard_merge_file:KEY`): the counter alone would take a shard deleted and
// compacted again, with as many commits, for the one merged before.
// Reads through a SQLite connection of its own, never a bare descriptor (closing any descriptor of
// a file drops every POSIX lock the process holds on it, those of its other connections included).
std::string ShardFingerprint(const std::string& path);
// The same through SQLite's own handle of `schema` (a database attached to `db`, as `shard`),
// keeping the locks of the read transaction it is read under.
std::string ShardFingerprint(Db* db, const char* schema, const std::string& path);

// Writes meta(key) = value in `db` unless it holds that already, so that a merge or catalog
// refresh with nothing new writes nothing (and leaves the file unchanged).
Status SetMeta(Db* db, const std::string& key, const std::string& value);

// Merges what is new in the shard database at `shard_path` into `dst` (a trace database, not in
// a transaction), under the name `key` (stable across runs: it keys the merge's progress).
// With `ref_shard` > 0, `dst` is a shard catalog (engine/compact/shard_catalog.h): the shard's
// blocks are not copied but listed in block_refs as (ref_shard, block in the shard) with their zone
// maps, and the shard's id maps are saved in shard_files row `ref_shard` (which must exist).
// Blocks merged before that the shard no longer holds as they were (`tracedb archive` dropped
// them, or the shard was compacted again) are detected by a digest of their zone maps (`state`
// key `shard_merge_digest:KEY`): the shard's earlier blocks are then taken out of `dst` and all
// of its blocks merged again.
StatusOr<ShardMergeStats> MergeShard(Db* dst, const std::string& shard_path, const std::string& key,
                                     int64_t ref_shard = 0);

}  // namespace tracedb::engine
