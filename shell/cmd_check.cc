// `tracedb check RUN.tdb --baseline A.tdb [B.tdb ...] [-f text|json|junit] [-o FILE]`: the CI
// gate. Compares a run with one or more baseline runs (or the last N runs of a label in the run
// history: --baseline runs:LABEL[:N]) name by name and for the step time
// (query/check/regression_check.h) and exits 1 when something got significantly slower beyond
// the thresholds, 0 when not, 2 on bad arguments or unreadable inputs. docs/check.md.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/util/json_text.h"
#include "query/check/regression_check.h"
#include "query/check/run_catalog.h"
#include "query/export/output_file.h"
#include "shell/commands.h"
#include "shell/format.h"
#include "shell/report_html.h"
#include "shell/run_history.h"
#include "shell/verbosity.h"

namespace tracedb::shell {
namespace {

namespace chk = query::check;

struct CheckCmdOptions {
  std::string run;
  std::vector<std::string> baselines;
  std::string format = "text";
  std::string output;
  std::string catalog;  // empty: chk::CatalogPath()
  chk::CheckOptions check;
  double min_abs_ms = -1;  // the CLI's unit; < 0: the default of CheckOptions
};

std::string Pct(double x) { return Fmt("%+.1f%%", 100 * x); }

std::string NameJson(const chk::CheckedName& c) {
  const bool tested = c.verdict == chk::Verdict::kOk || c.verdict == chk::Verdict::kSlower ||
                      c.verdict == chk::Verdict::kFaster;
  return "{\"name\":" + engine::json::String(c.name) + ",\"cat\":" + engine::json::String(c.cat) +
         ",\"kind\":" + engine::json::String(c.kind) +
         ",\"verdict\":" + engine::json::String(chk::VerdictName(c.verdict)) +
         ",\"failed\":" + (c.failed ? "true" : "false") + ",\"baseline_ns\":" +
         (c.verdict == chk::Verdict::kNew ? "null" : engine::json::Number(c.baseline_ns)) +
         ",\"run_ns\":" +
         (c.verdict == chk::Verdict::kVanished ? "null" : engine::json::Number(c.run_ns)) +
         ",\"change\":" + (tested ? engine::json::Number(c.change) : "null") +
         ",\"abs_change_ns\":" +
         (tested || c.verdict == chk::Verdict::kNew ? engine::json::Number(c.abs_change_ns)
                                                    : "null") +
         ",\"p\":" + (c.has_test ? engine::json::Number(c.p) : "null") +
         ",\"threshold\":" + engine::json::Number(c.threshold) +
         ",\"between_cv\":" + engine::json::Number(c.between_cv) +
         ",\"baseline_runs\":" + std::to_string(c.baseline_runs) +
         ",\"baseline_values\":" + std::to_string(c.baseline_values) +
         ",\"run_values\":" + std::to_string(c.run_values) +
         ",\"reason\":" + engine::json::String(c.reason) + "}";
}

std::string RenderJson(const chk::CheckResult& r, const CheckCmdOptions& o,
                       const std::vector<std::string>& baselines) {
  std::string out = "{\"run\":" + engine::json::String(o.run) + ",\"baselines\":[";
  for (size_t i = 0; i < baselines.size(); ++i) {
    out += (i ? "," : "") + engine::json::String(baselines[i]);
  }
  const auto& t = o.check;
  out += "],\"thresholds\":{\"alpha\":" + engine::json::Number(t.alpha) +
         ",\"min_change\":" + engine::json::Number(t.min_change) +
         ",\"min_abs_ns\":" + engine::json::Number(t.min_abs_ns) +
         ",\"between_factor\":" + engine::json::Number(t.between_factor) +
         ",\"warmup_steps\":" + std::to_string(t.warmup_steps) +
         ",\"min_steps\":" + std::to_string(t.min_steps) + "}";
  out += std::string(",\"passed\":") + (r.passed() ? "true" : "false");
  auto list = [&](const char* key, auto pred) {
    out += ",\"" + std::string(key) + "\":[";
    bool first = true;
    for (const auto& c : r.names) {
      if (!pred(c)) continue;
      out += (first ? "" : ",") + NameJson(c);
      first = false;
    }
    out += "]";
  };
  list("regressions", [](const chk::CheckedName& c) { return c.failed; });
  list("improvements",
       [](const chk::CheckedName& c) { return c.verdict == chk::Verdict::kFaster; });
  list("new", [](const chk::CheckedName& c) { return c.verdict == chk::Verdict::kNew; });
  list("vanished", [](const chk::CheckedName& c) { return c.verdict == chk::Verdict::kVanished; });
  list("skipped", [](const chk::CheckedName& c) { return c.verdict == chk::Verdict::kSkipped; });
  list("checked", [](const chk::CheckedName& c) {
    return c.verdict != chk::Verdict::kSkipped && c.verdict != chk::Verdict::kVanished;
  });
  return out + "}\n";
}

std::string Xml(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // XML 1.0 allows no control characters but tab, newline and carriage return.
        if (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') {
          out += '?';
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  return out;
}

std::string Line(const chk::CheckedName& c) {
  if (c.verdict == chk::Verdict::kSkipped) {
    return Fmt("%s (%s): not tested, %s", c.name.c_str(), c.kind.c_str(), c.reason.c_str());
  }
  if (c.verdict == chk::Verdict::kVanished) {
    return Fmt("%s (%s): %s per step in the baselines, not in this run", c.name.c_str(),
               c.kind.c_str(), HumanDuration(c.baseline_ns).c_str());
  }
  if (c.verdict == chk::Verdict::kNew) {
    return Fmt("%s (%s) is new: %s per step", c.name.c_str(), c.kind.c_str(),
               HumanDuration(c.run_ns).c_str());
  }
  return Fmt("%s (%s): %s -> %s per step (%s, p = %.3g; threshold %.1f%%, %s)", c.name.c_str(),
             c.kind.c_str(), HumanDuration(c.baseline_ns).c_str(), HumanDuration(c.run_ns).c_str(),
             Pct(c.change).c_str(), c.p, 100 * c.threshold, c.reason.c_str());
}

std::string RenderJunit(const chk::CheckResult& r, const CheckCmdOptions& o) {
  int tests = 0, skipped = 0;
  std::string cases;
  for (const auto& c : r.names) {
    if (c.verdict == chk::Verdict::kVanished) continue;
    ++tests;
    cases += "    <testcase classname=\"tracedb.check." + Xml(c.kind) + "\" name=\"" + Xml(c.name) +
             "\">\n";
    if (c.failed) {
      cases += "      <failure type=\"regression\" message=\"" + Xml(Line(c)) + "\">" +
               Xml(Fmt("baseline %s (median of %zu per-step values in %d runs), run %s (%zu "
                       "values), change %s, p %.3g, threshold %.1f%%, run-to-run variation %.1f%%",
                       HumanDuration(c.baseline_ns).c_str(), c.baseline_values, c.baseline_runs,
                       HumanDuration(c.run_ns).c_str(), c.run_values, Pct(c.change).c_str(), c.p,
                       100 * c.threshold, 100 * c.between_cv)) +
               "</failure>\n";
    } else if (c.verdict == chk::Verdict::kSkipped) {
      ++skipped;
      cases += "      <skipped message=\"" + Xml(c.reason) + "\"/>\n";
    } else {
      cases += "      <system-out>" + Xml(Line(c)) + "</system-out>\n";
    }
    cases += "    </testcase>\n";
  }
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"tracedb check\" tests=\"" +
         std::to_string(tests) + "\" failures=\"" + std::to_string(r.regressions) +
         "\">\n  <testsuite name=\"" + Xml(o.run) + "\" tests=\"" + std::to_string(tests) +
         "\" failures=\"" + std::to_string(r.regressions) + "\" skipped=\"" +
         std::to_string(skipped) + "\" errors=\"0\">\n" + cases + "  </testsuite>\n</testsuites>\n";
}

std::string RenderText(const chk::CheckResult& r, const CheckCmdOptions& o,
                       const std::vector<std::string>& baselines) {
  std::string out = Fmt("tracedb check %s against %zu baseline run%s\n", o.run.c_str(),
                        baselines.size(), baselines.size() == 1 ? "" : "s");
  int checked = 0, skipped = 0;
  std::string fails, better, fresh, gone;
  for (const auto& c : r.names) {
    if (c.failed) fails += "  " + Line(c) + "\n";
    switch (c.verdict) {
      case chk::Verdict::kFaster:
        better += "  " + Line(c) + "\n";
        break;
      case chk::Verdict::kNew:
        if (!c.failed) fresh += "  " + Line(c) + "\n";
        break;
      case chk::Verdict::kVanished:
        gone += "  " + Line(c) + "\n";
        break;
      case chk::Verdict::kSkipped:
        ++skipped;
        break;
      default:
        break;
    }
    if (c.verdict != chk::Verdict::kSkipped && c.verdict != chk::Verdict::kVanished) ++checked;
  }
  out += r.passed() ? "PASS: nothing significantly slower\n"
                    : Fmt("FAIL: %d regression%s\n", r.regressions, r.regressions == 1 ? "" : "s");
  if (!fails.empty()) out += "regressions:\n" + fails;
  if (!better.empty()) out += "improvements:\n" + better;
  if (!fresh.empty()) out += "new (below the thresholds):\n" + fresh;
  if (!gone.empty()) out += "vanished:\n" + gone;
  if (GetVerbosity() == Verbosity::kVerbose) {
    out += "every name:\n";
    for (const auto& c : r.names) {
      out += Fmt("  %-8s ", chk::VerdictName(c.verdict)) + Line(c) + "\n";
    }
  }
  const auto& t = o.check;
  out +=
      Fmt("checked %d names (step time included), %d skipped (too few steps); slower when p < "
          "%g, the median per-step value %.0f%% (or %g x the baselines' run-to-run "
          "variation) and %s over the baselines'\n",
          checked, skipped, t.alpha, 100 * t.min_change, t.between_factor,
          HumanDuration(t.min_abs_ns).c_str());
  return out;
}

int RunCheckCmd(CheckCmdOptions o) {
  if (o.format != "text" && o.format != "json" && o.format != "junit") {
    std::fprintf(stderr, "tracedb check: unknown format '%s' (text, json, junit)\n",
                 o.format.c_str());
    return kExitUsage;
  }
  if (o.min_abs_ms >= 0) o.check.min_abs_ns = o.min_abs_ms * 1e6;
  std::vector<std::string> paths;
  if (!ResolveRunPaths("check", o.baselines, o.catalog, o.run, &paths)) return kExitUsage;
  query::RunSummary run;
  if (!LoadRunSummary("check", o.run, &run)) return kExitUsage;
  std::vector<query::RunSummary> base(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    if (!LoadRunSummary("check", paths[i], &base[i])) return kExitUsage;
  }
  const chk::CheckResult r = chk::CheckRun(base, run, o.check);
  // A gate that could compare nothing must not pass: that is "could not check".
  int tested = 0;
  for (const auto& c : r.names) {
    tested += c.has_test || c.failed ? 1 : 0;
  }
  if (tested == 0) {
    std::fprintf(stderr,
                 "tracedb check: %s: nothing to compare: no name (nor the step time) has %d steps "
                 "after the warm-up in both the run and the baselines (a trace without step "
                 "markers cannot be checked)\n",
                 o.run.c_str(), o.check.min_steps);
    return kExitUsage;
  }
  std::string out;
  if (o.format == "json") {
    out = RenderJson(r, o, paths);
  } else if (o.format == "junit") {
    out = RenderJunit(r, o);
  } else {
    out = RenderText(r, o, paths);
  }
  if (o.output.empty() || o.output == "-") {
    std::fputs(out.c_str(), stdout);
  } else {
    auto f = query::OutputFile::Create(o.output, 0);
    Status s = f.ok() ? Status::Ok() : f.status();
    if (s.ok()) {
      (*f)->Append(out);
      s = (*f)->Close();
    }
    if (!s.ok()) {
      std::fprintf(stderr, "tracedb check: cannot write %s: %s\n", o.output.c_str(),
                   s.message().c_str());
      return kExitUsage;
    }
    if (o.format != "text") {
      std::fputs(r.passed() ? "tracedb check: PASS\n" : "tracedb check: FAIL\n", stderr);
    }
  }
  return r.passed() ? kExitOk : kExitError;
}

}  // namespace

void SetupCheck(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<CheckCmdOptions>();
  CLI::App* sub = app.add_subcommand(
      "check", "CI gate: exit 1 when a run is significantly slower than its baseline runs");
  sub->add_option("run", o->run, "The run to check (a trace database)")->required();
  sub->add_option("-b,--baseline", o->baselines,
                  "Baseline runs: trace databases, or runs:LABEL[:N] (the last N runs of LABEL "
                  "in the run history, default 5)")
      ->required()
      ->expected(1, -1);
  sub->add_option("-f,--format", o->format, "text, json or junit (JUnit XML)");
  sub->add_option("-o,--output", o->output, "Write the result to FILE (default: standard output)");
  sub->add_option("--alpha", o->check.alpha, "Significance level (default 0.001)")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--min-change", o->check.min_change,
                  "Relative change of the median per-step value needed (default 0.15)")
      ->check(CLI::Range(0.0, 100.0));
  sub->add_option("--min-abs-ms", o->min_abs_ms,
                  "Absolute change per step needed, in ms (default 0.5)")
      ->check(CLI::Range(0.0, 1e9));
  sub->add_option("--between-factor", o->check.between_factor,
                  "The threshold is at least this times the baselines' run-to-run variation "
                  "(default 3)")
      ->check(CLI::Range(0.0, 1000.0));
  sub->add_option("--warmup", o->check.warmup_steps,
                  "Leave out each run's first N steps (default 1)")
      ->check(CLI::Range(0, 1000000));
  sub->add_option("--min-steps", o->check.min_steps,
                  "Steps a name needs in a run to be tested (default 3)")
      ->check(CLI::Range(1, 1000000));
  sub->add_option("--catalog", o->catalog,
                  "The run history for runs:LABEL (default $TRACEDB_RUNS, else "
                  "~/.local/share/tracedb/runs.db)");
  AddVerbosityFlags(sub);
  sub->callback([o, exit_code] { *exit_code = RunCheckCmd(*o); });
}

}  // namespace tracedb::shell
