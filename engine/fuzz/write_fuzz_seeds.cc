// Writes the seed corpus of the engine's libFuzzer targets into DIR/<target>/ (checked in under
// fixtures/fuzz/; scripts/test.sh runs each target on it): a few small, valid inputs that
// between them reach every block type and codec, so that mutations start deep in the decoders.
// Usage: write_fuzz_seeds DIR      (rerun after a format change)
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include "engine/db/event_block.h"
#include "engine/segment/segment_blocks.h"
#include "engine/segment/segment_writer.h"
#include "engine/util/coding.h"
#include "engine/util/lz4_codec.h"

namespace tracedb::engine {
namespace {

bool Write(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

// The uncompressed payload of the event block that EncodeBlock makes of `rows` (empty when it
// cannot be read back).
std::string EventBlockRaw(const std::vector<Row>& rows) {
  std::string blob;
  BlockZone zone;
  EncodeBlock(rows, &blob, &zone);
  std::string raw;
  if (!UnpackBlock(blob, &raw).ok()) return "";
  return raw;
}

std::string EventsPayload(int n) {
  EventsBlockEncoder enc;
  enc.Reset(1);
  EventArgs a;
  a.mask = EventArgs::kAllFields;
  a.bytes = 4096;
  a.peer = 3;
  a.tag = -1;
  a.comm = 2;
  a.seq = 17;
  a.flow = 99;
  for (int i = 0; i < n; ++i) {
    enc.Add(EventKind::kBegin, 2, 1000 + i * 100, 1, i % 2, i % 3 ? nullptr : &a);
    enc.AddWithInt(EventKind::kComplete, 4, 1010 + i * 100, 2, 0, 40 + i, &a);
    enc.AddCounter(0, 1020 + i * 100, 3, 0, i * 0.25);
    enc.Add(EventKind::kInstant, 0, 1030 + i * 100, 2, 0, nullptr);
    enc.AddWithInt(EventKind::kStep, 7, 1040 + i * 100, 0, 0, i, nullptr);
    enc.Add(EventKind::kEnd, 2, 1090 + i * 100, 1, i % 2, nullptr);
  }
  std::string raw;
  enc.Finish(&raw);
  return raw;
}

// Every block type's payload, keyed by type.
std::vector<std::pair<BlockType, std::string>> Payloads() {
  std::vector<std::pair<BlockType, std::string>> out;
  std::string p;
  SegmentMeta m;
  m.rank = 1;
  m.world_size = 4;
  m.pid = 4242;
  m.host = "node1";
  m.tool_version = "0.1.0";
  m.command = "python train.py";
  m.anchor_realtime_ns = 1700000000000000000;
  m.anchor_clock_ns = 5000;
  EncodeMeta(m, &p);
  out.emplace_back(BlockType::kMeta, p);
  p.clear();
  EncodeStrings(1, {"forward", "allreduce", "loss"}, &p);
  out.emplace_back(BlockType::kStrings, p);
  p.clear();
  EncodeThreads({{1, 4243, "main"}, {2, 4244, "data loader"}}, &p);
  out.emplace_back(BlockType::kThreads, p);
  p.clear();
  EncodeLanes({{1, 2}}, &p);
  out.emplace_back(BlockType::kLanes, p);
  out.emplace_back(BlockType::kEvents, EventsPayload(4));
  p.clear();
  EncodeSync({{0, 2000, -150, 20}}, &p);
  out.emplace_back(BlockType::kSync, p);
  p.clear();
  EncodeAnchors({{1700000000000001000, 6000, 30}}, &p);
  out.emplace_back(BlockType::kAnchor, p);
  p.clear();
  EncodeStats({{1, 5}, {0, 1}}, &p);
  out.emplace_back(BlockType::kStats, p);
  p.clear();
  EncodeComms({{2, 3, 1, {0, 1, 2}}}, &p);
  out.emplace_back(BlockType::kComms, p);
  p.clear();
  StepStat st;
  st.step = 3;
  st.start_ns = 6000;
  st.dur_ns = 900;
  st.compute_ns = 700;
  st.comm_ns = 150;
  st.wait_ns = 100;
  st.bytes = 4096;
  st.events = 4;
  st.top = {{1, 700}, {2, 150}};
  EncodeStepStats({st}, &p);
  out.emplace_back(BlockType::kStepStats, p);
  p.clear();
  EncodeEnd({24}, &p);
  out.emplace_back(BlockType::kEnd, p);
  return out;
}

int Main(const std::string& dir) {
  bool ok = true;
  const auto payloads = Payloads();
  // segment_block_payload_fuzz: the type byte, then the payload.
  const std::string blocks = dir + "/segment_block_payload_fuzz";
  ::mkdir(blocks.c_str(), 0755);
  for (const auto& [type, payload] : payloads) {
    const std::string input = std::string(1, static_cast<char>(type)) + payload;
    ok &= Write(blocks + "/type-" + std::to_string(static_cast<int>(type)), input);
  }
  // segment_file_fuzz: a closed file with every block (LZ4 where it helps), and a torn one.
  const std::string files = dir + "/segment_file_fuzz";
  ::mkdir(files.c_str(), 0755);
  std::string file;
  EncodeFileHeader(4242, 0, &file);
  for (const auto& [type, payload] : payloads) {
    std::string stored;
    Codec codec = Codec::kRaw;
    if (type == BlockType::kEvents && Lz4Compress(payload, &stored).ok() &&
        stored.size() < payload.size()) {
      codec = Codec::kLz4;
    } else {
      stored = payload;
    }
    FrameBlock(type, codec, stored, static_cast<uint32_t>(payload.size()), &file);
  }
  ok &= Write(files + "/closed.tds", file);
  ok &= Write(files + "/torn.tds", file.substr(0, file.size() - 7));
  // event_block_payload_fuzz: the uncompressed payload of a database event block.
  const std::string events = dir + "/event_block_payload_fuzz";
  ::mkdir(events.c_str(), 0755);
  std::vector<Row> rows;
  for (int i = 0; i < 12; ++i) {
    Row r;
    r.track = 1 + i % 2;
    r.k = static_cast<uint64_t>(i / 2);
    r.ts = 1000 + i * 500;
    // Alternating depths on each track (parents with a child: format 3 codes their dur against
    // the child's), and one child outlasting its parent (a negative ts delta: zigzagged deltas).
    r.dur = i == 6 ? 5000 : i % 3 == 0 ? 0 : 100 * i;
    r.depth = (i / 2) % 2;
    r.parent_k = r.depth ? r.k : 0;
    r.name = 1 + i % 3;
    r.cat = 1;
    r.kind = static_cast<RowKind>(i % kNumRowKinds);
    if (r.kind == RowKind::kCounter) r.value = i * 1.5;
    if (i % 4 == 1) {
      r.args.mask = EventArgs::kBytes | EventArgs::kPeer | EventArgs::kSeq;
      r.args.bytes = 1 << 20;
      r.args.peer = 2;
      r.args.seq = static_cast<uint64_t>(i);
      r.json = "{\"tensor\":\"fc1\"}";
    }
    rows.push_back(r);
  }
  const std::string block = EventBlockRaw(rows);
  ok &= !block.empty() && Write(events + "/block", block);
  // Names at random among 8 over 400 rows: block format 4 entropy-codes the name column.
  rows.clear();
  uint32_t lcg = 12345;
  for (int i = 0; i < 400; ++i) {
    Row r;
    r.track = 1;
    r.k = static_cast<uint64_t>(i);
    r.ts = 1000 + i * 50;
    r.dur = 10 + i % 7;
    lcg = lcg * 1664525u + 1013904223u;
    r.name = 1 + (lcg >> 29);
    r.cat = 1;
    rows.push_back(r);
  }
  const std::string names_block = EventBlockRaw(rows);
  ok &= !names_block.empty() && Write(events + "/block-names", names_block);
  if (!ok) std::fprintf(stderr, "cannot write seeds under %s\n", dir.c_str());
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace tracedb::engine

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  return tracedb::engine::Main(argv[1]);
}
