// LZ4 wrappers. See lz4_codec.h.
#include "engine/util/lz4_codec.h"

#include <lz4.h>

#include "engine/util/read_buffer.h"

namespace tracedb::engine {

Status Lz4Compress(std::string_view raw, std::string* dst, int acceleration) {
  if (raw.size() > static_cast<size_t>(LZ4_MAX_INPUT_SIZE)) {
    return Status::InvalidArgument("LZ4: input of " + std::to_string(raw.size()) +
                                   " bytes exceeds LZ4's limit");
  }
  const int bound = LZ4_compressBound(static_cast<int>(raw.size()));
  const auto failed = [&raw] {
    return Status::Internal("LZ4 compression of " + std::to_string(raw.size()) + " bytes failed");
  };
  // Up to 4 MiB of bound (every event block of a DB, the recorder's usual segment blocks), the
  // input is compressed into a buffer of the thread's, kept at the largest bound seen, and then
  // appended: growing `dst` by the bound first zero-filled it (about the input's size) on every
  // call, where the append copies only what the compression wrote (a 200th of it for most event
  // blocks). Larger inputs are rare and not worth keeping a buffer for.
  constexpr size_t kKeptBound = size_t{4} << 20;
  if (static_cast<size_t>(bound) <= kKeptBound) {
    thread_local ReadBuffer buffer;
    char* const out = buffer.Reserve(static_cast<size_t>(bound));
    if (out == nullptr) return failed();
    const int n =
        LZ4_compress_fast(raw.data(), out, static_cast<int>(raw.size()), bound, acceleration);
    if (n <= 0 && !raw.empty()) return failed();
    dst->append(out, static_cast<size_t>(n > 0 ? n : 0));
    return Status::Ok();
  }
  const size_t old = dst->size();
  dst->resize(old + static_cast<size_t>(bound));
  const int n = LZ4_compress_fast(raw.data(), dst->data() + old, static_cast<int>(raw.size()),
                                  bound, acceleration);
  if (n <= 0 && !raw.empty()) {
    dst->resize(old);
    return failed();
  }
  dst->resize(old + static_cast<size_t>(n > 0 ? n : 0));
  return Status::Ok();
}

namespace {
Status TooLarge(size_t raw_size) {
  return Status::Corruption("declared uncompressed size " + std::to_string(raw_size) +
                            " exceeds the limit");
}
}  // namespace

Status Lz4DecompressTo(std::string_view compressed, size_t raw_size, char* out) {
  if (raw_size > kMaxRawBlockBytes) return TooLarge(raw_size);
  const int n = LZ4_decompress_safe(compressed.data(), out, static_cast<int>(compressed.size()),
                                    static_cast<int>(raw_size));
  if (n < 0 || static_cast<size_t>(n) != raw_size) {
    return Status::Corruption("LZ4 payload does not decompress to its declared size");
  }
  return Status::Ok();
}

Status Lz4Decompress(std::string_view compressed, size_t raw_size, std::string* dst) {
  if (raw_size > kMaxRawBlockBytes) return TooLarge(raw_size);
  dst->resize(raw_size);
  return Lz4DecompressTo(compressed, raw_size, dst->data());
}

}  // namespace tracedb::engine
