// The GPU test: gpu_program (NCCL allreduce + a kernel per GPU and step, over every GPU present)
// recorded with the NCCL profiler plugin, CUPTI and NVTX, all injected through the environment as
// `tracedb record --nccl --cuda --nvtx` does, then compacted and checked against what the program
// says it did: exact kernel and collective counts, kernels linked to their launch, kernels inside
// the CPU step that launched them (the GPU clock mapped onto the recorder's), NCCL's own NVTX
// ranges, nothing dropped. Where no GPU is usable the test is skipped with the reason the CUDA
// runtime gave (docs/gpu-capture.md "The GPU test").
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "query/open/query_db.h"
#include "query/views/gpu_views.h"
#include "tests/db_invariants.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

std::map<std::string, std::string> Facts(const std::string& out) {
  std::map<std::string, std::string> f;
  std::istringstream in(out);
  std::string key, value;
  while (in >> key) {
    std::getline(in, value);
    if (!value.empty() && value[0] == ' ') value.erase(0, 1);
    f[key] = value;
  }
  return f;
}

TEST(GpuProgram, RecordedWithPluginCuptiAndNvtx) {
  int rc = 0;
  const std::string probe = RunCommand(ShellQuote(GPU_PROGRAM_PATH) + " 1 2>&1", &rc);
  if (rc == 77) GTEST_SKIP() << probe;
  ASSERT_EQ(rc, 0) << probe;

  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  const int steps = 5;
  const std::string out =
      RunCommand("env TRACEDB_DIR=" + ShellQuote(trace) +
                     " NCCL_PROFILER_PLUGIN=" + ShellQuote(NCCL_PLUGIN_PATH) +
                     " CUDA_INJECTION64_PATH=" + ShellQuote(CUDA_LIB_PATH) +
                     " TRACEDB_CUDA=1 NVTX_INJECTION64_PATH=" + ShellQuote(NVTX_LIB_PATH) + " " +
                     ShellQuote(GPU_PROGRAM_PATH) + " " + std::to_string(steps) + " 2>&1",
                 &rc);
  ASSERT_EQ(rc, 0) << out;
  auto f = Facts(out);
  ASSERT_EQ(f.count("ok"), 1u) << out;
  const int devices = std::stoi(f["devices"]);
  const int kernels = std::stoi(f["scale_kernels"]);
  const int allreduces = std::stoi(f["allreduce_calls"]);
  EXPECT_EQ(kernels, steps * devices);
  EXPECT_EQ(allreduces, steps * devices);

  const std::string dbpath = tmp.Sub("job.tdb");
  const std::string c = RunCommand(
      TracedbBin() + " compact " + ShellQuote(trace) + " -o " + ShellQuote(dbpath) + " -q 2>&1",
      &rc);
  ASSERT_EQ(rc, 0) << c;
  ExpectDbInvariants(dbpath);  // tests/db_invariants.h
  auto q = query::OpenQueryDb(dbpath);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  auto db = std::move(*q);
  ASSERT_TRUE(query::InstallGpuViews(db.get()).ok());
  auto Int = [&](const std::string& sql) {
    auto v = db->QueryInt(sql, -1);
    EXPECT_TRUE(v.ok()) << v.status().ToString() << " in " << sql;
    return v.ok() ? *v : -999;
  };
  // CUPTI: every kernel, on its stream's lane, linked to the driver call that launched it.
  EXPECT_EQ(Int("SELECT instances FROM gpu_kernels WHERE name = 'scale'"), kernels);
  EXPECT_EQ(
      Int("SELECT count(*) FROM events k JOIN events a ON a.rank = k.rank AND a.flow = k.flow "
          "WHERE k.name = 'scale' AND k.cat = 'cuda' AND a.name = 'cuLaunchKernel' AND "
          "a.lane LIKE 'cuda driver %' AND a.ts <= k.ts"),
      kernels);
  // NVTX: the program's steps, and every kernel inside the step that launched it.
  EXPECT_EQ(Int("SELECT count(*) FROM events WHERE name = 'step' AND cat = 'user' AND "
                "kind = 'span'"),
            steps);
  EXPECT_EQ(Int("SELECT count(*) FROM events k WHERE k.name = 'scale' AND k.cat = 'cuda' AND "
                "NOT EXISTS (SELECT 1 FROM events s WHERE s.name = 'step' AND s.rank = k.rank "
                "AND s.ts <= k.ts AND k.ts + k.dur <= s.ts + s.dur)"),
            0);
  // NCCL's own NVTX ranges (its "NCCL" domain), one per API call.
  EXPECT_EQ(Int("SELECT count(*) FROM events WHERE name LIKE 'NCCL: ncclAllReduce%'"), allreduces);
  // The profiler plugin: one API event per call; with 2+ GPUs every task completes on its kernel.
  EXPECT_EQ(Int("SELECT count(*) FROM events WHERE name = 'ncclAllReduce' AND cat = 'nccl'"),
            allreduces);
  if (devices >= 2) {
    EXPECT_EQ(Int("SELECT count(*) FROM nccl_ops WHERE name = 'AllReduce' AND "
                  "completion = 'kernel' AND bytes = 4194304 AND datatype = 'float32'"),
              allreduces);
    EXPECT_EQ(Int("SELECT count(*) FROM (SELECT comm, seq FROM nccl_ops GROUP BY comm, seq)"),
              steps);
  }
  EXPECT_EQ(Int("SELECT CAST(value AS INTEGER) FROM events WHERE name = 'cuda.dropped_records'"),
            0);
  EXPECT_EQ(Int("SELECT CAST(value AS INTEGER) FROM events WHERE name = 'nccl.dropped_events'"), 0);
}

}  // namespace
}  // namespace tracedb::testing
