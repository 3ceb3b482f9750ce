// The model the why analyses work on (why_internal.h): every block decoded once into self-time
// segments per thread track and the communication events by id; steps and communicators from
// their tables; collective and point-to-point matching read from the query layer's tables
// (tracedb_collective_arrivals, tracedb_p2p_messages, tracedb_p2p_receives) on the same
// connection, so that matching is defined once (query/views_collective.h, query/views_p2p.h).
#include <algorithm>
#include <string>
#include <unordered_set>

#include "engine/db/event_block.h"
#include "query/analysis/why_internal.h"

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

void TimeByName(const Model& m, const RankData& rd, int64_t a, int64_t b,
                std::unordered_map<int32_t, int64_t>* out) {
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
    } else if (it->partner_rank == other) {
      auto c = m.comm.find(it->partner_id);
      if (c == m.comm.end()) continue;
      *mine = *it;
      *theirs =
          Sync{it->partner_id, c->second.ts, c->second.ts + c->second.dur, c->second.name, -1, -1,
               it->id};
      return true;
    }
  }
  return false;
}

StatusOr<Model> LoadModel(engine::Db* db) {
  Model m;
  m.Intern(kNoSpan);
  m.Intern(kUnattributed);
  // Strings: our name index per string id (ids with the same text share one), the categories
  // of communication.
  std::vector<int32_t> name_of;
  std::vector<uint8_t> comm_cat;
  {
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
        comm_cat.resize(u + 1, 0);
      }
      const std::string s(st->Text(1));
      name_of[u] = m.Intern(s);
      comm_cat[u] = u != 0 && (s == "mpi" || s == "comm" || s == "nccl");
    }
  }
  auto name_at = [&](uint32_t id) { return id < name_of.size() ? name_of[id] : -1; };
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
  // Every block once: spans of thread tracks, communication events by id.
  std::map<std::pair<int64_t, uint32_t>, std::vector<SpanRec>> spans;  // (rank, track)
  {
    auto st = db->Prepare("SELECT block, rank, count, data FROM main.blocks ORDER BY block");
    if (!st.ok()) return Err("blocks", st.status());
    DecodedBlock b;
    constexpr uint32_t kWant =
        engine::kColK | engine::kColKind | engine::kColName | engine::kColCat | engine::kColTs;
    const uint8_t kSpan = static_cast<uint8_t>(RowKind::kSpan);
    const uint8_t kInstant = static_cast<uint8_t>(RowKind::kInstant);
    std::pair<int64_t, uint32_t> last_key{-1, UINT32_MAX};
    std::vector<SpanRec>* last = nullptr;
    bool last_thread = false;
    for (;;) {
      auto row = st->Step();
      if (!row.ok()) return Err("blocks", row.status());
      if (!*row) break;
      const int64_t block = st->Int(0), rank = st->Int(1);
      Status s = engine::DecodeBlock(st->Blob(3), block, &b, kWant);
      if (!s.ok()) return Err("block " + std::to_string(block), s);
      if (b.n != static_cast<size_t>(st->Int(2)))
        return Status::Corruption("why analysis: block " + std::to_string(block) + " holds " +
                                  std::to_string(b.n) + " rows, its zone map says " +
                                  std::to_string(st->Int(2)));
      m.events += static_cast<int64_t>(b.n);
      RankData& rd = m.Rank(rank);
      bool args = false;
      for (size_t i = 0; i < b.n; ++i) {
        const uint8_t kind = b.kind[i];
        if (kind != kSpan && kind != kInstant) continue;
        const int64_t ts = b.ts[i], dur = kind == kSpan ? b.dur[i] : 0;
        const int64_t end = engine::SaturatingAdd(ts, dur);
        rd.first_ts = std::min(rd.first_ts, ts);
        rd.last_end = std::max(rd.last_end, end);
        const uint32_t c = b.cat[i];
        if (c < comm_cat.size() && comm_cat[c]) {
          if (!args) {
            Status a = b.Need(engine::kColArgs);
            if (!a.ok()) return Err("block " + std::to_string(block), a);
            args = true;
          }
          const int64_t id =
              (static_cast<int64_t>(b.track[i]) << 32) | static_cast<int64_t>(b.k[i]);
          const bool has_peer = (b.arg_mask[i] & EventArgs::kPeer) != 0;
          auto t = tracks.find(b.track[i]);
          m.comm[id] = CommEvent{rank,
                                 ts,
                                 dur,
                                 name_at(b.name[i]),
                                 has_peer,
                                 has_peer ? b.peer[i] : 0,
                                 t != tracks.end() && !t->second.second};
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
      for (const Seg& s : rd.tracks[t]) total += s.b - s.a;
      if (total > best) {
        best = total;
        rd.main_track = static_cast<int>(t);
      }
    }
  }
  // Collective arrivals as the query layer matches them (by (comm, seq)).
  {
    auto st = db->Prepare(
        "SELECT rank, name, comm, seq, id, ts, dur, end_ts, wait_ns, last_rank "
        "FROM tracedb_collective_arrivals");
    if (!st.ok()) return Err("tracedb_collective_arrivals", st.status());
    for (;;) {
      auto row = st->Step();
      if (!row.ok()) return Err("tracedb_collective_arrivals", row.status());
      if (!*row) break;
      Arrival a;
      a.rank = st->Int(0);
      a.name = st->IsNull(1) ? -1 : m.Intern(std::string(st->Text(1)));
      a.has_comm = !st->IsNull(2);
      a.comm = st->Int(2);
      a.seq = st->Int(3);
      a.id = st->Int(4);
      a.ts = st->Int(5);
      a.has_dur = !st->IsNull(6);
      a.end_ts = a.has_dur ? st->Int(7) : a.ts;
      a.wait = st->Int(8);
      a.last_rank = st->Int(9);
      m.arrivals.push_back(a);
    }
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
  }
  // Point-to-point messages as the query layer matches them (MPI's non-overtaking rule).
  {
    std::unordered_map<int64_t, int64_t> posted;  // receive id -> posted_ts
    auto st = db->Prepare("SELECT id, posted_ts FROM tracedb_p2p_receives");
    if (!st.ok()) return Err("tracedb_p2p_receives", st.status());
    for (;;) {
      auto row = st->Step();
      if (!row.ok()) return Err("tracedb_p2p_receives", row.status());
      if (!*row) break;
      posted[st->Int(0)] = st->Int(1);
    }
    auto ms = db->Prepare("SELECT send_id, recv_id, src, dst, send_ts FROM tracedb_p2p_messages");
    if (!ms.ok()) return Err("tracedb_p2p_messages", ms.status());
    for (;;) {
      auto row = ms->Step();
      if (!row.ok()) return Err("tracedb_p2p_messages", row.status());
      if (!*row) break;
      Message msg;
      msg.send_id = ms->Int(0);
      msg.recv_id = ms->Int(1);
      msg.src = ms->Int(2);
      msg.dst = ms->Int(3);
      msg.send_ts = ms->Int(4);
      auto p = posted.find(msg.recv_id);
      if (p == posted.end()) continue;
      msg.recv_posted_ts = p->second;
      auto s = m.comm.find(msg.send_id);
      auto r = m.comm.find(msg.recv_id);
      if (s == m.comm.end() || r == m.comm.end()) continue;
      m.messages.push_back(msg);
      m.Rank(msg.src).syncs.push_back(Sync{msg.send_id, s->second.ts, s->second.ts + s->second.dur,
                                           s->second.name, -1, msg.dst, msg.recv_id});
      m.Rank(msg.dst).syncs.push_back(Sync{msg.recv_id, r->second.ts, r->second.ts + r->second.dur,
                                           r->second.name, -1, msg.src, msg.send_id});
    }
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
