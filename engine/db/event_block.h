// Event blocks of the trace database: up to 64K finished events of one rank, stored column by
// column (dictionaries, deltas, varints, entropy-coded bit lengths for ts and dur, a common time
// scale), then LZ4-compressed, in one BLOB
// row of the `blocks` table. EncodeBlock also computes the block's zone map.
// Thread safety: pure functions and plain data.
// Format: docs/database-format.md, "Event blocks".
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/segment/segment_format.h"
#include "engine/util/coding.h"
#include "engine/util/hash.h"
#include "engine/util/status.h"

namespace tracedb::engine {

// What an event is. The values are stored; never renumber.
enum class RowKind : uint8_t {
  kSpan = 0,     // has a duration
  kInstant = 1,  // a point in time
  kCounter = 2,  // a sampled value
  kFlow = 3,     // a flow end-point (instant-like; `flow` links the ends)
};
inline constexpr uint8_t kNumRowKinds = 4;
const char* RowKindName(RowKind k);  // "span", "instant", "counter", "flow"

// One finished event, as stored. Ids: an event's id is (track << 32) | k, where k counts the
// events started on its track; `parent_k` names the enclosing event on the same track.
struct Row {
  int64_t ts = 0;      // ns, the job's common clock
  int64_t dur = 0;     // ns; 0 for instants and counters
  uint32_t track = 0;  // tracks.track
  uint32_t name = 0;   // strings.id
  uint32_t cat = 0;    // strings.id (0: none)
  RowKind kind = RowKind::kSpan;
  uint32_t depth = 0;     // nesting depth within the track, 0 at the top
  uint64_t k = 0;         // per-track ordinal of the event's start
  uint64_t parent_k = 0;  // k of the parent + 1; 0 when at the top
  EventArgs args;         // typed communication arguments (mask says which)
  bool open = false;      // a span still open when its process ended: dur runs to when the
                          // process was last seen (docs/database-format.md "Open spans")
  double value = 0;       // counters only
  std::string json;       // free key/value arguments as a JSON object text, or empty

  int64_t id() const { return (static_cast<int64_t>(track) << 32) | static_cast<int64_t>(k); }
  int64_t end() const { return SaturatingAdd(ts, dur); }  // clamped, never overflows
};

// Per (name, cat, kind) facts of a block: the block_names zone map and the name_stats summary.
struct BlockNameInfo {
  uint32_t name = 0;
  uint32_t cat = 0;
  RowKind kind = RowKind::kSpan;
  uint64_t count = 0;
  int64_t total_dur = 0;
  int64_t min_dur = 0;
  int64_t max_dur = 0;
  std::array<uint64_t, 64> hist{};  // log2 buckets of dur: bucket b holds [2^b, 2^(b+1)) ns
};

// The log2 bucket of a duration (0 for dur <= 1).
int DurationBucket(int64_t dur);

struct BlockZone {
  int64_t min_ts = 0;
  int64_t max_end = 0;
  int64_t max_dur = 0;
  uint64_t count = 0;
  std::vector<BlockNameInfo> names;
};

// Encodes `rows` into a compressed block, ordered by (track, k) (`rows` itself is not
// reordered). REQUIRES: rows not empty and at most 65536 of them.
void EncodeBlock(const Row* rows, size_t n, std::string* out, BlockZone* zone);
inline void EncodeBlock(const std::vector<Row>& rows, std::string* out, BlockZone* zone) {
  EncodeBlock(rows.data(), rows.size(), out, zone);
}

// Column groups of a block, decoded on demand (DecodedBlock::Need).
enum BlockColumns : uint32_t {
  kColTrack = 1,  // always decoded
  kColK = 2,
  kColParent = 4,  // implies kColK
  kColDepth = 8,
  kColKind = 16,
  kColName = 32,
  kColCat = 64,
  kColTs = 128,  // implies kColDepth and kColDur
  kColDur = 256,
  kColArgs = 512,    // arg_mask, the typed arguments and the JSON arguments
  kColValue = 1024,  // implies kColKind
  kColAll = 2047,
};

// The decoded columns of a block (struct of arrays, for fast scans). Columns are decoded when
// first needed; a column group not yet decoded holds unspecified values.
class DecodedBlock {
 public:
  static constexpr uint32_t kHasJson = 1u << 8;
  static constexpr uint32_t kOpen = 1u << 9;  // Row::open (stored in the argument mask)

  size_t n = 0;
  std::vector<int64_t> ts, dur;
  std::vector<uint32_t> track, name, cat, depth;
  std::vector<uint8_t> kind;
  std::vector<uint64_t> k, parent_k;
  std::vector<uint32_t> arg_mask;  // EventArgs mask, plus kHasJson and kOpen
  std::vector<uint64_t> bytes, seq, flow;
  std::vector<int32_t> peer, tag;
  std::vector<uint32_t> comm;
  std::vector<double> value;
  std::vector<std::string_view> json;  // views into the decompressed payload

  // Decodes the column groups in `want` (and what they depend on) not decoded yet.
  // Corruption (never a crash) on malformed input.
  Status Need(uint32_t want);
  bool has(uint32_t cols) const { return (decoded_ & cols) == cols; }
  // A row: the column groups decoded so far (the others keep Row's defaults).
  Row RowAt(size_t i) const;
  // The heap bytes the block's buffers hold (their capacities): what keeping it for reuse
  // costs. Decoding into a block that is kept reuses its buffers (no new allocation).
  size_t CapacityBytes() const;

 private:
  friend Status DecodeBlock(std::string_view data, int64_t block, DecodedBlock* out, uint32_t want);
  std::string storage_;  // the uncompressed payload
  int64_t block_ = 0;
  int64_t base_ = 0;
  uint64_t scale_ = 1;
  uint8_t format_ = 0;  // the block format (1 to 4)
  std::vector<uint32_t> names_, cats_;
  std::vector<uint64_t> name_codes_;  // format 4's entropy-coded name indexes, decoded
  std::string_view cols_[13];
  uint32_t decoded_ = 0;
  uint32_t max_depth_ = 0;  // the depth column's largest value, once decoded
};

// An allocator whose value-less construct leaves a trivial T uninitialized: a vector of them
// resized is not zero-filled first. RowColumns sizes its arrays for a whole block at once, and
// pages that are never written then never become resident (a rank with few events in a batch
// costs what it writes, not a block's 930 KB); the builder's frame stack makes room for a run.
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) {}  // NOLINT(google-explicit-constructor)
  template <class U>
  void construct(U* p) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// The rows of one block as columns (struct of arrays), in row order: what TraceWriter buffers
// and EncodeBlock(const RowColumns&) encodes, to the same bytes and zone map as the same rows
// given as Rows. The builder writes a span's few fields straight into the arrays (PutSpan),
// instead of a 144-byte Row that the encoder reads back; a row's typed arguments, JSON and
// counter value live in `extras`, only for the rows that have any.
struct RowColumns {
  struct Extra {
    EventArgs args;
    double value = 0;
    std::string json;
  };
  size_t n = 0;  // rows
  template <class T>
  using Column = std::vector<T, DefaultInitAllocator<T>>;  // rows [0, n) written
  Column<int64_t> ts, dur;
  Column<uint32_t> track, name, cat, depth;
  Column<uint64_t> k, parent_k;
  Column<uint8_t> kind;       // RowKind
  Column<uint32_t> mask;      // as stored: (args.mask & kAllFields) | kHasJson | kOpen
  Column<uint32_t> extra;     // 0: none; else 1 + the row's index in `extras`
  std::vector<Extra> extras;  // [0, nextras) in use; kept for their strings' capacity
  size_t nextras = 0;
  // Rows that are not a plain span (kind kSpan, mask 0): while none, the encoder takes its
  // passes over the arrays (ColumnPass) instead of a loop over rows.
  size_t special = 0;

  size_t capacity() const { return ts.size(); }
  // Room for `rows` rows, rows [0, n) kept (TraceWriter grows a rank's columns as its rows
  // come, up to a block, and reuses them block after block).
  void Reserve(size_t rows);
  void Clear() { n = nextras = special = 0; }
  // Appends a copy of `r`. REQUIRES: n < capacity().
  void Append(const Row& r);
  // Appends a span without JSON, not open, the arguments copied when `args` has any field.
  // REQUIRES: n < capacity().
  void PutSpan(int64_t ts_, int64_t dur_, uint32_t track_, uint32_t name_, uint32_t cat_,
               uint64_t k_, uint32_t depth_, uint64_t parent_k_, const EventArgs* args) {
    const size_t i = n++;
    ts[i] = ts_;
    dur[i] = dur_;
    track[i] = track_;
    name[i] = name_;
    cat[i] = cat_;
    k[i] = k_;
    depth[i] = depth_;
    parent_k[i] = parent_k_;
    kind[i] = static_cast<uint8_t>(RowKind::kSpan);
    const uint32_t m = args != nullptr ? (args->mask & EventArgs::kAllFields) : 0;
    mask[i] = m;
    extra[i] = 0;
    if (m != 0) [[unlikely]] {
      NewExtra(i).args = *args;
      ++special;
    }
  }
  // Row i as a Row (tests, and the rare reader of single rows).
  Row RowAt(size_t i) const;
  // Gives row `row` a cleared Extra (its `extra` index set) and returns it.
  Extra& NewExtra(size_t row);
};

// Encodes the n rows of `cols`: the same bytes and zone map as EncodeBlock of the same rows as
// Rows. REQUIRES: cols.n in [1, 65536].
void EncodeBlock(const RowColumns& cols, std::string* out, BlockZone* zone);

// The container of a blocks.data value (docs/database-format.md "Event blocks"): u8 codec,
// varint size of the payload, u32 CRC-32C of the payload, then the payload, stored raw or LZ4;
// or (codec 2) LZ4 but for one section of the payload kept as it is, after the LZ4 bytes: the
// entropy-coded ts and dur columns, which LZ4 only copies, at a third of its time.
inline constexpr uint8_t kBlockCodecRaw = 0;
inline constexpr uint8_t kBlockCodecLz4 = 1;
inline constexpr uint8_t kBlockCodecLz4Stored = 2;
struct BlockContainer {
  uint8_t codec = 0;
  uint32_t crc = 0;         // of the uncompressed payload
  size_t header_bytes = 0;  // before the stored payload (codec 2: before its LZ4 part)
  size_t stored_at = 0;     // codec 2: where the section kept as it is lies in the payload
  size_t stored_len = 0;    // and its size (0 for the other codecs)
};
// Writes the container of the payload `lz_part` with `stored` inserted at offset `stored_at`
// (<= lz_part.size()) into *out (replacing it): codec 2 when `stored` is not empty, else codec
// 1; codec 0 (the whole payload) when LZ4 does not shrink what it is given. The one writer of
// the container (the encoder, the shard merge's remapping).
void PackBlock(std::string_view lz_part, size_t stored_at, std::string_view stored,
               std::string* out);
// Checks the container of `data` and puts its uncompressed payload in *raw, the container's
// fields in *info when given: the one reader of the container (the decoder, the shard merge's
// remapping, the archive's recompression). Corruption, the reason without a block id, on a
// truncated header, an unknown codec, a size that does not hold (64 MiB at most) or a bad CRC.
Status UnpackBlock(std::string_view data, std::string* raw, BlockContainer* info = nullptr);

// Decompresses and checks a block, then decodes the column groups in `want` (more can follow
// with Need()). Corruption (never a crash) on malformed input; `block` is the block id, for
// messages.
Status DecodeBlock(std::string_view data, int64_t block, DecodedBlock* out,
                   uint32_t want = kColAll);

// Column codecs of block format 3 (docs/database-format.md "Event blocks"), exposed for the
// tests and bench/block_codec_bench.

// What PutHuffmanBitLengthColumn needs to know of a column before it writes it: how many values
// have each bit length, and the column's frequent values, found by a direct-mapped table of
// (value, count) whose slot a different value wears down before taking it (a per-slot majority
// vote: a value that is most of its slot's traffic survives, with a count that never exceeds
// its occurrences among the values voted). Filled a value at a time, so that the encoder fills
// it in the pass that computes the values rather than in passes of its own over them.
class HuffmanColumnStats {
 public:
  // The value's bit length and its vote.
  void Add(uint64_t x) {
    AddLength(x);
    Vote(x);
  }
  // Only the bit length: the votes then come from VoteSample over the whole column.
  void AddLength(uint64_t x) { ++lengths_[BitLength(x)]; }
  // The votes of a sample of v[0..n): a value's count is a chain of stores to its slot, which
  // costs more than the rest of a pass over the values; a large column is sampled at
  // pseudo-random steps of 1 to 8 rows (a fixed step would alias with a repeating pattern of
  // events and miss some of its values), deterministic, and its counts scaled back.
  void VoteSample(const uint64_t* v, size_t n);
  // The bit lengths (as AddLength) and exact counts instead of votes, for a column of indexes
  // into a small dictionary (`counts` a buffer the caller keeps): each value's count goes into
  // its slot, the larger count keeping a slot two values share. False, with nothing added, when
  // a value is not below `limit`. Estimated counts (VoteSample) make the Huffman code of a few
  // equally frequent values lopsided: on 8 random names 3.14 bits a name instead of 3.
  bool CountAll(const uint64_t* v, size_t n, uint64_t limit, std::vector<uint32_t>* counts);

 private:
  friend void PutHuffmanBitLengthColumn(const uint64_t* v, size_t n,
                                        const HuffmanColumnStats& stats, std::string* dst);
  struct Slot {
    uint64_t v = 0;
    uint32_t c = 0;
  };
  void Vote(uint64_t x) {
    Slot& s = slots_[FibonacciHash(x) >> 56];
    // Without branches: the values of a column come in no order a predictor could learn.
    const bool empty = s.c == 0, same = s.v == x;
    s.v = empty ? x : s.v;
    s.c = empty ? 1 : same ? s.c + 1 : s.c - 1;
  }
  std::array<uint32_t, 65> lengths_{};
  std::array<Slot, 256> slots_{};
  uint32_t votes_scale_num_ = 1, votes_scale_den_ = 1;  // occurrences per vote, about
};

// Entropy-coded bit lengths: per value a canonical Huffman code (at most 12 bits) of its symbol,
// the value's bit length or one of up to 8 frequent values of the column, then for a bit length
// L >= 2 the L - 1 bits under the leading one. Appends the column to `dst`. REQUIRES: `stats`
// holds exactly v[0..n), each added once.
void PutHuffmanBitLengthColumn(const uint64_t* v, size_t n, const HuffmanColumnStats& stats,
                               std::string* dst);
// The same, the statistics gathered in a pass of its own.
void PutHuffmanBitLengthColumn(const uint64_t* v, size_t n, std::string* dst);
// Reads exactly n values; false on a malformed column (never reads past `col`).
bool GetHuffmanBitLengthColumn(std::string_view col, size_t n, uint64_t* out);
// Two columns of n values each, decoded side by side (faster than one after the other: the two
// streams' serial chains overlap). False when either is malformed.
bool GetHuffmanBitLengthColumns(std::string_view col_a, std::string_view col_b, size_t n,
                                uint64_t* out_a, uint64_t* out_b);

// A row with children (the next row of its track run is deeper) has its duration coded as the
// zigzag of its difference from the sum of its children's durations; other rows as themselves.
// In place, over rows in (track, k) order; wrap-around arithmetic, so any input round-trips.
// With `stats`, each coded value's bit length is also counted in it (AddLength).
void DurationsToResiduals(uint64_t* dur, const uint32_t* depth, const uint32_t* track, size_t n,
                          HuffmanColumnStats* stats = nullptr);
void ResidualsToDurations(uint64_t* v, const uint32_t* depth, const uint32_t* track, size_t n);

}  // namespace tracedb::engine
