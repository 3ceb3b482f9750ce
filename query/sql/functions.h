// SQL functions for trace queries (docs/sql.md):
//   percentile(x, p)     aggregate: the p-th percentile (0-100) of x, nearest-rank, exact
//   median(x)            aggregate: percentile(x, 50)
//   covered_ns(ts, dur)  aggregate: ns covered by the union of the intervals [ts, ts+dur)
//   overlap_ns(ts, dur, is_b)  aggregate: ns covered both by the union of the intervals with
//                        is_b false and by the union of those with is_b true
//   log2_bucket(x)       floor(log2(x)) for x >= 1, 0 for x < 1 (NULL stays NULL)
//   human_duration(ns)   "1.23 ms"        human_bytes(n)   "4.2 MB"
//   activity(source, cat, name, gpu)  'compute', 'comm' or NULL: what a span is, for the views
//                        (recorded and imported categories; docs/sql.md "Views on imported
//                        traces"); source is ranks.source, gpu whether the rank has kernels
// This file implements SQLite functions and so calls the sqlite3_* API itself.
// Thread safety: per SQLite connection.
#pragma once

#include <string_view>

#include "engine/db/sqlite_api.h"

namespace tracedb::query {

// What a span of category `cat` named `name` on a rank whose ranks.source is `source` counts as
// in the views: "compute", "comm", or nullptr (neither: runtime calls, copies, annotations).
// `gpu`: the rank has GPU kernels (then only kernels count, not the CPU operators that launch
// them).
const char* ActivityOf(std::string_view source, std::string_view cat, std::string_view name,
                       bool gpu);

int RegisterFunctions(sqlite3* db);

}  // namespace tracedb::query
