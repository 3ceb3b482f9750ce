// TraceBuilder: turns per-track streams of begin/end/complete/instant/counter events into the
// finished rows of a trace database, computing each event's id, nesting depth and parent.
//
// Per track, events should arrive in the order they started (begin, complete and instant by
// non-decreasing ts; an end closes the innermost open span). A complete event's parent is the
// innermost span still open or not yet ended at its start. A complete event or instant that
// arrives after one that started later (a lane shared by threads: each thread's buffer reaches
// the segment on its own, e.g. the PyTorch observer's "c10d N" lanes, written at completion from
// gloo's worker threads) is placed by containment instead: its parent is the innermost span on
// the stack that contains it in time (none: depth 0), and it is not pushed, so it parents
// nothing (counted in stats as `late_arrivals`). A parent therefore always contains its child;
// only improper nesting (a child that outlives its parent, counted) breaks that. Spans left
// open at the end of a batch are kept in the database (SaveState) and finished by a later
// batch, so incremental work gives the same rows as one pass. Complete events that overlap
// without nesting (each starting before the one before ended, as spans recorded after the fact
// with a clock read do) nest one under the other by that rule, and an ended frame stays on the
// stack until every frame above it ends: a track's stack of 4,096 frames or more is therefore
// rid of its ended frames, which no event that arrives in order can have as parent (each frame
// keeps its depth; only a late arrival's containment could have found one), but for the frame
// under a span still open: that span's parent when it ends. The stack's memory and the saved
// state then follow the events still running, not the events seen (10M overlapping spans:
// 1.2 GB of peak RSS and a 318 MB state before). A span whose process ended before its end
// came is written by CloseOpenSpans, flagged open. Defects are counted in stats:
// unmatched_end, improper_nesting, negative_duration.
// Thread safety: one thread at a time; shares its TraceWriter.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/db/event_block.h"
#include "engine/db/trace_writer.h"
#include "engine/util/status.h"

namespace tracedb::engine {

class TraceBuilder {
 public:
  explicit TraceBuilder(TraceWriter* writer) : w_(writer) {}

  // Restores the open spans saved by a previous batch under `state_key`.
  Status LoadState(std::string_view state_key);
  // Saves the open spans (call before TraceWriter::CommitBatch()).
  Status SaveState(std::string_view state_key);

  // Every ts and dur in ns on the job's common clock. `args` may be null; `json` is a JSON
  // object text of free arguments, or empty.
  Status Begin(uint32_t track, int64_t ts, uint32_t name, uint32_t cat, const EventArgs* args,
               std::string_view json = {});
  // Closes the innermost open span of `track`; its arguments are merged into the span's.
  Status End(uint32_t track, int64_t ts, const EventArgs* args = nullptr,
             std::string_view json = {});
  Status Complete(uint32_t track, int64_t ts, int64_t dur, uint32_t name, uint32_t cat,
                  const EventArgs* args, std::string_view json = {});
  // One complete event of a run (CompleteRun): ts and dur as for Complete(); `args` may be null.
  struct RunEvent {
    int64_t ts;
    int64_t dur;
    uint32_t name;
    uint32_t cat;
    const EventArgs* args;
  };
  // The same as Complete(track, e.ts, e.dur, e.name, e.cat, e.args) for each of the n events in
  // order, without JSON. A run pays the track lookup and the call once, not per event: most of
  // a compaction's events are runs of complete events of one thread or lane (of any categories:
  // a Horovod lane alternates its phases with the collective that holds them).
  Status CompleteRun(uint32_t track, const RunEvent* events, size_t n);
  Status Instant(uint32_t track, int64_t ts, uint32_t name, uint32_t cat, const EventArgs* args,
                 std::string_view json = {}, RowKind kind = RowKind::kInstant);
  Status Counter(uint32_t track, int64_t ts, uint32_t name, uint32_t cat, double value);

  // Spans still open on every track (for stats and info).
  uint64_t open_spans() const;
  // The tracks with at least one span open.
  std::vector<uint32_t> TracksWithOpenSpans() const;
  // Writes every span still open on `track` as a row flagged open (Row::open), innermost first,
  // ending at `end_ts` (the time the track's process was last seen; never before a span's
  // start), and forgets the track's state: its process is over, no end will come.
  // Returns the number of rows written.
  StatusOr<uint64_t> CloseOpenSpans(uint32_t track, int64_t end_ts);

 private:
  // One nesting level of a track: a span begun and not yet ended (end INT64_MAX), or a complete
  // event whose end is known. Only 32 bytes: complete events, most of the stack's traffic, need
  // nothing more, and pushing a frame that also held the arguments cost a 112-byte zeroing per
  // event (a third of Complete's time in a compaction profile).
  struct Frame {
    uint64_t k;
    int64_t ts;
    int64_t end;     // INT64_MAX while open
    uint32_t depth;  // its row's depth: the frame under it's + 1 when pushed
  };
  // A track's stack is rid of its ended frames when it reaches this size (and then again at
  // twice what is left).
  static constexpr size_t kPruneFrames = 4096;
  // What End() takes from the span it closes, kept for open frames only.
  struct OpenSpan {
    uint32_t name = 0;
    uint32_t cat = 0;
    EventArgs args;
    std::string json;
  };
  // Frames are trivial: a resize (CompleteRun makes room for a run's pushes at once) leaves
  // the new ones uninitialized instead of zeroing them.
  struct TrackState {
    std::vector<Frame, DefaultInitAllocator<Frame>> stack;
    std::vector<OpenSpan> open;  // one per frame of `stack` with end INT64_MAX, in stack order
    size_t prune_at = kPruneFrames;
  };
  // Removes the frames of `f[0, n)` that ended at or before `ts`, but for open ones and those
  // under an open one (its parent), keeping the order; returns the frames left and sets the next
  // size to prune at.
  static size_t PruneEnded(Frame* f, size_t n, int64_t ts, size_t* prune_at);

  TrackState& State(uint32_t track) {
    if (track >= tracks_.size()) tracks_.resize(track + 1);
    return tracks_[track];
  }
  // Pops finished entries that end at or before `ts`: what is left on the stack encloses ts.
  // Inline, as is the push of a frame: they run once or twice per event.
  static void PopFinished(TrackState* s, int64_t ts) {
    while (!s->stack.empty() && s->stack.back().end <= ts) {
      // Only an event at ts INT64_MAX (hostile input) pops an open span here.
      if (s->stack.back().end == INT64_MAX) s->open.pop_back();
      s->stack.pop_back();
    }
  }
  // Where a complete event goes: its ordinal, depth and parent, and its duration (negative ones
  // made 0). Counts its defects, and pushes its frame unless it arrived late.
  struct Placed {
    uint64_t k = 0;
    uint64_t parent_k = 0;
    uint32_t depth = 0;
    int64_t dur = 0;
  };
  Placed PlaceComplete(TrackState* s, int32_t rank, uint32_t track, int64_t ts, int64_t dur);
  static void FillParent(const TrackState& s, Row* row) {
    row->depth = s.stack.empty() ? 0 : s.stack.back().depth + 1;
    row->parent_k = s.stack.empty() ? 0 : s.stack.back().k + 1;
  }
  // True when an event starting at `ts` arrives after the top frame, which started later: the
  // stack does not describe its time (see the header comment).
  static bool ArrivedLate(const TrackState& s, int64_t ts) {
    return !s.stack.empty() && s.stack.back().ts > ts;
  }
  // A late arrival's parent: the innermost frame that contains [ts, end], else none.
  static void FillParentByContainment(const TrackState& s, int64_t ts, int64_t end, uint32_t* depth,
                                      uint64_t* parent_k) {
    *depth = 0;
    *parent_k = 0;
    for (size_t i = s.stack.size(); i-- > 0;) {
      const Frame& f = s.stack[i];
      if (f.ts <= ts && end <= f.end) {
        *depth = f.depth + 1;
        *parent_k = f.k + 1;
        return;
      }
    }
  }
  // Field by field: a Frame built by the caller and copied in with a 16-byte load of two 8-byte
  // stores, most likely a failed store forwarding, took 5% of a compaction profile.
  static void PushFrame(TrackState* s, uint64_t k, int64_t ts, int64_t end) {
    const uint32_t depth = s->stack.empty() ? 0 : s->stack.back().depth + 1;
    Frame& f = s->stack.emplace_back();
    f.k = k;
    f.ts = ts;
    f.end = end;
    f.depth = depth;
    if (s->stack.size() >= s->prune_at) [[unlikely]] {
      s->stack.resize(PruneEnded(s->stack.data(), s->stack.size(), ts, &s->prune_at));
    }
  }

  TraceWriter* w_;
  std::vector<TrackState> tracks_;  // index = track id
};

}  // namespace tracedb::engine
