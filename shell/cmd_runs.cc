// `tracedb runs add RUN.tdb [--label L]` and `tracedb runs list [--label L] [-f text|json]`: the
// run history that `tracedb check --baseline runs:LABEL[:N]` reads (query/check/run_catalog.h).
// docs/check.md "The run history".
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "engine/util/json_text.h"
#include "engine/util/parse_number.h"
#include "query/check/run_catalog.h"
#include "query/open/query_db.h"
#include "shell/commands.h"
#include "shell/format.h"
#include "shell/report_html.h"
#include "shell/run_history.h"
#include "shell/verbosity.h"

namespace tracedb::shell {
namespace {

namespace chk = query::check;

struct RunsOptions {
  std::string run;
  std::string label = "default";
  std::string catalog;
  std::string format = "text";
  int limit = 0;
};

std::string Where(const RunsOptions& o) {
  return o.catalog.empty() ? chk::CatalogPath() : o.catalog;
}

int RunsAdd(const RunsOptions& o) {
  if (o.label.empty() || o.label.find(':') != std::string::npos) {
    std::fprintf(stderr, "tracedb runs add: a label must be non-empty and without ':' (got '%s')\n",
                 o.label.c_str());
    return kExitUsage;
  }
  query::RunSummary summary;
  if (!LoadRunSummary("runs add", o.run, &summary)) return kExitError;
  auto db = query::OpenQueryDb(o.run);
  if (!db.ok()) {
    std::fprintf(stderr, "tracedb runs add: %s\n", db.status().message().c_str());
    return kExitError;
  }
  auto meta = chk::ReadRecordMeta(db->get());
  if (!meta.ok()) {
    std::fprintf(stderr, "tracedb runs add: %s: %s\n", o.run.c_str(),
                 meta.status().message().c_str());
    return kExitError;
  }
  chk::RunEntry e = chk::MakeEntry(o.run, o.label, summary, *meta);
  const std::string where = Where(o);
  auto cat = chk::RunCatalog::Open(where, true);
  Status s = cat.ok() ? (*cat)->Add(&e) : cat.status();
  if (!s.ok()) {
    std::fprintf(stderr, "tracedb runs add: %s\n", s.message().c_str());
    return kExitError;
  }
  if (GetVerbosity() != Verbosity::kQuiet) {
    std::fprintf(stderr, "tracedb runs add: run %lld (%s, %zu steps, median step %s) in %s\n",
                 static_cast<long long>(e.id), e.label.c_str(), static_cast<size_t>(e.steps),
                 HumanDuration(e.step_median_ns).c_str(), where.c_str());
  }
  return kExitOk;
}

std::string When(int64_t t) {
  char buf[32];
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M", &tm);
  return buf;
}

int RunsList(const RunsOptions& o) {
  if (o.format != "text" && o.format != "json") {
    std::fprintf(stderr, "tracedb runs list: unknown format '%s' (text, json)\n", o.format.c_str());
    return kExitUsage;
  }
  const std::string where = Where(o);
  auto cat = chk::RunCatalog::Open(where, false);
  if (!cat.ok()) {
    std::fprintf(stderr, "tracedb runs list: %s\n", cat.status().message().c_str());
    return kExitError;
  }
  auto runs = (*cat)->List(o.label, o.limit);
  if (!runs.ok()) {
    std::fprintf(stderr, "tracedb runs list: %s: %s\n", where.c_str(),
                 runs.status().message().c_str());
    return kExitError;
  }
  std::string out;
  if (o.format == "json") {
    namespace json = engine::json;
    out = "[";
    for (size_t i = 0; i < runs->size(); ++i) {
      const auto& e = (*runs)[i];
      out += (i ? "," : "");
      out += "{\"id\":" + std::to_string(e.id) + ",\"label\":" + json::String(e.label) +
             ",\"path\":" + json::String(e.path) + ",\"added_at\":" + std::to_string(e.added_at) +
             ",\"ranks\":" + std::to_string(e.ranks) + ",\"events\":" + std::to_string(e.events) +
             ",\"steps\":" + std::to_string(e.steps) +
             ",\"step_median_ns\":" + json::DoubleText(e.step_median_ns) +
             ",\"comm_share\":" + json::DoubleText(e.comm_share) +
             ",\"command\":" + json::String(e.command) + ",\"git_rev\":" + json::String(e.git_rev) +
             ",\"host\":" + json::String(e.host) + ",\"env\":" + json::String(e.env) + "}";
    }
    out += "]\n";
  } else {
    out = Fmt("%5s %-12s %-16s %5s %6s %11s %6s %-12s %s\n", "id", "label", "added (UTC)", "ranks",
              "steps", "median step", "comm", "git rev", "path / command");
    for (const auto& e : *runs) {
      out += Fmt("%5lld %-12.12s %-16s %5d %6lld %11s %5.1f%% %-12.12s %s\n",
                 static_cast<long long>(e.id), e.label.c_str(), When(e.added_at).c_str(), e.ranks,
                 static_cast<long long>(e.steps), HumanDuration(e.step_median_ns).c_str(),
                 100 * e.comm_share, e.git_rev.empty() ? "-" : e.git_rev.c_str(), e.path.c_str());
      if (!e.command.empty()) out += Fmt("%60s %s\n", "", e.command.c_str());
    }
  }
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

}  // namespace

bool ResolveRunPaths(const char* cmd, const std::vector<std::string>& specs,
                     const std::string& catalog, const std::string& exclude,
                     std::vector<std::string>* paths) {
  for (const std::string& b : specs) {
    if (b.rfind("runs:", 0) != 0) {
      paths->push_back(b);
      continue;
    }
    std::string label = b.substr(5);
    int n = kDefaultHistoryRuns;
    if (const size_t colon = label.rfind(':'); colon != std::string::npos) {
      const std::string count = label.substr(colon + 1);
      int64_t v = 0;
      if (!engine::ParseInt64(count, &v) || v < 1 || v > 1000) {
        std::fprintf(stderr, "tracedb %s: --baseline %s: N must be a number from 1 to 1000\n", cmd,
                     b.c_str());
        return false;
      }
      n = static_cast<int>(v);
      label.resize(colon);
    }
    if (label.empty()) {
      std::fprintf(stderr, "tracedb %s: --baseline %s: no label (runs:LABEL[:N])\n", cmd,
                   b.c_str());
      return false;
    }
    const std::string where = catalog.empty() ? chk::CatalogPath() : catalog;
    auto cat = chk::RunCatalog::Open(where, false);
    if (!cat.ok()) {
      std::fprintf(stderr, "tracedb %s: %s\n", cmd, cat.status().message().c_str());
      return false;
    }
    // One more than asked, in case the run itself is in the history.
    auto runs = (*cat)->List(label, n + 1);
    if (!runs.ok()) {
      std::fprintf(stderr, "tracedb %s: %s: %s\n", cmd, where.c_str(),
                   runs.status().message().c_str());
      return false;
    }
    std::vector<std::string> found;
    for (const auto& e : *runs) {
      std::error_code ec;
      if (!exclude.empty() && std::filesystem::equivalent(e.path, exclude, ec)) continue;
      found.push_back(e.path);
    }
    if (static_cast<int>(found.size()) > n) found.erase(found.begin());
    if (found.empty()) {
      std::fprintf(stderr, "tracedb %s: no runs labelled '%s' in %s\n", cmd, label.c_str(),
                   where.c_str());
      return false;
    }
    Verbose(cmd, "%s: %zu runs from %s", b.c_str(), found.size(), where.c_str());
    paths->insert(paths->end(), found.begin(), found.end());
  }
  return true;
}

void SetupRuns(CLI::App& app, int* exit_code) {
  CLI::App* runs = app.add_subcommand(
      "runs", "The run history that tracedb check compares with (its baselines runs:LABEL[:N])");
  runs->require_subcommand(1);
  auto o = std::make_shared<RunsOptions>();
  CLI::App* add = runs->add_subcommand("add", "Add a run (a trace database) to the history");
  add->add_option("run", o->run, "The run's trace database")->required();
  add->add_option("-l,--label", o->label, "Its label, e.g. nightly or main (default: default)");
  add->add_option("--catalog", o->catalog,
                  "The history file (default $TRACEDB_RUNS, else ~/.local/share/tracedb/runs.db)");
  AddVerbosityFlags(add);
  add->callback([o, exit_code] { *exit_code = RunsAdd(*o); });
  auto l = std::make_shared<RunsOptions>();
  CLI::App* list = runs->add_subcommand("list", "List the runs of the history, oldest first");
  list->add_option("-l,--label", l->label, "Only the runs with this label")->default_str("");
  list->add_option("-n,--last", l->limit, "Only the last N runs")->check(CLI::Range(1, 1000000));
  list->add_option("-f,--format", l->format, "text or json");
  list->add_option("--catalog", l->catalog,
                   "The history file (default $TRACEDB_RUNS, else ~/.local/share/tracedb/runs.db)");
  l->label.clear();
  list->callback([l, exit_code] { *exit_code = RunsList(*l); });
}

}  // namespace tracedb::shell
