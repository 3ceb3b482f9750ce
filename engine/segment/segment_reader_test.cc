#include "engine/segment/segment_reader.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <tuple>

#include "engine/segment/segment_blocks.h"
#include "engine/segment/segment_writer.h"
#include "engine/util/coding.h"
#include "engine/util/crc32c.h"
#include "engine/util/lz4_codec.h"
#include "tests/test_util.h"

namespace tracedb::engine {
namespace {

using tracedb::testing::ReadFile;
using tracedb::testing::TempDir;
using tracedb::testing::WriteFile;

class CountingVisitor : public SegmentVisitor {
 public:
  void OnMeta(const SegmentMeta& m) override { metas++; }
  void OnStrings(uint32_t, const std::vector<std::string>& s) override { strings += s.size(); }
  void OnEvents(uint32_t, const std::vector<SegmentEvent>& e) override {
    blocks++;
    for (const auto& x : e) ts.push_back(x.ts);
  }
  void OnEnd(const SegmentEnd&) override { ends++; }
  int metas = 0, ends = 0;
  size_t strings = 0, blocks = 0;
  std::vector<int64_t> ts;
};

// A segment's first blocks: META (host "h"), then STRINGS 1 and 2 ("forward", "backward").
void WriteHead(SegmentWriter* w) {
  std::string raw;
  SegmentMeta m;
  m.host = "h";
  EncodeMeta(m, &raw);
  w->AppendBlock(BlockType::kMeta, raw, false);
  raw.clear();
  EncodeStrings(1, {"forward", "backward"}, &raw);
  w->AppendBlock(BlockType::kStrings, raw, true);
}

// Writes a segment with META, STRINGS, `nblocks` EVENTS blocks of 100 events, END.
// Returns the offsets where each EVENTS block starts.
std::vector<uint64_t> WriteSample(const std::string& path, int nblocks, bool end = true) {
  SegmentWriter w;
  EXPECT_TRUE(w.Open(path, 77, 0).ok());
  WriteHead(&w);
  std::string raw;
  std::vector<uint64_t> offsets;
  EventsBlockEncoder enc;
  for (int b = 0; b < nblocks; ++b) {
    enc.Reset(1);
    for (int i = 0; i < 100; ++i) enc.Add(EventKind::kInstant, 0, b * 1000 + i, 1, 0, nullptr);
    raw.clear();
    enc.Finish(&raw);
    offsets.push_back(w.size());
    w.AppendBlock(BlockType::kEvents, raw, true);
  }
  if (end) {
    raw.clear();
    EncodeEnd({static_cast<uint64_t>(nblocks) * 100}, &raw);
    w.AppendBlock(BlockType::kEnd, raw, false);
  }
  EXPECT_TRUE(w.Close().ok());
  return offsets;
}

// "Writer lock": held from Open() to Close(); a forked child's Abandon() keeps the parent's.
TEST(SegmentWriterLock, TellsALiveWriterFromAGoneOne) {
  TempDir tmp;
  const std::string path = tmp.Sub("seg-1-000000.tds");
  EXPECT_EQ(ProbeSegmentWriter(path), WriterState::kUnknown);  // no such file
  SegmentWriter w;
  ASSERT_TRUE(w.Open(path, 1, 0).ok());
  ASSERT_TRUE(w.locked());
  ASSERT_TRUE(w.Flush().ok());
  EXPECT_EQ(ProbeSegmentWriter(path), WriterState::kAlive);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    w.Abandon();
    _exit(ProbeSegmentWriter(path) == WriterState::kAlive ? 0 : 1);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the child's Abandon() unlocked";
  EXPECT_EQ(ProbeSegmentWriter(path), WriterState::kAlive);
  ASSERT_TRUE(w.Close().ok());
  EXPECT_EQ(ProbeSegmentWriter(path), WriterState::kGone);

  // A writer that dies (here: its descriptor closed without END) releases the lock too.
  const std::string path2 = tmp.Sub("seg-1-000001.tds");
  SegmentWriter w2;
  ASSERT_TRUE(w2.Open(path2, 1, 1).ok());
  ASSERT_TRUE(w2.Flush().ok());
  EXPECT_EQ(ProbeSegmentWriter(path2), WriterState::kAlive);
  w2.Abandon();
  EXPECT_EQ(ProbeSegmentWriter(path2), WriterState::kGone);
}

TEST(SegmentWriter, RefusesABlockTooLargeForTheFormat) {
  TempDir tmp;
  const std::string path = tmp.Sub("seg-1-000000.tds");
  SegmentWriter w;
  ASSERT_TRUE(w.Open(path, 1, 0).ok());
  std::string raw;
  EncodeEnd({0}, &raw);
  w.AppendBlock(BlockType::kEnd, std::string(kMaxRawBlockBytes + 1, 'x'), true);
  w.AppendBlock(BlockType::kEnd, raw, false);
  const Status s = w.Flush();
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  ASSERT_TRUE(w.Close().ok());
  // The accepted block was written, the refused one was not.
  CountingVisitor v;
  auto scan = ScanSegment(path, &v);
  ASSERT_TRUE(scan.ok()) << scan.status().ToString();
  EXPECT_EQ(scan->blocks, 1u);
  EXPECT_EQ(v.ends, 1);
  EXPECT_EQ(scan->corrupt_blocks, 0u);
}

// A hostile file: 100K "TDBK" candidates, each claiming a payload to the end of the file with a
// bad CRC, then one valid block. Checking each candidate's CRC directly would sum ~100 GB; the
// scan must stay linear in the file and still find the valid block at the end.
TEST(SegmentReader, ResynchronisationIsLinearInTheFileSize) {
  std::string end_raw;
  EncodeEnd({0}, &end_raw);
  std::string valid;
  FrameBlock(BlockType::kEnd, Codec::kRaw, end_raw, static_cast<uint32_t>(end_raw.size()), &valid);
  std::string file;
  EncodeFileHeader(1, 0, &file);
  const size_t candidates = 100000;
  const size_t size = file.size() + candidates * kBlockHeaderSize + valid.size();
  for (size_t i = 0; i < candidates; ++i) {
    const size_t at = file.size();
    const uint32_t stored = static_cast<uint32_t>(size - at - kBlockHeaderSize);
    PutFixed32(&file, kBlockMagic);
    file.push_back(static_cast<char>(BlockType::kEvents));
    file.push_back(0);
    PutFixed16(&file, 0);
    PutFixed32(&file, std::min<uint32_t>(stored, kMaxStoredBlockBytes));
    PutFixed32(&file, std::min<uint32_t>(stored, kMaxStoredBlockBytes));
    PutFixed32(&file, 0xdeadbeef);  // wrong CRC
  }
  file += valid;
  ASSERT_EQ(file.size(), size);
  CountingVisitor v;
  auto scan = ScanSegmentBytes("hostile", file, &v);
  ASSERT_TRUE(scan.ok()) << scan.status().ToString();
  EXPECT_EQ(v.ends, 1);
  EXPECT_TRUE(scan->closed);
  EXPECT_EQ(scan->corrupt_blocks, 1u);
  EXPECT_EQ(scan->corrupt_bytes, candidates * kBlockHeaderSize);
  // Linear: a small multiple of the file (the quadratic scan summed ~size * candidates / 2).
  EXPECT_LE(scan->crc_work_bytes, 40 * size) << scan->crc_work_bytes;
  RecordProperty("crc_work_per_byte", static_cast<int>(scan->crc_work_bytes / size));
}

TEST(SegmentReader, ReadsEveryBlock) {
  TempDir tmp;
  const std::string path = tmp.Sub("seg-77-000000.tds");
  WriteSample(path, 5);
  CountingVisitor v;
  auto scan = ScanSegment(path, &v);
  ASSERT_TRUE(scan.ok()) << scan.status().ToString();
  EXPECT_EQ(scan->pid, 77u);
  EXPECT_EQ(v.metas, 1);
  EXPECT_EQ(v.strings, 2u);
  EXPECT_EQ(v.ts.size(), 500u);
  EXPECT_TRUE(scan->closed);
  EXPECT_EQ(scan->corrupt_blocks, 0u);
  EXPECT_EQ(scan->torn_tail_bytes, 0u);
  EXPECT_EQ(scan->end_offset, scan->file_size);
  EXPECT_EQ(scan->events, 500u);
}

// ScanOptions::event_chunk hands each block on in calls of at most N events: the same events in
// the same order as whole blocks, ceil(100 / N) calls per 100-event block.
TEST(SegmentReader, ChunkedEventsEqualWholeBlocks) {
  TempDir tmp;
  const std::string path = tmp.Sub("seg-77-000000.tds");
  WriteSample(path, 5);
  CountingVisitor whole;
  ASSERT_TRUE(ScanSegment(path, &whole).ok());
  ASSERT_EQ(whole.ts.size(), 500u);
  EXPECT_EQ(whole.blocks, 5u);
  for (size_t chunk : {1, 30, 100, 4096}) {
    CountingVisitor v;
    ScanOptions o;
    o.event_chunk = chunk;
    auto scan = ScanSegment(path, &v, o);
    ASSERT_TRUE(scan.ok()) << scan.status().ToString();
    EXPECT_EQ(v.ts, whole.ts) << chunk;
    EXPECT_EQ(v.blocks, 5 * ((100 + chunk - 1) / chunk)) << chunk;
    EXPECT_EQ(scan->events, 500u);
    EXPECT_EQ(scan->corrupt_blocks, 0u);
  }
}

// ReadBuffer: room for what is asked, at least a byte; it grows to whole 2 MiB pages past one
// and never shrinks; every byte of the room can be written and read back.
TEST(ReadBuffer, GrowsAndKeepsItsRoom) {
  ReadBuffer b;
  EXPECT_EQ(b.capacity(), 0u);
  char* p = b.Reserve(0);
  ASSERT_NE(p, nullptr);
  EXPECT_GE(b.capacity(), 1u);
  p = b.Reserve(5000);
  ASSERT_NE(p, nullptr);
  EXPECT_GE(b.capacity(), 5000u);
  const size_t want = (size_t{3} << 20) + 1;
  p = b.Reserve(want);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(b.capacity(), size_t{4} << 20);
  for (size_t i = 0; i < want; i += i < 100 ? 1 : 4093) p[i] = static_cast<char>(i);
  EXPECT_EQ(b.Reserve(want), p);  // no larger: the same room, its bytes kept
  EXPECT_EQ(b.Reserve(100), p);
  EXPECT_EQ(b.capacity(), size_t{4} << 20);
  for (size_t i = 0; i < 100; ++i) ASSERT_EQ(p[i], static_cast<char>(i));
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  // Past the 100 bytes asked for: a reader running off a file's bytes is caught.
  EXPECT_DEATH((void)*static_cast<volatile char*>(p + 100), "use-after-poison");
#endif
#endif
  // Below 2 MiB, a heap block: the same room, reused and fenced the same way.
  ReadBuffer small;
  char* q = small.Reserve(5000);
  ASSERT_NE(q, nullptr);
  std::memset(q, 1, 5000);
  EXPECT_EQ(small.Reserve(100), q);
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  EXPECT_DEATH((void)*static_cast<volatile char*>(q + 100), "use-after-poison");
#endif
#endif
  EXPECT_EQ(small.Reserve(5000), q);
  q[4999] = 2;  // all of it usable again
  EXPECT_EQ(q[4998], 1);
  // Growing, by half at least: blocks of slowly growing sizes get few new buffers.
  ReadBuffer grows;
  ASSERT_NE(grows.Reserve(100000), nullptr);
  ASSERT_NE(grows.Reserve(100001), nullptr);
  EXPECT_GE(grows.capacity(), 150000u);
  char* const r = grows.Reserve(140000);
  EXPECT_EQ(grows.Reserve(150000), r);
}

// One ScanBuffers for many scans (compaction's two passes over every file): a small file, a
// large one (the buffers grow), a damaged one and the small one again (they are reused), each in
// rows, in columns and as a catalog, read exactly as scans with buffers of their own read them.
TEST(SegmentReader, SharedBuffersReadEachFileAsItsOwnDo) {
  TempDir tmp;
  const std::string large = tmp.Sub("seg-77-000000.tds");
  const std::string small = tmp.Sub("seg-77-000001.tds");
  const std::string damaged = tmp.Sub("seg-77-000002.tds");
  WriteSample(large, 40000);
  WriteSample(small, 3);
  WriteSample(damaged, 40, /*end=*/false);
  std::string bytes = ReadFile(damaged);
  ASSERT_GT(ReadFile(large).size(), size_t{2} << 20);  // past a huge page
  bytes[bytes.size() / 2] ^= 0x5a;
  bytes.resize(bytes.size() - 7);  // a torn tail too
  WriteFile(damaged, bytes);

  class ColumnVisitor : public CountingVisitor {
   public:
    void OnEventColumns(uint32_t, const EventColumns& c) override {
      blocks++;
      ts.insert(ts.end(), c.ts.begin(), c.ts.begin() + static_cast<ptrdiff_t>(c.n));
    }
  };
  auto scan_with = [](const std::string& path, ScanOptions o, ScanBuffers* buffers,
                      std::vector<int64_t>* ts) {
    ColumnVisitor columns;
    CountingVisitor rows;
    SegmentVisitor* v = o.event_columns ? static_cast<SegmentVisitor*>(&columns) : &rows;
    o.buffers = buffers;
    auto scan = ScanSegment(path, v, o);
    EXPECT_TRUE(scan.ok()) << path << ": " << scan.status().ToString();
    *ts = o.event_columns ? columns.ts : rows.ts;
    return scan.ok() ? std::make_tuple(scan->events, scan->blocks, scan->corrupt_blocks,
                                       scan->torn_tail_bytes, scan->end_offset, scan->closed)
                     : std::make_tuple(uint64_t{0}, uint64_t{0}, uint64_t{0}, uint64_t{0},
                                       uint64_t{0}, false);
  };
  ScanBuffers shared;
  for (const std::string& path : {small, large, damaged, small}) {
    for (int mode = 0; mode < 3; ++mode) {
      ScanOptions o;
      o.events = mode != 2;
      o.event_columns = mode == 1;
      o.event_chunk = mode == 1 ? 64 : 0;
      std::vector<int64_t> own_ts, shared_ts;
      const auto own = scan_with(path, o, nullptr, &own_ts);
      const auto got = scan_with(path, o, &shared, &shared_ts);
      EXPECT_EQ(got, own) << path << " mode " << mode;
      EXPECT_EQ(shared_ts, own_ts) << path << " mode " << mode;
      if (mode != 2 && path != damaged) {
        EXPECT_EQ(shared_ts.size(), std::get<0>(own));
      }
    }
  }
  EXPECT_GE(shared.file.capacity(), ReadFile(large).size());
}

TEST(SegmentReader, TornTailAtEveryOffsetKeepsWholeBlocks) {
  TempDir tmp;
  const std::string path = tmp.Sub("full.tds");
  const auto offsets = WriteSample(path, 4, /*end=*/false);
  const std::string bytes = ReadFile(path);
  // Cut anywhere inside the last block: the first three blocks survive.
  for (uint64_t cut = offsets[3] + 1; cut < bytes.size(); ++cut) {
    CountingVisitor v;
    auto scan = ScanSegmentBytes("cut", std::string_view(bytes.data(), cut), &v);
    ASSERT_TRUE(scan.ok());
    EXPECT_EQ(v.ts.size(), 300u) << cut;
    EXPECT_EQ(scan->torn_tail_bytes, cut - offsets[3]) << cut;
    EXPECT_EQ(scan->corrupt_blocks, 0u) << cut;
    EXPECT_EQ(scan->end_offset, offsets[3]) << cut;
    EXPECT_FALSE(scan->closed);
  }
}

TEST(SegmentReader, FlippedByteSkipsOnlyThatBlock) {
  TempDir tmp;
  const std::string path = tmp.Sub("flip.tds");
  const auto offsets = WriteSample(path, 4);
  const std::string bytes = ReadFile(path);
  // Flip every byte of block 1 (header and payload) in turn.
  for (uint64_t pos = offsets[1]; pos < offsets[2]; ++pos) {
    std::string bad = bytes;
    bad[pos] ^= 0x40;
    CountingVisitor v;
    auto scan = ScanSegmentBytes("flip", bad, &v);
    ASSERT_TRUE(scan.ok());
    EXPECT_EQ(v.ts.size(), 300u) << pos;
    EXPECT_EQ(scan->corrupt_blocks, 1u) << pos;
    EXPECT_TRUE(scan->closed) << pos;
    ASSERT_FALSE(scan->problems.empty());
    // Blocks 0, 2 and 3 are intact.
    EXPECT_EQ(v.ts.front(), 0);
    EXPECT_EQ(v.ts.back(), 3099);
  }
}

TEST(SegmentReader, AnyFlippedByteNeverCrashes) {
  TempDir tmp;
  const std::string path = tmp.Sub("any.tds");
  WriteSample(path, 3);
  const std::string bytes = ReadFile(path);
  for (uint64_t pos = 0; pos < bytes.size(); ++pos) {
    for (int bit : {0, 7}) {
      std::string bad = bytes;
      bad[pos] ^= static_cast<char>(1 << bit);
      CountingVisitor v;
      auto scan = ScanSegmentBytes("any", bad, &v);
      if (pos < kFileHeaderSize) {
        EXPECT_FALSE(scan.ok()) << pos;  // the file header is checked by magic and CRC
      } else {
        ASSERT_TRUE(scan.ok());
        EXPECT_GE(v.ts.size(), 200u) << pos;
      }
    }
  }
}

TEST(SegmentReader, WrongVersionIsAClearError) {
  TempDir tmp;
  const std::string path = tmp.Sub("ver.tds");
  WriteSample(path, 1);
  std::string bytes = ReadFile(path);
  bytes[8] = 2;  // version field
  EncodeFixed32(&bytes[28], Crc32c(bytes.data(), 28));
  CountingVisitor v;
  auto scan = ScanSegmentBytes("ver.tds", bytes, &v);
  ASSERT_FALSE(scan.ok());
  EXPECT_TRUE(scan.status().IsCorruption());
  EXPECT_NE(scan.status().message().find("version 2"), std::string::npos)
      << scan.status().message();
  EXPECT_NE(scan.status().message().find("ver.tds"), std::string::npos);
}

TEST(SegmentReader, NotASegmentIsAClearError) {
  CountingVisitor v;
  auto scan = ScanSegmentBytes("x.json", std::string(100, '{'), &v);
  ASSERT_FALSE(scan.ok());
  EXPECT_NE(scan.status().message().find("bad magic"), std::string::npos);
  auto short_scan = ScanSegmentBytes("tiny", "TDB", &v);
  EXPECT_FALSE(short_scan.ok());
  auto missing = ScanSegment("/nonexistent/seg.tds", &v);
  EXPECT_FALSE(missing.ok());
}

TEST(SegmentReader, ResumesFromEndOffset) {
  TempDir tmp;
  const std::string path = tmp.Sub("grow.tds");
  const auto offsets = WriteSample(path, 4, /*end=*/false);
  const std::string bytes = ReadFile(path);
  CountingVisitor first;
  auto s1 = ScanSegmentBytes("grow", std::string_view(bytes.data(), offsets[2] + 10), &first);
  ASSERT_TRUE(s1.ok());
  EXPECT_EQ(first.ts.size(), 200u);
  CountingVisitor second;
  auto s2 = ScanSegmentBytes("grow", bytes, &second, s1->end_offset);
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(second.ts.size(), 200u);
  EXPECT_EQ(second.ts.front(), 2000);
  EXPECT_EQ(second.metas, 0);
}

TEST(SegmentReader, CorruptLengthFieldResynchronises) {
  TempDir tmp;
  const std::string path = tmp.Sub("len.tds");
  const auto offsets = WriteSample(path, 4);
  std::string bytes = ReadFile(path);
  EncodeFixed32(&bytes[offsets[1] + 8], 0x7fffff);  // stored length far past the end
  CountingVisitor v;
  auto scan = ScanSegmentBytes("len", bytes, &v);
  ASSERT_TRUE(scan.ok());
  EXPECT_EQ(v.ts.size(), 300u);
  EXPECT_EQ(scan->corrupt_blocks, 1u);
  EXPECT_EQ(scan->torn_tail_bytes, 0u);
  EXPECT_TRUE(scan->closed);
}

// A file larger than ScanOptions::window_bytes is read a window at a time: small blocks that
// straddle the windows' ends, a block larger than a window, and from a damaged block or a torn
// tail on the whole file. Every scan must equal the scan of the same bytes read whole: a clean
// file, flipped bytes in blocks before, across and after window ends and in the large block,
// cuts anywhere, a bad length, junk at the end, and resumed and bounded scans.
TEST(SegmentReader, WindowsReadAsTheWholeFileDoes) {
  TempDir tmp;
  const std::string path = tmp.Sub("big.tds");
  std::vector<uint64_t> offsets;  // each EVENTS block's
  uint64_t big_at = 0;
  {
    SegmentWriter w;
    ASSERT_TRUE(w.Open(path, 77, 0).ok());
    WriteHead(&w);
    std::string raw;
    EventsBlockEncoder enc;
    uint64_t x = 12345;
    int64_t ts = 0;
    for (int b = 0; b < 700; ++b) {
      // Block 300 holds 20,000 events of random times, which LZ4 cannot shrink below a window.
      const int n = b == 300 ? 20000 : 60;
      enc.Reset(1);
      for (int i = 0; i < n; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ts += static_cast<int64_t>(x >> 40);
        enc.AddWithInt(EventKind::kComplete, 0, ts, 1 + static_cast<uint32_t>(x >> 63), 0,
                       static_cast<int64_t>(x >> 50), nullptr);
      }
      raw.clear();
      enc.Finish(&raw);
      if (b == 300) big_at = w.size();
      offsets.push_back(w.size());
      w.AppendBlock(BlockType::kEvents, raw, true);
    }
    raw.clear();
    EncodeEnd({699 * 60 + 20000}, &raw);
    w.AppendBlock(BlockType::kEnd, raw, false);
    ASSERT_TRUE(w.Close().ok());
  }
  const std::string clean = ReadFile(path);
  constexpr size_t kWindow = 1 << 16;
  ASSERT_GT(clean.size(), 4 * kWindow);
  ASSERT_GT(offsets[301] - big_at, kWindow);

  // The same bytes, read whole and in windows; both scans' results and visits compared.
  size_t window = kWindow;
  auto same = [&](const std::string& bytes, uint64_t start, uint64_t end, const std::string& what) {
    SCOPED_TRACE(what + ", windows of " + std::to_string(window));
    WriteFile(path, bytes);
    CountingVisitor whole_v, win_v;
    ScanOptions o;
    o.start_offset = start;
    o.end_offset = end;
    o.window_bytes = 0;
    const auto whole = ScanSegment(path, &whole_v, o);
    o.window_bytes = window;
    const auto win = ScanSegment(path, &win_v, o);
    ASSERT_EQ(whole.ok(), win.ok());
    if (!whole.ok()) {
      EXPECT_EQ(whole.status().ToString(), win.status().ToString());
      return;
    }
    EXPECT_EQ(std::tie(whole->version, whole->pid, whole->seq, whole->file_size, whole->end_offset,
                       whole->blocks, whole->events, whole->corrupt_blocks, whole->corrupt_bytes,
                       whole->torn_tail_bytes, whole->closed, whole->anchor_end, whole->problems),
              std::tie(win->version, win->pid, win->seq, win->file_size, win->end_offset,
                       win->blocks, win->events, win->corrupt_blocks, win->corrupt_bytes,
                       win->torn_tail_bytes, win->closed, win->anchor_end, win->problems));
    EXPECT_EQ(std::tie(whole_v.metas, whole_v.strings, whole_v.blocks, whole_v.ends, whole_v.ts),
              std::tie(win_v.metas, win_v.strings, win_v.blocks, win_v.ends, win_v.ts));
  };
  for (size_t w : {size_t{64}, size_t{1000}, kWindow}) {
    window = w;
    same(clean, 0, UINT64_MAX, "clean");
  }
  window = kWindow;
  {
    CountingVisitor v;
    ScanOptions o;
    o.window_bytes = kWindow;
    const auto scan = ScanSegment(path, &v, o);
    ASSERT_TRUE(scan.ok());
    EXPECT_EQ(v.ts.size(), 699u * 60 + 20000);
    EXPECT_TRUE(scan->closed);
  }
  // Blocks whose frame crosses a window's end (the first windows start at 0, then at a block).
  std::vector<uint64_t> flips = {offsets[0] + 3,  offsets[5] + 25,   big_at + 9,
                                 big_at + 40000,  offsets[301] + 30, offsets[698] + 22,
                                 clean.size() - 5};
  for (size_t b = 1; b < offsets.size(); ++b) {
    if (offsets[b - 1] / kWindow != offsets[b] / kWindow && flips.size() < 12) {
      flips.push_back(offsets[b - 1] + 21);
    }
  }
  for (uint64_t at : flips) {
    std::string bad = clean;
    bad[at] ^= 0x40;
    same(bad, 0, UINT64_MAX, "flip at " + std::to_string(at));
  }
  for (uint64_t cut : {offsets[1] + 7, kWindow - 1, kWindow + 3, big_at + 5, big_at + 70000,
                       offsets[301], offsets[650] + 11, clean.size() - 1}) {
    same(clean.substr(0, cut), 0, UINT64_MAX, "cut at " + std::to_string(cut));
  }
  {
    std::string bad = clean;
    EncodeFixed32(&bad[offsets[400] + 8], 0x7fffff);  // stored length far past the end
    same(bad, 0, UINT64_MAX, "bad length");
  }
  same(clean + std::string(5000, 'j'), 0, UINT64_MAX, "junk after the END block");
  same(clean, offsets[200], UINT64_MAX, "resumed");
  ASSERT_GT(offsets[600], 2 * kWindow);
  same(clean, offsets[600], UINT64_MAX, "resumed past the first windows");
  same(clean, offsets[100] + 1, UINT64_MAX, "resumed inside a block");
  same(clean, 0, offsets[500], "bounded");
  same(clean, clean.size() + 1, UINT64_MAX, "resumed past the end");
  // Windows smaller than most blocks: every block read from a window of its own.
  window = 100;
  same(clean.substr(0, offsets[40] + 50), 0, UINT64_MAX, "cut, windows of 100 bytes");
  std::string bad = clean;
  bad[offsets[20] + 30] ^= 1;
  same(bad, offsets[10], UINT64_MAX, "flip, resumed, windows of 100 bytes");
}

// A scan that passes over EVENTS blocks unread (ScanOptions::skip_unread_events, compaction's
// catalog pass) sees every other block as a checked scan does, reads none of the events'
// payloads (a payload damaged on purpose goes unseen), and stops at the first block that is not
// whole and valid, for its caller to scan again checked.
TEST(SegmentReader, SkippedEventsBlocksAreUnreadAndDamageStopsTheScan) {
  class CatalogLog : public SegmentVisitor {
   public:
    void OnMeta(const SegmentMeta& m) override { log += "meta " + m.host + ";"; }
    void OnStrings(uint32_t first, const std::vector<std::string>& s) override {
      log += "strings " + std::to_string(first) + "+" + std::to_string(s.size()) + ";";
    }
    void OnSync(const std::vector<SyncPoint>& p) override {
      log += "sync " + std::to_string(p.at(0).local_ns) + ";";
    }
    void OnAnchors(const std::vector<AnchorPoint>& p) override {
      log += "anchor " + std::to_string(p.at(0).clock_ns) + ";";
    }
    void OnEvents(uint32_t, const std::vector<SegmentEvent>&) override { log += "events;"; }
    void OnEnd(const SegmentEnd&) override { log += "end;"; }
    std::string log;
  };
  TempDir tmp;
  const std::string path = tmp.Sub("s.tds");
  std::vector<uint64_t> offsets;  // each EVENTS block's
  {
    SegmentWriter w;
    ASSERT_TRUE(w.Open(path, 77, 0).ok());
    WriteHead(&w);
    std::string raw;
    EventsBlockEncoder enc;
    uint64_t x = 99;
    for (int b = 0; b < 60; ++b) {
      enc.Reset(1);
      for (int i = 0; i < 2000; ++i) {  // random times: blocks of about 10 KB, larger than a window
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        enc.AddWithInt(EventKind::kComplete, 0, int64_t{b} * 100000000 + i * 1000 + (x >> 54), 1, 0,
                       static_cast<int64_t>(x >> 52), nullptr);
      }
      raw.clear();
      enc.Finish(&raw);
      offsets.push_back(w.size());
      w.AppendBlock(BlockType::kEvents, raw, b % 2 == 0);  // LZ4 and raw payloads
      if (b % 10 == 9) {
        raw.clear();
        EncodeSync({SyncPoint{0, b, 5, 1}}, &raw);
        w.AppendBlock(BlockType::kSync, raw, false);
        raw.clear();
        EncodeAnchors({AnchorPoint{1, b, 0}}, &raw);
        w.AppendBlock(BlockType::kAnchor, raw, true);
      }
    }
    raw.clear();
    EncodeEnd({60 * 2000}, &raw);
    w.AppendBlock(BlockType::kEnd, raw, false);
    ASSERT_TRUE(w.Close().ok());
  }
  const std::string clean = ReadFile(path);
  ASSERT_GT(offsets[1] - offsets[0], 5000u);
  auto scan = [&](const std::string& bytes, bool skip, CatalogLog* v, uint64_t start = 0) {
    WriteFile(path, bytes);
    ScanOptions o;
    o.events = false;
    o.skip_unread_events = skip;
    o.start_offset = start;
    return ScanSegment(path, v, o);
  };
  CatalogLog checked_v, skip_v;
  const auto checked = scan(clean, false, &checked_v);
  const auto skipped = scan(clean, true, &skip_v);
  ASSERT_TRUE(checked.ok() && skipped.ok());
  EXPECT_EQ(skip_v.log, checked_v.log);
  EXPECT_NE(checked_v.log.find("sync 59;anchor 59;end;"), std::string::npos) << checked_v.log;
  EXPECT_EQ(std::tie(skipped->file_size, skipped->end_offset, skipped->blocks,
                     skipped->corrupt_blocks, skipped->torn_tail_bytes, skipped->closed,
                     skipped->anchor_end, skipped->skip_stopped),
            std::tie(checked->file_size, checked->end_offset, checked->blocks,
                     checked->corrupt_blocks, checked->torn_tail_bytes, checked->closed,
                     checked->anchor_end, checked->skip_stopped));
  EXPECT_EQ(skipped->unread_blocks, 60u);
  EXPECT_EQ(checked->unread_blocks, 0u);
  EXPECT_LT(skipped->crc_work_bytes, clean.size() / 20);  // the catalog's bytes only
  {
    // Resumed past the first blocks: the same again.
    CatalogLog a, b;
    const auto c = scan(clean, false, &a, offsets[25]);
    const auto s = scan(clean, true, &b, offsets[25]);
    ASSERT_TRUE(c.ok() && s.ok());
    EXPECT_EQ(b.log, a.log);
    EXPECT_EQ(s->end_offset, c->end_offset);
  }
  {
    // A payload byte flipped: the checked scan counts the block corrupt, the skipping one never
    // read it.
    std::string bad = clean;
    bad[offsets[33] + 500] ^= 0x10;
    CatalogLog a, b;
    const auto c = scan(bad, false, &a);
    const auto s = scan(bad, true, &b);
    ASSERT_TRUE(c.ok() && s.ok());
    EXPECT_EQ(c->corrupt_blocks, 1u);
    EXPECT_EQ(s->corrupt_blocks, 0u);
    EXPECT_FALSE(s->skip_stopped);
    EXPECT_EQ(b.log, a.log);
  }
  // A damaged header, a length past the end, a torn tail, a damaged catalog block: the
  // skipping scan stops at that block, having visited what came before it.
  struct Case {
    std::string what, bytes;
    uint64_t at;
  };
  std::vector<Case> cases;
  {
    std::string bad = clean;
    bad[offsets[40]] = 'X';  // no magic
    cases.push_back({"no magic", bad, offsets[40]});
    bad = clean;
    EncodeFixed32(&bad[offsets[41] + 8], 0x7fffff);
    cases.push_back({"length past the end", bad, offsets[41]});
    bad = clean;
    bad[offsets[42] + 5] = 7;  // unknown codec
    cases.push_back({"unknown codec", bad, offsets[42]});
    cases.push_back({"torn tail", clean.substr(0, offsets[50] + 300), offsets[50]});
    bad = clean;
    bad[offsets[20] - 3] ^= 1;                    // inside the ANCHOR block after events block 19
    cases.push_back({"damaged anchor", bad, 0});  // 0: somewhere after events block 19
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    CatalogLog v;
    const auto s = scan(c.bytes, true, &v);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_TRUE(s->skip_stopped);
    EXPECT_EQ(s->corrupt_blocks, 0u);
    if (c.at != 0) {
      EXPECT_EQ(s->end_offset, c.at);
    } else {
      EXPECT_LT(s->end_offset, offsets[20]);
      EXPECT_GT(s->end_offset, offsets[19]);
    }
    // What it visited is what a checked scan visits before that block.
    CatalogLog whole;
    ScanOptions o;
    o.events = false;
    o.end_offset = s->end_offset;
    ASSERT_TRUE(ScanSegment(path, &whole, o).ok());
    EXPECT_EQ(v.log, whole.log);
  }
}

}  // namespace
}  // namespace tracedb::engine
