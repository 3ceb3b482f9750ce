// Status implementation. See status.h.
#include "engine/util/status.h"

#include <cstring>

namespace tracedb {

Status Status::FromErrno(std::string_view context, int err) {
  std::string msg(context);
  msg += ": ";
  msg += std::strerror(err);
  return Status(Code::kIOError, msg);
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  const char* name = "Error";
  switch (rep_->code) {
    case Code::kOk:
      name = "OK";
      break;
    case Code::kNotFound:
      name = "Not found";
      break;
    case Code::kCorruption:
      name = "Corruption";
      break;
    case Code::kInvalidArgument:
      name = "Invalid argument";
      break;
    case Code::kIOError:
      name = "IO error";
      break;
    case Code::kNotSupported:
      name = "Not supported";
      break;
    case Code::kInternal:
      name = "Internal error";
      break;
    case Code::kAborted:
      name = "Aborted";
      break;
  }
  return std::string(name) + ": " + rep_->message;
}

Status Status::WithContext(std::string_view prefix) const {
  if (ok()) return *this;
  std::string msg(prefix);
  msg += ": ";
  msg += rep_->message;
  return Status(rep_->code, msg);
}

}  // namespace tracedb
