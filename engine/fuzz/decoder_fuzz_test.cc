// The fuzz entry points run on mutations of valid inputs (seeded, so failures reproduce): whole
// segment files, segment block payloads past the CRC, and event block payloads past the CRC.
// libFuzzer explores further where clang is available (segment_fuzz, event_block_fuzz).
#include "engine/fuzz/decoder_fuzz.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include "engine/db/event_block.h"
#include "engine/segment/segment_blocks.h"
#include "engine/segment/segment_writer.h"
#include "engine/util/lz4_codec.h"
#include "tests/test_util.h"

namespace tracedb::engine {
namespace {

void Mutate(std::mt19937* rng, std::string* s) {
  const int edits = 1 + static_cast<int>((*rng)() % 8);
  for (int i = 0; i < edits && !s->empty(); ++i) {
    const size_t at = (*rng)() % s->size();
    switch ((*rng)() % 4) {
      case 0:
        (*s)[at] ^= static_cast<char>(1 << ((*rng)() % 8));
        break;
      case 1:
        (*s)[at] = static_cast<char>((*rng)());
        break;
      case 2:
        s->erase(at, 1 + (*rng)() % 4);
        break;
      default:
        s->insert(at, 1, static_cast<char>((*rng)()));
        break;
    }
  }
}

// Tallies outcomes; every input must end OK or in a clean error, and a mutation campaign that
// never reaches one of the two tests nothing.
struct Tally {
  uint64_t ok = 0, errors = 0;
  void Add(const fuzz::Result& r, const std::string& input) {
    ASSERT_NE(r.outcome, fuzz::Outcome::kUnclean)
        << r.detail << " (input of " << input.size() << " bytes)";
    (r.outcome == fuzz::Outcome::kOk ? ok : errors)++;
  }
  void ExpectBoth() {
    EXPECT_GT(ok, 0u);
    EXPECT_GT(errors, 0u);
  }
};

std::string EventsPayload() {
  EventsBlockEncoder enc;
  enc.Reset(3);
  EventArgs a;
  a.mask = EventArgs::kAllFields;
  for (int i = 0; i < 40; ++i) {
    enc.Add(EventKind::kBegin, 1, i * 100, 2, i % 2, i % 3 ? nullptr : &a);
    enc.AddWithInt(EventKind::kComplete, 4, i * 100 + 5, 3, 0, 50, &a);
    enc.AddCounter(0, i * 100 + 7, 4, 0, i * 0.5);
    enc.Add(EventKind::kEnd, 1, i * 100 + 90, 2, i % 2, nullptr);
  }
  std::string raw;
  enc.Finish(&raw);
  return raw;
}

TEST(DecoderFuzz, SegmentBlockPayloads) {
  std::vector<std::string> seeds;
  seeds.push_back(std::string(1, static_cast<char>(BlockType::kEvents)) + EventsPayload());
  SegmentMeta m;
  m.host = "h";
  std::string meta;
  EncodeMeta(m, &meta);
  seeds.push_back(std::string(1, static_cast<char>(BlockType::kMeta)) + meta);
  std::string strings;
  EncodeStrings(1, {"a", "bb", "ccc"}, &strings);
  seeds.push_back(std::string(1, static_cast<char>(BlockType::kStrings)) + strings);
  std::string comms;
  EncodeComms({{2, 3, 1, {0, 4, 7}}}, &comms);
  seeds.push_back(std::string(1, static_cast<char>(BlockType::kComms)) + comms);
  StepStat step;
  step.step = 4;
  step.start_ns = 1000;
  step.dur_ns = 50;
  step.events = 2;
  step.top = {{1, 40}, {3, 10}};
  std::string step_stats;
  EncodeStepStats({step}, &step_stats);
  seeds.push_back(std::string(1, static_cast<char>(BlockType::kStepStats)) + step_stats);
  std::mt19937 rng(2026);
  for (const std::string& seed : seeds) {
    Tally t;
    t.Add(fuzz::SegmentBlockPayload(reinterpret_cast<const uint8_t*>(seed.data()), seed.size()),
          seed);
    EXPECT_EQ(t.ok, 1u) << "the unmutated seed must decode";
    for (int i = 0; i < 4000 && !HasFatalFailure(); ++i) {
      std::string input = seed;
      Mutate(&rng, &input);
      t.Add(fuzz::SegmentBlockPayload(reinterpret_cast<const uint8_t*>(input.data()), input.size()),
            input);
    }
    t.ExpectBoth();
  }
}

// `random_names`: names drawn at random from 8 (block format 4 then entropy-codes the name
// column), else a repeating pattern of 3 (kept in varints).
void FuzzEventBlockPayload(bool random_names, uint32_t seed) {
  std::vector<Row> rows;
  std::mt19937 names_rng(seed);
  for (int i = 0; i < 200; ++i) {
    Row r;
    r.ts = 1000 + i * 10;
    r.dur = i % 5 * 3;
    r.track = 1 + i % 2;
    r.name = random_names ? 5 + names_rng() % 8 : 5 + i % 3;
    r.kind = static_cast<RowKind>(i % 4);
    r.k = static_cast<uint64_t>(i);
    r.depth = i % 3;
    if (i % 7 == 0) {
      r.args.mask = EventArgs::kAllFields;
      r.json = "{\"x\": 1}";
    }
    rows.push_back(r);
  }
  std::string blob;
  BlockZone zone;
  EncodeBlock(rows, &blob, &zone);
  // The uncompressed payload is what the decoder parses after the CRC.
  DecodedBlock whole;
  ASSERT_TRUE(DecodeBlock(blob, 1, &whole).ok());
  std::string raw;
  ASSERT_TRUE(UnpackBlock(blob, &raw).ok());
  {
    // The name coding byte (docs/database-format.md "Event blocks"), as the variant expects.
    Reader r(raw);
    uint8_t format;
    uint64_t n, scale, nnames, ncats, id;
    int64_t base;
    std::string_view col;
    ASSERT_TRUE(r.GetU8(&format) && r.GetVarint64(&n) && r.GetVarsigned(&base) &&
                r.GetVarint64(&scale) && r.GetVarint64(&nnames));
    for (uint64_t i = 0; i < nnames; ++i) ASSERT_TRUE(r.GetVarint64(&id));
    ASSERT_TRUE(r.GetVarint64(&ncats));
    for (uint64_t i = 0; i < ncats; ++i) ASSERT_TRUE(r.GetVarint64(&id));
    for (int c = 0; c <= 5; ++c) ASSERT_TRUE(r.GetLengthPrefixed(&col));
    ASSERT_EQ(format, 4);
    ASSERT_FALSE(col.empty());
    EXPECT_EQ(col[0], random_names ? 1 : 0);
  }
  std::mt19937 rng(seed);
  Tally t;
  t.Add(fuzz::EventBlockPayload(reinterpret_cast<const uint8_t*>(raw.data()), raw.size()), raw);
  EXPECT_EQ(t.ok, 1u) << "the unmutated block must decode";
  for (int i = 0; i < 20000 && !::testing::Test::HasFatalFailure(); ++i) {
    std::string input = raw;
    Mutate(&rng, &input);
    t.Add(fuzz::EventBlockPayload(reinterpret_cast<const uint8_t*>(input.data()), input.size()),
          input);
  }
  t.ExpectBoth();
}

TEST(DecoderFuzz, EventBlockPayloads) { FuzzEventBlockPayload(false, 11); }

TEST(DecoderFuzz, EventBlockPayloadsWithEntropyCodedNames) { FuzzEventBlockPayload(true, 12); }

TEST(DecoderFuzz, WholeSegmentFiles) {
  std::string file;
  EncodeFileHeader(9, 0, &file);
  const std::string events = EventsPayload();
  for (int i = 0; i < 3; ++i) {
    FrameBlock(BlockType::kEvents, Codec::kRaw, events, static_cast<uint32_t>(events.size()),
               &file);
  }
  std::mt19937 rng(5);
  Tally t;
  for (int i = 0; i < 3000 && !HasFatalFailure(); ++i) {
    std::string input = file;
    Mutate(&rng, &input);
    t.Add(fuzz::SegmentFile(reinterpret_cast<const uint8_t*>(input.data()), input.size()), input);
  }
  // Mutations of the file header are clean errors; elsewhere the scan skips and counts.
  t.ExpectBoth();
}

// The checked-in seed corpus (fixtures/fuzz/, written by write_fuzz_seeds) still decodes
// cleanly and completely: a format change that breaks it must rewrite it.
TEST(DecoderFuzz, SeedCorpusDecodes) {
  namespace fs = std::filesystem;
  const std::string root = testing::SourceRoot() + "/fixtures/fuzz";
  const std::pair<const char*, fuzz::Result (*)(const uint8_t*, size_t)> targets[] = {
      {"segment_file_fuzz", fuzz::SegmentFile},
      {"segment_block_payload_fuzz", fuzz::SegmentBlockPayload},
      {"event_block_payload_fuzz", fuzz::EventBlockPayload}};
  for (const auto& [dir, entry] : targets) {
    size_t seeds = 0;
    ASSERT_TRUE(fs::is_directory(root + "/" + dir)) << root << "/" << dir;
    for (const auto& f : fs::directory_iterator(root + "/" + dir)) {
      const std::string bytes = testing::ReadFile(f.path().string());
      const fuzz::Result r = entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      EXPECT_EQ(r.outcome, fuzz::Outcome::kOk) << f.path() << ": " << r.detail;
      ++seeds;
    }
    EXPECT_GE(seeds, 1u) << dir;
  }
}

}  // namespace
}  // namespace tracedb::engine
