// Block fitting. See block_fit.h; the rule in docs/database-format.md "Blocks and pages".
#include "engine/db/block_fit.h"

#include <algorithm>
#include <cmath>

#include "engine/util/coding.h"

namespace tracedb::engine {
namespace {

// The bytes of a varint in SQLite's format: those of the project's varint (7 bits a byte) for
// every value below 2^56, which is all a record's sizes and serial types here.
size_t VarintBytes(uint64_t v) { return static_cast<size_t>(VarintLength(v)); }

// The bytes of an integer's value in a record: serial types 8 and 9 (0 and 1) take none.
size_t IntBytes(int64_t v) {
  if (v == 0 || v == 1) return 0;
  if (v >= -128 && v <= 127) return 1;
  if (v >= -32768 && v <= 32767) return 2;
  if (v >= -8388608 && v <= 8388607) return 3;
  if (v >= INT32_MIN && v <= INT32_MAX) return 4;
  if (v >= -(int64_t{1} << 47) && v < (int64_t{1} << 47)) return 6;
  return 8;
}

// A leaf's bytes besides its cells (a table leaf's header). A cell holds its record's leaf part
// after a 2-byte pointer, the record's length (a varint), the rowid (a varint: 3 bytes for the
// blocks of up to 2^21 blocks, 34 billion events at 16,384 a block; more only make PageBytes a
// little short) and, when the record overflows, a 4-byte page number.
constexpr size_t kLeafHeader = 8;
constexpr size_t kRowidBytes = 3;
size_t CellBytes(size_t payload, size_t local) {
  return 2 + VarintBytes(payload) + kRowidBytes + local + (local < payload ? 4 : 0);
}
// The prediction's error allowed for besides the spread's share: the bytes of a block's
// data that do not scale with its rows (column headers, code tables) change a little with
// the row count.
constexpr size_t kMarginBytes = 64;

}  // namespace

PageGeometry::PageGeometry(size_t u)
    : usable(u), max_local(u - 35), min_local((u - 12) * 32 / 255 - 23), overflow(u - 4) {}

size_t PageGeometry::LocalBytes(size_t payload) const {
  if (payload <= max_local) return payload;
  const size_t k = min_local + (payload - min_local) % overflow;
  return k <= max_local ? k : min_local;
}

size_t PageGeometry::OverflowPages(size_t payload) const {
  const size_t rest = payload - LocalBytes(payload);
  return (rest + overflow - 1) / overflow;
}

double PageGeometry::PageBytes(size_t payload) const {
  const size_t local = LocalBytes(payload);
  const size_t per_leaf = std::max<size_t>(1, (usable - kLeafHeader) / CellBytes(payload, local));
  return static_cast<double>(OverflowPages(payload) * usable) +
         static_cast<double>(usable) / static_cast<double>(per_leaf);
}

std::vector<size_t> PageGeometry::FitSizes(size_t limit, size_t* overflow_from) const {
  std::vector<size_t> out;
  for (size_t j = 16; j >= 1; --j) {
    // The longest record of which j cells fit on a leaf.
    size_t c = 0;
    for (size_t p = (usable - kLeafHeader) / j - 2 - kRowidBytes; p > 0; --p) {
      if (CellBytes(p, p) * j <= usable - kLeafHeader) {
        c = std::min(max_local, p);
        break;
      }
    }
    if (c > 0 && c <= limit && (out.empty() || c > out.back())) out.push_back(c);
  }
  *overflow_from = out.size();
  for (size_t c = min_local + overflow; c <= limit; c += overflow) out.push_back(c);
  return out;
}

size_t BlockRecordBytes(int64_t rank, int64_t min_ts, int64_t max_end, int64_t max_dur,
                        int64_t count, size_t blob_bytes) {
  // Serial types: the rowid alias (NULL) and five integers take a byte each; the blob's is
  // 2 * size + 12.
  const size_t types = 6 + VarintBytes(2 * uint64_t{blob_bytes} + 12);
  size_t header = types + 1;
  header = types + VarintBytes(header);  // the header's own length, a varint
  return header + IntBytes(rank) + IntBytes(min_ts) + IntBytes(max_end) + IntBytes(max_dur) +
         IntBytes(count) + blob_bytes;
}

void BlockHistory::Add(double per_row) { per_row_[n_++ % kFitWindow] = per_row; }

double BlockHistory::Spread() const {
  if (n_ < kFitWindow) return INFINITY;
  const auto [lo, hi] = std::minmax_element(per_row_, per_row_ + kFitWindow);
  return *lo > 0 ? (*hi - *lo) / *lo : INFINITY;
}

size_t FitBlockRows(const PageGeometry& g, size_t default_rows, size_t max_rows, size_t rows,
                    size_t record_bytes, size_t blob_bytes, double spread) {
  if (rows == 0 || blob_bytes == 0 || record_bytes < blob_bytes || !(spread <= kFitMaxChange)) {
    return default_rows;
  }
  const double per_row = static_cast<double>(blob_bytes) / static_cast<double>(rows);
  const double fixed = static_cast<double>(record_bytes - blob_bytes);
  const double lo = static_cast<double>(default_rows) / 2;
  const double hi = std::min(static_cast<double>(default_rows) * 2, static_cast<double>(max_rows));
  const double limit = (hi + 1) * per_row + fixed + 2 * static_cast<double>(g.overflow);
  size_t best = default_rows;
  double best_score = INFINITY;
  size_t overflow_from = 0;
  const std::vector<size_t> sizes = g.FitSizes(static_cast<size_t>(limit), &overflow_from);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const double size = static_cast<double>(sizes[i]);
    const double margin = kMarginBytes + 2 * spread * size;
    // Whole on a leaf: at most the size; with overflow pages: at least it.
    const double t = i < overflow_from ? std::floor((size - margin - fixed) / per_row)
                                       : std::ceil((size + margin - fixed) / per_row);
    if (t < lo || t > hi) continue;
    // Fewer rows than the default count twice: a block's own bytes (column headers, code
    // tables) then weigh more, and g10's blocks of 2.46 B/row came out 0.3% larger at 14,180
    // rows than at 20,850.
    const double ratio = std::log(t / static_cast<double>(default_rows));
    const double score = ratio < 0 ? -2 * ratio : ratio;
    if (score < best_score) {
      best_score = score;
      best = static_cast<size_t>(t);
    }
  }
  if (best == default_rows) return default_rows;
  // Worth it only where it saves a share of the pages (block_fit.h).
  auto waste = [&](size_t t) {
    const double payload = fixed + per_row * static_cast<double>(t);
    return g.PageBytes(static_cast<size_t>(std::ceil(payload))) / payload - 1;
  };
  return waste(default_rows) - waste(best) >= kFitMinGain ? best : default_rows;
}

}  // namespace tracedb::engine
