// libFuzzer targets for the engine's decoders; TRACEDB_FUZZ_TARGET picks the entry point
// (engine/fuzz/decoder_fuzz.h). Built only with clang (-fsanitize=fuzzer).
#include <cstddef>
#include <cstdint>

#include "engine/fuzz/decoder_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tracedb::engine::fuzz::TRACEDB_FUZZ_TARGET(data, size);
  return 0;
}
