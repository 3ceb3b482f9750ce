// The importer of IBM mpitrace / hpctw text profiles (`mpi_profile.<jobid>.<rank>` and
// `mpi_profile.<jobid>.<timestamp>.<rank>`), both the old hpctw dialect and the new IBM/mpitrace
// one. One file is one rank's profile; rank 0's file adds the all-ranks summary. The importer
// writes mpi_profile, mpi_msgsize, rank_times, ranks, meta, stats and sources (no events: these
// profiles have no timeline).
// Thread safety: the importer is stateless; one Import() per TraceWriter at a time.
// Format and table mapping: docs/importers-mpi-profiles.md (FORMATS.md §4b).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "engine/db/trace_writer.h"
#include "engine/util/status.h"
#include "query/import/importer.h"
#include "query/import/text_profile.h"

namespace tracedb::query {

// The importer named "mpitrace", for the registry.
std::unique_ptr<Importer> NewMpitraceImporter();

// Imports the profile `text`, read from `path` (a file of `size_on_disk` bytes), as Import()
// does for a file. For tests and fuzzing. REQUIRES: a batch is open on `writer`.
Status ImportMpitraceText(std::string_view path, std::string_view text, uint64_t size_on_disk,
                          int32_t rank_hint, engine::TraceWriter* writer, ImportResult* result);

// The same over lines read one at a time (Import() reads the file through a LineReader, in
// bounded memory).
Status ImportMpitraceLines(std::string_view path, text_profile::LineReader* lines,
                           uint64_t size_on_disk, int32_t rank_hint, engine::TraceWriter* writer,
                           ImportResult* result);

}  // namespace tracedb::query
