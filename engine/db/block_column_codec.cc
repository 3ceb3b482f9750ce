// Block format 3's column codecs (event_block.h, "Column codecs of block format 3"): the
// entropy-coded bit-length columns (statistics, Huffman code lengths, the encoder and the
// decoder, one column or two side by side) and the durations coded against their children's.
// Used by engine/db/event_block.cc, which owns the block layout; format in
// docs/database-format.md "Event blocks".
#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include "engine/db/event_block.h"
#include "engine/util/coding.h"
#include "engine/util/hash.h"

namespace tracedb::engine {
namespace {
constexpr size_t kMaxRows = 65536;  // a block's rows at most (as event_block.cc)
}  // namespace

// ---- Block format 3: entropy-coded bit lengths, and durations against their children ----

namespace {

constexpr int kHuffMaxBits = 12;    // longest code: the decoding table has 2^12 entries
constexpr int kLengthSymbols = 65;  // symbols 0..64: a value's bit length
constexpr int kMaxExact = 8;        // then up to 8 frequent values, each a symbol of its own
constexpr int kSymbols = kLengthSymbols + kMaxExact;
// Rows this deep or deeper neither predict their duration nor count towards a parent's.
constexpr uint32_t kPredictDepth = 64;

// Huffman code lengths of the used symbols (freq > 0), none longer than kHuffMaxBits. A single
// used symbol gets length 0: the stream then holds no code bits at all.
void HuffmanLengths(const uint32_t* freq, uint8_t* len) {
  int used[kSymbols];
  int nused = 0;
  for (int s = 0; s < kSymbols; ++s) {
    len[s] = 0;
    if (freq[s] > 0) used[nused++] = s;
  }
  if (nused <= 1) return;
  uint64_t f[kSymbols];
  for (int i = 0; i < nused; ++i) f[i] = freq[used[i]];
  while (true) {
    // The textbook construction over at most 73 leaves: repeatedly join the two lightest nodes.
    // Nodes 0..nused-1 are leaves, then internal ones; parent[] gives each node's depth.
    uint64_t w[2 * kSymbols];
    int parent[2 * kSymbols];
    bool live[2 * kSymbols];
    int nodes = nused;
    for (int i = 0; i < nused; ++i) w[i] = f[i], live[i] = true;
    for (int joined = 0; joined < nused - 1; ++joined) {
      int a = -1, b = -1;
      for (int i = 0; i < nodes; ++i) {
        if (!live[i]) continue;
        if (a < 0 || w[i] < w[a]) {
          b = a;
          a = i;
        } else if (b < 0 || w[i] < w[b]) {
          b = i;
        }
      }
      live[a] = live[b] = false;
      parent[a] = parent[b] = nodes;
      w[nodes] = w[a] + w[b];
      live[nodes] = true;
      ++nodes;
    }
    int longest = 0;
    for (int i = 0; i < nused; ++i) {
      int d = 0;
      for (int x = i; x != nodes - 1; x = parent[x]) ++d;
      len[used[i]] = static_cast<uint8_t>(d);
      longest = std::max(longest, d);
    }
    if (longest <= kHuffMaxBits) return;
    // Too deep: flatten the weights and build again (all weights 1 give depth <= 7).
    for (int i = 0; i < nused; ++i) f[i] = (f[i] + 1) / 2;
  }
}

// Canonical codes for `len` (symbols ordered by length, then by symbol), bit-reversed for the
// LSB-first stream.
void CanonicalCodes(const uint8_t* len, uint32_t* code) {
  uint32_t next = 0;
  for (int l = 1; l <= kHuffMaxBits; ++l) {
    for (int s = 0; s < kSymbols; ++s) {
      if (len[s] != l) continue;
      uint32_t rev = 0;
      for (int b = 0; b < l; ++b) rev |= ((next >> b) & 1u) << (l - 1 - b);
      code[s] = rev;
      ++next;
    }
    next <<= 1;
  }
}

}  // namespace

namespace {

// The rows VoteSample votes: from row 0, steps of 1 + the top 3 bits of a linear congruential
// generator. The same for every column, so the positions below a block's largest size are
// computed once: a vote then does not wait on the generator's multiply of the one before.
constexpr uint64_t kSampleSeed = 0x2545F4914F6CDD1Dull;
inline uint64_t NextSample(uint64_t lcg) {
  return lcg * 6364136223846793005ull + 1442695040888963407ull;
}
struct SamplePlan {
  std::vector<uint32_t> rows;  // every sampled row below kMaxRows, ascending
  size_t next = 0;             // the first sampled row from kMaxRows on
  uint64_t lcg = 0;            // the generator's state there
};
const SamplePlan& TheSamplePlan() {
  static const SamplePlan plan = [] {
    SamplePlan p;
    uint64_t lcg = kSampleSeed;
    size_t i = 0;
    while (i < kMaxRows) {
      p.rows.push_back(static_cast<uint32_t>(i));
      lcg = NextSample(lcg);
      i += 1 + (lcg >> 61);
    }
    p.next = i;
    p.lcg = lcg;
    return p;
  }();
  return plan;
}

}  // namespace

void HuffmanColumnStats::VoteSample(const uint64_t* v, size_t n) {
  if (n < 4096) {
    for (size_t i = 0; i < n; ++i) Vote(v[i]);
    return;
  }
  const SamplePlan& plan = TheSamplePlan();
  // A probe first: every 8th sampled row, over the whole column (about 450 votes in a block of
  // 16,384 rows). When no value is voted twice there, the values are random at this resolution
  // (durations, gaps at ns): none is frequent enough to earn a symbol (a value in more than about
  // 1% of the rows is seen twice), and the column is not voted further. Without this, values
  // voted once took the 8 symbols, each at an estimated 4.5 occurrences, after 3,600 votes. Else
  // the slots are cleared and every sampled row votes, as without the probe.
  bool repeated = false;
  for (size_t k = 0; k < plan.rows.size() && plan.rows[k] < n; k += 8) Vote(v[plan.rows[k]]);
  for (const Slot& s : slots_) repeated |= s.c >= 2;
  slots_ = {};
  if (!repeated) return;
  for (const uint32_t i : plan.rows) {
    if (i >= n) break;
    Vote(v[i]);
  }
  uint64_t lcg = plan.lcg;
  for (size_t i = plan.next; i < n;) {  // a column longer than a block
    Vote(v[i]);
    lcg = NextSample(lcg);
    i += 1 + (lcg >> 61);
  }
  votes_scale_num_ = 9;  // the mean step is 4.5 rows
  votes_scale_den_ = 2;
}

bool HuffmanColumnStats::CountAll(const uint64_t* v, size_t n, uint64_t limit,
                                  std::vector<uint32_t>* counts) {
  if (limit == 0) return n == 0;
  counts->assign(limit, 0);
  uint32_t* c = counts->data();
  // A value out of range is counted as 0 and makes `out` nonzero: one test after the loop
  // instead of a branch per value.
  uint64_t out = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t x = v[i] < limit ? v[i] : 0;
    out |= v[i] ^ x;
    ++c[x];
  }
  if (out != 0) return false;
  for (uint64_t x = 0; x < limit; ++x) {
    if (c[x] == 0) continue;
    lengths_[BitLength(x)] += c[x];
    Slot& s = slots_[FibonacciHash(x) >> 56];
    if (c[x] > s.c) s = Slot{x, c[x]};
  }
  votes_scale_num_ = 1;
  votes_scale_den_ = 1;
  return true;
}

void PutHuffmanBitLengthColumn(const uint64_t* v, size_t n, std::string* dst) {
  HuffmanColumnStats stats;
  for (size_t i = 0; i < n; ++i) stats.AddLength(v[i]);
  stats.VoteSample(v, n);
  PutHuffmanBitLengthColumn(v, n, stats, dst);
}

namespace {

// The Huffman writer's bit stream at one point: whole bytes stored up to `p`, `used` (at most 7)
// bits pending in `acc`.
struct BitCursor {
  char* p;
  uint64_t acc;
  unsigned used;
};

// One value of any length (code `len` bits, then `mbits` mantissa bits of x under `mmask`):
// the code, then the mantissa in two parts of at most 32 bits, each followed by a store of the
// accumulator's whole bytes. The writer's loop takes the common case itself.
[[gnu::noinline]] void PutWide(BitCursor* c, uint64_t x, uint32_t code, unsigned len,
                               unsigned mbits, uint64_t mmask) {
  char* p = c->p;
  uint64_t acc = c->acc;
  unsigned used = c->used;
  const auto flush = [&p, &acc, &used] {
    EncodeFixed64(p, acc);
    p += used >> 3;
    acc >>= used & 56;
    used &= 7;
  };
  const uint64_t m = x & mmask;
  acc |= uint64_t{code} << used;
  used += len;
  flush();
  const unsigned lo = std::min(mbits, 32u);
  acc |= (lo == 0 ? 0 : m & (~0ull >> (64 - lo))) << used;
  used += lo;
  flush();
  acc |= (m >> lo) << used;
  used += mbits - lo;
  flush();
  c->p = p;
  c->acc = acc;
  c->used = used;
}

}  // namespace

void PutHuffmanBitLengthColumn(const uint64_t* v, size_t n, const HuffmanColumnStats& stats,
                               std::string* dst) {
  using Slot = HuffmanColumnStats::Slot;
  // A value earns a symbol when its occurrences would spend more than 8 bytes of mantissa bits.
  uint64_t exact[kMaxExact];
  uint32_t exact_votes[kMaxExact];
  int nexact = 0;
  uint64_t exact_slot[64] = {};
  uint8_t exact_sym[64] = {};
  {
    Slot cand[256];
    int ncand = 0;
    for (const Slot& s : stats.slots_) {
      const int l = BitLength(s.v);
      if (s.c > 0 && l >= 2 &&
          uint64_t{s.c} * stats.votes_scale_num_ * static_cast<uint64_t>(l - 1) >
              64 * uint64_t{stats.votes_scale_den_}) {
        cand[ncand++] = s;
      }
    }
    std::sort(cand, cand + ncand,
              [](const Slot& a, const Slot& b) { return a.c != b.c ? a.c > b.c : a.v < b.v; });
    // The frequent values go into a 64-slot direct-mapped table, so that a value finds its
    // symbol with one comparison and no branch; one that would share a slot gets no symbol.
    // An empty slot holds 0 with symbol 0, which is 0's symbol anyway.
    for (int i = 0; i < ncand && nexact < kMaxExact; ++i) {
      uint64_t& slot = exact_slot[FibonacciHash(cand[i].v) >> 58];
      if (slot != 0) continue;
      slot = cand[i].v;
      exact_sym[FibonacciHash(cand[i].v) >> 58] = static_cast<uint8_t>(kLengthSymbols + nexact);
      exact_votes[nexact] = cand[i].c;
      exact[nexact++] = cand[i].v;
    }
  }
  // The symbols' counts: the bit lengths' counts, less the estimated occurrences of the
  // frequent values that take symbols of their own. A bit length whose estimate leaves nothing
  // keeps a count of 1 unless its unscaled votes (each a real occurrence) prove it empty: every
  // symbol the stream uses must have a code, and one it does not use costs little.
  uint32_t freq[kSymbols] = {};
  uint64_t est_len[kLengthSymbols] = {}, votes_len[kLengthSymbols] = {};
  for (int e = 0; e < nexact; ++e) {
    const uint64_t est = std::max<uint64_t>(
        1, uint64_t{exact_votes[e]} * stats.votes_scale_num_ / stats.votes_scale_den_);
    const int l = BitLength(exact[e]);
    est_len[l] += est;
    votes_len[l] += exact_votes[e];
    freq[kLengthSymbols + e] = static_cast<uint32_t>(std::min<uint64_t>(est, UINT32_MAX));
  }
  for (int l = 0; l < kLengthSymbols; ++l) {
    const uint64_t have = stats.lengths_[static_cast<size_t>(l)];
    freq[l] = static_cast<uint32_t>(have - std::min(have, est_len[l]));
    if (freq[l] == 0 && have > votes_len[l]) freq[l] = 1;
  }
  uint8_t len[kSymbols];
  uint32_t code[kSymbols] = {};
  HuffmanLengths(freq, len);
  CanonicalCodes(len, code);
  dst->push_back(static_cast<char>(nexact));
  for (int e = 0; e < nexact; ++e) PutVarint64(dst, exact[e]);
  int nused = 0;
  for (int s = 0; s < kSymbols; ++s) nused += freq[s] > 0;
  dst->push_back(static_cast<char>(nused));
  for (int s = 0; s < kSymbols; ++s) {
    if (freq[s] == 0) continue;
    dst->push_back(static_cast<char>(s));
    dst->push_back(static_cast<char>(len[s]));
  }
  // Per symbol: the mantissa bits that follow its code (s - 1 under the leading one for a bit
  // length s >= 2, none otherwise) and their mask, so that the loop below has no branch on the
  // kind of symbol.
  // One entry per symbol, so that a value's symbol costs one table line.
  struct SymbolOut {
    uint64_t mmask;
    uint32_t code;
    uint8_t len, mbits, total;
  };
  SymbolOut sym[kSymbols];
  for (int s = 0; s < kSymbols; ++s) {
    const int mb = s >= 2 && s < kLengthSymbols ? s - 1 : 0;
    sym[s] = SymbolOut{mb == 0 ? 0 : ~0ull >> (64 - mb), code[s], len[s], static_cast<uint8_t>(mb),
                       static_cast<uint8_t>(len[s] + mb)};
  }
  // The bit stream (LSB first, as BitWriter writes it), built in a buffer the thread keeps (a
  // value takes at most 12 + 63 bits: 10 bytes) and then appended whole. After each value the
  // whole bytes of the accumulator are stored and dropped, leaving at most 7 bits in it: no
  // branch on whether a word filled up, which a predictor cannot learn (the lengths vary from
  // value to value) and which cost more than these stores.
  thread_local std::string bytes;
  if (bytes.size() < 10 * n + 16) bytes.resize(10 * n + 16);
  char* const p0 = bytes.data();
  // The cursor, the accumulator and its bit count are plain locals of this loop (no lambda
  // captures them by reference): a lambda left out of line kept them in memory, and every
  // value then went through a load and a store of the accumulator. The rare value too long to
  // go in one step takes PutWide, out of line, with a copy of the three.
  char* p = p0;
  uint64_t acc = 0;
  unsigned used = 0;  // bits of acc in use: at most 7 between values
  const auto symbol = [&sym, &exact_slot, &exact_sym](uint64_t x) -> const SymbolOut& {
    const size_t slot = FibonacciHash(x) >> 58;
    return sym[exact_slot[slot] == x ? exact_sym[slot] : BitLength(x)];
  };
  // Two values per step where their bits fit in the accumulator together (at most 56 bits
  // after the 7 left over): one shift into it and one store for both, which halves the chain
  // through `acc` and `used` that each value otherwise waits on. Same bits as one at a time.
  size_t i = 0;
  for (; i + 1 < n; i += 2) {
    const uint64_t x0 = v[i], x1 = v[i + 1];
    const SymbolOut& o0 = symbol(x0);
    const SymbolOut& o1 = symbol(x1);
    const unsigned t0 = o0.total, t1 = o1.total;
    if (t0 + t1 <= 56) [[likely]] {
      const uint64_t b0 = o0.code | ((x0 & o0.mmask) << o0.len);
      const uint64_t b1 = o1.code | ((x1 & o1.mmask) << o1.len);
      acc |= (b0 | (b1 << t0)) << used;
      used += t0 + t1;
      EncodeFixed64(p, acc);
      p += used >> 3;
      acc >>= used & 56;
      used &= 7;
    } else {
      BitCursor c{p, acc, used};
      PutWide(&c, x0, o0.code, o0.len, o0.mbits, o0.mmask);
      PutWide(&c, x1, o1.code, o1.len, o1.mbits, o1.mmask);
      p = c.p;
      acc = c.acc;
      used = c.used;
    }
  }
  if (i < n) {
    const SymbolOut& o = symbol(v[i]);
    BitCursor c{p, acc, used};
    PutWide(&c, v[i], o.code, o.len, o.mbits, o.mmask);
    p = c.p;
    acc = c.acc;
    used = c.used;
  }
  if (used > 0) *p++ = static_cast<char>(acc);
  dst->append(p0, static_cast<size_t>(p - p0));
}

namespace {

// The decoder of one entropy-coded bit-length column: its header read and checked, a decoding
// table built, then values taken two per 8-byte read where both fit (FastPair), else one at a
// time. Two columns of a block (ts and dur) are decoded
// side by side (GetHuffmanBitLengthColumns): each value's position in its stream depends on the
// one before (a load, a table lookup, an add), so one stream alone waits on that chain, and two
// interleaved keep the core busy.
class HuffmanColumnDecoder {
 public:
  // Reads the header; false on a malformed one.
  bool Init(std::string_view col, size_t n);
  // Whether the next value can be taken by Fast(): its bits, and the 8-byte loads that read
  // them, lie inside the stream (a value takes at most 12 + 63 bits).
  bool fast() const { return pos_ < fast_end_; }
  bool fast(uint64_t pos) const { return pos < fast_end_; }
  // The next value. REQUIRES: fast().
  uint64_t Fast() { return Fast(pos_); }
  // The same at the position `pos_`, kept by the caller in a local (a store of a value could
  // alias a member, which would then be loaded again after each one); Sync() puts it back.
  uint64_t Fast(uint64_t& pos_) const {
    const uint64_t w = DecodeFixed64(p_ + (pos_ >> 3)) >> (pos_ & 7);
    const uint32_t e = table_[w & mask_];
    const unsigned total = e & 0xff, l = (e >> 8) & 0xff, s = e >> 16;
    if (total <= 57) [[likely]] {
      // The usual case: the code and the mantissa both within the bits already read.
      pos_ += total;
      return base_[s] | ((w >> l) & mmask_[s]);
    }
    // A value of 46 bits or more: its mantissa read after the code, in two parts.
    pos_ += l;
    const unsigned mb = mbits_[s];
    const uint64_t lo = (DecodeFixed64(p_ + (pos_ >> 3)) >> (pos_ & 7)) & 0xffffffffu;
    pos_ += 32;
    const uint64_t hi =
        (DecodeFixed64(p_ + (pos_ >> 3)) >> (pos_ & 7)) & (~0ull >> (64 - (mb - 32)));
    pos_ += mb - 32;
    return base_[s] | lo | (hi << 32);
  }
  // The next two values from one 8-byte read when both fit in it (the usual case: each value
  // takes at most 57 - the other's bits), else the next one. Returns how many it wrote to out.
  // The serial chain (a read, a table lookup, an add to the position) then runs once per two
  // values. REQUIRES: fast(pos), and room for two values at out.
  size_t FastPair(uint64_t& pos_, uint64_t* out) const {
    const uint64_t w = DecodeFixed64(p_ + (pos_ >> 3)) >> (pos_ & 7);
    const uint32_t e1 = table_[w & mask_];
    const unsigned t1 = e1 & 0xff, l1 = (e1 >> 8) & 0xff, s1 = e1 >> 16;
    if (t1 > 57) [[unlikely]] {
      out[0] = Fast(pos_);
      return 1;
    }
    out[0] = base_[s1] | ((w >> l1) & mmask_[s1]);
    // The bits after the first value: 57 - t1 of them are read (the shifts above leave zeros
    // beyond), and the lookup's entry is only used when the whole second value lies in them.
    const uint64_t w2 = w >> t1;
    const uint32_t e2 = table_[w2 & mask_];
    const unsigned t2 = e2 & 0xff, l2 = (e2 >> 8) & 0xff, s2 = e2 >> 16;
    if (t1 + t2 <= 57) [[likely]] {
      out[1] = base_[s2] | ((w2 >> l2) & mmask_[s2]);
      pos_ += t1 + t2;
      return 2;
    }
    pos_ += t1;
    return 1;
  }
  // The next value, bounds-checked (the stream's last bytes); false past the stream's end.
  bool Checked(uint64_t* v) {
    BitReader bits(std::string_view(p_, size_));
    bits.Seek(pos_);
    const uint64_t w = bits.Peek();
    const uint32_t e = table_[w & mask_];
    const unsigned total = e & 0xff, l = (e >> 8) & 0xff, s = e >> 16;
    if (total <= 57) {
      if (!bits.Skip(static_cast<int>(total))) return false;
      *v = base_[s] | ((w >> l) & mmask_[s]);
    } else {
      uint64_t m;
      if (!bits.Skip(static_cast<int>(l)) || !bits.Get(mbits_[s], &m)) return false;
      *v = base_[s] | m;
    }
    pos_ = bits.pos();
    return true;
  }
  uint64_t pos() const { return pos_; }
  void Sync(uint64_t pos) { pos_ = pos; }
  bool Next(uint64_t* v) {
    if (fast()) [[likely]] {
      *v = Fast();
      return true;
    }
    return Checked(v);
  }
  // Whether only the zero padding of the last byte is left.
  bool at_end() const {
    BitReader bits(std::string_view(p_, size_));
    bits.Seek(pos_);
    return bits.at_end();
  }

 private:
  const char* p_ = nullptr;
  size_t size_ = 0;
  uint64_t pos_ = 0, fast_end_ = 0;
  uint32_t mask_ = 0;
  // Per symbol: the value's bits above its mantissa (the leading one, the value 0 or 1, or the
  // frequent value), the mantissa's mask and its number of bits, so that the loop has no branch
  // on the kind of symbol.
  uint64_t base_[kSymbols], mmask_[kSymbols];
  uint8_t mbits_[kSymbols];
  // table_[bits] = code length + mantissa bits | code length << 8 | symbol << 16, for the next
  // `longest code` bits of the stream (2^12 entries at most, fewer for a column whose codes are
  // all shorter: less to fill per block).
  uint32_t table_[1u << kHuffMaxBits];
};

bool HuffmanColumnDecoder::Init(std::string_view col, size_t n) {
  Reader r(col);
  uint8_t nexact, nused;
  if (!r.GetU8(&nexact) || nexact > kMaxExact) return false;
  uint64_t exact[kMaxExact];
  for (int e = 0; e < nexact; ++e) {
    if (!r.GetVarint64(&exact[e])) return false;
  }
  if (!r.GetU8(&nused) || (n > 0 && nused == 0)) return false;
  uint8_t len[kSymbols] = {};
  int prev = -1, longest = 0;
  uint32_t kraft = 0;  // in units of 2^-kHuffMaxBits
  for (int i = 0; i < nused; ++i) {
    uint8_t s, l;
    if (!r.GetU8(&s) || !r.GetU8(&l)) return false;
    // Symbols strictly increasing and defined; one symbol has length 0, several 1..12 making a
    // complete code (every table entry then decodes to a symbol).
    if (s <= prev || s >= kLengthSymbols + nexact) return false;
    if (nused == 1 ? l != 0 : (l == 0 || l > kHuffMaxBits)) return false;
    prev = s;
    len[s] = l;
    longest = std::max<int>(longest, l);
    if (nused > 1) kraft += 1u << (kHuffMaxBits - l);
  }
  if (nused > 1 && kraft != (1u << kHuffMaxBits)) return false;
  for (int s = 0; s < kSymbols; ++s) {
    if (s >= kLengthSymbols) {
      base_[s] = s - kLengthSymbols < nexact ? exact[s - kLengthSymbols] : 0;
      mbits_[s] = 0;
    } else if (s <= 1) {
      base_[s] = static_cast<uint64_t>(s);
      mbits_[s] = 0;
    } else {
      base_[s] = uint64_t{1} << (s - 1);
      mbits_[s] = static_cast<uint8_t>(s - 1);
    }
    mmask_[s] = mbits_[s] == 0 ? 0 : ~0ull >> (64 - mbits_[s]);
  }
  mask_ = (1u << longest) - 1;
  if (nused == 1) {
    table_[0] = uint32_t{mbits_[prev]} | static_cast<uint32_t>(prev) << 16;
  } else {
    uint32_t code[kSymbols] = {};
    CanonicalCodes(len, code);
    for (int s = 0; s < kSymbols; ++s) {
      if (len[s] == 0) continue;
      const uint32_t entry = static_cast<uint32_t>(len[s] + mbits_[s]) | uint32_t{len[s]} << 8 |
                             static_cast<uint32_t>(s) << 16;
      for (uint32_t hi = 0; hi < (1u << (longest - len[s])); ++hi) {
        table_[code[s] | (hi << len[s])] = entry;
      }
    }
  }
  p_ = r.data();
  size_ = r.remaining();
  pos_ = 0;
  // Fast() reads 8 bytes from at most 12 + 32 bits past its starting position and takes at most
  // 75 bits: a start 24 bytes or more before the end keeps both inside the stream.
  fast_end_ = size_ >= 24 ? uint64_t{size_ - 24} * 8 : 0;
  return true;
}

}  // namespace

bool GetHuffmanBitLengthColumn(std::string_view col, size_t n, uint64_t* out) {
  HuffmanColumnDecoder d;
  if (!d.Init(col, n)) return false;
  size_t i = 0;
  uint64_t pos = d.pos();
  while (i + 1 < n && d.fast(pos)) i += d.FastPair(pos, out + i);
  d.Sync(pos);
  for (; i < n; ++i) {
    if (!d.Next(&out[i])) return false;
  }
  return d.at_end();
}

bool GetHuffmanBitLengthColumns(std::string_view col_a, std::string_view col_b, size_t n,
                                uint64_t* out_a, uint64_t* out_b) {
  HuffmanColumnDecoder a, b;
  if (!a.Init(col_a, n) || !b.Init(col_b, n)) return false;
  // Each stream at its own row (a pair step may take one value or two).
  size_t ia = 0, ib = 0;
  uint64_t pa = a.pos(), pb = b.pos();
  while (ia + 1 < n && ib + 1 < n && a.fast(pa) && b.fast(pb)) {
    ia += a.FastPair(pa, out_a + ia);
    ib += b.FastPair(pb, out_b + ib);
  }
  a.Sync(pa);
  b.Sync(pb);
  for (; ia < n; ++ia) {
    if (!a.Next(&out_a[ia])) return false;
  }
  for (; ib < n; ++ib) {
    if (!b.Next(&out_b[ib])) return false;
  }
  return a.at_end() && b.at_end();
}

namespace {

// The depth sums of the backward walk that DurationsToResiduals and ResidualsToDurations share:
// acc[t + 1] holds depth t's sum (acc[0]: a slot for depth -1, written, never read), except
// depth `top`'s, which is `cur` (a register: siblings add without a store and a load each).
// The sum of the children of a row of depth di (the rows of depth di + 1 after it, up to the
// next row of depth <= di): depths above `top` count as zero.
[[gnu::always_inline]] inline uint64_t ChildrenSum(const uint64_t* acc, int top, uint64_t cur,
                                                   int di) {
  return di + 1 < top ? acc[di + 2] : di + 1 == top ? cur : 0;
}
// A row of depth di and duration x joins the sums; the depths between `top` and di are cleared
// when first used.
[[gnu::always_inline]] inline void AddToDepthSums(uint64_t* acc, int& top, uint64_t& cur, int di,
                                                  uint64_t x) {
  acc[top + 1] = cur;
  if (di > top) {
    for (int t = top + 1; t < di; ++t) acc[t + 1] = 0;
    cur = x;
  } else if (di == top) {
    cur += x;
  } else {
    cur = acc[di + 1] + x;
  }
  top = di;
}

}  // namespace

void DurationsToResiduals(uint64_t* dur, const uint32_t* depth, const uint32_t* track, size_t n,
                          HuffmanColumnStats* stats) {
  // Backwards, a track run at a time (the next row's depth kept in a local: no per-row look at
  // the tracks): when a row of depth d is reached, depth d + 1's sum holds the sum of the
  // durations of the rows of depth d + 1 after it up to the next row of depth <= d: its
  // children. Depths above `top` count as zero (cleared when first used). As in
  // ResidualsToDurations, the sum at depth `top` is kept in a register, `cur`, and acc[t + 1]
  // holds depth t's sum (acc[0]: a slot for depth -1, written, never read): siblings then add
  // in a register, where a sum in memory chained a store and a load per row.
  uint64_t acc[kPredictDepth + 2];
  HuffmanColumnStats unused;
  HuffmanColumnStats& st = stats != nullptr ? *stats : unused;
  size_t end = n;
  while (end > 0) {
    size_t begin = end - 1;
    while (begin > 0 && track[begin - 1] == track[end - 1]) --begin;
    int top = -1;
    uint64_t cur = 0;         // depth top's sum (acc[top + 1] is stale while top holds)
    uint32_t next_depth = 0;  // the run's last row has no next row: never a parent
    for (size_t j = end; j-- > begin;) {
      const uint32_t d = depth[j], nd = next_depth;
      next_depth = d;
      const uint64_t x = dur[j];
      if (d >= kPredictDepth) {
        st.AddLength(x);
        continue;
      }
      const int di = static_cast<int>(d);
      uint64_t coded = x;
      if (nd > d) {
        const uint64_t children = ChildrenSum(acc, top, cur, di);
        coded = ZigZag(static_cast<int64_t>(x - children));
        dur[j] = coded;
      }
      st.AddLength(coded);
      AddToDepthSums(acc, top, cur, di, x);
    }
    end = begin;
  }
}

void ResidualsToDurations(uint64_t* v, const uint32_t* depth, const uint32_t* track, size_t n) {
  // The same walk as DurationsToResiduals, restoring each duration before it is summed; a track
  // run at a time, the next row's depth kept in a local (no per-row look at the tracks), and
  // the sum at the current depth (`top`) in a register, `cur`: siblings then add in a register
  // instead of through memory (a store and a load per row, which chained on each other).
  // acc[t + 1] holds depth t's sum (acc[0]: a slot for depth -1, written, never read).
  uint64_t acc[kPredictDepth + 2];
  size_t end = n;
  while (end > 0) {
    size_t begin = end - 1;
    while (begin > 0 && track[begin - 1] == track[end - 1]) --begin;
    int top = -1;
    uint64_t cur = 0;         // depth top's sum (acc[top + 1] is stale while top holds)
    uint32_t next_depth = 0;  // the run's last row has no next row: never a parent
    for (size_t j = end; j-- > begin;) {
      const uint32_t d = depth[j], nd = next_depth;
      next_depth = d;
      if (d >= kPredictDepth) continue;
      const int di = static_cast<int>(d);
      uint64_t x = v[j];
      if (nd > d) {
        const uint64_t children = ChildrenSum(acc, top, cur, di);
        x = children + static_cast<uint64_t>(UnZigZag(x));
        v[j] = x;
      }
      AddToDepthSums(acc, top, cur, di, x);
    }
    end = begin;
  }
}

}  // namespace tracedb::engine
