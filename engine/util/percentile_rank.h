// The percentile rank every percentile in tracedb uses: the one the SQL `percentile(x, p)`
// aggregate returns (query/sql/functions.cc), the span views (query/views/views_spans.h) and the
// report data (query/report/report_data.h): the nearest rank, the smallest r with r >= p/100 * n
// (1-based; no interpolation, the value itself), computed exactly: ceil(p / 100.0 * n) in doubles
// is wrong (8 for p = 7, n = 100). Thread safety: pure functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace tracedb::engine {

// The 1-based nearest rank of the p-th percentile (p a double, 0 <= p <= 100) of n >= 1
// values, exactly.
inline size_t NearestRank(double p, size_t n) {
  if (p <= 0 || n == 0) return 1;
  if (p >= 100) return n;
  // p = m * 2^e exactly, m an integer below 2^53.
  int e = 0;
  const double frac = std::frexp(p, &e);  // p = frac * 2^e, frac in [0.5, 1)
  const auto m = static_cast<uint64_t>(std::ldexp(frac, 53));
  e -= 53;
  // rank = ceil(m * n / (100 * 2^-e)); p < 128 makes -e >= 46, and m * n < 2^117.
  const int shift = -e;
  if (shift >= 120) return 1;  // p * n / 100 < 2^53 * 2^64 / 2^120 < 1
  const unsigned __int128 num = static_cast<unsigned __int128>(m) * n;
  const unsigned __int128 den = static_cast<unsigned __int128>(100) << shift;
  const unsigned __int128 r = (num + den - 1) / den;
  return std::clamp<size_t>(static_cast<size_t>(r), 1, n);
}

// The same for p in whole percent (the span views' p50, p95, p99).
inline size_t NearestRankPercent(int p, size_t n) { return NearestRank(static_cast<double>(p), n); }

}  // namespace tracedb::engine
