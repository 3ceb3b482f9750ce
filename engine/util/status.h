// Status and StatusOr<T>: the error type returned everywhere in engine/ and query/.
//
// A Status is cheap to return when OK (one null pointer). Messages name the object and the reason,
// e.g. "segment rank-3/seg-1234-000012.tds: block 7 at offset 81920: bad CRC".
// Thread safety: values; no shared state.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tracedb {

class [[nodiscard]] Status {
 public:
  enum class Code : int {
    kOk = 0,
    kNotFound = 1,
    kCorruption = 2,
    kInvalidArgument = 3,
    kIOError = 4,
    kNotSupported = 5,
    kInternal = 6,
    kAborted = 7,
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status NotFound(std::string_view msg) { return Status(Code::kNotFound, msg); }
  static Status Corruption(std::string_view msg) { return Status(Code::kCorruption, msg); }
  static Status InvalidArgument(std::string_view msg) {
    return Status(Code::kInvalidArgument, msg);
  }
  static Status IOError(std::string_view msg) { return Status(Code::kIOError, msg); }
  static Status NotSupported(std::string_view msg) { return Status(Code::kNotSupported, msg); }
  static Status Internal(std::string_view msg) { return Status(Code::kInternal, msg); }
  static Status Aborted(std::string_view msg) { return Status(Code::kAborted, msg); }
  // An IOError carrying strerror(err).
  static Status FromErrno(std::string_view context, int err);

  bool ok() const { return rep_ == nullptr; }
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  bool IsCorruption() const { return code() == Code::kCorruption; }
  bool IsNotFound() const { return code() == Code::kNotFound; }
  const std::string& message() const;
  // "Corruption: <message>", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<prefix>: <message>"; OK stays OK.
  Status WithContext(std::string_view prefix) const;

 private:
  struct Rep {
    Code code;
    std::string message;
  };
  Status(Code code, std::string_view msg)
      : rep_(std::make_shared<Rep>(Rep{code, std::string(msg)})) {}
  std::shared_ptr<const Rep> rep_;
};

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status s) : status_(std::move(s)) {}    // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tracedb

// Returns from the enclosing function when `expr` yields a non-OK Status.
#define TRACEDB_RETURN_IF_ERROR(expr)   \
  do {                                  \
    ::tracedb::Status _tdb_st = (expr); \
    if (!_tdb_st.ok()) return _tdb_st;  \
  } while (0)

#define TRACEDB_CONCAT_INNER_(a, b) a##b
#define TRACEDB_CONCAT_(a, b) TRACEDB_CONCAT_INNER_(a, b)

// Declares `lhs` from a StatusOr, or returns its Status.
#define TRACEDB_ASSIGN_OR_RETURN(lhs, expr)              \
  auto TRACEDB_CONCAT_(_tdb_so_, __LINE__) = (expr);     \
  if (!TRACEDB_CONCAT_(_tdb_so_, __LINE__).ok())         \
    return TRACEDB_CONCAT_(_tdb_so_, __LINE__).status(); \
  lhs = std::move(TRACEDB_CONCAT_(_tdb_so_, __LINE__)).value()
