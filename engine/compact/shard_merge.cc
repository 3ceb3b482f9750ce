// Shard merging. See shard_merge.h; format in docs/database-format.md "Shards".
#include "engine/compact/shard_merge.h"

#include <sys/stat.h>

#include <cstdio>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>

#include "engine/db/db_schema.h"
#include "engine/db/event_block.h"
#include "engine/util/coding.h"
#include "engine/util/crc32c.h"
#include "engine/util/hash.h"

namespace tracedb::engine {
namespace {

// The block formats whose header and track column this file rewrites (event_block.cc writes 4
// and reads 1 to 3): u8 format, varint n, svarint base, varint scale, the two dictionaries,
// then the columns, the track runs first. The other columns are copied byte for byte: they
// depend on the track ids only through where one track's run ends and the next begins (ts in
// every format, a parent's dur in formats 3 and 4), which an injective map of the ids keeps; the
// name and category columns hold indexes into the block's dictionaries (in any of format 4's
// name codings), which the map leaves where they are.
constexpr uint8_t kFormatVarint = 1;
constexpr uint8_t kFormatBitLength = 2;
constexpr uint8_t kFormatHuffman = 3;
constexpr uint8_t kFormatHuffmanNames = 4;

// The tables keyed by rank whose rows a shard's ranks own, copied whole on every merge.
constexpr const char* kRankTables[] = {"ranks", "processes", "clock_knots", "sync_points", "steps",
                                       "stats", "sources",   "step_stats",  "triggers"};

Status Bad(const std::string& shard, int64_t block, std::string_view why) {
  return Status::Corruption(shard + ": block " + std::to_string(block) + ": " + std::string(why));
}

bool Map(const IdMap& m, uint64_t id, uint32_t* out) {
  if (id >= m.size() || m[id] == 0) return false;
  *out = m[id];
  return true;
}

// The slow path for block formats this file does not parse: decode, map, encode.
Status ReencodeBlock(std::string_view data, int64_t block, const IdMap& strings,
                     const IdMap& tracks, std::string* out) {
  DecodedBlock d;
  TRACEDB_RETURN_IF_ERROR(DecodeBlock(data, block, &d, kColAll));
  std::vector<Row> rows(d.n);
  for (size_t i = 0; i < d.n; ++i) {
    Row r = d.RowAt(i);
    if (!Map(tracks, r.track, &r.track) || !Map(strings, r.name, &r.name) ||
        (r.cat != 0 && !Map(strings, r.cat, &r.cat))) {
      return Status::Corruption("block " + std::to_string(block) + ": an id the shard lacks");
    }
    rows[i] = std::move(r);
  }
  BlockZone zone;
  EncodeBlock(rows, out, &zone);
  return Status::Ok();
}

// The digest of a shard's merged blocks: their zone-map rows (block, rank, min_ts, max_end,
// max_dur, count) folded in block order. A block dropped, added below the progress, or written
// again with other bounds changes it.
constexpr uint64_t kDigestSeed = 0x6a09e667f3bcc908ull;

uint64_t FoldBlock(uint64_t h, const Stmt& st) {
  for (int c = 0; c < 6; ++c) {
    h ^= static_cast<uint64_t>(st.Int(c));
    h *= kFibonacciMultiplier;  // engine/util/hash.h
    h ^= h >> 29;
  }
  return h;
}

std::string DigestText(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace

Status SetMeta(Db* db, const std::string& key, const std::string& value) {
  TRACEDB_ASSIGN_OR_RETURN(Stmt get, db->Prepare("SELECT value FROM meta WHERE key = ?1"));
  get.Bind(1, key);
  TRACEDB_ASSIGN_OR_RETURN(bool row, get.Step());
  if (row && get.Text(0) == value) return Status::Ok();
  get.Reset();
  TRACEDB_ASSIGN_OR_RETURN(Stmt st,
                           db->Prepare("INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)"));
  return st.Bind(1, key).Bind(2, value).Run();
}

namespace {
std::string Fingerprint(const unsigned char* b, const struct stat& st) {
  const uint32_t counter =
      (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
  return std::to_string(counter) + " " + std::to_string(st.st_ino) + " " +
         std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}
}  // namespace

std::string ShardFingerprint(const std::string& path) {
  // Through SQLite's default VFS, not a bare descriptor: the unix VFS keeps one record per inode
  // for the whole process and, while any connection holds a lock on the file, defers closing a
  // descriptor instead of closing it, so the other connections' locks (a view server's pooled
  // readers of the shard) stay. A whole connection would do the same at 30 us per shard against
  // 4 us here (a catalog of thousands of shards reads one per shard per open).
  sqlite3_vfs* vfs = sqlite3_vfs_find(nullptr);
  if (vfs == nullptr || sqlite3_initialize() != SQLITE_OK) return "";
  std::string full(static_cast<size_t>(vfs->mxPathname) + 1, '\0');
  if (vfs->xFullPathname(vfs, path.c_str(), static_cast<int>(full.size()), full.data()) !=
      SQLITE_OK) {
    return "";
  }
  // (xOpen keeps the name pointer: `full` outlives the file.)
  std::unique_ptr<char[]> storage(new char[static_cast<size_t>(vfs->szOsFile)]());
  auto* file = reinterpret_cast<sqlite3_file*>(storage.get());
  int out_flags = 0;
  if (vfs->xOpen(vfs, full.c_str(), file, SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_READONLY, &out_flags) !=
      SQLITE_OK) {
    if (file->pMethods != nullptr) file->pMethods->xClose(file);
    return "";
  }
  unsigned char b[4];
  struct stat st;
  const bool ok =
      file->pMethods->xRead(file, b, 4, 24) == SQLITE_OK && ::stat(full.c_str(), &st) == 0;
  file->pMethods->xClose(file);
  return ok ? Fingerprint(b, st) : "";
}

std::string ShardFingerprint(Db* db, const char* schema, const std::string& path) {
  sqlite3_file* file = nullptr;
  if (sqlite3_file_control(db->raw(), schema, SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK ||
      file == nullptr || file->pMethods == nullptr) {
    return "";
  }
  unsigned char b[4];
  struct stat st;
  if (file->pMethods->xRead(file, b, 4, 24) != SQLITE_OK || ::stat(path.c_str(), &st) != 0) {
    return "";
  }
  return Fingerprint(b, st);
}

Status RemapBlock(std::string_view data, int64_t block, const IdMap& strings, const IdMap& tracks,
                  std::string* out, bool* changed, bool compress) {
  auto bad = [&](std::string_view why) {
    return Status::Corruption("block " + std::to_string(block) + ": " + std::string(why));
  };
  thread_local std::string raw;
  BlockContainer box;
  if (Status s = UnpackBlock(data, &raw, &box); !s.ok()) return bad(s.message());

  Reader r(raw);
  uint8_t format;
  if (!r.GetU8(&format)) return bad("empty payload");
  if (format != kFormatVarint && format != kFormatBitLength && format != kFormatHuffman &&
      format != kFormatHuffmanNames) {
    *changed = true;
    return ReencodeBlock(data, block, strings, tracks, out);
  }
  uint64_t n, scale, nnames, ncats;
  int64_t base;
  if (!r.GetVarint64(&n) || !r.GetVarsigned(&base) || !r.GetVarint64(&scale) ||
      !r.GetVarint64(&nnames) || nnames > n) {
    return bad("bad header");
  }
  bool same = true;
  thread_local std::string payload;
  payload.clear();
  payload.push_back(static_cast<char>(format));
  PutVarint64(&payload, n);
  PutVarsigned(&payload, base);
  PutVarint64(&payload, scale);
  PutVarint64(&payload, nnames);
  for (uint64_t i = 0; i < nnames; ++i) {
    uint64_t id;
    uint32_t to;
    if (!r.GetVarint64(&id)) return bad("bad name dictionary");
    if (!Map(strings, id, &to)) return bad("name id " + std::to_string(id) + " not in strings");
    same &= to == id;
    PutVarint64(&payload, to);
  }
  if (!r.GetVarint64(&ncats) || ncats > n) return bad("bad category dictionary");
  PutVarint64(&payload, ncats);
  for (uint64_t i = 0; i < ncats; ++i) {
    uint64_t id;
    uint32_t to = 0;
    if (!r.GetVarint64(&id)) return bad("bad category dictionary");
    if (id != 0 && !Map(strings, id, &to)) {
      return bad("category id " + std::to_string(id) + " not in strings");
    }
    same &= to == id;
    PutVarint64(&payload, to);
  }
  std::string_view track_col;
  if (!r.GetLengthPrefixed(&track_col)) return bad("truncated track column");
  Reader tr(track_col);
  uint64_t runs;
  if (!tr.GetVarint64(&runs) || runs > n) return bad("bad track runs");
  thread_local std::string new_tracks;
  new_tracks.clear();
  PutVarint64(&new_tracks, runs);
  for (uint64_t i = 0; i < runs; ++i) {
    uint64_t track, len;
    uint32_t to;
    if (!tr.GetVarint64(&track) || !tr.GetVarint64(&len)) return bad("bad track runs");
    if (!Map(tracks, track, &to)) return bad("track " + std::to_string(track) + " not in tracks");
    same &= to == track;
    PutVarint64(&new_tracks, to);
    PutVarint64(&new_tracks, len);
  }
  if (!tr.empty()) return bad("bytes after the track runs");
  *changed = !same;
  if (same) return Status::Ok();
  PutVarint64(&payload, new_tracks.size());
  payload.append(new_tracks);
  // Every other column, byte for byte; a stored section among them (the entropy-coded ts and
  // dur columns) stays one.
  const std::string_view rest(r.data(), r.remaining());
  const size_t rest_at = raw.size() - rest.size();
  if (compress && box.stored_len > 0 && box.stored_at >= rest_at) {
    const size_t in_rest = box.stored_at - rest_at;
    const size_t stored_at = payload.size() + in_rest;
    payload.append(rest.substr(0, in_rest));
    payload.append(rest.substr(in_rest + box.stored_len));
    PackBlock(payload, stored_at, rest.substr(in_rest, box.stored_len), out);
    return Status::Ok();
  }
  payload.append(rest);
  if (compress) {
    PackBlock(payload, payload.size(), {}, out);
    return Status::Ok();
  }
  out->clear();
  out->push_back(static_cast<char>(kBlockCodecRaw));
  PutVarint64(out, payload.size());
  PutFixed32(out, Crc32c(payload.data(), payload.size()));
  out->append(payload);
  return Status::Ok();
}

std::string EncodeIdMap(const IdMap& map) {
  std::string out;
  PutVarint64(&out, map.size());
  for (size_t i = 1; i < map.size(); ++i) PutVarint64(&out, map[i]);
  return out;
}

Status DecodeIdMap(std::string_view bytes, IdMap* map) {
  map->clear();
  if (bytes.empty()) return Status::Ok();
  Reader r(bytes);
  uint64_t n;
  // Every entry takes at least one byte: a size past that is corrupt, not a reason to allocate.
  if (!r.GetVarint64(&n) || (n > 0 && n - 1 > r.remaining())) {
    return Status::Corruption("id map: bad size");
  }
  map->assign(n, 0);
  for (uint64_t i = 1; i < n; ++i) {
    uint64_t id;
    if (!r.GetVarint64(&id) || id > UINT32_MAX) return Status::Corruption("id map: bad entry");
    (*map)[i] = static_cast<uint32_t>(id);
  }
  if (!r.empty()) return Status::Corruption("id map: bytes after the entries");
  return Status::Ok();
}

bool IsIdentity(const IdMap& map) {
  for (size_t i = 1; i < map.size(); ++i) {
    if (map[i] != 0 && map[i] != i) return false;
  }
  return true;
}

StatusOr<ShardMergeStats> MergeShard(Db* dst, const std::string& shard_path, const std::string& key,
                                     int64_t ref_shard) {
  {
    // A readable tracedb database of a version this build knows, before anything is attached.
    TRACEDB_ASSIGN_OR_RETURN(auto shard, OpenTraceDb(shard_path, false, true));
  }
  ShardMergeStats stats;
  const std::string state_key = "shard_merge:" + key;
  const std::string file_key = "shard_merge_file:" + key;
  const std::string digest_key = "shard_merge_digest:" + key;
  TRACEDB_ASSIGN_OR_RETURN(Stmt attach, dst->Prepare("ATTACH DATABASE ?1 AS shard"));
  TRACEDB_RETURN_IF_ERROR(attach.Bind(1, shard_path).Run());
  struct Detach {
    Db* db;
    ~Detach() { (void)db->Exec("DETACH DATABASE shard"); }
  } detach{dst};
  // The shard file's fingerprint (SQLite's change counter, bumped by every commit in
  // rollback-journal mode, which trace databases use; inode, size, mtime): unchanged since the
  // last merge, there is nothing to do. Read under the shard's shared lock, taken by the read
  // transaction below.
  TRACEDB_RETURN_IF_ERROR(dst->Exec("BEGIN"));
  TRACEDB_ASSIGN_OR_RETURN(
      stats.open_spans,
      dst->QueryInt("SELECT CAST(value AS INTEGER) FROM shard.meta WHERE key = 'open_spans'", 0));
  const std::string fingerprint = ShardFingerprint(dst, "shard", shard_path);
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt seen_st, dst->Prepare("SELECT CAST(value AS TEXT) FROM main.state WHERE key = ?1"));
  seen_st.Bind(1, file_key);
  TRACEDB_ASSIGN_OR_RETURN(bool have_seen, seen_st.Step());
  const bool unchanged = !fingerprint.empty() && have_seen && seen_st.Text(0) == fingerprint;
  seen_st.Reset();
  TRACEDB_RETURN_IF_ERROR(dst->Exec("COMMIT"));
  if (unchanged) return stats;
  TRACEDB_RETURN_IF_ERROR(dst->Begin());
  struct Rollback {
    Db* db;
    bool armed = true;
    ~Rollback() {
      if (armed) db->Rollback();
    }
  } rollback{dst};
  auto fail = [&](const Status& s) { return s.WithContext(shard_path); };

  // Strings, by text.
  IdMap strings;
  {
    std::unordered_map<std::string, uint32_t> ids;
    uint32_t next = 1;
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, dst->Prepare("SELECT id, s FROM main.strings"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const auto id = static_cast<uint32_t>(st.Int(0));
      ids.emplace(std::string(st.Text(1)), id);
      next = std::max(next, id + 1);
    }
    TRACEDB_ASSIGN_OR_RETURN(Stmt ins,
                             dst->Prepare("INSERT INTO main.strings(id, s) VALUES(?1, ?2)"));
    TRACEDB_ASSIGN_OR_RETURN(Stmt sh, dst->Prepare("SELECT id, s FROM shard.strings"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, sh.Step());
      if (!row) break;
      const int64_t id = sh.Int(0);
      if (id <= 0 || id > UINT32_MAX) return fail(Status::Corruption("string id out of range"));
      std::string s(sh.Text(1));
      auto [it, added] = ids.emplace(s, next);
      if (added) {
        TRACEDB_RETURN_IF_ERROR(ins.Bind(1, next).Bind(2, s).Run());
        ++next;
        stats.strings_added++;
      }
      if (strings.size() <= static_cast<size_t>(id)) strings.resize(id + 1, 0);
      strings[id] = it->second;
    }
  }

  // Tracks, by identity (as TraceWriter finds them); next_k follows the shard.
  IdMap tracks;
  {
    using LocalKey = std::tuple<int64_t, std::string, int64_t, int64_t>;  // rank, kind, pid, id
    using NameKey = std::tuple<int64_t, std::string, std::string>;        // rank, kind, name
    std::map<LocalKey, uint32_t> by_local;
    std::map<NameKey, uint32_t> by_name;
    uint32_t next = 1;
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st, dst->Prepare("SELECT track, rank, kind, name, pid, local_id FROM main.tracks "
                              "WHERE rank IN (SELECT rank FROM shard.sources)"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const auto id = static_cast<uint32_t>(st.Int(0));
      if (!st.IsNull(5) && st.Int(5) >= 0) {
        by_local[{st.Int(1), std::string(st.Text(2)), st.IsNull(4) ? -1 : st.Int(4), st.Int(5)}] =
            id;
      } else {
        by_name[{st.Int(1), std::string(st.Text(2)), std::string(st.Text(3))}] = id;
      }
    }
    TRACEDB_ASSIGN_OR_RETURN(int64_t max_track,
                             dst->QueryInt("SELECT max(track) FROM main.tracks", 0));
    next = static_cast<uint32_t>(max_track + 1);
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt sh, dst->Prepare("SELECT track, rank, kind, name, tid, pid, local_id, sort_index, "
                              "next_k FROM shard.tracks ORDER BY track"));
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt ins, dst->Prepare("INSERT INTO main.tracks(track, rank, kind, name, tid, pid, "
                               "local_id, sort_index, next_k) SELECT ?1, rank, kind, name, tid, "
                               "pid, local_id, sort_index, next_k FROM shard.tracks "
                               "WHERE track = ?2"));
    TRACEDB_ASSIGN_OR_RETURN(Stmt upd,
                             dst->Prepare("UPDATE main.tracks SET next_k = ?2 WHERE track = ?1"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, sh.Step());
      if (!row) break;
      const int64_t id = sh.Int(0);
      if (id <= 0 || id > UINT32_MAX) return fail(Status::Corruption("track id out of range"));
      uint32_t* found;
      if (!sh.IsNull(6) && sh.Int(6) >= 0) {
        found = &by_local[{sh.Int(1), std::string(sh.Text(2)), sh.IsNull(5) ? -1 : sh.Int(5),
                           sh.Int(6)}];
      } else {
        found = &by_name[{sh.Int(1), std::string(sh.Text(2)), std::string(sh.Text(3))}];
      }
      if (*found == 0) {
        *found = next++;
        TRACEDB_RETURN_IF_ERROR(ins.Bind(1, *found).Bind(2, id).Run());
        stats.tracks_added++;
      } else {
        TRACEDB_RETURN_IF_ERROR(upd.Bind(1, *found).Bind(2, sh.Int(8)).Run());
      }
      if (tracks.size() <= static_cast<size_t>(id)) tracks.resize(id + 1, 0);
      tracks[id] = *found;
    }
  }

  // Blocks not merged yet, with their zone maps.
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt done_st, dst->Prepare("SELECT CAST(value AS INTEGER) FROM main.state WHERE key = ?1"));
  done_st.Bind(1, state_key);
  TRACEDB_ASSIGN_OR_RETURN(bool have_done, done_st.Step());
  int64_t merged_upto = have_done ? done_st.Int(0) : 0;
  done_st.Reset();
  // Are the blocks merged before still the shard's, as they were? (`tracedb archive` drops a
  // shard's old blocks; a shard deleted and compacted again numbers new blocks from 1.)
  uint64_t digest = kDigestSeed;
  if (merged_upto > 0) {
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st, dst->Prepare("SELECT block, rank, min_ts, max_end, max_dur, count FROM "
                              "shard.blocks WHERE block <= ?1 ORDER BY block"));
    st.Bind(1, merged_upto);
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      digest = FoldBlock(digest, st);
    }
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt rec_st, dst->Prepare("SELECT CAST(value AS TEXT) FROM main.state WHERE key = ?1"));
    rec_st.Bind(1, digest_key);
    TRACEDB_ASSIGN_OR_RETURN(bool have_digest, rec_st.Step());
    // (No digest recorded: merged by a tracedb before digests, taken as it is.)
    if (have_digest && rec_st.Text(0) != DigestText(digest)) {
      rec_st.Reset();
      // The shard's earlier blocks leave the target, and all of its blocks are merged again.
      // (The per-rank tables are replaced below in any case; strings and tracks the shard no
      // longer uses stay, unused.)
      const std::string mine =
          ref_shard > 0
              ? "SELECT block FROM main.block_refs WHERE shard = " + std::to_string(ref_shard)
              : "SELECT block FROM main.blocks WHERE rank IN (SELECT rank FROM "
                "shard.sources)";
      TRACEDB_RETURN_IF_ERROR(
          dst->Exec("DELETE FROM main.block_names WHERE block IN (" + mine + ")"));
      TRACEDB_RETURN_IF_ERROR(dst->Exec(
          ref_shard > 0 ? "DELETE FROM main.block_refs WHERE shard = " + std::to_string(ref_shard)
                        : std::string("DELETE FROM main.blocks WHERE rank IN (SELECT rank FROM "
                                      "shard.sources)")));
      stats.blocks_dropped = static_cast<uint64_t>(dst->Changes());
      merged_upto = 0;
      digest = kDigestSeed;
    }
  }
  std::map<int64_t, std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>> names;
  {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, dst->Prepare("SELECT block, name, max_dur, cat, count FROM "
                                                   "shard.block_names WHERE block > ?1"));
    st.Bind(1, merged_upto);
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      names[st.Int(0)].emplace_back(st.Int(1), st.Int(2), st.Int(3), st.Int(4));
    }
  }
  int64_t last_block = merged_upto;
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt bn, dst->Prepare("INSERT INTO main.block_names(name, max_dur, block, cat, count) "
                            "VALUES(?1, ?2, ?3, ?4, ?5)"));
  auto add_block_names = [&](int64_t block, int64_t new_block) -> Status {
    for (const auto& [name, max_dur, cat, count] : names[block]) {
      uint32_t to_name, to_cat = 0;
      if (!Map(strings, name, &to_name) || (cat != 0 && !Map(strings, cat, &to_cat))) {
        return fail(Bad("block_names", block, "a string id not in strings"));
      }
      TRACEDB_RETURN_IF_ERROR(bn.Bind(1, to_name)
                                  .Bind(2, max_dur)
                                  .Bind(3, new_block)
                                  .Bind(4, to_cat)
                                  .Bind(5, count)
                                  .Run());
    }
    return Status::Ok();
  };
  if (ref_shard > 0) {
    // Read in place: the zone maps and where the payload is; the payload is read (and its ids
    // mapped through the maps saved below) when a query asks for it.
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st, dst->Prepare("SELECT block, rank, min_ts, max_end, max_dur, count FROM "
                              "shard.blocks WHERE block > ?1 ORDER BY block"));
    st.Bind(1, merged_upto);
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt ins, dst->Prepare("INSERT INTO main.block_refs(rank, min_ts, max_end, max_dur, "
                               "count, shard, shard_block) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const int64_t block = st.Int(0);
      digest = FoldBlock(digest, st);
      TRACEDB_RETURN_IF_ERROR(ins.Bind(1, st.Int(1))
                                  .Bind(2, st.Int(2))
                                  .Bind(3, st.Int(3))
                                  .Bind(4, st.Int(4))
                                  .Bind(5, st.Int(5))
                                  .Bind(6, ref_shard)
                                  .Bind(7, block)
                                  .Run());
      TRACEDB_RETURN_IF_ERROR(add_block_names(block, dst->LastInsertRowid()));
      stats.blocks++;
      stats.rows += static_cast<uint64_t>(st.Int(5));
      last_block = block;
    }
    TRACEDB_ASSIGN_OR_RETURN(Stmt maps,
                             dst->Prepare("UPDATE main.shard_files SET strings = ?2, tracks = ?3 "
                                          "WHERE shard = ?1"));
    TRACEDB_RETURN_IF_ERROR(maps.Bind(1, ref_shard)
                                .BindBlob(2, EncodeIdMap(strings))
                                .BindBlob(3, EncodeIdMap(tracks))
                                .Run());
    if (dst->Changes() != 1) {
      return fail(Status::Internal("shard " + std::to_string(ref_shard) + " not in shard_files"));
    }
  } else {
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st, dst->Prepare("SELECT block, rank, min_ts, max_end, max_dur, count, data FROM "
                              "shard.blocks WHERE block > ?1 ORDER BY block"));
    st.Bind(1, merged_upto);
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt ins, dst->Prepare("INSERT INTO main.blocks(rank, min_ts, max_end, max_dur, count, "
                               "data) VALUES(?1, ?2, ?3, ?4, ?5, ?6)"));
    std::string rewritten;
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const int64_t block = st.Int(0);
      digest = FoldBlock(digest, st);
      bool changed = false;
      const std::string_view data = st.Blob(6);
      Status s = RemapBlock(data, block, strings, tracks, &rewritten, &changed);
      if (!s.ok()) return fail(s);
      const std::string_view stored = changed ? std::string_view(rewritten) : data;
      TRACEDB_RETURN_IF_ERROR(ins.Bind(1, st.Int(1))
                                  .Bind(2, st.Int(2))
                                  .Bind(3, st.Int(3))
                                  .Bind(4, st.Int(4))
                                  .Bind(5, st.Int(5))
                                  .BindBlob(6, stored)
                                  .Run());
      TRACEDB_RETURN_IF_ERROR(add_block_names(block, dst->LastInsertRowid()));
      stats.blocks++;
      stats.blocks_rewritten += changed;
      stats.rows += static_cast<uint64_t>(st.Int(5));
      stats.bytes += stored.size();
      last_block = block;
    }
  }

  // The per-rank tables: the shard's rows replace its ranks' rows (they are cumulative).
  const std::string owned = " WHERE rank IN (SELECT rank FROM shard.sources)";
  // A table the target has as the empty view of a table created when first written
  // (engine/db/db_schema.h; or has not, being older than it) is made a table when the shard
  // has rows for it, and left so otherwise. A shard's own such views read as empty tables.
  auto writable = [&](const char* t) -> StatusOr<bool> {
    TRACEDB_ASSIGN_OR_RETURN(bool placeholder, IsPlaceholderTable(dst, t));
    if (!placeholder && dst->HasTable(t)) return true;
    TRACEDB_ASSIGN_OR_RETURN(
        int64_t any,
        dst->QueryInt(std::string("SELECT EXISTS(SELECT 1 FROM shard.") + t + owned + ")"));
    if (any == 0) return false;
    TRACEDB_RETURN_IF_ERROR(EnsureTable(dst, t));
    return true;
  };
  for (const char* t : kRankTables) {
    TRACEDB_ASSIGN_OR_RETURN(bool write, writable(t));
    if (!write) continue;
    TRACEDB_RETURN_IF_ERROR(dst->Exec(std::string("DELETE FROM main.") + t + owned));
    TRACEDB_RETURN_IF_ERROR(
        dst->Exec(std::string("INSERT INTO main.") + t + " SELECT * FROM shard." + t + owned));
  }
  TRACEDB_ASSIGN_OR_RETURN(bool comms, writable("rank_comms"));
  if (comms) {
    // Communicators: a shard's member lists are found in the target by their text (or added),
    // and its rank_comms rows point at the target's group ids (`comms` is their view).
    TRACEDB_RETURN_IF_ERROR(EnsureTable(dst, "comm_groups"));
    TRACEDB_RETURN_IF_ERROR(dst->Exec("DELETE FROM main.rank_comms" + owned));
    TRACEDB_RETURN_IF_ERROR(dst->Exec(
        "INSERT OR IGNORE INTO main.comm_groups(size, members) SELECT size, members "
        "FROM shard.comm_groups WHERE group_id IN (SELECT group_id FROM shard.rank_comms" +
        owned + ") ORDER BY group_id"));
    TRACEDB_RETURN_IF_ERROR(dst->Exec(
        "INSERT INTO main.rank_comms(rank, comm, size, rank_in_comm, group_id) "
        "SELECT r.rank, r.comm, r.size, r.rank_in_comm, "
        "(SELECT t.group_id FROM main.comm_groups t JOIN shard.comm_groups g "
        "ON g.members = t.members WHERE g.group_id = r.group_id) FROM shard.rank_comms r" +
        owned));
  }
  {
    TRACEDB_RETURN_IF_ERROR(dst->Exec("DELETE FROM main.name_stats" + owned));
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st, dst->Prepare("SELECT rank, name, cat, kind, count, total_dur, min_dur, max_dur, "
                              "hist FROM shard.name_stats" +
                              owned));
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt ins, dst->Prepare("INSERT INTO main.name_stats(rank, name, cat, kind, count, "
                               "total_dur, min_dur, max_dur, hist) "
                               "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      uint32_t name, cat = 0;
      if (!Map(strings, st.Int(1), &name) || (st.Int(2) != 0 && !Map(strings, st.Int(2), &cat))) {
        return fail(Status::Corruption("name_stats: a string id not in strings"));
      }
      ins.Bind(1, st.Int(0)).Bind(2, name).Bind(3, cat).Bind(4, st.Int(3)).Bind(5, st.Int(4));
      ins.Bind(6, st.Int(5)).Bind(7, st.Int(6)).Bind(8, st.Int(7));
      if (st.IsNull(8))
        ins.BindNull(9);
      else
        ins.BindBlob(9, st.Blob(8));
      TRACEDB_RETURN_IF_ERROR(ins.Run());
    }
  }
  TRACEDB_ASSIGN_OR_RETURN(
      stats.open_spans,
      dst->QueryInt("SELECT CAST(value AS INTEGER) FROM shard.meta WHERE key = 'open_spans'", 0));
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt save, dst->Prepare("INSERT OR REPLACE INTO main.state(key, value) VALUES(?1, ?2)"));
  TRACEDB_RETURN_IF_ERROR(save.Bind(1, state_key).Bind(2, std::to_string(last_block)).Run());
  TRACEDB_RETURN_IF_ERROR(save.Bind(1, digest_key).Bind(2, DigestText(digest)).Run());
  // The fingerprint as of this transaction (the shard is locked against writers until COMMIT).
  const std::string merged_file = ShardFingerprint(dst, "shard", shard_path);
  if (!merged_file.empty()) {
    TRACEDB_RETURN_IF_ERROR(save.Bind(1, file_key).Bind(2, merged_file).Run());
  }
  // (What a tracedb before fingerprints recorded in its place.)
  TRACEDB_ASSIGN_OR_RETURN(Stmt old_key, dst->Prepare("DELETE FROM main.state WHERE key = ?1"));
  TRACEDB_RETURN_IF_ERROR(old_key.Bind(1, "shard_merge_counter:" + key).Run());
  TRACEDB_RETURN_IF_ERROR(dst->Commit());
  rollback.armed = false;
  return stats;
}

}  // namespace tracedb::engine
