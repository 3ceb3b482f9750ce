// RequestTable. See request_table.h.
#include "recorder/mpi/request_table.h"
#include "engine/util/hash.h"

#include <cstdlib>

namespace tracedb::mpi {

RequestTable::~RequestTable() {
  for (Shard& s : shards_) std::free(s.slots);
}

uint64_t RequestTable::Hash(uintptr_t key) {
  return engine::FibonacciHash(static_cast<uint64_t>(key));
}

int64_t RequestTable::FindOldest(const Shard& s, uintptr_t key, Want want) {
  if (s.capacity == 0) return -1;
  const uint32_t mask = s.capacity - 1;
  int64_t best = -1;
  for (uint32_t i = static_cast<uint32_t>(Hash(key) >> 20) & mask, n = 0; n < s.capacity;
       i = (i + 1) & mask, ++n) {
    const Slot& slot = s.slots[i];
    if (slot.key == kEmpty) break;
    if (slot.key != key) continue;
    const uint32_t f = slot.info.flags;
    const bool ok = want == Want::kAny || (want == Want::kActive && (f & ReqInfo::kActive) != 0) ||
                    (want == Want::kPersistent && (f & ReqInfo::kPersistent) != 0);
    if (ok && (best < 0 || slot.order < s.slots[best].order)) best = i;
  }
  return best;
}

bool RequestTable::Rehash(Shard* s, uint32_t capacity) {
  auto* slots = static_cast<Slot*>(std::calloc(capacity, sizeof(Slot)));
  if (slots == nullptr) return false;
  const uint32_t mask = capacity - 1;
  for (uint32_t i = 0; i < s->capacity; ++i) {
    const Slot& old = s->slots[i];
    if (old.key == kEmpty || old.key == kTombstone) continue;
    uint32_t j = static_cast<uint32_t>(Hash(old.key) >> 20) & mask;
    while (slots[j].key != kEmpty) j = (j + 1) & mask;
    slots[j] = old;
  }
  std::free(s->slots);
  s->slots = slots;
  s->capacity = capacity;
  s->tombstones = 0;
  return true;
}

bool RequestTable::Insert(uintptr_t key, const ReqInfo& info) {
  if (key == kEmpty || key == kTombstone) return false;
  Shard& s = ShardOf(key);
  std::lock_guard<std::mutex> lock(s.mu);
  if ((static_cast<uint64_t>(s.live) + s.tombstones + 1) * 4 >
      static_cast<uint64_t>(s.capacity) * 3) {
    uint32_t cap = s.capacity == 0 ? 16 : s.capacity;
    while ((static_cast<uint64_t>(s.live) + 1) * 2 > cap) cap *= 2;  // at most half full after
    if (cap >= (1u << 30) || !Rehash(&s, cap)) return false;
  }
  const uint32_t mask = s.capacity - 1;
  uint32_t i = static_cast<uint32_t>(Hash(key) >> 20) & mask;
  while (s.slots[i].key != kEmpty && s.slots[i].key != kTombstone) i = (i + 1) & mask;
  if (s.slots[i].key == kTombstone) --s.tombstones;
  s.slots[i].key = key;
  s.slots[i].order = order_.fetch_add(1, std::memory_order_relaxed);
  s.slots[i].info = info;
  ++s.live;
  size_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void RequestTable::Erase(Shard* s, int64_t index) {
  s->slots[index].key = kTombstone;
  s->slots[index].info = ReqInfo{};
  --s->live;
  ++s->tombstones;
  size_.fetch_sub(1, std::memory_order_relaxed);
}

bool RequestTable::Complete(uintptr_t key, ReqInfo* out) {
  Shard& s = ShardOf(key);
  std::lock_guard<std::mutex> lock(s.mu);
  const int64_t i = FindOldest(s, key, Want::kActive);
  if (i < 0) return false;
  Slot& slot = s.slots[i];
  *out = slot.info;
  if ((slot.info.flags & ReqInfo::kPersistent) != 0) {
    slot.info.flags &= ~static_cast<uint32_t>(ReqInfo::kActive);
    slot.info.flow = 0;
  } else {
    Erase(&s, i);
  }
  return true;
}

bool RequestTable::Start(uintptr_t key, uint64_t flow, ReqInfo* out) {
  Shard& s = ShardOf(key);
  std::lock_guard<std::mutex> lock(s.mu);
  const int64_t i = FindOldest(s, key, Want::kPersistent);
  if (i < 0) return false;
  Slot& slot = s.slots[i];
  slot.info.flags |= ReqInfo::kActive;
  slot.info.flow = flow;
  *out = slot.info;
  return true;
}

bool RequestTable::Remove(uintptr_t key, ReqInfo* out) {
  Shard& s = ShardOf(key);
  std::lock_guard<std::mutex> lock(s.mu);
  const int64_t i = FindOldest(s, key, Want::kAny);
  if (i < 0) return false;
  *out = s.slots[i].info;
  Erase(&s, i);
  return true;
}

}  // namespace tracedb::mpi
