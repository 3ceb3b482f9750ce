// RemapBlock: a block's ids mapped without decoding its other columns, checked by decoding the
// result with DecodeBlock (the reader every query uses) against the rows that were encoded;
// damaged input (flipped bytes, a cut tail, an id the maps lack) is an error, never a crash.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/compact/shard_merge.h"
#include "engine/db/event_block.h"

namespace tracedb::engine {
namespace {

std::vector<Row> SomeRows() {
  std::vector<Row> rows;
  std::mt19937_64 rng(7);
  for (uint32_t track : {3u, 5u}) {
    int64_t ts = 1700000000000000000;
    for (uint64_t k = 0; k < 500; ++k) {
      Row r;
      r.track = track;
      r.k = k;
      r.ts = ts += 1000 + rng() % 5000;
      r.dur = static_cast<int64_t>(rng() % 100000);
      // Strings 1..4 at random: block format 4 entropy-codes such a name column (coding 1),
      // which the remap copies byte for byte (it holds dictionary indexes, not string ids).
      r.name = 1 + static_cast<uint32_t>(rng() % 4);
      r.cat = k % 3 == 0 ? 0 : 6;
      r.kind = k % 7 == 0 ? RowKind::kInstant : RowKind::kSpan;
      if (r.kind == RowKind::kInstant) r.dur = 0;
      if (k % 5 == 0) {
        r.args.mask = EventArgs::kBytes | EventArgs::kPeer;
        r.args.bytes = k * 64;
        r.args.peer = static_cast<int32_t>(k % 4);
      }
      if (k % 11 == 0) r.json = "{\"k\":" + std::to_string(k) + "}";
      rows.push_back(r);
    }
  }
  return rows;
}

std::vector<Row> Decode(const std::string& data) {
  DecodedBlock d;
  Status s = DecodeBlock(data, 1, &d, kColAll);
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<Row> out;
  for (size_t i = 0; s.ok() && i < d.n; ++i) out.push_back(d.RowAt(i));
  return out;
}

TEST(RemapBlock, MapsNamesCategoriesAndTracksOnly) {
  const std::vector<Row> rows = SomeRows();
  std::string block;
  BlockZone zone;
  EncodeBlock(rows, &block, &zone);
  IdMap strings(7, 0), tracks(6, 0);
  strings[1] = 40, strings[2] = 70000, strings[3] = 2, strings[4] = 99, strings[6] = 1;
  tracks[3] = 17, tracks[5] = 4;
  std::string out;
  bool changed = false;
  ASSERT_TRUE(RemapBlock(block, 1, strings, tracks, &out, &changed).ok());
  EXPECT_TRUE(changed);
  // Random durations: the entropy-coded ts and dur columns are the container's stored section
  // (codec 2), before and after the remap, which moves it by what the ids' varints gained.
  EXPECT_EQ(block[0], static_cast<char>(kBlockCodecLz4Stored));
  EXPECT_EQ(out[0], static_cast<char>(kBlockCodecLz4Stored));
  const std::vector<Row> before = Decode(block), after = Decode(out);
  ASSERT_EQ(before.size(), rows.size());
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(before[i].name, rows[i].name) << i;  // rows are in (track, k) order
    Row want = before[i];
    want.track = tracks[want.track];
    want.name = strings[want.name];
    want.cat = want.cat == 0 ? 0 : strings[want.cat];
    const Row& got = after[i];
    EXPECT_EQ(got.track, want.track) << i;
    EXPECT_EQ(got.name, want.name) << i;
    EXPECT_EQ(got.cat, want.cat) << i;
    EXPECT_EQ(got.ts, want.ts) << i;
    EXPECT_EQ(got.dur, want.dur) << i;
    EXPECT_EQ(got.k, want.k) << i;
    EXPECT_EQ(got.parent_k, want.parent_k) << i;
    EXPECT_EQ(got.depth, want.depth) << i;
    EXPECT_EQ(got.kind, want.kind) << i;
    EXPECT_EQ(got.args.mask, want.args.mask) << i;
    EXPECT_EQ(got.args.bytes, want.args.bytes) << i;
    EXPECT_EQ(got.args.peer, want.args.peer) << i;
    EXPECT_EQ(got.json, want.json) << i;
  }
}

TEST(RemapBlock, IdentityLeavesTheBlockAlone) {
  std::string block;
  BlockZone zone;
  EncodeBlock(SomeRows(), &block, &zone);
  IdMap strings(7), tracks(6);
  for (uint32_t i = 0; i < strings.size(); ++i) strings[i] = i;
  for (uint32_t i = 0; i < tracks.size(); ++i) tracks[i] = i;
  std::string out = "untouched";
  bool changed = true;
  ASSERT_TRUE(RemapBlock(block, 1, strings, tracks, &out, &changed).ok());
  EXPECT_FALSE(changed);
  EXPECT_EQ(out, "untouched");
}

TEST(RemapBlock, DamageIsAnError) {
  std::string block;
  BlockZone zone;
  EncodeBlock(SomeRows(), &block, &zone);
  IdMap strings(7, 50), tracks(6, 9);
  std::string out;
  bool changed;
  // An id the maps lack.
  IdMap short_tracks(4, 9);
  Status s = RemapBlock(block, 8, strings, short_tracks, &out, &changed);
  EXPECT_TRUE(s.IsCorruption()) << s.message();
  EXPECT_NE(s.message().find("block 8"), std::string::npos) << s.message();
  // Every cut is an error. A flipped byte is an error unless the block still decodes to the
  // same bytes (LZ4 has equivalent encodings: a match offset moved onto identical bytes passes
  // the CRC of the uncompressed payload): RemapBlock agrees with DecodeBlock, never crashes.
  for (size_t n = 0; n < block.size(); ++n) {
    EXPECT_FALSE(RemapBlock(block.substr(0, n), 1, strings, tracks, &out, &changed).ok()) << n;
  }
  std::mt19937 rng(3);
  int rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bad = block;
    const size_t at = rng() % bad.size();
    bad[at] ^= static_cast<char>(1 + rng() % 255);
    DecodedBlock d;
    const bool decodes = DecodeBlock(bad, 1, &d, kColAll).ok();
    const bool remaps = RemapBlock(bad, 1, strings, tracks, &out, &changed).ok();
    EXPECT_EQ(remaps, decodes) << i << ": byte " << at;
    rejected += !remaps;
  }
  EXPECT_GT(rejected, 2900);
}

}  // namespace
}  // namespace tracedb::engine
