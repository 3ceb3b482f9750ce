// GPU capture environment for `tracedb record`. See record_env.h.
#include "recorder/cuda/record_env.h"

#include <cstdlib>
#include <filesystem>

namespace tracedb::gpu {

namespace {

namespace fs = std::filesystem;

// `name` from the variable `env`, else next to `self_dir` in the build tree or installed layout.
std::string Find(const char* env, const std::string& name, const std::string& build_subdir,
                 const std::string& self_dir) {
  if (const char* v = std::getenv(env); v != nullptr && *v) return v;
  for (const std::string& sub :
       {std::string("."), build_subdir, std::string("../lib"), std::string("../lib/tracedb")}) {
    const fs::path p = fs::path(self_dir) / sub / name;
    std::error_code ec;
    if (fs::exists(p, ec)) return fs::canonical(p, ec).string();
  }
  return "";
}

bool Add(const char* env, const std::string& name, const std::string& subdir,
         const std::string& self_dir, std::string* path, std::string* error) {
  *path = Find(env, name, subdir, self_dir);
  if (path->empty()) {
    *error = "cannot find " + name + " next to " + self_dir + " (set " + env + ")";
    return false;
  }
  return true;
}

}  // namespace

bool GpuRecordEnv(const GpuRecordOptions& o, const std::string& self_dir,
                  std::vector<std::pair<std::string, std::string>>* env, std::string* error) {
  std::string path;
  if (o.nccl) {
    if (!Add("TRACEDB_NCCL_PLUGIN", "libnccl-profiler-tracedb.so", "recorder/nccl", self_dir, &path,
             error)) {
      return false;
    }
    env->emplace_back("NCCL_PROFILER_PLUGIN", path);
    if (!o.nccl_events.empty()) env->emplace_back("TRACEDB_NCCL_EVENTS", o.nccl_events);
  }
  if (o.cuda) {
    if (!Add("TRACEDB_CUDA_LIB", "libtracedb_cuda.so", "recorder/cuda", self_dir, &path, error)) {
      return false;
    }
    env->emplace_back("CUDA_INJECTION64_PATH", path);
    env->emplace_back("TRACEDB_CUDA", "1");
  }
  if (o.nvtx) {
    if (!Add("TRACEDB_NVTX_LIB", "libtracedb_nvtx.so", "recorder/nvtx", self_dir, &path, error)) {
      return false;
    }
    env->emplace_back("NVTX_INJECTION64_PATH", path);
  }
  return true;
}

}  // namespace tracedb::gpu
