// libtracedb_cuda.so loaded into a process that has no GPU (or one): the process is never harmed.
// Without a usable driver CUPTI refuses activity tracing, and the library says so in one line
// naming CUPTI's error and stays out of the way; a bad TRACEDB_CUDA_BUFFER_MB is named. Where a GPU
// exists, gpu_program_test checks what it records.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

std::string RunPreloaded(const std::string& env, int* rc) {
  TempDir tmp;
  return RunCommand("env TRACEDB_DIR=" + ShellQuote(tmp.Sub("trace")) + " TRACEDB_CUDA=1 " + env +
                        " LD_PRELOAD=" + ShellQuote(CUDA_LIB_PATH) + " /bin/true 2>&1",
                    rc);
}

TEST(CudaCapture, LoadsIntoAnyProcessWithoutHarm) {
  int rc = -1;
  const std::string out = RunPreloaded("", &rc);
  EXPECT_EQ(rc, 0) << out;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    // No GPU: one clear line; with a GPU: nothing at all.
    EXPECT_EQ(line.rfind("tracedb cuda: ", 0), 0u) << line;
    EXPECT_NE(line.find("CUDA activity is not recorded"), std::string::npos) << line;
  }
}

TEST(CudaCapture, BadBufferSizeIsNamed) {
  int rc = -1;
  const std::string out = RunPreloaded("TRACEDB_CUDA_BUFFER_MB=lots", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("TRACEDB_CUDA_BUFFER_MB='lots' is not a size in MB"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace tracedb::testing
