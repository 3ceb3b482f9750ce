// hostile_db_fuzz: the libFuzzer target of the hostile-database harness (db_fuzz.h). An unclean
// outcome (an exception out of a reader, an error without a message) traps, so that libFuzzer
// reports and saves the input; crashes, sanitizer reports, hangs (-timeout) and memory
// (-rss_limit_mb) are libFuzzer's own findings.
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "query/fuzz/db_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const tracedb::query::fuzz::DbResult r = tracedb::query::fuzz::HostileDb(data, size);
  if (!r.clean) {
    std::fprintf(stderr, "unclean outcome: %s\n", r.detail.c_str());
    __builtin_trap();
  }
  return 0;
}
