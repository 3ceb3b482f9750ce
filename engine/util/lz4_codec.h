// LZ4 block compression of whole column payloads (the LZ4 "block" API, not the frame API: the
// segment and DB block headers already carry both sizes and a CRC).
// Thread safety: any thread (Lz4Compress keeps a scratch buffer per thread, up to 4 MiB).
// Format: docs/segment-format.md, section "Compression".
#pragma once

#include <string>
#include <string_view>

#include "engine/util/status.h"

namespace tracedb::engine {

// Largest uncompressed block we accept on read (guards allocations driven by file contents).
inline constexpr size_t kMaxRawBlockBytes = 64u << 20;

// Appends the LZ4 compression of `raw` to `dst`. InvalidArgument when `raw` is larger than LZ4
// accepts, Internal when LZ4 reports a failure; `dst` is then left as it was, so a
// caller can never store an empty payload by mistake.
// `acceleration` > 1 is LZ4's faster mode (LZ4_compress_fast): it skips ahead ever further
// through bytes that do not match, so it spends less on incompressible input and compresses a
// little less; every LZ4 decoder reads its output.
[[nodiscard]] Status Lz4Compress(std::string_view raw, std::string* dst, int acceleration = 1);

// Decompresses `compressed` into exactly `raw_size` bytes in *dst (replacing its contents).
// Corruption when the input is malformed or does not expand to exactly raw_size bytes.
Status Lz4Decompress(std::string_view compressed, size_t raw_size, std::string* dst);
// Same, into out[0, raw_size): room the caller keeps between blocks (a string resized for each
// block zero-fills whatever it grows by, before LZ4 writes over it).
Status Lz4DecompressTo(std::string_view compressed, size_t raw_size, char* out);

}  // namespace tracedb::engine
