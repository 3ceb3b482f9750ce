// The model the why analyses work on (why_internal.h): every block decoded once into self-time
// segments per thread track and the rows the matching reads (why_match.cc: collectives and
// messages as the query layer's tables match them); steps and communicators from their tables.
#include <algorithm>
#include <string>
#include <unordered_set>

#include "engine/db/block_check.h"
#include "engine/db/block_store.h"
#include "engine/db/event_block.h"
#include "engine/util/saturating.h"
#include "query/analysis/why_internal.h"
#include "query/views/comm_match.h"
#include "query/views/negotiation_rows.h"

namespace tracedb::query::analysis::internal {
namespace {

using engine::DecodedBlock;
using engine::EventArgs;
using engine::RowKind;

Status Err(std::string_view where, const Status& s) {
  return Status::Corruption("why analysis: " + std::string(where) + ": " + s.message());
}

struct SpanRec {
  int64_t ts, end;
  uint32_t depth;
  int32_t name;
};

// Self-time segments of one track's spans (sorted by (ts, depth)): at each instant, the
// deepest open span. Improperly nested spans end where they end; nothing is counted twice.
void Sweep(const std::vector<SpanRec>& spans, std::vector<Seg>* out) {
  struct Open {
    int64_t end;
    int32_t name;
  };
  std::vector<Open> stack;
  int64_t cur = INT64_MIN;
  auto emit = [&](int64_t a, int64_t b, int32_t name) {
    if (b <= a) return;
    if (!out->empty() && out->back().b == a && out->back().name == name) {
      out->back().b = b;
      return;
    }
    out->push_back(Seg{a, b, name});
  };
  auto pop_until = [&](int64_t t) {
    while (!stack.empty() && stack.back().end <= t) {
      emit(cur, stack.back().end, stack.back().name);
      cur = std::max(cur, stack.back().end);
      stack.pop_back();
    }
  };
  for (const SpanRec& s : spans) {
    pop_until(s.ts);
    if (!stack.empty()) emit(cur, s.ts, stack.back().name);
    cur = std::max(cur, s.ts);
    stack.push_back(Open{s.end, s.name});
  }
  pop_until(INT64_MAX);
}

}  // namespace

bool RankData::StepAt(int64_t ts, int64_t* step) const {
  auto it = std::upper_bound(steps.begin(), steps.end(), std::make_pair(ts, INT64_MAX));
  if (it == steps.begin()) return false;
  *step = std::prev(it)->second;
  return true;
}

int32_t Model::Intern(const std::string& s) {
  auto [it, fresh] = name_index.try_emplace(s, static_cast<int32_t>(names.size()));
  if (fresh) names.push_back(s);
  return it->second;
}

int64_t Model::GlobalRank(int64_t c, int64_t rank_in_comm) const {
  auto it = from_comm.find({c, rank_in_comm});
  return it == from_comm.end() ? rank_in_comm : it->second;
}

void TimeByName(const Model& m, const RankData& rd, int64_t a, int64_t b, NameNs* out) {
  if (b <= a) return;
  int64_t covered = 0;
  for (const std::vector<Seg>& segs : rd.tracks) {
    auto it = std::upper_bound(segs.begin(), segs.end(), a,
                               [](int64_t t, const Seg& s) { return t < s.a; });
    if (it != segs.begin()) --it;
    for (; it != segs.end() && it->a < b; ++it) {
      const int64_t ov = std::min(b, it->b) - std::max(a, it->a);
      if (ov <= 0) continue;
      (*out)[it->name] += ov;
      covered += ov;
    }
  }
  if (covered < b - a) {
    auto f = m.name_index.find(kNoSpan);
    if (f != m.name_index.end()) (*out)[f->second] += (b - a) - covered;
  }
}

const Sync* PreviousSync(const RankData& rd, int64_t ts, int64_t self) {
  auto it = std::upper_bound(rd.syncs.begin(), rd.syncs.end(), ts,
                             [](int64_t t, const Sync& s) { return t < s.end; });
  while (it != rd.syncs.begin()) {
    --it;
    if (it->id != self) return &*it;
  }
  return nullptr;
}

bool PreviousCommonSync(const Model& m, const RankData& rd, int64_t ts, int64_t other, Sync* mine,
                        Sync* theirs, int limit) {
  auto it = std::lower_bound(rd.by_entry.begin(), rd.by_entry.end(), ts,
                             [](const Sync& s, int64_t t) { return s.ts < t; });
  for (int n = 0; it != rd.by_entry.begin() && n < limit; ++n) {
    --it;
    if (it->group >= 0) {
      for (const auto& [rank, s] : m.groups[static_cast<size_t>(it->group)])
        if (rank == other) {
          *mine = *it;
          *theirs = s;
          return true;
        }
    } else if (it->partner_rank == other && it->message >= 0) {
      const Message& msg = m.messages[static_cast<size_t>(it->message)];
      const CommEvent& c = it->id == msg.send_id ? msg.recv : msg.send;
      *mine = *it;
      *theirs = Sync{it->partner_id, c.ts, c.ts + c.dur, c.name, -1, -1, it->id};
      return true;
    }
  }
  return false;
}

StatusOr<Model> LoadModel(engine::Db* db) {
  Model m;
  m.Intern(kNoSpan);
  m.Intern(kUnattributed);
  // Strings: our name index per string id (ids with the same text share one), and what each id
  // is to the analyses and to the matching (why_match.cc: the same tests on the text as the
  // query layer's tables, string ids past DenseIdLimit ignored by the collectives as there).
  enum : uint8_t {
    kCommCat = 1,       // cat mpi, comm or nccl (id not 0): a communication event
    kCollMpiComm = 2,   // collectives: cat mpi or comm
    kCollNccl = 4,      // collectives: cat nccl (instants)
    kReady = 8,         // RANK_READY
    kNegotiation = 16,  // NEGOTIATE_*
    kP2pMpi = 32,       // point-to-point: cat mpi (any id)
  };
  std::vector<int32_t> name_of;
  std::vector<uint8_t> what;
  MatchInput in;
  size_t coll_strings = 0;  // the collectives' string ids: [0, coll_strings)
  {
    auto nstrings = db->QueryInt("SELECT count(*) FROM main.strings", 0);
    if (!nstrings.ok()) return Err("strings", nstrings.status());
    auto st = db->Prepare("SELECT id, s FROM main.strings");
    if (!st.ok()) return Err("strings", st.status());
    for (;;) {
      auto row = st->Step();
      if (!row.ok()) return Err("strings", row.status());
      if (!*row) break;
      const int64_t id = st->Int(0);
      if (id < 0 || id > UINT32_MAX) continue;
      const auto u = static_cast<size_t>(id);
      if (name_of.size() <= u) {
        name_of.resize(u + 1, -1);
        what.resize(u + 1, 0);
        in.p2p_name.resize(u + 1, 0);
      }
      const std::string s(st->Text(1));
      name_of[u] = m.Intern(s);
      uint8_t w = 0;
      const bool mpi = s == "mpi", comm = s == "comm", nccl = s == "nccl";
      if (u != 0 && (mpi || comm || nccl)) w |= kCommCat;
      if (mpi) w |= kP2pMpi;
      if (engine::DenseIdOk(id, *nstrings)) {
        coll_strings = std::max(coll_strings, u + 1);
        if (u != 0 && (mpi || comm)) w |= kCollMpiComm;
        if (u != 0 && nccl) w |= kCollNccl;
        if (s == "RANK_READY") w |= kReady;
        if (negotiation::IsNegotiationName(s)) w |= kNegotiation;
      }
      what[u] = w;
      in.p2p_name[u] = comm_match::RoleOfName(s);
    }
  }
  auto name_at = [&](uint32_t id) { return id < name_of.size() ? name_of[id] : -1; };
  auto what_of = [&](uint32_t id) -> uint8_t { return id < what.size() ? what[id] : 0; };
  // Names as the collectives read them: NULL past their string ids, a missing string reads "".
  auto coll_name = [&](uint32_t id) -> int32_t {
    if (id >= coll_strings) return -1;
    return name_of[id] >= 0 ? name_of[id] : m.Intern("");
  };
  std::vector<int32_t> negotiation_of;  // string id -> the name after NEGOTIATE_ (-2: not yet)
  // Tracks: which are threads (the others are lanes: tensors, streams, NCCL communicators).
  std::unordered_map<int64_t, std::pair<int64_t, bool>> tracks;  // track -> (rank, thread)
  {
    auto st = db->Prepare("SELECT track, rank, kind FROM main.tracks");
    if (!st.ok()) return Err("tracks", st.status());
    for (;;) {
      auto row = st->Step();
      if (!row.ok()) return Err("tracks", row.status());
      if (!*row) break;
      tracks[st->Int(0)] = {st->Int(1), st->Text(2) == "thread"};
    }
  }
  {
    auto st = db->Prepare("SELECT rank, ts, step FROM main.steps ORDER BY rank, ts");
    if (!st.ok()) return Err("steps", st.status());
    for (;;) {
      auto row = st->Step();
      if (!row.ok()) return Err("steps", row.status());
      if (!*row) break;
      m.Rank(st->Int(0)).steps.emplace_back(st->Int(1), st->Int(2));
    }
  }
  if (db->HasTable("comms")) {
    auto st = db->Prepare("SELECT rank, comm, rank_in_comm FROM main.comms");
    if (!st.ok()) return Err("comms", st.status());
    for (;;) {
      auto row = st->Step();
      if (!row.ok()) return Err("comms", row.status());
      if (!*row) break;
      m.in_comm[{st->Int(0), st->Int(1)}] = st->Int(2);
      m.from_comm[{st->Int(1), st->Int(2)}] = st->Int(0);
    }
  }
  // Every block once: spans of thread tracks, and the rows the matching reads.
  std::map<std::pair<int64_t, uint32_t>, std::vector<SpanRec>> spans;  // (rank, track)
  {
    // Every block, decoded in one pass by the block store (which checks each one's zone map
    // and row count).
    engine::BlockStore store(db, db->path(), "main");
    engine::BlockSelection every;
    every.order = engine::BlockSelection::Order::kBlock;
    constexpr uint32_t kWant =
        engine::kColK | engine::kColKind | engine::kColName | engine::kColCat | engine::kColTs;
    const uint8_t kSpan = static_cast<uint8_t>(RowKind::kSpan);
    const uint8_t kInstant = static_cast<uint8_t>(RowKind::kInstant);
    std::pair<int64_t, uint32_t> last_key{-1, UINT32_MAX};
    std::vector<SpanRec>* last = nullptr;
    bool last_thread = false;
    uint32_t lane_track = UINT32_MAX;
    bool lane = false;
    auto per_block = [&](const engine::BlockZoneRow& z, DecodedBlock& b) -> Status {
      const int64_t block = z.block, rank = z.rank;
      m.events += static_cast<int64_t>(b.n);
      RankData& rd = m.Rank(rank);
      for (size_t i = 0; i < b.n; ++i) {
        const uint8_t kind = b.kind[i];
        const uint8_t wc = what_of(b.cat[i]), wn = what_of(b.name[i]);
        const bool span_or_instant = kind == kSpan || kind == kInstant;
        const int64_t ts = b.ts[i], dur = kind == kSpan ? b.dur[i] : 0;
        const int64_t end = engine::SaturatingAdd(ts, dur);
        if (span_or_instant) {
          rd.first_ts = std::min(rd.first_ts, ts);
          rd.last_end = std::max(rd.last_end, end);
        }
        if ((wc & (kCommCat | kCollMpiComm | kCollNccl | kP2pMpi)) || (wn & kReady)) {
          const uint32_t need =
              engine::kColArgs | ((wn & kReady) ? uint32_t{engine::kColParent} : 0u);
          Status a = b.Need(need);
          if (!a.ok()) return Err("block " + std::to_string(block), a);
          const int64_t id =
              (static_cast<int64_t>(b.track[i]) << 32) | static_cast<int64_t>(b.k[i]);
          const uint32_t mask = b.arg_mask[i];
          const bool is_comm = span_or_instant && (wc & kCommCat);
          if (b.track[i] != lane_track) {
            auto t = tracks.find(b.track[i]);
            lane = t != tracks.end() && !t->second.second;
            lane_track = b.track[i];
          }
          const CommEvent ev{ts, dur, name_at(b.name[i]), lane};
          if (is_comm) m.comm_events++;
          const bool lane_wait = is_comm && lane && dur > 0;
          // Collective arrivals (views_collective.cc).
          if ((mask & EventArgs::kSeq) &&
              ((wc & kCollMpiComm) || ((wc & kCollNccl) && kind == kInstant))) {
            Arrival a{};
            a.rank = rank;
            a.name = coll_name(b.name[i]);
            a.has_comm = (mask & EventArgs::kComm) != 0;
            a.comm = a.has_comm ? static_cast<int64_t>(b.comm[i]) : 0;
            a.seq = static_cast<int64_t>(b.seq[i]);
            a.id = id;
            a.ts = ts;
            a.has_dur = true;
            a.end_ts = engine::SaturatingAdd(ts, b.dur[i]);  // as events.end_ts
            a.has_peer = is_comm && (mask & EventArgs::kPeer);
            a.peer = a.has_peer ? b.peer[i] : 0;
            a.lane_wait = lane_wait;
            in.arrivals.push_back(a);
          }
          negotiation::Tick tick;
          if ((wn & kReady) && negotiation::TickAt(b, i, &tick))
            in.ticks.push_back(MatchInput::Tick{tick.id, tick.parent, tick.ts, tick.peer,
                                                tick.has_peer, is_comm, lane_wait});
          // Point-to-point candidates (views_p2p.cc's ReadInputs).
          if (wc & kP2pMpi) {
            const uint8_t p = b.name[i] < in.p2p_name.size() ? in.p2p_name[b.name[i]] : 0;
            const bool peer = (mask & EventArgs::kPeer) && b.peer[i] >= 0;
            if ((peer && (p & (comm_match::kSend | comm_match::kRecv))) ||
                ((mask & EventArgs::kFlow) && (peer || (p & comm_match::kPost)))) {
              in.mpi.push_back(MatchInput::Mpi{
                  id, ts, engine::SaturatingAdd(ts, b.dur[i]), static_cast<int32_t>(rank),
                  b.name[i], mask, b.peer[i], b.tag[i], b.comm[i], b.flow[i], is_comm, ev});
            }
          }
        }
        if (kind == kSpan && (wn & kNegotiation)) {
          const uint32_t n = b.name[i];
          if (negotiation_of.size() <= n) negotiation_of.resize(n + 1, -2);
          if (negotiation_of[n] == -2)
            negotiation_of[n] = m.Intern(m.names[static_cast<size_t>(name_of[n])].substr(10));
          in.negotiations.emplace_back(
              (static_cast<int64_t>(b.track[i]) << 32) | static_cast<int64_t>(b.k[i]),
              negotiation_of[n]);
        }
        if (kind != kSpan || dur <= 0) continue;
        const std::pair<int64_t, uint32_t> key{rank, b.track[i]};
        if (key != last_key) {
          auto t = tracks.find(b.track[i]);
          last_thread = t == tracks.end() || t->second.second;
          last = &spans[key];
          last_key = key;
        }
        if (last_thread) last->push_back(SpanRec{ts, end, b.depth[i], name_at(b.name[i])});
      }
      return Status::Ok();
    };
    if (Status s = store.ForEachDecoded(every, kWant, per_block); !s.ok()) {
      return s.IsCorruption() ? Status::Corruption("why analysis: " + s.message())
                              : Err("blocks", s);
    }
  }
  {
    // The analyses add and subtract timestamps (waits, gaps, step times, path lengths) in
    // int64: events and steps more than 2^62 ns (146 years) apart are no job on one clock (a DB
    // made elsewhere), and are refused here, by name, rather than computed with overflow. Sums
    // of many such differences saturate where they are made.
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const auto& [rank, rd] : m.ranks) {
      if (rd.first_ts <= rd.last_end) {
        lo = std::min(lo, rd.first_ts);
        hi = std::max(hi, rd.last_end);
      }
      for (const auto& [ts, step] : rd.steps) {
        lo = std::min(lo, ts);
        hi = std::max(hi, ts);
      }
    }
    if (lo <= hi && static_cast<__int128>(hi) - lo > (int64_t{1} << 62)) {
      return Status::InvalidArgument(
          "why analysis: the events and steps span from ts " + std::to_string(lo) + " to " +
          std::to_string(hi) + " ns, more than 2^62 ns (146 years): not one job on one clock");
    }
  }
  for (auto& [key, v] : spans) {
    // Blocks hold a track's events in start order, so this is mostly a check.
    auto by_start = [](const SpanRec& x, const SpanRec& y) {
      return x.ts != y.ts ? x.ts < y.ts : x.depth < y.depth;
    };
    if (!std::is_sorted(v.begin(), v.end(), by_start))
      std::stable_sort(v.begin(), v.end(), by_start);
    RankData& rd = m.Rank(key.first);
    rd.tracks.emplace_back();
    Sweep(v, &rd.tracks.back());
    v.clear();
    v.shrink_to_fit();
  }
  for (auto& [rank, rd] : m.ranks) {
    int64_t best = -1;
    for (size_t t = 0; t < rd.tracks.size(); ++t) {
      int64_t total = 0;
      for (const Seg& s : rd.tracks[t]) total = engine::SaturatingAdd(total, s.b - s.a);
      if (total > best) {
        best = total;
        rd.main_track = static_cast<int>(t);
      }
    }
  }
  // Collective arrivals as the query layer matches them (by (comm, seq)).
  MatchCollectives(&in, &m);
  // Partitions by (comm, seq) are adjacent: each is a group.
  for (size_t lo = 0; lo < m.arrivals.size();) {
    size_t hi = lo + 1;
    const Arrival& f = m.arrivals[lo];
    while (hi < m.arrivals.size() && m.arrivals[hi].has_comm == f.has_comm &&
           m.arrivals[hi].comm == f.comm && m.arrivals[hi].seq == f.seq)
      ++hi;
    const auto g = static_cast<int64_t>(m.groups.size());
    m.groups.emplace_back();
    for (size_t i = lo; i < hi; ++i) {
      const Arrival& a = m.arrivals[i];
      Sync s{a.id, a.ts, std::max(a.ts, a.end_ts), a.name, g, -1, -1};
      m.groups.back().emplace_back(a.rank, s);
      m.Rank(a.rank).syncs.push_back(s);
    }
    lo = hi;
  }
  // Point-to-point messages as the query layer matches them (MPI's non-overtaking rule).
  MatchMessages(&in, &m);
  for (size_t i = 0; i < m.messages.size(); ++i) {
    const Message& msg = m.messages[i];
    const auto mi = static_cast<int64_t>(i);
    m.Rank(msg.src).syncs.push_back(Sync{msg.send_id, msg.send.ts, msg.send.ts + msg.send.dur,
                                         msg.send.name, -1, msg.dst, msg.recv_id, mi});
    m.Rank(msg.dst).syncs.push_back(Sync{msg.recv_id, msg.recv.ts, msg.recv.ts + msg.recv.dur,
                                         msg.recv.name, -1, msg.src, msg.send_id, mi});
  }
  for (auto& [rank, rd] : m.ranks) {
    std::sort(rd.syncs.begin(), rd.syncs.end(), [](const Sync& x, const Sync& y) {
      return x.end != y.end ? x.end < y.end : x.id < y.id;
    });
    rd.syncs.erase(std::unique(rd.syncs.begin(), rd.syncs.end(),
                               [](const Sync& x, const Sync& y) { return x.id == y.id; }),
                   rd.syncs.end());
    if (rd.first_ts == INT64_MAX) rd.first_ts = rd.last_end = 0;
    rd.by_entry = rd.syncs;
    std::sort(rd.by_entry.begin(), rd.by_entry.end(), [](const Sync& x, const Sync& y) {
      return x.ts != y.ts ? x.ts < y.ts : x.id < y.id;
    });
  }
  return m;
}

}  // namespace tracedb::query::analysis::internal
