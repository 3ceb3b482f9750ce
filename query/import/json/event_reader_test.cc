#include "query/import/json/event_reader.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <sys/stat.h>

#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"

namespace tracedb::query::json {
namespace {

// An event as plain values, to compare reads made with different chunk sizes.
struct Ev {
  std::string ph, name, cat, pid, tid, args, scope, id;
  int64_t ts = 0, dur = 0;
  bool has_ts = false;
  uint64_t offset = 0, size = 0;
  bool operator==(const Ev&) const = default;
};

struct Read {
  std::vector<Ev> events;
  uint64_t skipped = 0, truncated = 0;
  std::vector<std::string> errors;
  std::vector<std::pair<std::string, std::string>> members;
  Status status;
};

std::unique_ptr<EventReader> Reader(const std::string& data, size_t chunk,
                                    std::string name = "t.json") {
  ReaderOptions o;
  o.chunk_bytes = chunk;
  return std::make_unique<EventReader>(ByteSource::FromString(data, std::move(name)), o);
}

Read Drain(EventReader* reader) {
  Read r;
  TraceEvent ev;
  for (;;) {
    auto more = reader->Next(&ev);
    if (!more.ok()) {
      r.status = more.status();
      break;
    }
    if (!*more) break;
    Ev e;
    e.ph = ev.ph;
    e.name = ev.name;
    e.cat = ev.cat;
    e.pid = ev.pid.present() ? (ev.pid.is_int() ? "i" : "s") + std::string(ev.pid.text) : "";
    e.tid = ev.tid.present() ? (ev.tid.is_int() ? "i" : "s") + std::string(ev.tid.text) : "";
    e.args = ev.args;
    e.scope = ev.scope;
    e.id = ev.id.text;
    e.ts = ev.ts;
    e.dur = ev.dur;
    e.has_ts = ev.has_ts;
    e.offset = ev.offset;
    e.size = ev.size;
    r.events.push_back(e);
  }
  r.skipped = reader->skipped();
  r.truncated = reader->truncated_bytes();
  r.errors = reader->errors();
  r.members = reader->members();
  return r;
}

Read ReadAll(const std::string& data, size_t chunk = 1 << 20) {
  return Drain(Reader(data, chunk).get());
}

std::string Gzip(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, data.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

const char kOldHorovod[] =
    "[\n"
    "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": \"grad\"}},\n"
    "{\"ph\": \"B\", \"name\": \"NEGOTIATE_ALLREDUCE\", \"ts\": 100, \"pid\": 1},\n"
    "{\"ph\": \"X\", \"name\": \"0\", \"ts\": 101, \"pid\": 1, \"dur\": 0},\n"
    "{\"ph\": \"E\", \"ts\": 102, \"pid\": 1},\n";

TEST(EventReader, OldHorovodFramingNeverClosed) {
  Read r = ReadAll(kOldHorovod);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.events.size(), 4u);
  EXPECT_EQ(r.events[0].ph, "M");
  EXPECT_EQ(r.events[0].args, R"({"name": "grad"})");
  EXPECT_EQ(r.events[1].name, "NEGOTIATE_ALLREDUCE");
  EXPECT_EQ(r.events[1].ts, 100000);
  EXPECT_EQ(r.events[1].pid, "i1");
  EXPECT_EQ(r.events[3].name, "");  // an unnamed E
  EXPECT_EQ(r.events[1].offset, 2u + 73u);
  EXPECT_EQ(r.skipped, 0u);
  EXPECT_EQ(r.truncated, 0u);
}

TEST(EventReader, ArrayAndObjectForms) {
  Read a = ReadAll(R"([{"ph":"X","name":"a","ts":1,"dur":2,"pid":1,"tid":2}])");
  ASSERT_EQ(a.events.size(), 1u);
  EXPECT_EQ(a.events[0].dur, 2000);
  Read o = ReadAll(R"({"otherData": {"rank": 3}, "traceEvents": [
      {"ph":"X","name":"a","ts":1.5,"dur":2,"pid":"p","tid":"total"},
    ], "displayTimeUnit": "ns", "baseTimeNanoseconds": 1700000000000000000})");
  ASSERT_TRUE(o.status.ok());
  ASSERT_EQ(o.events.size(), 1u);
  EXPECT_EQ(o.events[0].ts, 1500);
  EXPECT_EQ(o.events[0].pid, "sp");
  EXPECT_EQ(o.events[0].tid, "stotal");
  ASSERT_EQ(o.members.size(), 3u);
  EXPECT_EQ(o.members[0], (std::pair<std::string, std::string>("otherData", R"({"rank": 3})")));
  EXPECT_EQ(o.members[1].second, "\"ns\"");
  EXPECT_EQ(o.members[2].second, "1700000000000000000");
}

TEST(EventReader, NewHorovodFramingBackToBack) {
  const std::string data =
      "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "
      "{\"start_time_since_epoch_in_micros\":1633399518104473}},\n"
      "{\"ph\": \"B\", \"name\": \"X\", \"ts\": 1, \"pid\": 1},{\"ph\": \"E\", \"ts\": 2, "
      "\"pid\": 1}]";
  Read r = ReadAll(data);
  ASSERT_EQ(r.events.size(), 3u);
  EXPECT_EQ(r.truncated, 0u);
}

TEST(EventReader, EmptyInputs) {
  for (const char* data : {"", "  \n", "[\n", "[]", "{}", "{\"traceEvents\": []}"}) {
    Read r = ReadAll(data);
    EXPECT_TRUE(r.status.ok()) << data;
    EXPECT_EQ(r.events.size(), 0u) << data;
    EXPECT_EQ(r.skipped, 0u) << data;
  }
}

TEST(EventReader, TruncatedLastRecordIsCounted) {
  const std::string full = kOldHorovod;
  const std::string cut = full + "{\"ph\": \"B\", \"name\": \"ALLRED";
  Read r = ReadAll(cut);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.events.size(), 4u);
  EXPECT_EQ(r.truncated, 27u);
  EXPECT_EQ(r.skipped, 0u);
  // Cut inside a number: it might have gone on.
  Read n = ReadAll(full + "{\"ph\": \"E\", \"ts\": 12");
  EXPECT_EQ(n.events.size(), 4u);
  EXPECT_EQ(n.truncated, 20u);
  // Object form cut inside the events.
  Read o = ReadAll("{\"traceEvents\": [{\"ph\": \"i\", \"ts\": 1}, {\"ph\"");
  EXPECT_EQ(o.events.size(), 1u);
  EXPECT_EQ(o.truncated, 5u);
}

TEST(EventReader, EveryPrefixKeepsEveryCompleteRecord) {
  const std::string full = std::string(kOldHorovod) +
                           "{\"ph\": \"X\", \"name\": \"sp\\u00e9c\", \"ts\": 1.25, \"pid\": 1, "
                           "\"args\": {\"a\": [1, {\"b\": \"}\"}]}},\n";
  const Read all = ReadAll(full);
  ASSERT_EQ(all.events.size(), 5u);
  for (size_t k = 0; k <= full.size(); ++k) {
    const Read r = ReadAll(full.substr(0, k), 16);
    ASSERT_TRUE(r.status.ok()) << k;
    EXPECT_EQ(r.skipped, 0u) << k;
    size_t complete = 0;
    uint64_t cut = 0;
    for (const Ev& e : all.events) {
      if (e.offset + e.size <= k) {
        ++complete;
      } else if (e.offset < k) {
        cut = k - e.offset;
      }
    }
    ASSERT_EQ(r.events.size(), complete) << k;
    for (size_t i = 0; i < complete; ++i) EXPECT_EQ(r.events[i], all.events[i]) << k;
    EXPECT_EQ(r.truncated, cut) << k;
  }
}

TEST(EventReader, ToleratesPrettyPrintingTrailingCommasAndControlCharacters) {
  const std::string data =
      "{\n    \"traceEvents\": [\n        {\n            \"ph\": \"X\",\n            \"args\": {\n"
      "                \"name\": \"Comm.x\"\n            },\n            \"pid\": \"Comm.x\",\n"
      "            \"name\": \"Comm.x\",\n            \"ts\": 1589597539680042,\n"
      "            \"dur\": 490316,\n            \"tid\": \"total\",\n            \"cat\": "
      "\"Comm\",\n        },\n\n"
      "        {\"ph\": \"B\", \"name\": \"tensor\twith\nraw\x01 bytes\", \"ts\": 5, \"pid\": "
      "2},,\n"
      "    ],\n    \"displayTimeUnit\": \"ms\"\n}\n";
  Read r = ReadAll(data);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].ts, 1589597539680042000);
  EXPECT_EQ(r.events[0].dur, 490316000);
  EXPECT_EQ(r.events[0].cat, "Comm");
  EXPECT_EQ(r.events[1].name, "tensor\twith\nraw\x01 bytes");
  EXPECT_EQ(r.skipped, 0u);
  ASSERT_EQ(r.members.size(), 1u);
}

TEST(EventReader, UnicodeEscapes) {
  Read r = ReadAll(R"([{"ph": "i", "name": "caf\u00e9 \ud83d\ude00 \"q\"", "ts": 1,
                      "pid": "p\u0031", "s": "g", "id": "0x1F"}])");
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].name, "caf\xc3\xa9 \xf0\x9f\x98\x80 \"q\"");
  EXPECT_EQ(r.events[0].pid, "sp1");
  EXPECT_EQ(r.events[0].scope, "g");
  EXPECT_EQ(r.events[0].id, "0x1F");
}

TEST(EventReader, BadRecordInTheMiddleIsSkippedAndReported) {
  const std::string data =
      "[\n"
      "{\"ph\": \"B\", \"name\": \"a\", \"ts\": 1, \"pid\": 1},\n"
      "{\"ph\": \"B\", \"name\": \"b\"\"c\", \"ts\": 2, \"pid\": 1},\n"  // a quote inside a name
      "{\"ph\": \"E\", \"ts\": 3, \"pid\": 1},\n"
      "garbage line\n"
      "{\"ph\": \"X\", \"ts\": \"soon\", \"pid\": 1},\n"  // ts is not a number
      "{\"ph\": \"E\", \"ts\": 4, \"pid\": 1},\n";
  Read r = ReadAll(data);
  ASSERT_TRUE(r.status.ok());
  ASSERT_EQ(r.events.size(), 3u);
  EXPECT_EQ(r.events[1].ts, 3000);
  EXPECT_EQ(r.events[2].ts, 4000);
  EXPECT_EQ(r.skipped, 3u);
  ASSERT_EQ(r.errors.size(), 3u);
  // The offsets are those of the offending bytes: the stray quote, 'g', the ts value.
  EXPECT_EQ(r.errors[0], "t.json: byte offset 70: expected ',' or '}' after a member");
  EXPECT_EQ(r.errors[1], "t.json: byte offset 127: expected an event object");
  EXPECT_EQ(r.errors[2], "t.json: byte offset 158: bad \"ts\"");
}

TEST(EventReader, ResyncSkipsNestedObjects) {
  // The bad record's args hold objects; reading resumes at the next record, not inside them.
  const std::string data =
      "[{\"ph\": \"X\" \"args\": {\"k\": {\"ph\": \"X\", \"ts\": 9}}, \"ts\": 1},\n"
      "{\"ph\": \"i\", \"ts\": 2}]";
  Read r = ReadAll(data);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].ts, 2000);
  EXPECT_EQ(r.skipped, 1u);
}

TEST(EventReader, ErrorsAreCappedButAllCounted) {
  std::string data = "[";
  for (int i = 0; i < 20; ++i) data += "{\"ph\": \"i\", \"ts\": x},\n{\"ph\": \"i\", \"ts\": 1},\n";
  Read r = ReadAll(data);
  EXPECT_EQ(r.events.size(), 20u);
  EXPECT_EQ(r.skipped, 20u);
  EXPECT_EQ(r.errors.size(), 5u);
}

TEST(EventReader, NotJsonIsAnErrorWithTheOffset) {
  Read r = ReadAll("\n\n  hello world");
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.message(), "t.json: byte offset 4: not a JSON trace (expected '[' or '{')");
  Read m = ReadAll("{nope}");
  ASSERT_FALSE(m.status.ok());
  EXPECT_NE(m.status.message().find("t.json: byte offset 1: not a JSON trace"), std::string::npos);
}

TEST(EventReader, RecordsLargerThanTheChunkAndTheLimit) {
  const std::string big_arg(5000, 'x');
  const std::string data = "[{\"ph\": \"i\", \"ts\": 1, \"args\": {\"a\": \"" + big_arg +
                           "\"}},{\"ph\": \"i\", \"ts\": 2}]";
  Read r = ReadAll(data, 64);
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].args.size(), big_arg.size() + 9);
  ReaderOptions o;
  o.chunk_bytes = 64;
  o.max_record_bytes = 1000;
  EventReader limited(ByteSource::FromString(data, "t.json"), o);
  TraceEvent ev;
  int n = 0;
  while (*limited.Next(&ev)) ++n;
  EXPECT_EQ(n, 1);
  EXPECT_EQ(limited.skipped(), 1u);
}

TEST(EventReader, ChunkSizeDoesNotChangeTheResult) {
  std::mt19937 rng(3);
  std::string data = "{\"traceEvents\": [\n";
  for (int i = 0; i < 300; ++i) {
    data += "  {\"ph\": \"X\", \"name\": \"op" + std::to_string(rng() % 7) +
            "\\n\", \"ts\": " + std::to_string(i) + "." + std::to_string(rng() % 1000) +
            ", \"dur\": " + std::to_string(rng() % 100) +
            ", \"pid\": 1, \"tid\": " + std::to_string(rng() % 3) + ", \"args\": {\"x\": [" +
            std::to_string(i) + "]}},\n";
    if (i % 50 == 7) data += "  {broken},\n";
  }
  data += "], \"otherData\": {\"tracedb\": true}}";
  const Read ref = ReadAll(data);
  ASSERT_EQ(ref.events.size(), 300u);
  EXPECT_EQ(ref.skipped, 6u);
  for (size_t chunk : {16, 17, 64, 100, 1000, 4096}) {
    const Read r = ReadAll(data, chunk);
    EXPECT_EQ(r.events, ref.events) << chunk;
    EXPECT_EQ(r.skipped, ref.skipped) << chunk;
    EXPECT_EQ(r.errors, ref.errors) << chunk;
    EXPECT_EQ(r.members, ref.members) << chunk;
  }
}

TEST(EventReader, Gzip) {
  const std::string plain = std::string(kOldHorovod) + "{\"ph\": \"E\", \"ts\": 103, \"pid\": 1}";
  const std::string gz = Gzip(plain);
  Read r = ReadAll(gz, 32);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.events, ReadAll(plain).events);
  // Concatenated members are one stream.
  Read two = ReadAll(Gzip("[{\"ph\": \"i\", \"ts\": 1},") + Gzip("{\"ph\": \"i\", \"ts\": 2}]"));
  EXPECT_EQ(two.events.size(), 2u);
}

TEST(EventReader, TruncatedGzipKeepsWhatWasDecompressed) {
  std::string plain = "[";
  for (int i = 0; i < 2000; ++i) {
    plain += "{\"ph\": \"i\", \"name\": \"n" + std::to_string(i) +
             "\", \"ts\": " + std::to_string(i) + "},\n";
  }
  const std::string gz = Gzip(plain);
  auto reader = Reader(gz.substr(0, gz.size() / 2), 4096, "t.json.gz");
  TraceEvent ev;
  int n = 0;
  for (;;) {
    auto more = reader->Next(&ev);
    ASSERT_TRUE(more.ok()) << more.status().ToString();
    if (!*more) break;
    ++n;
  }
  EXPECT_GT(n, 100);
  EXPECT_LT(n, 2000);
  EXPECT_NE(reader->source().warning().find("gzip stream ends early"), std::string::npos);
}

TEST(EventReader, DamagedGzipIsAnErrorNamingTheOffset) {
  std::string plain = "[";
  for (int i = 0; i < 2000; ++i) plain += "{\"ph\": \"i\", \"ts\": " + std::to_string(i) + "},";
  std::string gz = Gzip(plain);
  for (size_t i = 20; i < 40; ++i) gz[i] = static_cast<char>(gz[i] ^ 0x5a);
  Read r = ReadAll(gz);
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.message().rfind("t.json: gzip data damaged at compressed byte offset ", 0), 0u)
      << r.status.message();
}

TEST(EventReader, FilesOnDisk) {
  testing::TempDir dir;
  testing::WriteFile(dir.Sub("a.json.gz"), Gzip(kOldHorovod));
  auto r = EventReader::Open(dir.Sub("a.json.gz"));
  ASSERT_TRUE(r.ok());
  TraceEvent ev;
  int n = 0;
  while (*(*r)->Next(&ev)) ++n;
  EXPECT_EQ(n, 4);
  EXPECT_TRUE((*r)->source().compressed());
  auto missing = EventReader::Open(dir.Sub("nope.json"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope.json"), std::string::npos);
  auto head = ReadHead(dir.Sub("a.json.gz"), 10);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(*head, std::string(kOldHorovod).substr(0, 10));
}

// A regular file's buffers are sized to it when it is opened. A file that grows after that (a
// timeline still being written) is read to its end all the same, records longer than the first
// size included; a pipe, whose size is unknown, reads as a file does.
TEST(EventReader, AFileThatGrowsAfterTheOpenAndAPipeReadWhole) {
  std::string data = "[";
  for (int i = 0; i < 400; ++i) {
    data += "{\"ph\": \"X\", \"name\": \"n" + std::to_string(i) +
            "\", \"ts\": " + std::to_string(i) +
            ", \"dur\": 1, \"pid\": 1, \"args\": {\"pad\": \"" +
            std::string(i == 300 ? 50000 : 10, 'x') + "\"}},\n";
  }
  const Read want = ReadAll(data);
  ASSERT_EQ(want.events.size(), 400u);
  testing::TempDir dir;
  const std::string path = dir.Sub("growing.json");
  const size_t first = 2000;  // under the smallest buffer: the first read takes all of it
  testing::WriteFile(path, data.substr(0, first));
  auto r = EventReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE((*r)->source().size_known());
  {
    std::ofstream out(path, std::ios::app | std::ios::binary);
    out << data.substr(first);
  }
  const Read got = Drain(r->get());
  EXPECT_TRUE(got.status.ok()) << got.status.ToString();
  EXPECT_EQ(got.events, want.events);
  EXPECT_EQ(got.truncated, 0u);

  const std::string fifo = dir.Sub("pipe.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    std::ofstream out(fifo, std::ios::binary);
    for (size_t at = 0; at < data.size(); at += 3000) out << data.substr(at, 3000) << std::flush;
  });
  auto p = EventReader::Open(fifo);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE((*p)->source().size_known());
  const Read piped = Drain(p->get());
  writer.join();
  EXPECT_TRUE(piped.status.ok()) << piped.status.ToString();
  EXPECT_EQ(piped.events, want.events);
}

}  // namespace
}  // namespace tracedb::query::json
