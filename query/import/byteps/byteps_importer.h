// The `byteps` importer: BytePS communication traces (BYTEPS_TRACE_ON=1), written as
// <trace dir>/<local rank>/comm.json (object form, pretty-printed, string pid and tid, epoch-µs
// ts, X events only), and the BytePS server profile (B/E records by key, never closed). The input
// is one comm.json (its rank is its directory's number) or the trace directory (every
// <n>/comm.json is rank n). Rows: docs/importers.md ("byteps"); format facts:
// ../shared/FORMATS.md section 2.
// Thread safety: see importer.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "query/import/importer.h"

namespace tracedb::query {

std::unique_ptr<Importer> NewBytepsImporter();

// The comm.json files of a BytePS trace directory, as (local rank, path) sorted by rank; empty
// when `dir` is not one.
std::vector<std::pair<int32_t, std::string>> BytepsTraceFiles(const std::string& dir);

}  // namespace tracedb::query
