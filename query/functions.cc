// SQL functions. See functions.h.
#include "query/functions.h"

#include "query/human_units.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <new>
#include <string>
#include <string_view>
#include <vector>

namespace tracedb::query {
namespace {

// Aggregate state lives in SQLite's aggregate context as a pointer we own.
template <typename T>
T* State(sqlite3_context* ctx, bool create) {
  auto** p = static_cast<T**>(sqlite3_aggregate_context(ctx, create ? sizeof(T*) : 0));
  if (p == nullptr) return nullptr;
  if (*p == nullptr && create) *p = new (std::nothrow) T();
  return *p;
}

template <typename T>
void Release(sqlite3_context* ctx) {
  auto** p = static_cast<T**>(sqlite3_aggregate_context(ctx, 0));
  if (p != nullptr) {
    delete *p;
    *p = nullptr;
  }
}

struct Percentile {
  std::vector<double> values;
  double p = -1;
  bool all_int = true;
};

void PercentileStep(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return;
  auto* s = State<Percentile>(ctx, true);
  if (s == nullptr) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  const double p = argc > 1 ? sqlite3_value_double(argv[1]) : 50.0;
  if (p < 0 || p > 100 || std::isnan(p)) {
    sqlite3_result_error(ctx, "percentile: p must be between 0 and 100", -1);
    return;
  }
  s->p = p;
  if (sqlite3_value_numeric_type(argv[0]) != SQLITE_INTEGER) s->all_int = false;
  try {
    s->values.push_back(sqlite3_value_double(argv[0]));
  } catch (...) {
    sqlite3_result_error_nomem(ctx);
  }
}

void PercentileFinal(sqlite3_context* ctx) {
  auto* s = State<Percentile>(ctx, false);
  if (s == nullptr || s->values.empty()) {
    sqlite3_result_null(ctx);
    Release<Percentile>(ctx);
    return;
  }
  // Nearest rank: the smallest value with at least p% of the values at or below it.
  const size_t n = s->values.size();
  size_t rank = static_cast<size_t>(std::ceil(s->p / 100.0 * static_cast<double>(n)));
  rank = std::clamp<size_t>(rank, 1, n);
  std::nth_element(s->values.begin(), s->values.begin() + static_cast<long>(rank - 1),
                   s->values.end());
  const double v = s->values[rank - 1];
  if (s->all_int) {
    sqlite3_result_int64(ctx, static_cast<sqlite3_int64>(v));
  } else {
    sqlite3_result_double(ctx, v);
  }
  Release<Percentile>(ctx);
}

struct Intervals {
  std::vector<std::pair<int64_t, int64_t>> a, b;  // [start, end)
};

int64_t UnionLength(std::vector<std::pair<int64_t, int64_t>>* v) {
  std::sort(v->begin(), v->end());
  int64_t total = 0, cur_s = 0, cur_e = INT64_MIN;
  for (const auto& [s, e] : *v) {
    if (s > cur_e) {
      if (cur_e != INT64_MIN) total += cur_e - cur_s;
      cur_s = s;
      cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (cur_e != INT64_MIN) total += cur_e - cur_s;
  return total;
}

// Merges sorted intervals into disjoint ones.
std::vector<std::pair<int64_t, int64_t>> Merge(std::vector<std::pair<int64_t, int64_t>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& iv : v) {
    if (!out.empty() && iv.first <= out.back().second) {
      out.back().second = std::max(out.back().second, iv.second);
    } else {
      out.push_back(iv);
    }
  }
  return out;
}

void IntervalStep(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL || sqlite3_value_type(argv[1]) == SQLITE_NULL) {
    return;
  }
  auto* s = State<Intervals>(ctx, true);
  if (s == nullptr) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  const int64_t ts = sqlite3_value_int64(argv[0]);
  const int64_t dur = std::max<int64_t>(0, sqlite3_value_int64(argv[1]));
  const bool b = argc > 2 && sqlite3_value_int(argv[2]) != 0;
  try {
    (b ? s->b : s->a).emplace_back(ts, ts + dur);
  } catch (...) {
    sqlite3_result_error_nomem(ctx);
  }
}

void CoveredFinal(sqlite3_context* ctx) {
  auto* s = State<Intervals>(ctx, false);
  sqlite3_result_int64(ctx, s ? UnionLength(&s->a) : 0);
  Release<Intervals>(ctx);
}

void OverlapFinal(sqlite3_context* ctx) {
  auto* s = State<Intervals>(ctx, false);
  int64_t total = 0;
  if (s != nullptr) {
    const auto a = Merge(s->a), b = Merge(s->b);
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
      const int64_t lo = std::max(a[i].first, b[j].first);
      const int64_t hi = std::min(a[i].second, b[j].second);
      if (hi > lo) total += hi - lo;
      if (a[i].second < b[j].second)
        ++i;
      else
        ++j;
    }
  }
  sqlite3_result_int64(ctx, total);
  Release<Intervals>(ctx);
}

void Log2Bucket(sqlite3_context* ctx, int, sqlite3_value** argv) {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  const double x = sqlite3_value_double(argv[0]);
  sqlite3_result_int64(ctx, x < 1 ? 0 : static_cast<sqlite3_int64>(std::floor(std::log2(x))));
}

// human_duration(ns) and human_bytes(n): query/human_units.h, as the shell prints them.
void HumanDurationFn(sqlite3_context* ctx, int, sqlite3_value** argv) {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  const std::string s = HumanDuration(sqlite3_value_double(argv[0]));
  sqlite3_result_text(ctx, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
}

void HumanBytesFn(sqlite3_context* ctx, int, sqlite3_value** argv) {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  const std::string s = HumanBytes(sqlite3_value_double(argv[0]));
  sqlite3_result_text(ctx, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && StartsWithNoCase(a, b);
}

std::string_view Text(sqlite3_value* v) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_value_text(v));
  return p ? std::string_view(p, static_cast<size_t>(sqlite3_value_bytes(v))) : std::string_view();
}

// activity(source, cat, name, gpu): 'compute', 'comm' or NULL; the table is in ActivityOf().
void Activity(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const char* a =
      ActivityOf(Text(argv[0]), Text(argv[1]), Text(argv[2]), sqlite3_value_int(argv[3]) != 0);
  if (a == nullptr) {
    sqlite3_result_null(ctx);
  } else {
    sqlite3_result_text(ctx, a, -1, SQLITE_STATIC);
  }
}

}  // namespace

const char* ActivityOf(std::string_view source, std::string_view cat, std::string_view name,
                       bool gpu) {
  static constexpr const char* kCompute = "compute";
  static constexpr const char* kComm = "comm";
  // Recorded events, tracedb's own exports, and BytePS's "Comm".
  if (cat == "compute") return kCompute;
  if (EqualsNoCase(cat, "comm") || cat == "mpi" || cat == "nccl") return kComm;
  // Horovod times only its own collectives: every phase is communication (NEGOTIATE_* is the
  // wait for the other ranks). So does Bluefog, except the FORWARD and "GRADIENT COMPT."
  // activities its optimizers' timeline hooks add (and a user's BACKWARD).
  // BytePS's comm.json holds only communication (its own queues), whatever the category.
  if (source == "horovod" || source == "byteps") return kComm;
  if (source == "bluefog") {
    return name == "FORWARD" || name == "BACKWARD" || name == "GRADIENT COMPT." ? kCompute : kComm;
  }
  // PyTorch profiler (Kineto): on a GPU rank, kernels (NCCL's are communication); on a CPU-only
  // rank, operators (gloo/NCCL/c10d collectives are communication; annotations are neither).
  if (cat == "kernel") return StartsWithNoCase(name, "nccl") ? kComm : kCompute;
  if (!gpu && (cat == "cpu_op" || cat == "user_annotation")) {
    if (StartsWithNoCase(name, "nccl:") || StartsWithNoCase(name, "gloo:") ||
        StartsWithNoCase(name, "c10d::") || StartsWithNoCase(name, "processgroup")) {
      return kComm;
    }
    return cat == "cpu_op" ? kCompute : nullptr;
  }
  return nullptr;
}

int RegisterFunctions(sqlite3* db) {
  const int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC;
  int rc = SQLITE_OK;
  auto add = [&](const char* name, int n, void (*fn)(sqlite3_context*, int, sqlite3_value**),
                 void (*step)(sqlite3_context*, int, sqlite3_value**),
                 void (*final)(sqlite3_context*)) {
    if (rc == SQLITE_OK) rc = sqlite3_create_function(db, name, n, flags, nullptr, fn, step, final);
  };
  add("percentile", 2, nullptr, PercentileStep, PercentileFinal);
  add("median", 1, nullptr, PercentileStep, PercentileFinal);
  add("covered_ns", 2, nullptr, IntervalStep, CoveredFinal);
  add("overlap_ns", 3, nullptr, IntervalStep, OverlapFinal);
  add("log2_bucket", 1, Log2Bucket, nullptr, nullptr);
  add("human_duration", 1, HumanDurationFn, nullptr, nullptr);
  add("human_bytes", 1, HumanBytesFn, nullptr, nullptr);
  add("activity", 4, Activity, nullptr, nullptr);
  return rc;
}

}  // namespace tracedb::query
