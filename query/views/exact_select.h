// Exact order statistics of a group of int64 values (the k-th smallest, for a few k) in memory
// that does not grow with the number of values, at the price of further passes over them.
// Owns only the selection; the span views (views_spans.cc) feed it the durations of each
// (rank, name) group from decoded blocks.
//
// Pass 1 (Add): a group keeps its first kHeld values; past that it keeps instead a histogram of
// kBuckets log-linear buckets (8 per power of two, negative values mirrored) and drops them.
// Want(): a group that kept its values selects in place (no further pass); otherwise each wanted
// rank is located in its bucket, and while a located range holds more than one distinct value,
// another pass (Feed, then EndPass) either keeps the values of that range (at most kCollect of
// them) or, when it holds more, counts them in kSub equal sub-ranges and locates the rank again.
// Each refining pass divides the range by kSub, so a group needs at most 7 passes whatever the
// distribution, and a group holds at most max(kHeld, kBuckets) values or counts in pass 1 and
// at most 3 * max(kCollect, kSub) in a later pass, plus what the caller lets it keep (Plan: a
// budget shared by all groups, so that most ranges are kept whole in the second pass). Ties are
// counted, not collapsed: the result is the value a sort would put at rank k. EndPass checks that
// the pass fed as many values as pass 1 (and as many in each probed range as counted before): a
// difference means the values changed between passes, an error. Thread safety: none (one object per
// group).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/util/status.h"

namespace tracedb::query {

class ExactSelect {
 public:
  static constexpr size_t kBuckets = 976;  // 488 for negatives, 488 for the rest
  static constexpr size_t kHeld = kBuckets;
  static constexpr uint64_t kCollect = 2048;
  static constexpr uint64_t kSub = 2048;
  static constexpr size_t kMaxWanted = 3;

  // Pass 1: one value.
  void Add(int64_t v) {
    ++count_;
    if (hist_.empty()) {
      held_.push_back(v);
      if (held_.size() > kHeld) SpillToHistogram();
    } else {
      ++hist_[Bucket(v)];
    }
  }
  uint64_t count() const { return count_; }

  // After pass 1: the 0-based ranks wanted, each below count() (at most kMaxWanted, ascending).
  // Returns whether another pass is needed: then Plan, Feed every value again, EndPass.
  bool Want(const uint64_t* ranks, size_t n);
  // The values in each distinct range still to probe (appended to *sizes).
  void AddRangeSizes(std::vector<uint64_t>* sizes) const;
  // Before a later pass: a range of at most max(kCollect, collect_up_to) values is kept whole
  // this pass, a larger one counted in kSub sub-ranges.
  void Plan(uint64_t collect_up_to);
  // The largest collect_up_to for Plan that keeps at most `budget` values in all (the ranges of
  // every group, `sizes`, kept smallest first).
  static uint64_t CollectLimit(std::vector<uint64_t> sizes, uint64_t budget);
  // A later pass: one value (the same values as pass 1, in any order).
  void Feed(int64_t v) {
    ++fed_;
    for (Probe& p : probes_) {
      if (v < p.lo || v > p.hi) continue;
      ++p.seen;
      if (p.collect)
        p.values.push_back(v);
      else
        ++p.sub[(static_cast<uint64_t>(v) - static_cast<uint64_t>(p.lo)) / p.width];
      return;  // the probes' ranges are disjoint
    }
  }
  // The end of a later pass. Returns whether yet another pass is needed (Plan again), or an
  // error when the pass did not see the values pass 1 saw.
  StatusOr<bool> EndPass();
  // The value at the i-th wanted rank, once no pass is pending.
  int64_t result(size_t i) const { return targets_[i].value; }

  // The histogram bucket of v (monotone: v <= w implies Bucket(v) <= Bucket(w)), and the range
  // [lo, hi] of values in bucket b. Public for tests.
  static size_t Bucket(int64_t v);
  static void BucketRange(size_t b, int64_t* lo, int64_t* hi);

 private:
  struct Target {
    uint64_t rank = 0;      // the rank within the group
    uint64_t in_range = 0;  // its rank within [lo, hi]
    int64_t lo = 0, hi = 0;
    uint64_t n = 0;  // values in [lo, hi]
    bool done = false;
    int64_t value = 0;
  };
  struct Probe {
    int64_t lo = 0, hi = 0;
    uint64_t n = 0;     // values counted in [lo, hi] before this pass
    uint64_t seen = 0;  // values fed in [lo, hi] this pass
    bool collect = false;
    uint64_t width = 1;           // !collect: the sub-range width
    std::vector<int64_t> values;  // collect: the values in [lo, hi]
    std::vector<uint64_t> sub;    // !collect: counts per sub-range
  };
  void SpillToHistogram();
  // Sets t's range; done when the range holds one value.
  static void Locate(Target* t, int64_t lo, int64_t hi, uint64_t in_range, uint64_t n);
  bool Unresolved() const;

  uint64_t count_ = 0;
  uint64_t fed_ = 0;
  std::vector<int64_t> held_;
  std::vector<uint64_t> hist_;
  Target targets_[kMaxWanted];
  size_t ntargets_ = 0;
  std::vector<Probe> probes_;
};

}  // namespace tracedb::query
