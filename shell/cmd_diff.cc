// `tracedb diff A.tdb B.tdb [--format text|csv|json] [--alpha 0.01] [-n N]`: two runs side by
// side: per phase and per routine count, mean, p50, p99 and total with the change from A to B
// and its significance (two-sided Mann-Whitney U over the per-step values), the step time, the
// communication share and the straggler ranks of each. docs/diff.md.
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <string>

#include "query/export/csv_text.h"
#include "query/report/report_data.h"
#include "shell/commands.h"
#include "shell/format.h"
#include "shell/report_html.h"
#include "shell/verbosity.h"

namespace tracedb::shell {
namespace {

struct DiffOptions {
  std::string a, b;
  std::string format = "text";
  double alpha = 0.01;
  int limit = 40;
};

std::string Change(double c) { return Fmt("%+.1f%%", 100 * c); }

std::string Ranks(const std::vector<int32_t>& v) {
  if (v.empty()) return "-";
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

std::string RenderText(const query::RunDiff& d, const DiffOptions& o) {
  std::string out;
  out += Fmt("A: %s (%d ranks, %s events, %zu steps)\n", d.a.path.c_str(), d.a.ranks,
             WithCommas(d.a.events).c_str(), d.a.step_ns.size());
  out += Fmt("B: %s (%d ranks, %s events, %zu steps)\n\n", d.b.path.c_str(), d.b.ranks,
             WithCommas(d.b.events).c_str(), d.b.step_ns.size());
  out += Fmt("%-22s %14s %14s %10s %10s\n", "", "A", "B", "change", "p");
  out += Fmt("%-22s %14s %14s %10s %10s\n", "step time (mean)",
             HumanDuration(d.step_mean_a).c_str(), HumanDuration(d.step_mean_b).c_str(),
             d.step_mean_a > 0 ? Change(d.step_change).c_str() : "-",
             d.has_step_test ? Fmt("%.3g", d.step_test.p).c_str() : "-");
  out += Fmt("%-22s %13.1f%% %13.1f%% %+9.1fpt\n", "communication share", 100 * d.a.comm_share,
             100 * d.b.comm_share, 100 * (d.b.comm_share - d.a.comm_share));
  out += Fmt("%-22s %14s %14s   (%s / %s)\n", "straggler ranks", Ranks(d.a.stragglers).c_str(),
             Ranks(d.b.stragglers).c_str(),
             d.a.straggler_basis.empty() ? "-" : d.a.straggler_basis.c_str(),
             d.b.straggler_basis.empty() ? "-" : d.b.straggler_basis.c_str());
  // The wait each straggler caused in A and in B (stragglers.caused_wait_ns).
  for (const auto& w : query::CompareStragglerWait(d.a, d.b)) {
    out +=
        Fmt("%-22s rank %d caused %s -> %s of waiting (%s)\n", "", w.rank,
            HumanDuration(static_cast<double>(w.a_ns)).c_str(),
            HumanDuration(static_cast<double>(w.b_ns)).c_str(),
            w.a_ns > 0
                ? Change(static_cast<double>(w.b_ns - w.a_ns) / static_cast<double>(w.a_ns)).c_str()
                : (w.b_ns > 0 ? "new" : "-"));
  }
  out += "\n";
  out += Fmt("%-28s %-7s %9s %9s %11s %11s %8s %11s %11s %11s %9s %s\n", "name", "kind", "count A",
             "count B", "mean A", "mean B", "change", "p50 B", "p99 B", "total B", "p", "");
  int shown = 0;
  for (const auto& n : d.names) {
    if (shown++ >= o.limit) break;
    const bool sig = n.has_test && n.test.p < o.alpha;
    out +=
        Fmt("%-28.28s %-7s %9llu %9llu %11s %11s %8s %11s %11s %11s %9s %s\n", n.name.c_str(),
            n.routine ? "routine" : "phase", static_cast<unsigned long long>(n.a ? n.a->count : 0),
            static_cast<unsigned long long>(n.b ? n.b->count : 0),
            n.a ? HumanDuration(n.a->mean_ns).c_str() : "-",
            n.b ? HumanDuration(n.b->mean_ns).c_str() : "-",
            n.has_change ? Change(n.mean_change).c_str() : (n.a ? "vanished" : "new"),
            n.b ? HumanDuration(static_cast<double>(n.b->p50_ns)).c_str() : "-",
            n.b ? HumanDuration(static_cast<double>(n.b->p99_ns)).c_str() : "-",
            n.b ? HumanDuration(static_cast<double>(n.b->total_ns)).c_str() : "-",
            n.has_test ? Fmt("%.3g", n.test.p).c_str() : "-",
            sig ? (n.mean_change > 0 ? "slower" : "faster") : "");
  }
  if (static_cast<int>(d.names.size()) > o.limit) {
    out += Fmt("(%zu more names; -n to show them)\n", d.names.size() - o.limit);
  }
  out += Fmt("\np: two-sided Mann-Whitney U over the per-step values; slower/faster when p < %g.\n",
             o.alpha);
  return out;
}

std::string Opt(bool has, double v, const char* fmt = "%.6g") { return has ? Fmt(fmt, v) : ""; }

// One row per name, then rows for the step time and the communication share (name empty, kind
// "step" / "comm_share").
std::string RenderCsv(const query::RunDiff& d, double alpha) {
  std::string out =
      "name,kind,cat,count_a,count_b,mean_a_ns,mean_b_ns,p50_a_ns,p50_b_ns,p99_a_ns,p99_b_ns,"
      "total_a_ns,total_b_ns,mean_change,total_change,u,p,significant,status\n";
  for (const auto& n : d.names) {
    const auto* a = n.a;
    const auto* b = n.b;
    out += query::csv::Field(n.name) + "," + (n.routine ? "routine" : "phase") + "," +
           query::csv::Field(n.cat) + ",";
    out += Opt(a, a ? a->count : 0, "%.0f") + "," + Opt(b, b ? b->count : 0, "%.0f") + ",";
    out += Opt(a, a ? a->mean_ns : 0, "%.1f") + "," + Opt(b, b ? b->mean_ns : 0, "%.1f") + ",";
    out += Opt(a, a ? a->p50_ns : 0, "%.0f") + "," + Opt(b, b ? b->p50_ns : 0, "%.0f") + ",";
    out += Opt(a, a ? a->p99_ns : 0, "%.0f") + "," + Opt(b, b ? b->p99_ns : 0, "%.0f") + ",";
    out += Opt(a, a ? a->total_ns : 0, "%.0f") + "," + Opt(b, b ? b->total_ns : 0, "%.0f") + ",";
    out += Opt(n.has_change, n.mean_change) + "," + Opt(a && b && a->total_ns > 0, n.total_change) +
           ",";
    out += Opt(n.has_test, n.test.u_b, "%.1f") + "," + Opt(n.has_test, n.test.p) + ",";
    out += (n.has_test && n.test.p < alpha) ? "1," : "0,";
    out += a == nullptr ? "new\n" : b == nullptr ? "vanished\n" : "both\n";
  }
  out +=
      Fmt(",step,,%zu,%zu,%.1f,%.1f,,,,,,,%s,,%s,%s,%d,\n", d.a.step_ns.size(), d.b.step_ns.size(),
          d.step_mean_a, d.step_mean_b, Opt(d.step_mean_a > 0, d.step_change).c_str(),
          Opt(d.has_step_test, d.step_test.u_b, "%.1f").c_str(),
          Opt(d.has_step_test, d.step_test.p).c_str(),
          d.has_step_test && d.step_test.p < alpha ? 1 : 0);
  out += Fmt(",comm_share,,,,%.6f,%.6f,,,,,,,,,,,,\n", d.a.comm_share, d.b.comm_share);
  return out;
}

int RunDiffCmd(const DiffOptions& o) {
  if (o.format != "text" && o.format != "csv" && o.format != "json") {
    std::fprintf(stderr, "tracedb diff: unknown format '%s' (text, csv, json)\n", o.format.c_str());
    return kExitUsage;
  }
  query::RunSummary a, b;
  if (!LoadRunSummary("diff", o.a, &a) || !LoadRunSummary("diff", o.b, &b)) return kExitError;
  query::RunDiff d;
  query::CompareRuns(std::move(a), std::move(b), &d);
  std::string out;
  if (o.format == "text") {
    out = RenderText(d, o);
  } else if (o.format == "csv") {
    out = RenderCsv(d, o.alpha);
  } else {
    out = DiffJson(d, o.alpha) + "\n";
  }
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

}  // namespace

void SetupDiff(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<DiffOptions>();
  CLI::App* sub = app.add_subcommand(
      "diff", "Compare two runs: per phase and routine, step time, communication, stragglers");
  sub->add_option("a", o->a, "The baseline run's database (A)")->required();
  sub->add_option("b", o->b, "The run compared with it (B)")->required();
  sub->add_option("-f,--format", o->format, "text, csv or json");
  sub->add_option("--alpha", o->alpha, "Significance level (default 0.01)")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("-n,--limit", o->limit, "Names to list in text output (default 40)");
  AddVerbosityFlags(sub);
  sub->callback([o, exit_code] { *exit_code = RunDiffCmd(*o); });
}

}  // namespace tracedb::shell
