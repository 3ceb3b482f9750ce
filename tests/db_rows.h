// Test helpers that read a trace database back as plain rows: every block of the `blocks` table
// decoded with engine::DecodeBlock, names and categories resolved through `strings`, tracks
// through `tracks`; and CSV renderings of rows and of the stats, ranks and sources tables for
// diff tests (input trace -> import -> expected CSV).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/segment/segment_format.h"
#include "tests/test_util.h"

namespace tracedb::testing {

struct DbRow {
  int32_t rank = 0;
  uint32_t track = 0;
  std::string track_kind, track_name;
  int64_t tid = -1;  // tracks.tid, -1 when NULL
  std::string kind;  // "span", "instant", "counter", "flow"
  std::string name, cat;
  int64_t ts = 0, dur = 0;
  uint32_t depth = 0;
  uint64_t k = 0, parent_k = 0;
  std::string parent;  // the parent's name, "" at the top
  engine::EventArgs args;
  double value = 0;
  std::string json;
};

// Every row of the database at `path`, sorted by (rank, track name, track kind, ts, k). Fails the
// calling test when the database cannot be read or a block does not decode.
std::vector<DbRow> ReadDbRows(const std::string& path);

// rank,track_kind,track,tid,kind,name,cat,ts,dur,depth,parent,bytes,peer,seq,flow,value,json
std::string RowsCsv(const std::vector<DbRow>& rows);

// The rows of `sql` on the database or shard manifest at `db_path` (opened as `tracedb query`
// opens it), one line each, values joined by '|', NULL as "NULL"; sorted unless `sort` is false
// (for a query that orders its rows itself). Fails the calling test on any error.
std::string QueryRows(const std::string& db_path, const std::string& sql, bool sort = true);

// The ranks, sources (file name only), stats and steps tables as CSV sections.
std::string TablesCsv(const std::string& path);

// Expected-output files of diff tests: when TRACEDB_REWRITE_EXPECTED=1 is set, writes `actual`
// to `path` and returns true (the caller then skips its comparison; review the diff before
// committing); otherwise returns false. The one variable for every diff test of the project's
// importers and reports.
inline bool RewriteExpected(const std::string& path, const std::string& actual) {
  const char* v = std::getenv("TRACEDB_REWRITE_EXPECTED");
  if (v == nullptr || std::string(v) != "1") return false;
  WriteFile(path, actual);
  return true;
}

}  // namespace tracedb::testing
