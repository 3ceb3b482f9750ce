// The element the SQL `percentile(x, p)` aggregate returns (query/functions.cc): the nearest
// rank, the smallest r with r >= p/100 * n (1-based; no interpolation, the value itself), for
// p given in whole percent. Shared by the C++ that computes the same values without the
// aggregate (query/views_spans.h).
// Thread safety: pure functions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace tracedb::query {

// The 1-based nearest rank of the p-th percentile (0 <= p <= 100) of n >= 1 values, in exact
// integer arithmetic: ceil(p * n / 100), at least 1 and at most n.
inline size_t NearestRankPercent(int p, size_t n) {
  if (p <= 0 || n == 0) return 1;
  if (p >= 100) return n;
  const unsigned __int128 r =
      (static_cast<unsigned __int128>(static_cast<unsigned>(p)) * n + 99) / 100;
  return std::clamp<size_t>(static_cast<size_t>(r), 1, n);
}

}  // namespace tracedb::query
