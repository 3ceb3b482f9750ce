// SQL functions. See functions.h.
#include "query/sql/functions.h"
#include "engine/util/percentile_rank.h"

#include "engine/db/sqlite_guard.h"
#include "engine/util/human_units.h"
#include "engine/util/saturating.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
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

// percentile(x, p) and median(x): nearest rank, exact. Integers are kept as int64_t (no
// double conversion: exact beyond 2^53); the first value that is not an integer turns the
// group's values into doubles, as SQLite's sqlite3_value_double() reads them.
//
// Each registration owns a pool of value buffers: with rows in GROUP BY order (the `events`
// grouped scan, or SQLite's sorter) one group is open at a time, and its buffer is handed to
// the next group instead of being freed and grown again page by page (at 10M rows the regrowth
// and its page faults cost more than the selection itself). A connection keeps at most
// kPoolBuffers buffers of at most kPoolMaxValues values each.
struct PercentilePool {
  static constexpr size_t kPoolBuffers = 4;
  static constexpr size_t kPoolMaxValues = size_t{1} << 24;  // 128 MiB of int64_t
  std::vector<std::vector<int64_t>> ints;
  std::vector<std::vector<double>> reals;

  template <typename T>
  std::vector<std::vector<T>>& Of() {
    if constexpr (std::is_same_v<T, int64_t>) {
      return ints;
    } else {
      return reals;
    }
  }
  template <typename T>
  std::vector<T> Take() {
    auto& free = Of<T>();
    if (free.empty()) return {};
    std::vector<T> v = std::move(free.back());
    free.pop_back();
    return v;
  }
  template <typename T>
  void Give(std::vector<T>&& v) {
    auto& free = Of<T>();
    if (v.capacity() == 0 || v.capacity() > kPoolMaxValues) return;
    v.clear();
    if (free.size() < kPoolBuffers) {
      free.push_back(std::move(v));
      return;
    }
    // Keep the largest buffers.
    auto smallest = std::min_element(free.begin(), free.end(), [](const auto& a, const auto& b) {
      return a.capacity() < b.capacity();
    });
    if (smallest->capacity() < v.capacity()) *smallest = std::move(v);
  }
};

struct Percentile {
  PercentilePool* pool = nullptr;
  std::vector<int64_t> ints;               // while every value is an integer
  std::vector<double> reals;               // once one is not (then `ints` is empty)
  int64_t lo = INT64_MAX, hi = INT64_MIN;  // of `ints`
  double p = -1;
  bool all_int = true;
};

void ReleasePercentile(sqlite3_context* ctx) {
  auto** p = static_cast<Percentile**>(sqlite3_aggregate_context(ctx, 0));
  if (p == nullptr || *p == nullptr) return;
  Percentile* s = *p;
  if (s->pool != nullptr) {
    s->pool->Give(std::move(s->ints));
    s->pool->Give(std::move(s->reals));
  }
  delete s;
  *p = nullptr;
}

void PercentileStep(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  const int type = sqlite3_value_type(argv[0]);
  if (type == SQLITE_NULL) return;
  auto** slot = static_cast<Percentile**>(sqlite3_aggregate_context(ctx, sizeof(Percentile*)));
  if (slot == nullptr) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  Percentile* s = *slot;
  if (s == nullptr) {
    s = *slot = new (std::nothrow) Percentile();
    if (s == nullptr) {
      sqlite3_result_error_nomem(ctx);
      return;
    }
    s->pool = static_cast<PercentilePool*>(sqlite3_user_data(ctx));
    if (s->pool != nullptr) s->ints = s->pool->Take<int64_t>();
  }
  if (argc > 1) {
    const double p = sqlite3_value_double(argv[1]);
    if (!(p >= 0 && p <= 100)) {  // NaN too
      sqlite3_result_error(ctx, "percentile: p must be between 0 and 100", -1);
      return;
    }
    s->p = p;
  } else {
    s->p = 50;
  }
  try {
    if (s->all_int &&
        (type == SQLITE_INTEGER ||
         (type != SQLITE_FLOAT && sqlite3_value_numeric_type(argv[0]) == SQLITE_INTEGER))) {
      const int64_t v = sqlite3_value_int64(argv[0]);
      s->ints.push_back(v);
      s->lo = std::min(s->lo, v);
      s->hi = std::max(s->hi, v);
      return;
    }
    if (s->all_int) {  // the first value that is not an integer: every value becomes a double
      s->all_int = false;
      if (s->pool != nullptr) s->reals = s->pool->Take<double>();
      s->reals.reserve(s->ints.size() + 1);
      for (int64_t v : s->ints) s->reals.push_back(static_cast<double>(v));
      if (s->pool != nullptr) {
        s->pool->Give(std::move(s->ints));
      }
      s->ints = std::vector<int64_t>();
    }
    s->reals.push_back(sqlite3_value_double(argv[0]));
  } catch (...) {
    sqlite3_result_error_nomem(ctx);
  }
}

// The k-th smallest (0-based) of v, all of them in [lo, hi]: radix selection on the offset
// from lo, 12 bits a pass (a histogram on the stack, one pass to count and one to keep the
// bucket holding k), then nth_element once few values are left. Reorders v.
int64_t SelectInt(std::vector<int64_t>* values, size_t k, int64_t lo, int64_t hi) {
  constexpr int kBits = 12;
  constexpr size_t kSmall = 2048;
  int64_t* v = values->data();
  size_t n = values->size();
  uint32_t hist[size_t{1} << kBits];
  while (n > kSmall) {
    const uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    if (range == 0) return lo;
    const int width = 64 - std::countl_zero(range);
    const int shift = std::max(0, width - kBits);
    const size_t buckets = static_cast<size_t>(range >> shift) + 1;
    std::fill(hist, hist + buckets, 0u);
    const auto base = static_cast<uint64_t>(lo);
    for (size_t i = 0; i < n; ++i) ++hist[(static_cast<uint64_t>(v[i]) - base) >> shift];
    size_t b = 0, below = 0;
    while (below + hist[b] <= k) below += hist[b++];
    // Keep bucket b's values (in place, at the front) and look for the (k - below)-th there.
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      const int64_t x = v[i];
      v[kept] = x;
      kept += ((static_cast<uint64_t>(x) - base) >> shift) == b;
    }
    k -= below;
    n = kept;
    lo = static_cast<int64_t>(base + (static_cast<uint64_t>(b) << shift));
    const uint64_t top = (static_cast<uint64_t>(b) << shift) + ((uint64_t{1} << shift) - 1);
    hi = static_cast<int64_t>(base + std::min(top, range));
    if (shift == 0) return lo;  // a bucket of one value
  }
  std::nth_element(v, v + k, v + n);
  return v[k];
}

void PercentileFinal(sqlite3_context* ctx) {
  auto** slot = static_cast<Percentile**>(sqlite3_aggregate_context(ctx, 0));
  Percentile* s = slot != nullptr ? *slot : nullptr;
  const size_t n = s == nullptr ? 0 : s->all_int ? s->ints.size() : s->reals.size();
  if (n == 0) {
    sqlite3_result_null(ctx);
    ReleasePercentile(ctx);
    return;
  }
  const size_t k = engine::NearestRank(s->p, n) - 1;
  if (s->all_int) {
    sqlite3_result_int64(ctx, SelectInt(&s->ints, k, s->lo, s->hi));
  } else {
    std::nth_element(s->reals.begin(), s->reals.begin() + static_cast<long>(k), s->reals.end());
    sqlite3_result_double(ctx, s->reals[k]);
  }
  ReleasePercentile(ctx);
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
    (b ? s->b : s->a).emplace_back(ts, engine::SaturatingAdd(ts, dur));
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

// human_duration(ns) and human_bytes(n): engine/util/human_units.h, as the shell prints them.
void HumanDurationFn(sqlite3_context* ctx, int, sqlite3_value** argv) {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  const std::string s = engine::HumanDuration(sqlite3_value_double(argv[0]));
  sqlite3_result_text(ctx, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
}

void HumanBytesFn(sqlite3_context* ctx, int, sqlite3_value** argv) {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  const std::string s = engine::HumanBytes(sqlite3_value_double(argv[0]));
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
  // Pure functions: innocuous, so that a view may call them under trusted_schema=OFF.
  const int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;
  int rc = SQLITE_OK;
  // Every callback guarded: no exception reaches SQLite (engine/db/sqlite_guard.h).
  auto add = [&](const char* name, int n, void (*fn)(sqlite3_context*, int, sqlite3_value**),
                 void (*step)(sqlite3_context*, int, sqlite3_value**),
                 void (*final)(sqlite3_context*)) {
    if (rc == SQLITE_OK) rc = sqlite3_create_function(db, name, n, flags, nullptr, fn, step, final);
  };
  // Each percentile registration owns its buffer pool (freed with the function).
  for (const auto& [name, n] : {std::pair<const char*, int>{"percentile", 2}, {"median", 1}}) {
    if (rc != SQLITE_OK) break;
    auto* pool = new (std::nothrow) PercentilePool();
    if (pool == nullptr) return SQLITE_NOMEM;
    rc = sqlite3_create_function_v2(db, name, n, flags, pool, nullptr,
                                    engine::Guarded<PercentileStep>(),
                                    engine::Guarded<PercentileFinal>(),
                                    [](void* p) { delete static_cast<PercentilePool*>(p); });
  }
  add("covered_ns", 2, nullptr, engine::Guarded<IntervalStep>(), engine::Guarded<CoveredFinal>());
  add("overlap_ns", 3, nullptr, engine::Guarded<IntervalStep>(), engine::Guarded<OverlapFinal>());
  add("log2_bucket", 1, engine::Guarded<Log2Bucket>(), nullptr, nullptr);
  add("human_duration", 1, engine::Guarded<HumanDurationFn>(), nullptr, nullptr);
  add("human_bytes", 1, engine::Guarded<HumanBytesFn>(), nullptr, nullptr);
  add("activity", 4, engine::Guarded<Activity>(), nullptr, nullptr);
  return rc;
}

}  // namespace tracedb::query
