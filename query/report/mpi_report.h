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

#include "engine/db/sqlite.h"
#include "engine/util/status.h"

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
  // The rank's own calls are in the input (recorded events, or its own profile). A rank known only
  // from rank 0's "MPI timing summary for all ranks" table has a comm time and no calls.
  bool has_calls = false;
};

// One of mpitrace's "minimum/median/maximum communication time = X sec for task T" lines.
struct CommExtreme {
  int32_t rank = -1;  // -1: unknown (the input states it not, and not every rank is present)
  int64_t comm_ns = 0;
  bool stated = false;  // taken from the profile's own summary, not computed here
};

struct MpiReport {
  std::string source;  // "recorded", "mpitrace", "mpip"
  int32_t world_size = 0;
  std::vector<RankMpi> ranks;  // by rank
  // mpitrace's choice of ranks: sorted by communication time, the first, the lower median
  // (element (n - 1) / 2) and the last. An imported mpitrace profile's own statement wins, since
  // it was computed from times more precise than the 2-decimal all-ranks table.
  CommExtreme min, median, max;
  // Ranks with calls, and whether they are every rank of the job (0 .. world_size - 1).
  int32_t ranks_with_calls = 0;
  bool all_ranks_have_calls() const { return ranks_with_calls == world_size; }
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
