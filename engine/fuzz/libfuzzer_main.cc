// libFuzzer targets for the engine's decoders; TRACEDB_FUZZ_TARGET picks the entry point
// (engine/fuzz/decoder_fuzz.h). Built only with clang (-fsanitize=fuzzer). An unclean outcome
// (neither OK nor a clean error) traps, so that libFuzzer reports and saves the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "engine/fuzz/decoder_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const tracedb::engine::fuzz::Result r = tracedb::engine::fuzz::TRACEDB_FUZZ_TARGET(data, size);
  if (r.outcome == tracedb::engine::fuzz::Outcome::kUnclean) {
    std::fprintf(stderr, "unclean outcome: %s\n", r.detail.c_str());
    __builtin_trap();
  }
  return 0;
}
