// tracedb recorder: header-only C++ RAII helpers over the C ABI in recorder.h.
//
//   tracedb::Session session("traces");          // or set TRACEDB_DIR
//   static const tracedb::Name kForward("forward");
//   { tracedb::Span span(kForward); ... }       // begin here, end at scope exit
//   TRACEDB_SPAN("backward");                    // the same with a static name
//
// Everything here is noexcept and as thread-safe as the C ABI. Define TRACEDB_DISABLE to make
// the TRACEDB_* macros compile to nothing.
#ifndef TRACEDB_RECORDER_HPP_
#define TRACEDB_RECORDER_HPP_

#include <cstdint>

#include "tracedb/recorder.h"

namespace tracedb {

enum class Category : uint32_t {
  kUser = TRACEDB_CAT_USER,
  kCompute = TRACEDB_CAT_COMPUTE,
  kComm = TRACEDB_CAT_COMM,
  kPhase = TRACEDB_CAT_PHASE,
  kMpi = TRACEDB_CAT_MPI,
  kNccl = TRACEDB_CAT_NCCL,
  kCuda = TRACEDB_CAT_CUDA,
  kStep = TRACEDB_CAT_STEP,
};

// An interned name; construct once (e.g. as a function-local static) and reuse.
class Name {
 public:
  explicit Name(const char* name) noexcept : id_(tracedb_intern(name)) {}
  uint32_t id() const noexcept { return id_; }

 private:
  uint32_t id_;
};

// A named lane (track), e.g. one per tensor.
class Lane {
 public:
  explicit Lane(const char* name) noexcept : id_(tracedb_lane(name)) {}
  uint32_t id() const noexcept { return id_; }

 private:
  uint32_t id_;
};

// Builder for typed communication arguments.
class Args {
 public:
  Args& Bytes(uint64_t v) noexcept {
    a_.bytes = v;
    a_.fields |= TRACEDB_ARG_BYTES;
    return *this;
  }
  Args& Peer(int32_t v) noexcept {
    a_.peer = v;
    a_.fields |= TRACEDB_ARG_PEER;
    return *this;
  }
  Args& Tag(int32_t v) noexcept {
    a_.tag = v;
    a_.fields |= TRACEDB_ARG_TAG;
    return *this;
  }
  Args& Comm(uint32_t v) noexcept {
    a_.comm = v;
    a_.fields |= TRACEDB_ARG_COMM;
    return *this;
  }
  Args& Seq(uint64_t v) noexcept {
    a_.seq = v;
    a_.fields |= TRACEDB_ARG_SEQ;
    return *this;
  }
  Args& Flow(uint64_t v) noexcept {
    a_.flow = v;
    a_.fields |= TRACEDB_ARG_FLOW;
    return *this;
  }
  const tracedb_args* get() const noexcept { return &a_; }

 private:
  tracedb_args a_{};
};

// Starts recording for its lifetime. ok() tells whether the start succeeded.
class Session {
 public:
  explicit Session(const char* dir) noexcept : rc_(tracedb_start(dir)) {}
  ~Session() {
    if (rc_ == TRACEDB_OK) tracedb_stop();
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  bool ok() const noexcept { return rc_ == TRACEDB_OK; }
  int code() const noexcept { return rc_; }

 private:
  int rc_;
};

// A span from construction to destruction, on the thread's track or on a lane.
class Span {
 public:
  explicit Span(const Name& name, Category cat = Category::kUser, uint32_t lane = 0,
                const Args* args = nullptr) noexcept
      : name_(name.id()), cat_(static_cast<uint32_t>(cat)), lane_(lane) {
    tracedb_begin_ex(name_, cat_, lane_, args ? args->get() : nullptr);
  }
  Span(const Name& name, Category cat, const Lane& lane, const Args* args = nullptr) noexcept
      : Span(name, cat, lane.id(), args) {}
  ~Span() { tracedb_end_ex(name_, cat_, lane_, nullptr); }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  uint32_t name_;
  uint32_t cat_;
  uint32_t lane_;
};

inline void Instant(const Name& name, Category cat = Category::kUser, uint32_t lane = 0) noexcept {
  tracedb_instant_ex(name.id(), static_cast<uint32_t>(cat), lane, nullptr);
}
inline void Counter(const Name& name, double value) noexcept { tracedb_counter(name.id(), value); }
inline void Step(int64_t step) noexcept { tracedb_step(step); }
inline int64_t Now() noexcept { return tracedb_now(); }

}  // namespace tracedb

#define TRACEDB_CONCAT_INNER_(a, b) a##b
#define TRACEDB_CONCAT_(a, b) TRACEDB_CONCAT_INNER_(a, b)

#ifdef TRACEDB_DISABLE
#define TRACEDB_SPAN(name_literal) \
  do {                             \
  } while (0)
#define TRACEDB_INSTANT(name_literal) \
  do {                                \
  } while (0)
#else
// A span named by a string literal, from here to the end of the enclosing scope.
#define TRACEDB_SPAN(name_literal)                                                     \
  static const ::tracedb::Name TRACEDB_CONCAT_(tracedb_name_, __LINE__)(name_literal); \
  ::tracedb::Span TRACEDB_CONCAT_(tracedb_span_, __LINE__)(TRACEDB_CONCAT_(tracedb_name_, __LINE__))
#define TRACEDB_INSTANT(name_literal)                                \
  do {                                                               \
    static const ::tracedb::Name tracedb_instant_name(name_literal); \
    ::tracedb::Instant(tracedb_instant_name);                        \
  } while (0)
#endif

#endif  // TRACEDB_RECORDER_HPP_
