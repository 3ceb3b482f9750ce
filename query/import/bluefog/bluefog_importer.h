// The `bluefog` importer: Bluefog timelines (BLUEFOG_TIMELINE=<prefix>), one file per rank named
// <prefix><rank>.json, in old-Horovod framing (never closed), with B, E and M records only; pid is
// the tensor and tid a per-rank thread index. Streams in file order with constant memory.
// Rows: docs/importers.md ("bluefog"); format facts: ../shared/FORMATS.md section 3.
// Thread safety: see importer.h.
#pragma once

#include <memory>

#include "query/import/importer.h"

namespace tracedb::query {

std::unique_ptr<Importer> NewBluefogImporter();

}  // namespace tracedb::query
