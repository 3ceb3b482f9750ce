// Where the bytes of a trace DB's event blocks go, column by column, and what candidate integer
// codecs would make of the two columns that dominate (ts and dur): the measurement behind the
// codec choice of issue 12 (docs/bench-compaction.md). Reads every block of the DB, decodes it
// with engine::DecodeBlock, re-encodes each column as format 1 does (docs/database-format.md
// "Event blocks") and compresses each column alone with LZ4; then sizes the candidates:
//   bitlen4   per value its bit length L, stored as L - Lmin in 4 bits, then the L - 1 bits under
//             the leading one (frame of reference on the length; falls back to varint where a
//             block's lengths span more than 16 values);
//   bitlen-adaptive  the same with the length field as wide as the block needs;
//   bitpack   frame of reference + fixed-width bit packing (width of the block's largest value);
//   endref    a span with children: its end coded against its last child's end (dur derivable);
//   huffman   format 3's entropy-coded bit lengths (engine::PutHuffmanBitLengthColumn): per value
//             a Huffman code of its bit length or of one of the column's frequent values, then
//             its bits under the leading one;
//   childsum  a span with children: its dur coded against the sum of its children's (format 3,
//             engine::DurationsToResiduals), dur still decodable without ts.
// And the name column as the block stores it (format 4: a coding byte, then varints, which the
// block's LZ4 compresses, or entropy-coded bit lengths): its bytes, the varint columns counted
// LZ4-compressed alone.
// Prints bytes per event. Not a test.
//
// Usage: block_codec_bench DB
//        block_codec_bench --decode DB REPS   CPU time of decoding every block's ts and dur (and
//                                             what they need), median of REPS passes: the same
//                                             binary times a format 2 and a format 3 DB
//        block_codec_bench --encode DB REPS   CPU time of EncodeBlock over the DB's first 100
//                                             blocks (decoded into rows first), median of REPS
#include <time.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/db/event_block.h"
#include "engine/db/sqlite.h"
#include "engine/util/coding.h"
#include "engine/util/lz4_codec.h"

using namespace tracedb::engine;

namespace {

size_t Lz4Size(const std::string& raw) {
  if (raw.empty()) return 0;
  std::string c;
  if (!Lz4Compress(raw, &c).ok()) return raw.size();
  return std::min(c.size(), raw.size());
}

int BitLen(uint64_t v) { return v == 0 ? 0 : 64 - std::countl_zero(v); }

// Bytes of the bitlen4 coding of `v` (a fallback to varint+LZ4 when the lengths span > 16).
size_t BitLen4Size(const std::vector<uint64_t>& v, size_t varint_lz4) {
  int lmin = 64, lmax = 0;
  uint64_t mantissa = 0;
  for (uint64_t x : v) {
    const int l = BitLen(x);
    lmin = std::min(lmin, l);
    lmax = std::max(lmax, l);
    mantissa += l > 1 ? static_cast<uint64_t>(l - 1) : 0;
  }
  if (lmax - lmin > 15) return varint_lz4;
  return 1 + (v.size() * 4 + 7) / 8 + (mantissa + 7) / 8;
}

// The same with the length field as wide as the block's range of lengths needs (1 to 7 bits).
size_t BitLenAdaptiveSize(const std::vector<uint64_t>& v) {
  int lmin = 64, lmax = 0;
  uint64_t mantissa = 0;
  for (uint64_t x : v) {
    const int l = BitLen(x);
    lmin = std::min(lmin, l);
    lmax = std::max(lmax, l);
    mantissa += l > 1 ? static_cast<uint64_t>(l - 1) : 0;
  }
  const size_t width = static_cast<size_t>(std::max(1, BitLen(static_cast<uint64_t>(lmax - lmin))));
  return 2 + (v.size() * width + 7) / 8 + (mantissa + 7) / 8;
}

size_t BitPackSize(const std::vector<uint64_t>& v) {
  uint64_t lo = UINT64_MAX, hi = 0;
  for (uint64_t x : v) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  return 10 + (v.size() * static_cast<size_t>(BitLen(hi - lo)) + 7) / 8;
}

std::string Varints(const std::vector<uint64_t>& v) {
  std::string s;
  for (uint64_t x : v) PutVarint64(&s, x);
  return s;
}

// Column `c` of a block's uncompressed payload (docs/database-format.md "Event blocks"), and the
// block's format; false when the blob does not parse.
bool StoredColumn(std::string_view blob, int c, uint8_t* format, std::string* raw,
                  std::string_view* col) {
  uint64_t n, scale, count, id;
  int64_t base;
  if (!UnpackBlock(blob, raw).ok()) return false;
  Reader r(*raw);
  if (!r.GetU8(format) || !r.GetVarint64(&n) || !r.GetVarsigned(&base) || !r.GetVarint64(&scale)) {
    return false;
  }
  for (int dict = 0; dict < 2; ++dict) {
    if (!r.GetVarint64(&count)) return false;
    for (uint64_t i = 0; i < count; ++i) {
      if (!r.GetVarint64(&id)) return false;
    }
  }
  for (int i = 0; i <= c; ++i) {
    if (!r.GetLengthPrefixed(col)) return false;
  }
  return true;
}

}  // namespace

double CpuMs() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// Decoding only: the blocks are read into memory first, then decoded REPS times.
int DecodeTiming(const char* path, int reps) {
  auto db = Db::Open(path, Db::Mode::kReadOnly);
  if (!db.ok()) return 1;
  auto st = (*db)->Prepare("SELECT data FROM blocks ORDER BY block");
  if (!st.ok()) return 1;
  std::vector<std::string> blobs;
  while (true) {
    auto more = st->Step();
    if (!more.ok()) return 1;
    if (!*more) break;
    blobs.emplace_back(st->Blob(0));
  }
  std::vector<double> ms;
  DecodedBlock b;
  int64_t check = 0;
  for (int r = 0; r < reps; ++r) {
    const double t0 = CpuMs();
    for (size_t i = 0; i < blobs.size(); ++i) {
      if (!DecodeBlock(blobs[i], static_cast<int64_t>(i), &b, kColTs | kColDur).ok()) return 1;
      check += b.ts[b.n - 1] + b.dur[b.n - 1];
    }
    ms.push_back(CpuMs() - t0);
  }
  std::sort(ms.begin(), ms.end());
  std::printf("decode ts+dur of %zu blocks: median %.1f ms CPU (of %d; min %.1f) [%lld]\n",
              blobs.size(), ms[ms.size() / 2], reps, ms[0], static_cast<long long>(check));
  return 0;
}

// Encoding only: the first 100 blocks are decoded into rows first, then encoded REPS times
// (EncodeBlock: the columns, the zone map, LZ4): the encoder's share of a compaction, without
// the segment reading and row building around it.
int EncodeTiming(const char* path, int reps) {
  auto db = Db::Open(path, Db::Mode::kReadOnly);
  if (!db.ok()) return 1;
  auto st = (*db)->Prepare("SELECT data FROM blocks ORDER BY block LIMIT 100");
  if (!st.ok()) return 1;
  std::vector<std::vector<Row>> blocks;
  DecodedBlock b;
  while (true) {
    auto more = st->Step();
    if (!more.ok()) return 1;
    if (!*more) break;
    if (!DecodeBlock(st->Blob(0), static_cast<int64_t>(blocks.size()), &b, kColAll).ok()) {
      return 1;
    }
    std::vector<Row>& rows = blocks.emplace_back();
    for (size_t i = 0; i < b.n; ++i) rows.push_back(b.RowAt(i));
  }
  std::vector<double> ms;
  std::string out;
  BlockZone zone;
  uint64_t bytes = 0;
  for (int r = 0; r < reps; ++r) {
    bytes = 0;
    const double t0 = CpuMs();
    for (const std::vector<Row>& rows : blocks) {
      EncodeBlock(rows, &out, &zone);
      bytes += out.size();
    }
    ms.push_back(CpuMs() - t0);
  }
  std::sort(ms.begin(), ms.end());
  std::printf("encode %zu blocks: median %.1f ms CPU (of %d; min %.1f), %llu bytes\n",
              blocks.size(), ms[ms.size() / 2], reps, ms[0],
              static_cast<unsigned long long>(bytes));
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--decode")
    return DecodeTiming(argv[2], std::atoi(argv[3]));
  if (argc == 4 && std::string(argv[1]) == "--encode")
    return EncodeTiming(argv[2], std::atoi(argv[3]));
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DB\n", argv[0]);
    return 2;
  }
  auto db = Db::Open(argv[1], Db::Mode::kReadOnly);
  if (!db.ok()) {
    std::fprintf(stderr, "%s\n", db.status().ToString().c_str());
    return 1;
  }
  auto st = (*db)->Prepare("SELECT block, data FROM blocks ORDER BY block");
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.status().ToString().c_str());
    return 1;
  }
  const char* const kCols[] = {"k", "parent", "depth", "kind", "name", "cat", "ts", "dur", "args"};
  std::map<std::string, size_t> raw_bytes, lz4_bytes;
  size_t blob_bytes = 0, events = 0, blocks = 0;
  size_t dur_bitlen4 = 0, dur_bitpack = 0, ts_bitlen4 = 0, ts_bitpack = 0;
  size_t dur_endref_varint = 0, dur_endref_lz4 = 0, dur_bitlena = 0, dur_endref_bitlena = 0;
  size_t ts_huff = 0, ts_huff_lz4 = 0, ts_huff_unsigned = 0, dur_huff = 0, dur_child_bitlena = 0,
         dur_child_huff = 0, dur_child_huff_lz4 = 0;
  size_t name_stored = 0, name_entropy_blocks = 0;
  std::string stored_raw;
  DecodedBlock b;
  while (true) {
    auto more = st->Step();
    if (!more.ok()) {
      std::fprintf(stderr, "%s\n", more.status().ToString().c_str());
      return 1;
    }
    if (!*more) break;
    const std::string_view blob = st->Blob(1);
    tracedb::Status s = DecodeBlock(blob, st->Int(0), &b, kColAll);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    blob_bytes += blob.size();
    events += b.n;
    ++blocks;
    const size_t n = b.n;
    std::vector<uint64_t> col[9];
    for (auto& c : col) c.resize(n);
    int64_t prev_ts = 0, prev_end = 0;
    uint32_t prev_depth = 0;
    uint64_t prev_k = 0;
    int64_t base = INT64_MAX;
    for (size_t i = 0; i < n; ++i) base = std::min(base, b.ts[i]);
    // endref: the end of a span with children against its last child's end; the children of
    // row i are the later rows of its track run whose parent_k is k[i] + 1.
    std::unordered_map<uint64_t, size_t> row_of_k;
    std::vector<int64_t> last_child_end(n, INT64_MIN);
    for (size_t i = 0; i < n; ++i) {
      const bool run_start = i == 0 || b.track[i] != b.track[i - 1];
      if (run_start) {
        prev_k = 0;
        row_of_k.clear();
      }
      row_of_k[b.k[i]] = i;
      if (b.parent_k[i] != 0) {
        auto it = row_of_k.find(b.parent_k[i] - 1);
        if (it != row_of_k.end()) {
          last_child_end[it->second] =
              std::max(last_child_end[it->second], SaturatingAdd(b.ts[i], b.dur[i]));
        }
      }
      col[0][i] = ZigZag(static_cast<int64_t>(b.k[i] - prev_k));
      prev_k = b.k[i];
      col[1][i] = ZigZag(b.parent_k[i] == 0 ? 0 : static_cast<int64_t>(b.k[i] + 2 - b.parent_k[i]));
      col[2][i] = b.depth[i];
      col[3][i] = b.kind[i];
      col[4][i] = b.name[i];
      col[5][i] = b.cat[i];
      const int64_t ref = run_start ? base : (b.depth[i] > prev_depth ? prev_ts : prev_end);
      col[6][i] = ZigZag(WrapSub(b.ts[i], ref));
      col[7][i] = static_cast<uint64_t>(b.dur[i]);
      col[8][i] = b.arg_mask[i];
      prev_ts = b.ts[i];
      prev_end = WrapAdd(b.ts[i], b.dur[i]);
      prev_depth = b.depth[i];
    }
    {
      uint8_t format = 0;
      std::string_view name_col;
      if (!StoredColumn(blob, 5, &format, &stored_raw, &name_col)) {
        std::fprintf(stderr, "block %lld: does not parse\n", static_cast<long long>(st->Int(0)));
        return 1;
      }
      if (format >= 4 && !name_col.empty() && name_col[0] == 1) {
        name_stored += name_col.size();
        ++name_entropy_blocks;
      } else {
        name_stored += Lz4Size(std::string(name_col));
      }
    }
    std::vector<uint64_t> endref(n);
    for (size_t i = 0; i < n; ++i) {
      endref[i] = last_child_end[i] == INT64_MIN
                      ? static_cast<uint64_t>(b.dur[i])
                      : ZigZag(WrapSub(WrapAdd(b.ts[i], b.dur[i]), last_child_end[i]));
    }
    size_t lz4_of[9];
    for (int c = 0; c < 9; ++c) {
      const std::string v = c == 3 ? std::string(b.kind.begin(), b.kind.end()) : Varints(col[c]);
      raw_bytes[kCols[c]] += v.size();
      lz4_of[c] = Lz4Size(v);
      lz4_bytes[kCols[c]] += lz4_of[c];
    }
    dur_bitlen4 += BitLen4Size(col[7], lz4_of[7]);
    dur_bitpack += BitPackSize(col[7]);
    dur_bitlena += BitLenAdaptiveSize(col[7]);
    ts_bitlen4 += BitLen4Size(col[6], lz4_of[6]);
    ts_bitpack += BitPackSize(col[6]);
    const std::string er = Varints(endref);
    dur_endref_varint += er.size();
    dur_endref_lz4 += Lz4Size(er);
    dur_endref_bitlena += BitLenAdaptiveSize(endref);
    std::string h;
    PutHuffmanBitLengthColumn(col[6].data(), n, &h);
    ts_huff += h.size();
    ts_huff_lz4 += Lz4Size(h);
    // Format 3 zigzags the ts deltas only in a block that has a negative one.
    bool negative = false;
    std::vector<uint64_t> unsigned_ts = col[6];
    for (uint64_t& x : unsigned_ts) {
      negative |= UnZigZag(x) < 0;
      x = static_cast<uint64_t>(UnZigZag(x));
    }
    h.clear();
    PutHuffmanBitLengthColumn(negative ? col[6].data() : unsigned_ts.data(), n, &h);
    ts_huff_unsigned += h.size() + 1;
    h.clear();
    PutHuffmanBitLengthColumn(col[7].data(), n, &h);
    dur_huff += h.size();
    std::vector<uint64_t> child = col[7];
    DurationsToResiduals(child.data(), b.depth.data(), b.track.data(), n);
    dur_child_bitlena += BitLenAdaptiveSize(child);
    h.clear();
    PutHuffmanBitLengthColumn(child.data(), n, &h);
    dur_child_huff += h.size();
    dur_child_huff_lz4 += Lz4Size(h);
  }
  if (events == 0) {
    std::fprintf(stderr, "no events in %s\n", argv[1]);
    return 1;
  }
  const double e = static_cast<double>(events);
  std::printf("%zu events in %zu blocks; stored blocks %.3f B/event\n", events, blocks,
              blob_bytes / e);
  std::printf("%-8s %12s %12s   (B/event, each column compressed alone)\n", "column", "varint",
              "varint+lz4");
  size_t sum = 0;
  for (const char* c : kCols) {
    std::printf("%-8s %12.3f %12.3f\n", c, raw_bytes[c] / e, lz4_bytes[c] / e);
    sum += lz4_bytes[c];
  }
  std::printf("%-8s %12s %12.3f\n", "total", "", sum / e);
  std::printf("\ncandidates (B/event of the column):\n");
  std::printf("dur  varint+lz4 %.3f  bitlen4 %.3f  bitlen-adaptive %.3f  bitpack %.3f\n",
              lz4_bytes["dur"] / e, dur_bitlen4 / e, dur_bitlena / e, dur_bitpack / e);
  std::printf("dur  endref: varint %.3f  varint+lz4 %.3f  bitlen-adaptive %.3f\n",
              dur_endref_varint / e, dur_endref_lz4 / e, dur_endref_bitlena / e);
  std::printf("dur  huffman %.3f  childsum: bitlen-adaptive %.3f  huffman %.3f (+lz4 %.3f)\n",
              dur_huff / e, dur_child_bitlena / e, dur_child_huff / e, dur_child_huff_lz4 / e);
  std::printf(
      "ts   varint+lz4 %.3f  bitlen4 %.3f  bitpack %.3f  huffman %.3f (+lz4 %.3f)  huffman, "
      "not zigzagged in blocks without a negative delta (format 3) %.3f\n",
      lz4_bytes["ts"] / e, ts_bitlen4 / e, ts_bitpack / e, ts_huff / e, ts_huff_lz4 / e,
      ts_huff_unsigned / e);
  std::printf(
      "name as stored %.3f (entropy-coded in %zu of %zu blocks; varint columns counted "
      "LZ4-compressed alone)\n",
      name_stored / e, name_entropy_blocks, blocks);
  return 0;
}
