// Block fitting: how many rows a rank's next event block takes, so that its row of the blocks
// table fills whole SQLite pages (docs/database-format.md "Blocks and pages").
//
// SQLite keeps a table row of P bytes (its record) whole on a leaf page when P <= X = U - 35,
// U being a page's usable bytes. A longer record keeps K = M + (P - M) % (U - 4) bytes on the
// leaf (M = (U - 12) * 32 / 255 - 23), or M when that K would exceed X, and the rest on
// overflow pages of U - 4 bytes, all full but the last; a leaf holds as many records' leaf
// parts as fit. So a record of M + k (U - 4) bytes, a little more or a little less, leaves
// almost nothing unused: k full overflow pages (the last short by what it lacks) and M bytes
// on a leaf with seven others. A record whose leaf part is 8-15 KB leaves the rest of its leaf
// unused when the next is as long. With 16,384 rows a block, 16 KiB pages and random 20-bit
// durations, a block was a 47.7 KB record: 2 overflow pages and a leaf to itself, 1.5 KB of it
// unused (exactly 3.00 B/event); fitted, about 17,600 rows fill 3 overflow pages and an eighth
// of a leaf (2.92 B/event).
//
// The fit predicts a block's bytes from the rank's last full block (bytes per row), so it is
// used only while the rank's last kFitWindow full blocks agree within kFitMaxChange: a rank
// whose blocks vary (phases of different events, threads of different events) keeps the
// default row count, as before. A prediction that misses by d bytes costs at most d bytes of a
// page while d < 2 KB. And it is used only where it saves kFitMinGain of the pages. A block cut
// elsewhere than the default may mix runs that the default held apart: db_bench_gen's ranks
// alternate between a compute thread's runs (40 KB a block) and a communication thread's (69
// KB), which blocks of 16,384 rows keep apart. Fitted after two alike blocks, its 200M DB grew
// 0.75% (every later block of the rank straddled the runs), so a rank that stops being fitted
// goes back to the grid of the default row count (TraceWriter).
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tracedb::engine {

// Where SQLite puts a table row's record, for pages of `usable` bytes (page size less the
// reserved bytes; 512..65536).
struct PageGeometry {
  explicit PageGeometry(size_t usable);
  size_t usable;     // U
  size_t max_local;  // X = U - 35
  size_t min_local;  // M = (U - 12) * 32 / 255 - 23
  size_t overflow;   // U - 4, the record bytes an overflow page holds

  // The bytes of a record of `payload` bytes kept on its leaf page (the rest overflows).
  size_t LocalBytes(size_t payload) const;
  // The overflow pages a record of `payload` bytes takes.
  size_t OverflowPages(size_t payload) const;
  // The page bytes a record of `payload` bytes takes in a table of records alike: its overflow
  // pages and its share of a leaf (a leaf holds as many leaf parts as fit).
  double PageBytes(size_t payload) const;
  // The record sizes, ascending, near which records use their pages completely: for
  // j = 16..1 records a leaf holds whole, the largest of which j fit on one leaf (X for j = 1),
  // and M + k (U - 4) for k >= 1, a record with k full overflow pages and M bytes on a leaf.
  // Up to `limit` bytes. `overflow_from` is set to the index of the first of the latter.
  std::vector<size_t> FitSizes(size_t limit, size_t* overflow_from) const;
};

// The bytes of a blocks row's record (docs/database-format.md: block INTEGER PRIMARY KEY, rank,
// min_ts, max_end, max_dur, count, data) with `blob_bytes` of data: SQLite's record format
// (a header of serial types, integers in the fewest of 0, 1, 2, 3, 4, 6 or 8 bytes).
size_t BlockRecordBytes(int64_t rank, int64_t min_ts, int64_t max_end, int64_t max_dur,
                        int64_t count, size_t blob_bytes);

// The last kFitWindow full blocks may differ by this much in data bytes per row, (largest -
// smallest) / smallest, for the next to be fitted (random durations: 0.01-0.1%; db_bench_gen,
// whose blocks alternate between two threads' runs: 70%, one block in 7).
inline constexpr double kFitMaxChange = 0.01;
inline constexpr size_t kFitWindow = 8;

// The data bytes per row of a rank's last kFitWindow full blocks.
class BlockHistory {
 public:
  void Add(double per_row);
  // (largest - smallest) / smallest over the window; infinity before kFitWindow blocks.
  double Spread() const;

 private:
  double per_row_[kFitWindow] = {};
  size_t n_ = 0;  // blocks added
};
// The share of its pages a fitted block must save over a block of the default rows (in a table
// of blocks alike, PageGeometry::PageBytes). Random 20-bit durations: 3.0% -> 0.4%.
inline constexpr double kFitMinGain = 0.02;

// The rows of a rank's next block. Its last full block had `rows` rows and took a record of
// `record_bytes`, `blob_bytes` of them the block's data; `spread` is BlockHistory::Spread() of
// its last blocks, this one included. The row count nearest `default_rows` (within a factor
// of 2, at most `max_rows`) whose predicted record is a size of FitSizes: at most that size,
// less a margin, for the records a leaf holds whole; at least that size, plus a margin, for
// those with overflow pages; `default_rows` when the spread exceeds kFitMaxChange, no size is
// near or the fit would save less than kFitMinGain.
size_t FitBlockRows(const PageGeometry& g, size_t default_rows, size_t max_rows, size_t rows,
                    size_t record_bytes, size_t blob_bytes, double spread);

}  // namespace tracedb::engine
