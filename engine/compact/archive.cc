// Retention and recompression of a trace database. See archive.h; the block layout is in
// docs/database-format.md "Event blocks".
#include "engine/compact/archive.h"

#include <lz4.h>
#include <lz4hc.h>

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "engine/db/block_store.h"
#include "engine/db/db_schema.h"
#include "engine/db/event_block.h"
#include "engine/db/sqlite.h"
#include "engine/util/coding.h"
#include "engine/util/lz4_codec.h"
#include "engine/util/path.h"

namespace tracedb::engine {
namespace {

constexpr const char* kRecompressedBelow = "archive.recompressed_below";

// Re-encodes one blocks.data value with LZ4-HC at `level` (a stored section, codec 2, stays
// stored). Sets *out and returns true when the result is smaller; false when the block is
// better left as it is. Corruption when the stored block does not decode (its CRC or sizes are
// wrong).
StatusOr<bool> RecompressBlock(std::string_view data, int level, std::string* out) {
  std::string raw;
  BlockContainer box;
  TRACEDB_RETURN_IF_ERROR(UnpackBlock(data, &raw, &box));
  const std::string_view stored = std::string_view(raw).substr(box.stored_at, box.stored_len);
  std::string lz_in = raw.substr(0, box.stored_at);
  lz_in.append(raw, box.stored_at + box.stored_len);
  std::string hc(static_cast<size_t>(LZ4_compressBound(static_cast<int>(lz_in.size()))), '\0');
  const int n = LZ4_compress_HC(lz_in.data(), hc.data(), static_cast<int>(lz_in.size()),
                                static_cast<int>(hc.size()), level);
  if (n <= 0) return false;  // LZ4-HC failed: the block stays as it is
  hc.resize(static_cast<size_t>(n));
  if (hc.size() >= lz_in.size()) return false;
  out->clear();
  out->push_back(
      static_cast<char>(box.codec == kBlockCodecLz4Stored ? kBlockCodecLz4Stored : kBlockCodecLz4));
  PutVarint64(out, raw.size());
  PutFixed32(out, box.crc);
  if (box.codec == kBlockCodecLz4Stored) {
    PutVarint64(out, box.stored_at);
    PutVarint64(out, box.stored_len);
  }
  out->append(hc);
  out->append(stored);
  if (out->size() >= data.size()) return false;
  // What readers will do: decode it and get the same bytes back.
  std::string check;
  TRACEDB_RETURN_IF_ERROR(UnpackBlock(*out, &check));
  if (check != raw) return Status::Internal("LZ4-HC output does not decode to its input");
  return true;
}

// Drops the blocks the policy does not keep. Inside the caller's transaction.
Status DropOldBlocks(Db* db, const ArchiveOptions& o, ArchiveReport* r) {
  if (o.keep_last_ns < 0 && o.keep_steps < 0) return Status::Ok();
  std::vector<int32_t> ranks;
  {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare("SELECT DISTINCT rank FROM blocks"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      ranks.push_back(static_cast<int32_t>(st.Int(0)));
    }
  }
  if (ranks.empty()) return Status::Ok();
  // rank -> the cutoff: blocks whose every event ends before it are dropped.
  std::map<int32_t, int64_t> cutoff;
  if (o.keep_last_ns >= 0) {
    TRACEDB_ASSIGN_OR_RETURN(int64_t newest, db->QueryInt("SELECT max(max_end) FROM blocks"));
    for (int32_t rank : ranks) cutoff[rank] = SaturatingSub(newest, o.keep_last_ns);
  }
  if (o.keep_steps >= 0) {
    TRACEDB_ASSIGN_OR_RETURN(int64_t nsteps, db->QueryInt("SELECT count(*) FROM steps"));
    if (nsteps == 0) {
      return Status::InvalidArgument(db->path() +
                                     ": the database has no steps (tracedb_step markers or "
                                     "imported step spans); --keep-steps needs them");
    }
    TRACEDB_ASSIGN_OR_RETURN(int64_t last, db->QueryInt("SELECT max(step) FROM steps"));
    const int64_t first_kept = SaturatingSub(last, o.keep_steps - 1);
    std::map<int32_t, int64_t> by_steps;
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st, db->Prepare("SELECT rank, min(ts) FROM steps WHERE step >= ?1 GROUP BY rank"));
    st.Bind(1, first_kept);
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      by_steps[static_cast<int32_t>(st.Int(0))] = st.Int(1);
    }
    for (int32_t rank : ranks) {
      // A rank without those steps (none recorded, or lagging) keeps everything.
      auto it = by_steps.find(rank);
      const int64_t c = it == by_steps.end() ? INT64_MIN : it->second;
      auto cur = cutoff.find(rank);
      cutoff[rank] = cur == cutoff.end() ? c : std::min(cur->second, c);
    }
  }
  TRACEDB_RETURN_IF_ERROR(
      db->Exec("CREATE TEMP TABLE IF NOT EXISTS archive_drop(block INTEGER PRIMARY KEY); "
               "DELETE FROM temp.archive_drop;"));
  {
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt ins, db->Prepare("INSERT INTO temp.archive_drop(block) SELECT block FROM blocks "
                              "WHERE rank = ?1 AND min_ts < ?2 AND max_end < ?2"));
    for (const auto& [rank, c] : cutoff) {
      if (c == INT64_MIN) continue;
      TRACEDB_RETURN_IF_ERROR(ins.Bind(1, rank).Bind(2, c).Run());
    }
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt sel, db->Prepare("SELECT b.rank, count(*), sum(b.count) FROM blocks b "
                              "JOIN temp.archive_drop d ON d.block = b.block GROUP BY b.rank"));
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt meta,
        db->Prepare("INSERT INTO meta(key, value) VALUES(?1, ?2) ON CONFLICT(key) DO UPDATE SET "
                    "value = CAST(max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER)) "
                    "AS TEXT)"));
    std::vector<std::tuple<int32_t, int64_t, int64_t>> dropped;
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, sel.Step());
      if (!row) break;
      dropped.emplace_back(static_cast<int32_t>(sel.Int(0)), sel.Int(1), sel.Int(2));
    }
    if (!dropped.empty()) {  // (the table stats is created when first written)
      TRACEDB_RETURN_IF_ERROR(EnsureTable(db, "stats"));
      TRACEDB_ASSIGN_OR_RETURN(
          Stmt add, db->Prepare("INSERT INTO stats(name, rank, value) VALUES(?1, ?2, ?3) "
                                "ON CONFLICT(name, rank) DO UPDATE SET value = value + ?3"));
      bool first = true;
      for (const auto& [rank, blocks, events] : dropped) {
        TRACEDB_RETURN_IF_ERROR(
            add.Bind(1, "archive_dropped_blocks").Bind(2, rank).Bind(3, blocks).Run());
        TRACEDB_RETURN_IF_ERROR(
            add.Bind(1, "archive_dropped_events").Bind(2, rank).Bind(3, events).Run());
        const int64_t c = cutoff.at(rank);
        TRACEDB_RETURN_IF_ERROR(meta.Bind(1, "archive.cutoff_ns." + std::to_string(rank))
                                    .Bind(2, std::to_string(c))
                                    .Run());
        r->blocks_dropped += static_cast<uint64_t>(blocks);
        r->cutoff_min_ns = first ? c : std::min(r->cutoff_min_ns, c);
        r->cutoff_max_ns = first ? c : std::max(r->cutoff_max_ns, c);
        first = false;
      }
    }
  }
  TRACEDB_RETURN_IF_ERROR(
      db->Exec("DELETE FROM block_names WHERE block IN (SELECT block FROM temp.archive_drop); "
               "DELETE FROM blocks WHERE block IN (SELECT block FROM temp.archive_drop); "
               "DELETE FROM temp.archive_drop;"));
  return Status::Ok();
}

// Recompresses the blocks not looked at before whose events all ended before the cutoff.
Status RecompressOldBlocks(Db* db, const ArchiveOptions& o, ArchiveReport* r) {
  if (!o.recompress) return Status::Ok();
  int64_t below = 0;
  {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st,
                             db->Prepare("SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?1"));
    st.Bind(1, kRecompressedBelow);
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (row) below = st.Int(0);
  }
  int64_t before = INT64_MAX;
  if (o.recompress_older_than_ns >= 0) {
    TRACEDB_ASSIGN_OR_RETURN(int64_t newest, db->QueryInt("SELECT max(max_end) FROM blocks"));
    before = SaturatingSub(newest, o.recompress_older_than_ns);
  }
  std::vector<int64_t> eligible;
  int64_t new_below = below;
  bool contiguous = true;  // every block from `below` up to here is eligible
  BlockStore store(db, db->path());
  {
    // The blocks from `below` on, by id (the payload is recompressed as it is: a zone map's
    // count or rank need not be sound for that).
    BlockSelection from;
    from.after_block = below == INT64_MIN ? INT64_MIN : below - 1;
    from.order = BlockSelection::Order::kBlock;
    TRACEDB_RETURN_IF_ERROR(store.ForEach(from, [&](const BlockZoneRow& z) {
      if (z.max_end < before) {
        eligible.push_back(z.block);
        if (contiguous) new_below = z.block + 1;
      } else {
        contiguous = false;
      }
      return Status::Ok();
    }));
  }
  // Eligible blocks past the first ineligible one are looked at again by the next run; an
  // LZ4-HC payload does not get smaller by HC again, so they are then left as they are.
  TRACEDB_ASSIGN_OR_RETURN(Stmt put, db->Prepare("UPDATE blocks SET data = ?2 WHERE block = ?1"));
  std::string out;
  for (int64_t block : eligible) {
    StatusOr<bool> smaller = false;
    TRACEDB_ASSIGN_OR_RETURN(bool found, store.ReadBytes(block, [&](std::string_view data) {
      smaller = RecompressBlock(data, o.hc_level, &out);
      return Status::Ok();
    }));
    if (!found) continue;
    r->blocks_considered++;
    if (!smaller.ok()) {
      return smaller.status().WithContext(db->path() + ": block " + std::to_string(block));
    }
    if (!*smaller) continue;
    TRACEDB_RETURN_IF_ERROR(put.Bind(1, block).BindBlob(2, out).Run());
    r->blocks_recompressed++;
  }
  TRACEDB_ASSIGN_OR_RETURN(Stmt meta,
                           db->Prepare("INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)"));
  return meta.Bind(1, kRecompressedBelow).Bind(2, std::to_string(new_below)).Run();
}

Status Count(Db* db, uint64_t* events, uint64_t* blocks, uint64_t* bytes) {
  TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare("SELECT coalesce(sum(count), 0), count(*), "
                                                "coalesce(sum(length(data)), 0) FROM blocks"));
  TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
  if (!row) return Status::Internal("no row from count(*)");
  *events = static_cast<uint64_t>(st.Int(0));
  if (blocks) *blocks = static_cast<uint64_t>(st.Int(1));
  *bytes = static_cast<uint64_t>(st.Int(2));
  return Status::Ok();
}

}  // namespace

StatusOr<ArchiveReport> ArchiveDb(const std::string& path, const ArchiveOptions& o) {
  if (o.keep_steps == 0) return Status::InvalidArgument("--keep-steps must be at least 1");
  if (o.hc_level < 1 || o.hc_level > LZ4HC_CLEVEL_MAX) {
    return Status::InvalidArgument("LZ4-HC level must be 1.." + std::to_string(LZ4HC_CLEVEL_MAX));
  }
  ArchiveReport r;
  TRACEDB_ASSIGN_OR_RETURN(std::unique_ptr<Db> db, OpenTraceDb(path, false, false));
  sqlite3_busy_timeout(db->raw(), o.busy_timeout_ms);
  r.file_bytes_before = static_cast<uint64_t>(std::max<int64_t>(0, PathSize(path)));
  TRACEDB_RETURN_IF_ERROR(db->Begin());
  Status s = [&]() -> Status {
    TRACEDB_RETURN_IF_ERROR(
        Count(db.get(), &r.events_before, &r.blocks_before, &r.block_bytes_before));
    TRACEDB_RETURN_IF_ERROR(DropOldBlocks(db.get(), o, &r));
    TRACEDB_RETURN_IF_ERROR(RecompressOldBlocks(db.get(), o, &r));
    return Count(db.get(), &r.events_after, nullptr, &r.block_bytes_after);
  }();
  if (!s.ok()) {
    db->Rollback();
    return s;
  }
  TRACEDB_RETURN_IF_ERROR(db->Commit());
  if (o.vacuum) {
    TRACEDB_RETURN_IF_ERROR(db->Exec("VACUUM"));
    r.vacuumed = true;
  }
  db.reset();
  r.file_bytes_after = static_cast<uint64_t>(std::max<int64_t>(0, PathSize(path)));
  return r;
}

}  // namespace tracedb::engine
