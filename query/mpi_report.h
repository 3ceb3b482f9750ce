// The MPI report: what IBM mpitrace prints (per routine #calls, average bytes and time; message
// size distributions; the ranks with minimum, median and maximum communication time; a per-rank
// timing table) plus mpiP's spread across ranks (COV), built from either
//   - MPI events recorded by the interposer (cat = 'mpi' in the events table), or
//   - imported mpitrace/mpiP profiles (tables mpi_profile, mpi_msgsize, rank_times).
// The shell renders it as text, CSV or JSON (shell/cmd_report.cc).
// Thread safety: functions over a Db owned by the caller.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/sqlite.h"
#include "engine/status.h"

namespace tracedb::query {

struct RoutineStat {
  std::string routine;  // "MPI_Allreduce"
  uint64_t calls = 0;
  double bytes = 0;     // total bytes over the calls
  int64_t time_ns = 0;  // total time in the routine
};

// One message-size bin of a routine: calls whose bytes were in [min_bytes, max_bytes] (mpitrace's
// bins: 0, 1-4, then (2^k, 2^(k+1)]).
struct SizeBin {
  std::string routine;
  int64_t min_bytes = 0, max_bytes = 0;
  uint64_t calls = 0;
  double bytes = 0;
  int64_t time_ns = 0;
};

struct RankMpi {
  int32_t rank = 0;
  std::string host;
  std::vector<RoutineStat> routines;  // by time, descending
  std::vector<SizeBin> bins;          // by routine, then size
  int64_t comm_ns = 0;                // time in MPI calls
  int64_t elapsed_ns = 0;             // MPI_Init to MPI_Finalize (else the rank's time span)
  std::optional<int64_t> user_ns, system_ns, maxrss_bytes;  // imported profiles only
};

struct MpiReport {
  std::string source;  // "recorded", "mpitrace", "mpip"
  int32_t world_size = 0;
  std::vector<RankMpi> ranks;  // by rank
};

// Every routine over all ranks, and its spread: per-rank time mean, min, max and COV.
struct RoutineSpread {
  std::string routine;
  uint64_t calls = 0;
  double bytes = 0;
  int64_t time_ns = 0;
  int ranks = 0;
  double mean_ns = 0, min_ns = 0, max_ns = 0, cov = 0;
  int32_t min_rank = 0, max_rank = 0;
};
std::vector<RoutineSpread> SpreadAcrossRanks(const MpiReport& r);

// NotFound when the database holds neither recorded MPI events nor an imported profile.
StatusOr<MpiReport> BuildMpiReport(engine::Db* db);

// The bin of a message of `bytes` bytes: [lo, hi] as mpitrace prints them.
void MessageSizeBin(int64_t bytes, int64_t* lo, int64_t* hi);

}  // namespace tracedb::query
