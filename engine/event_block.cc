// Event block codec. See event_block.h; format in docs/database-format.md "Event blocks".
#include "engine/event_block.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <numeric>
#include <unordered_map>

#include "engine/coding.h"
#include "engine/crc32c.h"
#include "engine/lz4_codec.h"

namespace tracedb::engine {
namespace {

// 1: every integer column in varints. 2 (current): the dur column in bit-length coding
// (docs/database-format.md "Event blocks"); the other columns as in 1. Both are read.
constexpr uint8_t kBlockFormat = 2;
constexpr uint8_t kBlockFormatVarint = 1;
constexpr uint8_t kCodecRaw = 0;
constexpr uint8_t kCodecLz4 = 1;
constexpr size_t kMaxRows = 65536;

Status Bad(int64_t block, const std::string& what) {
  return Status::Corruption("event block " + std::to_string(block) + ": " + what);
}

}  // namespace

const char* RowKindName(RowKind k) {
  switch (k) {
    case RowKind::kSpan:
      return "span";
    case RowKind::kInstant:
      return "instant";
    case RowKind::kCounter:
      return "counter";
    case RowKind::kFlow:
      return "flow";
  }
  return "span";
}

int DurationBucket(int64_t dur) {
  return dur <= 1 ? 0 : 63 - std::countl_zero(static_cast<uint64_t>(dur));
}

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
  uint32_t Index(uint32_t id) {
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
  const std::vector<uint32_t>& list() const { return list_; }

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

// Bit-length coding of unsigned values (block format 2's dur column): a byte `lmin` (the
// smallest bit length), a byte `w` (the width of a length field), then per value its bit length
// minus lmin in w bits followed by the value's bits under its leading one (none for 0 and 1),
// in one LSB-first bit stream padded with zeros to a byte. Log-uniform values such as durations
// take a few bits less than in varints, and no value is wider than its own length.
void PutBitLengthColumn(const std::vector<uint64_t>& v, std::string* dst) {
  int lmin = 64, lmax = 0;
  for (uint64_t x : v) {
    const int l = BitLength(x);
    lmin = std::min(lmin, l);
    lmax = std::max(lmax, l);
  }
  const int w = BitLength(static_cast<uint64_t>(lmax - lmin));
  dst->push_back(static_cast<char>(lmin));
  dst->push_back(static_cast<char>(w));
  BitWriter bits(dst);
  for (uint64_t x : v) {
    const int l = BitLength(x);
    bits.Put(static_cast<uint64_t>(l - lmin), w);
    if (l >= 2) bits.Put(x & (~0ull >> (65 - l)), l - 1);
  }
  bits.Finish();
}

// Reads PutBitLengthColumn's n values; false on a malformed or over-long column.
bool GetBitLengthColumn(std::string_view col, size_t n, uint64_t* out) {
  if (col.size() < 2) return false;
  const int lmin = static_cast<unsigned char>(col[0]);
  const int w = static_cast<unsigned char>(col[1]);
  if (lmin > 64 || w > 7) return false;
  BitReader bits(col.substr(2));
  for (size_t i = 0; i < n; ++i) {
    uint64_t dl, m;
    if (!bits.Get(w, &dl) || dl > static_cast<uint64_t>(64 - lmin)) return false;
    const int l = lmin + static_cast<int>(dl);
    if (l <= 1) {
      out[i] = static_cast<uint64_t>(l);
      continue;
    }
    if (!bits.Get(l - 1, &m)) return false;
    out[i] = (1ull << (l - 1)) | m;
  }
  return bits.at_end();
}

// The time a row's ts is coded against (docs/database-format.md "Event blocks"): the block's
// base for the first row of a track run, the previous row's start for a first child (deeper
// than the previous row), else the previous row's end (a sibling or what follows it). Rows in
// (track, k) order are in start order, so most deltas are the small gaps between phases.
inline int64_t TsReference(bool run_start, int64_t base, int64_t prev_ts, int64_t prev_end,
                           uint32_t depth, uint32_t prev_depth) {
  if (run_start) return base;
  return depth > prev_depth ? prev_ts : prev_end;
}

}  // namespace

void EncodeBlock(const Row* rows, size_t n, std::string* out, BlockZone* zone) {
  // One pass over the rows for everything the columns need first: whether they are in (track,
  // k) order, the zone map, the time base and scale, and the dense name and category indexes.
  // (Rows are large and a block of them does not fit in a core's cache: each pass is a trip to
  // memory.)
  *zone = BlockZone();
  zone->count = n;
  zone->min_ts = INT64_MAX;
  zone->max_end = INT64_MIN;
  thread_local DenseIds names, cats;
  names.Reset();
  cats.Reset();
  thread_local std::vector<uint32_t> name_idx, cat_idx;
  name_idx.resize(n);
  cat_idx.resize(n);
  bool sorted = true;
  int64_t base = INT64_MAX;
  __int128 last_end = INT64_MIN;
  // gcd of the differences between the starts, and of the durations (0 while all are 0).
  uint64_t ts_gcd = 0, dur_gcd = 0;
  const int64_t ts0 = rows[0].ts;
  uint32_t last_name = rows[0].name, last_name_idx = names.Index(last_name);
  uint32_t last_cat = rows[0].cat, last_cat_idx = cats.Index(last_cat);
  for (size_t i = 0; i < n; ++i) {
    const Row& r = rows[i];
    if (i > 0 &&
        (r.track < rows[i - 1].track || (r.track == rows[i - 1].track && r.k < rows[i - 1].k))) {
      sorted = false;
    }
    base = std::min(base, r.ts);
    last_end = std::max(last_end, static_cast<__int128>(r.ts) + r.dur);
    zone->max_end = std::max(zone->max_end, r.end());
    zone->max_dur = std::max(zone->max_dur, r.dur);
    // (Once a gcd is 1 it stays 1: skip the division.)
    if (ts_gcd != 1) {
      const uint64_t d = r.ts >= ts0 ? static_cast<uint64_t>(r.ts) - static_cast<uint64_t>(ts0)
                                     : static_cast<uint64_t>(ts0) - static_cast<uint64_t>(r.ts);
      ts_gcd = std::gcd(ts_gcd, d);
    }
    if (dur_gcd != 1) dur_gcd = std::gcd(dur_gcd, static_cast<uint64_t>(r.dur));
    if (r.name != last_name) {
      last_name = r.name;
      last_name_idx = names.Index(r.name);
    }
    if (r.cat != last_cat) {
      last_cat = r.cat;
      last_cat_idx = cats.Index(r.cat);
    }
    name_idx[i] = last_name_idx;
    cat_idx[i] = last_cat_idx;
  }
  zone->min_ts = base;
  thread_local std::vector<uint32_t> order;
  order.resize(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
  if (!sorted) {
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return rows[a].track != rows[b].track ? rows[a].track < rows[b].track : rows[a].k < rows[b].k;
    });
  }
  // A time scale divides every delta exactly only while they fit in int64; beyond (hostile or
  // absurd input) scale 1 keeps the wrap-around coding exact. Every ts - base is a difference of
  // two starts, a multiple of ts_gcd, so gcd(ts_gcd, dur_gcd) divides all of them and the durs.
  uint64_t scale = last_end - base > INT64_MAX ? 1 : std::gcd(ts_gcd, dur_gcd);
  if (scale == 0) scale = 1;
  // Per (name, cat, kind) statistics, in a table indexed by the dense indexes.
  const size_t nnames = names.list().size(), ncats = cats.list().size();
  // Dense while names x categories stays near the row count; a block of thousands of distinct
  // names in thousands of categories (an import) would need a table of gigabytes: a hash map then.
  const size_t combos = nnames * ncats * kNumRowKinds;
  const bool dense_info = combos <= std::max<size_t>(size_t{1} << 16, 16 * n);
  thread_local std::vector<int32_t> info_at;
  thread_local std::unordered_map<size_t, int32_t> info_map;
  if (dense_info) {
    info_at.assign(combos, -1);
  } else {
    info_map.clear();
  }
  thread_local ByteBuf tracks, ks, parents, depths, kinds, namec, catc, tsc, masks, args, values,
      json;
  for (ByteBuf* b : {&tracks, &ks, &parents, &depths, &kinds, &namec, &catc, &tsc, &masks, &args,
                     &values, &json}) {
    b->Clear();
  }
  for (ByteBuf* b : {&ks, &parents, &tsc}) b->Reserve(n * 10);
  thread_local std::vector<uint64_t> durs;
  durs.resize(n);
  for (ByteBuf* b : {&depths, &namec, &catc, &masks}) b->Reserve(n * 5);
  kinds.Reserve(n);
  const auto iscale = static_cast<int64_t>(scale);
  uint64_t runs = 0;
  thread_local ByteBuf run_col;
  run_col.Clear();
  uint32_t run_track = rows[order[0]].track;
  uint64_t run_len = 0, prev_k = 0;
  int64_t prev_ts = base, prev_end = base;
  uint32_t prev_depth = 0;
  for (size_t j = 0; j < n; ++j) {
    const uint32_t i = order[j];
    const Row& r = rows[i];
    {
      const size_t key =
          (name_idx[i] * ncats + cat_idx[i]) * kNumRowKinds + static_cast<size_t>(r.kind);
      int32_t& at = dense_info ? info_at[key] : info_map.try_emplace(key, -1).first->second;
      if (at < 0) {
        at = static_cast<int32_t>(zone->names.size());
        BlockNameInfo& info = zone->names.emplace_back();
        info.name = r.name;
        info.cat = r.cat;
        info.kind = r.kind;
        info.min_dur = r.dur;
        info.max_dur = r.dur;
      }
      BlockNameInfo& info = zone->names[static_cast<size_t>(at)];
      info.count++;
      info.total_dur = SaturatingAdd(info.total_dur, r.dur);  // sums saturate, never overflow
      info.min_dur = std::min(info.min_dur, r.dur);
      info.max_dur = std::max(info.max_dur, r.dur);
      info.hist[static_cast<size_t>(DurationBucket(r.dur))]++;
    }
    const bool run_start = j == 0 || r.track != run_track;
    if (run_start) {
      if (j != 0) {
        run_col.Reserve(20);
        run_col.PutVarint(run_track);
        run_col.PutVarint(run_len);
        ++runs;
      }
      run_track = r.track;
      run_len = 0;
      prev_k = 0;
    }
    ++run_len;
    ks.PutVarint(ZigZag(static_cast<int64_t>(r.k - prev_k)));
    prev_k = r.k;
    // parent_k as k + 2 - parent_k (0: none), in wrap-around arithmetic like its decoder.
    parents.PutVarint(ZigZag(r.parent_k == 0 ? 0 : static_cast<int64_t>(r.k + 2 - r.parent_k)));
    depths.PutVarint(r.depth);
    kinds.PutU8(static_cast<uint8_t>(r.kind));
    namec.PutVarint(name_idx[i]);
    catc.PutVarint(cat_idx[i]);
    const int64_t ref = TsReference(run_start, base, prev_ts, prev_end, r.depth, prev_depth);
    // (A 64-bit division costs tens of cycles: skip it for ns data, whose scale is 1.)
    tsc.PutVarint(ZigZag(scale == 1 ? WrapSub(r.ts, ref) : WrapSub(r.ts, ref) / iscale));
    durs[j] = scale == 1 ? static_cast<uint64_t>(r.dur) : static_cast<uint64_t>(r.dur) / scale;
    prev_ts = r.ts;
    prev_end = WrapAdd(r.ts, r.dur);
    prev_depth = r.depth;
    const uint32_t mask =
        (r.args.mask & EventArgs::kAllFields) | (r.json.empty() ? 0 : DecodedBlock::kHasJson);
    masks.PutVarint(mask);
    if (mask != 0) {
      args.Reserve(60);
      if (mask & EventArgs::kBytes) args.PutVarint(r.args.bytes);
      if (mask & EventArgs::kPeer) args.PutVarint(ZigZag(r.args.peer));
      if (mask & EventArgs::kTag) args.PutVarint(ZigZag(r.args.tag));
      if (mask & EventArgs::kComm) args.PutVarint(r.args.comm);
      if (mask & EventArgs::kSeq) args.PutVarint(r.args.seq);
      if (mask & EventArgs::kFlow) args.PutVarint(r.args.flow);
      if (!r.json.empty()) {
        json.Reserve(10 + r.json.size());
        json.PutVarint(r.json.size());
        json.PutBytes(r.json.data(), r.json.size());
      }
    }
    if (r.kind == RowKind::kCounter) {
      uint64_t bits;
      std::memcpy(&bits, &r.value, 8);
      values.Reserve(8);
      values.PutFixed64(bits);
    }
  }
  run_col.Reserve(20);
  run_col.PutVarint(run_track);
  run_col.PutVarint(run_len);
  ++runs;
  tracks.Reserve(10 + run_col.size());
  tracks.PutVarint(runs);
  tracks.PutBytes(run_col.data(), run_col.size());

  thread_local std::string raw;
  raw.clear();
  raw.push_back(static_cast<char>(kBlockFormat));
  PutVarint64(&raw, n);
  PutVarsigned(&raw, base);
  PutVarint64(&raw, scale);
  PutVarint64(&raw, nnames);
  for (uint32_t id : names.list()) PutVarint64(&raw, id);
  PutVarint64(&raw, ncats);
  for (uint32_t id : cats.list()) PutVarint64(&raw, id);
  thread_local std::string durc;
  durc.clear();
  PutBitLengthColumn(durs, &durc);
  for (const ByteBuf* c : {&tracks, &ks, &parents, &depths, &kinds, &namec, &catc, &tsc}) {
    PutColumn(*c, &raw);
  }
  PutColumn(durc, &raw);
  for (const ByteBuf* c : {&masks, &args, &values, &json}) PutColumn(*c, &raw);

  out->clear();
  thread_local std::string compressed;
  compressed.clear();
  // A failed compression stores the block raw, never an empty LZ4 payload.
  const bool use_lz4 = Lz4Compress(raw, &compressed).ok() && compressed.size() < raw.size();
  out->push_back(static_cast<char>(use_lz4 ? kCodecLz4 : kCodecRaw));
  PutVarint64(out, raw.size());
  PutFixed32(out, Crc32c(raw.data(), raw.size()));
  out->append(use_lz4 ? compressed : raw);
}

size_t DecodedBlock::CapacityBytes() const {
  auto cap = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  return storage_.capacity() + cap(ts) + cap(dur) + cap(track) + cap(name) + cap(cat) + cap(depth) +
         cap(kind) + cap(k) + cap(parent_k) + cap(arg_mask) + cap(bytes) + cap(seq) + cap(flow) +
         cap(peer) + cap(tag) + cap(comm) + cap(value) + cap(json) + cap(names_) + cap(cats_);
}

Row DecodedBlock::RowAt(size_t i) const {
  Row r;
  r.track = track[i];
  if (has(kColTs)) r.ts = ts[i];
  if (has(kColDur)) r.dur = dur[i];
  if (has(kColName)) r.name = name[i];
  if (has(kColCat)) r.cat = cat[i];
  if (has(kColKind)) r.kind = static_cast<RowKind>(kind[i]);
  if (has(kColDepth)) r.depth = depth[i];
  if (has(kColK)) r.k = k[i];
  if (has(kColParent)) r.parent_k = parent_k[i];
  if (has(kColArgs)) {
    r.args.mask = arg_mask[i] & EventArgs::kAllFields;
    r.args.bytes = bytes[i];
    r.args.peer = peer[i];
    r.args.tag = tag[i];
    r.args.comm = comm[i];
    r.args.seq = seq[i];
    r.args.flow = flow[i];
    r.json = std::string(json[i]);
  }
  if (has(kColValue)) r.value = value[i];
  return r;
}

Status DecodeBlock(std::string_view data, int64_t block, DecodedBlock* out, uint32_t want) {
  out->decoded_ = 0;
  out->block_ = block;
  Reader hdr(data);
  uint8_t codec;
  uint64_t raw_size;
  uint32_t crc;
  if (!hdr.GetU8(&codec) || !hdr.GetVarint64(&raw_size) || !hdr.GetFixed32(&crc)) {
    return Bad(block, "truncated header");
  }
  if (codec == kCodecLz4) {
    Status s =
        Lz4Decompress(std::string_view(hdr.data(), hdr.remaining()), raw_size, &out->storage_);
    if (!s.ok()) return Bad(block, s.message());
  } else if (codec == kCodecRaw) {
    if (hdr.remaining() != raw_size) return Bad(block, "raw size mismatch");
    out->storage_.assign(hdr.data(), hdr.remaining());
  } else {
    return Bad(block, "unknown codec");
  }
  if (Crc32c(out->storage_.data(), out->storage_.size()) != crc) return Bad(block, "bad CRC");

  Reader r(out->storage_);
  uint8_t format;
  uint64_t n, scale, nnames, ncats;
  int64_t base;
  if (!r.GetU8(&format) || (format != kBlockFormat && format != kBlockFormatVarint)) {
    return Bad(block, "unknown block format");
  }
  out->format_ = format;
  if (!r.GetVarint64(&n) || n > kMaxRows || !r.GetVarsigned(&base) || !r.GetVarint64(&scale) ||
      scale == 0 || scale > static_cast<uint64_t>(INT64_MAX) || !r.GetVarint64(&nnames) ||
      nnames > n) {
    return Bad(block, "bad header");
  }
  out->names_.resize(nnames);
  for (uint32_t& id : out->names_) {
    if (!r.GetVarint32(&id)) return Bad(block, "bad name dictionary");
  }
  if (!r.GetVarint64(&ncats) || ncats > n) return Bad(block, "bad category dictionary");
  out->cats_.resize(ncats);
  for (uint32_t& id : out->cats_) {
    if (!r.GetVarint32(&id)) return Bad(block, "bad category dictionary");
  }
  for (std::string_view& c : out->cols_) {
    if (!r.GetLengthPrefixed(&c)) return Bad(block, "truncated column");
  }
  out->n = n;
  out->base_ = base;
  out->scale_ = scale;
  // Track runs: always decoded (every other column depends on the row order they give).
  Reader tracks(out->cols_[0]);
  out->track.resize(n);
  uint64_t runs;
  if (!tracks.GetVarint64(&runs) || runs > n) return Bad(block, "bad track runs");
  size_t row = 0;
  for (uint64_t i = 0; i < runs; ++i) {
    uint32_t t;
    uint64_t len;
    if (!tracks.GetVarint32(&t) || !tracks.GetVarint64(&len) || len > n - row) {
      return Bad(block, "bad track run");
    }
    for (uint64_t j = 0; j < len; ++j) out->track[row++] = t;
  }
  if (row != n) return Bad(block, "track runs do not cover the rows");
  out->decoded_ = kColTrack;
  return out->Need(want);
}

Status DecodedBlock::Need(uint32_t want) {
  if (want & kColParent) want |= kColK;
  if (want & kColTs) want |= kColDepth | kColDur;
  if (want & kColValue) want |= kColKind;
  want &= ~decoded_;
  if (want == 0) return Status::Ok();
  const int64_t block = block_;
  auto bad = [&](const char* column) {
    return Bad(block, std::string("bad ") + column + " column");
  };
  if (want & kColDepth) {
    Reader c(cols_[3]);
    depth.resize(n);
    for (size_t i = 0; i < n; ++i) {
      uint64_t d;
      if (!c.GetVarint64(&d) || d > UINT32_MAX) return bad("depth");
      depth[i] = static_cast<uint32_t>(d);
    }
    if (!c.empty()) return bad("depth");
  }
  if (want & kColKind) {
    if (cols_[4].size() != n) return bad("kind");
    kind.assign(cols_[4].begin(), cols_[4].end());
    for (uint8_t x : kind) {
      if (x >= kNumRowKinds) return bad("kind");
    }
  }
  if (want & kColName) {
    Reader c(cols_[5]);
    name.resize(n);
    for (size_t i = 0; i < n; ++i) {
      uint64_t x;
      if (!c.GetVarint64(&x) || x >= names_.size()) return bad("name");
      name[i] = names_[x];
    }
    if (!c.empty()) return bad("name");
  }
  if (want & kColCat) {
    Reader c(cols_[6]);
    cat.resize(n);
    for (size_t i = 0; i < n; ++i) {
      uint64_t x;
      if (!c.GetVarint64(&x) || x >= cats_.size()) return bad("cat");
      cat[i] = cats_[x];
    }
    if (!c.empty()) return bad("cat");
  }
  if (want & kColDur) {
    dur.resize(n);
    const uint64_t max = static_cast<uint64_t>(INT64_MAX) / scale_;
    if (format_ == kBlockFormatVarint) {
      Reader c(cols_[8]);
      for (size_t i = 0; i < n; ++i) {
        uint64_t x;
        if (!c.GetVarint64(&x) || x > max) return bad("dur");
        dur[i] = static_cast<int64_t>(x * scale_);
      }
      if (!c.empty()) return bad("dur");
    } else {
      // Decoded in place: int64 and uint64 have the same size and representation.
      auto* u = reinterpret_cast<uint64_t*>(dur.data());
      if (!GetBitLengthColumn(cols_[8], n, u)) return bad("dur");
      for (size_t i = 0; i < n; ++i) {
        if (u[i] > max) return bad("dur");
        dur[i] = static_cast<int64_t>(u[i] * scale_);
      }
    }
  }
  if (want & kColTs) {
    Reader c(cols_[7]);
    ts.resize(n);
    const auto iscale = static_cast<int64_t>(scale_);
    int64_t prev_ts = base_, prev_end = base_;
    uint32_t prev_depth = 0;
    for (size_t i = 0; i < n; ++i) {
      int64_t d;
      if (!c.GetVarsigned(&d)) return bad("ts");
      const bool run_start = i == 0 || track[i] != track[i - 1];
      const int64_t ref = TsReference(run_start, base_, prev_ts, prev_end, depth[i], prev_depth);
      // Wrap-around, as the encoder: a hostile delta gives a wrong ts, never overflow.
      ts[i] = WrapAdd(ref, WrapMul(d, iscale));
      prev_ts = ts[i];
      prev_end = WrapAdd(ts[i], dur[i]);
      prev_depth = depth[i];
    }
    if (!c.empty()) return bad("ts");
  }
  if (want & kColK) {
    Reader c(cols_[1]);
    k.resize(n);
    uint64_t prev = 0;
    for (size_t i = 0; i < n; ++i) {
      int64_t d;
      if (!c.GetVarsigned(&d)) return bad("k");
      if (i == 0 || track[i] != track[i - 1]) prev = 0;
      k[i] = prev + static_cast<uint64_t>(d);
      prev = k[i];
    }
    if (!c.empty()) return bad("k");
  }
  if (want & kColParent) {
    Reader c(cols_[2]);
    parent_k.resize(n);
    for (size_t i = 0; i < n; ++i) {
      int64_t rel;
      if (!c.GetVarsigned(&rel)) return bad("parent");
      parent_k[i] = rel == 0 ? 0 : k[i] + 2 - static_cast<uint64_t>(rel);
    }
    if (!c.empty()) return bad("parent");
  }
  if (want & kColArgs) {
    Reader masks(cols_[9]), args(cols_[10]), js(cols_[12]);
    arg_mask.resize(n);
    bytes.assign(n, 0);
    seq.assign(n, 0);
    flow.assign(n, 0);
    peer.assign(n, 0);
    tag.assign(n, 0);
    comm.assign(n, 0);
    json.assign(n, std::string_view());
    for (size_t i = 0; i < n; ++i) {
      uint64_t mask;
      if (!masks.GetVarint64(&mask) ||
          (mask & ~static_cast<uint64_t>(EventArgs::kAllFields | kHasJson))) {
        return bad("argument mask");
      }
      arg_mask[i] = static_cast<uint32_t>(mask);
      if (mask == 0) continue;
      int64_t v;
      if ((mask & EventArgs::kBytes) && !args.GetVarint64(&bytes[i])) return bad("args");
      if (mask & EventArgs::kPeer) {
        if (!args.GetVarsigned(&v) || v < INT32_MIN || v > INT32_MAX) return bad("args");
        peer[i] = static_cast<int32_t>(v);
      }
      if (mask & EventArgs::kTag) {
        if (!args.GetVarsigned(&v) || v < INT32_MIN || v > INT32_MAX) return bad("args");
        tag[i] = static_cast<int32_t>(v);
      }
      if ((mask & EventArgs::kComm) && !args.GetVarint32(&comm[i])) return bad("args");
      if ((mask & EventArgs::kSeq) && !args.GetVarint64(&seq[i])) return bad("args");
      if ((mask & EventArgs::kFlow) && !args.GetVarint64(&flow[i])) return bad("args");
      if ((mask & kHasJson) && !js.GetLengthPrefixed(&json[i])) return bad("JSON");
    }
    if (!masks.empty() || !args.empty() || !js.empty()) return bad("args");
  }
  if (want & kColValue) {
    Reader c(cols_[11]);
    value.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
      if (kind[i] != static_cast<uint8_t>(RowKind::kCounter)) continue;
      uint64_t bits;
      if (!c.GetFixed64(&bits)) return bad("value");
      std::memcpy(&value[i], &bits, 8);
    }
    if (!c.empty()) return bad("value");
  }
  decoded_ |= want;
  return Status::Ok();
}

}  // namespace tracedb::engine
