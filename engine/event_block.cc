// Event block codec. See event_block.h; format in docs/database-format.md "Event blocks".
#include "engine/event_block.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <unordered_map>

#include "engine/coding.h"
#include "engine/crc32c.h"
#include "engine/lz4_codec.h"

namespace tracedb::engine {
namespace {

constexpr uint8_t kBlockFormat = 1;
constexpr uint8_t kCodecRaw = 0;
constexpr uint8_t kCodecLz4 = 1;
constexpr size_t kMaxRows = 65536;

void PutColumn(const std::string& col, std::string* dst) {
  PutVarint64(dst, col.size());
  dst->append(col);
}

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

void EncodeBlock(std::vector<Row>* rows_in, std::string* out, BlockZone* zone) {
  std::vector<Row>& rows = *rows_in;
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.track != b.track ? a.track < b.track : a.k < b.k;
  });
  const size_t n = rows.size();

  // Zone map, dictionaries, time scale.
  *zone = BlockZone();
  zone->count = n;
  zone->min_ts = rows[0].ts;
  zone->max_end = rows[0].end();
  int64_t base = rows[0].ts;
  for (const Row& r : rows) base = std::min(base, r.ts);
  uint64_t scale = 0;
  std::map<std::pair<uint32_t, uint32_t>, BlockNameInfo> names;
  std::unordered_map<uint32_t, uint32_t> name_dict, cat_dict;
  std::vector<uint32_t> name_list, cat_list;
  for (const Row& r : rows) {
    zone->min_ts = std::min(zone->min_ts, r.ts);
    zone->max_end = std::max(zone->max_end, r.end());
    zone->max_dur = std::max(zone->max_dur, r.dur);
    BlockNameInfo& ni = names[{r.name, r.cat}];
    ni.name = r.name;
    ni.cat = r.cat;
    ni.count++;
    ni.max_dur = std::max(ni.max_dur, r.dur);
    scale = std::gcd(scale, static_cast<uint64_t>(r.ts - base));
    scale = std::gcd(scale, static_cast<uint64_t>(r.dur));
    if (name_dict.emplace(r.name, static_cast<uint32_t>(name_list.size())).second) {
      name_list.push_back(r.name);
    }
    if (cat_dict.emplace(r.cat, static_cast<uint32_t>(cat_list.size())).second) {
      cat_list.push_back(r.cat);
    }
  }
  if (scale == 0) scale = 1;
  for (auto& [key, info] : names) zone->names.push_back(info);

  std::string tracks, ks, parents, depths, kinds, namec, catc, tsc, durc, masks, args, values, json;
  kinds.reserve(n);
  uint32_t run_track = rows[0].track;
  uint64_t run_len = 0;
  uint64_t runs = 0;
  std::string run_col;
  uint64_t prev_k = 0;
  int64_t prev_ts = base;
  for (size_t i = 0; i < n; ++i) {
    const Row& r = rows[i];
    if (i == 0 || r.track != run_track) {
      if (i != 0) {
        PutVarint64(&run_col, run_track);
        PutVarint64(&run_col, run_len);
        ++runs;
      }
      run_track = r.track;
      run_len = 0;
      prev_k = 0;
    }
    ++run_len;
    PutVarsigned(&ks, static_cast<int64_t>(r.k - prev_k));
    prev_k = r.k;
    PutVarsigned(&parents, r.parent_k == 0 ? 0 : static_cast<int64_t>(r.k + 1 - r.parent_k) + 1);
    PutVarint64(&depths, r.depth);
    kinds.push_back(static_cast<char>(r.kind));
    PutVarint64(&namec, name_dict[r.name]);
    PutVarint64(&catc, cat_dict[r.cat]);
    PutVarsigned(&tsc, (r.ts - prev_ts) / static_cast<int64_t>(scale));
    prev_ts = r.ts;
    PutVarint64(&durc, static_cast<uint64_t>(r.dur) / scale);
    const uint32_t mask =
        (r.args.mask & EventArgs::kAllFields) | (r.json.empty() ? 0 : DecodedBlock::kHasJson);
    PutVarint64(&masks, mask);
    if (mask & EventArgs::kBytes) PutVarint64(&args, r.args.bytes);
    if (mask & EventArgs::kPeer) PutVarsigned(&args, r.args.peer);
    if (mask & EventArgs::kTag) PutVarsigned(&args, r.args.tag);
    if (mask & EventArgs::kComm) PutVarint64(&args, r.args.comm);
    if (mask & EventArgs::kSeq) PutVarint64(&args, r.args.seq);
    if (mask & EventArgs::kFlow) PutVarint64(&args, r.args.flow);
    if (r.kind == RowKind::kCounter) {
      uint64_t bits;
      std::memcpy(&bits, &r.value, 8);
      PutFixed64(&values, bits);
    }
    if (!r.json.empty()) PutLengthPrefixed(&json, r.json);
  }
  PutVarint64(&run_col, run_track);
  PutVarint64(&run_col, run_len);
  ++runs;
  PutVarint64(&tracks, runs);
  tracks += run_col;

  std::string raw;
  raw.push_back(static_cast<char>(kBlockFormat));
  PutVarint64(&raw, n);
  PutVarsigned(&raw, base);
  PutVarint64(&raw, scale);
  PutVarint64(&raw, name_list.size());
  for (uint32_t id : name_list) PutVarint64(&raw, id);
  PutVarint64(&raw, cat_list.size());
  for (uint32_t id : cat_list) PutVarint64(&raw, id);
  for (const std::string* c : {&tracks, &ks, &parents, &depths, &kinds, &namec, &catc, &tsc, &durc,
                               &masks, &args, &values, &json}) {
    PutColumn(*c, &raw);
  }

  out->clear();
  std::string compressed;
  Lz4Compress(raw, &compressed);
  const bool use_lz4 = compressed.size() < raw.size();
  out->push_back(static_cast<char>(use_lz4 ? kCodecLz4 : kCodecRaw));
  PutVarint64(out, raw.size());
  PutFixed32(out, Crc32c(raw.data(), raw.size()));
  out->append(use_lz4 ? compressed : raw);
}

Row DecodedBlock::RowAt(size_t i) const {
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
  r.args.mask = arg_mask[i] & EventArgs::kAllFields;
  r.args.bytes = bytes[i];
  r.args.peer = peer[i];
  r.args.tag = tag[i];
  r.args.comm = comm[i];
  r.args.seq = seq[i];
  r.args.flow = flow[i];
  r.value = value[i];
  r.json = std::string(json[i]);
  return r;
}

Status DecodeBlock(std::string_view data, int64_t block, DecodedBlock* out) {
  Reader hdr(data);
  uint8_t codec;
  uint64_t raw_size;
  uint32_t crc;
  if (!hdr.GetU8(&codec) || !hdr.GetVarint64(&raw_size) || !hdr.GetFixed32(&crc)) {
    return Bad(block, "truncated header");
  }
  if (codec == kCodecLz4) {
    Status s =
        Lz4Decompress(std::string_view(hdr.data(), hdr.remaining()), raw_size, &out->storage);
    if (!s.ok()) return Bad(block, s.message());
  } else if (codec == kCodecRaw) {
    if (hdr.remaining() != raw_size) return Bad(block, "raw size mismatch");
    out->storage.assign(hdr.data(), hdr.remaining());
  } else {
    return Bad(block, "unknown codec");
  }
  if (Crc32c(out->storage.data(), out->storage.size()) != crc) return Bad(block, "bad CRC");

  Reader r(out->storage);
  uint8_t format;
  uint64_t n, scale, nnames, ncats;
  int64_t base;
  if (!r.GetU8(&format) || format != kBlockFormat) return Bad(block, "unknown block format");
  if (!r.GetVarint64(&n) || n > kMaxRows || !r.GetVarsigned(&base) || !r.GetVarint64(&scale) ||
      scale == 0 || !r.GetVarint64(&nnames) || nnames > n) {
    return Bad(block, "bad header");
  }
  std::vector<uint32_t> names(nnames), cats;
  for (uint32_t& id : names) {
    if (!r.GetVarint32(&id)) return Bad(block, "bad name dictionary");
  }
  if (!r.GetVarint64(&ncats) || ncats > n) return Bad(block, "bad category dictionary");
  cats.resize(ncats);
  for (uint32_t& id : cats) {
    if (!r.GetVarint32(&id)) return Bad(block, "bad category dictionary");
  }
  Reader cols[13];
  for (Reader& c : cols) {
    std::string_view v;
    if (!r.GetLengthPrefixed(&v)) return Bad(block, "truncated column");
    c = Reader(v);
  }
  Reader &tracks = cols[0], &ks = cols[1], &parents = cols[2], &depths = cols[3], &kinds = cols[4],
         &namec = cols[5], &catc = cols[6], &tsc = cols[7], &durc = cols[8], &masks = cols[9],
         &args = cols[10], &values = cols[11], &json = cols[12];
  out->n = n;
  out->ts.resize(n);
  out->dur.resize(n);
  out->track.resize(n);
  out->name.resize(n);
  out->cat.resize(n);
  out->depth.resize(n);
  out->kind.resize(n);
  out->k.resize(n);
  out->parent_k.resize(n);
  out->arg_mask.resize(n);
  out->bytes.assign(n, 0);
  out->seq.assign(n, 0);
  out->flow.assign(n, 0);
  out->peer.assign(n, 0);
  out->tag.assign(n, 0);
  out->comm.assign(n, 0);
  out->value.assign(n, 0);
  out->json.assign(n, std::string_view());

  // Track runs.
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
  if (row != n || kinds.remaining() != n) return Bad(block, "column lengths differ");

  uint64_t prev_k = 0;
  int64_t prev_ts = base;
  const int64_t iscale = static_cast<int64_t>(std::min<uint64_t>(scale, INT64_MAX));
  for (size_t i = 0; i < n; ++i) {
    if (i == 0 || out->track[i] != out->track[i - 1]) prev_k = 0;
    int64_t dk, rel, dts;
    uint64_t d, nidx, cidx, dur, mask;
    uint8_t kind;
    if (!ks.GetVarsigned(&dk) || !parents.GetVarsigned(&rel) || !depths.GetVarint64(&d) ||
        d > UINT32_MAX || !kinds.GetU8(&kind) || kind >= kNumRowKinds ||
        !namec.GetVarint64(&nidx) || nidx >= names.size() || !catc.GetVarint64(&cidx) ||
        cidx >= cats.size() || !tsc.GetVarsigned(&dts) || !durc.GetVarint64(&dur) ||
        !masks.GetVarint64(&mask) ||
        (mask & ~static_cast<uint64_t>(EventArgs::kAllFields | DecodedBlock::kHasJson))) {
      return Bad(block, "bad row " + std::to_string(i));
    }
    out->k[i] = prev_k + static_cast<uint64_t>(dk);
    prev_k = out->k[i];
    out->parent_k[i] = rel == 0 ? 0 : out->k[i] + 1 - static_cast<uint64_t>(rel - 1);
    out->depth[i] = static_cast<uint32_t>(d);
    out->kind[i] = kind;
    out->name[i] = names[nidx];
    out->cat[i] = cats[cidx];
    prev_ts += dts * iscale;
    out->ts[i] = prev_ts;
    out->dur[i] = static_cast<int64_t>(dur * scale);
    out->arg_mask[i] = static_cast<uint32_t>(mask);
    if (mask & EventArgs::kBytes && !args.GetVarint64(&out->bytes[i])) {
      return Bad(block, "truncated args");
    }
    int64_t v;
    if (mask & EventArgs::kPeer) {
      if (!args.GetVarsigned(&v)) return Bad(block, "truncated args");
      out->peer[i] = static_cast<int32_t>(v);
    }
    if (mask & EventArgs::kTag) {
      if (!args.GetVarsigned(&v)) return Bad(block, "truncated args");
      out->tag[i] = static_cast<int32_t>(v);
    }
    if ((mask & EventArgs::kComm) && !args.GetVarint32(&out->comm[i])) {
      return Bad(block, "truncated args");
    }
    if ((mask & EventArgs::kSeq) && !args.GetVarint64(&out->seq[i])) {
      return Bad(block, "truncated args");
    }
    if ((mask & EventArgs::kFlow) && !args.GetVarint64(&out->flow[i])) {
      return Bad(block, "truncated args");
    }
    if (kind == static_cast<uint8_t>(RowKind::kCounter)) {
      uint64_t bits;
      if (!values.GetFixed64(&bits)) return Bad(block, "truncated values");
      std::memcpy(&out->value[i], &bits, 8);
    }
    if ((mask & DecodedBlock::kHasJson) && !json.GetLengthPrefixed(&out->json[i])) {
      return Bad(block, "truncated JSON arguments");
    }
  }
  return Status::Ok();
}

}  // namespace tracedb::engine
