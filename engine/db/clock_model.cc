// ClockModel implementation. See clock_model.h.
#include "engine/db/clock_model.h"

#include <algorithm>

namespace tracedb::engine {
namespace {
constexpr int64_t kMinKnotSpacingNs = 1000000;  // 1 ms
constexpr int64_t kOne = int64_t{1} << 32;
}  // namespace

void ClockModel::AddKnot(int64_t local_ns, int64_t common_ns) {
  auto it = std::lower_bound(knots_.begin(), knots_.end(), local_ns,
                             [](const Knot& k, int64_t t) { return k.local < t; });
  // Differences in 128 bits: knots may come from a hostile file.
  if (it != knots_.end() && static_cast<__int128>(it->local) - local_ns < kMinKnotSpacingNs) {
    return;
  }
  if (it != knots_.begin() &&
      static_cast<__int128>(local_ns) - std::prev(it)->local < kMinKnotSpacingNs) {
    return;
  }
  knots_.insert(it, Knot{local_ns, common_ns, kOne});
  Recompute();
}

void ClockModel::Recompute() {
  for (size_t i = 0; i + 1 < knots_.size(); ++i) {
    const __int128 dc = static_cast<__int128>(knots_[i + 1].common) - knots_[i].common;
    const __int128 dl = static_cast<__int128>(knots_[i + 1].local) - knots_[i].local;
    __int128 slope = (dc << 32) / dl;
    // A clock never runs backwards or at more than twice the rate: clamp damaged knots.
    slope = std::clamp<__int128>(slope, 0, 2 * static_cast<__int128>(kOne));
    knots_[i].slope_fp = static_cast<int64_t>(slope);
  }
  if (knots_.size() >= 2) {
    knots_.back().slope_fp = knots_[knots_.size() - 2].slope_fp;
  } else if (!knots_.empty()) {
    knots_.back().slope_fp = kOne;
  }
  cached_ = Segment();
}

int64_t ClockModel::MapOn(size_t i, int64_t t) const {
  const Knot& k = knots_[i];
  return SaturateInt64(k.common + ((static_cast<__int128>(t) - k.local) * k.slope_fp >> 32));
}

int64_t ClockModel::MapSlow(int64_t t) const {
  const size_t n = knots_.size();
  if (n == 0) return t;
  if (t <= knots_[0].local) {
    // Before the first knot: extend the first segment backwards.
    return MapOn(0, t);
  }
  auto it = std::upper_bound(knots_.begin(), knots_.end(), t,
                             [](int64_t v, const Knot& k) { return v < k.local; });
  const size_t i = static_cast<size_t>(it - knots_.begin()) - 1;
  const Knot& k = knots_[i];
  cached_.lo = k.local;
  cached_.hi = i + 1 < n ? knots_[i + 1].local : INT64_MAX;
  cached_.local = k.local;
  cached_.common = k.common;
  cached_.slope = k.slope_fp;
  // The last t of the segment that maps without saturating: all of it at slope 0 (slopes are
  // clamped to [0, 2]), else the largest d = t - local with common + (d * slope >> 32) <=
  // INT64_MAX, i.e. d * slope < (INT64_MAX - common + 1) * 2^32. Map is monotonic in between.
  __int128 safe = static_cast<__int128>(cached_.hi) - 1;
  if (k.slope_fp < 0) {
    safe = INT64_MIN;
  } else if (k.slope_fp > 0) {
    const __int128 room = static_cast<__int128>(INT64_MAX) - k.common + 1;  // <= 2^64
    safe = std::min(safe, k.local + ((room << 32) - 1) / k.slope_fp);
  }
  cached_.safe_hi = static_cast<int64_t>(safe);
  return MapOn(i, t);
}

bool ClockModel::OffsetOver(int64_t lo, int64_t hi, int64_t* offset) const {
  if (knots_.empty()) {  // Map(t) == t
    *offset = 0;
    return true;
  }
  if (lo < cached_.lo || hi >= cached_.hi) {
    MapSlow(lo);  // points the cache at lo's segment (when lo is past the first knot)
    if (lo < cached_.lo || hi >= cached_.hi) return false;
  }
  if (cached_.slope != (int64_t{1} << 32)) return false;
  // In the segment, Map(t) = common + (t - local) (saturated), with local == lo of the segment
  // <= t. When t + (common - local) overflows at neither end, it overflows nowhere between, and
  // the two are the same integer.
  int64_t off, a, b;
  if (__builtin_sub_overflow(cached_.common, cached_.local, &off) ||
      __builtin_add_overflow(lo, off, &a) || __builtin_add_overflow(hi, off, &b) ||
      static_cast<uint64_t>(hi) - static_cast<uint64_t>(cached_.local) >
          static_cast<uint64_t>(INT64_MAX)) {
    return false;
  }
  *offset = off;
  return true;
}

bool ClockModel::AffineOver(int64_t lo, int64_t hi, Affine* affine) const {
  if (knots_.empty() || lo > hi) return false;
  if (lo < cached_.lo || hi > cached_.safe_hi) {
    MapSlow(lo);  // points the cache at lo's segment (when lo is past the first knot)
    if (lo < cached_.lo || hi > cached_.safe_hi) return false;
  }
  // In the segment, Map(t) = common + ((t - local) * slope >> 32), saturated, with local <= t;
  // up to safe_hi it does not saturate.
  affine->local = cached_.local;
  affine->common = cached_.common;
  affine->slope = static_cast<uint64_t>(cached_.slope);
  return true;
}

int64_t ClockModel::offset_ns() const {
  return knots_.empty()
             ? 0
             : SaturateInt64(static_cast<__int128>(knots_.front().common) - knots_.front().local);
}

double ClockModel::drift_ppm() const {
  if (knots_.size() < 2) return 0;
  const double dl =
      static_cast<double>(static_cast<__int128>(knots_.back().local) - knots_.front().local);
  const double dc =
      static_cast<double>(static_cast<__int128>(knots_.back().common) - knots_.front().common);
  return (dc / dl - 1.0) * 1e6;
}

ClockModel ClockModel::FromKnots(std::vector<std::pair<int64_t, int64_t>> knots) {
  // One sort and one Recompute (AddKnot recomputes every slope per knot: quadratic in the
  // knots, an hour of anchors at one a second).
  std::stable_sort(knots.begin(), knots.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  ClockModel m;
  for (const auto& [local, common] : knots) {
    if (!m.knots_.empty() &&
        static_cast<__int128>(local) - m.knots_.back().local < kMinKnotSpacingNs) {
      continue;
    }
    m.knots_.push_back(Knot{local, common, kOne});
  }
  m.Recompute();
  return m;
}

ClockModel ClockModel::Inverted() const {
  std::vector<std::pair<int64_t, int64_t>> knots;
  knots.reserve(knots_.size());
  for (const Knot& k : knots_) knots.emplace_back(k.common, k.local);
  return FromKnots(std::move(knots));
}

ClockModel ClockModel::Compose(const ClockModel& inner, const ClockModel& outer) {
  if (outer.empty()) return inner;
  std::vector<std::pair<int64_t, int64_t>> knots;
  knots.reserve(inner.knots_.size() + outer.knots_.size());
  for (const Knot& k : inner.knots_) knots.emplace_back(k.local, outer.Map(inner.Map(k.local)));
  if (inner.empty()) {
    for (const Knot& k : outer.knots_) knots.emplace_back(k.local, k.common);
    return FromKnots(std::move(knots));
  }
  const ClockModel back = inner.Inverted();
  for (const Knot& k : outer.knots_) {
    const int64_t local = back.Map(k.local);
    knots.emplace_back(local, outer.Map(inner.Map(local)));
  }
  return FromKnots(std::move(knots));
}

ClockModel ClockModel::Offset(int64_t at_local, int64_t offset) {
  ClockModel m;
  m.AddKnot(at_local, SaturatingAdd(at_local, offset));
  return m;
}

}  // namespace tracedb::engine
