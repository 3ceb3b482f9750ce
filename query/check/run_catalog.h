// The run history of `tracedb runs` and `tracedb check --baseline runs:LABEL[:N]`: a small
// SQLite file (one table, `runs`) listing trace databases by label, with a summary of each
// (ranks, events, steps, median step time, communication share) and what `tracedb record`
// captured about how it was made (command, git revision, host, environment: the trace's meta
// table, keys record.*). The catalog stores paths, never copies of the traces.
// Where it is: CatalogPath() (docs/check.md "The run history").
// Thread safety: a RunCatalog belongs to one thread; SQLite locking makes concurrent `runs add`
// from several processes safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"
#include "query/report/report_data.h"

namespace tracedb::query::check {

struct RunEntry {
  int64_t id = 0;
  std::string label;
  std::string path;      // absolute
  int64_t added_at = 0;  // unix seconds
  int32_t ranks = 0;
  int64_t events = 0;
  int64_t steps = 0;
  double step_median_ns = 0;
  double comm_share = 0;
  // From the trace's meta table (empty when `record` did not write them).
  std::string command, git_rev, host, env;  // env: a JSON object
};

// $TRACEDB_RUNS, else $XDG_DATA_HOME/tracedb/runs.db, else ~/.local/share/tracedb/runs.db.
std::string CatalogPath();

// The record.* keys of a trace database's meta table (key without the prefix -> value).
StatusOr<std::map<std::string, std::string>> ReadRecordMeta(engine::Db* db);

class RunCatalog {
 public:
  // Opens (creating the file and its folder when `create`) the catalog at `path`.
  static StatusOr<std::unique_ptr<RunCatalog>> Open(const std::string& path, bool create);

  // Adds a run; fills entry->id and entry->added_at (when 0).
  Status Add(RunEntry* entry);
  // Runs with `label` (every label when empty), oldest first; the last `limit` when > 0.
  StatusOr<std::vector<RunEntry>> List(const std::string& label, int limit) const;

 private:
  explicit RunCatalog(std::unique_ptr<engine::Db> db) : db_(std::move(db)) {}
  std::unique_ptr<engine::Db> db_;
};

// A catalog entry for the trace at `path` (made absolute) from its summary and meta.
RunEntry MakeEntry(const std::string& path, const std::string& label, const RunSummary& summary,
                   const std::map<std::string, std::string>& meta);

}  // namespace tracedb::query::check
