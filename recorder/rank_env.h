// Detects this process's rank, world size and local rank from the environment of the usual
// launchers: TRACEDB_*, then Open MPI, Slurm, PMI, torchrun; else rank 0 of 1.
// Thread safety: reads the environment; call while no thread modifies it.
#pragma once

namespace tracedb::recorder {

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  // The variable the rank came from, e.g. "OMPI_COMM_WORLD_RANK": a string literal. A plain pointer
  // so that RankInfo is constant-initialised: the load-time constructor that starts recording
  // from TRACEDB_DIR may run before any dynamic initialiser of the library.
  const char* source = "default";
};

RankInfo DetectRank();

// Parses a non-negative decimal integer environment variable; false when unset or malformed.
bool EnvInt64(const char* name, long long* out);

}  // namespace tracedb::recorder
