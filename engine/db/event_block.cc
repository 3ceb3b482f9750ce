// Event block decoder (and the row kinds' names). See event_block.h; the encoder is
// event_block_encode.cc; format in docs/database-format.md "Event blocks".
#include "engine/db/event_block.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <numeric>
#include <unordered_map>

#include "engine/db/event_block_internal.h"
#include "engine/util/coding.h"
#include "engine/util/crc32c.h"
#include "engine/util/hash.h"
#include "engine/util/lz4_codec.h"

namespace tracedb::engine {

using namespace block_internal;  // NOLINT(google-build-using-namespace): this file's own parts

namespace {

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

int DurationBucket(int64_t dur) { return DurationBucketInline(dur); }

namespace {

// Bit-length coding of unsigned values (block format 2's dur column; no longer written): a byte
// `lmin` (the smallest bit length), a byte `w` (the width of a length field), then per value its
// bit length minus lmin in w bits followed by the value's bits under its leading one (none for 0
// and 1), in one LSB-first bit stream padded with zeros to a byte.
// Reads a format 2 dur column of n values; false on a malformed or over-long column.
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

// Whether `col` holds n varints in exactly n bytes: then each is a single byte, the usual shape
// of the depth column and of the name and category indexes, and it is copied into `out` without
// the varint loop. *max gets the largest byte; one of 0x80 or more means the column is
// malformed (a varint's first byte with more to follow), which the caller rejects.
bool OneByteVarints(std::string_view col, size_t n, uint32_t* out, uint32_t* max) {
  if (col.size() != n) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(col.data());
  uint32_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    out[i] = p[i];
    m = std::max<uint32_t>(m, p[i]);
  }
  *max = m;
  return true;
}

// Format 3's ts column, in place: the decoded deltas (zigzagged when kSigned) replaced by the
// times they give against TsReference. One pass through locals, without a branch per row (the
// references are selected), which the general loop of DecodedBlock::Need keeps for formats 1
// and 2.
template <bool kSigned>
void DeltasToTimes(int64_t* ts, const int64_t* dur, const uint32_t* track, const uint32_t* depth,
                   size_t n, int64_t base, int64_t scale) {
  int64_t prev_ts = base, prev_end = base;
  uint32_t prev_depth = 0, prev_track = n > 0 ? ~track[0] : 0;  // row 0 starts a run
  for (size_t i = 0; i < n; ++i) {
    const auto x = static_cast<uint64_t>(ts[i]);
    const int64_t d = kSigned ? UnZigZag(x) : static_cast<int64_t>(x);
    const uint32_t t = track[i], dp = depth[i];
    const int64_t ref = TsReference(t != prev_track, base, prev_ts, prev_end, dp, prev_depth);
    // Wrap-around, as the encoder: a hostile delta gives a wrong ts, never overflow.
    const int64_t v = WrapAdd(ref, WrapMul(d, scale));
    ts[i] = v;
    prev_ts = v;
    prev_end = WrapAdd(v, dur[i]);
    prev_depth = dp;
    prev_track = t;
  }
}

}  // namespace

size_t DecodedBlock::CapacityBytes() const {
  auto cap = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  return storage_.capacity() + cap(ts) + cap(dur) + cap(track) + cap(name) + cap(cat) + cap(depth) +
         cap(kind) + cap(k) + cap(parent_k) + cap(arg_mask) + cap(bytes) + cap(seq) + cap(flow) +
         cap(peer) + cap(tag) + cap(comm) + cap(value) + cap(json) + cap(names_) + cap(cats_) +
         cap(name_codes_);
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
    r.open = (arg_mask[i] & kOpen) != 0;
  }
  if (has(kColValue)) r.value = value[i];
  return r;
}

Status UnpackBlock(std::string_view data, std::string* raw, BlockContainer* info) {
  Reader hdr(data);
  uint8_t codec;
  uint64_t raw_size;
  uint32_t crc;
  if (!hdr.GetU8(&codec) || !hdr.GetVarint64(&raw_size) || !hdr.GetFixed32(&crc)) {
    return Status::Corruption("truncated header");
  }
  uint64_t at = 0, len = 0;
  if (codec == kBlockCodecLz4Stored) {
    if (!hdr.GetVarint64(&at) || !hdr.GetVarint64(&len)) {
      return Status::Corruption("truncated header");
    }
    if (raw_size > kMaxRawBlockBytes) {
      return Status::Corruption("declared uncompressed size " + std::to_string(raw_size) +
                                " exceeds the limit");
    }
    if (at > raw_size || len > raw_size - at || len > hdr.remaining()) {
      return Status::Corruption("bad stored section");
    }
  }
  const std::string_view stored(hdr.data(), hdr.remaining());
  if (codec == kBlockCodecLz4) {
    TRACEDB_RETURN_IF_ERROR(Lz4Decompress(stored, raw_size, raw));
  } else if (codec == kBlockCodecLz4Stored) {
    // The LZ4 part expands to the payload without the section, which then goes in at `at`:
    // what follows it in the payload (a few small columns) moves up by its size.
    raw->resize(raw_size);
    char* const out = raw->data();
    TRACEDB_RETURN_IF_ERROR(
        Lz4DecompressTo(stored.substr(0, stored.size() - len), raw_size - len, out));
    std::memmove(out + at + len, out + at, raw_size - len - at);
    std::memcpy(out + at, stored.data() + stored.size() - len, len);
  } else if (codec == kBlockCodecRaw) {
    if (stored.size() != raw_size) return Status::Corruption("raw size mismatch");
    raw->assign(stored);
  } else {
    return Status::Corruption("unknown codec " + std::to_string(codec));
  }
  if (Crc32c(raw->data(), raw->size()) != crc) return Status::Corruption("bad CRC");
  if (info != nullptr) *info = {codec, crc, data.size() - stored.size(), at, len};
  return Status::Ok();
}

void PackBlock(std::string_view lz_part, size_t stored_at, std::string_view stored,
               std::string* out) {
  uint32_t crc = Crc32c(lz_part.data(), stored_at);
  crc = Crc32c(stored.data(), stored.size(), crc);
  crc = Crc32c(lz_part.data() + stored_at, lz_part.size() - stored_at, crc);
  const size_t raw_size = lz_part.size() + stored.size();
  const bool split = !stored.empty();
  out->clear();
  out->push_back(static_cast<char>(split ? kBlockCodecLz4Stored : kBlockCodecLz4));
  PutVarint64(out, raw_size);
  PutFixed32(out, crc);
  if (split) {
    PutVarint64(out, stored_at);
    PutVarint64(out, stored.size());
  }
  // Compressed in place after the header (no copy); a failed compression, or one that saves
  // nothing, stores the payload raw, never an empty LZ4 part.
  const size_t header = out->size();
  if (!Lz4Compress(lz_part, out).ok() || out->size() - header >= lz_part.size()) {
    out->clear();
    out->push_back(static_cast<char>(kBlockCodecRaw));
    PutVarint64(out, raw_size);
    PutFixed32(out, crc);
    out->append(lz_part.substr(0, stored_at));
    out->append(stored);
    out->append(lz_part.substr(stored_at));
    return;
  }
  if (split) out->append(stored);
}

Status DecodeBlock(std::string_view data, int64_t block, DecodedBlock* out, uint32_t want) {
  out->decoded_ = 0;
  out->block_ = block;
  if (Status s = UnpackBlock(data, &out->storage_); !s.ok()) return Bad(block, s.message());

  Reader r(out->storage_);
  uint8_t format;
  uint64_t n, scale, nnames, ncats;
  int64_t base;
  if (!r.GetU8(&format) || (format != kBlockFormat && format != kBlockFormatHuffman &&
                            format != kBlockFormatBitLength && format != kBlockFormatVarint)) {
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
  // Formats 3 and 4 code a parent's duration against its children's: the depths say which.
  if ((want & kColDur) && format_ >= kBlockFormatHuffman) want |= kColDepth;
  if (want & kColValue) want |= kColKind;
  want &= ~decoded_;
  if (want == 0) return Status::Ok();
  const int64_t block = block_;
  auto bad = [&](const char* column) {
    return Bad(block, std::string("bad ") + column + " column");
  };
  uint32_t max_byte;
  bool ts_deltas_decoded = false;  // format 3: ts's column decoded with dur's
  if (want & kColDepth) {
    depth.resize(n);
    if (OneByteVarints(cols_[3], n, depth.data(), &max_byte)) {
      if (max_byte >= 0x80) return bad("depth");
      max_depth_ = max_byte;
    } else {
      Reader c(cols_[3]);
      uint32_t m = 0;
      for (size_t i = 0; i < n; ++i) {
        uint64_t d;
        if (!c.GetVarint64(&d) || d > UINT32_MAX) return bad("depth");
        depth[i] = static_cast<uint32_t>(d);
        m = std::max(m, depth[i]);
      }
      if (!c.empty()) return bad("depth");
      max_depth_ = m;
    }
  }
  if (want & kColKind) {
    if (cols_[4].size() != n) return bad("kind");
    kind.assign(cols_[4].begin(), cols_[4].end());
    for (uint8_t x : kind) {
      if (x >= kNumRowKinds) return bad("kind");
    }
  }
  if (want & kColName) {
    name.resize(n);
    std::string_view col = cols_[5];
    uint8_t coding = kNameVarint;
    if (format_ >= kBlockFormat) {
      // Format 4: the coding byte first.
      if (col.empty()) return bad("name");
      coding = static_cast<uint8_t>(col[0]);
      col.remove_prefix(1);
    }
    if (coding == kNameHuffman) {
      name_codes_.resize(n);
      if (!GetHuffmanBitLengthColumn(col, n, name_codes_.data())) return bad("name");
      const uint64_t nnames = names_.size();
      uint64_t over = 0;  // one check for all rows (no branch per row)
      for (size_t i = 0; i < n; ++i) over |= name_codes_[i] >= nnames;
      if (over != 0) return bad("name");
      for (size_t i = 0; i < n; ++i) name[i] = names_[name_codes_[i]];
    } else if (coding != kNameVarint) {
      return bad("name (unknown coding)");
    } else if (OneByteVarints(col, n, name.data(), &max_byte)) {
      if (max_byte >= 0x80 || max_byte >= names_.size()) return bad("name");
      for (uint32_t& x : name) x = names_[x];
    } else {
      Reader c(col);
      for (size_t i = 0; i < n; ++i) {
        uint64_t x;
        if (!c.GetVarint64(&x) || x >= names_.size()) return bad("name");
        name[i] = names_[x];
      }
      if (!c.empty()) return bad("name");
    }
  }
  if (want & kColCat) {
    cat.resize(n);
    if (OneByteVarints(cols_[6], n, cat.data(), &max_byte)) {
      if (max_byte >= 0x80 || max_byte >= cats_.size()) return bad("cat");
      for (uint32_t& x : cat) x = cats_[x];
    } else {
      Reader c(cols_[6]);
      for (size_t i = 0; i < n; ++i) {
        uint64_t x;
        if (!c.GetVarint64(&x) || x >= cats_.size()) return bad("cat");
        cat[i] = cats_[x];
      }
      if (!c.empty()) return bad("cat");
    }
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
      if (format_ == kBlockFormatBitLength) {
        if (!GetBitLengthColumn(cols_[8], n, u)) return bad("dur");
      } else {
        if (want & kColTs) {
          // ts's deltas too, side by side with dur (the ts pass below takes them from there).
          ts.resize(n);
          if (cols_[7].empty() || static_cast<uint8_t>(cols_[7][0]) > 1) return bad("ts");
          if (!GetHuffmanBitLengthColumns(cols_[8], cols_[7].substr(1), n, u,
                                          reinterpret_cast<uint64_t*>(ts.data()))) {
            return bad("dur or ts");
          }
          ts_deltas_decoded = true;
        } else if (!GetHuffmanBitLengthColumn(cols_[8], n, u)) {
          return bad("dur");
        }
        // (Depth is decoded: Need() asked for it above, and it comes before dur here.) In a
        // block of top-level rows only, no row has children: every value is its duration.
        if (max_depth_ > 0) ResidualsToDurations(u, depth.data(), track.data(), n);
      }
      // Without a branch per row (so that the loop vectorizes): the check is of all of them.
      bool over = false;
      if (scale_ == 1) {
        uint64_t all = 0;  // max is INT64_MAX: a value over it has the top bit
        for (size_t i = 0; i < n; ++i) all |= u[i];
        over = all >> 63 != 0;
      } else {
        for (size_t i = 0; i < n; ++i) {
          over |= u[i] > max;
          u[i] *= scale_;
        }
      }
      if (over) return bad("dur");
    }
  }
  if (want & kColTs) {
    Reader c(cols_[7]);
    ts.resize(n);
    const bool huffman = format_ >= kBlockFormatHuffman;
    bool ts_signed = true;
    if (huffman) {
      // The zigzagged deltas, decoded in place, then replaced by the times they give.
      if (cols_[7].empty() || static_cast<uint8_t>(cols_[7][0]) > 1 ||
          (!ts_deltas_decoded &&
           !GetHuffmanBitLengthColumn(cols_[7].substr(1), n,
                                      reinterpret_cast<uint64_t*>(ts.data())))) {
        return bad("ts");
      }
      ts_signed = cols_[7][0] == 1;
    }
    const auto iscale = static_cast<int64_t>(scale_);
    if (huffman) {
      if (ts_signed) {
        DeltasToTimes<true>(ts.data(), dur.data(), track.data(), depth.data(), n, base_, iscale);
      } else {
        DeltasToTimes<false>(ts.data(), dur.data(), track.data(), depth.data(), n, base_, iscale);
      }
    }
    int64_t prev_ts = base_, prev_end = base_;
    uint32_t prev_depth = 0;
    // Formats 1 and 2: signed varint deltas.
    for (size_t i = 0; i < (huffman ? 0 : n); ++i) {
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
    if (!huffman && !c.empty()) return bad("ts");
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
          (mask & ~static_cast<uint64_t>(EventArgs::kAllFields | kHasJson | kOpen))) {
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
