// The environment that `tracedb record --nccl/--cuda/--nvtx` gives the recorded command: which
// GPU capture libraries to load, and through which variable. The shell's record command merges
// these NAME=VALUE pairs into what it passes to the ranks (`-x` for Open MPI, `-genv` for Hydra,
// the environment otherwise), as it does for TRACEDB_DIR and LD_PRELOAD.
// No CUDA needed to build it. Thread safety: pure (reads the environment for overrides).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tracedb::gpu {

struct GpuRecordOptions {
  bool nccl = false;        // NCCL profiler plugin: NCCL_PROFILER_PLUGIN=<path of the plugin>
  bool cuda = false;        // CUPTI: CUDA_INJECTION64_PATH=<libtracedb_cuda.so>, TRACEDB_CUDA=1
  bool nvtx = false;        // NVTX: NVTX_INJECTION64_PATH=<libtracedb_nvtx.so>
  std::string nccl_events;  // optional TRACEDB_NCCL_EVENTS value
};

// Fills *env with the NAME=VALUE pairs for `o`, finding each library under `self_dir` (the
// directory of the tracedb binary: build tree or installed layout) unless TRACEDB_NCCL_PLUGIN,
// TRACEDB_CUDA_LIB or TRACEDB_NVTX_LIB name it. Returns false with *error naming the missing
// library (and the variable that would name it) when one is not found.
bool GpuRecordEnv(const GpuRecordOptions& o, const std::string& self_dir,
                  std::vector<std::pair<std::string, std::string>>* env, std::string* error);

}  // namespace tracedb::gpu
