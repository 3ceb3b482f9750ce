// Nonblocking and persistent requests. See requests.h and docs/mpi-capture.md, "Flows".
#include "recorder/mpi/requests.h"

#include <cstring>

namespace tracedb::mpi {

RequestTable g_requests;
RequestTable g_messages;

namespace {

constexpr uint32_t kReqFields =
    TRACEDB_ARG_BYTES | TRACEDB_ARG_PEER | TRACEDB_ARG_TAG | TRACEDB_ARG_COMM;

// Arguments of completed or started requests, on the stack for the usual few.
class ArgsList {
 public:
  explicit ArgsList(int capacity) noexcept {
    if (capacity > kStack) {
      heap_ = static_cast<tracedb_args*>(std::malloc(sizeof(tracedb_args) * capacity));
      capacity_ = heap_ != nullptr ? capacity : 0;
    } else {
      capacity_ = kStack;
    }
  }
  ~ArgsList() { std::free(heap_); }
  ArgsList(const ArgsList&) = delete;
  ArgsList& operator=(const ArgsList&) = delete;
  // When full (out of memory) the request is still processed, only not reported one by one.
  void Add(const tracedb_args& a) noexcept {
    if (size_ < capacity_) data()[size_++] = a;
  }
  int size() const { return size_; }
  const tracedb_args& operator[](int i) const { return data()[i]; }

 private:
  static constexpr int kStack = 16;
  tracedb_args* data() { return heap_ != nullptr ? heap_ : stack_; }
  const tracedb_args* data() const { return heap_ != nullptr ? heap_ : stack_; }
  tracedb_args stack_[kStack];
  tracedb_args* heap_ = nullptr;
  int capacity_ = 0;
  int size_ = 0;
};

uintptr_t NullKey() noexcept { return Key(MPI_REQUEST_NULL); }

void FromInfo(const ReqInfo& info, tracedb_args* a) noexcept {
  a->fields = info.fields;
  a->bytes = info.bytes;
  a->peer = info.peer;
  a->tag = info.tag;
  a->comm = info.comm;
  if (info.flow != 0) SetFlow(a, info.flow);
}

// The request `key` completed (status `st`, may be nullptr): forgets it and describes it in `a`.
bool TakeDone(uintptr_t key, const MPI_Status* st, tracedb_args* a) noexcept {
  if (key == 0 || key == NullKey()) return false;
  ReqInfo info;
  if (!g_requests.Complete(key, &info)) return false;
  if (info.idup != nullptr) FinishIdup(info.idup, true);
  FromInfo(info, a);
  if ((info.flags & ReqInfo::kRecv) != 0 && st != nullptr) {
    SetBytes(a, StatusBytes(st));
    SetPeer(a, st->MPI_SOURCE);
    SetTag(a, st->MPI_TAG);
  }
  return true;
}

// The call event of a call that completed (or started) the requests in `done`, plus one
// zero-length `each` event per request at `each_ts` when there are several.
void EmitMany(LazyName& name, int64_t t0, int64_t t1, const ArgsList& done, LazyName& each,
              int64_t each_ts) noexcept {
  if (done.size() == 1) {
    Emit(name, t0, t1, &done[0]);
    return;
  }
  tracedb_args call{};
  uint64_t total = 0;
  bool any = false;
  for (int i = 0; i < done.size(); ++i) {
    if ((done[i].fields & TRACEDB_ARG_BYTES) != 0) {
      total += done[i].bytes;
      any = true;
    }
  }
  if (any) SetBytes(&call, total);
  Emit(name, t0, t1, &call);
  for (int i = 0; i < done.size(); ++i) {
    if ((done[i].fields & TRACEDB_ARG_FLOW) != 0) Emit(each, each_ts, each_ts, &done[i]);
  }
}

}  // namespace

bool TrackRequest(MPI_Request r, const tracedb_args& a, uint32_t flags,
                  PendingIdup* idup) noexcept {
  ReqInfo info;
  info.flow = (a.fields & TRACEDB_ARG_FLOW) != 0 ? a.flow : 0;
  info.bytes = a.bytes;
  info.peer = a.peer;
  info.tag = a.tag;
  info.comm = a.comm;
  info.fields = a.fields & kReqFields;
  info.flags = flags | ((flags & ReqInfo::kPersistent) != 0 ? 0u : uint32_t{ReqInfo::kActive});
  info.idup = idup;
  return g_requests.Insert(Key(r), info);
}

void RememberMessage(MPI_Message m, const HandleState* hs) noexcept {
  if (m == MPI_MESSAGE_NULL) return;
  ReqInfo info;
  info.comm = hs != nullptr ? hs->id : kUnknownComm;
  info.flags = ReqInfo::kActive;
  g_messages.Insert(Key(m), info);
}

MessageComm TakeMessage(MPI_Message m) noexcept {
  MessageComm mc;
  ReqInfo info;
  if (m != MPI_MESSAGE_NULL && g_messages.Remove(Key(m), &info)) mc.id = info.comm;
  return mc;
}

KeyCopy::KeyCopy(int n, const MPI_Request* requests) noexcept {
  keys_ = n <= 32 ? stack_ : static_cast<uintptr_t*>(std::malloc(sizeof(uintptr_t) * n));
  if (keys_ == nullptr) return;
  for (int i = 0; i < n; ++i) keys_[i] = Key(requests[i]);
}

StatusArray::StatusArray(int n, MPI_Status* user) noexcept : pass_(user) {
  if (user != MPI_STATUSES_IGNORE) {
    read_ = user;
    return;
  }
  if (n <= 0) return;
  local_ = n <= 8 ? stack_ : static_cast<MPI_Status*>(std::malloc(sizeof(MPI_Status) * n));
  if (local_ == nullptr) return;  // out of memory: MPI gets MPI_STATUSES_IGNORE, as asked
  pass_ = local_;
  read_ = local_;
}

void AfterWaitOne(LazyName& name, bool rec, int64_t t0, int64_t t1, int rc, uintptr_t key,
                  bool completed, const MPI_Status* st) noexcept {
  tracedb_args a{};
  if (completed) TakeDone(key, rc == MPI_SUCCESS ? st : nullptr, &a);
  if (rec) Emit(name, t0, t1, &a);
}

void AfterWaitAll(LazyName& name, bool rec, int64_t t0, int64_t t1, int rc, int count,
                  const uintptr_t* keys, bool completed, const MPI_Status* sts) noexcept {
  const bool all = completed && rc == MPI_SUCCESS;
  const bool per_status = rc == MPI_ERR_IN_STATUS && sts != nullptr;
  ArgsList done(rec && (all || per_status) ? count : 0);
  if (keys != nullptr && (all || per_status)) {
    for (int i = 0; i < count; ++i) {
      if (per_status && sts[i].MPI_ERROR == MPI_ERR_PENDING) continue;
      tracedb_args d{};
      if (TakeDone(keys[i], sts != nullptr ? &sts[i] : nullptr, &d)) done.Add(d);
    }
  }
  if (rec) EmitMany(name, t0, t1, done, g_request_complete_name, t1);
}

void AfterWaitSome(LazyName& name, bool rec, int64_t t0, int64_t t1, int rc, const uintptr_t* keys,
                   int outcount, const int* indices, const MPI_Status* sts) noexcept {
  const bool ok = (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && outcount != MPI_UNDEFINED &&
                  outcount > 0 && keys != nullptr;
  ArgsList done(rec && ok ? outcount : 0);
  if (ok) {
    for (int j = 0; j < outcount; ++j) {
      tracedb_args d{};
      if (TakeDone(keys[indices[j]], sts != nullptr ? &sts[j] : nullptr, &d)) done.Add(d);
    }
  }
  if (rec) EmitMany(name, t0, t1, done, g_request_complete_name, t1);
}

void AfterStart(LazyName& name, bool rec, int64_t t0, int64_t t1, int rc, uintptr_t key) noexcept {
  if (!rec) return;
  tracedb_args a{};
  ReqInfo info;
  if (rc == MPI_SUCCESS && g_requests.Start(key, NewFlow(), &info)) FromInfo(info, &a);
  Emit(name, t0, t1, &a);
}

void AfterStartAll(LazyName& name, bool rec, int64_t t0, int64_t t1, int rc, int count,
                   const MPI_Request* requests) noexcept {
  if (!rec) return;
  ArgsList started(rc == MPI_SUCCESS ? count : 0);
  if (rc == MPI_SUCCESS) {
    for (int i = 0; i < count; ++i) {
      ReqInfo info;
      if (!g_requests.Start(Key(requests[i]), NewFlow(), &info)) continue;
      tracedb_args a{};
      FromInfo(info, &a);
      started.Add(a);
    }
  }
  EmitMany(name, t0, t1, started, g_request_start_name, t0);
}

void AfterRequestFree(LazyName& name, bool rec, int64_t t0, int64_t t1, int rc,
                      uintptr_t key) noexcept {
  tracedb_args a{};
  ReqInfo info;
  if (rc == MPI_SUCCESS && key != NullKey() && g_requests.Remove(key, &info)) {
    if (info.idup != nullptr) FinishIdup(info.idup, false);
    if ((info.flags & ReqInfo::kActive) != 0) FromInfo(info, &a);
  }
  if (rec) Emit(name, t0, t1, &a);
}

}  // namespace tracedb::mpi
