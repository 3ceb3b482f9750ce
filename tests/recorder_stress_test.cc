// Many threads recording at full speed: every event is either written or counted as dropped,
// and each thread's timestamps come back in order. Also built and run under ThreadSanitizer.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <thread>
#include <vector>

#include "engine/segment_dir.h"
#include "engine/segment_reader.h"
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

}  // namespace
}  // namespace tracedb
