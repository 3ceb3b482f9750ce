// Rank detection. See rank_env.h.
#include "recorder/rank_env.h"
#include "engine/util/parse_number.h"

#include <cerrno>
#include <cstdlib>

namespace tracedb::recorder {

bool EnvInt64(const char* name, long long* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return false;
  int64_t x = 0;
  if (!engine::ParseInt64(v, &x)) return false;
  *out = x;
  return true;
}

RankInfo DetectRank() {
  struct Source {
    const char* rank;
    const char* size;
    const char* local;
  };
  static const Source kSources[] = {
      {"TRACEDB_RANK", "TRACEDB_WORLD_SIZE", "TRACEDB_LOCAL_RANK"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
      {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
  };
  RankInfo info;
  for (const Source& s : kSources) {
    long long r;
    if (!EnvInt64(s.rank, &r) || r < 0 || r > 0x7fffffff) continue;
    info.rank = static_cast<int>(r);
    info.source = s.rank;
    long long w;
    if (EnvInt64(s.size, &w) && w > r && w <= 0x7fffffff)
      info.world_size = static_cast<int>(w);
    else
      info.world_size = static_cast<int>(r) + 1;
    long long l;
    if (EnvInt64(s.local, &l) && l >= 0 && l <= 0x7fffffff) info.local_rank = static_cast<int>(l);
    return info;
  }
  info.source = "default";
  return info;
}

}  // namespace tracedb::recorder
