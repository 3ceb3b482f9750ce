// The environment `tracedb record --nccl/--cuda/--nvtx` passes to the recorded command: the
// libraries are found in the build tree (as next to an installed tracedb), the variables overriding
// them win, and a missing library is a clear error naming it and its variable.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "recorder/cuda/record_env.h"

namespace tracedb::gpu {
namespace {

std::string Value(const std::vector<std::pair<std::string, std::string>>& env,
                  const std::string& name) {
  for (const auto& [k, v] : env) {
    if (k == name) return v;
  }
  return "<unset>";
}

TEST(GpuRecordEnv, FindsThePluginInTheBuildTree) {
  GpuRecordOptions o;
  o.nccl = true;
  o.nccl_events = "coll,proxyop";
  std::vector<std::pair<std::string, std::string>> env;
  std::string error;
  ASSERT_TRUE(GpuRecordEnv(o, TRACEDB_BUILD_DIR, &env, &error)) << error;
  const std::string plugin = Value(env, "NCCL_PROFILER_PLUGIN");
  EXPECT_EQ(std::filesystem::path(plugin).filename(), "libnccl-profiler-tracedb.so");
  EXPECT_TRUE(std::filesystem::exists(plugin));
  EXPECT_EQ(Value(env, "TRACEDB_NCCL_EVENTS"), "coll,proxyop");
  EXPECT_EQ(Value(env, "CUDA_INJECTION64_PATH"), "<unset>");
}

#ifdef TRACEDB_HAVE_CUDA_TOOLKIT
TEST(GpuRecordEnv, CudaAndNvtx) {
  GpuRecordOptions o;
  o.cuda = true;
  o.nvtx = true;
  std::vector<std::pair<std::string, std::string>> env;
  std::string error;
  ASSERT_TRUE(GpuRecordEnv(o, TRACEDB_BUILD_DIR, &env, &error)) << error;
  EXPECT_EQ(std::filesystem::path(Value(env, "CUDA_INJECTION64_PATH")).filename(),
            "libtracedb_cuda.so");
  EXPECT_EQ(Value(env, "TRACEDB_CUDA"), "1");
  EXPECT_EQ(std::filesystem::path(Value(env, "NVTX_INJECTION64_PATH")).filename(),
            "libtracedb_nvtx.so");
  EXPECT_EQ(Value(env, "NCCL_PROFILER_PLUGIN"), "<unset>");
}
#endif

TEST(GpuRecordEnv, VariableOverridesAndMissingLibrary) {
  GpuRecordOptions o;
  o.nccl = true;
  std::vector<std::pair<std::string, std::string>> env;
  std::string error;
  EXPECT_FALSE(GpuRecordEnv(o, "/nonexistent/bin", &env, &error));
  EXPECT_NE(error.find("libnccl-profiler-tracedb.so"), std::string::npos) << error;
  EXPECT_NE(error.find("TRACEDB_NCCL_PLUGIN"), std::string::npos) << error;
  setenv("TRACEDB_NCCL_PLUGIN", "/opt/x/libnccl-profiler-tracedb.so", 1);
  env.clear();
  EXPECT_TRUE(GpuRecordEnv(o, "/nonexistent/bin", &env, &error));
  unsetenv("TRACEDB_NCCL_PLUGIN");
  EXPECT_EQ(Value(env, "NCCL_PROFILER_PLUGIN"), "/opt/x/libnccl-profiler-tracedb.so");
  o.nccl = false;
  o.nvtx = true;
  env.clear();
  EXPECT_FALSE(GpuRecordEnv(o, "/nonexistent/bin", &env, &error));
  EXPECT_NE(error.find("TRACEDB_NVTX_LIB"), std::string::npos) << error;
}

}  // namespace
}  // namespace tracedb::gpu
