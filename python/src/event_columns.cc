// The read path's scan (event_columns.h): zone maps first, then blocks decoded in parallel.
#include "python/src/event_columns.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <new>
#include <numeric>
#include <thread>
#include <type_traits>

#include "engine/db/block_store.h"
#include "engine/db/db_schema.h"
#include "engine/db/event_block.h"
#include "engine/db/sqlite.h"
#include "engine/segment/segment_format.h"
#include "engine/util/parse_number.h"
#include "engine/util/saturating.h"

namespace tracedb::python {

using engine::Db;
using engine::DecodedBlock;
using engine::EventArgs;

const ColSpec kSpecs[kNumCols] = {
    {"rank", "i", 4, false, 0},
    {"tid", "q", 8, true, 0},
    {"track", "I", 4, false, 0},
    {"lane", "i", 4, true, 0},
    {"id", "q", 8, false, engine::kColK},
    {"name", "I", 4, false, engine::kColName},
    {"cat", "I", 4, false, engine::kColCat},
    {"kind", "B", 1, false, engine::kColKind},
    {"ts", "q", 8, false, engine::kColTs},
    {"dur", "q", 8, false, engine::kColDur},
    {"end_ts", "q", 8, false, engine::kColTs},
    {"depth", "I", 4, false, engine::kColDepth},
    {"bytes", "q", 8, true, engine::kColArgs},
    {"peer", "i", 4, true, engine::kColArgs},
    {"tag", "i", 4, true, engine::kColArgs},
    {"comm", "q", 8, true, engine::kColArgs},
    {"seq", "q", 8, true, engine::kColArgs},
    {"flow", "q", 8, true, engine::kColArgs},
    {"value", "d", 8, true, engine::kColValue},
    {"step", "q", 8, true, engine::kColTs},
};

namespace {

struct TrackInfo {
  int32_t rank = 0;
  bool has_tid = false;
  int64_t tid = 0;
  int32_t lane = -1;  // index into the lane names, -1 on thread tracks
};

struct BlockRef {
  engine::BlockZoneRow z;  // checked by the block store
  uint64_t offset;         // first output slot
};

bool In(const std::vector<int64_t>& v, int64_t x) {
  return v.empty() || std::find(v.begin(), v.end(), x) != v.end();
}

// Step in effect at `ts` (the last marker at or before it) on a rank, as the events table.
bool StepAt(const std::vector<std::pair<int64_t, int64_t>>& v, int64_t ts, int64_t* step) {
  auto p = std::upper_bound(v.begin(), v.end(), ts,
                            [](int64_t t, const auto& e) { return t < e.first; });
  if (p == v.begin()) return false;
  *step = std::prev(p)->second;
  return true;
}

}  // namespace

namespace {

void Scan(const Query& q, ScanResult* r) {
  // As every reader: read-only (never a write, not even a journal's rollback), the schema
  // checked (a view in place of a table is refused) before any other query.
  auto opened = engine::OpenTraceDb(q.path, /*create=*/false, /*read_only=*/true);
  if (!opened.ok()) {
    r->error = opened.status().message();
    return;
  }
  Db& db = **opened;
  if (!db.HasTable("blocks") || !db.HasTable("tracks")) {
    r->error = q.path + ": not a tracedb database (no blocks/tracks table)";
    return;
  }
  // Tracks: rank, tid, lane name.
  std::map<uint32_t, TrackInfo> tracks;
  {
    auto st = db.Prepare("SELECT track, rank, kind, name, tid FROM tracks");
    if (!st.ok()) {
      r->error = st.status().message();
      return;
    }
    std::map<std::string, int32_t> lane_ids;
    for (;;) {
      auto row = st->Step();
      if (!row.ok()) {
        r->error = row.status().message();
        return;
      }
      if (!*row) break;
      TrackInfo t;
      t.rank = static_cast<int32_t>(st->Int(1));
      t.has_tid = !st->IsNull(4);
      t.tid = st->Int(4);
      if (st->Text(2) == "lane") {
        const std::string name(st->Text(3));
        auto [it, fresh] = lane_ids.emplace(name, static_cast<int32_t>(r->lanes.size()));
        if (fresh) r->lanes.push_back(name);
        t.lane = it->second;
      }
      tracks[static_cast<uint32_t>(st->Int(0))] = t;
    }
  }
  // Steps per rank, when needed.
  const bool need_steps = q.want[kStep] || !q.step.all();
  std::map<int32_t, std::vector<std::pair<int64_t, int64_t>>> steps;
  if (need_steps) {
    auto st = db.Prepare("SELECT rank, ts, step FROM steps ORDER BY rank, ts");
    if (st.ok()) {
      for (;;) {
        auto row = st->Step();
        if (!row.ok() || !*row) break;
        steps[static_cast<int32_t>(st->Int(0))].emplace_back(st->Int(1), st->Int(2));
      }
    }
  }
  // A step range is a time range on each rank: [its first marker in the range, the marker after
  // the range). Their union bounds the blocks to read (rows are then checked one by one).
  Range ts_bound = q.ts;
  if (!q.step.all()) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const auto& [rank, v] : steps) {
      for (size_t i = 0; i < v.size(); ++i) {
        if (!q.step.has(v[i].second)) continue;
        lo = std::min(lo, v[i].first);
        hi = std::max(hi, i + 1 < v.size() ? v[i + 1].first - 1 : INT64_MAX);
      }
    }
    if (lo > hi) {  // no marker in the range: nothing can match
      lo = 0;
      hi = -1;
    }
    ts_bound.lo = std::max(ts_bound.lo, lo);
    ts_bound.hi = std::min(ts_bound.hi, hi);
  }
  // Candidate blocks from the zone maps (the block store), in output order; each one's count
  // is checked there (1..65536) before it sizes the output, and each decoded block must then
  // hold exactly that many rows, so that no row is written outside its block's slots.
  engine::BlockSelection sel;
  sel.ranks = q.ranks;
  sel.ts_lo = ts_bound.lo;
  sel.ts_hi = ts_bound.hi;
  sel.min_dur = q.dur.lo;
  sel.names = q.names;
  sel.cats = q.cats;
  sel.order = engine::BlockSelection::Order::kRankTime;
  r->blocks_total = static_cast<uint64_t>(db.QueryInt("SELECT count(*) FROM blocks", 0).value());
  std::vector<BlockRef> blocks;
  {
    engine::BlockStore store(&db, q.path);
    uint64_t offset = 0;
    auto s = store.ForEach(sel, [&](const engine::BlockZoneRow& z) {
      if (!z.ok) return Status::Corruption(z.error);
      blocks.push_back(BlockRef{z, offset});
      offset += z.count;
      return Status::Ok();
    });
    if (!s.ok()) {
      r->error = s.message();
      return;
    }
  }
  r->blocks_read = blocks.size();
  const uint64_t cap = blocks.empty() ? 0 : blocks.back().offset + blocks.back().z.count;

  // Column groups to decode: for the output and for the filters.
  uint32_t want = engine::kColTrack;
  for (int c = 0; c < kNumCols; ++c) {
    if (q.want[c]) want |= kSpecs[c].needs;
  }
  if (!q.names.empty()) want |= engine::kColName;
  if (!q.cats.empty()) want |= engine::kColCat;
  if (!q.kinds.empty()) want |= engine::kColKind;
  if (!q.ts.all() || !q.step.all() || need_steps) want |= engine::kColTs;
  if (!q.dur.all()) want |= engine::kColDur;
  const bool row_filter = !q.names.empty() || !q.cats.empty() || !q.kinds.empty() || !q.ts.all() ||
                          !q.dur.all() || !q.step.all();

  r->cols.resize(kNumCols);
  for (int c = 0; c < kNumCols; ++c) {
    if (!q.want[c]) continue;
    Out& o = r->cols[c];
    o.name = kSpecs[c].name;
    std::strcpy(o.format, kSpecs[c].format);
    o.itemsize = kSpecs[c].itemsize;
    o.nullable = kSpecs[c].nullable;
    if (cap > SIZE_MAX / o.itemsize) throw std::bad_alloc();
    o.data.resize(cap * o.itemsize);
    if (o.nullable) o.null.resize(cap);
  }

  std::vector<uint64_t> kept(blocks.size(), 0);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::string first_error;
  std::mutex error_mu;
  // Each thread reads the BLOBs of the blocks it takes through its own connection and decodes
  // them in place (SQLite's copy of the row is valid until the statement moves on).
  auto fail = [&](const std::string& message) {
    std::lock_guard<std::mutex> lock(error_mu);
    if (first_error.empty()) first_error = message;
    failed = true;
  };
  // Columns written row by row through the selection (the others are copied whole when every
  // row of a block is kept).
  bool per_row_cols = false;
  for (int c : {kTid, kLane, kId, kEndTs, kBytes, kPeer, kTag, kComm, kSeq, kFlow, kValue}) {
    per_row_cols |= q.want[c];
  }
  auto work_blocks = [&] {
    auto conn = Db::Open(q.path, Db::Mode::kReadOnly);
    if (!conn.ok()) return fail(conn.status().message());
    engine::BlockStore store(conn->get(), q.path);  // this thread's reader
    DecodedBlock d;
    std::vector<uint32_t> tl_sel;
    std::vector<int64_t> tl_step;
    std::vector<char> tl_step_null;
    for (;;) {
      const size_t bi = next.fetch_add(1);
      if (bi >= blocks.size() || failed.load()) return;
      const engine::BlockZoneRow& b = blocks[bi].z;
      // Read, decoded, and checked to hold exactly the declared rows (the store's errors name
      // the file and the block).
      if (auto s = store.Read(b, want, &d); !s.ok()) return fail(s.message());
      const auto steps_it = steps.find(b.rank);
      const std::vector<std::pair<int64_t, int64_t>> no_steps;
      const auto& rank_steps = steps_it == steps.end() ? no_steps : steps_it->second;
      // 1. The rows of the block that pass the filters (all of them when there is none), and
      //    their steps.
      std::vector<uint32_t>& sel = tl_sel;
      std::vector<int64_t>& step_of = tl_step;
      std::vector<char>& step_null = tl_step_null;
      sel.clear();
      step_of.clear();
      step_null.clear();
      // Without a filter or steps every row is kept: no per-row pass (the columns are then
      // copied whole below; those written row by row get the identity as their selection).
      const bool keep_all = !row_filter && !need_steps;
      if (!keep_all) {
        for (size_t i = 0; i < d.n; ++i) {
          if (row_filter) {
            if (!q.names.empty() && !In(q.names, d.name[i])) continue;
            if (!q.cats.empty() && !In(q.cats, d.cat[i])) continue;
            if (!q.kinds.empty() && !In(q.kinds, d.kind[i])) continue;
            if (!q.ts.all() && !q.ts.has(d.ts[i])) continue;
            if (!q.dur.all() && !q.dur.has(d.dur[i])) continue;
          }
          if (need_steps) {
            int64_t step = 0;
            const bool has_step = StepAt(rank_steps, d.ts[i], &step);
            if (!q.step.all() && !(has_step && q.step.has(step))) continue;
            step_of.push_back(step);
            step_null.push_back(!has_step);
          }
          sel.push_back(static_cast<uint32_t>(i));
        }
      }
      const size_t m = keep_all ? d.n : sel.size();
      const bool all = m == d.n;
      if (keep_all && per_row_cols) {  // the per-row columns below index through sel
        sel.resize(m);
        std::iota(sel.begin(), sel.end(), 0u);
      }
      const uint64_t o = blocks[bi].offset;
      auto& C = r->cols;
      // 2. Column by column: a copy when every row is kept, a gather otherwise.
      auto put = [&](int col, const auto& src) {
        using T = std::remove_const_t<std::remove_reference_t<decltype(src[0])>>;
        T* dst = C[col].template As<T>() + o;
        if (all) {
          std::memcpy(dst, src.data(), m * sizeof(T));
        } else {
          for (size_t x = 0; x < m; ++x) dst[x] = src[sel[x]];
        }
      };
      auto put_arg = [&](int col, const auto& src, uint32_t bit, auto cast) {
        using T = decltype(cast(src[0]));
        T* dst = C[col].template As<T>() + o;
        char* null = C[col].null.data() + o;
        for (size_t x = 0; x < m; ++x) {
          const size_t i = sel[x];
          dst[x] = cast(src[i]);
          null[x] = !(d.arg_mask[i] & bit);
        }
      };
      if (q.want[kRank]) std::fill_n(C[kRank].As<int32_t>() + o, m, b.rank);
      if (q.want[kTid] || q.want[kLane]) {
        uint32_t last = UINT32_MAX;
        TrackInfo ti;
        for (size_t x = 0; x < m; ++x) {
          const uint32_t track = d.track[sel[x]];
          if (track != last) {
            const auto t = tracks.find(track);
            ti = t == tracks.end() ? TrackInfo{b.rank, false, 0, -1} : t->second;
            last = track;
          }
          if (q.want[kTid]) {
            C[kTid].As<int64_t>()[o + x] = ti.tid;
            C[kTid].null[o + x] = !ti.has_tid;
          }
          if (q.want[kLane]) {
            C[kLane].As<int32_t>()[o + x] = ti.lane;
            C[kLane].null[o + x] = ti.lane < 0;
          }
        }
      }
      if (q.want[kTrack]) put(kTrack, d.track);
      if (q.want[kId]) {
        int64_t* dst = C[kId].As<int64_t>() + o;
        for (size_t x = 0; x < m; ++x) {
          const size_t i = sel[x];
          dst[x] = static_cast<int64_t>((uint64_t{d.track[i]} << 32) | d.k[i]);
        }
      }
      if (q.want[kName]) put(kName, d.name);
      if (q.want[kCat]) put(kCat, d.cat);
      if (q.want[kKind]) put(kKind, d.kind);
      if (q.want[kTs]) put(kTs, d.ts);
      if (q.want[kDur]) put(kDur, d.dur);
      if (q.want[kEndTs]) {
        int64_t* dst = C[kEndTs].As<int64_t>() + o;
        for (size_t x = 0; x < m; ++x)
          dst[x] = engine::SaturatingAdd(d.ts[sel[x]], d.dur[sel[x]]);  // as events.end_ts
      }
      if (q.want[kDepth]) put(kDepth, d.depth);
      auto i64 = [](auto v) { return static_cast<int64_t>(v); };
      auto i32 = [](auto v) { return static_cast<int32_t>(v); };
      if (q.want[kBytes]) put_arg(kBytes, d.bytes, EventArgs::kBytes, i64);
      if (q.want[kPeer]) put_arg(kPeer, d.peer, EventArgs::kPeer, i32);
      if (q.want[kTag]) put_arg(kTag, d.tag, EventArgs::kTag, i32);
      if (q.want[kComm]) put_arg(kComm, d.comm, EventArgs::kComm, i64);
      if (q.want[kSeq]) put_arg(kSeq, d.seq, EventArgs::kSeq, i64);
      if (q.want[kFlow]) put_arg(kFlow, d.flow, EventArgs::kFlow, i64);
      if (q.want[kValue]) {
        double* dst = C[kValue].As<double>() + o;
        char* null = C[kValue].null.data() + o;
        constexpr auto kCounter = static_cast<uint8_t>(engine::RowKind::kCounter);
        for (size_t x = 0; x < m; ++x) {
          const size_t i = sel[x];
          const bool counter = d.kind[i] == kCounter;
          dst[x] = counter ? d.value[i] : 0.0;
          null[x] = !counter;
        }
      }
      if (q.want[kStep]) {
        std::memcpy(C[kStep].As<int64_t>() + o, step_of.data(), m * sizeof(int64_t));
        std::memcpy(C[kStep].null.data() + o, step_null.data(), m);
      }
      kept[bi] = m;
    }
  };
  // A thread's exception (memory) would terminate the host process: it becomes the error.
  auto work = [&] {
    try {
      work_blocks();
    } catch (const std::exception& e) {
      fail(q.path + ": " + e.what());
    }
  };
  size_t threads = std::thread::hardware_concurrency();
  // A whole positive number, else the default (engine/util/parse_number.h's policy: "4x" or
  // " 4" is not 4).
  const char* env = std::getenv("TRACEDB_READ_THREADS");
  if (int64_t v = 0; env != nullptr && engine::ParseInt64(env, &v) && v > 0) {
    threads = static_cast<size_t>(v);
  }
  threads = std::max<size_t>(1, std::min<size_t>({threads, 8, blocks.size()}));
  if (threads == 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads; ++t) pool.emplace_back(work);
    for (auto& t : pool) t.join();
  }
  if (failed) {
    r->error = first_error;
    return;
  }
  // Close the gaps the filters left (blocks are in output order; slots only move down).
  uint64_t n = 0;
  for (size_t bi = 0; bi < blocks.size(); ++bi) {
    const uint64_t from = blocks[bi].offset, count = kept[bi];
    if (from != n && count > 0) {
      for (auto& o : r->cols) {
        if (o.itemsize == 0) continue;
        std::memmove(o.data.data() + n * o.itemsize, o.data.data() + from * o.itemsize,
                     count * o.itemsize);
        if (o.nullable) std::memmove(o.null.data() + n, o.null.data() + from, count);
      }
    }
    n += count;
  }
  r->n = n;
}

}  // namespace

void ScanEvents(const Query& q, ScanResult* r) {
  // Nothing may escape into the Python interpreter: an allocation the zone maps ask for that
  // the machine cannot give is an error naming the file.
  try {
    Scan(q, r);
  } catch (const std::bad_alloc&) {
    *r = ScanResult();
    r->error = q.path + ": out of memory for the events its zone maps declare";
  } catch (const std::exception& e) {
    *r = ScanResult();
    r->error = q.path + ": " + e.what();
  }
}

}  // namespace tracedb::python
