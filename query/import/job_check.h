// Keeps unrelated inputs out of one trace database: before each input is committed, what it
// claims (its ranks, its world size, its mpitrace job id) is checked against what the database
// already holds. Two files of one format that both hold rank R are two runs (every format writes
// one file per rank, or one file for all ranks), as are two world sizes, two mpitrace job ids,
// and two Kineto or BytePS traces (epoch clocks) whose events are far apart in time.
// `tracedb import` refuses such an input unless asked to merge it or to keep it apart
// (docs/importers.md, "Unrelated inputs").
// Thread safety: plain functions over a Db owned by the caller.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"
#include "query/import/importer.h"

namespace tracedb::query {

// What a database holds before one more input goes into it.
struct JobSnapshot {
  struct Source {
    std::string path;    // absolute (sources.path)
    std::string format;  // sources.format
    int32_t rank = -1;   // -1: a file of several ranks (an mpiP report, a BytePS directory)
  };
  std::vector<Source> sources;
  std::map<int32_t, int32_t> world_size;  // rank -> world size, where known (> 0)
  // Per format (ranks.source) whose timestamps are epoch times (kineto, byteps): the span of its
  // events, ns.
  std::map<std::string, std::pair<int64_t, int64_t>> epoch_span;
};

// Two spans of epoch-clock events further apart than this, and than either lasts, are two runs.
inline constexpr int64_t kUnrelatedGapNs = 600'000'000'000;  // 10 minutes

StatusOr<JobSnapshot> SnapshotJob(engine::Db* db);

// The job an mpitrace profile's name gives: "<jobid>[.<timestamp>]" of
// "[prefix]mpi_profile.<jobid>[.<timestamp>].<rank>[.gz]"; "" for other names.
std::string MpitraceJobId(std::string_view path);

// OK when the input at `path` just imported as `format` (with `result`) can be of the job in
// `before`; otherwise InvalidArgument naming the input, the conflict and the file it
// conflicts with.
Status CheckSameJob(const JobSnapshot& before, const std::string& path, const std::string& format,
                    const ImportResult& result);

}  // namespace tracedb::query
