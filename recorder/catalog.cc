// Catalog implementation. See catalog.h.
#include "recorder/catalog.h"

#include <sched.h>

#include <algorithm>
#include <new>

#include "recorder/clock.h"

namespace tracedb::recorder {
namespace {

// Forgets every chunk of `b` (both sides). REQUIRES: neither side uses `b` concurrently.
void ClearChunks(ThreadBuffer* b) {
  b->pos = 0;
  b->limit = 0;
  b->chunk = nullptr;
  b->slots = nullptr;
  b->first.store(nullptr, std::memory_order_relaxed);
  b->read_chunk = nullptr;
  b->read_pos = 0;
  b->comm_depth = 0;
  b->comm_open_since = 0;
  b->comm_watchdog_fired = false;
}
constexpr uint32_t kMaxLanes = 65535;  // lanes are 16 bits in a Record
}  // namespace

std::atomic<uint64_t> g_nobuf_dropped{0};
std::atomic<uint64_t> g_freed_dropped{0};

Catalog& Catalog::Get() {
  // Never destroyed: threads may record while static destructors run at exit.
  static Catalog* catalog = new Catalog();
  return *catalog;
}

uint32_t Catalog::Intern(std::string_view s) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ids_.find(s);
  if (it != ids_.end()) return it->second;
  try {
    strings_.emplace_back(s);
    const uint32_t id = static_cast<uint32_t>(strings_.size());
    ids_.emplace(std::string_view(strings_.back()), id);
    return id;
  } catch (...) {
    if (strings_.size() > ids_.size()) strings_.pop_back();
    return 0;
  }
}

uint32_t Catalog::Lane(std::string_view name) {
  const uint32_t name_id = Intern(name);
  if (name_id == 0) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = lane_by_name_.find(name_id);
  if (it != lane_by_name_.end()) return it->second;
  if (lanes_.size() >= kMaxLanes) return 0;
  try {
    const uint32_t lane = static_cast<uint32_t>(lanes_.size()) + 1;
    lanes_.push_back(engine::LaneInfo{lane, name_id});
    lane_by_name_.emplace(name_id, lane);
    return lane;
  } catch (...) {
    return 0;
  }
}

void Catalog::SetThreadName(ThreadBuffer* b, std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    b->name.assign(name.data(), name.size());
    b->name_dirty = true;
  } catch (...) {
  }
}

ThreadBuffer* Catalog::AttachThread(uint32_t os_tid) {
  std::lock_guard<std::mutex> lock(mu_);
  ThreadBuffer* b = nullptr;
  if (!pool_.empty()) {
    // A drained buffer of an exited thread: nobody else references it any more.
    b = pool_.back();
    pool_.pop_back();
    ClearChunks(b);
    b->busy.store(0, std::memory_order_relaxed);
    b->dropped.store(0, std::memory_order_relaxed);
    b->reentry_dropped.store(0, std::memory_order_relaxed);
    b->reported_dropped = 0;
    b->retired.store(false, std::memory_order_relaxed);
    b->name.clear();
  } else {
    b = new (std::nothrow) ThreadBuffer();
    if (b == nullptr) return nullptr;
  }
  try {
    buffers_.push_back(b);
  } catch (...) {
    pool_.push_back(b);
    return nullptr;
  }
  b->index = next_thread_index_++;
  b->os_tid = os_tid;
  b->name_dirty = true;
  return b;
}

bool Catalog::WaitIdle(int64_t timeout_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t deadline = MonotonicNs() + timeout_ns;
  bool idle = true;
  for (ThreadBuffer* b : buffers_) {
    // An exited thread is in no call (one cancelled inside a TRACEDB_ON_FULL wait left busy set).
    while (b->busy.load(std::memory_order_acquire) != 0 &&
           !b->retired.load(std::memory_order_acquire)) {
      if (MonotonicNs() > deadline) {
        idle = false;
        break;
      }
      sched_yield();
    }
  }
  return idle;
}

void Catalog::ResetSession() {
  std::lock_guard<std::mutex> lock(mu_);
  for (ThreadBuffer* b : buffers_) ClearChunks(b);
  for (ThreadBuffer* b : pool_) ClearChunks(b);
}

void Catalog::NewStrings(uint32_t from_id, std::vector<std::string_view>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  out->clear();
  for (size_t i = from_id == 0 ? 0 : from_id - 1; i < strings_.size(); ++i) {
    out->push_back(strings_[i]);
  }
}

void Catalog::NewLanes(size_t from, std::vector<engine::LaneInfo>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  out->assign(lanes_.begin() + static_cast<std::ptrdiff_t>(std::min(from, lanes_.size())),
              lanes_.end());
}

void Catalog::ThreadInfos(bool all, std::vector<engine::ThreadInfo>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  out->clear();
  for (ThreadBuffer* b : buffers_) {
    if (!all && !b->name_dirty) continue;
    b->name_dirty = false;
    out->push_back(engine::ThreadInfo{b->index, b->os_tid, b->name});
  }
}

void Catalog::Buffers(std::vector<ThreadBuffer*>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  out->assign(buffers_.begin(), buffers_.end());
}

uint64_t Catalog::TotalDropped() {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = g_nobuf_dropped.load(std::memory_order_relaxed) +
               g_freed_dropped.load(std::memory_order_relaxed);
  for (ThreadBuffer* b : buffers_) n += b->TotalDropped();
  return n;
}

void Catalog::Release(ThreadBuffer* b) {
  std::lock_guard<std::mutex> lock(mu_);
  buffers_.erase(std::remove(buffers_.begin(), buffers_.end(), b), buffers_.end());
  g_freed_dropped.fetch_add(b->TotalDropped(), std::memory_order_relaxed);
  try {
    pool_.push_back(b);
  } catch (...) {
    delete b;
  }
}

void Catalog::LockForFork() { mu_.lock(); }
void Catalog::UnlockAfterFork() { mu_.unlock(); }

void Catalog::ResetInChild(ThreadBuffer* survivor) {
  // Called in the child with mu_ held (after LockForFork in the parent).
  // Events buffered by the parent belong to the parent's files; its chunks are not the child's.
  for (ThreadBuffer* b : buffers_) {
    ClearChunks(b);
    if (b != survivor) b->retired.store(true, std::memory_order_relaxed);
    b->busy.store(0, std::memory_order_relaxed);
    b->name_dirty = true;
  }
  for (ThreadBuffer* b : pool_) ClearChunks(b);
}

}  // namespace tracedb::recorder
