// LZ4 wrappers. See lz4_codec.h.
#include "engine/lz4_codec.h"

#include <lz4.h>

namespace tracedb::engine {

void Lz4Compress(std::string_view raw, std::string* dst) {
  const int bound = LZ4_compressBound(static_cast<int>(raw.size()));
  const size_t old = dst->size();
  dst->resize(old + static_cast<size_t>(bound));
  const int n =
      LZ4_compress_default(raw.data(), dst->data() + old, static_cast<int>(raw.size()), bound);
  dst->resize(old + static_cast<size_t>(n > 0 ? n : 0));
}

Status Lz4Decompress(std::string_view compressed, size_t raw_size, std::string* dst) {
  if (raw_size > kMaxRawBlockBytes) {
    return Status::Corruption("declared uncompressed size " + std::to_string(raw_size) +
                              " exceeds the limit");
  }
  dst->resize(raw_size);
  const int n =
      LZ4_decompress_safe(compressed.data(), dst->data(), static_cast<int>(compressed.size()),
                          static_cast<int>(raw_size));
  if (n < 0 || static_cast<size_t>(n) != raw_size) {
    return Status::Corruption("LZ4 payload does not decompress to its declared size");
  }
  return Status::Ok();
}

}  // namespace tracedb::engine
