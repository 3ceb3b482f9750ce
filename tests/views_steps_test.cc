// step_times (computed by the table-valued function of query/views/views_steps.h), step_summary
// through it, and the GPU views that read CUPTI- and NCCL-shaped events (gpu_step_time,
// gpu_kernels) on small hand-built traces whose every expected value is worked out by hand
// below; each is also compared row for row (types included) with its plain-SQL definition.
// tests/events_differential_test.cc compares step_times with that SQL on random traces.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/db/trace_builder.h"
#include "engine/db/trace_writer.h"
#include "query/open/query_db.h"
#include "tests/hand_trace.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

using engine::EventArgs;

// Rows of `sql` as text, one string per row ("NULL" for NULL), fields joined by '|'.
uint32_t Track(engine::TraceWriter* tw, int32_t rank, const std::string& kind,
               const std::string& name, int64_t tid) {
  engine::TrackSpec s;
  s.rank = rank;
  s.kind = kind;
  s.name = name;
  s.tid = tid;
  s.local_id = kind == "thread" ? tid : -1;
  return tw->Track(s);
}

void SetRank(engine::TraceWriter* tw, int32_t rank, int32_t world) {
  engine::RankRecord rec;
  rec.rank = rank;
  rec.world_size = world;
  rec.source = "steps-test";
  ASSERT_TRUE(tw->SetRank(rec).ok());
}

// The plain-SQL step_times (ViewsReferenceSql()): what the table-valued function replaces.
constexpr const char* kStepTimesSql =
    "SELECT rank, step, ts AS start_ts, "
    "coalesce(lead(ts) OVER (PARTITION BY rank ORDER BY ts), "
    "(SELECT max(max_end) FROM main.blocks b WHERE b.rank = s.rank)) - ts AS dur "
    "FROM main.steps s";

TEST(StepViews, HandBuiltStepsGiveHandDerivedRows) {
  TempDir tmp;
  const std::string path = tmp.Sub("steps.tdb");
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().message();
    engine::TraceWriter* tw = w->get();
    engine::TraceBuilder b(tw);
    ASSERT_TRUE(tw->BeginBatch().ok());
    for (int r = 0; r < 4; ++r) SetRank(tw, r, 4);
    const uint32_t fwd = tw->Intern("forward"), compute = tw->Intern("compute");
    // Rank 0: events end at 1000 (the last one starts earlier but lasts longest); steps 1, 2, 3
    // at 100, 300, 700.
    const uint32_t t0 = Track(tw, 0, "thread", "main", 100);
    ASSERT_TRUE(b.Complete(t0, 0, 1000, fwd, compute, nullptr).ok());
    ASSERT_TRUE(b.Complete(t0, 500, 20, fwd, compute, nullptr).ok());
    tw->AddStep(0, 700, 3);
    tw->AddStep(0, 100, 1);
    tw->AddStep(0, 300, 2);
    // Rank 1: events end at 900; steps at 50, 260, and one at 950, after its last event.
    const uint32_t t1 = Track(tw, 1, "thread", "main", 101);
    ASSERT_TRUE(b.Complete(t1, 40, 860, fwd, compute, nullptr).ok());
    tw->AddStep(1, 50, 1);
    tw->AddStep(1, 260, 2);
    tw->AddStep(1, 950, 3);
    // Rank 2: steps but no event (no block): its last step has no end.
    tw->AddStep(2, 10, 1);
    tw->AddStep(2, 30, 2);
    // Rank 3: a step difference beyond int64: SQL's integer subtraction gives a REAL.
    const uint32_t t3 = Track(tw, 3, "thread", "main", 103);
    ASSERT_TRUE(b.Complete(t3, 0, 10, fwd, compute, nullptr).ok());
    tw->AddStep(3, INT64_MIN + 10, 1);
    tw->AddStep(3, INT64_MAX - 10, 2);
    ASSERT_TRUE(tw->CommitBatch().ok());
  }
  auto db = query::OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  engine::Db* q = db->get();
  const std::string lo = std::to_string(INT64_MIN + 10), hi = std::to_string(INT64_MAX - 10);
  // rank, step, start_ts, dur, typeof(dur)
  const std::vector<std::string> want = {
      "0|1|100|200|integer",
      "0|2|300|400|integer",
      "0|3|700|300|integer",
      "1|1|50|210|integer",
      "1|2|260|690|integer",
      "1|3|950|-50|integer",
      "2|1|10|20|integer",
      "2|2|30|NULL|null",
      // (INT64_MAX - 10) - (INT64_MIN + 10) as doubles; then 0 + 10 - (INT64_MAX - 10).
      "3|1|" + lo + "|1.84467440737096e+19|real",
      "3|2|" + hi + "|-9223372036854775787|integer",
  };
  EXPECT_EQ(SqlRows(q, "SELECT rank, step, start_ts, dur, typeof(dur) FROM step_times"), want);
  EXPECT_EQ(SqlRows(q, "SELECT rank, step, start_ts, dur, typeof(dur) FROM (" +
                           std::string(kStepTimesSql) + ") ORDER BY rank, start_ts"),
            want);
  // The declared types the view's columns carry (INTEGER affinity for the steps columns).
  EXPECT_EQ(SqlRows(q,
                    "SELECT typeof(rank), typeof(step), typeof(start_ts) FROM step_times "
                    "WHERE start_ts = 100"),
            (std::vector<std::string>{"integer|integer|integer"}));
  // Filters, ORDER BY and joins over it: the same as over the SQL.
  for (const char* tail : {" WHERE rank = 1 ORDER BY start_ts DESC", " WHERE dur > 250",
                           " ORDER BY rank DESC, start_ts", " ORDER BY rank", ""}) {
    EXPECT_EQ(SqlRows(q, std::string("SELECT * FROM step_times") + tail),
              SqlRows(q, "SELECT * FROM (" + std::string(kStepTimesSql) + ")" + tail))
        << tail;
  }
  EXPECT_EQ(SqlRows(q,
                    "SELECT a.rank, b.rank, a.step FROM step_times a JOIN step_times b "
                    "ON a.step = b.step AND a.rank < b.rank ORDER BY 1, 2, 3"),
            (std::vector<std::string>{"0|1|1", "0|1|2", "0|1|3", "0|2|1", "0|2|2", "0|3|1", "0|3|2",
                                      "1|2|1", "1|2|2", "1|3|1", "1|3|2", "2|3|1", "2|3|2"}));
  // step_summary over it. Step 1: 200, 210, 20 and the REAL; step 3: 300 and -50.
  EXPECT_EQ(SqlRows(q,
                    "SELECT step, ranks, min_ns, max_ns, slowest_rank FROM step_summary "
                    "WHERE step = 3"),
            (std::vector<std::string>{"3|2|-50|300|0"}));
  EXPECT_EQ(SqlRows(q,
                    "SELECT step, ranks, min_ns, max_ns, slowest_rank FROM step_summary "
                    "WHERE step = 1"),
            (std::vector<std::string>{"1|4|20|1.84467440737096e+19|3"}));
}

TEST(StepViews, EmptyDatabaseHasNoStepRows) {
  TempDir tmp;
  const std::string path = tmp.Sub("empty.tdb");
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().message();
    ASSERT_TRUE(w->get()->BeginBatch().ok());
    ASSERT_TRUE(w->get()->CommitBatch().ok());
  }
  auto db = query::OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  EXPECT_EQ(SqlRows(db->get(), "SELECT count(*) FROM step_times"), (std::vector<std::string>{"0"}));
  EXPECT_EQ(SqlRows(db->get(), "SELECT count(*) FROM step_summary"),
            (std::vector<std::string>{"0"}));
}

// The GPU views' filter as it was before gpu_step_time was split into two pushed-down selects:
// the reference its rows must equal.
constexpr const char* kGpuStepTimeOrSql =
    "SELECT rank, step, coalesce(covered_ns(ts, dur) FILTER (WHERE NOT is_nccl), 0), "
    "coalesce(covered_ns(ts, dur) FILTER (WHERE is_nccl), 0), "
    "coalesce(overlap_ns(ts, dur, is_nccl), 0) "
    "FROM (SELECT rank, step, ts, dur, (cat = 'nccl' OR name LIKE 'nccl%') AS is_nccl "
    "FROM events WHERE kind = 'span' AND ((cat = 'cuda' AND (tag & 255) = 1) "
    "OR (cat = 'nccl' AND lane LIKE 'nccl % kernel'))) GROUP BY rank, step";

EventArgs Tag(int32_t tag) {
  EventArgs a;
  a.mask = EventArgs::kTag;
  a.tag = tag;
  return a;
}

TEST(GpuViews, CuptiAndNcclShapedEventsGiveHandDerivedRows) {
  TempDir tmp;
  const std::string path = tmp.Sub("gpu.tdb");
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().message();
    engine::TraceWriter* tw = w->get();
    engine::TraceBuilder b(tw);
    ASSERT_TRUE(tw->BeginBatch().ok());
    SetRank(tw, 0, 2);
    SetRank(tw, 1, 2);
    const uint32_t cuda = tw->Intern("cuda"), nccl = tw->Intern("nccl");
    const uint32_t compute = tw->Intern("compute");
    const uint32_t gemm = tw->Intern("gemm"), memcpy = tw->Intern("memcpy");
    const uint32_t nccl_kernel = tw->Intern("ncclDevKernel_AllReduce");
    const uint32_t all_reduce = tw->Intern("AllReduce"), fwd = tw->Intern("forward");
    // Rank 0: steps 1 at 50 and 2 at 1000.
    tw->AddStep(0, 50, 1);
    tw->AddStep(0, 1000, 2);
    const uint32_t stream = Track(tw, 0, "gpu", "cuda stream 7", -1);
    const uint32_t kernel_lane = Track(tw, 0, "lane", "nccl 0 kernel", -1);
    const uint32_t proxy_lane = Track(tw, 0, "lane", "nccl 0 proxy", -1);
    const uint32_t host = Track(tw, 0, "thread", "main", 100);
    EventArgs k = Tag(1), k2 = Tag(0x0101), copy = Tag(2);
    // Before the first step (step NULL): a kernel [10, 30).
    ASSERT_TRUE(b.Complete(stream, 10, 20, gemm, cuda, &k).ok());
    // Step 1: kernels [100, 300) and [250, 400) (tag & 255 = 1): 300 ns of compute; a copy
    // [500, 900) that is no kernel; an NCCL kernel seen by CUPTI [350, 450) and a plugin kernel
    // channel [600, 700): 200 ns of NCCL, 50 of them ([350, 400)) under compute. The proxy lane
    // [100, 900) and an NCCL instant are no kernel time; neither is a host span.
    ASSERT_TRUE(b.Complete(stream, 100, 200, gemm, cuda, &k).ok());
    ASSERT_TRUE(b.Complete(stream, 250, 150, gemm, cuda, &k2).ok());
    ASSERT_TRUE(b.Complete(stream, 350, 100, nccl_kernel, cuda, &k).ok());
    ASSERT_TRUE(b.Complete(stream, 500, 400, memcpy, cuda, &copy).ok());
    ASSERT_TRUE(b.Complete(kernel_lane, 600, 100, all_reduce, nccl, nullptr).ok());
    ASSERT_TRUE(b.Complete(proxy_lane, 100, 800, all_reduce, nccl, nullptr).ok());
    ASSERT_TRUE(b.Instant(host, 90, all_reduce, nccl, nullptr).ok());
    ASSERT_TRUE(b.Complete(host, 60, 900, fwd, compute, nullptr).ok());
    // Step 2: a plugin kernel channel [1100, 1300) alone.
    ASSERT_TRUE(b.Complete(kernel_lane, 1100, 200, all_reduce, nccl, nullptr).ok());
    // Rank 1, step 1 at 0: kernels [0, 100) and [50, 150): 150 ns.
    tw->AddStep(1, 0, 1);
    const uint32_t stream1 = Track(tw, 1, "gpu", "cuda stream 7", -1);
    ASSERT_TRUE(b.Complete(stream1, 0, 100, gemm, cuda, &k).ok());
    ASSERT_TRUE(b.Complete(stream1, 50, 100, gemm, cuda, &k).ok());
    ASSERT_TRUE(tw->CommitBatch().ok());
  }
  auto db = query::OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  engine::Db* q = db->get();
  // rank, step, kernel_ns, nccl_ns, overlap_ns
  const std::vector<std::string> want = {"0|NULL|20|0|0", "0|1|300|200|50", "0|2|0|200|0",
                                         "1|1|150|0|0"};
  EXPECT_EQ(SqlRows(q, "SELECT * FROM gpu_step_time ORDER BY rank, step"), want);
  EXPECT_EQ(SqlRows(q, std::string(kGpuStepTimeOrSql) + " ORDER BY rank, step"), want);
  EXPECT_EQ(SqlRows(q,
                    "SELECT typeof(kernel_ns), typeof(nccl_ns), typeof(overlap_ns) "
                    "FROM gpu_step_time WHERE step = 2"),
            (std::vector<std::string>{"integer|integer|integer"}));
  // Every select (CUPTI kernels, NCCL, Kineto's `kernel` events) reaches the events table with
  // its category pushed down (idxStr "=H": cat, column 7), so blocks without GPU events are never
  // decoded.
  std::vector<std::string> plan = SqlRows(q, "EXPLAIN QUERY PLAN SELECT * FROM gpu_step_time");
  int pushed = 0;
  for (const std::string& p : plan) {
    if (p.find("VIRTUAL TABLE") != std::string::npos) {
      EXPECT_NE(p.find("=H"), std::string::npos) << p;
      ++pushed;
    }
  }
  EXPECT_EQ(pushed, 3);
  // gpu_kernels: CUPTI kernels (tag & 255 = 1) by name. gemm: 20 + 200 + 150 + 100 + 100 on
  // two ranks; the NCCL kernel: 100; 570 + 100 ns in all.
  EXPECT_EQ(SqlRows(q,
                    "SELECT name, instances, ranks, total_ns, min_ns, max_ns, time_pct "
                    "FROM gpu_kernels ORDER BY name"),
            (std::vector<std::string>{"gemm|5|2|570|20|200|85.1",
                                      "ncclDevKernel_AllReduce|1|1|100|100|100|14.9"}));
}

}  // namespace
}  // namespace tracedb::testing
