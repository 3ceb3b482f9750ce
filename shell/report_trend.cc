// The "Trend across runs" data of `tracedb report html --baseline A.tdb B.tdb ...`: per run
// (baselines in the order given, this run last) the step time's median and 10th/90th percentile,
// and the median per-step time of the top names. Each run's first step is left out, as `tracedb
// check` does (start-up). docs/report.md "Trend across runs".
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/util/json_text.h"
#include "query/check/regression_check.h"
#include "shell/report_html.h"

namespace tracedb::shell {
namespace {

constexpr size_t kTrendNames = 8;
constexpr size_t kTrendMinSteps = 3;

// The values after each run's first step (the warm-up), by step id.
std::vector<double> AfterFirstStep(const std::vector<double>& v, const std::vector<int64_t>& ids,
                                   int64_t first) {
  if (ids.size() != v.size()) return v;
  std::vector<double> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (ids[i] != first) out.push_back(v[i]);
  }
  return out.empty() ? v : out;
}

int64_t FirstStep(const query::RunSummary& r) {
  return r.step_ids.empty() ? INT64_MIN : *std::min_element(r.step_ids.begin(), r.step_ids.end());
}

}  // namespace

std::string TrendJson(const std::vector<query::RunSummary>& runs) {
  std::string out = "{\"runs\":[";
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    std::vector<double> steps = AfterFirstStep(r.step_ns, r.step_ids, FirstStep(r));
    std::vector<double> p10 = steps, p90 = steps;
    out += (i ? "," : "");
    out += "{\"path\":" + engine::json::String(r.path) +
           ",\"steps\":" + std::to_string(r.step_ns.size()) +
           ",\"step_median_ns\":" + engine::json::Number(query::check::Median(steps)) +
           ",\"step_p10_ns\":" + engine::json::Number(query::Percentile(&p10, 10)) +
           ",\"step_p90_ns\":" + engine::json::Number(query::Percentile(&p90, 90)) + "}";
  }
  // The top names: the last run's largest by total time, then the baselines' (vanished names);
  // only names in at least 3 steps (not start-up or shutdown calls such as MPI_Init).
  std::vector<std::pair<std::string, std::string>> top;
  std::set<std::pair<std::string, std::string>> seen;
  for (size_t i = runs.size(); i-- > 0 && top.size() < kTrendNames;) {
    for (const auto& n : runs[i].names) {  // by total time, largest first
      if (top.size() >= kTrendNames) break;
      if (n.per_step.size() < kTrendMinSteps) continue;
      if (seen.insert({n.name, n.cat}).second) top.push_back({n.name, n.cat});
    }
  }
  out += "],\"names\":[";
  for (size_t k = 0; k < top.size(); ++k) {
    out += (k ? "," : "");
    bool routine = false;
    std::string medians = "[";
    for (size_t i = 0; i < runs.size(); ++i) {
      const query::NameStats* s = nullptr;
      for (const auto& n : runs[i].names) {
        if (n.name == top[k].first && n.cat == top[k].second) s = &n;
      }
      if (s != nullptr) routine = s->routine;
      medians += (i ? "," : "");
      medians += s == nullptr || s->per_step.empty()
                     ? std::string("null")
                     : engine::json::Number(query::check::Median(
                           AfterFirstStep(s->per_step, s->per_step_ids, FirstStep(runs[i]))));
    }
    out += "{\"name\":" + engine::json::String(top[k].first) +
           ",\"cat\":" + engine::json::String(top[k].second) +
           ",\"routine\":" + (routine ? "true" : "false") + ",\"median_ns\":" + medians + "]}";
  }
  return out + "]}";
}

}  // namespace tracedb::shell
