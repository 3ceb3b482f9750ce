// Exact order statistics in bounded memory over several passes. See exact_select.h.
#include "query/views/exact_select.h"

#include <algorithm>
#include <string>

namespace tracedb::query {
namespace {

// Non-negative x: 0..kSubs-1 exactly, then kSubs buckets per power of two (the kMantissa bits
// after the leading one). x < 2^63 gives 0..kHalf-1.
constexpr int kMantissa = 3;
constexpr uint64_t kSubs = uint64_t{1} << kMantissa;
constexpr size_t kHalf = ExactSelect::kBuckets / 2;
static_assert(kHalf == kSubs * (64 - kMantissa), "kBuckets matches kMantissa");

size_t LogLinear(uint64_t x) {
  if (x < kSubs) return static_cast<size_t>(x);
  const int e = 63 - __builtin_clzll(x);  // kMantissa..62
  const uint64_t m = (x >> (e - kMantissa)) & (kSubs - 1);
  return static_cast<size_t>(kSubs + static_cast<uint64_t>(e - kMantissa) * kSubs + m);
}

void LogLinearRange(size_t b, uint64_t* lo, uint64_t* hi) {
  if (b < kSubs) {
    *lo = *hi = b;
    return;
  }
  const int e = static_cast<int>((b - kSubs) / kSubs) + kMantissa;
  const uint64_t m = (b - kSubs) % kSubs;
  *lo = (kSubs + m) << (e - kMantissa);
  *hi = *lo + ((uint64_t{1} << (e - kMantissa)) - 1);
}

}  // namespace

size_t ExactSelect::Bucket(int64_t v) {
  // A negative v mirrors as ~v = -v - 1 >= 0: the more negative, the lower the bucket.
  if (v < 0) return kHalf - 1 - LogLinear(static_cast<uint64_t>(~v));
  return kHalf + LogLinear(static_cast<uint64_t>(v));
}

void ExactSelect::BucketRange(size_t b, int64_t* lo, int64_t* hi) {
  uint64_t xlo = 0, xhi = 0;
  if (b < kHalf) {
    LogLinearRange(kHalf - 1 - b, &xlo, &xhi);
    *lo = ~static_cast<int64_t>(xhi);
    *hi = ~static_cast<int64_t>(xlo);
  } else {
    LogLinearRange(b - kHalf, &xlo, &xhi);
    *lo = static_cast<int64_t>(xlo);
    *hi = static_cast<int64_t>(xhi);
  }
}

void ExactSelect::SpillToHistogram() {
  hist_.assign(kBuckets, 0);
  for (int64_t v : held_) ++hist_[Bucket(v)];
  std::vector<int64_t>().swap(held_);
}

void ExactSelect::Locate(Target* t, int64_t lo, int64_t hi, uint64_t in_range, uint64_t n) {
  t->lo = lo;
  t->hi = hi;
  t->in_range = in_range;
  t->n = n;
  if (lo == hi) {
    t->done = true;
    t->value = lo;
  }
}

bool ExactSelect::Want(const uint64_t* ranks, size_t n) {
  ntargets_ = std::min(n, kMaxWanted);
  for (size_t i = 0; i < ntargets_; ++i) targets_[i] = Target{ranks[i]};
  if (hist_.empty()) {
    // Every value is held: select in place. Each selection leaves the larger values after its
    // position, so the next (larger) rank searches there.
    auto b = held_.begin();
    size_t from = 0;
    for (size_t i = 0; i < ntargets_; ++i) {
      const size_t k = static_cast<size_t>(targets_[i].rank);
      if (k >= from) {
        std::nth_element(b + static_cast<long>(from), b + static_cast<long>(k), held_.end());
        from = k + 1;
      } else {
        std::nth_element(b, b + static_cast<long>(k), held_.end());
      }
      targets_[i].done = true;
      targets_[i].value = held_[k];
    }
    std::vector<int64_t>().swap(held_);
    return false;
  }
  for (size_t i = 0; i < ntargets_; ++i) {
    Target& t = targets_[i];
    uint64_t below = 0;
    for (size_t b = 0; b < kBuckets; ++b) {
      if (t.rank < below + hist_[b]) {
        int64_t lo = 0, hi = 0;
        BucketRange(b, &lo, &hi);
        Locate(&t, lo, hi, t.rank - below, hist_[b]);
        break;
      }
      below += hist_[b];
    }
  }
  std::vector<uint64_t>().swap(hist_);
  return Unresolved();
}

bool ExactSelect::Unresolved() const {
  for (size_t i = 0; i < ntargets_; ++i)
    if (!targets_[i].done) return true;
  return false;
}

void ExactSelect::AddRangeSizes(std::vector<uint64_t>* sizes) const {
  for (size_t i = 0; i < ntargets_; ++i) {
    const Target& t = targets_[i];
    bool seen = false;
    for (size_t j = 0; j < i; ++j)
      seen |= !targets_[j].done && targets_[j].lo == t.lo && targets_[j].hi == t.hi;
    if (!t.done && !seen) sizes->push_back(t.n);
  }
}

uint64_t ExactSelect::CollectLimit(std::vector<uint64_t> sizes, uint64_t budget) {
  std::sort(sizes.begin(), sizes.end());
  uint64_t total = 0, limit = 0;
  for (uint64_t n : sizes) {
    if (n > budget - total) break;
    total += n;
    limit = n;
  }
  return limit;
}

void ExactSelect::Plan(uint64_t collect_up_to) {
  const uint64_t keep = std::max(kCollect, collect_up_to);
  probes_.clear();
  for (size_t i = 0; i < ntargets_; ++i) {
    const Target& t = targets_[i];
    if (t.done) continue;
    // Targets located in the same pass share a grid, so their ranges are equal or disjoint.
    bool shared = false;
    for (const Probe& p : probes_) shared |= p.lo == t.lo && p.hi == t.hi;
    if (shared) continue;
    Probe p;
    p.lo = t.lo;
    p.hi = t.hi;
    p.n = t.n;
    p.collect = t.n <= keep;
    if (p.collect) {
      p.values.reserve(static_cast<size_t>(t.n));
    } else {
      const uint64_t span = static_cast<uint64_t>(t.hi) - static_cast<uint64_t>(t.lo);
      p.width = span / kSub + 1;  // span / width < kSub: at most kSub sub-ranges
      p.sub.assign(static_cast<size_t>(span / p.width + 1), 0);
    }
    probes_.push_back(std::move(p));
  }
}

StatusOr<bool> ExactSelect::EndPass() {
  if (fed_ != count_) {
    return Status::Corruption("a later pass saw " + std::to_string(fed_) + " values, not " +
                              std::to_string(count_) + " (did the database change?)");
  }
  fed_ = 0;
  for (const Probe& p : probes_) {
    if (p.seen != p.n) {
      return Status::Corruption("a later pass saw " + std::to_string(p.seen) +
                                " values in a range that held " + std::to_string(p.n) +
                                " (did the database change?)");
    }
  }
  for (size_t i = 0; i < ntargets_; ++i) {
    Target& t = targets_[i];
    if (t.done) continue;
    auto p = std::find_if(probes_.begin(), probes_.end(),
                          [&t](const Probe& q) { return q.lo == t.lo && q.hi == t.hi; });
    if (p == probes_.end()) return Status::Internal("exact_select: a target without its probe");
    if (p->collect) {
      auto b = p->values.begin();
      std::nth_element(b, b + static_cast<long>(t.in_range), p->values.end());
      t.done = true;
      t.value = p->values[static_cast<size_t>(t.in_range)];
      continue;
    }
    uint64_t below = 0;
    for (size_t s = 0; s < p->sub.size(); ++s) {
      if (t.in_range < below + p->sub[s]) {
        const uint64_t lo = static_cast<uint64_t>(p->lo) + s * p->width;
        // The range never crosses 0 (the buckets do not), so its width is hi - lo mod 2^64.
        const uint64_t left = static_cast<uint64_t>(p->hi) - lo;
        const uint64_t hi = lo + std::min(left, p->width - 1);
        Locate(&t, static_cast<int64_t>(lo), static_cast<int64_t>(hi), t.in_range - below,
               p->sub[s]);
        break;
      }
      below += p->sub[s];
    }
  }
  probes_.clear();
  return Unresolved();
}

}  // namespace tracedb::query
