// The aggregates behind `tracedb report html`, `tracedb diff` and `tracedb top`: small summaries
// of a trace database (per rank and time bin, per step, per name), never its events, plus the
// Mann-Whitney U test that `diff` uses to say whether a change is significant.
// Definitions (what counts as compute, communication, idle, an outlier step…): docs/report.md,
// docs/diff.md, docs/top.md.
// Thread safety: every function uses only the Db it is given (one thread at a time).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::query {

// [begin, end) in ns.
struct Interval {
  int64_t begin = 0;
  int64_t end = 0;
};

// Sorts and merges `v` in place into disjoint intervals; returns their total length.
int64_t MergeIntervals(std::vector<Interval>* v);

// Per rank: the time covered by compute spans, by communication spans and by any span
// (unions of intervals, so nesting counts once; activity() of docs/sql.md decides), in total
// and per time bin.
struct RankActivity {
  int32_t rank = 0;
  int64_t compute_ns = 0;
  int64_t comm_ns = 0;
  int64_t busy_ns = 0;  // covered by a compute or communication span
  int64_t wall_ns = 0;  // last span end - first span start (as rank_time_split)
  int64_t first_ts = 0;
  int64_t last_end = 0;
  uint64_t spans = 0;
  // Per bin, ns covered (bins of Overview::bin_ns from Overview::t0).
  std::vector<int64_t> compute_bins, comm_bins, busy_bins;
};

struct Overview {
  int64_t t0 = 0;      // ns, common clock
  int64_t t1 = 0;      // ns
  int64_t bin_ns = 1;  // width of a bin
  int bins = 0;
  std::vector<RankActivity> ranks;  // by rank
};

// Reads the spans of every rank (one rank at a time, `rank =` pushed down) that overlap
// [t0, t1) (the whole trace when t1 <= t0) and bins their activity into `bins` bins.
StatusOr<Overview> BuildOverview(engine::Db* db, int bins, int64_t t0 = 0, int64_t t1 = 0);

// Per step over all ranks (from step_times), with the outliers marked: a step whose time
// (the slowest rank's) is more than 3.5 robust standard deviations (1.4826 × MAD) from the
// median of all steps.
struct StepPoint {
  int64_t step = 0;
  int64_t start_ts = 0;  // earliest rank's start
  int32_t ranks = 0;
  int64_t max_ns = 0;
  int64_t mean_ns = 0;
  int32_t slowest_rank = -1;
  bool outlier = false;
};
StatusOr<std::vector<StepPoint>> BuildStepSeries(engine::Db* db);

// Per span name over all ranks: count, total, mean, exact p50/p99 (nearest rank), and the
// per-step values: for each step, the time spent in that name summed over the step's events and
// averaged over the ranks that ran it.
struct NameStats {
  std::string name;
  std::string cat;
  bool routine = false;  // a communication routine (activity 'comm'), else a phase
  uint64_t count = 0;
  int64_t total_ns = 0;
  double mean_ns = 0;
  int64_t p50_ns = 0;
  int64_t p99_ns = 0;
  std::vector<double> per_step;       // ns, one value per step, in step order
  std::vector<int64_t> per_step_ids;  // the step of each per_step value
  // Per step (the same steps): the least time over the ranks that ran it. For a collective
  // routine that is the rank that arrived last, which waited least: the routine's own cost
  // (transfer, protocol) without the wait for late ranks, which is imbalance elsewhere.
  std::vector<double> per_step_fastest;
  // Message sizes of its spans with bytes > 0: (floor(log2(bytes)), spans), by bucket.
  std::vector<std::pair<int, uint64_t>> size_buckets;
};
StatusOr<std::vector<NameStats>> BuildNameStats(engine::Db* db);

// A whole run in a few numbers, for `diff`.
struct RunSummary {
  std::string path;
  int32_t ranks = 0;
  uint64_t events = 0;
  std::vector<NameStats> names;
  std::vector<double> step_ns;      // per step: the slowest rank's time
  std::vector<int64_t> step_ids;    // the step number of each step_ns value
  double comm_share = 0;            // communication time / wall time, summed over ranks
  std::vector<int32_t> stragglers;  // ranks, worst first (docs/diff.md)
  std::string straggler_basis;      // "collectives" or "steps" or "" (none found)
  // Per rank that arrived last in a collective: the wait it caused (stragglers.caused_wait_ns),
  // by rank. Empty without matched collectives.
  std::vector<std::pair<int32_t, int64_t>> caused_wait_ns;
};
StatusOr<RunSummary> BuildRunSummary(engine::Db* db, const std::string& path);

// The collectives matched across ranks by (comm, seq), from collective_calls in one pass: the
// same numbers as the collectives, stragglers and collective_wait views (docs/sql.md), which
// compute them with window functions.
struct CollectiveSkew {
  int64_t first_arrival = 0;  // ns
  int64_t skew_ns = 0;        // last arrival - first arrival
  int32_t ranks = 0;
  int32_t last_rank = -1;  // the latest to arrive (the lowest rank among equal arrivals)
};
struct RankCollectives {
  int32_t rank = 0;
  uint64_t collectives = 0;
  int64_t waited_ns = 0;       // sum over its calls of (last arrival - its arrival)
  int64_t late_ns = 0;         // sum of (its arrival - first arrival)
  uint64_t times_last = 0;     // collectives of more than one rank where it arrived last
  int64_t caused_wait_ns = 0;  // sum of their skews (stragglers.caused_wait_ns)
  int64_t max_skew_ns = 0;
};
struct CollectiveData {
  std::vector<CollectiveSkew> collectives;  // by first arrival
  std::vector<RankCollectives> ranks;       // by rank
};
StatusOr<CollectiveData> BuildCollectives(engine::Db* db);

// The arrival skew of the collectives of more than one rank over time: the collectives' first
// arrivals (ns after t0) cut into at most `bins` bins of equal width, and per non-empty bin (in
// time order) its middle, the largest and the mean skew. Any timestamps (a DB made elsewhere
// can hold them at both ends of int64): the arithmetic is 128-bit and the times saturate.
struct SkewBin {
  int64_t t = 0;  // ns after t0, the middle of the bin
  int64_t max_ns = 0;
  double mean_ns = 0;
  int64_t collectives = 0;
};
std::vector<SkewBin> BinSkew(const CollectiveData& cd, int64_t t0, int bins);

// The straggler ranks, worst first (at most `limit`): the ranks that others waited for in
// collectives (stragglers view), else the ranks most often slowest in a step. *basis says which.
// *caused_wait (optional) gets every rank's caused wait (ranks that were last at least once).
StatusOr<std::vector<int32_t>> FindStragglers(
    engine::Db* db, int limit, std::string* basis,
    std::vector<std::pair<int32_t, int64_t>>* caused_wait = nullptr);

// Two-sided Mann-Whitney U test of samples a and b (ties get mid-ranks). Exact p-value when
// there are no ties and both samples have at most 20 values, else the normal approximation with
// tie correction and continuity correction.
struct MannWhitney {
  double u_a = 0;  // U of a: the number of pairs (x in a, y in b) with x > y (ties count 1/2)
  double u_b = 0;
  double z = 0;  // 0 with the exact method
  double p = 1;  // two-sided
  bool exact = false;
  // Probability that a value of b exceeds a value of a (u_b / (n_a n_b)); 0.5 means no shift.
  double effect = 0.5;
};
MannWhitney MannWhitneyU(const std::vector<double>& a, const std::vector<double>& b);

// Two runs compared name by name (names in either run, by B's total time then A's).
struct NameDiff {
  std::string name;
  std::string cat;
  bool routine = false;
  const NameStats* a = nullptr;  // null: the name is not in A
  const NameStats* b = nullptr;
  bool has_change = false;  // both runs have it
  double mean_change = 0;   // (mean B - mean A) / mean A
  double total_change = 0;  // (total B - total A) / total A
  bool has_test = false;    // both runs have per-step values
  MannWhitney test;         // per-step values of A against B
};
struct RunDiff {
  RunSummary a, b;
  std::vector<NameDiff> names;
  double step_mean_a = 0, step_mean_b = 0;  // ns
  double step_change = 0;                   // relative; 0 when A has no steps
  bool has_step_test = false;
  MannWhitney step_test;
};
// REQUIRES: the RunDiff is not copied after (NameDiff points into its a and b). Hence the
// out-parameter.
void CompareRuns(RunSummary a, RunSummary b, RunDiff* out);

// The wait that the straggler ranks of A and of B caused in each run (the ranks in either run's
// `stragglers`, B's first; 0 where a rank caused none), for `diff`'s "rank 3 caused 88 ms ->
// 511 ms of waiting".
struct StragglerWait {
  int32_t rank = 0;
  int64_t a_ns = 0;
  int64_t b_ns = 0;
};
std::vector<StragglerWait> CompareStragglerWait(const RunSummary& a, const RunSummary& b);

// Nearest-rank percentile (0-100) of `v` (sorted in place); 0 when empty.
double Percentile(std::vector<double>* v, double p);

}  // namespace tracedb::query
