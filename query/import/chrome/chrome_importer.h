// The `chrome` importer: generic Chrome trace-event JSON (array or object form, plain or gzip),
// including what `tracedb export --chrome` writes. The mapping itself is chrome_core.h; this
// module adds detection and the file's bookkeeping. Conventions: docs/importers.md.
// Thread safety: see importer.h.
#pragma once

#include <memory>

#include "query/import/importer.h"

namespace tracedb::query {

std::unique_ptr<Importer> NewChromeImporter();

}  // namespace tracedb::query
