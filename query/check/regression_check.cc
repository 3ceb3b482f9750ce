// The comparison of one run with its baselines for `tracedb check`. See regression_check.h and
// docs/check.md (the method, and why it is built this way).
#include "query/check/regression_check.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

namespace tracedb::query::check {
namespace {

// A run's first `warmup` step numbers.
std::set<int64_t> WarmupSteps(const RunSummary& r, int warmup) {
  std::vector<int64_t> ids = r.step_ids;
  std::sort(ids.begin(), ids.end());
  std::set<int64_t> out;
  for (size_t i = 0; i < ids.size() && static_cast<int>(i) < warmup; ++i) out.insert(ids[i]);
  return out;
}

// The values whose step is not a warm-up step (all of them when ids do not match values).
std::vector<double> AfterWarmup(const std::vector<double>& values, const std::vector<int64_t>& ids,
                                const std::set<int64_t>& warm) {
  if (ids.size() != values.size() || warm.empty()) return values;
  std::vector<double> out;
  out.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (warm.count(ids[i]) == 0) out.push_back(values[i]);
  }
  return out;
}

// One name's per-step values in each run (empty: the run lacks the name).
struct Series {
  std::string name, cat, kind;
  std::vector<std::vector<double>> baselines;
  std::vector<double> run;
  bool in_run = false;
  int in_baselines = 0;
};

void Decide(const Series& s, const CheckOptions& o, double base_step_ns, CheckedName* c) {
  c->name = s.name;
  c->cat = s.cat;
  c->kind = s.kind;
  c->baseline_runs = s.in_baselines;
  std::vector<double> pooled, medians;
  for (const auto& b : s.baselines) {
    pooled.insert(pooled.end(), b.begin(), b.end());
    if (static_cast<int>(b.size()) >= o.min_steps) medians.push_back(Median(b));
  }
  c->baseline_values = pooled.size();
  c->run_values = s.run.size();
  c->baseline_ns = Median(pooled);
  c->run_ns = Median(s.run);
  c->threshold = o.min_change;
  if (!s.in_run) {
    c->verdict = Verdict::kVanished;
    c->reason = "only in the baselines";
    return;
  }
  if (s.in_baselines == 0) {
    c->verdict = Verdict::kNew;
    c->abs_change_ns = c->run_ns;
    // A new name is a regression when it costs what a regression of the step time would.
    const double needed = std::max(o.min_abs_ns, o.min_change * base_step_ns);
    c->failed = c->run_ns >= needed && static_cast<int>(s.run.size()) >= o.min_steps;
    c->reason = c->failed ? "only in the run, and its time per step is above the thresholds"
                          : "only in the run, below the thresholds";
    return;
  }
  if (static_cast<int>(s.run.size()) < o.min_steps ||
      static_cast<int>(pooled.size()) < o.min_steps) {
    c->verdict = Verdict::kSkipped;
    c->reason = "fewer than " + std::to_string(o.min_steps) + " steps with it after the warm-up";
    return;
  }
  if (c->baseline_ns <= 0) {
    c->verdict = Verdict::kSkipped;
    c->reason = "zero time in the baselines";
    return;
  }
  c->change = (c->run_ns - c->baseline_ns) / c->baseline_ns;
  c->abs_change_ns = c->run_ns - c->baseline_ns;
  const MannWhitney t = MannWhitneyU(pooled, s.run);
  c->has_test = true;
  c->p = t.p;
  if (medians.size() >= 2) {
    double mean = 0;
    for (double m : medians) mean += m;
    mean /= static_cast<double>(medians.size());
    double var = 0;
    for (double m : medians) var += (m - mean) * (m - mean);
    var /= static_cast<double>(medians.size() - 1);
    c->between_cv = mean > 0 ? std::sqrt(var) / mean : 0;
    c->baseline_max_ns = *std::max_element(medians.begin(), medians.end());
    c->baseline_min_ns = *std::min_element(medians.begin(), medians.end());
  } else {
    c->baseline_max_ns = c->baseline_min_ns = c->baseline_ns;
  }
  c->threshold = std::max(o.min_change, o.between_factor * c->between_cv);
  const bool significant = c->p < o.alpha;
  const bool big = std::fabs(c->abs_change_ns) >= o.min_abs_ns;
  const bool several = medians.size() >= 2;
  if (significant && big && c->change > c->threshold &&
      (!several || c->run_ns > c->baseline_max_ns)) {
    c->verdict = Verdict::kSlower;
    c->failed = true;
    c->reason = "slower";
  } else if (significant && big && c->change < -c->threshold &&
             (!several || c->run_ns < c->baseline_min_ns)) {
    c->verdict = Verdict::kFaster;
    c->reason = "faster";
  } else {
    c->verdict = Verdict::kOk;
    if (!significant) {
      c->reason = "not significant";
    } else if (std::fabs(c->change) <= c->threshold) {
      c->reason = "within the relative threshold";
    } else if (!big) {
      c->reason = "below the absolute threshold";
    } else {
      c->reason = "within the baselines' run-to-run range";
    }
  }
}

}  // namespace

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kOk:
      return "ok";
    case Verdict::kSlower:
      return "slower";
    case Verdict::kFaster:
      return "faster";
    case Verdict::kNew:
      return "new";
    case Verdict::kVanished:
      return "vanished";
    case Verdict::kSkipped:
      return "skipped";
  }
  return "?";
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

CheckResult CheckRun(const std::vector<RunSummary>& baselines, const RunSummary& run,
                     const CheckOptions& o) {
  const size_t k = baselines.size();
  std::vector<std::set<int64_t>> warm(k);
  for (size_t i = 0; i < k; ++i) warm[i] = WarmupSteps(baselines[i], o.warmup_steps);
  const std::set<int64_t> run_warm = WarmupSteps(run, o.warmup_steps);

  // The step time, then every name of any run, matched by (name, cat) as tracedb diff does.
  std::vector<Series> series;
  Series step;
  step.name = "step";
  step.kind = "step";
  step.baselines.resize(k);
  for (size_t i = 0; i < k; ++i) {
    step.baselines[i] = AfterWarmup(baselines[i].step_ns, baselines[i].step_ids, warm[i]);
    if (!baselines[i].step_ns.empty()) ++step.in_baselines;
  }
  step.run = AfterWarmup(run.step_ns, run.step_ids, run_warm);
  step.in_run = !run.step_ns.empty();
  std::vector<double> base_steps;
  for (const auto& b : step.baselines) base_steps.insert(base_steps.end(), b.begin(), b.end());
  const double base_step_ns = Median(base_steps);
  if (step.in_run || step.in_baselines > 0) series.push_back(std::move(step));

  std::map<std::pair<std::string, std::string>, size_t> index;
  auto slot = [&](const NameStats& n) -> Series& {
    auto [it, fresh] = index.emplace(std::pair{n.name, n.cat}, series.size());
    if (fresh) {
      Series s;
      s.name = n.name;
      s.cat = n.cat;
      s.kind = n.routine ? "routine" : "phase";
      s.baselines.resize(k);
      series.push_back(std::move(s));
    }
    return series[it->second];
  };
  // A phase's value per step is its mean over ranks; a routine's the least over ranks, its own
  // cost without the wait for late ranks (report_data.h): that wait is imbalance, which the
  // phases and the step time show, and it swings with the machine's load (docs/check.md).
  auto per_step = [](const NameStats& n) -> const std::vector<double>& {
    return n.routine ? n.per_step_fastest : n.per_step;
  };
  for (const NameStats& n : run.names) {
    Series& s = slot(n);
    s.run = AfterWarmup(per_step(n), n.per_step_ids, run_warm);
    s.in_run = true;
  }
  for (size_t i = 0; i < k; ++i) {
    for (const NameStats& n : baselines[i].names) {
      Series& s = slot(n);
      s.baselines[i] = AfterWarmup(per_step(n), n.per_step_ids, warm[i]);
      ++s.in_baselines;
    }
  }

  CheckResult out;
  for (const Series& s : series) {
    CheckedName c;
    Decide(s, o, base_step_ns, &c);
    if (c.failed) ++out.regressions;
    if (c.verdict == Verdict::kFaster) ++out.improvements;
    out.names.push_back(std::move(c));
  }
  std::stable_sort(out.names.begin(), out.names.end(),
                   [](const CheckedName& a, const CheckedName& b) {
                     if ((a.kind == "step") != (b.kind == "step")) return a.kind == "step";
                     const double x = std::max(a.run_ns, a.baseline_ns);
                     const double y = std::max(b.run_ns, b.baseline_ns);
                     return x > y;
                   });
  return out;
}

}  // namespace tracedb::query::check
