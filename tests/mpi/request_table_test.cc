// Tests of RequestTable (recorder/mpi/request_table.h), the MPI interposer's map from request
// handles to what started them. No MPI needed: keys are plain integers here.
#include "recorder/mpi/request_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace tracedb::mpi {
namespace {

ReqInfo Info(uint64_t flow, uint32_t flags = 0) {
  ReqInfo i;
  i.flow = flow;
  i.bytes = flow * 10;
  i.flags = flags | ((flags & ReqInfo::kPersistent) ? 0u : uint32_t{ReqInfo::kActive});
  return i;
}

TEST(RequestTable, CompleteReturnsWhatWasInsertedOnce) {
  RequestTable t;
  ASSERT_TRUE(t.Insert(0x1000, Info(7)));
  EXPECT_EQ(t.Size(), 1u);
  ReqInfo out;
  ASSERT_TRUE(t.Complete(0x1000, &out));
  EXPECT_EQ(out.flow, 7u);
  EXPECT_EQ(out.bytes, 70u);
  EXPECT_FALSE(t.Complete(0x1000, &out));
  EXPECT_FALSE(t.Complete(0x2000, &out));
  EXPECT_EQ(t.Size(), 0u);
}

TEST(RequestTable, RejectsReservedKeys) {
  RequestTable t;
  EXPECT_FALSE(t.Insert(0, Info(1)));
  EXPECT_FALSE(t.Insert(1, Info(1)));
  EXPECT_EQ(t.Size(), 0u);
}

// Open MPI returns one shared request for every operation on MPI_PROC_NULL.
TEST(RequestTable, EqualKeysAreTakenOldestFirst) {
  RequestTable t;
  for (uint64_t f : {3, 1, 2}) ASSERT_TRUE(t.Insert(0x40, Info(f)));
  ReqInfo out;
  for (uint64_t want : {3, 1, 2}) {
    ASSERT_TRUE(t.Complete(0x40, &out));
    EXPECT_EQ(out.flow, want);
  }
  EXPECT_FALSE(t.Complete(0x40, &out));
}

TEST(RequestTable, PersistentRequestsCycleThroughStartAndCompletion) {
  RequestTable t;
  ASSERT_TRUE(t.Insert(0x80, Info(0, ReqInfo::kPersistent | ReqInfo::kRecv)));
  ReqInfo out;
  EXPECT_FALSE(t.Complete(0x80, &out)) << "inactive: nothing to complete";
  for (uint64_t flow = 11; flow < 14; ++flow) {
    ASSERT_TRUE(t.Start(0x80, flow, &out));
    EXPECT_EQ(out.flow, flow);
    ASSERT_TRUE(t.Complete(0x80, &out));
    EXPECT_EQ(out.flow, flow);
    EXPECT_TRUE(out.flags & ReqInfo::kRecv);
    EXPECT_FALSE(t.Complete(0x80, &out));
    EXPECT_EQ(t.Size(), 1u);
  }
  EXPECT_FALSE(t.Start(0x90, 1, &out)) << "not a persistent request";
  ASSERT_TRUE(t.Remove(0x80, &out));
  EXPECT_EQ(t.Size(), 0u);
  EXPECT_FALSE(t.Start(0x80, 1, &out));
}

TEST(RequestTable, GrowsAndSurvivesChurn) {
  RequestTable t;
  constexpr uintptr_t kN = 100000;
  for (uintptr_t k = 0; k < kN; ++k) ASSERT_TRUE(t.Insert(0x10 + k * 16, Info(k + 1)));
  EXPECT_EQ(t.Size(), kN);
  ReqInfo out;
  for (uintptr_t k = 0; k < kN; k += 2) {
    ASSERT_TRUE(t.Complete(0x10 + k * 16, &out));
    ASSERT_EQ(out.flow, k + 1);
  }
  // Tombstones are reused and rebuilt away: many more insert/complete rounds than slots.
  for (int round = 0; round < 20; ++round) {
    for (uintptr_t k = 0; k < kN; k += 2) ASSERT_TRUE(t.Insert(0x10 + k * 16, Info(k + 1)));
    for (uintptr_t k = 0; k < kN; k += 2) ASSERT_TRUE(t.Complete(0x10 + k * 16, &out));
  }
  for (uintptr_t k = 1; k < kN; k += 2) {
    ASSERT_TRUE(t.Complete(0x10 + k * 16, &out));
    ASSERT_EQ(out.flow, k + 1);
  }
  EXPECT_EQ(t.Size(), 0u);
}

// Requests started on one thread and completed on another, as under MPI_THREAD_MULTIPLE.
TEST(RequestTable, ConcurrentInsertAndCompleteLoseNothing) {
  RequestTable t;
  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 50000;
  std::atomic<uint64_t> completed{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      // Thread i inserts keys of class i and completes keys of class (i + 1) % kThreads.
      const int other = (i + 1) % kThreads;
      uint64_t next = 0;
      for (uint64_t k = 0; k < kPerThread; ++k) {
        const uintptr_t key = 0x100 + (k * kThreads + i) * 8;
        t.Insert(key, Info(k * kThreads + i + 1));
        ReqInfo out;
        while (next <= k) {
          const uintptr_t want = 0x100 + (next * kThreads + other) * 8;
          if (!t.Complete(want, &out)) break;
          if (out.flow != next * kThreads + other + 1) wrong++;
          completed++;
          ++next;
        }
      }
      while (next < kPerThread) {
        ReqInfo out;
        const uintptr_t want = 0x100 + (next * kThreads + other) * 8;
        if (t.Complete(want, &out)) {
          if (out.flow != next * kThreads + other + 1) wrong++;
          completed++;
          ++next;
        } else {
          std::this_thread::yield();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(completed.load(), kThreads * kPerThread);
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(t.Size(), 0u);
}

}  // namespace
}  // namespace tracedb::mpi
