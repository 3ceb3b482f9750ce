// libFuzzer target for every byte decoder of the JSON import path: the streaming EventReader
// (with a chunk size and record limit chosen by the input's first byte, so that records cross
// buffer boundaries at every place), the gzip ByteSource, and the text helpers (escapes,
// decimal-µs to ns, members, compact re-serialisation). Built when the compiler supports
// -fsanitize=fuzzer (clang): `cmake -DCMAKE_CXX_COMPILER=clang++ …; ninja json_fuzz;
// ./json_fuzz -max_total_time=300 fixtures/import/*/*/input`. Invariants it checks (a violation
// traps): events lie inside the input, in order, each one '{…}'; compacted JSON parses again.
// Thread safety: single-threaded, as libFuzzer calls it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "query/import/json/byte_source.h"
#include "query/import/json/event_reader.h"
#include "query/import/json/json_scan.h"

namespace {

using tracedb::query::json::AppendCompactJson;
using tracedb::query::json::Scan;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// Whatever AppendCompactJson produced must be one well-formed value again.
void CheckCompact(std::string_view value) {
  std::string out;
  if (!AppendCompactJson(value, &out)) return;
  std::string again;
  Check(AppendCompactJson(out, &again));
  Check(again == out);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace json = tracedb::query::json;
  if (size == 0) return 0;
  json::ReaderOptions o;
  o.chunk_bytes = 16 + static_cast<size_t>(data[0]) * 5;
  o.max_record_bytes = 64 + static_cast<size_t>(data[0]) * 97;
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  json::EventReader reader(json::ByteSource::FromString(input, "fuzz.json"), o);
  json::TraceEvent ev;
  uint64_t last_end = 0;
  for (int n = 0;; ++n) {
    auto more = reader.Next(&ev);
    if (!more.ok() || !*more) break;
    if (!reader.source().compressed()) {
      Check(ev.offset >= last_end && ev.offset + ev.size <= input.size());
      Check(input[ev.offset] == '{' && input[ev.offset + ev.size - 1] == '}');
    }
    last_end = ev.offset + ev.size;
    Check(static_cast<size_t>(n) <= input.size() * 64 + 64);
    if (!ev.args.empty()) {
      CheckCompact(ev.args);
      json::FindMember(ev.args, "name");
      json::ForEachElement(ev.args, [](std::string_view) { return true; });
    }
  }
  Check(reader.truncated_bytes() <= reader.offset());

  std::string out;
  json::DecodeString(input, &out);
  CheckCompact(input);
  int64_t ns;
  json::ParseMicrosToNanos(input, &ns);
  json::AsString(input);
  json::AsInt(input);
  const char* after;
  const Scan s = json::SkipValue(input.data(), input.data() + input.size(), &after);
  if (s == Scan::kOk) Check(after >= input.data() && after <= input.data() + input.size());
  return 0;
}
