// The "why" analyses summarised for people: the ranked root causes in words, the wait-state
// totals per pattern and the critical path's top names, over a range of steps, as text or JSON.
// One definition shared by `tracedb explain` (shell/cmd_explain.cc), the "Why" section of
// `tracedb report html` (shell/report_html.cc) and `tracedb view` (view/why_overlay.h), so that
// they all say the same sentences. The analyses themselves are why.h; definitions in docs/why.md.
// Thread safety: pure functions over an Analysis.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "query/analysis/why.h"

namespace tracedb::query::analysis {

// A range of steps: "A:B", "A:", ":B", one step "A", or "" for every event (with or without a
// step).
struct StepRange {
  bool any = true;
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  bool Has(bool has_step, int64_t step) const {
    if (any) return true;
    return has_step && step >= lo && step <= hi;
  }
};
// False when `s` is none of the forms above (or A > B).
bool ParseStepRange(const std::string& s, StepRange* r);

struct WhySummary {
  std::vector<const Cause*> causes;  // reported, in range, by cost (at most n); point into the
                                     // Analysis, which must outlive the summary
  int64_t unreported = 0;            // causes in range within the noise
  double unreported_cost = 0;
  struct Pattern {
    std::string pattern;  // PatternName()
    int64_t waits = 0, wait_ns = 0;
  };
  std::vector<Pattern> patterns;                      // by pattern name
  std::vector<std::pair<std::string, int64_t>> path;  // name -> ns on the path, by ns (at most n)
  int64_t path_ns = 0;                                // the whole path's length in range
};

// The summary of `a` over the steps of `r`, with at most `n` causes and path names.
WhySummary Summarize(const Analysis& a, const StepRange& r, int n);

// The name at index `n` of a.names ("?" when out of range).
std::string WhyName(const Analysis& a, int32_t n);

// A cause in words: "step 37: rank 2 spent 116.00 ms more in backward than the median rank;
// ranks 0, 1, 3 waited 348.00 ms in MPI_Allreduce for it".
std::string DescribeCause(const Analysis& a, const Cause& c);

// The summary as `tracedb explain` prints it (`steps`: the range as the user wrote it, or "").
std::string WhySummaryText(const Analysis& a, const WhySummary& s, const std::string& steps);

// The summary as one JSON object (docs/why.md "explain"): causes (with their sentence in
// "text"), unreported, wait_states, critical_path_ns, critical_path.
std::string WhySummaryJson(const Analysis& a, const WhySummary& s);

}  // namespace tracedb::query::analysis
