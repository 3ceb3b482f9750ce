// Saturating int64 arithmetic: the one home of "a + b, or the bound it passed" for values that
// may come from a hostile file (an end = ts + dur, a gap between two timestamps). Wrap-around
// arithmetic for decoders is WrapAdd/WrapSub in engine/util/coding.h. Header-only (the recorder and
// every library use it). Thread safety: pure functions.
#pragma once

#include <cstdint>

namespace tracedb::engine {

// `v` clamped to the int64 range.
inline int64_t SaturateInt64(__int128 v) {
  if (v > INT64_MAX) return INT64_MAX;
  if (v < INT64_MIN) return INT64_MIN;
  return static_cast<int64_t>(v);
}
// `v` rounded toward zero and clamped to the int64 range, NaN as 0: a double computed from int64
// values (a percentile, a mean) can round up to 2^63, one past the largest int64, where a plain
// conversion is undefined.
inline int64_t SaturateInt64(double v) {
  if (!(v == v)) return 0;
  if (v >= 9223372036854775808.0) return INT64_MAX;
  if (v < -9223372036854775808.0) return INT64_MIN;
  return static_cast<int64_t>(v);
}
// a + b clamped to the int64 range (an end = ts + dur from a hostile file).
// With the overflow flag rather than in 128 bits: compaction does two per event. On overflow
// the true sum is past the bound of b's sign (a and b then have the same sign).
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) [[unlikely]]
    return b > 0 ? INT64_MAX : INT64_MIN;
  return r;
}
inline int64_t SaturatingSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? INT64_MAX : INT64_MIN;
  return r;
}

}  // namespace tracedb::engine
