// ClockModel: maps one process's recorder clock to the job's common clock, piecewise linearly
// through knots (local ns, common ns): interpolation between knots removes offset and drift;
// outside them the nearest segment's slope extends the line (slope 1 with a single knot).
// Compaction builds the knots from the process's (realtime, clock) anchors and, for ranks on
// another host than rank 0, from MPI clock-sync points (docs/database-format.md "Clocks").
// Thread safety: one thread at a time (Map() keeps a lookup hint).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/util/coding.h"

namespace tracedb::engine {

class ClockModel {
 public:
  // Knots may be added in any order; a knot closer than 1 ms (local) to an existing one
  // replaces nothing and is ignored, which keeps slopes free of read noise.
  void AddKnot(int64_t local_ns, int64_t common_ns);
  bool empty() const { return knots_.empty(); }
  size_t size() const { return knots_.size(); }

  // The common-clock time of local time `t` (clamped to the int64 range). Inline for the common
  // case: `t` in the segment used last.
  int64_t Map(int64_t t) const {
    if (t >= cached_.lo && t < cached_.hi) {
      // t - local is >= 0 here and fits in uint64. At rate 1 (identity or realtime-anchored
      // clocks without drift) it is an offset. Below 2^30 (about a second), and with a slope
      // at most 2 (Recompute clamps it), the product fits in 64 bits: the usual case, without
      // 128-bit arithmetic. Else in 128 bits. Clamped either way: knots and times may come from
      // a hostile file.
      const uint64_t d = static_cast<uint64_t>(t) - static_cast<uint64_t>(cached_.local);
      if (cached_.slope == (int64_t{1} << 32) && d <= static_cast<uint64_t>(INT64_MAX)) {
        return SaturatingAdd(cached_.common, static_cast<int64_t>(d));  // rate 1: an offset
      }
      if (d < (uint64_t{1} << 30)) {
        return SaturatingAdd(
            cached_.common, static_cast<int64_t>((d * static_cast<uint64_t>(cached_.slope)) >> 32));
      }
      return SaturateInt64(cached_.common + (static_cast<__int128>(d) * cached_.slope >> 32));
    }
    return MapSlow(t);
  }
  // True, with *offset set, when Map(t) == t + *offset for every t in [lo, hi] (lo <= hi): no
  // knots, or the range within one segment of rate 1 and mapped without saturation. A caller
  // mapping many times at once (compaction's runs of events) then adds instead of mapping each.
  bool OffsetOver(int64_t lo, int64_t hi, int64_t* offset) const;
  // Map over a range within one segment, as plain arithmetic: At(t) == Map(t) for every t of
  // the range AffineOver accepted.
  struct Affine {
    int64_t local = 0, common = 0;
    uint64_t slope = 0;  // 2^32 * the rate
    int64_t At(int64_t t) const {
      // t - local >= 0 and the result fits in int64 (AffineOver checked both); the sum wraps in
      // uint64 to that exact value.
      const uint64_t d = static_cast<uint64_t>(t) - static_cast<uint64_t>(local);
      const auto x = static_cast<uint64_t>(static_cast<unsigned __int128>(d) * slope >> 32);
      return static_cast<int64_t>(static_cast<uint64_t>(common) + x);
    }
  };
  // True, with *affine set, when Map is affine and unsaturated over [lo, hi] (lo <= hi): the
  // range within one segment (at any rate, where OffsetOver needs rate 1). A caller mapping many
  // times at once (compaction's runs of events on a drifting clock) then maps each in a few
  // instructions.
  bool AffineOver(int64_t lo, int64_t hi, Affine* affine) const;
  // Largest local time covered by interpolation (the last knot); INT64_MIN when empty.
  int64_t last_local() const { return knots_.empty() ? INT64_MIN : knots_.back().local; }
  int64_t first_local() const { return knots_.empty() ? INT64_MIN : knots_.front().local; }
  // Common - local at the first knot, and the mean rate error in ppm over all knots.
  int64_t offset_ns() const;
  double drift_ppm() const;

  // The model that maps back (common -> local): the knots swapped. Slopes stay within the
  // clamp of Recompute, so a damaged, flat segment inverts to slope 2, never to infinity.
  ClockModel Inverted() const;
  // The model of outer(inner(t)): knots at inner's knots and at the local times where inner
  // reaches outer's knots, so the composition of the two piecewise-linear maps is exact.
  static ClockModel Compose(const ClockModel& inner, const ClockModel& outer);
  // A model from (local, common) knots in any order, built at once; a knot closer than 1 ms
  // (local) to the previous kept one is dropped, as AddKnot drops it.
  static ClockModel FromKnots(std::vector<std::pair<int64_t, int64_t>> knots);
  // The model of t + offset: one knot, slope 1 (exact: no rate, no rounding).
  static ClockModel Offset(int64_t at_local, int64_t offset);

 private:
  struct Knot {
    int64_t local;
    int64_t common;
    int64_t slope_fp;  // (common slope to the next knot) * 2^32; the last knot keeps the
                       // slope before it (2^32 when it is the only one)
  };
  struct Segment {
    int64_t lo = 0, hi = 0;  // local range [lo, hi) the segment covers (empty when lo == hi)
    int64_t local = 0, common = 0, slope = 0;
    int64_t safe_hi = INT64_MIN;  // the last t of [lo, hi) that Map takes unsaturated
  };
  void Recompute();
  int64_t MapSlow(int64_t t) const;
  int64_t MapOn(size_t i, int64_t t) const;
  std::vector<Knot> knots_;
  mutable Segment cached_;  // the segment Map() used last
};

}  // namespace tracedb::engine
