// EventSorter implementation: sorted runs spilled with tmpfile(3), merged with a heap. See
// event_sorter.h.
#include "query/import/event_sorter.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <queue>

namespace tracedb::query {
namespace {

// The buffers' reservations (see Add): from the small ones, doubling up to the first caps.
constexpr size_t kSmallItems = 256;
constexpr size_t kSmallArenaBytes = 16 << 10;
constexpr size_t kFirstItems = 16384;
constexpr size_t kFirstArenaBytes = 1 << 20;
constexpr size_t kIoBytes = 1 << 16;  // a spilled run's read buffer, and Spill's write batches

// A spilled event: flags, op, track, ts, seq, name, cat, JSON length, then the optional fields
// the flags announce, then the JSON bytes. Little-endian as the machine writes it (the file is
// this process's own, read back by it).
enum : uint8_t {
  kHasDur = 1,
  kHasValue = 2,
  kHasArgs = 4,
  kOrderShift = 3,  // two bits: how `order` is found
};
enum : uint8_t { kOrderZero = 0, kOrderBeginEnd = 1, kOrderMinusDur = 2, kOrderExplicit = 3 };
constexpr size_t kHeadBytes = 1 + 1 + 4 + 8 + 8 + 4 + 4 + 4;

template <typename T>
void Put(char** p, const T& v) {
  std::memcpy(*p, &v, sizeof(T));
  *p += sizeof(T);
}
template <typename T>
void Take(const char** p, T* v) {
  std::memcpy(v, *p, sizeof(T));
  *p += sizeof(T);
}

void Encode(const PendingEvent& e, std::string_view json, std::string* out) {
  uint64_t value_bits;
  std::memcpy(&value_bits, &e.value, sizeof(value_bits));
  uint8_t order_kind = kOrderExplicit;
  if (e.order == 0) {
    order_kind = kOrderZero;
  } else if (e.order == kBeginEndOrder) {
    order_kind = kOrderBeginEnd;
  } else if (e.dur != INT64_MIN && e.order == -e.dur) {
    order_kind = kOrderMinusDur;
  }
  const uint8_t flags =
      static_cast<uint8_t>((e.dur != 0 ? kHasDur : 0) | (value_bits != 0 ? kHasValue : 0) |
                           (e.args.mask != 0 ? kHasArgs : 0) | (order_kind << kOrderShift));
  const size_t size = kHeadBytes + ((flags & kHasDur) ? sizeof(e.dur) : 0) +
                      ((flags & kHasValue) ? sizeof(e.value) : 0) +
                      ((flags & kHasArgs) ? sizeof(e.args) : 0) +
                      (order_kind == kOrderExplicit ? sizeof(e.order) : 0) + json.size();
  const size_t at = out->size();
  out->resize(at + size);
  char* p = out->data() + at;
  Put(&p, flags);
  Put(&p, static_cast<uint8_t>(e.op));
  Put(&p, e.track);
  Put(&p, e.ts);
  Put(&p, e.seq);
  Put(&p, e.name);
  Put(&p, e.cat);
  Put(&p, static_cast<uint32_t>(json.size()));
  if (flags & kHasDur) Put(&p, e.dur);
  if (flags & kHasValue) Put(&p, e.value);
  if (flags & kHasArgs) Put(&p, e.args);
  if (order_kind == kOrderExplicit) Put(&p, e.order);
  if (!json.empty()) std::memcpy(p, json.data(), json.size());
}

}  // namespace

// A sorted sequence of events: a spilled file, or the buffer still in memory.
struct EventSorter::Run {
  FILE* file = nullptr;  // spilled: the encoded events in order
  uint64_t left = 0;     // items not yet read
  std::string buf;       // bytes read from `file`; [pos, buf.size()) not yet decoded
  size_t pos = 0;
  const std::vector<Item>* items = nullptr;  // in memory, in the order of `order`
  const std::vector<uint32_t>* order = nullptr;
  const std::string* arena = nullptr;
  size_t index = 0;
  PendingEvent cur;
  std::string_view json;

  ~Run() {
    if (file) std::fclose(file);
  }

  // Makes at least n bytes available from pos; false when the file ends first.
  bool Need(size_t n) {
    if (buf.size() - pos >= n) return true;
    buf.erase(0, pos);
    pos = 0;
    const size_t have = buf.size();
    const size_t want = std::max(n, kIoBytes);
    buf.resize(want);
    const size_t got = std::fread(buf.data() + have, 1, want - have, file);
    buf.resize(have + got);
    return buf.size() >= n;
  }

  // Loads the next item into cur/json; false at the end.
  StatusOr<bool> Advance() {
    if (items) {
      if (index == order->size()) return false;
      const Item& it = (*items)[(*order)[index++]];
      cur = it.e;
      json = std::string_view(arena->data() + it.json_off, it.json_len);
      return true;
    }
    if (left == 0) return false;
    --left;
    const Status bad = Status::IOError("import sort: temporary file read failed");
    if (!Need(kHeadBytes)) return bad;
    const char* p = buf.data() + pos;
    uint8_t flags, op;
    uint32_t len;
    Take(&p, &flags);
    Take(&p, &op);
    cur = PendingEvent();
    cur.op = static_cast<PendingOp>(op);
    Take(&p, &cur.track);
    Take(&p, &cur.ts);
    Take(&p, &cur.seq);
    Take(&p, &cur.name);
    Take(&p, &cur.cat);
    Take(&p, &len);
    const uint8_t order_kind = (flags >> kOrderShift) & 3;
    const size_t rest = ((flags & kHasDur) ? sizeof(cur.dur) : 0) +
                        ((flags & kHasValue) ? sizeof(cur.value) : 0) +
                        ((flags & kHasArgs) ? sizeof(cur.args) : 0) +
                        (order_kind == kOrderExplicit ? sizeof(cur.order) : 0) + len;
    pos += kHeadBytes;
    if (!Need(rest)) return bad;
    p = buf.data() + pos;
    if (flags & kHasDur) Take(&p, &cur.dur);
    if (flags & kHasValue) Take(&p, &cur.value);
    if (flags & kHasArgs) Take(&p, &cur.args);
    switch (order_kind) {
      case kOrderZero:
        cur.order = 0;
        break;
      case kOrderBeginEnd:
        cur.order = kBeginEndOrder;
        break;
      case kOrderMinusDur:
        cur.order = -cur.dur;
        break;
      default:
        Take(&p, &cur.order);
    }
    json = std::string_view(p, len);
    pos += rest;
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
  // the budget by doubling: small reservations doubled up to a first cap (most imported files
  // are small), then the whole half at once when that is full. (Reserving the whole budget for
  // every import cost little natively, untouched pages being free, but under ASan it mapped and
  // poisoned 64 MB per import: a quarter of import_test's every-cut test; the first caps, 1.6 and
  // 1 MB, still cost a tenth of it.) The sort's permutation takes 4 bytes more per item, counted
  // in the items' half.
  const size_t item_cap = std::max<size_t>(1024, budget_ / 2 / (sizeof(Item) + sizeof(uint32_t)));
  const size_t arena_cap = budget_ / 2;
  auto next_cap = [](size_t cap, size_t need, size_t small, size_t first, size_t full) {
    if (need <= cap) return cap;
    if (need > first) return full;
    return std::min(first, std::max({small, need, 2 * cap}));
  };
  items_.reserve(next_cap(items_.capacity(), items_.size() + 1, std::min(kSmallItems, item_cap),
                          std::min(kFirstItems, item_cap), item_cap));
  arena_.reserve(next_cap(arena_.capacity(), arena_.size() + json.size(),
                          std::min(kSmallArenaBytes, arena_cap),
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
  const size_t n = items_.size();
  order_.resize(n);
  uint32_t max_track = 0;
  for (const Item& it : items_) max_track = std::max(max_track, it.e.track);
  auto less = [this](uint32_t a, uint32_t b) { return Less(items_[a].e, items_[b].e); };
  if (max_track > 4 * n + 1024) {
    // Tracks too sparse to count: a plain sort.
    for (size_t i = 0; i < n; ++i) order_[i] = static_cast<uint32_t>(i);
    std::sort(order_.begin(), order_.end(), less);
    return;
  }
  // A stable counting sort by track...
  bucket_.assign(static_cast<size_t>(max_track) + 2, 0);
  for (const Item& it : items_) ++bucket_[it.e.track + 1];
  for (size_t t = 1; t < bucket_.size(); ++t) bucket_[t] += bucket_[t - 1];
  for (size_t i = 0; i < n; ++i) order_[bucket_[items_[i].e.track]++] = static_cast<uint32_t>(i);
  // ... then each track's events, in file order now, sorted only when out of order. (bucket_[t]
  // is now the end of track t.)
  size_t begin = 0;
  for (size_t t = 0; t + 1 < bucket_.size(); ++t) {
    const size_t end = bucket_[t];
    for (size_t j = begin + 1; j < end; ++j) {
      if (less(order_[j], order_[j - 1])) {
        std::sort(order_.begin() + static_cast<std::ptrdiff_t>(begin),
                  order_.begin() + static_cast<std::ptrdiff_t>(end), less);
        break;
      }
    }
    begin = end;
  }
}

Status EventSorter::Spill() {
  SortBuffer();
  auto run = std::make_unique<Run>();
  run->file = std::tmpfile();
  if (run->file == nullptr) return Status::FromErrno("import sort: temporary file", errno);
  std::setvbuf(run->file, nullptr, _IONBF, 0);  // written in batches of kIoBytes and more
  out_.clear();
  out_.reserve(2 * kIoBytes);
  for (uint32_t i : order_) {
    const Item& it = items_[i];
    Encode(it.e, std::string_view(arena_.data() + it.json_off, it.json_len), &out_);
    if (out_.size() >= kIoBytes) {
      if (std::fwrite(out_.data(), 1, out_.size(), run->file) != out_.size()) {
        return Status::FromErrno("import sort: temporary file write", errno);
      }
      out_.clear();
    }
  }
  if (!out_.empty() && std::fwrite(out_.data(), 1, out_.size(), run->file) != out_.size()) {
    return Status::FromErrno("import sort: temporary file write", errno);
  }
  if (std::fflush(run->file) != 0 || std::fseek(run->file, 0, SEEK_SET) != 0) {
    return Status::FromErrno("import sort: temporary file", errno);
  }
  run->left = items_.size();
  runs_.push_back(std::move(run));
  items_.clear();
  arena_.clear();
  order_.clear();
  return Status::Ok();
}

Status EventSorter::Drain(const std::function<Status(const PendingEvent&, std::string_view)>& fn) {
  SortBuffer();
  std::vector<std::unique_ptr<Run>> runs = std::move(runs_);
  runs_.clear();
  if (!items_.empty()) {
    auto mem = std::make_unique<Run>();
    mem->items = &items_;
    mem->order = &order_;
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
  order_.clear();
  count_ = 0;
  return status;
}

}  // namespace tracedb::query
