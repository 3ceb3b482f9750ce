// CUPTI activity translation on records built here (no GPU): every kind tracedb records, the clock
// offset, kinds it skips and records CUPTI could not complete; kernel names; then a recorded and
// compacted timeline of translated records checked in SQL: tracks, names, correlation flows, the
// gpu_kernels summary and the per-step GPU time with an NCCL kernel overlapping compute by a known
// amount. Also the GPU clock map (min-delay offset) used by the NCCL plugin.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "query/open/query_db.h"
#include "query/views/gpu_views.h"
#include "recorder/cuda/cupti_translate.h"
#include "recorder/cuda/gpu_clock.h"
#include "tests/db_invariants.h"
#include "tests/test_util.h"
#include "tracedb/recorder.h"

namespace tracedb::testing {
namespace {

using cuda::GpuKind;
using cuda::GpuRecord;
using cuda::Translate;

const char kMangled[] = "_Z6vecAddPfS_S_i";
const char kNcclKernel[] =
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";

CUpti_ActivityKernel10 Kernel(uint64_t start, uint64_t end, uint32_t stream, uint32_t corr,
                              const char* name) {
  CUpti_ActivityKernel10 k;
  memset(&k, 0, sizeof(k));
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = start;
  k.end = end;
  k.deviceId = 0;
  k.streamId = stream;
  k.correlationId = corr;
  k.name = name;
  return k;
}

CUpti_ActivityAPI Api(CUpti_ActivityKind kind, uint64_t start, uint64_t end, uint32_t tid,
                      uint32_t corr, uint32_t cbid) {
  CUpti_ActivityAPI a;
  memset(&a, 0, sizeof(a));
  a.kind = kind;
  a.start = start;
  a.end = end;
  a.threadId = tid;
  a.correlationId = corr;
  a.cbid = cbid;
  return a;
}

TEST(CuptiTranslate, Kernel) {
  CUpti_ActivityKernel10 k = Kernel(1000, 5000, 7, 42, kMangled);
  k.deviceId = 3;
  k.contextId = 1;
  GpuRecord r;
  ASSERT_TRUE(Translate(reinterpret_cast<CUpti_Activity*>(&k), 100, &r));
  EXPECT_EQ(r.kind, GpuKind::kKernel);
  EXPECT_EQ(r.start, 1100);
  EXPECT_EQ(r.end, 5100);
  EXPECT_EQ(r.device, 3u);
  EXPECT_EQ(r.context, 1u);
  EXPECT_EQ(r.stream, 7u);
  EXPECT_EQ(r.correlation, 42u);
  EXPECT_STREQ(r.name, kMangled);
  k.kind = CUPTI_ACTIVITY_KIND_KERNEL;  // the serialized variant has the same layout
  ASSERT_TRUE(Translate(reinterpret_cast<CUpti_Activity*>(&k), 0, &r));
  EXPECT_EQ(r.start, 1000);
}

TEST(CuptiTranslate, MemcpyMemsetSync) {
  CUpti_ActivityMemcpy6 m;
  memset(&m, 0, sizeof(m));
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  m.bytes = 1 << 20;
  m.start = 10;
  m.end = 30;
  m.deviceId = 1;
  m.streamId = 9;
  m.correlationId = 5;
  GpuRecord r;
  ASSERT_TRUE(Translate(reinterpret_cast<CUpti_Activity*>(&m), -5, &r));
  EXPECT_EQ(r.kind, GpuKind::kMemcpy);
  EXPECT_EQ(r.bytes, 1u << 20);
  EXPECT_EQ(r.start, 5);
  EXPECT_EQ(r.end, 25);
  EXPECT_EQ(r.subkind, static_cast<uint32_t>(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH));
  EXPECT_STREQ(cuda::MemcpyName(r.subkind), "Memcpy DtoH");
  EXPECT_EQ(r.stream, 9u);

  CUpti_ActivityMemset4 s;
  memset(&s, 0, sizeof(s));
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.bytes = 64;
  s.start = 100;
  s.end = 101;
  s.correlationId = 6;
  ASSERT_TRUE(Translate(reinterpret_cast<CUpti_Activity*>(&s), 0, &r));
  EXPECT_EQ(r.kind, GpuKind::kMemset);
  EXPECT_EQ(r.bytes, 64u);
  EXPECT_EQ(r.correlation, 6u);

  CUpti_ActivitySynchronization2 y;
  memset(&y, 0, sizeof(y));
  y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  y.start = 200;
  y.end = 900;
  y.streamId = 9;
  y.correlationId = 7;
  ASSERT_TRUE(Translate(reinterpret_cast<CUpti_Activity*>(&y), 0, &r));
  EXPECT_EQ(r.kind, GpuKind::kSync);
  EXPECT_STREQ(cuda::SyncName(r.subkind), "cudaStreamSynchronize");
  EXPECT_EQ(r.end - r.start, 700);
}

TEST(CuptiTranslate, ApiCalls) {
  CUpti_ActivityAPI a = Api(CUPTI_ACTIVITY_KIND_RUNTIME, 50, 80, 4242, 42, 211);
  GpuRecord r;
  ASSERT_TRUE(Translate(reinterpret_cast<CUpti_Activity*>(&a), 0, &r));
  EXPECT_EQ(r.kind, GpuKind::kRuntime);
  EXPECT_EQ(r.thread, 4242u);
  EXPECT_EQ(r.cbid, 211u);
  EXPECT_EQ(r.correlation, 42u);
  a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  ASSERT_TRUE(Translate(reinterpret_cast<CUpti_Activity*>(&a), 0, &r));
  EXPECT_EQ(r.kind, GpuKind::kDriver);
}

TEST(CuptiTranslate, SkipsOtherKindsAndUnfinishedRecords) {
  CUpti_ActivityKernel10 k = Kernel(5000, 1000, 7, 1, kMangled);  // end before start
  GpuRecord r;
  EXPECT_FALSE(Translate(reinterpret_cast<CUpti_Activity*>(&k), 0, &r));
  k = Kernel(0, 0, 7, 1, kMangled);  // CUPTI could not time it
  EXPECT_FALSE(Translate(reinterpret_cast<CUpti_Activity*>(&k), 0, &r));
  k = Kernel(1, 2, 7, 1, kMangled);
  k.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  EXPECT_FALSE(Translate(reinterpret_cast<CUpti_Activity*>(&k), 0, &r));
  EXPECT_FALSE(Translate(nullptr, 0, &r));
}

TEST(CuptiTranslate, KernelNames) {
  EXPECT_EQ(cuda::KernelName(kMangled), "vecAdd(float*, float*, float*, int)");
  EXPECT_EQ(cuda::KernelName("plain_c_kernel"), "plain_c_kernel");
  EXPECT_EQ(cuda::KernelName("_Z!not-mangled"), "_Z!not-mangled");
  EXPECT_EQ(cuda::KernelName(nullptr), "<unnamed kernel>");
  EXPECT_EQ(cuda::CorrelationFlow(7), (uint64_t{2} << 40) | 7);
}

TEST(GpuClockMap, KeepsTheSmallestObservedDelay) {
  gpu::GpuClockMap m;
  EXPECT_FALSE(m.calibrated());
  EXPECT_EQ(m.Map(123, -1), -1);
  // The GPU clock is 1e9 ns ahead; observations arrive 500, 80 and 3000 ns late.
  const int64_t ahead = 1000000000;
  m.Observe(10000 + 500, 10000 + ahead);
  m.Observe(20000 + 80, 20000 + ahead);
  m.Observe(30000 + 3000, 30000 + ahead);
  EXPECT_TRUE(m.calibrated());
  EXPECT_EQ(m.offset(), -ahead + 80);
  EXPECT_EQ(m.Map(50000 + ahead, -1), 50000 + 80);
}

std::string ApiNameForTest(GpuKind kind, uint32_t cbid) {
  return (kind == GpuKind::kRuntime ? "cudaRuntime#" : "cuDriver#") + std::to_string(cbid);
}
const char* ApiName(GpuKind kind, uint32_t cbid) {
  static thread_local std::string s;
  s = ApiNameForTest(kind, cbid);
  return s.c_str();
}

// A step of a training loop as CUPTI would report it: per step a launch (runtime + driver API),
// a compute kernel on stream 7, an NCCL kernel on stream 8 that starts `kOverlap` ns before the
// compute kernel ends, a DtoH copy, a stream synchronization. Recorded in a child process, then
// compacted; the SQL results are compared with the numbers this test put in.
TEST(CuptiTimeline, RecordedCompactedAndSummarised) {
  constexpr int kSteps = 4;
  constexpr int64_t kCompute = 40000, kNccl = 25000, kOverlap = 10000, kCopy = 3000;
  TempDir tmp;
  const std::string trace = tmp.Sub("trace");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (tracedb_start(trace.c_str()) != TRACEDB_OK) _exit(3);
    cuda::GpuEmitter emitter(ApiName);
    uint32_t corr = 1;
    for (int step = 0; step < kSteps; ++step) {
      tracedb_step(step);
      const int64_t t = tracedb_now() + 1000;  // this step's GPU work, after its marker
      // CUPTI timestamps already on the recorder clock (the timestamp callback): offset 0.
      GpuRecord r;
      auto emit = [&](auto rec) {
        if (!Translate(reinterpret_cast<CUpti_Activity*>(&rec), 0, &r)) _exit(4);
        emitter.Emit(r);
      };
      emit(Api(CUPTI_ACTIVITY_KIND_RUNTIME, t, t + 5000, 77, corr, 211));
      emit(Api(CUPTI_ACTIVITY_KIND_DRIVER, t + 1000, t + 4000, 77, corr, 307));
      emit(Kernel(t + 6000, t + 6000 + kCompute, 7, corr, kMangled));
      const int64_t nccl_start = t + 6000 + kCompute - kOverlap;
      emit(Kernel(nccl_start, nccl_start + kNccl, 8, corr + 1, kNcclKernel));
      CUpti_ActivityMemcpy6 m;
      memset(&m, 0, sizeof(m));
      m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
      m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
      m.bytes = 4096;
      m.streamId = 7;
      m.correlationId = corr + 2;
      m.start = static_cast<uint64_t>(nccl_start + kNccl + 1000);
      m.end = m.start + kCopy;
      emit(m);
      CUpti_ActivitySynchronization2 y;
      memset(&y, 0, sizeof(y));
      y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
      y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
      y.start = static_cast<uint64_t>(t + 5500);
      y.end = m.end + 500;
      y.correlationId = corr + 3;
      emit(y);
      corr += 4;
      // The next step starts after this one's records, as in a real run.
      while (tracedb_now() < static_cast<int64_t>(y.end) + 1000) usleep(20);
    }
    _exit(tracedb_stop() == TRACEDB_OK && emitter.emitted() == 6u * kSteps ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);

  int rc = 0;
  const std::string dbpath = tmp.Sub("job.tdb");
  const std::string out = RunCommand(
      TracedbBin() + " compact " + ShellQuote(trace) + " -o " + ShellQuote(dbpath) + " -q 2>&1",
      &rc);
  ASSERT_EQ(rc, 0) << out;
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
  const std::string demangled = "'vecAdd(float*, float*, float*, int)'";
  EXPECT_EQ(Int("SELECT count(*) FROM events WHERE cat = 'cuda' AND name = " + demangled +
                " AND lane = 'cuda gpu0 stream 7' AND tag = 1 AND abs(dur - " +
                std::to_string(kCompute) + ") <= 2"),
            kSteps);
  // Each kernel is linked to the runtime call that launched it.
  EXPECT_EQ(
      Int("SELECT count(*) FROM events k JOIN events a ON a.flow = k.flow AND a.rank = k.rank "
          "WHERE k.name = " +
          demangled +
          " AND a.name = 'cudaRuntime#211' AND "
          "a.lane = 'cuda api 77' AND a.ts < k.ts"),
      kSteps);
  EXPECT_EQ(
      Int("SELECT count(*) FROM events WHERE name = 'cuDriver#307' AND lane = 'cuda driver 77'"),
      kSteps);
  EXPECT_EQ(
      Int("SELECT count(*) FROM events WHERE name = 'Memcpy DtoH' AND bytes = 4096 AND tag = 2"),
      kSteps);
  EXPECT_EQ(Int("SELECT count(*) FROM events WHERE name = 'cudaStreamSynchronize' AND "
                "lane = 'cuda sync' AND tag = 4"),
            kSteps);
  // gpu_kernels: one row per kernel name.
  EXPECT_EQ(Int("SELECT count(*) FROM gpu_kernels"), 2);
  EXPECT_EQ(Int("SELECT instances FROM gpu_kernels WHERE name = " + demangled), kSteps);
  EXPECT_NEAR(Int("SELECT total_ns FROM gpu_kernels WHERE name = " + demangled), kSteps * kCompute,
              8);
  // Per step: compute, NCCL and their overlap, exactly as laid out.
  EXPECT_EQ(Int("SELECT count(*) FROM gpu_step_time"), kSteps);
  for (int step = 0; step < kSteps; ++step) {
    const std::string s = std::to_string(step);
    EXPECT_NEAR(Int("SELECT kernel_ns FROM gpu_step_time WHERE step = " + s), kCompute, 2) << s;
    EXPECT_NEAR(Int("SELECT nccl_ns FROM gpu_step_time WHERE step = " + s), kNccl, 2) << s;
    EXPECT_NEAR(Int("SELECT overlap_ns FROM gpu_step_time WHERE step = " + s), kOverlap, 2) << s;
  }
  EXPECT_EQ(Int("SELECT coalesce(sum(value), 0) FROM stats WHERE name IN "
                "('improper_nesting', 'unmatched_end', 'negative_duration', 'dropped')"),
            0);
}

}  // namespace
}  // namespace tracedb::testing
