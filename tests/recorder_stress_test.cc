// Many threads recording at full speed: every event is either written or counted as dropped,
// and each thread's timestamps come back in order; a burst is absorbed up to the whole memory
// budget (checked by compacting and counting rows); the session lifecycle under load: producers
// racing tracedb_stop without a join, stop/start cycles (counts exact per session, nothing of one
// session in the next one's file), a signal handler that records while its thread records.
// Also built and run under ThreadSanitizer.
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "engine/segment/segment_dir.h"
#include "engine/segment/segment_reader.h"
#include "tests/test_util.h"
#include "tracedb/recorder.h"

namespace tracedb {
namespace {

class StressVisitor : public engine::SegmentVisitor {
 public:
  void OnEvents(uint32_t thread, const std::vector<engine::SegmentEvent>& events) override {
    auto& last = last_ts[key_ + ":" + std::to_string(thread)];
    for (const auto& e : events) {
      if (e.ts < last) non_monotonic++;
      last = e.ts;
      count++;
      if (e.kind == engine::EventKind::kBegin) begins++;
    }
  }
  void OnStats(const std::vector<engine::DropCount>& d) override {
    for (const auto& x : d) dropped += x.dropped;
  }
  std::string key_;
  std::map<std::string, int64_t> last_ts;
  uint64_t count = 0, begins = 0, dropped = 0, non_monotonic = 0;
};

// The clock is published safely: threads that never started a session read it while another
// thread starts the first session (which calibrates it). Defined first, so that it runs before
// any other test of this binary has started a session. Under ThreadSanitizer a racy publication
// is reported; everywhere, every thread's readings must be monotonic and on one time base.
TEST(RecorderClock, ReadByManyThreadsWhileTheFirstSessionStarts) {
  testing::TempDir tmp;
  std::atomic<bool> go{false}, done{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      auto mono = [] {
        timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
      };
      int64_t last = tracedb_now();
      while (!done.load(std::memory_order_relaxed)) {
        const int64_t before = mono();
        const int64_t now = tracedb_now();
        const int64_t after = mono();
        if (now < last) bad.fetch_add(1);
        last = now;
        // The same time base as CLOCK_MONOTONIC, within 1 ms (the calibration is far better).
        if (now < before - 1000000 || now > after + 1000000) bad.fetch_add(1);
      }
    });
  }
  go.store(true);
  ASSERT_EQ(tracedb_start(tmp.path().c_str()), TRACEDB_OK);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  done.store(true);
  for (auto& t : readers) t.join();
  EXPECT_EQ(tracedb_stop(), TRACEDB_OK);
  EXPECT_EQ(bad.load(), 0);
}

TEST(RecorderStress, EightThreadsEveryEventWrittenOrCounted) {
  testing::TempDir tmp;
  unsetenv("TRACEDB_START_STEP");
  unsetenv("TRACEDB_END_STEP");
  tracedb_stop();
  ASSERT_EQ(tracedb_start(tmp.path().c_str()), TRACEDB_OK);
  constexpr int kThreads = 8;
  constexpr int kEventsPerThread = 1000000;
  const uint32_t name = tracedb_intern("stress");
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kEventsPerThread; i += 2) {
        tracedb_begin(name);
        tracedb_end(name);
        // Pause now and then so the flusher drains while producers write (more interleavings
        // for ThreadSanitizer); between pauses the producers run flat out and may drop.
        if (i % 65536 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  }
  go.store(true);
  for (auto& t : threads) t.join();
  ASSERT_EQ(tracedb_stop(), TRACEDB_OK);

  auto files = engine::ListSegmentFiles(tmp.path());
  ASSERT_TRUE(files.ok());
  StressVisitor v;
  for (const auto& f : *files) {
    v.key_ = f.path;
    auto scan = engine::ScanSegment(f.path, &v);
    ASSERT_TRUE(scan.ok()) << scan.status().ToString();
    EXPECT_EQ(scan->corrupt_blocks, 0u);
    EXPECT_EQ(scan->torn_tail_bytes, 0u);
  }
  const uint64_t emitted = uint64_t{kThreads} * kEventsPerThread;
  EXPECT_EQ(v.count + v.dropped, emitted) << "written " << v.count << ", dropped " << v.dropped;
  EXPECT_EQ(v.non_monotonic, 0u);
  EXPECT_GT(v.count, 0u);
  tracedb_counters c;
  tracedb_get_counters(&c);
  EXPECT_GE(c.written, v.count);
  std::printf("written %llu, dropped %llu of %llu\n", static_cast<unsigned long long>(v.count),
              static_cast<unsigned long long>(v.dropped), static_cast<unsigned long long>(emitted));
}

// ---- A burst: 4 threads x 250,000 complete events as fast as they can ----

constexpr int kBurstThreads = 4;
constexpr int kBurstEvents = 250000;

void RunBurst(uint32_t name) {
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kBurstThreads; ++t) {
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kBurstEvents; ++i) tracedb_complete(name, tracedb_now(), 10);
    });
  }
  go.store(true);
  for (auto& t : threads) t.join();
}

struct BurstResult {
  uint64_t segment_events = 0;  // read back by the segment reader
  uint64_t segment_dropped = 0;
  long db_rows = -1;  // rows of the compacted database (one per complete event)
  long db_dropped = -1;
};

long JsonInt(const std::string& json, const std::string& key) {
  const std::string k = "\"" + key + "\": ";
  const size_t p = json.find(k);
  return p == std::string::npos ? -1 : std::atol(json.c_str() + p + k.size());
}

// `budget_mb` nullptr: the default budget.
BurstResult RecordBurst(const std::string& dir, const char* budget_mb) {
  if (budget_mb != nullptr) {
    setenv("TRACEDB_BUFFER_MB", budget_mb, 1);
  } else {
    unsetenv("TRACEDB_BUFFER_MB");
  }
  EXPECT_EQ(tracedb_start(dir.c_str()), TRACEDB_OK);
  unsetenv("TRACEDB_BUFFER_MB");
  RunBurst(tracedb_intern("burst"));
  EXPECT_EQ(tracedb_stop(), TRACEDB_OK);
  BurstResult r;
  testing::Collected got = testing::CollectDir(dir);
  r.segment_events = got.events.size();
  r.segment_dropped = got.dropped;
  EXPECT_EQ(got.corrupt_blocks, 0u);
  EXPECT_EQ(got.torn_tails, 0u);
  // Independently: compact with the CLI and count the database's rows.
  const std::string db = dir + ".tdb";
  int rc = -1;
  const std::string bin = testing::ShellQuote(testing::TracedbBin());
  std::string out = testing::RunCommand(
      bin + " compact " + testing::ShellQuote(dir) + " -o " + testing::ShellQuote(db) + " 2>&1",
      &rc);
  EXPECT_EQ(rc, 0) << out;
  out = testing::RunCommand(bin + " info --json " + testing::ShellQuote(db), &rc);
  EXPECT_EQ(rc, 0) << out;
  r.db_rows = JsonInt(out, "events");
  r.db_dropped = JsonInt(out, "dropped");
  return r;
}

TEST(RecorderBurst, TheWholeBudgetAbsorbsABurst) {
  testing::TempDir tmp;
  unsetenv("TRACEDB_START_STEP");
  unsetenv("TRACEDB_END_STEP");
  tracedb_stop();
  const BurstResult r = RecordBurst(tmp.Sub("trace"), "512");
  const uint64_t emitted = uint64_t{kBurstThreads} * kBurstEvents;
  EXPECT_EQ(r.segment_events, emitted);
  EXPECT_EQ(r.segment_dropped, 0u);
  EXPECT_EQ(r.db_rows, static_cast<long>(emitted));
  EXPECT_EQ(r.db_dropped, 0);
}

TEST(RecorderBurst, TheDefaultBudgetCountsExactly) {
  testing::TempDir tmp;
  unsetenv("TRACEDB_START_STEP");
  unsetenv("TRACEDB_END_STEP");
  tracedb_stop();
  const BurstResult r = RecordBurst(tmp.Sub("trace"), nullptr);  // the default, 64 MiB
  const uint64_t emitted = uint64_t{kBurstThreads} * kBurstEvents;
  EXPECT_EQ(r.segment_events + r.segment_dropped, emitted);
  EXPECT_EQ(r.db_rows, static_cast<long>(r.segment_events));
  EXPECT_EQ(r.db_dropped, static_cast<long>(r.segment_dropped));
  // 32 MiB of records: the default budget holds the whole burst.
  EXPECT_EQ(r.segment_dropped, 0u);
}

TEST(RecorderBurst, PastTheBudgetEveryDropIsCounted) {
  testing::TempDir tmp;
  unsetenv("TRACEDB_START_STEP");
  unsetenv("TRACEDB_END_STEP");
  tracedb_stop();
  // 1 MiB: 16 chunks for 8 MiB of burst per thread.
  const BurstResult r = RecordBurst(tmp.Sub("trace"), "1");
  const uint64_t emitted = uint64_t{kBurstThreads} * kBurstEvents;
  EXPECT_EQ(r.segment_events + r.segment_dropped, emitted)
      << "written " << r.segment_events << ", dropped " << r.segment_dropped;
  EXPECT_EQ(r.db_rows, static_cast<long>(r.segment_events));
  EXPECT_EQ(r.db_dropped, static_cast<long>(r.segment_dropped));
  std::printf("budget 1 MiB: written %llu, dropped %llu of %llu\n",
              static_cast<unsigned long long>(r.segment_events),
              static_cast<unsigned long long>(r.segment_dropped),
              static_cast<unsigned long long>(emitted));
}

// TRACEDB_ON_FULL=wait: the same burst into 1 MiB loses nothing; threads wait for the flusher.
TEST(RecorderBurst, OnFullWaitLosesNothingInASmallBudget) {
  testing::TempDir tmp;
  unsetenv("TRACEDB_START_STEP");
  unsetenv("TRACEDB_END_STEP");
  tracedb_stop();
  setenv("TRACEDB_ON_FULL", "wait", 1);
  setenv("TRACEDB_ON_FULL_WAIT_MS", "10000", 1);
  const BurstResult r = RecordBurst(tmp.Sub("trace"), "1");
  unsetenv("TRACEDB_ON_FULL");
  unsetenv("TRACEDB_ON_FULL_WAIT_MS");
  const uint64_t emitted = uint64_t{kBurstThreads} * kBurstEvents;
  EXPECT_EQ(r.segment_events, emitted);
  EXPECT_EQ(r.segment_dropped, 0u);
  EXPECT_EQ(r.db_rows, static_cast<long>(emitted));
}

// ---- Lifecycle under load ----

// Per session directory: each producer's counter values (its serial numbers) with timestamps.
struct SessionRead {
  std::map<std::string, std::vector<std::pair<int64_t, double>>> by_name;  // name -> (ts, value)
  uint64_t dropped = 0;
  uint64_t corrupt = 0;
};

SessionRead ReadSession(const std::string& dir) {
  SessionRead s;
  testing::Collected got = testing::CollectDir(dir);
  for (const auto& e : got.events) {
    if (e.e.kind == engine::EventKind::kCounter) s.by_name[e.name].push_back({e.e.ts, e.e.value});
  }
  s.dropped = got.dropped;
  s.corrupt = got.corrupt_blocks + got.torn_tails;
  return s;
}

// Producers record flat out, never joined while sessions start and stop under them. Each
// session must hold, for each producer, a run of consecutive serial numbers (nothing lost,
// nothing uncounted), every one stamped inside the session (nothing of a session written into
// the next one's file).
TEST(RecorderLifecycle, StopStartCyclesUnderLoadAreExactPerSession) {
  testing::TempDir tmp;
  unsetenv("TRACEDB_START_STEP");
  unsetenv("TRACEDB_END_STEP");
  tracedb_stop();
  constexpr int kProducers = 4;
  constexpr int kSessions = 24;
  std::atomic<bool> done{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&done, p] {
      const uint32_t name = tracedb_intern(("producer-" + std::to_string(p)).c_str());
      double serial = 0;
      while (!done.load(std::memory_order_relaxed)) {
        tracedb_counter(name, serial);
        serial += 1;
        // A short pause now and then keeps the total within the budget; between pauses the
        // producers run flat out, and the scheduler preempts them anywhere in a call.
        if (static_cast<uint64_t>(serial) % 4096 == 0) std::this_thread::yield();
      }
    });
  }
  setenv("TRACEDB_BUFFER_MB", "256", 1);
  std::vector<std::pair<int64_t, int64_t>> windows;  // [before start, after stop]
  for (int i = 0; i < kSessions; ++i) {
    const int64_t t0 = tracedb_now();
    ASSERT_EQ(tracedb_start(tmp.Sub("s" + std::to_string(i)).c_str()), TRACEDB_OK);
    std::this_thread::sleep_for(std::chrono::milliseconds(2 + i % 3));
    ASSERT_EQ(tracedb_stop(), TRACEDB_OK);
    windows.push_back({t0, tracedb_now()});
  }
  unsetenv("TRACEDB_BUFFER_MB");
  done.store(true);
  for (auto& t : producers) t.join();

  uint64_t total = 0;
  for (int i = 0; i < kSessions; ++i) {
    SCOPED_TRACE("session " + std::to_string(i));
    const SessionRead s = ReadSession(tmp.Sub("s" + std::to_string(i)));
    EXPECT_EQ(s.corrupt, 0u);
    EXPECT_EQ(s.dropped, 0u);  // the budget holds every session: nothing to excuse a gap
    for (const auto& [name, events] : s.by_name) {
      SCOPED_TRACE(name);
      ASSERT_FALSE(events.empty());
      for (size_t k = 0; k < events.size(); ++k) {
        ASSERT_GE(events[k].first, windows[i].first) << "event stamped before its session";
        ASSERT_LE(events[k].first, windows[i].second) << "event stamped after its session";
        // Consecutive serials: an event that passed the enabled check is in this session.
        ASSERT_EQ(events[k].second, events[0].second + static_cast<double>(k));
      }
      total += events.size();
    }
  }
  EXPECT_GT(total, 0u);
}

// Producers race tracedb_stop with no join at all: after stop returns, nothing of theirs is
// written, and the next session of the same process starts with empty buffers.
TEST(RecorderLifecycle, ProducersRacingStopWithoutAJoin) {
  testing::TempDir tmp;
  unsetenv("TRACEDB_START_STEP");
  unsetenv("TRACEDB_END_STEP");
  tracedb_stop();
  setenv("TRACEDB_BUFFER_MB", "256", 1);
  ASSERT_EQ(tracedb_start(tmp.Sub("a").c_str()), TRACEDB_OK);
  std::atomic<bool> done{false};
  std::atomic<int> running{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < 4; ++p) {
    producers.emplace_back([&, p] {
      const uint32_t name = tracedb_intern(("racer-" + std::to_string(p)).c_str());
      double serial = 0;
      running.fetch_add(1);
      while (!done.load(std::memory_order_relaxed)) {
        tracedb_counter(name, serial);
        serial += 1;
        if (static_cast<uint64_t>(serial) % 4096 == 0) std::this_thread::yield();
      }
    });
  }
  while (running.load() < 4) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(tracedb_stop(), TRACEDB_OK);  // producers still running
  const int64_t stopped = tracedb_now();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int64_t t1 = tracedb_now();
  ASSERT_EQ(tracedb_start(tmp.Sub("b").c_str()), TRACEDB_OK);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  done.store(true);
  for (auto& t : producers) t.join();
  ASSERT_EQ(tracedb_stop(), TRACEDB_OK);
  unsetenv("TRACEDB_BUFFER_MB");

  const SessionRead a = ReadSession(tmp.Sub("a"));
  const SessionRead b = ReadSession(tmp.Sub("b"));
  EXPECT_EQ(a.dropped, 0u);
  EXPECT_EQ(b.dropped, 0u);
  ASSERT_EQ(a.by_name.size(), 4u);
  for (const auto& [name, events] : a.by_name) {
    for (size_t k = 0; k < events.size(); ++k) {
      ASSERT_LE(events[k].first, stopped) << name;
      ASSERT_EQ(events[k].second, events[0].second + static_cast<double>(k)) << name;
    }
  }
  for (const auto& [name, events] : b.by_name) {
    for (size_t k = 0; k < events.size(); ++k) {
      ASSERT_GE(events[k].first, t1) << name << ": an event of the first session";
      ASSERT_EQ(events[k].second, events[0].second + static_cast<double>(k)) << name;
    }
    // Nothing recorded between the sessions: b starts after a's last serial plus the calls
    // made while stopped.
    ASSERT_GT(events[0].second, a.by_name.at(name).back().second) << name;
  }
}

// A signal handler that records on a thread that is recording: the handler's event is written or
// dropped and counted, never written over the thread's own; the thread's events are all intact.
std::atomic<uint64_t> g_handler_calls{0};
uint32_t g_handler_name = 0;
void RecordingHandler(int) {
  const uint64_t n = g_handler_calls.fetch_add(1, std::memory_order_relaxed);
  tracedb_counter(g_handler_name, static_cast<double>(n));
}

TEST(RecorderLifecycle, SignalHandlerRecordingWhileTheThreadRecords) {
  testing::TempDir tmp;
  unsetenv("TRACEDB_START_STEP");
  unsetenv("TRACEDB_END_STEP");
  tracedb_stop();
  setenv("TRACEDB_BUFFER_MB", "256", 1);
  ASSERT_EQ(tracedb_start(tmp.path().c_str()), TRACEDB_OK);
  unsetenv("TRACEDB_BUFFER_MB");
  g_handler_name = tracedb_intern("in-handler");
  const uint32_t main_name = tracedb_intern("in-thread");
  struct sigaction sa = {}, old = {};
  sa.sa_handler = RecordingHandler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  g_handler_calls.store(0);

#if defined(__SANITIZE_THREAD__)
  constexpr int kEvents = 500000;  // ThreadSanitizer runs it about 20 times slower
#else
  constexpr int kEvents = 2000000;
#endif
  std::atomic<bool> ready{false}, done{false};
  std::thread worker([&] {
    tracedb_thread_name("worker");
    ready.store(true);
    for (int i = 0; i < kEvents; ++i) {
      tracedb_counter_ex(main_name, TRACEDB_CAT_USER, 0, static_cast<double>(i));
    }
    done.store(true);
  });
  while (!ready.load()) std::this_thread::yield();
  const pthread_t handle = worker.native_handle();
  uint64_t sent = 0;
  while (!done.load()) {
    pthread_kill(handle, SIGUSR1);
    ++sent;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  worker.join();
  ASSERT_EQ(tracedb_stop(), TRACEDB_OK);
  sigaction(SIGUSR1, &old, nullptr);

  const SessionRead s = ReadSession(tmp.path());
  EXPECT_EQ(s.corrupt, 0u);
  const auto& mine = s.by_name.count("in-thread") ? s.by_name.at("in-thread")
                                                  : std::vector<std::pair<int64_t, double>>{};
  ASSERT_EQ(mine.size(), static_cast<size_t>(kEvents));  // the thread's own: every one, intact
  for (int i = 0; i < kEvents; ++i) ASSERT_EQ(mine[i].second, static_cast<double>(i));
  const auto& theirs = s.by_name.count("in-handler") ? s.by_name.at("in-handler")
                                                     : std::vector<std::pair<int64_t, double>>{};
  for (size_t k = 1; k < theirs.size(); ++k) ASSERT_GT(theirs[k].second, theirs[k - 1].second);
  // Handlers that ran after the worker finished recorded without interrupting anything.
  EXPECT_EQ(theirs.size() + s.dropped, g_handler_calls.load())
      << "handler events written " << theirs.size() << ", dropped " << s.dropped << ", sent "
      << sent;
  std::printf("signals: %llu handler calls, %zu written, %llu dropped as reentrant\n",
              static_cast<unsigned long long>(g_handler_calls.load()), theirs.size(),
              static_cast<unsigned long long>(s.dropped));
}

}  // namespace
}  // namespace tracedb
