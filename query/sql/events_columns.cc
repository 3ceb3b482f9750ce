// Column access of the `events` table: xColumn and xRowid. One template serves both row
// sources (a row of a decoded block, a materialised top-n row), so the block path, the hot one,
// reads the column arrays directly. See events_internal.h.
#include <array>

#include "engine/util/saturating.h"
#include "query/sql/events_internal.h"

namespace tracedb::query::events {

using engine::DecodedBlock;
using engine::EventArgs;
using engine::RowKind;

namespace {

// Row i of a decoded block.
struct BlockRow {
  const DecodedBlock& b;
  size_t i;
  uint32_t track() const { return b.track[i]; }
  uint64_t k() const { return b.k[i]; }
  uint64_t parent_k() const { return b.parent_k[i]; }
  int64_t ts() const { return b.ts[i]; }
  int64_t dur() const { return b.dur[i]; }
  uint32_t name() const { return b.name[i]; }
  uint32_t cat() const { return b.cat[i]; }
  uint8_t kind() const { return b.kind[i]; }
  uint32_t depth() const { return b.depth[i]; }
  uint32_t mask() const { return b.arg_mask[i]; }
  int64_t bytes() const { return static_cast<int64_t>(b.bytes[i]); }
  int64_t peer() const { return b.peer[i]; }
  int64_t tag() const { return b.tag[i]; }
  int64_t comm() const { return b.comm[i]; }
  int64_t seq() const { return static_cast<int64_t>(b.seq[i]); }
  int64_t flow() const { return static_cast<int64_t>(b.flow[i]); }
  double value() const { return b.value[i]; }
  std::string_view json() const { return b.json[i]; }
};

// A materialised row (top-n).
struct MaterialRow {
  const engine::Row& r;
  uint32_t track() const { return r.track; }
  uint64_t k() const { return r.k; }
  uint64_t parent_k() const { return r.parent_k; }
  int64_t ts() const { return r.ts; }
  int64_t dur() const { return r.dur; }
  uint32_t name() const { return r.name; }
  uint32_t cat() const { return r.cat; }
  uint8_t kind() const { return static_cast<uint8_t>(r.kind); }
  uint32_t depth() const { return r.depth; }
  uint32_t mask() const {
    return r.args.mask | (r.json.empty() ? 0 : DecodedBlock::kHasJson) |
           (r.open ? DecodedBlock::kOpen : 0);
  }
  int64_t bytes() const { return static_cast<int64_t>(r.args.bytes); }
  int64_t peer() const { return r.args.peer; }
  int64_t tag() const { return r.args.tag; }
  int64_t comm() const { return r.args.comm; }
  int64_t seq() const { return static_cast<int64_t>(r.args.seq); }
  int64_t flow() const { return static_cast<int64_t>(r.args.flow); }
  double value() const { return r.value; }
  std::string_view json() const { return r.json; }
};

void ResultText(sqlite3_context* ctx, const std::string& s) {
  sqlite3_result_text(ctx, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
}

template <typename Src>
void Emit(const Src& s, int32_t rank, const DbCatalog& cat, sqlite3_context* ctx, int col) {
  switch (col) {
    case kId:
      sqlite3_result_int64(ctx,
                           (static_cast<int64_t>(s.track()) << 32) | static_cast<int64_t>(s.k()));
      return;
    case kRank:
      sqlite3_result_int64(ctx, rank);
      return;
    case kTrack:
      sqlite3_result_int64(ctx, s.track());
      return;
    case kTid:
    case kTrackName:
    case kLane: {
      const uint32_t track = s.track();
      const DbCatalog::Track* t = track < cat.tracks.size() ? &cat.tracks[track] : nullptr;
      if (t == nullptr)
        sqlite3_result_null(ctx);
      else if (col == kTid)
        t->tid >= 0 ? sqlite3_result_int64(ctx, t->tid) : sqlite3_result_null(ctx);
      else if (col == kTrackName || t->lane)
        ResultText(ctx, t->name);
      else
        sqlite3_result_null(ctx);
      return;
    }
    case kName: {
      const uint32_t name = s.name();
      if (name < cat.strings.size())
        ResultText(ctx, cat.strings[name]);
      else
        sqlite3_result_null(ctx);
      return;
    }
    case kCat: {
      const uint32_t id = s.cat();
      if (id != 0 && id < cat.strings.size() && !cat.strings[id].empty())
        ResultText(ctx, cat.strings[id]);
      else
        sqlite3_result_null(ctx);
      return;
    }
    case kKind:
      sqlite3_result_text(ctx, engine::RowKindName(static_cast<RowKind>(s.kind())), -1,
                          SQLITE_STATIC);
      return;
    case kTs:
      sqlite3_result_int64(ctx, s.ts());
      return;
    case kDur:
      sqlite3_result_int64(ctx, s.dur());
      return;
    case kEndTs:
      // Clamped at the int64 maximum (a DB made elsewhere), as the zone maps' max_end: the
      // planner's ts <= end_ts <= max_end holds for every row (events_scan.cc).
      sqlite3_result_int64(ctx, engine::SaturatingAdd(s.ts(), s.dur()));
      return;
    case kDepth:
      sqlite3_result_int64(ctx, s.depth());
      return;
    case kParent: {
      const uint64_t parent_k = s.parent_k();
      if (parent_k == 0)
        sqlite3_result_null(ctx);
      else
        sqlite3_result_int64(
            ctx, (static_cast<int64_t>(s.track()) << 32) | static_cast<int64_t>(parent_k - 1));
      return;
    }
    case kBytes:
    case kPeer:
    case kTag:
    case kComm:
    case kSeq:
    case kFlow: {
      static constexpr uint32_t kBits[] = {EventArgs::kBytes, EventArgs::kPeer, EventArgs::kTag,
                                           EventArgs::kComm,  EventArgs::kSeq,  EventArgs::kFlow};
      if (!(s.mask() & kBits[col - kBytes])) {
        sqlite3_result_null(ctx);
        return;
      }
      const int64_t v = col == kBytes  ? s.bytes()
                        : col == kPeer ? s.peer()
                        : col == kTag  ? s.tag()
                        : col == kComm ? s.comm()
                        : col == kSeq  ? s.seq()
                                       : s.flow();
      sqlite3_result_int64(ctx, v);
      return;
    }
    case kValue:
      if (s.kind() == static_cast<uint8_t>(RowKind::kCounter))
        sqlite3_result_double(ctx, s.value());
      else
        sqlite3_result_null(ctx);
      return;
    case kStep: {
      auto step = cat.StepAt(rank, s.ts());
      if (step)
        sqlite3_result_int64(ctx, *step);
      else
        sqlite3_result_null(ctx);
      return;
    }
    case kArgs: {
      if (!(s.mask() & DecodedBlock::kHasJson)) {
        sqlite3_result_null(ctx);
        return;
      }
      const std::string_view j = s.json();
      sqlite3_result_text(ctx, j.data(), static_cast<int>(j.size()), SQLITE_TRANSIENT);
      return;
    }
    case kOpen:
      sqlite3_result_int64(ctx, (s.mask() & DecodedBlock::kOpen) ? 1 : 0);
      return;
    default:
      sqlite3_result_null(ctx);
  }
}

// ColumnGroup as a table (xColumn runs for every value SQLite reads).
const std::array<uint32_t, kNumCols> kGroupOf = [] {
  std::array<uint32_t, kNumCols> t{};
  for (int col = 0; col < kNumCols; ++col) t[col] = ColumnGroup(col);
  return t;
}();

}  // namespace

int Column(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
  auto* c = reinterpret_cast<EventsCursor*>(cur);
  const DbCatalog& cat = c->vtab->catalog;
  if (c->mode == EventsCursor::Mode::kTop) {
    const TopRow& t = c->top[c->top_pos];
    Emit(MaterialRow{t.row}, t.rank, cat, ctx, col);
    return SQLITE_OK;
  }
  // Block rows: the columns the statement reads were decoded with the block; any other is
  // decoded the first time it is read.
  if (!c->scan_loaded && c->mode == EventsCursor::Mode::kScan) {
    int rc = EnsureScanBlock(c);
    if (rc != SQLITE_OK) {
      sqlite3_result_error(ctx, c->vtab->base.zErrMsg ? c->vtab->base.zErrMsg : "events", -1);
      return rc;
    }
  }
  const uint32_t group = kGroupOf[col];
  if (!c->blk->has(group)) {
    tracedb::Status s = c->blk->Need(group);
    if (!s.ok()) {
      sqlite3_result_error(ctx, s.message().c_str(), -1);
      return SQLITE_ERROR;
    }
  }
  Emit(BlockRow{*c->blk, c->row}, c->rank, cat, ctx, col);
  return SQLITE_OK;
}

int Rowid(sqlite3_vtab_cursor* cur, sqlite3_int64* out) {
  auto* c = reinterpret_cast<EventsCursor*>(cur);
  if (c->mode == EventsCursor::Mode::kTop) {
    *out = c->top[c->top_pos].row.id();
    return SQLITE_OK;
  }
  if (!c->scan_loaded && c->mode == EventsCursor::Mode::kScan) {
    int rc = EnsureScanBlock(c);
    if (rc != SQLITE_OK) return rc;
  }
  if (!c->blk->has(engine::kColK) && !c->blk->Need(engine::kColK).ok()) return SQLITE_ERROR;
  *out =
      (static_cast<int64_t>(c->blk->track[c->row]) << 32) | static_cast<int64_t>(c->blk->k[c->row]);
  return SQLITE_OK;
}

}  // namespace tracedb::query::events
