// The boundary between SQLite and our callbacks: an exception must never unwind through SQLite's
// C frames into the host (sqlite3, Python, a view server). Guard<F>::Call has F's signature, runs
// F, and turns an exception (std::bad_alloc from a size a hostile file asked for, anything else)
// into an SQLite error: the message goes to the virtual table (zErrMsg) or the function's result
// context, an int callback returns SQLITE_ERROR, a void one returns after setting the error.
// Every module (events, the views' table-valued functions) and every SQL function is
// registered through it (query/sql/vtab_module.h, query/sql/events_vtab.cc, query/sql/functions.cc,
// engine/compact/shard_catalog.cc). docs/security.md.
// Thread safety: as the callback it wraps.
#pragma once

#include <exception>
#include <new>
#include <string>
#include <type_traits>

#include "engine/db/sqlite_api.h"

namespace tracedb::engine {
namespace guard_detail {

inline void Report(sqlite3_vtab* t, const std::string& m) {
  if (t == nullptr) return;
  sqlite3_free(t->zErrMsg);
  t->zErrMsg = sqlite3_mprintf("%s", m.c_str());
}
inline void Report(sqlite3_vtab_cursor* c, const std::string& m) {
  if (c != nullptr) Report(c->pVtab, m);
}
inline void Report(sqlite3_context* c, const std::string& m) {
  if (c != nullptr) sqlite3_result_error(c, m.c_str(), -1);
}
inline void Report(char** err, const std::string& m) {  // xConnect's pzErr
  if (err == nullptr) return;
  sqlite3_free(*err);
  *err = sqlite3_mprintf("%s", m.c_str());
}
template <typename T>
void Report(T, const std::string&) {}  // arguments that carry no error

template <typename... A>
void ReportAll(const std::string& m, A... a) {
  (Report(a, m), ...);
}

}  // namespace guard_detail

template <auto F>
struct Guard;

template <typename R, typename... A, R (*F)(A...)>
struct Guard<F> {
  static R Call(A... a) noexcept {
    std::string what;
    try {
      return F(a...);
    } catch (const std::bad_alloc&) {
      what = "tracedb: out of memory (a size read from the database is too large?)";
    } catch (const std::exception& e) {
      what = std::string("tracedb: ") + e.what();
    } catch (...) {
      what = "tracedb: unexpected exception";
    }
    try {
      guard_detail::ReportAll(what, a...);
    } catch (...) {  // the message itself could not be allocated: the code still says error
    }
    if constexpr (std::is_same_v<R, int>) {
      return SQLITE_ERROR;
    } else if constexpr (!std::is_void_v<R>) {
      return R{};
    }
  }
};

// The guarded function pointer of F (nullptr stays nullptr).
template <auto F>
constexpr auto Guarded() {
  if constexpr (std::is_same_v<decltype(F), std::nullptr_t>) {
    return nullptr;
  } else {
    return &Guard<F>::Call;
  }
}

}  // namespace tracedb::engine
