// The process-wide catalog of the recorder: interned strings, lanes, and the registry of thread
// buffers (their chunks come from the session's ChunkPool). Not on the hot path: every call takes
// the catalog mutex. The flusher reads what is new since its last visit and writes it as STRINGS,
// LANES and THREADS blocks (docs/segment-format.md). Thread safety: every member function is
// thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/segment/segment_format.h"
#include "recorder/thread_buffer.h"

namespace tracedb::recorder {

class Catalog {
 public:
  static Catalog& Get();

  uint32_t Intern(std::string_view s);   // 0 on allocation failure
  uint32_t Lane(std::string_view name);  // 0 when lanes are exhausted
  void SetThreadName(ThreadBuffer* b, std::string_view name);

  // Allocates (or reuses) and registers a buffer for the calling thread, with no chunk yet.
  // nullptr when memory is short.
  ThreadBuffer* AttachThread(uint32_t os_tid);

  // For the flusher: strings with id >= from_id (views stay valid: strings are never freed).
  void NewStrings(uint32_t from_id, std::vector<std::string_view>* out);
  void NewLanes(size_t from, std::vector<engine::LaneInfo>* out);
  // Thread infos for buffers whose name changed (or all, when `all`); clears the dirty flags.
  void ThreadInfos(bool all, std::vector<engine::ThreadInfo>* out);
  void Buffers(std::vector<ThreadBuffer*>* out);
  // Events dropped so far by every thread, live or exited, and by threads without a buffer.
  uint64_t TotalDropped();
  // Unregisters a drained, retired buffer and keeps it for the next thread that attaches.
  // REQUIRES: only the flusher calls this, after draining `b`.
  void Release(ThreadBuffer* b);

  // Session end: waits until no registered thread is inside a recording call (busy), for at
  // most `timeout_ns`. True when every thread was seen idle.
  bool WaitIdle(int64_t timeout_ns);
  // Session end, after WaitIdle and the flusher's last drain: forgets every chunk reference (the
  // session's pool is about to be destroyed). REQUIRES: no thread busy, the flusher stopped.
  void ResetSession();

  // Fork support: prepare locks the mutex, parent/child unlock; child also forgets every other
  // thread's buffer (those threads do not exist in the child) and discards buffered events.
  void LockForFork();
  void UnlockAfterFork();
  // The child's buffers hold no chunk afterwards (the parent's pool is not the child's).
  void ResetInChild(ThreadBuffer* survivor);

 private:
  Catalog() = default;
  std::mutex mu_;
  std::deque<std::string> strings_;                     // id = index + 1
  std::unordered_map<std::string_view, uint32_t> ids_;  // views into strings_
  std::vector<engine::LaneInfo> lanes_;                 // lane = index + 1
  std::unordered_map<uint32_t, uint32_t> lane_by_name_;
  std::vector<ThreadBuffer*> buffers_;
  std::vector<ThreadBuffer*> pool_;  // drained buffers of exited threads, ready for reuse
  uint32_t next_thread_index_ = 1;
};

}  // namespace tracedb::recorder
