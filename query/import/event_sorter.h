// EventSorter: puts an importer's events in the order engine::TraceBuilder needs (per track, by
// start time) with bounded memory: events are buffered up to a budget, then each full buffer is
// sorted and spilled to an anonymous temporary file as one run; Drain() merges the runs. A file
// of any size is therefore imported with at most `memory_budget` bytes of buffered events (half
// for the events, half for their JSON args; plus one read buffer per spilled run). A buffer is
// sorted as a permutation: a stable counting sort by track, then each track's run sorted only
// when it is not in order already (most writers write a thread's events in order); a spilled
// event is written compactly (fields that are zero or follow from others left out).
//
// Order: by (track, ts, order, seq). `order` breaks ties at equal ts: complete events use -dur
// (the longer one encloses the shorter), begin/end events use kBeginEndOrder (before any complete
// event that starts at the same time, so that an end closes its span before the next starts),
// and instants, counters and flows use 0 (inside spans that start at the same time). `seq` is
// the file order, so begin/end pairs at one timestamp keep their order.
// Thread safety: one thread at a time.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/segment/segment_format.h"
#include "engine/util/status.h"

namespace tracedb::query {

// kFlowInstant: an instant that carries a flow_phase arg (a flow end-point in tracedb's own
// export, an instant in any other file: decided once the file's otherData is read).
enum class PendingOp : uint8_t { kBegin, kEnd, kComplete, kInstant, kCounter, kFlow, kFlowInstant };

inline constexpr int64_t kBeginEndOrder = INT64_MIN;

// One event waiting to be fed to the builder. Its JSON args travel beside it.
struct PendingEvent {
  uint32_t track = 0;  // importer-local track index
  PendingOp op = PendingOp::kInstant;
  int64_t ts = 0;     // ns
  int64_t dur = 0;    // ns (kComplete)
  int64_t order = 0;  // tie-break at equal ts (see above)
  uint64_t seq = 0;   // file order
  uint32_t name = 0;
  uint32_t cat = 0;
  double value = 0;  // kCounter
  engine::EventArgs args;
};

class EventSorter {
 public:
  explicit EventSorter(size_t memory_budget = 64u << 20);
  ~EventSorter();
  EventSorter(const EventSorter&) = delete;
  EventSorter& operator=(const EventSorter&) = delete;

  // Adds one event with its JSON args (copied).
  Status Add(const PendingEvent& e, std::string_view json);
  // Calls fn(event, json) for every event added, in order; then the sorter is empty.
  Status Drain(const std::function<Status(const PendingEvent&, std::string_view)>& fn);

  uint64_t size() const { return count_; }
  size_t runs_spilled() const { return runs_.size(); }

 private:
  struct Item {
    PendingEvent e;
    uint64_t json_off = 0;
    uint32_t json_len = 0;
  };
  struct Run;
  static bool Less(const PendingEvent& a, const PendingEvent& b);
  Status Spill();
  // Fills order_ with the indices of items_ in sorted order (the items stay where they are).
  void SortBuffer();

  size_t budget_;
  std::vector<Item> items_;
  std::vector<uint32_t> order_;   // SortBuffer's permutation of items_
  std::vector<uint32_t> bucket_;  // SortBuffer's per-track counts
  std::string arena_;             // JSON args of the buffered items
  std::string out_;               // Spill's encoding buffer
  std::vector<std::unique_ptr<Run>> runs_;
  uint64_t count_ = 0;
};

}  // namespace tracedb::query
