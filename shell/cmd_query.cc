// `tracedb query JOB.tdb "SQL" [--format table|csv|json|markdown]`: runs SQL against a trace
// database (the `events` table, the views and functions of docs/sql.md) and prints the rows.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "query/open/query_db.h"
#include "shell/commands.h"
#include "shell/sql_runner.h"
#include "shell/verbosity.h"

namespace tracedb::shell {
namespace {

struct QueryOptions {
  std::string db;
  std::string sql;
  std::string format = "table";
};

int RunQuery(const QueryOptions& o) {
  OutputFormat format;
  if (!ParseOutputFormat(o.format, &format)) {
    std::fprintf(stderr, "tracedb query: unknown format '%s' (%s)\n", o.format.c_str(),
                 kOutputFormatNames);
    return kExitUsage;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&t0] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto db = query::OpenQueryDb(o.db);
  if (!db.ok()) {
    std::fprintf(stderr, "tracedb query: %s\n", db.status().message().c_str());
    return kExitError;
  }
  Verbose("query", "opened %s in %.3f s", o.db.c_str(), seconds());
  Status s = RunSql(db->get(), o.sql, format, stdout);
  std::fflush(stdout);
  Verbose("query", "ran in %.3f s", seconds());
  if (!s.ok()) {
    std::fprintf(stderr, "tracedb query: %s\n", s.message().c_str());
    return kExitError;
  }
  return kExitOk;
}

}  // namespace

void SetupQuery(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<QueryOptions>();
  CLI::App* sub = app.add_subcommand("query", "Run SQL against a trace database");
  sub->add_option("db", o->db, "Trace database (.tdb)")->required();
  sub->add_option("sql", o->sql, "SQL statement(s)")->required();
  sub->add_option("-f,--format", o->format, "table, box, line, csv, json or markdown");
  AddVerbosityFlags(sub);
  sub->callback([o, exit_code] { *exit_code = RunQuery(*o); });
}

}  // namespace tracedb::shell
