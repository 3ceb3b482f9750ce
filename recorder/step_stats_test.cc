// StepStats (recorder/step_stats.h) on hand-made event streams whose answers are worked out by
// hand: outermost spans only, spans split at step boundaries, two threads, blocking and
// non-blocking calls, bytes, top names, the slow-step rule (factor, history, floor).
#include "recorder/step_stats.h"

#include <gtest/gtest.h>

#include "tracedb/recorder.h"

namespace tracedb::recorder {
namespace {

using engine::EventKind;
constexpr int64_t kMs = 1000000;

struct Feed {
  StepStats s;
  bool slow = false;
  void Ev(uint32_t thread, EventKind k, uint8_t cat, int64_t ts, uint32_t name, int64_t ival = 0,
          const engine::EventArgs* a = nullptr) {
    slow = s.OnEvent(s.ThreadState(thread), k, cat, ts, name, 0, ival, a) || slow;
  }
  void Step(int64_t ts, int64_t n) { Ev(1, EventKind::kStep, TRACEDB_CAT_STEP, ts, 9, n); }
};

TEST(StepStats, AttributesTimeBytesAndNamesAsDefined) {
  Feed f;
  f.s.ClassifyName(4, "MPI_Isend");
  f.s.ClassifyName(5, "MPI_Init");
  engine::EventArgs a;
  a.mask = engine::EventArgs::kBytes;
  a.bytes = 100;
  // Names: 1 fwd (compute), 2 inner (compute, nested), 3 MPI_Allreduce, 4 MPI_Isend,
  // 5 MPI_Init, 6 nccl, 7 loader (user, thread 2).
  f.Ev(1, EventKind::kBegin, TRACEDB_CAT_USER, 0, 7);  // before the first step: not counted
  f.Step(10 * kMs, 0);
  f.Ev(1, EventKind::kBegin, TRACEDB_CAT_COMPUTE, 11 * kMs, 1);
  f.Ev(1, EventKind::kBegin, TRACEDB_CAT_COMPUTE, 12 * kMs, 2);  // nested: not added again
  f.Ev(1, EventKind::kEnd, TRACEDB_CAT_COMPUTE, 14 * kMs, 2);
  f.Ev(1, EventKind::kEnd, TRACEDB_CAT_COMPUTE, 16 * kMs, 1);  // fwd 5 ms, inner 2 ms
  f.Ev(1, EventKind::kBegin, TRACEDB_CAT_MPI, 16 * kMs, 3, 0, &a);
  f.Ev(1, EventKind::kEnd, TRACEDB_CAT_MPI, 19 * kMs, 3);  // 3 ms blocking
  f.Ev(1, EventKind::kBegin, TRACEDB_CAT_MPI, 19 * kMs, 4, 0, &a);
  f.Ev(1, EventKind::kEnd, TRACEDB_CAT_MPI, 20 * kMs, 4);                 // 1 ms non-blocking
  f.Ev(1, EventKind::kComplete, TRACEDB_CAT_NCCL, 20 * kMs, 6, kMs / 2);  // 0.5 ms, no wait
  // Thread 2: a compute span from 18 ms to 26 ms crosses into step 1 (at 22 ms): 4 + 4 ms.
  f.Ev(2, EventKind::kBegin, TRACEDB_CAT_COMPUTE, 18 * kMs, 1);
  f.Step(22 * kMs, 1);
  f.Ev(1, EventKind::kBegin, TRACEDB_CAT_MPI, 23 * kMs, 5, 0, &a);
  f.Ev(1, EventKind::kEnd, TRACEDB_CAT_MPI, 24 * kMs, 5);  // MPI_Init: blocking, 1 ms
  f.Ev(2, EventKind::kEnd, TRACEDB_CAT_COMPUTE, 26 * kMs, 1);
  f.Step(30 * kMs, 2);
  std::vector<engine::StepStat> out;
  f.s.TakeFinished(25 * kMs, false, &out);  // step 1 ends at 30 ms: not final yet
  ASSERT_EQ(out.size(), 1u);
  f.s.TakeFinished(30 * kMs, false, &out);
  ASSERT_EQ(out.size(), 2u);
  f.s.TakeFinished(0, true, &out);  // step 2: open, no event after its marker
  ASSERT_EQ(out.size(), 3u);

  const engine::StepStat& s0 = out[0];
  EXPECT_EQ(s0.step, 0);
  EXPECT_EQ(s0.start_ns, 10 * kMs);
  EXPECT_EQ(s0.dur_ns, 12 * kMs);
  EXPECT_EQ(s0.compute_ns, 5 * kMs + 4 * kMs);     // fwd + thread 2's part
  EXPECT_EQ(s0.comm_ns, 3 * kMs + kMs + kMs / 2);  // Allreduce + Isend + nccl
  EXPECT_EQ(s0.wait_ns, 3 * kMs);                  // the Allreduce only
  EXPECT_EQ(s0.bytes, 200u);                       // Allreduce and Isend begins
  EXPECT_EQ(s0.events, 5u + 1);  // thread 1's 4 begins and 1 complete, thread 2's begin
  const std::vector<std::pair<uint32_t, int64_t>> top0 = {
      {1, 9 * kMs}, {3, 3 * kMs}, {2, 2 * kMs}, {4, kMs}, {6, kMs / 2}};
  EXPECT_EQ(s0.top, top0);

  const engine::StepStat& s1 = out[1];
  EXPECT_EQ(s1.step, 1);
  EXPECT_EQ(s1.dur_ns, 8 * kMs);
  EXPECT_EQ(s1.compute_ns, 4 * kMs);
  EXPECT_EQ(s1.comm_ns, kMs);
  EXPECT_EQ(s1.wait_ns, kMs);  // MPI_Init is no non-blocking start
  EXPECT_EQ(s1.bytes, 100u);
  EXPECT_EQ(s1.events, 1u);  // MPI_Init's begin (ends and markers are no rows)
  const std::vector<std::pair<uint32_t, int64_t>> top1 = {{1, 4 * kMs}, {5, kMs}};
  EXPECT_EQ(s1.top, top1);

  EXPECT_EQ(out[2].step, 2);
  EXPECT_EQ(out[2].dur_ns, 0);
  EXPECT_EQ(out[2].events, 0u);
  EXPECT_FALSE(f.slow);  // not configured
}

TEST(StepStats, SlowStepNeedsFactorHistoryAndFloor) {
  Feed f;
  f.s.Configure(3);
  int64_t t = 0;
  int64_t n = 0;
  // Steps of `ms` each; returns whether the marker that ended the last one said slow.
  auto steps = [&](int count, int64_t ms) {
    bool any = false;
    for (int i = 0; i < count; ++i) {
      f.slow = false;
      f.Step(t, n++);
      any = any || f.slow;
      t += ms * kMs;
    }
    f.slow = false;
    return any;
  };
  // The first 5 closed steps build the history: a long one among them is not slow.
  EXPECT_FALSE(steps(1, 10));
  EXPECT_FALSE(steps(1, 500));
  EXPECT_FALSE(steps(4, 10));
  // 4x the median of 10 ms but only 30 ms longer: under the 50 ms floor.
  EXPECT_FALSE(steps(1, 40));
  f.Step(t, n++);  // ends the 40 ms step
  EXPECT_FALSE(f.slow);
  t += 100 * kMs;  // a 100 ms step: 10x and 90 ms longer
  f.Step(t, n++);
  EXPECT_TRUE(f.slow);
  EXPECT_EQ(f.s.slow_step(), n - 2);
  // Long steps become the norm: the median of the last 20 follows them.
  f.slow = false;
  t += 100 * kMs;
  for (int i = 0; i < 25; ++i) {
    f.slow = false;
    f.Step(t, n++);
    t += 100 * kMs;
  }
  EXPECT_FALSE(f.slow);
  // 0: never.
  Feed off;
  off.s.Configure(0);
  for (int i = 0; i < 10; ++i) off.Step(i * kMs, i);
  off.Step(1000 * kMs, 10);
  EXPECT_FALSE(off.slow);
}

TEST(StepStats, AThreadThatExitedLeavesNoOpenSpan) {
  Feed f;
  f.Step(0, 0);
  f.Ev(3, EventKind::kBegin, TRACEDB_CAT_COMPUTE, kMs, 1);  // never ended: the thread exits
  f.s.ForgetThread(3);
  f.Ev(3, EventKind::kBegin, TRACEDB_CAT_COMPUTE, 2 * kMs, 2);  // a new thread, same index
  f.Ev(3, EventKind::kEnd, TRACEDB_CAT_COMPUTE, 3 * kMs, 2);
  f.Ev(3, EventKind::kEnd, TRACEDB_CAT_COMPUTE, 4 * kMs, 2);  // unmatched: ignored
  f.Step(5 * kMs, 1);
  std::vector<engine::StepStat> out;
  f.s.TakeFinished(5 * kMs, false, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].compute_ns, kMs);
  const std::vector<std::pair<uint32_t, int64_t>> top = {{2, kMs}};
  EXPECT_EQ(out[0].top, top);
}

}  // namespace
}  // namespace tracedb::recorder
