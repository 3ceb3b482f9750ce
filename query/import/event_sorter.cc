// EventSorter implementation: sorted runs spilled with tmpfile(3), merged with a heap. See
// event_sorter.h.
#include "query/import/event_sorter.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <queue>

namespace tracedb::query {
namespace {

// The first reservations of the buffers (see Add).
constexpr size_t kFirstItems = 16384;
constexpr size_t kFirstArenaBytes = 1 << 20;

}  // namespace

// A sorted sequence of events: a spilled file, or the buffer still in memory.
struct EventSorter::Run {
  FILE* file = nullptr;  // spilled: items in order, each PendingEvent then its JSON bytes
  uint64_t left = 0;     // items not yet read
  const std::vector<Item>* items = nullptr;  // in memory
  const std::string* arena = nullptr;
  size_t index = 0;
  PendingEvent cur;
  std::string json_buf;
  std::string_view json;

  ~Run() {
    if (file) std::fclose(file);
  }

  // Loads the next item into cur/json; false at the end.
  StatusOr<bool> Advance() {
    if (items) {
      if (index == items->size()) return false;
      const Item& it = (*items)[index++];
      cur = it.e;
      json = std::string_view(arena->data() + it.json_off, it.json_len);
      return true;
    }
    if (left == 0) return false;
    --left;
    uint32_t len = 0;
    if (std::fread(&cur, sizeof(cur), 1, file) != 1 ||
        std::fread(&len, sizeof(len), 1, file) != 1) {
      return Status::IOError("import sort: temporary file read failed");
    }
    json_buf.resize(len);
    if (len > 0 && std::fread(json_buf.data(), 1, len, file) != len) {
      return Status::IOError("import sort: temporary file read failed");
    }
    json = json_buf;
    return true;
  }
};

EventSorter::EventSorter(size_t memory_budget) : budget_(memory_budget) {}
EventSorter::~EventSorter() = default;

bool EventSorter::Less(const PendingEvent& a, const PendingEvent& b) {
  if (a.track != b.track) return a.track < b.track;
  if (a.ts != b.ts) return a.ts < b.ts;
  if (a.order != b.order) return a.order < b.order;
  return a.seq < b.seq;
}

Status EventSorter::Add(const PendingEvent& e, std::string_view json) {
  // Half the budget for the items, half for their JSON, so that the buffers never grow past
  // the budget by doubling: a first small reservation (most imported files are small), then
  // the whole half at once when that is full. (Reserving the whole budget for every import
  // cost little natively, untouched pages being free, but under ASan it mapped and poisoned
  // 64 MB per import: a quarter of import_test's every-cut test.)
  const size_t item_cap = std::max<size_t>(1024, budget_ / 2 / sizeof(Item));
  const size_t arena_cap = budget_ / 2;
  auto next_cap = [](size_t cap, size_t need, size_t first, size_t full) {
    if (need <= cap) return cap;
    return need <= first ? first : full;
  };
  items_.reserve(
      next_cap(items_.capacity(), items_.size() + 1, std::min(kFirstItems, item_cap), item_cap));
  arena_.reserve(next_cap(arena_.capacity(), arena_.size() + json.size(),
                          std::min(kFirstArenaBytes, arena_cap), arena_cap));
  if (!items_.empty() && (items_.size() == item_cap || arena_.size() + json.size() > budget_ / 2)) {
    TRACEDB_RETURN_IF_ERROR(Spill());
  }
  Item it;
  it.e = e;
  it.json_off = arena_.size();
  it.json_len = static_cast<uint32_t>(json.size());
  arena_.append(json);
  items_.push_back(it);
  ++count_;
  return Status::Ok();
}

void EventSorter::SortBuffer() {
  std::sort(items_.begin(), items_.end(),
            [](const Item& a, const Item& b) { return Less(a.e, b.e); });
}

Status EventSorter::Spill() {
  SortBuffer();
  auto run = std::make_unique<Run>();
  run->file = std::tmpfile();
  if (run->file == nullptr) return Status::FromErrno("import sort: temporary file", errno);
  std::setvbuf(run->file, nullptr, _IOFBF, 1 << 16);
  for (const Item& it : items_) {
    if (std::fwrite(&it.e, sizeof(it.e), 1, run->file) != 1 ||
        std::fwrite(&it.json_len, sizeof(it.json_len), 1, run->file) != 1 ||
        (it.json_len > 0 &&
         std::fwrite(arena_.data() + it.json_off, 1, it.json_len, run->file) != it.json_len)) {
      return Status::FromErrno("import sort: temporary file write", errno);
    }
  }
  if (std::fflush(run->file) != 0 || std::fseek(run->file, 0, SEEK_SET) != 0) {
    return Status::FromErrno("import sort: temporary file", errno);
  }
  run->left = items_.size();
  runs_.push_back(std::move(run));
  items_.clear();
  arena_.clear();
  return Status::Ok();
}

Status EventSorter::Drain(const std::function<Status(const PendingEvent&, std::string_view)>& fn) {
  SortBuffer();
  std::vector<std::unique_ptr<Run>> runs = std::move(runs_);
  runs_.clear();
  if (!items_.empty()) {
    auto mem = std::make_unique<Run>();
    mem->items = &items_;
    mem->arena = &arena_;
    runs.push_back(std::move(mem));
  }
  auto greater = [](const Run* a, const Run* b) { return Less(b->cur, a->cur); };
  std::priority_queue<Run*, std::vector<Run*>, decltype(greater)> heap(greater);
  for (auto& r : runs) {
    TRACEDB_ASSIGN_OR_RETURN(bool has, r->Advance());
    if (has) heap.push(r.get());
  }
  Status status;
  while (!heap.empty()) {
    Run* r = heap.top();
    heap.pop();
    status = fn(r->cur, r->json);
    if (!status.ok()) break;
    TRACEDB_ASSIGN_OR_RETURN(bool has, r->Advance());
    if (has) heap.push(r);
  }
  items_.clear();
  arena_.clear();
  count_ = 0;
  return status;
}

}  // namespace tracedb::query
