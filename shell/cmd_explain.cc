// `tracedb explain DB [--steps A:B] [-n N] [-f text|json]`: why the job waited, in words: the
// root causes that stand out from the noise, ranked by the wait they cost ("step 37: rank 2
// spent 116.00 ms more in backward than the median rank; ranks 0, 1, 3 waited 348.00 ms in
// MPI_Allreduce for it"), the wait-state totals per pattern, and the critical path's top names.
// The analyses are query/analysis/why.h, their summary in words query/analysis/why_summary.h
// (shared with the HTML report and `tracedb view`); definitions and limits in docs/why.md.
#include <cstdio>
#include <memory>
#include <string>

#include "query/analysis/why.h"
#include "query/analysis/why_summary.h"
#include "query/open/query_db.h"
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

int RunExplain(const ExplainOptions& o) {
  wa::StepRange range;
  if (!wa::ParseStepRange(o.steps, &range)) {
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
  const wa::WhySummary s = wa::Summarize(*a, range, o.n);
  const std::string out =
      o.format == "json" ? wa::WhySummaryJson(*a, s) + "\n" : wa::WhySummaryText(*a, s, o.steps);
  std::fputs(out.c_str(), stdout);
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
