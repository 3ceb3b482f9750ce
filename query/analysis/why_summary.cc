// The why analyses summarised for people (why_summary.h): the sentences, the per-pattern totals
// and the critical path's top names, as text and JSON, for explain, the HTML report and view.
#include "query/analysis/why_summary.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "engine/util/human_units.h"
#include "engine/util/json_text.h"
#include "engine/util/parse_number.h"
#include "engine/util/saturating.h"
#include "engine/util/str_format.h"

namespace tracedb::query::analysis {
namespace {

using engine::Fmt;

bool ParseInt(const std::string& s, int64_t* v) { return engine::ParseInt64(s, v); }

}  // namespace

bool ParseStepRange(const std::string& s, StepRange* r) {
  if (s.empty()) return true;
  r->any = false;
  const size_t colon = s.find(':');
  if (colon == std::string::npos) {
    if (!ParseInt(s, &r->lo)) return false;
    r->hi = r->lo;
    return true;
  }
  const std::string a = s.substr(0, colon), b = s.substr(colon + 1);
  if (!a.empty() && !ParseInt(a, &r->lo)) return false;
  if (!b.empty() && !ParseInt(b, &r->hi)) return false;
  return r->lo <= r->hi;
}

std::string WhyName(const Analysis& a, int32_t n) {
  return n < 0 || static_cast<size_t>(n) >= a.names.size() ? "?" : a.names[static_cast<size_t>(n)];
}

std::string DescribeCause(const Analysis& a, const Cause& c) {
  std::string out = c.has_step ? "step " + std::to_string(c.step) + ": " : std::string();
  const std::string what = WhyName(a, c.name);
  out += "rank " + std::to_string(c.rank) + " spent " +
         engine::HumanDuration(static_cast<double>(std::max<int64_t>(0, c.excess_ns))) + " more " +
         (what == kNoSpan ? std::string("outside any span") : "in " + what) +
         " than the median rank";
  if (!c.waiting_ranks.empty()) {
    out += c.waiting_ranks.size() == 1 ? "; rank " : "; ranks ";
    for (size_t i = 0; i < c.waiting_ranks.size(); ++i)
      out += (i ? ", " : "") + std::to_string(c.waiting_ranks[i]);
    out += " waited " + engine::HumanDuration(std::round(c.direct_ns));
    if (c.call >= 0) out += " in " + WhyName(a, c.call);
    out += " for it";
  }
  if (c.indirect_ns >= 1)
    out += ", and " + engine::HumanDuration(std::round(c.indirect_ns)) +
           " more in waits it propagated";
  return out;
}

WhySummary Summarize(const Analysis& a, const StepRange& r, int n) {
  WhySummary s;
  for (const Cause& c : a.causes) {
    if (!r.Has(c.has_step, c.step)) continue;
    if (c.reported) {
      if (static_cast<int>(s.causes.size()) < n) s.causes.push_back(&c);
    } else {
      s.unreported++;
      s.unreported_cost += c.cost_ns;
    }
  }
  std::map<std::string, WhySummary::Pattern> patterns;
  for (const WaitState& w : a.waits) {
    if (!r.Has(w.has_step, w.step)) continue;
    WhySummary::Pattern& p = patterns[PatternName(w.pattern)];
    p.waits++;
    p.wait_ns = engine::SaturatingAdd(p.wait_ns, w.wait_ns);  // (a DB made elsewhere)
  }
  for (auto& [name, p] : patterns) {
    p.pattern = name;
    s.patterns.push_back(p);
  }
  std::map<std::string, int64_t> by_name;
  for (const PathPiece& p : a.path) {
    if (!r.Has(p.has_step, p.step)) continue;
    int64_t& named = by_name[WhyName(a, p.name)];
    named = engine::SaturatingAdd(named, p.dur);
    s.path_ns = engine::SaturatingAdd(s.path_ns, p.dur);
  }
  s.path.assign(by_name.begin(), by_name.end());
  std::stable_sort(s.path.begin(), s.path.end(),
                   [](const auto& x, const auto& y) { return x.second > y.second; });
  if (static_cast<int>(s.path.size()) > n) s.path.resize(static_cast<size_t>(std::max(0, n)));
  return s;
}

std::string WhySummaryText(const Analysis& a, const WhySummary& s, const std::string& steps) {
  std::string out;
  out += "Root causes";
  if (!steps.empty()) out += " (steps " + steps + ")";
  out += ":\n";
  if (s.causes.empty()) out += "  none stands out from the noise\n";
  int i = 0;
  for (const Cause* c : s.causes)
    out += Fmt("  %d. %s  [cost %s, noise z %.1f]\n", ++i, DescribeCause(a, *c).c_str(),
               engine::HumanDuration(std::round(c->cost_ns)).c_str(),
               std::isfinite(c->noise_z) ? c->noise_z : 999.0);
  if (s.unreported > 0)
    out +=
        Fmt("  (%lld smaller delays within the noise, %s of wait in all, not listed)\n",
            static_cast<long long>(s.unreported), engine::HumanDuration(s.unreported_cost).c_str());
  out += "\nWait states:\n";
  if (s.patterns.empty()) out += "  no waits\n";
  for (const WhySummary::Pattern& p : s.patterns)
    out += Fmt("  %-15s %8lld waits  %12s\n", p.pattern.c_str(), static_cast<long long>(p.waits),
               engine::HumanDuration(static_cast<double>(p.wait_ns)).c_str());
  out += "\nCritical path:\n";
  if (s.path.empty()) out += "  no steps or events\n";
  for (const auto& [name, ns] : s.path)
    out +=
        Fmt("  %-30s %6.1f%%  %12s\n", name.c_str(),
            s.path_ns > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(s.path_ns) : 0.0,
            engine::HumanDuration(static_cast<double>(ns)).c_str());
  return out;
}

std::string WhySummaryJson(const Analysis& a, const WhySummary& s) {
  std::string out = "{\"causes\":[";
  bool first = true;
  for (const Cause* c : s.causes) {
    out += first ? "" : ",";
    first = false;
    out += "{\"step\":" + (c->has_step ? std::to_string(c->step) : std::string("null"));
    out += ",\"rank\":" + std::to_string(c->rank);
    out += ",\"name\":" + engine::json::String(WhyName(a, c->name));
    out += Fmt(",\"cost_ns\":%lld,\"direct_ns\":%lld,\"indirect_ns\":%lld,\"excess_ns\":%lld",
               // (clamped: costs summed in doubles can pass int64)
               static_cast<long long>(engine::SaturateInt64(std::round(c->cost_ns))),
               static_cast<long long>(engine::SaturateInt64(std::round(c->direct_ns))),
               static_cast<long long>(engine::SaturateInt64(std::round(c->indirect_ns))),
               static_cast<long long>(c->excess_ns));
    out += Fmt(",\"noise_z\":%.3f", std::isfinite(c->noise_z) ? c->noise_z : 1e300);
    out += ",\"waiting_ranks\":[";
    for (size_t i = 0; i < c->waiting_ranks.size(); ++i)
      out += (i ? "," : "") + std::to_string(c->waiting_ranks[i]);
    out += "],\"call\":" +
           (c->call >= 0 ? engine::json::String(WhyName(a, c->call)) : std::string("null"));
    out += ",\"text\":" + engine::json::String(DescribeCause(a, *c)) + "}";
  }
  out += Fmt("],\"unreported\":%lld,\"wait_states\":[", static_cast<long long>(s.unreported));
  first = true;
  for (const WhySummary::Pattern& p : s.patterns) {
    out += first ? "" : ",";
    first = false;
    out += Fmt("{\"pattern\":\"%s\",\"waits\":%lld,\"wait_ns\":%lld}", p.pattern.c_str(),
               static_cast<long long>(p.waits), static_cast<long long>(p.wait_ns));
  }
  out += Fmt("],\"critical_path_ns\":%lld,\"critical_path\":[", static_cast<long long>(s.path_ns));
  first = true;
  for (const auto& [name, ns] : s.path) {
    out += first ? "" : ",";
    first = false;
    out += "{\"name\":" + engine::json::String(name) +
           Fmt(",\"ns\":%lld}", static_cast<long long>(ns));
  }
  out += "]}";
  return out;
}

}  // namespace tracedb::query::analysis
