// OrderedStream implementation. See ordered_stream.h.
#include "query/import/ordered_stream.h"

namespace tracedb::query {

void OrderedStream::Begin(uint32_t track, int64_t ts, uint32_t name, std::string_view json) {
  Open(track).push_back(name);
  pipe_.Begin(track, ts, name, /*cat=*/0, nullptr, json);
}

void OrderedStream::End(uint32_t track, int64_t ts, std::string_view json) {
  std::vector<uint32_t>& open = Open(track);
  if (open.empty()) {
    ++unmatched_ends_;
    return;
  }
  open.pop_back();
  ++rows_;
  pipe_.End(track, ts, nullptr, json);
}

void OrderedStream::Complete(uint32_t track, int64_t ts, int64_t dur, uint32_t name,
                             std::string_view json) {
  ++rows_;
  pipe_.Complete(track, ts, dur, name, /*cat=*/0, nullptr, json);
}

void OrderedStream::Instant(uint32_t track, int64_t ts, uint32_t name,
                            const engine::EventArgs* args) {
  ++rows_;
  pipe_.Instant(track, ts, name, /*cat=*/0, args, {});
}

uint64_t OrderedStream::unmatched() const {
  uint64_t n = unmatched_ends_;
  for (const auto& open : open_) n += open.size();
  return n;
}

}  // namespace tracedb::query
