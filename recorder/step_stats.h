// StepStats: the recorder's per-step summary of one process (the `step_stats` table,
// docs/flight.md "step_stats") and flight mode's slow-step detector. The flusher hands it every
// event it decodes (OnEvent), in each thread's order; it attributes them by timestamp to the
// steps that tracedb_step markers delimit, and hands finished steps back as STEPSTATS rows
// (TakeFinished), in every mode, flight or not. Nothing here runs on the recording path.
//
// Definitions (per step, over all the process's threads):
//   dur_ns      from the step's marker to the next one (the last step: to its last event)
//   compute_ns  time inside outermost spans of category compute or cuda
//   comm_ns     time inside outermost communication calls (categories mpi, nccl, comm)
//   wait_ns     the part of comm_ns in blocking calls: every mpi/comm call but the
//               non-blocking starts (MPI_I*, except MPI_Init*); nccl calls only enqueue
//   bytes       the `bytes` argument of communication events that start in the step
//   events      the rows the step has in the events table when written in detail: spans
//               (a begin/end pair once), instants and counters that start in it
//   top         the 5 names with the most inclusive span time in the step
// A span that crosses a step boundary is split between the steps (a part that falls in a step
// already handed back is not counted). Events of another thread
// drained before the marker that ends a step are counted to that step up to the marker only
// when the marker was drained first (the flusher drains the stepping thread's chunk first).
// Thread safety: owned by the flusher thread.
#pragma once

#include <cstdint>
#include <deque>
#include <string_view>
#include <vector>

#include "engine/segment/segment_format.h"

namespace tracedb::recorder {

class StepStats {
 public:
  enum : uint8_t { kCompute = 1, kComm = 2, kWait = 4 };
  static constexpr size_t kTopNames = 5;
  static constexpr size_t kSlowWindow = 20;     // the recent steps whose median a step is held to
  static constexpr size_t kSlowMinHistory = 5;  // steps needed before any is called slow
  // ...and a slow step is also this much longer than the median: a loaded machine stretches a
  // 3 ms step to 10 ms now and then, which is no moment worth keeping.
  static constexpr int64_t kSlowMinExcessNs = 50000000;
  static constexpr size_t kMaxPending = 4096;  // closed steps kept waiting to be final

  struct Open {
    int64_t ts;
    uint32_t name;
    uint8_t cls;    // kCompute, kComm: the classes it belongs to
    uint8_t outer;  // kCompute/kComm/kWait: the outermost span of that class on this thread
  };
  struct Thread {
    std::vector<Open> stack;  // begins on the thread's own track (lane 0), innermost last
    uint32_t compute_depth = 0;
    uint32_t comm_depth = 0;
    uint32_t untracked = 0;  // begins past kMaxDepth, whose ends are skipped
  };

  // `slow_factor` > 1: a step longer than slow_factor times the median of the last kSlowWindow
  // steps, and kSlowMinExcessNs longer than it, is slow (OnEvent says so); 0: never.
  void Configure(double slow_factor) { slow_factor_ = slow_factor; }
  // Classifies the names interned since the last call (the non-blocking MPI calls).
  void RefreshNames();
  // Classifies string `id` (RefreshNames does it for the catalog's strings).
  void ClassifyName(uint32_t id, std::string_view s);
  // The state of thread `index` (stable until the next call).
  Thread* ThreadState(uint32_t index);
  // Thread `index` has exited: its spans still open are dropped (the index may be reused).
  void ForgetThread(uint32_t index) {
    if (index < threads_.size()) threads_[index] = Thread();
  }
  // One decoded event. True when it is a step marker that ended a slow step (slow_step(),
  // slow_end() say which).
  bool OnEvent(Thread* t, engine::EventKind kind, uint8_t cat, int64_t ts, uint32_t name,
               uint32_t lane, int64_t ival, const engine::EventArgs* args);
  int64_t slow_step() const { return slow_step_; }
  // Appends to `out` the closed steps that ended at or before `safe_ns` (every event that
  // started before it has been drained), oldest first; with `final`, every step, the open one
  // ending at its last event.
  void TakeFinished(int64_t safe_ns, bool final, std::vector<engine::StepStat>* out);

 private:
  struct Step {
    engine::StepStat s;
    int64_t end = INT64_MAX;                          // INT64_MAX: still open
    int64_t last_ns = 0;                              // the latest event time seen in it
    std::vector<std::pair<uint32_t, int64_t>> names;  // (name, inclusive ns), unordered
  };
  Step* StepAt(int64_t ts);
  void AddSpan(int64_t a, int64_t b, uint32_t name, uint8_t outer);
  void MarkStep(int64_t ts, int64_t step, bool* slow);
  // Adds `ns` to `name` in `st`: through name_slot_ for the newest step, by search otherwise.
  void AddName(Step* st, bool newest, uint32_t name, int64_t ns);
  void Finish(Step* st, std::vector<engine::StepStat>* out);
  bool NonBlocking(uint32_t name) const {
    return name < nonblocking_.size() && nonblocking_[name] != 0;
  }

  double slow_factor_ = 0;
  int64_t slow_step_ = 0;
  std::deque<Step> pending_;          // oldest first; the last may be open
  std::deque<int64_t> recent_;        // durations of the last kSlowWindow closed steps
  std::vector<uint8_t> nonblocking_;  // by string id
  uint32_t names_known_ = 0;
  std::vector<Thread> threads_;  // by thread index
  // By name id (below kMaxSlotName): 1 + its index in the newest step's `names`, else 0.
  std::vector<uint32_t> name_slot_;
  std::vector<std::pair<uint32_t, int64_t>> top_scratch_;
};

}  // namespace tracedb::recorder
