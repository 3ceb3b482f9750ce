// Unrelated inputs refused or kept apart. See job_check.h.
#include "query/import/job_check.h"

#include <algorithm>
#include <filesystem>

#include "engine/util/saturating.h"
#include "query/import/import_common.h"

namespace tracedb::query {
namespace {

std::string BaseName(std::string_view path) {
  return std::filesystem::path(std::string(path)).filename().string();
}

// a - b, saturated (timestamps of a hostile file can be anything).
int64_t Diff(int64_t a, int64_t b) { return engine::SaturatingSub(a, b); }

Status Conflict(const std::string& path, const std::string& what, const std::string& other) {
  return Status::InvalidArgument(path + ": not of the job already in the database: " + what +
                                 " (from " + other +
                                 "); --separate keeps it in a database of its own, --merge "
                                 "adds it to the same ranks");
}

}  // namespace

StatusOr<JobSnapshot> SnapshotJob(engine::Db* db) {
  JobSnapshot s;
  {
    TRACEDB_ASSIGN_OR_RETURN(engine::Stmt st,
                             db->Prepare("SELECT path, format, coalesce(rank, -1) FROM "
                                         "main.sources WHERE finished = 1 ORDER BY path"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      s.sources.push_back(JobSnapshot::Source{std::string(st.Text(0)), std::string(st.Text(1)),
                                              static_cast<int32_t>(st.Int(2))});
    }
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(
        engine::Stmt st,
        db->Prepare("SELECT rank, world_size FROM main.ranks WHERE world_size > 0"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      s.world_size[static_cast<int32_t>(st.Int(0))] = static_cast<int32_t>(st.Int(1));
    }
  }
  TRACEDB_ASSIGN_OR_RETURN(
      engine::Stmt st,
      db->Prepare("SELECT r.source, min(b.min_ts), max(b.max_end) FROM main.blocks b "
                  "JOIN main.ranks r ON r.rank = b.rank "
                  "WHERE r.source IN ('kineto', 'byteps') GROUP BY r.source"));
  for (;;) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    s.epoch_span[std::string(st.Text(0))] = {st.Int(1), st.Int(2)};
  }
  return s;
}

std::string MpitraceJobId(std::string_view path) {
  const std::string name = BaseName(path);
  std::string_view n = name;
  if (n.size() > 3 && n.substr(n.size() - 3) == ".gz") n.remove_suffix(3);
  const size_t at = n.find("mpi_profile.");
  if (at == std::string_view::npos) return "";
  n.remove_prefix(at + 12);
  const size_t last = n.rfind('.');
  if (last == std::string_view::npos || last == 0) return "";
  return std::string(n.substr(0, last));
}

Status CheckSameJob(const JobSnapshot& before, const std::string& path, const std::string& format,
                    const ImportResult& result) {
  const std::string self = SourcePath(path);
  // One file per rank (or one for all ranks) in every format: the same rank from another file of
  // the same format is another run.
  for (const JobSnapshot::Source& s : before.sources) {
    if (SourcePath(s.path) == self || s.format != format) continue;
    for (int32_t r : result.ranks) {
      if (s.rank == r || (s.rank < 0 && format == "mpip")) {
        return Conflict(path, "rank " + std::to_string(r) + " is already imported", s.path);
      }
    }
  }
  if (result.world_size > 0) {
    for (const auto& [rank, n] : before.world_size) {
      if (n == result.world_size) continue;
      std::string from = "rank " + std::to_string(rank);
      for (const JobSnapshot::Source& s : before.sources) {
        if (s.rank == rank) from = s.path;
      }
      return Conflict(path,
                      "a world of " + std::to_string(result.world_size) +
                          " ranks, the database holds one of " + std::to_string(n),
                      from);
    }
  }
  // Epoch clocks: events of one job overlap in time, or nearly.
  if (auto it = before.epoch_span.find(format);
      it != before.epoch_span.end() && result.first_ts <= result.last_end) {
    const auto [first, last] = it->second;
    const int64_t gap = std::max(Diff(result.first_ts, last), Diff(first, result.last_end));
    const int64_t longest = std::max(Diff(last, first), Diff(result.last_end, result.first_ts));
    if (gap > kUnrelatedGapNs && gap > longest) {
      std::string from = "the " + format + " events already imported";
      for (const JobSnapshot::Source& s : before.sources) {
        if (s.format == format) from = s.path;
      }
      return Conflict(path,
                      "its events are " + std::to_string(gap / 1'000'000'000) +
                          " s apart from the " + format + " events already imported",
                      from);
    }
  }
  if (format == "mpitrace") {
    const std::string job = MpitraceJobId(path);
    for (const JobSnapshot::Source& s : before.sources) {
      if (s.format != "mpitrace" || SourcePath(s.path) == self) continue;
      const std::string other = MpitraceJobId(s.path);
      if (!job.empty() && !other.empty() && job != other) {
        return Conflict(path, "mpitrace job " + job + ", the database holds job " + other, s.path);
      }
    }
  }
  return Status::Ok();
}

}  // namespace tracedb::query
