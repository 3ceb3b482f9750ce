#include "query/import/json/array_split.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "query/import/json/event_reader.h"

namespace tracedb::query::json {
namespace {

// Strings meant to look like record boundaries to a scanner that ignores quoting.
const char* const kTricky[] = {
    "plain",     "a,{b",           "},{\\\"ph\\\":\\\"X\\\"",
    "\\\\",      "\\\\\\\"},\\n{", "[{]}",
    "\\u007b,{", "x\\\"",          "],[{\\\"",
    "tab\t,{",   "\\n}\\n,\\n{",
};

// A Chrome-like record; some hold nested arrays of objects after commas, whose '{' a guess may
// take for a record start.
std::string Record(std::mt19937_64& rng, int i) {
  const char* name = kTricky[rng() % (sizeof(kTricky) / sizeof(kTricky[0]))];
  std::string r = "{\"name\":\"" + std::string(name) +
                  "\",\"ph\":\"X\",\"ts\":" + std::to_string(i * 3) +
                  ",\"dur\":2,\"pid\":1,\"tid\":" + std::to_string(rng() % 4);
  switch (rng() % 4) {
    case 0:
      break;
    case 1:
      r += ",\"args\":{\"s\":\"" + std::string(name) + "\",\"n\":" + std::to_string(i) + "}";
      break;
    case 2:
      r += ",\"args\":{\"list\":[{\"a\":1},\n{\"b\":\"]\"},{\"c\":[{}]}]}";
      break;
    default:
      r += ",\"args\":{\"deep\":{\"x\":{\"y\":\"" + std::string(name) + "\"}}}";
      break;
  }
  return r + "}";
}

std::string Array(uint64_t seed, int n, bool close) {
  std::mt19937_64 rng(seed);
  std::string s = "[";
  for (int i = 0; i < n; ++i) {
    if (i > 0) s += (rng() % 3 == 0) ? ",\n" : (rng() % 2 ? ", " : ",");
    s += Record(rng, i);
  }
  if (close) s += "]\n";
  return s;
}

// The record offsets the serial reader finds (the independent reference).
std::set<uint64_t> SerialStarts(const std::string& data, uint64_t* skipped) {
  EventReader reader(ByteSource::FromString(data, "t.json"));
  std::set<uint64_t> starts;
  TraceEvent ev;
  for (;;) {
    auto more = reader.Next(&ev);
    EXPECT_TRUE(more.ok()) << more.status().ToString();
    if (!more.ok() || !*more) break;
    starts.insert(ev.offset);
  }
  *skipped = reader.skipped();
  return starts;
}

void CheckCuts(const std::string& data, size_t parts, bool expect_closed) {
  uint64_t skipped = 0;
  const std::set<uint64_t> serial = SerialStarts(data, &skipped);
  ASSERT_EQ(skipped, 0u);
  const std::string_view elements = std::string_view(data).substr(1);
  const ElementCuts cuts = SplitElements(elements, parts);
  ASSERT_FALSE(cuts.starts.empty());
  ASSERT_LE(cuts.starts.size(), parts);
  for (size_t k = 0; k < cuts.starts.size(); ++k) {
    EXPECT_TRUE(serial.count(cuts.starts[k] + 1))
        << "part " << k << " of " << parts << " starts at " << cuts.starts[k];
    if (k > 0) {
      EXPECT_LT(cuts.starts[k - 1], cuts.starts[k]);
    }
  }
  EXPECT_EQ(cuts.starts[0] + 1, *serial.begin());
  EXPECT_EQ(cuts.closed, expect_closed);
  if (expect_closed) {
    EXPECT_EQ(data[cuts.end + 1], ']');
  }
  // Every record lies before the end of the walk.
  EXPECT_LT(*serial.rbegin(), cuts.end + 1);
}

TEST(SplitElements, CutsOnlyAtRecordStartsWithTrickyStrings) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const std::string data = Array(seed, 300 + static_cast<int>(seed) * 37, seed % 2 == 0);
    for (size_t parts : {1, 2, 3, 4, 7, 16, 61}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " parts " + std::to_string(parts));
      CheckCuts(data, parts, seed % 2 == 0);
    }
  }
}

TEST(SplitElements, LargeInputIsReallySplit) {
  const std::string data = Array(99, 40000, true);  // a few MB
  const ElementCuts cuts = SplitElements(std::string_view(data).substr(1), 8);
  EXPECT_EQ(cuts.starts.size(), 8u);
  CheckCuts(data, 8, true);
}

// Guesses that fall inside a string which looks like a boundary must be caught.
TEST(SplitElements, GuessInsideAStringIsRewalked) {
  std::string data = "[";
  const std::string fake = std::string(5000, 'x') + "\\\",{\\\"ph\\\":1}";
  for (int i = 0; i < 200; ++i) {
    if (i > 0) data += ",";
    data += "{\"name\":\"" + fake + fake + "\"}";
  }
  data += "]";
  for (size_t parts : {2, 5, 9, 33}) CheckCuts(data, parts, true);
  // The guesses do land inside the strings (else this test would check nothing).
  EXPECT_GT(SplitElements(std::string_view(data).substr(1), 9).rewalks, 0u);
}

TEST(SplitElements, StopsAtAMalformedOrCutElement) {
  const std::string good = Array(5, 50, false);
  // A bare number where a record should be: the walk stops there.
  const std::string bad = good + ",42," + Array(6, 50, false).substr(1);
  const ElementCuts a = SplitElements(std::string_view(bad).substr(1), 4);
  EXPECT_FALSE(a.closed);
  EXPECT_EQ(bad.substr(a.end + 1, 2), "42");
  // A record cut by the end of the bytes.
  const std::string cut = good + ",{\"name\":\"ab";
  const ElementCuts b = SplitElements(std::string_view(cut).substr(1), 3);
  EXPECT_FALSE(b.closed);
  EXPECT_EQ(cut.substr(b.end + 1), "{\"name\":\"ab");
}

TEST(SplitElements, EmptyArrays) {
  for (const char* text : {"", "]", "  ]", ",,]"}) {
    const ElementCuts c = SplitElements(text, 4);
    ASSERT_EQ(c.starts.size(), 1u) << text;
    EXPECT_EQ(c.starts[0], c.end) << text;
    EXPECT_EQ(c.closed, std::string_view(text).find(']') != std::string_view::npos) << text;
  }
}

// Everything a reading yields, as text, to compare a serial and a parallel reading.
std::vector<std::string> ReadAll(const std::string& data, size_t threads, size_t window,
                                 size_t chunk) {
  ReaderOptions o;
  o.threads = threads;
  o.parallel_window_bytes = window;
  o.parallel_min_bytes = 1024;
  o.chunk_bytes = chunk;
  EventReader reader(ByteSource::FromString(data, "t.json"), o);
  std::vector<std::string> out;
  TraceEvent ev;
  auto id = [](const JsonId& j) {
    return std::to_string(static_cast<int>(j.type)) + ":" + std::to_string(j.num) + ":" +
           std::string(j.text);
  };
  for (;;) {
    auto more = reader.Next(&ev);
    if (!more.ok()) {
      out.push_back("error " + more.status().ToString());
      break;
    }
    if (!*more) break;
    out.push_back(std::to_string(ev.offset) + "|" + std::to_string(ev.size) + "|" +
                  std::string(ev.ph) + "|" + std::string(ev.name) + "|" + std::string(ev.cat) +
                  "|" + std::to_string(ev.has_name) + id(ev.pid) + id(ev.tid) + id(ev.id) +
                  id(ev.bind_id) + "|" + std::to_string(ev.has_ts) + std::to_string(ev.ts) + "|" +
                  std::to_string(ev.has_dur) + std::to_string(ev.dur) + "|" +
                  std::string(ev.scope) + "|" + std::string(ev.bp) + "|" + std::string(ev.args));
  }
  out.push_back("skipped " + std::to_string(reader.skipped()) + " truncated " +
                std::to_string(reader.truncated_bytes()));
  for (const std::string& e : reader.errors()) out.push_back(e);
  for (const auto& [k, v] : reader.members()) out.push_back(k + "=" + v);
  return out;
}

// The parallel reader yields exactly the serial reader's events, skips and errors, on records
// with escapes and boundary-like strings split across windows, bad records and a cut tail.
TEST(ParallelEventReader, SameEventsAsTheSerialReader) {
  std::string escaped = Array(7, 3000, false);
  escaped += ",{\"name\":\"caf\\u00e9 \\\"q\\\"\",\"ph\":\"i\",\"ts\":\"12.5\",\"pid\":\"p\\n1\"}";
  const std::string closed = escaped + "]";
  const std::string bad =
      Array(8, 2000, false) + ",{\"name\":bad},42,{\"ph\":\"X\"," + Array(9, 2000, true).substr(1);
  const std::string cut = Array(10, 3000, false) + ",{\"name\":\"cu";
  const std::string object =
      "{\"otherData\":{\"a\":[1]},\"traceEvents\":" + closed + ",\"displayTimeUnit\":\"ns\"}";
  for (const std::string* data : {&closed, &bad, &cut, &object}) {
    const std::vector<std::string> serial = ReadAll(*data, 1, 0, 1 << 20);
    ASSERT_GT(serial.size(), 2000u);
    for (size_t threads : {2, 3, 8}) {
      for (size_t window : {4096, 65536, 1 << 20}) {
        for (size_t chunk : {512, 1 << 16}) {
          SCOPED_TRACE(std::to_string(threads) + " threads, window " + std::to_string(window) +
                       ", chunk " + std::to_string(chunk));
          EXPECT_EQ(ReadAll(*data, threads, window, chunk), serial);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tracedb::query::json
