// The `kineto` importer: PyTorch profiler (Kineto) Chrome traces, one file per rank (plain or
// .json.gz), rank and world size from distributedInfo, ts/dur in fractional µs kept exact to the
// ns, baseTimeNanoseconds added when present. Rows: docs/importers.md ("kineto"); format facts:
// ../shared/FORMATS.md section 5.
// Thread safety: see importer.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "query/import/importer.h"

namespace tracedb::query {

std::unique_ptr<Importer> NewKinetoImporter();

// The size in bytes of one element of a PyTorch/NCCL dtype name ("Float", "float32", "c10::Half",
// "unsigned char", …), or 0 when unknown.
int KinetoDtypeSize(std::string_view dtype);

}  // namespace tracedb::query
