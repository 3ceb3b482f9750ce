// The "why" analyses over a trace database: Scalasca-style wait states, the root causes of the
// waits (delays charged with the wait they cost, directly and through propagation) and the
// critical path, computed in C++ from one decoding of the database's blocks, over which the
// collectives and messages are matched as the query layer matches them (the tables under
// collective_arrivals and p2p_messages, query/views/views_collective.h and
// query/views/views_p2p.h). Definitions, choices and limits: docs/why.md. The SQL surface
// (wait_states, root_causes, critical_path, ...) is query/analysis/why_views.h; `tracedb explain`
// prints Explain(). Thread safety: plain functions; the Db is used from one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::query::analysis {

// The wait-state patterns (Scalasca's names, docs/why.md "Wait states").
enum class Pattern : uint8_t {
  kLateSender,
  kLateReceiver,
  kWaitAtNxN,
  kLateBroadcast,
  kEarlyReduce,
  kEarlyGather,
};
inline constexpr int kNumPatterns = 6;
const char* PatternName(Pattern p);  // "late_sender", ..., "early_gather"

// What a communication event is, from its name (MPI, NCCL, gloo/PyTorch, Horovod spellings).
enum class CollKind : uint8_t { kNxN, kOneToMany, kReduce, kGather };
CollKind CollectiveKind(const std::string& name);

// Names under which time is charged that no span of the late rank covers.
inline constexpr const char* kNoSpan = "(no span)";
inline constexpr const char* kUnattributed = "(unattributed)";

// One wait: a row of wait_states.
struct WaitState {
  int64_t id = 0;  // the waiting event (events.id)
  int64_t rank = 0;
  bool has_step = false;
  int64_t step = 0;  // the waiting rank's step at the event
  Pattern pattern = Pattern::kWaitAtNxN;
  int64_t ts = 0;       // when the wait starts (the waiting rank's entry)
  int64_t wait_ns = 0;  // > 0
  int64_t waited_for = 0;
  int32_t call = -1;    // the waiting event's name (index into Analysis::names)
  int64_t late_id = 0;  // the late rank's event of the same communication
  int64_t late_ts = 0;  // when the late rank entered it (the wait ends there)
  // The waiting event runs on a lane (e.g. PyTorch's c10d operations), not on a thread track,
  // and lasted: what the rank's threads did meanwhile is the wait (docs/why.md).
  bool on_lane = false;
};

// One root cause: a (step, rank, name) whose extra time made others wait.
struct Cause {
  bool has_step = false;
  int64_t step = 0;  // the late rank's step where the extra time was spent
  int64_t rank = 0;
  int32_t name = -1;                   // index into Analysis::names
  double cost_ns = 0;                  // direct + indirect
  double direct_ns = 0;                // waits at the synchronisation right after the delay
  double indirect_ns = 0;              // waits further along that the first ones propagated
  int64_t waits = 0;                   // waits charged (directly) to it
  std::vector<int64_t> waiting_ranks;  // ranks that waited for it directly, sorted
  int32_t call = -1;                   // the call most of the direct wait was spent in
  // Noise filter (docs/why.md "Noise"): the rank's time in `name` during the step minus the
  // median over ranks of that step, and that excess in robust standard deviations of the name's
  // rank-to-rank variation over the job's steps.
  int64_t excess_ns = 0;
  double noise_z = 0;
  bool reported = false;  // stands out: noise_z >= threshold, excess_ns >= min_share x step
};

// One piece of the critical path: a rank's time from `ts` for `dur` spent in `name`.
struct PathPiece {
  bool has_step = false;
  int64_t step = 0;   // the step window the path was traced through
  int64_t order = 0;  // position along the path within its step, from its start
  int64_t rank = 0;
  int32_t name = -1;
  int64_t ts = 0, dur = 0;
};

// Per step window: the step's time (first start to last end over ranks) and the length of the
// critical path traced through it (the same, up to the pieces no span covers).
struct StepPath {
  bool has_step = false;
  int64_t step = 0;
  int64_t start_ts = 0, end_ts = 0;
};

struct Options {
  double noise_threshold = 3.5;  // robust z-score a cause must reach to be reported
  double min_share = 0.01;       // and its excess this share of the median step time
};

struct Analysis {
  std::vector<std::string> names;
  std::vector<WaitState> waits;  // by (rank, ts)
  std::vector<Cause> causes;     // by cost, highest first
  std::vector<PathPiece> path;   // by (step, order)
  std::vector<StepPath> steps;   // by step
  // Per (step, rank, name) seconds on a rank: the what-if needs the medians (docs/why.md).
  struct NameTime {
    bool has_step = false;
    int64_t step = 0, rank = 0;
    int32_t name = -1;
    int64_t ns = 0;
    int64_t median_ns = 0;  // the median over ranks of the same step and name
  };
  std::vector<NameTime> name_times;  // by (step, rank, name)
  // Per name (index into names): the robust spread of ranks' time in it around their step's
  // median (1.4826 x MAD over every (step, rank), floored; docs/why.md "Noise").
  std::vector<double> name_sigma;
  // The median over ranks and steps of a rank's step time (its whole time without steps): a
  // cause is reported only when its excess is at least Options::min_share of it.
  int64_t median_step_ns = 0;
  // What-if (docs/why.md "What-if"): for each (step, rank, name) on the critical path where the
  // rank took longer than the median rank, the step's time had it taken the median: the step
  // time less the excess, at most the name's time on the path (a first-order estimate: the next
  // longest path may take over first).
  struct WhatIf {
    bool has_step = false;
    int64_t step = 0, rank = 0;
    int32_t name = -1;
    int64_t ns = 0, median_ns = 0, on_path_ns = 0, step_ns = 0, whatif_step_ns = 0;
  };
  std::vector<WhatIf> what_if;  // by (step, gain descending)
  // What was skipped, for `tracedb explain` and docs: collectives with a root that no arrival
  // holds, p2p receives whose completion is no blocking call.
  int64_t skipped_rooted = 0;
  int64_t skipped_nonblocking = 0;
  int64_t events = 0;  // events decoded
};

// Runs every analysis over the database `db` (a query connection: the tracedb SQL surface is
// installed on it). Errors name the table or block they come from.
StatusOr<Analysis> Analyze(engine::Db* db, const Options& options = {});

}  // namespace tracedb::query::analysis
