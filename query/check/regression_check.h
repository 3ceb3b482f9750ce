// `tracedb check`'s analysis: one run compared with a history of baseline runs, name by name
// (span names: phases and communication routines) and for the step time, with the run-to-run
// variation of the baselines taken into account, so that noise between runs is not reported as
// a regression. Inputs are query::RunSummary (query/report/report_data.h): per-step values of every
// name, per-step times. The test is query::MannWhitneyU; this file adds the pooling, the
// between-run guard and the thresholds. Method and its reasons: docs/check.md.
// Thread safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "query/report/report_data.h"

namespace tracedb::query::check {

// Defaults measured on the development machine (docs/check.md "Choosing the defaults").
struct CheckOptions {
  double alpha = 0.001;         // p below this: the shift is not chance (within-run test)
  double min_change = 0.15;     // relative change of the median per-step value
  double min_abs_ns = 500'000;  // and at least this much per step (ns)
  double between_factor = 3;    // threshold >= this x the baselines' run-to-run variation
  int warmup_steps = 1;         // each run's first steps, left out (start-up, first collective)
  int min_steps = 3;            // per-step values a run needs for a name to be tested
};

enum class Verdict {
  kOk,        // tested, no significant change beyond the thresholds
  kSlower,    // a regression
  kFaster,    // an improvement
  kNew,       // only in the run (a regression when it costs more than the thresholds)
  kVanished,  // only in the baselines (never a failure)
  kSkipped,   // too few per-step values to test
};
const char* VerdictName(Verdict v);

struct CheckedName {
  std::string name;  // the span name, or "step" for the step time
  std::string cat;
  std::string kind;  // "phase", "routine" or "step"
  Verdict verdict = Verdict::kOk;
  bool failed = false;         // counts as a regression (kSlower, or a costly kNew)
  int baseline_runs = 0;       // baselines that have the name
  size_t baseline_values = 0;  // pooled per-step values of the baselines
  size_t run_values = 0;
  double baseline_ns = 0;  // median of the pooled baseline per-step values
  double run_ns = 0;       // median of the run's per-step values
  double change = 0;       // (run - baseline) / baseline; 0 when not comparable
  double abs_change_ns = 0;
  bool has_test = false;
  double p = 1;                // two-sided Mann-Whitney U, pooled baseline values against the run's
  double between_cv = 0;       // sd / mean of the baselines' per-run medians (0 with < 2 runs)
  double threshold = 0;        // the relative change needed: max(min_change, factor x between_cv)
  double baseline_max_ns = 0;  // largest and smallest per-run baseline median
  double baseline_min_ns = 0;
  std::string reason;  // why skipped, or what decided the verdict, in words
};

struct CheckResult {
  std::vector<CheckedName> names;  // "step" first, then by the run's median, largest first
  int regressions = 0;
  int improvements = 0;
  bool passed() const { return regressions == 0; }
};

// REQUIRES: baselines is not empty.
CheckResult CheckRun(const std::vector<RunSummary>& baselines, const RunSummary& run,
                     const CheckOptions& options);

// Median of v (sorted copy); 0 when empty.
double Median(std::vector<double> v);

}  // namespace tracedb::query::check
