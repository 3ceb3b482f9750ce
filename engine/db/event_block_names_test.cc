// Block format 4's name column (docs/database-format.md "Event blocks"): a coding byte, then the
// block-local name indexes in varints or in entropy-coded bit lengths, whichever the encoder
// finds smaller. The blocks are taken apart here with a parser of the test's own (header,
// dictionaries, length-prefixed columns), so that the name column's bytes are checked against
// sizes computed independently of the encoder (the varints LZ4-compressed by the test), and so
// that hostile columns can be put back into an otherwise valid block.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/db/event_block.h"
#include "engine/util/coding.h"
#include "engine/util/crc32c.h"
#include "engine/util/lz4_codec.h"

namespace tracedb::engine {
namespace {

constexpr size_t kNameCol = 5;  // the columns' order: tracks, k, parent, depth, kind, name, ...

// A block's payload taken apart.
struct Payload {
  uint8_t format = 0;
  std::string header;  // from n to the end of the category dictionary
  std::vector<uint32_t> names;
  std::vector<std::string> cols;
};

bool Unwrap(const std::string& blob, std::string* raw) { return UnpackBlock(blob, raw).ok(); }

bool Parse(const std::string& blob, Payload* p) {
  std::string raw;
  if (!Unwrap(blob, &raw)) return false;
  Reader r(raw);
  uint64_t n, scale, nnames, ncats;
  int64_t base;
  if (!r.GetU8(&p->format)) return false;
  const char* start = r.data();
  if (!r.GetVarint64(&n) || !r.GetVarsigned(&base) || !r.GetVarint64(&scale) ||
      !r.GetVarint64(&nnames)) {
    return false;
  }
  p->names.resize(nnames);
  for (uint32_t& id : p->names) {
    if (!r.GetVarint32(&id)) return false;
  }
  if (!r.GetVarint64(&ncats)) return false;
  for (uint64_t i = 0; i < ncats; ++i) {
    uint32_t id;
    if (!r.GetVarint32(&id)) return false;
  }
  p->header.assign(start, static_cast<size_t>(r.data() - start));
  p->cols.clear();
  for (int c = 0; c < 13; ++c) {
    std::string_view col;
    if (!r.GetLengthPrefixed(&col)) return false;
    p->cols.emplace_back(col);
  }
  return r.empty();
}

// The payload put back together, LZ4-compressed as the encoder does (or raw), with its CRC.
std::string Assemble(const Payload& p, bool lz4 = true) {
  std::string raw;
  raw.push_back(static_cast<char>(p.format));
  raw += p.header;
  for (const std::string& c : p.cols) {
    PutVarint64(&raw, c.size());
    raw += c;
  }
  std::string blob;
  std::string compressed;
  const bool use_lz4 = lz4 && Lz4Compress(raw, &compressed).ok();
  blob.push_back(static_cast<char>(use_lz4 ? 1 : 0));
  PutVarint64(&blob, raw.size());
  PutFixed32(&blob, Crc32c(raw.data(), raw.size()));
  blob += use_lz4 ? compressed : raw;
  return blob;
}

// n spans on 2 tracks, in (track, k) order, at depth 0, with the name ids `names`.
std::vector<Row> Spans(const std::vector<uint32_t>& names) {
  std::vector<Row> rows(names.size());
  const size_t half = names.size() / 2;
  for (size_t i = 0; i < names.size(); ++i) {
    Row& r = rows[i];
    r.track = i < half ? 1 : 2;
    r.k = i < half ? i : i - half;
    r.ts = 1000000 + static_cast<int64_t>(r.k) * 1000;
    r.dur = 100 + static_cast<int64_t>(i % 37);
    r.name = names[i];
    r.cat = 3;
  }
  return rows;
}

// The block-local index of each row's name (its place in the block's name dictionary), as
// varints: the name column of formats 1-3.
std::string VarintIndexes(const std::vector<Row>& rows, const std::vector<uint32_t>& dict) {
  std::string out;
  for (const Row& r : rows) {
    size_t idx = 0;
    while (idx < dict.size() && dict[idx] != r.name) ++idx;
    EXPECT_LT(idx, dict.size()) << "name " << r.name << " not in the block's dictionary";
    PutVarint64(&out, idx);
  }
  return out;
}

size_t Lz4Size(const std::string& s) {
  std::string out;
  EXPECT_TRUE(Lz4Compress(s, &out).ok());
  return out.size();
}

// Order-0 entropy of the names, in bytes.
double EntropyBytes(const std::vector<uint32_t>& names) {
  std::map<uint32_t, double> count;
  for (uint32_t x : names) count[x] += 1;
  double bits = 0;
  for (const auto& kv : count) bits -= kv.second * std::log2(kv.second / names.size());
  return bits / 8;
}

void ExpectDecodesTo(const std::string& blob, const std::vector<Row>& rows) {
  DecodedBlock d;
  ASSERT_TRUE(DecodeBlock(blob, 1, &d).ok());
  ASSERT_EQ(d.n, rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(d.name[i], rows[i].name) << i;
    ASSERT_EQ(d.track[i], rows[i].track) << i;
    ASSERT_EQ(d.ts[i], rows[i].ts) << i;
    ASSERT_EQ(d.dur[i], rows[i].dur) << i;
    ASSERT_EQ(d.cat[i], rows[i].cat) << i;
    ASSERT_EQ(d.k[i], rows[i].k) << i;
  }
}

std::vector<uint32_t> UniformNames(size_t n, uint32_t distinct, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> v(n);
  for (uint32_t& x : v) x = 100 + rng() % distinct;
  return v;
}

// The block's name column and what it would be in varints (coding byte excluded).
struct NameColumn {
  uint8_t coding = 255;
  size_t bytes = 0;         // the column after the coding byte
  size_t varint_lz4 = 0;    // the varint column alone, LZ4-compressed by the test
  size_t blob = 0;          // the whole block
  size_t format3_blob = 0;  // the same block with the name column in varints, as format 3
};

NameColumn Measure(const std::vector<Row>& rows) {
  std::string blob;
  BlockZone zone;
  EncodeBlock(rows, &blob, &zone);
  Payload p;
  NameColumn m;
  EXPECT_TRUE(Parse(blob, &p));
  EXPECT_EQ(p.format, 4);
  if (p.cols.size() != 13 || p.cols[kNameCol].empty()) return m;
  ExpectDecodesTo(blob, rows);
  m.coding = static_cast<uint8_t>(p.cols[kNameCol][0]);
  m.bytes = p.cols[kNameCol].size() - 1;
  const std::string varints = VarintIndexes(rows, p.names);
  m.varint_lz4 = Lz4Size(varints);
  m.blob = blob.size();
  // Format 3 differs only in its name column (varints, no coding byte): that block decodes to
  // the same rows, and is what format 3 would have stored.
  Payload v3 = p;
  v3.format = 3;
  v3.cols[kNameCol] = varints;
  const std::string blob3 = Assemble(v3);
  ExpectDecodesTo(blob3, rows);
  m.format3_blob = blob3.size();
  return m;
}

TEST(EventBlockNames, UniformRandomNamesAreEntropyCoded) {
  const std::vector<uint32_t> names = UniformNames(65536, 8, 1);
  const NameColumn m = Measure(Spans(names));
  EXPECT_EQ(m.coding, 1);
  // 3 bits a name: the column at its entropy (the table's few bytes above it), well under what
  // LZ4 makes of the varints. With counts estimated from sampled votes the code came out
  // lopsided: 3.14 bits a name (4.5% over).
  const double entropy = EntropyBytes(names);
  EXPECT_GT(entropy, 65536 * 3 / 8 * 0.99);
  EXPECT_LT(m.bytes, entropy * 1.005 + 64) << "entropy " << entropy;
  EXPECT_LT(m.bytes * 3 / 2, m.varint_lz4);
  // The whole block: smaller than format 3's by about what the column saves.
  ASSERT_LT(m.blob, m.format3_blob);
  EXPECT_GT(m.format3_blob - m.blob, (m.varint_lz4 - m.bytes) / 2);
}

TEST(EventBlockNames, SkewedRandomNamesAreEntropyCoded) {
  // Name j with probability about 2^-(j+1) (j < 12): entropy about 2 bits a name.
  std::mt19937 rng(2);
  std::vector<uint32_t> names(40000);
  for (uint32_t& x : names) {
    uint32_t j = 0;
    while (j < 11 && (rng() & 1)) ++j;
    x = 500 + j * 7;
  }
  const NameColumn m = Measure(Spans(names));
  EXPECT_EQ(m.coding, 1);
  EXPECT_LT(m.bytes, EntropyBytes(names) * 1.02 + 64) << "entropy " << EntropyBytes(names);
  EXPECT_LT(m.bytes, m.varint_lz4);
  EXPECT_LT(m.blob, m.format3_blob);
}

TEST(EventBlockNames, ManyNamesInMultiByteVarintsRoundTrip) {
  // 300 names: indexes of 128 and more are 2-byte varints, and most are not among the
  // entropy coder's 8 frequent values (coded by their bit length).
  const std::vector<uint32_t> names = UniformNames(30000, 300, 3);
  const NameColumn m = Measure(Spans(names));
  EXPECT_EQ(m.coding, 1);
  EXPECT_LT(m.bytes, m.varint_lz4);
  EXPECT_LT(m.blob, m.format3_blob);
}

TEST(EventBlockNames, RepeatingPatternsKeepTheVarints) {
  // A step of 8 phases repeated (db_bench_gen's shape): LZ4 takes the varints to almost nothing,
  // far less than the 3 bits a name of any entropy coding.
  std::vector<uint32_t> pattern(65536);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = 10 + static_cast<uint32_t>(i % 8);
  const NameColumn m = Measure(Spans(pattern));
  EXPECT_EQ(m.coding, 0);
  EXPECT_LE(m.blob, m.format3_blob + 1) << "the coding byte is all format 4 adds";
  // A single name: the entropy coding holds no code bits at all (a few bytes of table), less
  // than LZ4's run of zeros (a byte per 255).
  const NameColumn one = Measure(Spans(std::vector<uint32_t>(65536, 42)));
  EXPECT_EQ(one.coding, 1);
  EXPECT_LT(one.bytes, 16u);
  EXPECT_LT(one.blob, one.format3_blob);
  // A small block: the margin keeps its varints (and it round-trips).
  const NameColumn small = Measure(Spans(UniformNames(10, 3, 4)));
  EXPECT_EQ(small.coding, 0);
}

TEST(EventBlockNames, NamesDecodeWithoutTsAndDur) {
  const std::vector<uint32_t> names = UniformNames(5000, 8, 5);
  std::string blob;
  BlockZone zone;
  EncodeBlock(Spans(names), &blob, &zone);
  DecodedBlock d;
  ASSERT_TRUE(DecodeBlock(blob, 1, &d, kColName).ok());
  EXPECT_TRUE(d.has(kColName));
  EXPECT_FALSE(d.has(kColTs));
  EXPECT_FALSE(d.has(kColDur));
  EXPECT_EQ(std::vector<uint32_t>(d.name.begin(), d.name.end()), names);
}

// Hostile name columns in an otherwise valid format 4 block: Corruption naming the block and
// the column, never a crash or a read past the column.
TEST(EventBlockNames, HostileNameColumnsAreCorruption) {
  const std::vector<uint32_t> names = UniformNames(3000, 8, 6);
  const std::vector<Row> rows = Spans(names);
  std::string blob;
  BlockZone zone;
  EncodeBlock(rows, &blob, &zone);
  Payload p;
  ASSERT_TRUE(Parse(blob, &p));
  ASSERT_EQ(p.cols[kNameCol][0], 1);
  const std::string good = p.cols[kNameCol];
  std::vector<uint64_t> idx(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    idx[i] = std::find(p.names.begin(), p.names.end(), rows[i].name) - p.names.begin();
  }
  auto entropy_col = [](const std::vector<uint64_t>& v) {
    std::string c(1, '\x01');
    PutHuffmanBitLengthColumn(v.data(), v.size(), &c);
    return c;
  };
  ASSERT_EQ(entropy_col(idx), good) << "the test's column is the encoder's";
  std::vector<std::pair<std::string, std::string>> bad = {
      {"empty column", ""},
      {"coding byte 2", "\x02" + good.substr(1)},
      {"coding byte 255", "\xff" + good.substr(1)},
      {"entropy column cut by a byte", good.substr(0, good.size() - 1)},
      {"entropy column cut to its table", good.substr(0, 8)},
      {"only the coding byte", good.substr(0, 1)},
      {"a byte after the entropy column", good + '\0'},
      {"varints read as an entropy column", "\x01" + VarintIndexes(rows, p.names)},
      {"entropy column read as varints", std::string(1, '\0') + good.substr(1)},
  };
  // (A count off by one value can hide in the last byte's padding, where a column of n values
  // and one of n + 1 can be the same bytes: 20 off cannot.)
  std::vector<uint64_t> fewer(idx.begin(), idx.end() - 20), more = idx;
  more.resize(idx.size() + 20, 3);
  bad.emplace_back("20 values fewer than rows", entropy_col(fewer));
  bad.emplace_back("20 values more than rows", entropy_col(more));
  std::vector<uint64_t> out_of_range = idx;
  out_of_range[1234] = p.names.size();  // one past the dictionary
  bad.emplace_back("an index past the dictionary", entropy_col(out_of_range));
  out_of_range[1234] = uint64_t{1} << 40;
  bad.emplace_back("a huge index", entropy_col(out_of_range));
  for (const auto& [what, col] : bad) {
    Payload q = p;
    q.cols[kNameCol] = col;
    for (const uint32_t want : {static_cast<uint32_t>(kColName), static_cast<uint32_t>(kColAll)}) {
      DecodedBlock d;
      const Status s = DecodeBlock(Assemble(q), 77, &d, want);
      EXPECT_FALSE(s.ok()) << what;
      EXPECT_TRUE(s.IsCorruption()) << what;
      EXPECT_NE(s.message().find("event block 77"), std::string::npos) << what << s.message();
      EXPECT_NE(s.message().find("name"), std::string::npos) << what << s.message();
    }
  }
  // The other columns of such a block still decode (selective decoding).
  Payload q = p;
  q.cols[kNameCol] = "\x07";
  DecodedBlock d;
  ASSERT_TRUE(DecodeBlock(Assemble(q), 77, &d, kColTs | kColDur).ok());
  EXPECT_EQ(d.ts[2999], rows[2999].ts);
  EXPECT_FALSE(d.Need(kColName).ok());
  // A format 3 block with a leading byte in its name column is read as format 3 reads it.
  Payload v3 = p;
  v3.format = 3;
  v3.cols[kNameCol] = std::string(1, '\0') + VarintIndexes(rows, p.names);
  EXPECT_FALSE(DecodeBlock(Assemble(v3), 77, &d, kColName).ok());
  v3.format = 5;  // not a format
  v3.cols[kNameCol] = good;
  EXPECT_FALSE(DecodeBlock(Assemble(v3), 77, &d, kColName).ok());
}

}  // namespace
}  // namespace tracedb::engine
