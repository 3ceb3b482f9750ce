// The importer of mpiP reports (`<app>.<nprocs>.<pid>.<n>.mpiP`), the 3.4 layout (Aggregate Time
// without a Count column) and the 3.5+ one (with Count). One report holds every rank: the importer
// writes rank_times, ranks, mpi_callsites (per rank and, as rank -1, the `*` aggregates),
// mpi_profile (per rank × routine totals), meta, stats and sources (no events: a report has no
// timeline).
// Thread safety: the importer is stateless; one Import() per TraceWriter at a time.
// Format and table mapping: docs/importers-mpi-profiles.md (FORMATS.md §4a).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "engine/db/trace_writer.h"
#include "engine/util/status.h"
#include "query/import/importer.h"
#include "query/import/text_profile.h"

namespace tracedb::query {

// The importer named "mpip", for the registry.
std::unique_ptr<Importer> NewMpipImporter();

// Imports the report `text`, read from `path` (a file of `size_on_disk` bytes), as Import() does
// for a file. For tests and fuzzing. REQUIRES: a batch is open on `writer`.
Status ImportMpipText(std::string_view path, std::string_view text, uint64_t size_on_disk,
                      engine::TraceWriter* writer, ImportResult* result);

// The same over lines read one at a time (Import() reads the file through a LineReader, in
// bounded memory).
Status ImportMpipLines(std::string_view path, text_profile::LineReader* lines,
                       uint64_t size_on_disk, engine::TraceWriter* writer, ImportResult* result);

}  // namespace tracedb::query
