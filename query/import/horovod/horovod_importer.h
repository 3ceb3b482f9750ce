// The `horovod` importer: Horovod timelines (HOROVOD_TIMELINE), both framings: the old one
// (`[` then `{…},\n` records, never closed) and the new one (a pid-0 header carrying
// start_time_since_epoch_in_micros, records back to back, `}]` at the end). Events stream from
// the file to the database in file order with constant memory. Rows: docs/importers.md
// ("horovod"); format facts: ../shared/FORMATS.md section 1.
// Thread safety: see importer.h.
#pragma once

#include <memory>

#include "query/import/importer.h"

namespace tracedb::query {

std::unique_ptr<Importer> NewHorovodImporter();

}  // namespace tracedb::query
