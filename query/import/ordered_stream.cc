// OrderedStream implementation. See ordered_stream.h.
#include "query/import/ordered_stream.h"

namespace tracedb::query {

Status OrderedStream::Begin(uint32_t track, int64_t ts, uint32_t name, std::string_view json) {
  Open(track).push_back(name);
  return builder_.Begin(track, ts, name, /*cat=*/0, nullptr, json);
}

Status OrderedStream::End(uint32_t track, int64_t ts, std::string_view json) {
  std::vector<uint32_t>& open = Open(track);
  if (open.empty()) {
    ++unmatched_ends_;
    return Status::Ok();
  }
  open.pop_back();
  ++rows_;
  return builder_.End(track, ts, nullptr, json);
}

Status OrderedStream::Complete(uint32_t track, int64_t ts, int64_t dur, uint32_t name,
                               std::string_view json) {
  ++rows_;
  return builder_.Complete(track, ts, dur, name, /*cat=*/0, nullptr, json);
}

Status OrderedStream::Instant(uint32_t track, int64_t ts, uint32_t name,
                              const engine::EventArgs* args) {
  ++rows_;
  return builder_.Instant(track, ts, name, /*cat=*/0, args);
}

uint64_t OrderedStream::unmatched() const {
  uint64_t n = unmatched_ends_;
  for (const auto& open : open_) n += open.size();
  return n;
}

}  // namespace tracedb::query
