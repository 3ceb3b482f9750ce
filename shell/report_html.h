// `tracedb report html JOB.tdb -o report.html [--baseline A.tdb]`: one self-contained HTML page
// with plots of the job's aggregates (query/report/report_data.h), and the JSON of a run
// comparison, shared with `tracedb diff --format json`. docs/report.md, docs/diff.md.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "query/report/report_data.h"

namespace tracedb::shell {

// Adds `html` under the `report` subcommand.
void SetupReportHtml(CLI::App* report, int* exit_code);

// The comparison as one JSON object (docs/diff.md "JSON"); `alpha`: the significance level.
std::string DiffJson(const query::RunDiff& d, double alpha);

// The trend across runs (baselines first, this run last) for the page: step time and the top
// names' median per-step time per run (shell/report_trend.cc; docs/report.md).
std::string TrendJson(const std::vector<query::RunSummary>& runs);

// Opens and summarizes a trace database; on error prints "tracedb CMD: message" and returns
// false.
bool LoadRunSummary(const char* cmd, const std::string& path, query::RunSummary* out);

}  // namespace tracedb::shell
