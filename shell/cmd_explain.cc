// `tracedb explain DB [--steps A:B] [-n N] [-f text|json]`: why the job waited, in words: the
// root causes that stand out from the noise, ranked by the wait they cost ("step 37: rank 2
// spent 116.00 ms more in backward than the median rank; ranks 0, 1, 3 waited 348.00 ms in
// MPI_Allreduce for it"), the wait-state totals per pattern, and the critical path's top names.
// The analyses are query/analysis/why.h; definitions and limits in docs/why.md.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/parse_number.h"
#include "query/analysis/why.h"
#include "query/export/json_text.h"
#include "query/query_db.h"
#include "shell/commands.h"
#include "shell/format.h"

namespace tracedb::shell {
namespace {

namespace wa = ::tracedb::query::analysis;

struct ExplainOptions {
  std::string db;
  std::string steps;  // "A:B", "A:", ":B" or "A"
  int n = 10;
  std::string format = "text";
};

struct ExplainSteps {
  bool any = true;  // no --steps
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  bool Has(bool has_step, int64_t step) const {
    if (any) return true;
    return has_step && step >= lo && step <= hi;
  }
};

bool ExplainParseInt(const std::string& s, int64_t* v) { return engine::ParseInt64(s, v); }

bool ParseSteps(const std::string& s, ExplainSteps* r) {
  if (s.empty()) return true;
  r->any = false;
  const size_t colon = s.find(':');
  if (colon == std::string::npos) {
    if (!ExplainParseInt(s, &r->lo)) return false;
    r->hi = r->lo;
    return true;
  }
  const std::string a = s.substr(0, colon), b = s.substr(colon + 1);
  if (!a.empty() && !ExplainParseInt(a, &r->lo)) return false;
  if (!b.empty() && !ExplainParseInt(b, &r->hi)) return false;
  return r->lo <= r->hi;
}

std::string WhyName(const wa::Analysis& a, int32_t n) {
  return n < 0 || static_cast<size_t>(n) >= a.names.size() ? "?" : a.names[static_cast<size_t>(n)];
}

// A cause in words.
std::string DescribeCause(const wa::Analysis& a, const wa::Cause& c) {
  std::string out = c.has_step ? "step " + std::to_string(c.step) + ": " : std::string();
  const std::string what = WhyName(a, c.name);
  out += "rank " + std::to_string(c.rank) + " spent " +
         HumanDuration(static_cast<double>(std::max<int64_t>(0, c.excess_ns))) + " more " +
         (what == wa::kNoSpan ? std::string("outside any span") : "in " + what) +
         " than the median rank";
  if (!c.waiting_ranks.empty()) {
    out += c.waiting_ranks.size() == 1 ? "; rank " : "; ranks ";
    for (size_t i = 0; i < c.waiting_ranks.size(); ++i)
      out += (i ? ", " : "") + std::to_string(c.waiting_ranks[i]);
    out += " waited " + HumanDuration(std::round(c.direct_ns));
    if (c.call >= 0) out += " in " + WhyName(a, c.call);
    out += " for it";
  }
  if (c.indirect_ns >= 1)
    out += ", and " + HumanDuration(std::round(c.indirect_ns)) + " more in waits it propagated";
  return out;
}

struct ExplainSummary {
  std::vector<const wa::Cause*> causes;  // reported, in range, by cost
  int64_t unreported = 0;
  double unreported_cost = 0;
  struct Pattern {
    int64_t waits = 0, wait_ns = 0;
  };
  std::map<std::string, Pattern> patterns;
  std::vector<std::pair<std::string, int64_t>> path;  // name -> ns, by ns
  int64_t path_ns = 0;
};

ExplainSummary Summarize(const wa::Analysis& a, const ExplainSteps& r, int n) {
  ExplainSummary s;
  for (const wa::Cause& c : a.causes) {
    if (!r.Has(c.has_step, c.step)) continue;
    if (c.reported) {
      if (static_cast<int>(s.causes.size()) < n) s.causes.push_back(&c);
    } else {
      s.unreported++;
      s.unreported_cost += c.cost_ns;
    }
  }
  for (const wa::WaitState& w : a.waits) {
    if (!r.Has(w.has_step, w.step)) continue;
    auto& p = s.patterns[wa::PatternName(w.pattern)];
    p.waits++;
    p.wait_ns += w.wait_ns;
  }
  std::map<std::string, int64_t> by_name;
  for (const wa::PathPiece& p : a.path) {
    if (!r.Has(p.has_step, p.step)) continue;
    by_name[WhyName(a, p.name)] += p.dur;
    s.path_ns += p.dur;
  }
  s.path.assign(by_name.begin(), by_name.end());
  std::sort(s.path.begin(), s.path.end(),
            [](const auto& x, const auto& y) { return x.second > y.second; });
  if (static_cast<int>(s.path.size()) > n) s.path.resize(static_cast<size_t>(n));
  return s;
}

void PrintText(const wa::Analysis& a, const ExplainSummary& s, const ExplainOptions& o) {
  std::string out;
  out += "Root causes";
  if (!o.steps.empty()) out += " (steps " + o.steps + ")";
  out += ":\n";
  if (s.causes.empty()) out += "  none stands out from the noise\n";
  int i = 0;
  for (const wa::Cause* c : s.causes)
    out += Fmt("  %d. %s  [cost %s, noise z %.1f]\n", ++i, DescribeCause(a, *c).c_str(),
               HumanDuration(std::round(c->cost_ns)).c_str(),
               std::isfinite(c->noise_z) ? c->noise_z : 999.0);
  if (s.unreported > 0)
    out += Fmt("  (%lld smaller delays within the noise, %s of wait in all, not listed)\n",
               static_cast<long long>(s.unreported), HumanDuration(s.unreported_cost).c_str());
  out += "\nWait states:\n";
  if (s.patterns.empty()) out += "  no waits\n";
  for (const auto& [p, t] : s.patterns)
    out += Fmt("  %-15s %8lld waits  %12s\n", p.c_str(), static_cast<long long>(t.waits),
               HumanDuration(static_cast<double>(t.wait_ns)).c_str());
  out += "\nCritical path:\n";
  if (s.path.empty()) out += "  no steps or events\n";
  for (const auto& [name, ns] : s.path)
    out +=
        Fmt("  %-30s %6.1f%%  %12s\n", name.c_str(),
            s.path_ns > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(s.path_ns) : 0.0,
            HumanDuration(static_cast<double>(ns)).c_str());
  std::fputs(out.c_str(), stdout);
}

void PrintJson(const wa::Analysis& a, const ExplainSummary& s) {
  namespace json = query::json;
  std::string out = "{\"causes\":[";
  bool first = true;
  for (const wa::Cause* c : s.causes) {
    out += first ? "" : ",";
    first = false;
    out += "{\"step\":" + (c->has_step ? std::to_string(c->step) : std::string("null"));
    out += ",\"rank\":" + std::to_string(c->rank);
    out += ",\"name\":" + json::String(WhyName(a, c->name));
    out += Fmt(",\"cost_ns\":%lld,\"direct_ns\":%lld,\"indirect_ns\":%lld,\"excess_ns\":%lld",
               static_cast<long long>(std::llround(c->cost_ns)),
               static_cast<long long>(std::llround(c->direct_ns)),
               static_cast<long long>(std::llround(c->indirect_ns)),
               static_cast<long long>(c->excess_ns));
    out += Fmt(",\"noise_z\":%.3f", std::isfinite(c->noise_z) ? c->noise_z : 1e300);
    out += ",\"waiting_ranks\":[";
    for (size_t i = 0; i < c->waiting_ranks.size(); ++i)
      out += (i ? "," : "") + std::to_string(c->waiting_ranks[i]);
    out += "],\"call\":" + (c->call >= 0 ? json::String(WhyName(a, c->call)) : std::string("null"));
    out += ",\"text\":" + json::String(DescribeCause(a, *c)) + "}";
  }
  out += Fmt("],\"unreported\":%lld,\"wait_states\":[", static_cast<long long>(s.unreported));
  first = true;
  for (const auto& [p, t] : s.patterns) {
    out += first ? "" : ",";
    first = false;
    out += Fmt("{\"pattern\":\"%s\",\"waits\":%lld,\"wait_ns\":%lld}", p.c_str(),
               static_cast<long long>(t.waits), static_cast<long long>(t.wait_ns));
  }
  out += Fmt("],\"critical_path_ns\":%lld,\"critical_path\":[", static_cast<long long>(s.path_ns));
  first = true;
  for (const auto& [name, ns] : s.path) {
    out += first ? "" : ",";
    first = false;
    out += "{\"name\":" + json::String(name) + Fmt(",\"ns\":%lld}", static_cast<long long>(ns));
  }
  out += "]}\n";
  std::fputs(out.c_str(), stdout);
}

int RunExplain(const ExplainOptions& o) {
  ExplainSteps range;
  if (!ParseSteps(o.steps, &range)) {
    std::fprintf(stderr, "tracedb explain: --steps '%s': expected A:B, A:, :B or A (integers)\n",
                 o.steps.c_str());
    return kExitUsage;
  }
  if (o.n < 1) {
    std::fprintf(stderr, "tracedb explain: -n %d: must be at least 1\n", o.n);
    return kExitUsage;
  }
  if (o.format != "text" && o.format != "json") {
    std::fprintf(stderr, "tracedb explain: unknown format '%s' (text, json)\n", o.format.c_str());
    return kExitUsage;
  }
  auto db = query::OpenQueryDb(o.db);
  if (!db.ok()) {
    std::fprintf(stderr, "tracedb explain: %s\n", db.status().message().c_str());
    return kExitError;
  }
  auto a = wa::Analyze(db->get());
  if (!a.ok()) {
    std::fprintf(stderr, "tracedb explain: %s: %s\n", o.db.c_str(), a.status().message().c_str());
    return kExitError;
  }
  const ExplainSummary s = Summarize(*a, range, o.n);
  if (o.format == "json")
    PrintJson(*a, s);
  else
    PrintText(*a, s, o);
  return kExitOk;
}

}  // namespace

void SetupExplain(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ExplainOptions>();
  CLI::App* sub = app.add_subcommand(
      "explain", "Why ranks waited: root causes ranked by cost, wait states, critical path");
  sub->add_option("db", o->db, "Trace database")->required();
  sub->add_option("--steps", o->steps, "Only steps A to B (A:B, A:, :B or one step A)");
  sub->add_option("-n", o->n, "How many causes and critical-path names to list (default 10)");
  sub->add_option("-f,--format", o->format, "Output format: text (default) or json");
  sub->callback([o, exit_code] { *exit_code = RunExplain(*o); });
}

}  // namespace tracedb::shell
