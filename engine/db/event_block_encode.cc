// Event block encoder: rows of one block into the current format (4), zone map included. See
// event_block.h; format in docs/database-format.md "Event blocks". The decoder is event_block.cc.
#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <numeric>
#include <type_traits>
#include <unordered_map>

#include "engine/db/event_block.h"
#include "engine/db/event_block_internal.h"
#include "engine/util/coding.h"
#include "engine/util/hash.h"
#include "engine/util/lz4_codec.h"

namespace tracedb::engine {

using namespace block_internal;  // NOLINT(google-build-using-namespace): this file's own parts

namespace {

// Maps ids (string ids) to dense block-local indexes: a flat table for the usual small ids,
// a hash map for the rest. Reused across blocks by the encoding thread.
class DenseIds {
 public:
  static constexpr uint32_t kFlatLimit = 1u << 20;
  void Reset() {
    for (uint32_t id : touched_) flat_[id] = UINT32_MAX;
    touched_.clear();
    big_.clear();
    list_.clear();
  }
  // Inline for an id already seen (nearly every call: a block has few names).
  uint32_t Index(uint32_t id) {
    if (id < flat_.size() && flat_[id] != UINT32_MAX) [[likely]]
      return flat_[id];
    return IndexSlow(id);
  }
  const std::vector<uint32_t>& list() const { return list_; }
  // The flat table, for a loop that keeps it in registers (Index's inline part over it);
  // valid until the next IndexSlow.
  const uint32_t* flat() const { return flat_.data(); }
  size_t flat_size() const { return flat_.size(); }
  [[gnu::noinline]] uint32_t IndexSlow(uint32_t id) {
    if (id < kFlatLimit) {
      if (id >= flat_.size()) flat_.resize(std::max<size_t>(id + 1, flat_.size() * 2), UINT32_MAX);
      uint32_t& slot = flat_[id];
      if (slot == UINT32_MAX) {
        slot = static_cast<uint32_t>(list_.size());
        list_.push_back(id);
        touched_.push_back(id);
      }
      return slot;
    }
    auto [it, fresh] = big_.emplace(id, static_cast<uint32_t>(list_.size()));
    if (fresh) list_.push_back(id);
    return it->second;
  }

 private:
  std::vector<uint32_t> flat_;
  std::vector<uint32_t> touched_;
  std::unordered_map<uint32_t, uint32_t> big_;
  std::vector<uint32_t> list_;
};

void PutColumn(std::string_view col, std::string* dst) {
  PutVarint64(dst, col.size());
  dst->append(col.data(), col.size());
}
void PutColumn(const ByteBuf& col, std::string* dst) { PutColumn(col.view(), dst); }

}  // namespace

namespace {

// A row's place in (track, k) order, for the rare block whose rows come out of that order.
struct SortKey {
  uint32_t track;
  uint32_t idx;  // the row's index: ties (equal keys, only in hostile input) keep row order
  uint64_t k;
};

// What EncodeBlock keeps between blocks, per thread: its tables, and its buffers, which grow to
// the largest block seen and stay (one thread_local lookup per block, none per row).
struct EncodeScratch {
  DenseIds names, cats;
  // Per dense name index, the first (category, kind) seen with it and the index of its
  // BlockNameInfo: one comparison finds a row's statistics. A name seen with several
  // categories or kinds keeps the others in `more_infos`. `combo` is cat * kNumRowKinds +
  // kind + 1, 0 while the name has none.
  struct NameInfoSlot {
    uint32_t combo = 0;
    uint32_t info = 0;
  };
  std::vector<NameInfoSlot> info_of_name;
  std::unordered_map<uint64_t, uint32_t> more_infos;
  // The columns of a varint or a byte per row, written through plain cursors: room for n rows
  // of their longest varints is made before the pass, so no write checks capacity.
  std::string ks, parents, depths, kinds, namec, catc, masks;
  ByteBuf args, values, json, run_col, tracks;
  std::vector<uint64_t> durs, tss;
  std::vector<uint32_t> sorted_depth, sorted_track;
  std::vector<std::pair<size_t, int64_t>> run_starts;  // (row in block order, its ts)
  // Only for rows out of (track, k) order.
  std::vector<uint32_t> name_idx, cat_idx, order;
  std::vector<SortKey> keys;
  // OrderByTrack's runs of rows on one track: each run's first row and the track's slot.
  std::vector<std::pair<uint32_t, uint8_t>> track_runs;
  // Whether the last block out of order had a negative ts delta: the next one is counted as
  // zigzags in its pass if so (a rank's blocks are alike; a wrong guess costs a recount).
  bool permuted_signed = false;
  std::string raw, tsc, durc, stored;
  // Format 4's name column: the indexes as values, and the two codings tried.
  std::vector<uint64_t> name_vals;
  std::vector<uint32_t> name_counts;
  std::string name_huffman, name_lz4;

  void Prepare(size_t n) {
    auto grow = [n](auto* buf, size_t per_row) {
      if (buf->size() < n * per_row) buf->resize(n * per_row);
    };
    grow(&ks, 10);
    grow(&parents, 10);
    grow(&depths, 5);
    grow(&kinds, 1);
    grow(&namec, 5);
    grow(&catc, 5);
    grow(&masks, 5);
    grow(&durs, 1);
    grow(&tss, 1);
    grow(&sorted_depth, 1);
    grow(&sorted_track, 1);
    grow(&info_of_name, 1);
    names.Reset();
    cats.Reset();
    more_infos.clear();
  }
  // Forgets the name statistics' slots of the block (those of its `nnames` names).
  void ResetNameInfos() {
    std::fill_n(info_of_name.begin(), names.list().size(), NameInfoSlot());
    more_infos.clear();
  }
};

// The rows the encoder reads, two ways: an array of Rows, or RowColumns. The row pass and the
// rest of EncodeBlock are templates over these, so both give the same bytes.
class RowSource {
 public:
  explicit RowSource(const Row* rows) : rows_(rows) {}
  int64_t ts(size_t i) const { return rows_[i].ts; }
  int64_t dur(size_t i) const { return rows_[i].dur; }
  uint32_t track(size_t i) const { return rows_[i].track; }
  uint32_t name(size_t i) const { return rows_[i].name; }
  uint32_t cat(size_t i) const { return rows_[i].cat; }
  uint32_t depth(size_t i) const { return rows_[i].depth; }
  uint64_t k(size_t i) const { return rows_[i].k; }
  uint64_t parent_k(size_t i) const { return rows_[i].parent_k; }
  RowKind kind(size_t i) const { return rows_[i].kind; }
  uint32_t mask(size_t i) const {
    const Row& r = rows_[i];
    return (r.args.mask & EventArgs::kAllFields) | (r.json.empty() ? 0 : DecodedBlock::kHasJson) |
           (r.open ? DecodedBlock::kOpen : 0);
  }
  // Only for a row whose mask has argument fields (args), kHasJson (json), or a counter (value).
  const EventArgs& args(size_t i) const { return rows_[i].args; }
  std::string_view json(size_t i) const { return rows_[i].json; }
  double value(size_t i) const { return rows_[i].value; }

 private:
  const Row* rows_;
};

class ColumnSource {
 public:
  explicit ColumnSource(const RowColumns& c)
      : ts_(c.ts.data()),
        dur_(c.dur.data()),
        track_(c.track.data()),
        name_(c.name.data()),
        cat_(c.cat.data()),
        depth_(c.depth.data()),
        k_(c.k.data()),
        parent_k_(c.parent_k.data()),
        kind_(c.kind.data()),
        mask_(c.mask.data()),
        extra_(c.extra.data()),
        extras_(c.extras.data()) {}
  int64_t ts(size_t i) const { return ts_[i]; }
  int64_t dur(size_t i) const { return dur_[i]; }
  uint32_t track(size_t i) const { return track_[i]; }
  uint32_t name(size_t i) const { return name_[i]; }
  uint32_t cat(size_t i) const { return cat_[i]; }
  uint32_t depth(size_t i) const { return depth_[i]; }
  uint64_t k(size_t i) const { return k_[i]; }
  uint64_t parent_k(size_t i) const { return parent_k_[i]; }
  RowKind kind(size_t i) const { return static_cast<RowKind>(kind_[i]); }
  uint32_t mask(size_t i) const { return mask_[i]; }
  const EventArgs& args(size_t i) const { return extras_[extra_[i] - 1].args; }
  std::string_view json(size_t i) const { return extras_[extra_[i] - 1].json; }
  double value(size_t i) const { return extras_[extra_[i] - 1].value; }

 private:
  const int64_t *ts_, *dur_;
  const uint32_t *track_, *name_, *cat_, *depth_;
  const uint64_t *k_, *parent_k_;
  const uint8_t* kind_;
  const uint32_t *mask_, *extra_;
  const RowColumns::Extra* extras_;
};

// What the row pass finds besides the columns.
struct RowPassOut {
  int64_t base = INT64_MAX;       // the smallest ts
  __int128 last_end = INT64_MIN;  // the largest ts + dur, exact
  int64_t max_dur = 0;
  uint64_t ts_gcd = 0, dur_gcd = 0;  // of the starts' differences, and of the durations
  int64_t ts_ref = 0;      // what the runs' first deltas are against so far: the first row's ts, or
                           // the block's base when RowPass was given it
  bool ts_signed = false;  // a negative ts delta
  bool stats_zigzag = false;  // ts_stats counted the deltas' zigzags
  // The bit lengths of the ts deltas for the entropy coder's statistics, counted where each
  // delta is made (this pass waits on the rows' memory, and the counting fits in the wait):
  // exact when the block's base is ts_ref (the first row starts first: 608 of the 616 blocks
  // of the 10M workload) and its scale is 1; EncodeBlock counts them again otherwise. The
  // frequent values' votes are taken from a sample afterwards (VoteSample).
  HuffmanColumnStats ts_stats;
  size_t ks = 0, parents = 0, depths = 0, kinds = 0, namec = 0, catc = 0, masks = 0;  // sizes
  uint64_t runs = 0;
  // Each row's depth and track in (track, k) order, for DurationsToResiduals: the scratch's
  // copies (RowPass), or the columns themselves when they are in that order (ColumnPass).
  const uint32_t* depth = nullptr;
  const uint32_t* track = nullptr;
};

// The first (name, cat, kind) of a name, or another one of it: its BlockNameInfo, created on
// first sight. Out of line: a name's first combination is what nearly every row finds.
[[gnu::noinline]] uint32_t OtherNameInfo(EncodeScratch& s, BlockZone* zone, uint32_t name_idx,
                                         uint32_t combo, uint32_t name, uint32_t cat, RowKind kind,
                                         int64_t dur) {
  EncodeScratch::NameInfoSlot& slot = s.info_of_name[name_idx];
  const auto next = static_cast<uint32_t>(zone->names.size());
  uint32_t at;
  if (slot.combo == 0) {
    slot = {combo, next};
    at = next;
  } else {
    auto [it, fresh] = s.more_infos.try_emplace(uint64_t{name_idx} << 32 | combo, next);
    if (!fresh) return it->second;
    at = next;
  }
  BlockNameInfo& info = zone->names.emplace_back();
  info.name = name;
  info.cat = cat;
  info.kind = kind;
  info.min_dur = dur;
  info.max_dur = dur;
  return at;
}

// The largest ts + dur of the first n rows, exact: what the passes take when some ts + dur
// overflows int64 (hostile input), and their running maximum is then wrong.
template <class Rows>
__int128 ExactLastEnd(const Rows& rows, size_t n) {
  __int128 last_end = INT64_MIN;
  for (size_t i = 0; i < n; ++i) {
    last_end = std::max(last_end, static_cast<__int128>(rows.ts(i)) + rows.dur(i));
  }
  return last_end;
}

// The one pass over the rows, in (track, k) order: the rows themselves when kPermuted is false,
// rows[order[j]] otherwise. It writes every column but ts and dur, which it leaves as values in
// s.tss and s.durs to be finished once the block's time base and scale are known (a run's first
// ts delta is against the base: the pass takes it against the first row's ts, s.run_starts
// says which they are), and it
// takes the zone map, the name statistics and what the time base and scale need. Without
// `order` it also checks the order and assigns the dense name and category indexes; it returns
// false, its outputs to be discarded, at the first row out of order. (Rows are large, and a
// block of them does not fit in a core's cache: the one pass reads each once.)
//
// With `order`, `base` is the block's smallest ts (the caller's pre-pass finds it): the runs'
// first deltas are taken against it, so that the ts statistics hold the final values whatever
// row comes first (a block of interleaved tracks seldom starts with its lowest track's first
// row), and with `zigzag` they are counted as zigzags (exact for a block with a negative delta).
template <bool kPermuted, class Rows>
bool RowPass(const Rows& rows, const uint32_t* order, size_t n, EncodeScratch& s, BlockZone* zone,
             RowPassOut* o, int64_t base_in = 0, bool zigzag = false) {
  char* const ks0 = s.ks.data();
  char* const parents0 = s.parents.data();
  char* const depths0 = s.depths.data();
  char* const kinds0 = s.kinds.data();
  char* const namec0 = s.namec.data();
  char* const catc0 = s.catc.data();
  char* const masks0 = s.masks.data();
  char *ks = ks0, *parents = parents0, *depths = depths0, *kinds = kinds0, *namec = namec0,
       *catc = catc0, *masks = masks0;
  uint64_t* const tss = s.tss.data();
  uint64_t* const durs = s.durs.data();
  uint32_t* const sorted_depth = s.sorted_depth.data();
  uint32_t* const sorted_track = s.sorted_track.data();
  EncodeScratch::NameInfoSlot* const info_of_name = s.info_of_name.data();
  // What the loop looks up, in locals: the fields of the vectors themselves would be loaded
  // again after every byte the column writers store (a char store may alias anything).
  BlockNameInfo* infos = zone->names.data();
  const uint32_t* name_flat = s.names.flat();
  const uint32_t* cat_flat = s.cats.flat();
  size_t name_flat_size = s.names.flat_size(), cat_flat_size = s.cats.flat_size();
  auto name_index = [&](uint32_t id) {
    if (id < name_flat_size && name_flat[id] != UINT32_MAX) [[likely]]
      return name_flat[id];
    const uint32_t x = s.names.IndexSlow(id);
    name_flat = s.names.flat();
    name_flat_size = s.names.flat_size();
    return x;
  };
  auto cat_index = [&](uint32_t id) {
    if (id < cat_flat_size && cat_flat[id] != UINT32_MAX) [[likely]]
      return cat_flat[id];
    const uint32_t x = s.cats.IndexSlow(id);
    cat_flat = s.cats.flat();
    cat_flat_size = s.cats.flat_size();
    return x;
  };
  const int64_t ts0 = rows.ts(0);
  const int64_t ts_ref = kPermuted ? base_in : rows.ts(0);
  int64_t base = INT64_MAX, max_dur = 0, max_end = INT64_MIN;
  bool end_overflow = false;  // some ts + dur outside int64 (hostile input): max_end is wrong
  uint64_t ts_gcd = 0, dur_gcd = 0, runs = 0;
  bool ts_signed = false;
  uint32_t run_track = 0;
  uint64_t run_len = 0, prev_k = 0;
  int64_t prev_ts = 0, prev_end = 0;
  uint32_t prev_depth = 0;
  uint32_t last_name = 0, last_name_idx = 0, last_cat = 0, last_cat_idx = 0;
  if (!kPermuted) {
    last_name = rows.name(0);
    last_name_idx = name_index(last_name);
    last_cat = rows.cat(0);
    last_cat_idx = cat_index(last_cat);
  }
  for (size_t j = 0; j < n; ++j) {
    const size_t i = kPermuted ? order[j] : j;
    const uint32_t r_track = rows.track(i);
    const uint64_t r_k = rows.k(i);
    const int64_t r_ts = rows.ts(i), r_dur = rows.dur(i);
    const uint32_t r_depth = rows.depth(i);
    const RowKind r_kind = rows.kind(i);
    const bool run_start = j == 0 || r_track != run_track;
    if (run_start) {
      if (j != 0) {
        if (!kPermuted && r_track < run_track) return false;
        s.run_col.Reserve(20);
        s.run_col.PutVarint(run_track);
        s.run_col.PutVarint(run_len);
        ++runs;
      }
      run_track = r_track;
      run_len = 0;
      prev_k = 0;
      s.run_starts.emplace_back(j, r_ts);
    } else if (!kPermuted && r_k < prev_k) {
      return false;
    }
    ++run_len;
    ks = EncodeVarint64(ks, ZigZag(static_cast<int64_t>(r_k - prev_k)));
    prev_k = r_k;
    // parent_k as k + 2 - parent_k (0: none), in wrap-around arithmetic like its decoder.
    const uint64_t r_parent_k = rows.parent_k(i);
    parents = EncodeVarint64(
        parents, ZigZag(r_parent_k == 0 ? 0 : static_cast<int64_t>(r_k + 2 - r_parent_k)));
    depths = EncodeVarint64(depths, r_depth);
    *kinds++ = static_cast<char>(r_kind);
    uint32_t ni, ci;
    if (kPermuted) {
      ni = s.name_idx[i];
      ci = s.cat_idx[i];
    } else {
      const uint32_t r_name = rows.name(i), r_cat = rows.cat(i);
      if (r_name != last_name) {
        last_name = r_name;
        last_name_idx = name_index(r_name);
      }
      if (r_cat != last_cat) {
        last_cat = r_cat;
        last_cat_idx = cat_index(r_cat);
      }
      ni = last_name_idx;
      ci = last_cat_idx;
    }
    namec = EncodeVarint64(namec, ni);
    catc = EncodeVarint64(catc, ci);
    {
      const uint32_t combo = ci * kNumRowKinds + static_cast<uint32_t>(r_kind) + 1;
      const EncodeScratch::NameInfoSlot slot = info_of_name[ni];
      uint32_t at = slot.info;
      if (slot.combo != combo) [[unlikely]] {
        at = OtherNameInfo(s, zone, ni, combo, rows.name(i), rows.cat(i), r_kind, r_dur);
        infos = zone->names.data();
      }
      BlockNameInfo& info = infos[at];
      // (info.count is the sum of info.hist, taken after the pass.)
      info.total_dur = SaturatingAdd(info.total_dur, r_dur);  // sums saturate, never overflow
      info.min_dur = std::min(info.min_dur, r_dur);
      info.max_dur = std::max(info.max_dur, r_dur);
      info.hist[static_cast<size_t>(DurationBucketInline(r_dur))]++;
    }
    // The ts delta against its reference (a run's first against the first row's ts, to be
    // made against the base if that is not it).
    const int64_t delta =
        WrapSub(r_ts, TsReference(run_start, ts_ref, prev_ts, prev_end, r_depth, prev_depth));
    tss[j] = static_cast<uint64_t>(delta);
    ts_signed |= delta < 0;
    o->ts_stats.AddLength(kPermuted && zigzag ? ZigZag(delta) : static_cast<uint64_t>(delta));
    durs[j] = static_cast<uint64_t>(r_dur);
    sorted_depth[j] = r_depth;
    sorted_track[j] = r_track;
    prev_ts = r_ts;
    prev_end = WrapAdd(r_ts, r_dur);
    prev_depth = r_depth;
    base = std::min(base, r_ts);
    int64_t end;
    end_overflow |= __builtin_add_overflow(r_ts, r_dur, &end);
    max_end = std::max(max_end, end);
    max_dur = std::max(max_dur, r_dur);
    // (Once a gcd is 1 it stays 1: skip the division. The differences from rows[0], whatever
    // the order, have the gcd of all the differences between starts.)
    if (ts_gcd != 1) {
      const uint64_t d = r_ts >= ts0 ? static_cast<uint64_t>(r_ts) - static_cast<uint64_t>(ts0)
                                     : static_cast<uint64_t>(ts0) - static_cast<uint64_t>(r_ts);
      ts_gcd = std::gcd(ts_gcd, d);
    }
    if (dur_gcd != 1) dur_gcd = std::gcd(dur_gcd, static_cast<uint64_t>(r_dur));
    const uint32_t mask = rows.mask(i);
    masks = EncodeVarint64(masks, mask);
    if (mask & EventArgs::kAllFields) {
      const EventArgs& a = rows.args(i);
      ByteBuf& args = s.args;
      args.Reserve(60);
      if (mask & EventArgs::kBytes) args.PutVarint(a.bytes);
      if (mask & EventArgs::kPeer) args.PutVarint(ZigZag(a.peer));
      if (mask & EventArgs::kTag) args.PutVarint(ZigZag(a.tag));
      if (mask & EventArgs::kComm) args.PutVarint(a.comm);
      if (mask & EventArgs::kSeq) args.PutVarint(a.seq);
      if (mask & EventArgs::kFlow) args.PutVarint(a.flow);
    }
    if (mask & DecodedBlock::kHasJson) {
      const std::string_view json = rows.json(i);
      s.json.Reserve(10 + json.size());
      s.json.PutVarint(json.size());
      s.json.PutBytes(json.data(), json.size());
    }
    if (r_kind == RowKind::kCounter) {
      const double value = rows.value(i);
      uint64_t bits;
      std::memcpy(&bits, &value, 8);
      s.values.Reserve(8);
      s.values.PutFixed64(bits);
    }
  }
  s.run_col.Reserve(20);
  s.run_col.PutVarint(run_track);
  s.run_col.PutVarint(run_len);
  ++runs;
  o->depth = sorted_depth;
  o->track = sorted_track;
  o->base = base;
  if (end_overflow) [[unlikely]] {
    o->last_end = ExactLastEnd(rows, n);
  } else {
    o->last_end = max_end;
  }
  o->max_dur = max_dur;
  o->ts_gcd = ts_gcd;
  o->dur_gcd = dur_gcd;
  o->ts_ref = ts_ref;
  o->ts_signed = ts_signed;
  o->stats_zigzag = kPermuted && zigzag;
  o->runs = runs;
  o->ks = static_cast<size_t>(ks - ks0);
  o->parents = static_cast<size_t>(parents - parents0);
  o->depths = static_cast<size_t>(depths - depths0);
  o->kinds = static_cast<size_t>(kinds - kinds0);
  o->namec = static_cast<size_t>(namec - namec0);
  o->catc = static_cast<size_t>(catc - catc0);
  o->masks = static_cast<size_t>(masks - masks0);
  return true;
}

// RowPass for the builder's columns when every row is a plain span (RowColumns::special == 0:
// kind kSpan, no arguments, no JSON, not open), as passes over the arrays instead of one loop
// over rows: the structure (runs, order, k, parent, depth), the names and their statistics,
// the ts deltas, then the time base and gcds. Each pass reads two to four arrays and keeps its
// few cursors in registers; the kinds and masks are constant (memset), the gcd pass stops
// once both gcds are 1 (a few rows in), and DurationsToResiduals reads the depth and track
// columns in place. Same outputs as RowPass<false> over the same rows, and the same `false`
// for rows out of (track, k) order.
bool ColumnPass(const RowColumns& c, size_t n, EncodeScratch& s, BlockZone* zone, RowPassOut* o) {
  const int64_t* const ts = c.ts.data();
  const int64_t* const dur = c.dur.data();
  const uint32_t* const track = c.track.data();
  const uint64_t* const k = c.k.data();
  const uint64_t* const parent_k = c.parent_k.data();
  const uint32_t* const depth = c.depth.data();
  // 1. Runs, their order, and the k, parent and depth columns.
  {
    char* ks = s.ks.data();
    char* parents = s.parents.data();
    char* depths = s.depths.data();
    uint32_t run_track = track[0];
    size_t run_begin = 0;
    uint64_t prev_k = 0, runs = 0;
    s.run_starts.emplace_back(0, ts[0]);
    for (size_t j = 0; j < n; ++j) {
      const uint32_t t = track[j];
      const uint64_t kj = k[j];
      if (t != run_track) [[unlikely]] {
        if (t < run_track) return false;
        s.run_col.Reserve(20);
        s.run_col.PutVarint(run_track);
        s.run_col.PutVarint(j - run_begin);
        ++runs;
        run_track = t;
        run_begin = j;
        prev_k = 0;
        s.run_starts.emplace_back(j, ts[j]);
      } else if (kj < prev_k) [[unlikely]] {
        return false;
      }
      ks = EncodeVarint64(ks, ZigZag(static_cast<int64_t>(kj - prev_k)));
      prev_k = kj;
      const uint64_t pk = parent_k[j];
      parents = EncodeVarint64(parents, ZigZag(pk == 0 ? 0 : static_cast<int64_t>(kj + 2 - pk)));
      depths = EncodeVarint64(depths, depth[j]);
    }
    s.run_col.Reserve(20);
    s.run_col.PutVarint(run_track);
    s.run_col.PutVarint(n - run_begin);
    o->runs = runs + 1;
    o->ks = static_cast<size_t>(ks - s.ks.data());
    o->parents = static_cast<size_t>(parents - s.parents.data());
    o->depths = static_cast<size_t>(depths - s.depths.data());
  }
  // 2. Kinds and masks: every row a span without arguments (one byte each).
  std::memset(s.kinds.data(), static_cast<int>(RowKind::kSpan), n);
  std::memset(s.masks.data(), 0, n);
  o->kinds = n;
  o->masks = n;
  // 3. Names and categories: dense indexes in row order, and each (name, cat)'s statistics.
  // Names change from row to row in most traces (a parent, then its children): each row finds
  // its name's index and BlockNameInfo by table lookups, as RowPass does, without a branch on
  // whether the name changed; the category, which seldom changes, keeps that branch.
  {
    const uint32_t* const name = c.name.data();
    const uint32_t* const cat = c.cat.data();
    char* namec = s.namec.data();
    char* catc = s.catc.data();
    EncodeScratch::NameInfoSlot* const info_of_name = s.info_of_name.data();
    BlockNameInfo* infos = zone->names.data();
    const uint32_t* name_flat = s.names.flat();
    size_t name_flat_size = s.names.flat_size();
    uint32_t last_cat = cat[0], ci = s.cats.Index(last_cat);
    for (size_t j = 0; j < n; ++j) {
      const uint32_t nm = name[j], ct = cat[j];
      uint32_t ni;
      if (nm < name_flat_size && name_flat[nm] != UINT32_MAX) [[likely]] {
        ni = name_flat[nm];
      } else {
        ni = s.names.IndexSlow(nm);
        name_flat = s.names.flat();
        name_flat_size = s.names.flat_size();
      }
      if (ct != last_cat) [[unlikely]] {
        last_cat = ct;
        ci = s.cats.Index(ct);
      }
      namec = EncodeVarint64(namec, ni);
      catc = EncodeVarint64(catc, ci);
      const int64_t d = dur[j];
      const uint32_t combo = ci * kNumRowKinds + static_cast<uint32_t>(RowKind::kSpan) + 1;
      const EncodeScratch::NameInfoSlot slot = info_of_name[ni];
      uint32_t at = slot.info;
      if (slot.combo != combo) [[unlikely]] {
        at = OtherNameInfo(s, zone, ni, combo, nm, ct, RowKind::kSpan, d);
        infos = zone->names.data();
      }
      BlockNameInfo& info = infos[at];
      // (info.count is the sum of info.hist, taken after the pass.)
      info.total_dur = SaturatingAdd(info.total_dur, d);  // sums saturate, never overflow
      info.min_dur = std::min(info.min_dur, d);
      info.max_dur = std::max(info.max_dur, d);
      info.hist[static_cast<size_t>(DurationBucketInline(d))]++;
    }
    o->namec = static_cast<size_t>(namec - s.namec.data());
    o->catc = static_cast<size_t>(catc - s.catc.data());
  }
  // 4. The ts deltas, a run at a time: a run's first against the first row's ts (made against
  // the base afterwards if that is not it), then each against the row before it (its start
  // for a child, its end otherwise).
  {
    uint64_t* const tss = s.tss.data();
    const int64_t ts_ref = ts[0];
    bool ts_signed = false;
    HuffmanColumnStats& stats = o->ts_stats;
    const size_t nruns = s.run_starts.size();
    for (size_t r = 0; r < nruns; ++r) {
      const size_t b = s.run_starts[r].first;
      const size_t e = r + 1 < nruns ? s.run_starts[r + 1].first : n;
      int64_t delta = WrapSub(ts[b], ts_ref);
      tss[b] = static_cast<uint64_t>(delta);
      ts_signed |= delta < 0;
      stats.AddLength(static_cast<uint64_t>(delta));
      for (size_t j = b + 1; j < e; ++j) {
        const int64_t ref = depth[j] > depth[j - 1] ? ts[j - 1] : WrapAdd(ts[j - 1], dur[j - 1]);
        delta = WrapSub(ts[j], ref);
        tss[j] = static_cast<uint64_t>(delta);
        ts_signed |= delta < 0;
        stats.AddLength(static_cast<uint64_t>(delta));
      }
    }
    o->ts_ref = ts_ref;
    o->ts_signed = ts_signed;
  }
  // 5. The zone map's times and the gcds; the durations copied for the residuals.
  {
    int64_t base = INT64_MAX, max_dur = 0, max_end = INT64_MIN;
    bool end_overflow = false;
    for (size_t j = 0; j < n; ++j) {
      int64_t end;
      end_overflow |= __builtin_add_overflow(ts[j], dur[j], &end);
      base = std::min(base, ts[j]);
      max_end = std::max(max_end, end);
      max_dur = std::max(max_dur, dur[j]);
    }
    std::memcpy(s.durs.data(), dur, n * sizeof(int64_t));
    // (Once both gcds are 1 they stay 1: the pass stops. The differences from ts[0] have the
    // gcd of all the differences between starts.)
    const int64_t ts0 = ts[0];
    uint64_t ts_gcd = 0, dur_gcd = 0;
    for (size_t j = 0; j < n && (ts_gcd != 1 || dur_gcd != 1); ++j) {
      if (ts_gcd != 1) {
        const uint64_t d = ts[j] >= ts0 ? static_cast<uint64_t>(ts[j]) - static_cast<uint64_t>(ts0)
                                        : static_cast<uint64_t>(ts0) - static_cast<uint64_t>(ts[j]);
        ts_gcd = std::gcd(ts_gcd, d);
      }
      if (dur_gcd != 1) dur_gcd = std::gcd(dur_gcd, static_cast<uint64_t>(dur[j]));
    }
    o->base = base;
    if (end_overflow) [[unlikely]] {
      o->last_end = ExactLastEnd(ColumnSource(c), n);
    } else {
      o->last_end = max_end;
    }
    o->max_dur = max_dur;
    o->ts_gcd = ts_gcd;
    o->dur_gcd = dur_gcd;
  }
  o->depth = depth;
  o->track = track;
  return true;
}

// Format 4's name column (docs/database-format.md "Event blocks"): the coding byte, then the
// block-local name indexes as the n varints of `varints` (kNameVarint) or in entropy-coded bit
// lengths (kNameHuffman). The block's payload is LZ4-compressed as a whole, which takes a
// repeating pattern of names to almost nothing but cannot entropy-code a random sequence; the
// entropy coding takes any sequence to about its order-0 entropy but no lower. The column alone,
// LZ4-compressed, stands for what the varints cost in the block; the entropy-coded column is
// chosen only when it is smaller than that by a margin (what LZ4 adds to incompressible bytes,
// and then some), so that a block whose names LZ4 handles well keeps its varints. That LZ4 pass
// only estimates (the block is compressed whole later) and runs in LZ4's fast mode: on random
// names the default mode spent 25 us a block finding a few short matches (12.6 KB of 16 KB, the
// entropy coding 6 KB), the fast mode 3 us; a repeating pattern it takes to the same tens of
// bytes. `nnames`: the size of the block's name dictionary.
constexpr int kNameTrialAcceleration = 16;
void PutNameColumn(std::string_view varints, size_t n, size_t nnames, EncodeScratch& s,
                   std::string* raw) {
  std::string& huf = s.name_huffman;
  std::string& lz = s.name_lz4;
  huf.clear();
  lz.clear();
  bool ok = Lz4Compress(varints, &lz, kNameTrialAcceleration).ok();
  // Every name of the block's dictionary occurs in it: with two or more, each value takes a code
  // of at least one bit, so the entropy-coded column is at least n / 8 bytes, and a column that
  // LZ4 takes to that or less (a repeating pattern of names) keeps its varints without the
  // entropy coder's passes.
  if (ok && nnames >= 2 && lz.size() <= n / 8) ok = false;
  if (ok) {
    std::vector<uint64_t>& v = s.name_vals;
    v.resize(n);
    if (varints.size() == n) {  // one byte each: the usual block, under 128 names
      const auto* p = reinterpret_cast<const unsigned char*>(varints.data());
      for (size_t i = 0; i < n; ++i) v[i] = p[i];
    } else {
      Reader r(varints);
      for (size_t i = 0; i < n && ok; ++i) ok = r.GetVarint64(&v[i]);
    }
    if (ok) {
      // The frequent values from exact counts: the indexes are below the dictionary's size.
      HuffmanColumnStats stats;
      ok = stats.CountAll(v.data(), n, nnames, &s.name_counts);
      if (ok) PutHuffmanBitLengthColumn(v.data(), n, stats, &huf);
    }
  }
  const size_t margin = 16 + huf.size() / 128;
  if (ok && huf.size() + margin < lz.size()) {
    PutVarint64(raw, 1 + huf.size());
    raw->push_back(static_cast<char>(kNameHuffman));
    raw->append(huf);
  } else {
    PutVarint64(raw, 1 + varints.size());
    raw->push_back(static_cast<char>(kNameVarint));
    raw->append(varints);
  }
}

}  // namespace

namespace {

// The rows' order by (track, k, row index), into order[0, n), in linear time when it can be
// had so: a block usually holds a few tracks interleaved in time (a rank's thread and its
// Horovod or CUDA lanes), each track's rows already in k order (the builder numbers a track's
// rows in the order it places them). Then a counting sort by track, stable, is that order. False,
// with `order` untouched, for more than kMaxTracks tracks or a track whose k goes back (the caller
// sorts).
template <class Rows>
bool OrderByTrack(const Rows& rows, size_t n, std::vector<std::pair<uint32_t, uint8_t>>* runs,
                  uint32_t* order) {
  constexpr size_t kMaxTracks = 64;
  uint32_t track_of[kMaxTracks];
  uint64_t last_k[kMaxTracks];
  uint32_t count[kMaxTracks];
  size_t tracks = 0;
  // The rows as runs on one track (a row's slot, stored per row, made the scatter below a chain
  // of loads and stores through next[] of the same slot, row after row).
  runs->clear();
  uint32_t cur_track = 0;
  size_t cur = kMaxTracks;  // the slot of cur_track; none yet
  uint32_t run_start = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t t = rows.track(i);
    const uint64_t k = rows.k(i);
    if (cur == kMaxTracks || t != cur_track) {
      if (cur != kMaxTracks) {
        count[cur] += static_cast<uint32_t>(i) - run_start;
        runs->emplace_back(run_start, static_cast<uint8_t>(cur));
      }
      size_t j = 0;
      while (j < tracks && track_of[j] != t) ++j;
      if (j == tracks) {
        if (tracks == kMaxTracks) return false;
        track_of[j] = t;
        last_k[j] = k;
        count[j] = 0;
        ++tracks;
      }
      cur = j;
      cur_track = t;
      run_start = static_cast<uint32_t>(i);
    }
    if (k < last_k[cur]) return false;
    last_k[cur] = k;
  }
  if (cur != kMaxTracks) {
    count[cur] += static_cast<uint32_t>(n) - run_start;
    runs->emplace_back(run_start, static_cast<uint8_t>(cur));
  }
  // Each slot's first place in the output: the slots in ascending track order.
  uint8_t by_track[kMaxTracks];
  for (size_t j = 0; j < tracks; ++j) by_track[j] = static_cast<uint8_t>(j);
  std::sort(by_track, by_track + tracks,
            [&track_of](uint8_t a, uint8_t b) { return track_of[a] < track_of[b]; });
  uint32_t next[kMaxTracks];
  uint32_t at = 0;
  for (size_t j = 0; j < tracks; ++j) {
    next[by_track[j]] = at;
    at += count[by_track[j]];
  }
  for (size_t r = 0; r < runs->size(); ++r) {
    const auto [first, slot] = (*runs)[r];
    const uint32_t end = r + 1 < runs->size() ? (*runs)[r + 1].first : static_cast<uint32_t>(n);
    uint32_t* dst = order + next[slot];
    for (uint32_t i = first; i < end; ++i) *dst++ = i;
    next[slot] += end - first;
  }
  return true;
}

// Whether a column of at least 512 bytes is one LZ4 would only copy: its first 2 KiB do not
// shrink by an eighth (the entropy coder's bits of random values; the bits of a periodic column
// repeat, and LZ4 finds them). The sample costs a small part of compressing the column whole.
bool LooksIncompressible(std::string_view col) {
  constexpr size_t kMinBytes = 512, kSample = 2048;
  if (col.size() < kMinBytes) return false;
  thread_local std::string sample;
  sample.clear();
  const std::string_view probe = col.substr(0, kSample);
  return !Lz4Compress(probe, &sample).ok() || sample.size() >= probe.size() - probe.size() / 8;
}

// `plain`: the same rows as columns, every one a plain span (ColumnPass), or null.
template <class Rows>
void EncodeRows(const Rows& rows, size_t n, const RowColumns* plain, std::string* out,
                BlockZone* zone) {
  thread_local EncodeScratch scratch;
  EncodeScratch& s = scratch;
  *zone = BlockZone();
  zone->count = n;
  s.Prepare(n);
  auto clear_rows_outputs = [&s] {
    for (ByteBuf* b : {&s.args, &s.values, &s.json, &s.run_col}) b->Clear();
    s.run_starts.clear();
  };
  clear_rows_outputs();
  RowPassOut o;
  // Rows usually come in (track, k) order (the builder emits each track's events in start
  // order): one pass over them then does everything. Otherwise that pass stops at the first row
  // out of order, and the rows are read in row order for the dense indexes, then in the sorted
  // order for the rest.
  const bool in_order = plain != nullptr ? ColumnPass(*plain, n, s, zone, &o)
                                         : RowPass<false>(rows, nullptr, n, s, zone, &o);
  if (!in_order) {
    s.ResetNameInfos();
    zone->names.clear();
    s.names.Reset();
    s.cats.Reset();
    clear_rows_outputs();
    s.name_idx.resize(n);
    s.cat_idx.resize(n);
    uint32_t last_name = rows.name(0), last_name_idx = s.names.Index(last_name);
    uint32_t last_cat = rows.cat(0), last_cat_idx = s.cats.Index(last_cat);
    int64_t base = INT64_MAX;
    for (size_t i = 0; i < n; ++i) {
      base = std::min(base, rows.ts(i));
      const uint32_t r_name = rows.name(i), r_cat = rows.cat(i);
      if (r_name != last_name) {
        last_name = r_name;
        last_name_idx = s.names.Index(r_name);
      }
      if (r_cat != last_cat) {
        last_cat = r_cat;
        last_cat_idx = s.cats.Index(r_cat);
      }
      s.name_idx[i] = last_name_idx;
      s.cat_idx[i] = last_cat_idx;
    }
    s.order.resize(n);
    if (!OrderByTrack(rows, n, &s.track_runs, s.order.data())) {
      s.keys.resize(n);
      for (size_t i = 0; i < n; ++i) {
        s.keys[i] = SortKey{rows.track(i), static_cast<uint32_t>(i), rows.k(i)};
      }
      std::sort(s.keys.begin(), s.keys.end(), [](const SortKey& a, const SortKey& b) {
        if (a.track != b.track) return a.track < b.track;
        return a.k != b.k ? a.k < b.k : a.idx < b.idx;
      });
      for (size_t j = 0; j < n; ++j) s.order[j] = s.keys[j].idx;
    }
    o = RowPassOut();
    RowPass<true>(rows, s.order.data(), n, s, zone, &o, base, s.permuted_signed);
  }
  const size_t nnames = s.names.list().size(), ncats = s.cats.list().size();
  s.ResetNameInfos();
  const int64_t base = o.base;
  zone->min_ts = base;
  zone->max_end = SaturateInt64(o.last_end);
  zone->max_dur = o.max_dur;
  for (BlockNameInfo& info : zone->names) {
    info.count = std::accumulate(info.hist.begin(), info.hist.end(), uint64_t{0});
  }
  // A time scale divides every delta exactly only while they fit in int64; beyond (hostile or
  // absurd input) scale 1 keeps the wrap-around coding exact. Every ts - base is a difference of
  // two starts, a multiple of ts_gcd, so gcd(ts_gcd, dur_gcd) divides all of them and the durs.
  uint64_t scale = o.last_end - base > INT64_MAX ? 1 : std::gcd(o.ts_gcd, o.dur_gcd);
  if (scale == 0) scale = 1;
  // The ts and dur columns' values: the runs' first deltas against the base, then the scale.
  uint64_t* const tss = s.tss.data();
  uint64_t* const durs = s.durs.data();
  bool ts_signed = o.ts_signed;
  bool stats_exact = true;  // whether o.ts_stats counted the final values
  if (base != o.ts_ref) {
    for (const auto& [j, ts] : s.run_starts) tss[j] = static_cast<uint64_t>(WrapSub(ts, base));
    stats_exact = false;
  }
  if (scale != 1) {
    // (A 64-bit division costs tens of cycles: only for data whose scale is not 1.)
    const auto iscale = static_cast<int64_t>(scale);
    for (size_t j = 0; j < n; ++j) {
      tss[j] = static_cast<uint64_t>(static_cast<int64_t>(tss[j]) / iscale);
      durs[j] /= scale;
    }
    stats_exact = false;
  }
  if (!stats_exact) {
    ts_signed = false;
    for (size_t j = 0; j < n; ++j) ts_signed |= static_cast<int64_t>(tss[j]) < 0;
  }
  if (!in_order) s.permuted_signed = ts_signed;
  // Deltas in start order are rarely negative: a block without any stores them as they are, not
  // zigzagged (which would spend a bit on the sign of each). The pass's statistics stand when
  // they counted the final values in the final coding.
  HuffmanColumnStats& ts_stats = o.ts_stats;
  const bool stats_stand = stats_exact && o.stats_zigzag == ts_signed;
  if (!stats_stand) {
    ts_stats = HuffmanColumnStats();
    for (size_t j = 0; j < n; ++j) {
      if (ts_signed) tss[j] = ZigZag(static_cast<int64_t>(tss[j]));
      ts_stats.AddLength(tss[j]);
    }
  } else if (ts_signed) {
    for (size_t j = 0; j < n; ++j) tss[j] = ZigZag(static_cast<int64_t>(tss[j]));
  }
  // The frequent values' votes from a sample of the final values, as for the durations (a
  // vote per row in the passes was a chain of stores to its slot, about 2% of compaction).
  ts_stats.VoteSample(tss, n);
  ByteBuf& tracks = s.tracks;
  tracks.Clear();
  tracks.Reserve(10 + s.run_col.size());
  tracks.PutVarint(o.runs);
  tracks.PutBytes(s.run_col.data(), s.run_col.size());

  std::string& raw = s.raw;
  raw.clear();
  raw.push_back(static_cast<char>(kBlockFormat));
  PutVarint64(&raw, n);
  PutVarsigned(&raw, base);
  PutVarint64(&raw, scale);
  PutVarint64(&raw, nnames);
  for (uint32_t id : s.names.list()) PutVarint64(&raw, id);
  PutVarint64(&raw, ncats);
  for (uint32_t id : s.cats.list()) PutVarint64(&raw, id);
  std::string& tsc = s.tsc;
  std::string& durc = s.durc;
  tsc.clear();
  durc.clear();
  tsc.push_back(static_cast<char>(ts_signed));
  PutHuffmanBitLengthColumn(tss, n, ts_stats, &tsc);
  HuffmanColumnStats dur_stats;
  DurationsToResiduals(durs, o.depth, o.track, n, &dur_stats);
  dur_stats.VoteSample(durs, n);
  PutHuffmanBitLengthColumn(durs, n, dur_stats, &durc);
  PutColumn(tracks, &raw);
  PutColumn(std::string_view(s.ks.data(), o.ks), &raw);
  PutColumn(std::string_view(s.parents.data(), o.parents), &raw);
  PutColumn(std::string_view(s.depths.data(), o.depths), &raw);
  PutColumn(std::string_view(s.kinds.data(), o.kinds), &raw);
  PutNameColumn(std::string_view(s.namec.data(), o.namec), n, nnames, s, &raw);
  PutColumn(std::string_view(s.catc.data(), o.catc), &raw);
  // The ts and dur columns go in the container's stored section (PackBlock, codec 2), out of
  // LZ4's way, when they look like what the entropy coder makes of random values; one that LZ4
  // can shrink (a periodic column's bits) stays with the rest. The payload is `raw` with the
  // section at `stored_at`.
  const bool ts_stored = LooksIncompressible(tsc), dur_stored = LooksIncompressible(durc);
  std::string& stored = s.stored;
  stored.clear();
  PutColumn(tsc, ts_stored ? &stored : &raw);
  const size_t stored_at = raw.size();  // after the ts column when it stays in raw
  PutColumn(durc, dur_stored ? &stored : &raw);
  PutColumn(std::string_view(s.masks.data(), o.masks), &raw);
  for (const ByteBuf* c : {&s.args, &s.values, &s.json}) PutColumn(*c, &raw);
  PackBlock(raw, stored_at, stored, out);
}

}  // namespace

void EncodeBlock(const Row* rows, size_t n, std::string* out, BlockZone* zone) {
  EncodeRows(RowSource(rows), n, nullptr, out, zone);
}

void EncodeBlock(const RowColumns& cols, std::string* out, BlockZone* zone) {
  EncodeRows(ColumnSource(cols), cols.n, cols.special == 0 ? &cols : nullptr, out, zone);
}

// ---- RowColumns ----

void RowColumns::Reserve(size_t rows) {
  if (rows <= capacity()) return;
  // New arrays left uninitialized (DefaultInitAllocator) with the n rows written so far copied
  // in: rows past n are never read, so they are neither zero-filled nor copied.
  auto grow = [this, rows](auto* col) {
    std::remove_reference_t<decltype(*col)> bigger(rows);
    std::copy(col->begin(), col->begin() + static_cast<ptrdiff_t>(std::min(n, col->size())),
              bigger.begin());
    col->swap(bigger);
  };
  grow(&ts);
  grow(&dur);
  grow(&track);
  grow(&name);
  grow(&cat);
  grow(&depth);
  grow(&k);
  grow(&parent_k);
  grow(&kind);
  grow(&mask);
  grow(&extra);
}

RowColumns::Extra& RowColumns::NewExtra(size_t row) {
  if (nextras == extras.size()) extras.emplace_back();
  Extra& e = extras[nextras++];
  e.args = EventArgs();
  e.value = 0;
  e.json.clear();
  extra[row] = static_cast<uint32_t>(nextras);
  return e;
}

void RowColumns::Append(const Row& r) {
  const size_t i = n++;
  ts[i] = r.ts;
  dur[i] = r.dur;
  track[i] = r.track;
  name[i] = r.name;
  cat[i] = r.cat;
  k[i] = r.k;
  depth[i] = r.depth;
  parent_k[i] = r.parent_k;
  kind[i] = static_cast<uint8_t>(r.kind);
  const uint32_t m = (r.args.mask & EventArgs::kAllFields) |
                     (r.json.empty() ? 0 : DecodedBlock::kHasJson) |
                     (r.open ? DecodedBlock::kOpen : 0);
  mask[i] = m;
  extra[i] = 0;
  if (m != 0 || r.kind != RowKind::kSpan) ++special;
  if ((m & (EventArgs::kAllFields | DecodedBlock::kHasJson)) != 0 || r.kind == RowKind::kCounter) {
    Extra& e = NewExtra(i);
    e.args = r.args;
    e.value = r.value;
    e.json = r.json;
  }
}

Row RowColumns::RowAt(size_t i) const {
  Row r;
  r.ts = ts[i];
  r.dur = dur[i];
  r.track = track[i];
  r.name = name[i];
  r.cat = cat[i];
  r.kind = static_cast<RowKind>(kind[i]);
  r.depth = depth[i];
  r.k = k[i];
  r.parent_k = parent_k[i];
  r.open = (mask[i] & DecodedBlock::kOpen) != 0;
  if (extra[i] != 0) {
    const Extra& e = extras[extra[i] - 1];
    r.args = e.args;
    r.value = e.value;
    r.json = e.json;
  }
  return r;
}

}  // namespace tracedb::engine
