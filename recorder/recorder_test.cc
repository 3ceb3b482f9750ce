// Tests of the recorder's C ABI, reading back what it wrote with the engine's segment reader.
#include "tracedb/recorder.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>
#include <vector>

#include "engine/segment/segment_dir.h"
#include "tests/test_util.h"
#include "tracedb/recorder.hpp"

namespace tracedb {
namespace {

using engine::EventKind;
using testing::CollectDir;
using testing::Collected;
using testing::ReadEvent;
using testing::TempDir;

#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif

class RecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"TRACEDB_START_STEP", "TRACEDB_END_STEP", "TRACEDB_RANK",
                          "TRACEDB_WORLD_SIZE", "TRACEDB_FLUSH_MS", "TRACEDB_SEGMENT_MB"}) {
      unsetenv(v);
    }
    tracedb_stop();  // in case TRACEDB_DIR started a session at load
  }
  void TearDown() override { tracedb_stop(); }
};

std::vector<ReadEvent> OfName(const Collected& c, const std::string& name) {
  std::vector<ReadEvent> out;
  for (const auto& e : c.events) {
    if (e.name == name) out.push_back(e);
  }
  return out;
}

TEST_F(RecorderTest, RoundTripsEveryCallAndField) {
  TempDir tmp;
  setenv("TRACEDB_RANK", "2", 1);
  setenv("TRACEDB_WORLD_SIZE", "4", 1);
  ASSERT_EQ(tracedb_start(tmp.path().c_str()), TRACEDB_OK);
  EXPECT_EQ(tracedb_rank(), 2);
  EXPECT_EQ(tracedb_world_size(), 4);
  EXPECT_EQ(tracedb_enabled(), 1);
  const uint32_t fwd = tracedb_intern("forward");
  EXPECT_EQ(tracedb_intern("forward"), fwd);
  const uint32_t comm = tracedb_intern("COMMUNICATE");
  const uint32_t loss = tracedb_intern("loss");
  const uint32_t lane = tracedb_lane("tensor.conv1.weight");
  EXPECT_NE(lane, 0u);
  EXPECT_EQ(tracedb_lane("tensor.conv1.weight"), lane);
  tracedb_thread_name("trainer");

  const int64_t t0 = tracedb_now();
  tracedb_begin(fwd);
  tracedb_end(fwd);
  tracedb_instant(fwd);
  tracedb_counter(loss, 0.25);
  tracedb_complete(comm, t0 - 500, 400);
  tracedb_args a{};
  a.fields = TRACEDB_ARG_BYTES | TRACEDB_ARG_PEER | TRACEDB_ARG_TAG | TRACEDB_ARG_COMM |
             TRACEDB_ARG_SEQ | TRACEDB_ARG_FLOW;
  a.flow = 0xabcdef0123456789ull;
  a.bytes = 1 << 20;
  a.peer = 3;
  a.tag = -1;
  a.comm = 17;
  a.seq = 42;
  tracedb_begin_ex(comm, TRACEDB_CAT_COMM, lane, &a);
  tracedb_end_ex(comm, TRACEDB_CAT_COMM, lane, nullptr);
  tracedb_instant_ex(comm, TRACEDB_CAT_PHASE, 0, &a);
  tracedb_counter_ex(loss, TRACEDB_CAT_COMPUTE, lane, -1.5);
  tracedb_complete_ex(comm, TRACEDB_CAT_MPI, 0, t0, 1000, &a);
  tracedb_step(5);
  tracedb_clock_sync(0, t0, -123, 45);
  const int32_t members[3] = {0, 2, 3};
  tracedb_comm_define(7, 3, 1, members);
  tracedb_comm_define(8, 2, 0, nullptr);
  ASSERT_EQ(tracedb_stop(), TRACEDB_OK);
  EXPECT_EQ(tracedb_enabled(), 0);

  EXPECT_TRUE(std::filesystem::exists(tmp.Sub("rank-2")));
  Collected c = CollectDir(tmp.path());
  ASSERT_EQ(c.events.size(), 11u);
  EXPECT_EQ(c.closed_files, 1u);
  ASSERT_EQ(c.metas.size(), 1u);
  EXPECT_EQ(c.metas[0].rank, 2);
  EXPECT_EQ(c.metas[0].world_size, 4);
  EXPECT_EQ(c.metas[0].pid, static_cast<uint32_t>(getpid()));
  EXPECT_FALSE(c.metas[0].host.empty());
  EXPECT_GT(c.metas[0].anchor_realtime_ns, 1600000000000000000);

  const auto& ev = c.events;
  EXPECT_EQ(ev[0].name, "forward");
  EXPECT_EQ(ev[0].e.kind, EventKind::kBegin);
  EXPECT_GE(ev[0].e.ts, t0);
  EXPECT_EQ(ev[1].e.kind, EventKind::kEnd);
  EXPECT_GE(ev[1].e.ts, ev[0].e.ts);
  EXPECT_EQ(ev[2].e.kind, EventKind::kInstant);
  EXPECT_EQ(ev[3].name, "loss");
  EXPECT_EQ(ev[3].e.kind, EventKind::kCounter);
  EXPECT_EQ(ev[3].e.value, 0.25);
  EXPECT_EQ(ev[4].e.kind, EventKind::kComplete);
  EXPECT_EQ(ev[4].e.ts, t0 - 500);
  EXPECT_EQ(ev[4].e.ival, 400);
  EXPECT_EQ(ev[5].e.kind, EventKind::kBegin);
  EXPECT_EQ(ev[5].e.cat, TRACEDB_CAT_COMM);
  EXPECT_EQ(ev[5].lane, "tensor.conv1.weight");
  ASSERT_TRUE(ev[5].e.has_args);
  EXPECT_EQ(ev[5].e.args.bytes, 1u << 20);
  EXPECT_EQ(ev[5].e.args.peer, 3);
  EXPECT_EQ(ev[5].e.args.tag, -1);
  EXPECT_EQ(ev[5].e.args.comm, 17u);
  EXPECT_EQ(ev[5].e.args.seq, 42u);
  EXPECT_EQ(ev[5].e.args.flow, 0xabcdef0123456789ull);
  EXPECT_EQ(ev[5].e.args.mask, engine::EventArgs::kAllFields);
  EXPECT_EQ(ev[6].e.kind, EventKind::kEnd);
  EXPECT_FALSE(ev[6].e.has_args);
  EXPECT_EQ(ev[7].e.cat, TRACEDB_CAT_PHASE);
  EXPECT_EQ(ev[7].lane, "");
  EXPECT_EQ(ev[8].e.value, -1.5);
  EXPECT_EQ(ev[8].lane, "tensor.conv1.weight");
  EXPECT_EQ(ev[9].e.kind, EventKind::kComplete);
  EXPECT_EQ(ev[9].e.cat, TRACEDB_CAT_MPI);
  EXPECT_EQ(ev[9].e.ival, 1000);
  EXPECT_EQ(ev[9].e.args.seq, 42u);
  EXPECT_EQ(ev[10].e.kind, EventKind::kStep);
  EXPECT_EQ(ev[10].e.ival, 5);
  EXPECT_EQ(ev[10].e.cat, TRACEDB_CAT_STEP);
  EXPECT_EQ(c.thread_names[ev[0].thread], "trainer");
  ASSERT_EQ(c.sync.size(), 1u);
  EXPECT_EQ(c.sync[0].offset_ns, -123);
  EXPECT_EQ(c.sync[0].uncertainty_ns, 45);
  EXPECT_GE(c.anchors.size(), 2u);  // one at open, one at close
  ASSERT_EQ(c.comms.size(), 2u);
  EXPECT_EQ(c.comms[0].comm, 7u);
  EXPECT_EQ(c.comms[0].size, 3);
  EXPECT_EQ(c.comms[0].rank_in_comm, 1);
  EXPECT_EQ(c.comms[0].members, (std::vector<int32_t>{0, 2, 3}));
  EXPECT_TRUE(c.comms[1].members.empty());
}

TEST_F(RecorderTest, CallsBeforeStartAndAfterStopDoNothing) {
  TempDir tmp;
  auto everything = [] {
    const uint32_t n = tracedb_intern("x");
    tracedb_begin(n);
    tracedb_end(n);
    tracedb_instant(n);
    tracedb_counter(n, 1);
    tracedb_complete(n, 0, 1);
    tracedb_begin_ex(n, 99, 1 << 20, nullptr);  // out-of-range category and lane are tolerated
    tracedb_end_ex(n, 0, 0, nullptr);
    tracedb_instant_ex(n, 0, 0, nullptr);
    tracedb_counter_ex(n, 0, 0, 2);
    tracedb_complete_ex(n, 0, 0, 0, -5, nullptr);
    tracedb_step(1);
    tracedb_clock_sync(0, 0, 0, 0);
    tracedb_thread_name("t");
  };
  EXPECT_EQ(tracedb_flush(), TRACEDB_ERR_STATE);
  EXPECT_EQ(tracedb_stop(), TRACEDB_ERR_STATE);
  tracedb_counters before;
  tracedb_get_counters(&before);
  everything();
  EXPECT_EQ(tracedb_intern(nullptr), 0u);
  EXPECT_EQ(tracedb_lane(nullptr), 0u);
  tracedb_get_counters(nullptr);
  EXPECT_EQ(tracedb_start(nullptr), TRACEDB_ERR_ARG);
  EXPECT_EQ(tracedb_start(""), TRACEDB_ERR_ARG);

  ASSERT_EQ(tracedb_start(tmp.path().c_str()), TRACEDB_OK);
  EXPECT_EQ(tracedb_start(tmp.path().c_str()), TRACEDB_ERR_STATE);
  const uint32_t in = tracedb_intern("inside");
  tracedb_instant(in);
  ASSERT_EQ(tracedb_stop(), TRACEDB_OK);
  everything();
  EXPECT_EQ(tracedb_flush(), TRACEDB_ERR_STATE);

  Collected c = CollectDir(tmp.path());
  ASSERT_EQ(c.events.size(), 1u);
  EXPECT_EQ(c.events[0].name, "inside");
  tracedb_counters after;
  tracedb_get_counters(&after);
  EXPECT_EQ(after.written - before.written, 1u);
  EXPECT_EQ(after.dropped, before.dropped);
}

TEST_F(RecorderTest, RestartWritesANewFile) {
  TempDir tmp;
  const uint32_t n = tracedb_intern("again");
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(tracedb_start(tmp.path().c_str()), TRACEDB_OK);
    tracedb_instant(n);
    ASSERT_EQ(tracedb_stop(), TRACEDB_OK);
  }
  Collected c = CollectDir(tmp.path());
  EXPECT_EQ(c.files, 3u);
  EXPECT_EQ(c.closed_files, 3u);
  EXPECT_EQ(OfName(c, "again").size(), 3u);
}

TEST_F(RecorderTest, UnwritableDirectoryIsAnError) {
  TempDir tmp;
  testing::WriteFile(tmp.Sub("file"), "x");
  EXPECT_EQ(tracedb_start(tmp.Sub("file").c_str()), TRACEDB_ERR_IO);
  EXPECT_EQ(tracedb_enabled(), 0);
}

TEST_F(RecorderTest, FlushMakesEventsReadableWhileRunning) {
  TempDir tmp;
  setenv("TRACEDB_FLUSH_MS", "3600000", 1);  // nothing would be written for an hour otherwise
  ASSERT_EQ(tracedb_start(tmp.path().c_str()), TRACEDB_OK);
  const uint32_t n = tracedb_intern("flushed");
  std::thread other([n] {
    for (int i = 0; i < 1000; ++i) tracedb_instant(n);
  });
  other.join();
  for (int i = 0; i < 500; ++i) tracedb_instant(n);
  ASSERT_EQ(tracedb_flush(), TRACEDB_OK);
  Collected c = CollectDir(tmp.path());
  EXPECT_EQ(OfName(c, "flushed").size(), 1500u);
  EXPECT_EQ(c.closed_files, 0u);
}

TEST_F(RecorderTest, KilledProcessKeepsEverythingFlushed) {
  TempDir tmp;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv("TRACEDB_FLUSH_MS", "3600000", 1);
    if (tracedb_start(tmp.path().c_str()) != TRACEDB_OK) _exit(3);
    const uint32_t n = tracedb_intern("before-kill");
    for (int i = 0; i < 12345; ++i) tracedb_instant(n);
    if (tracedb_flush() != TRACEDB_OK) _exit(4);
    raise(SIGKILL);
    _exit(5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  Collected c = CollectDir(tmp.path());
  EXPECT_EQ(OfName(c, "before-kill").size(), 12345u);
  EXPECT_EQ(c.closed_files, 0u);
  EXPECT_EQ(c.corrupt_blocks, 0u);
}

// A process that blocks in a call and is then killed (a hung rank, SIGKILLed by its launcher)
// never closes its file: its open spans end when it was last seen, its last anchor. The flusher
// writes one every second while idle too, so that time follows the wait, not the call's start.
TEST_F(RecorderTest, IdleProcessKeepsWritingWhenItWasLastSeen) {
  TempDir tmp;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv("TRACEDB_FLUSH_MS", "100", 1);
    if (tracedb_start(tmp.path().c_str()) != TRACEDB_OK) _exit(3);
    tracedb_begin(tracedb_intern("blocked"));  // never ended
    if (tracedb_flush() != TRACEDB_OK) _exit(4);
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    raise(SIGKILL);
    _exit(5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  Collected c = CollectDir(tmp.path());
  const std::vector<ReadEvent> begins = OfName(c, "blocked");
  ASSERT_EQ(begins.size(), 1u);
  ASSERT_FALSE(c.anchors.empty());
  int64_t last = INT64_MIN;
  for (const engine::AnchorPoint& a : c.anchors) last = std::max(last, a.clock_ns);
  // At least one idle anchor 1 s after the one at start; half a second of slack for a slow
  // flusher (sanitizers, a busy machine), still far from the call's start.
  EXPECT_GE(last - begins[0].e.ts, 500000000)
      << "last anchor " << last << ", call at " << begins[0].e.ts;
}

TEST_F(RecorderTest, StepWindowRecordsOnlyInside) {
  TempDir tmp;
  setenv("TRACEDB_START_STEP", "3", 1);
  setenv("TRACEDB_END_STEP", "5", 1);
  ASSERT_EQ(tracedb_start(tmp.path().c_str()), TRACEDB_OK);
  const uint32_t n = tracedb_intern("work");
  tracedb_instant(n);  // before the first step: outside the window
  EXPECT_EQ(tracedb_enabled(), 0);
  for (int step = 0; step < 10; ++step) {
    tracedb_step(step);
    EXPECT_EQ(tracedb_enabled(), step >= 3 && step <= 5 ? 1 : 0) << step;
    tracedb_begin(n);
    tracedb_end(n);
  }
  ASSERT_EQ(tracedb_stop(), TRACEDB_OK);
  Collected c = CollectDir(tmp.path());
  EXPECT_EQ(OfName(c, "work").size(), 6u);
  std::vector<int64_t> steps;
  for (const auto& e : c.events) {
    if (e.e.kind == EventKind::kStep) steps.push_back(e.e.ival);
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(c.metas[0].start_step, 3);
  EXPECT_EQ(c.metas[0].end_step, 5);
}

TEST_F(RecorderTest, ForkedChildIsSafeAndDoesNotDuplicate) {
  TempDir tmp;
  setenv("TRACEDB_FLUSH_MS", "3600000", 1);
  ASSERT_EQ(tracedb_start(tmp.path().c_str()), TRACEDB_OK);
  const uint32_t n = tracedb_intern("parent");
  for (int i = 0; i < 100; ++i) tracedb_instant(n);  // buffered, not yet written
  const std::string child_dir = tmp.Sub("child");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child inherits no session: every call is harmless, nothing is recorded.
    int rc = 0;
    if (tracedb_enabled() != 0) rc |= 1;
    if (tracedb_flush() != TRACEDB_ERR_STATE) rc |= 2;
    const uint32_t c = tracedb_intern("child");
    tracedb_instant(c);
    tracedb_begin(c);
    tracedb_end(c);
    // It may start its own session (except under ThreadSanitizer, which cannot follow a thread
    // started in a child forked from a multi-threaded parent: "dup thread with used id").
    if (!kThreadSanitizer) {
      if (tracedb_start(child_dir.c_str()) != TRACEDB_OK) rc |= 4;
      for (int i = 0; i < 10; ++i) tracedb_instant(c);
      if (tracedb_stop() != TRACEDB_OK) rc |= 8;
    }
    _exit(rc);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  for (int i = 0; i < 50; ++i) tracedb_instant(n);
  ASSERT_EQ(tracedb_stop(), TRACEDB_OK);

  Collected parent = CollectDir(tmp.path());
  EXPECT_EQ(OfName(parent, "parent").size(), 150u);
  EXPECT_EQ(OfName(parent, "child").size(), 0u);
  if (kThreadSanitizer) return;
  Collected kid = CollectDir(child_dir);
  EXPECT_EQ(OfName(kid, "child").size(), 10u);
  EXPECT_EQ(OfName(kid, "parent").size(), 0u);
  ASSERT_EQ(kid.metas.size(), 1u);
  EXPECT_EQ(kid.metas[0].pid, static_cast<uint32_t>(child));
}

// The forked child closes the segment descriptor it inherited (the parent's lock on the file must
// go with the parent), and its session calls behave as recorder.h says.
TEST_F(RecorderTest, ForkedChildClosesTheInheritedSegmentDescriptor) {
  TempDir tmp;
  ASSERT_EQ(tracedb_start(tmp.path().c_str()), TRACEDB_OK);
  const uint32_t n = tracedb_intern("before-fork");
  for (int i = 0; i < 10; ++i) tracedb_instant(n);
  ASSERT_EQ(tracedb_flush(), TRACEDB_OK);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int rc = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
      std::error_code ec;
      const auto target = std::filesystem::read_symlink(e.path(), ec);
      if (!ec && target.string().find(tmp.path()) == 0) rc |= 1;  // a segment of the parent
    }
    if (tracedb_stop() != TRACEDB_ERR_STATE) rc |= 2;  // no session in the child
    if (tracedb_flush() != TRACEDB_ERR_STATE) rc |= 4;
    if (tracedb_enabled() != 0) rc |= 8;
    _exit(rc);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: descriptor inherited, 2/4/8: session state in child";
  // The parent's session goes on.
  for (int i = 0; i < 10; ++i) tracedb_instant(n);
  ASSERT_EQ(tracedb_stop(), TRACEDB_OK);
  EXPECT_EQ(OfName(CollectDir(tmp.path()), "before-fork").size(), 20u);
}

// A session that failed to write does not fail later sessions: write errors are per session.
TEST_F(RecorderTest, AFailedSessionDoesNotFailTheNextOne) {
  TempDir tmp;
  const std::string dir = tmp.Sub("gone");
  setenv("TRACEDB_SEGMENT_MB", "1", 1);
  ASSERT_EQ(tracedb_start(dir.c_str()), TRACEDB_OK);
  unsetenv("TRACEDB_SEGMENT_MB");
  // Take the directory away under the session: the file open goes on, the next one (rotation
  // at 1 MB) cannot be created.
  testing::RemoveTree(dir);
  testing::WriteFile(dir, "not a directory");
  const uint32_t n = tracedb_intern("x");
  uint64_t x = 88172645463325252ull;  // xorshift: durations that do not compress
  for (int i = 0; i < 400000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    tracedb_complete(n, tracedb_now(), static_cast<int64_t>(x >> 24));
  }
  (void)tracedb_flush();
  EXPECT_EQ(tracedb_stop(), TRACEDB_ERR_IO);  // this session failed
  std::filesystem::remove(dir);
  ASSERT_EQ(tracedb_start(tmp.Sub("ok").c_str()), TRACEDB_OK);
  tracedb_instant(n);
  EXPECT_EQ(tracedb_stop(), TRACEDB_OK);  // the next one did not
  EXPECT_EQ(OfName(CollectDir(tmp.Sub("ok")), "x").size(), 1u);
}

TEST_F(RecorderTest, ShortLivedThreadsAreAllRecorded) {
  TempDir tmp;
  ASSERT_EQ(tracedb_start(tmp.path().c_str()), TRACEDB_OK);
  const uint32_t n = tracedb_intern("short");
  for (int round = 0; round < 20; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 10; ++t) {
      threads.emplace_back([n] {
        for (int i = 0; i < 10; ++i) tracedb_instant(n);
      });
    }
    for (auto& t : threads) t.join();
    // Lets the flusher drain the exited threads' buffers and hand them to the next round.
    ASSERT_EQ(tracedb_flush(), TRACEDB_OK);
  }
  ASSERT_EQ(tracedb_stop(), TRACEDB_OK);
  Collected c = CollectDir(tmp.path());
  EXPECT_EQ(OfName(c, "short").size(), 2000u);
  EXPECT_EQ(c.dropped, 0u);
  std::set<uint32_t> threads;
  for (const auto& e : OfName(c, "short")) threads.insert(e.thread);
  EXPECT_EQ(threads.size(), 200u);  // every thread had its own index, also on reused buffers
  for (uint32_t t : threads) EXPECT_EQ(c.thread_names.count(t), 1u) << t;
}

TEST_F(RecorderTest, SegmentsRotateBySize) {
  TempDir tmp;
  setenv("TRACEDB_SEGMENT_MB", "1", 1);
  setenv("TRACEDB_FLUSH_MS", "1", 1);
  ASSERT_EQ(tracedb_start(tmp.path().c_str()), TRACEDB_OK);
  const uint32_t names[4] = {tracedb_intern("a"), tracedb_intern("b"), tracedb_intern("c"),
                             tracedb_intern("d")};
  uint64_t emitted = 0;
  for (int64_t i = 0; i < 3000000; ++i) {
    tracedb_complete(names[i & 3], i * 977 % 100003, (i * 7919) % 1000003);
    ++emitted;
    if (i % 50000 == 0) tracedb_flush();
  }
  ASSERT_EQ(tracedb_stop(), TRACEDB_OK);
  Collected c = CollectDir(tmp.path());
  EXPECT_GT(c.files, 1u);
  EXPECT_EQ(c.closed_files, c.files);
  EXPECT_EQ(c.events.size() + c.dropped, emitted);
  // Every file is self-contained: names resolve in every one of them.
  EXPECT_EQ(OfName(c, "?").size(), 0u);
}

TEST_F(RecorderTest, CxxWrapper) {
  TempDir tmp;
  {
    Session session(tmp.path().c_str());
    ASSERT_TRUE(session.ok());
    static const Name kStep("train_step");
    static const Lane kLane("grad.fc");
    {
      Span outer(kStep);
      Span inner(kStep, Category::kComm, kLane, &Args().Bytes(64).Peer(1));
      TRACEDB_SPAN("macro-span");
    }
    Instant(kStep);
    Counter(kStep, 3);
  }
  Collected c = CollectDir(tmp.path());
  ASSERT_EQ(c.events.size(), 8u);
  EXPECT_EQ(c.events[0].e.kind, EventKind::kBegin);
  EXPECT_EQ(c.events[1].lane, "grad.fc");
  EXPECT_EQ(c.events[1].e.args.bytes, 64u);
  EXPECT_EQ(c.events[1].e.args.peer, 1);
  EXPECT_EQ(c.events[2].name, "macro-span");
  EXPECT_EQ(c.events[3].name, "macro-span");
  EXPECT_EQ(c.events[3].e.kind, EventKind::kEnd);
  EXPECT_EQ(c.events[4].lane, "grad.fc");  // inner ends before outer
  EXPECT_EQ(c.events[5].lane, "");
}

}  // namespace
}  // namespace tracedb
