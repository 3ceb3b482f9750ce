// Wait states and root causes (delay costs) over the model of why_load.cc. The definitions
// and the reasons for each choice are in docs/why.md; in short:
//   wait states  Scalasca's patterns over the matched collectives and messages
//   delay        the late rank's synchronisation interval (from the end of its previous
//                synchronisation to its entry) against the waiting rank's: the extra length is
//                charged to the names where the late rank spent more time (direct cost), the
//                later start to the causes of the wait the late rank itself suffered at its
//                previous synchronisation (indirect cost), so one slow phase is charged once
//   noise        per name, each rank's time in a step against the median rank of that step;
//                the spread of those excesses over the job (MAD) says what stands out
#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <memory_resource>
#include <tuple>

#include "engine/util/saturating.h"
#include "query/analysis/why_internal.h"

namespace tracedb::query::analysis {

const char* PatternName(Pattern p) {
  switch (p) {
    case Pattern::kLateSender:
      return "late_sender";
    case Pattern::kLateReceiver:
      return "late_receiver";
    case Pattern::kWaitAtNxN:
      return "wait_at_nxn";
    case Pattern::kLateBroadcast:
      return "late_broadcast";
    case Pattern::kEarlyReduce:
      return "early_reduce";
    case Pattern::kEarlyGather:
      return "early_gather";
  }
  return "?";
}

CollKind CollectiveKind(const std::string& name) {
  std::string s;
  for (char c : name)
    if (std::isalnum(static_cast<unsigned char>(c)))
      s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto has = [&](const char* x) { return s.find(x) != std::string::npos; };
  // Horovod negotiations (NEGOTIATE_BROADCAST included) coordinate every rank: N x N.
  if (has("negotiat")) return CollKind::kNxN;
  if (has("allreduce") || has("reducescatter") || has("allgather") || has("alltoall") ||
      has("barrier") || has("scan"))
    return CollKind::kNxN;
  if (has("bcast") || has("broadcast") || has("scatter")) return CollKind::kOneToMany;
  if (has("reduce")) return CollKind::kReduce;
  if (has("gather")) return CollKind::kGather;
  return CollKind::kNxN;
}

namespace internal {
namespace {

bool IsBlockingReceiveCompletion(const std::string& n) {
  // The receive itself, or a call that blocks until a request completes (not MPI_Test*).
  return n == "MPI_Recv" || n == "MPI_Mrecv" || n == "MPI_Sendrecv" ||
         n == "MPI_Sendrecv_replace" || n.rfind("MPI_Wait", 0) == 0;
}

bool IsBlockingSend(const std::string& n) {
  return n == "MPI_Send" || n == "MPI_Ssend" || n == "MPI_Rsend" || n == "MPI_Sendrecv" ||
         n == "MPI_Sendrecv_replace";
}

template <typename Vec>
int64_t Median(Vec* v) {
  if (v->empty()) return 0;
  const size_t n = v->size(), h = n / 2;
  std::nth_element(v->begin(), v->begin() + static_cast<long>(h), v->end());
  const int64_t hi = (*v)[h];
  if (n % 2) return hi;
  const int64_t lo = *std::max_element(v->begin(), v->begin() + static_cast<long>(h));
  return lo + (hi - lo) / 2;
}

// Keeps the `k` largest shares of a charge, scaled up to the same total: what a wait is charged
// to is carried into every wait it propagates to, and a long chain would otherwise carry every
// cause it ever met (docs/why.md "Root causes").
template <typename Vec, typename Get>
void KeepLargest(Vec* v, size_t k, Get share) {
  using T = typename Vec::value_type;
  if (v->size() <= k) return;
  double total = 0, kept = 0;
  for (T& x : *v) total += share(x);
  std::partial_sort(v->begin(), v->begin() + static_cast<long>(k), v->end(),
                    [&](T a, T b) { return share(a) > share(b); });
  v->resize(k);
  for (T& x : *v) kept += share(x);
  if (kept <= 0) return;
  for (T& x : *v) share(x) *= total / kept;
}

}  // namespace

void ComputeWaits(const Model& m, Analysis* out) {
  auto add = [&](const Arrival& waiting, Pattern p, int64_t wait, const Arrival& late) {
    if (wait <= 0 || waiting.rank == late.rank) return;
    // A call that returned cannot have waited longer than it lasted (recorded spans).
    if (waiting.has_dur && waiting.end_ts > waiting.ts)
      wait = std::min(wait, waiting.end_ts - waiting.ts);
    WaitState w;
    w.id = waiting.id;
    w.rank = waiting.rank;
    auto rd = m.ranks.find(waiting.rank);
    if (rd != m.ranks.end()) w.has_step = rd->second.StepAt(waiting.ts, &w.step);
    w.pattern = p;
    w.ts = waiting.ts;
    w.wait_ns = wait;
    w.waited_for = late.rank;
    w.call = waiting.name;
    w.late_id = late.id;
    w.late_ts = late.ts;
    w.on_lane = waiting.lane_wait;
    out->waits.push_back(w);
  };
  const std::vector<Arrival>& a = m.arrivals;
  for (size_t lo = 0; lo < a.size();) {
    size_t hi = lo + 1;
    while (hi < a.size() && a[hi].has_comm == a[lo].has_comm && a[hi].comm == a[lo].comm &&
           a[hi].seq == a[lo].seq)
      ++hi;
    if (hi - lo < 2) {
      lo = hi;
      continue;
    }
    // Rows of a partition come latest first (views_collective.h): a[lo] is the last arrival.
    const CollKind kind =
        a[lo].name < 0 ? CollKind::kNxN : CollectiveKind(m.names[static_cast<size_t>(a[lo].name)]);
    if (kind == CollKind::kNxN) {
      for (size_t i = lo + 1; i < hi; ++i)
        add(a[i], Pattern::kWaitAtNxN, a[lo].ts - a[i].ts, a[lo]);
      lo = hi;
      continue;
    }
    // Rooted: the root is the rank whose rank in the communicator is the events' peer.
    const Arrival* root = nullptr;
    for (size_t i = lo; i < hi && root == nullptr; ++i) {
      if (!a[i].has_peer) continue;
      const int64_t g = m.GlobalRank(a[i].has_comm ? a[i].comm : 0, a[i].peer);
      for (size_t j = lo; j < hi; ++j)
        if (a[j].rank == g) root = &a[j];
    }
    if (root == nullptr) {
      out->skipped_rooted++;
      lo = hi;
      continue;
    }
    if (kind == CollKind::kOneToMany) {
      for (size_t i = lo; i < hi; ++i)
        if (&a[i] != root) add(a[i], Pattern::kLateBroadcast, root->ts - a[i].ts, *root);
    } else {
      const Arrival* last = nullptr;  // the last non-root arrival (rows come latest first)
      for (size_t i = lo; i < hi && last == nullptr; ++i)
        if (&a[i] != root) last = &a[i];
      add(*root, kind == CollKind::kReduce ? Pattern::kEarlyReduce : Pattern::kEarlyGather,
          last->ts - root->ts, *last);
    }
    lo = hi;
  }
  for (const Message& msg : m.messages) {
    const CommEvent& s = msg.send;
    const CommEvent& r = msg.recv;
    const std::string& rname = r.name < 0 ? std::string() : m.names[static_cast<size_t>(r.name)];
    const std::string& sname = s.name < 0 ? std::string() : m.names[static_cast<size_t>(s.name)];
    Arrival send{msg.src, 0, 0, msg.send_id, s.ts, s.ts + s.dur, 0, 0, true, true, s.name};
    send.lane_wait = s.on_lane && s.dur > 0;
    // The receiving side waits in the call that completes the receive (for MPI_Irecv: the
    // MPI_Wait* that completed it); its late rank entered the send at send.ts.
    if (IsBlockingReceiveCompletion(rname)) {
      Arrival recv{msg.dst, 0, 0, msg.recv_id, r.ts, r.ts + r.dur, 0, 0, true, true, r.name};
      recv.lane_wait = r.on_lane && r.dur > 0;
      add(recv, Pattern::kLateSender, s.ts - r.ts, send);
    } else {
      out->skipped_nonblocking++;
    }
    // A blocking send that returned only after the receive was posted waited for it
    // (rendezvous); one that returned first was buffered (eager) and did not wait.
    if (IsBlockingSend(sname) && msg.recv_posted_ts > s.ts && s.ts + s.dur > msg.recv_posted_ts) {
      Arrival posted{msg.dst, 0,    0,     msg.recv_id, msg.recv_posted_ts, msg.recv_posted_ts, 0,
                     0,       true, false, r.name};
      add(send, Pattern::kLateReceiver, msg.recv_posted_ts - s.ts, posted);
    }
  }
  std::sort(out->waits.begin(), out->waits.end(), [](const WaitState& x, const WaitState& y) {
    return std::tie(x.rank, x.ts, x.id, x.pattern) < std::tie(y.rank, y.ts, y.id, y.pattern);
  });
}

void ComputeNameTimes(const Model& m, Analysis* out) {
  // Per rank and step window (a step lasts until the rank's next one, the last one until the
  // rank's last event; a rank without steps is one window with no step).
  struct Key {
    bool has_step;
    int64_t step;
    int32_t name;
    bool operator<(const Key& o) const {
      return std::tie(has_step, step, name) < std::tie(o.has_step, o.step, o.name);
    }
  };
  // Nodes and small vectors from a pool: no malloc per node, freed at once (docs/why.md
  // "Speed").
  std::pmr::unsynchronized_pool_resource pool;
  std::pmr::map<std::pair<bool, int64_t>, int64_t> ranks_in_step(&pool);
  std::pmr::map<Key, std::pmr::vector<std::pair<int64_t, int64_t>>> groups(&pool);  // (rank, ns)
  NameNs t(&pool), wait_time(&pool);
  std::vector<std::pair<int64_t, int64_t>> lane_waits, merged;  // [from, to) of lane waits
  std::vector<int64_t> window_lengths;
  for (const auto& [rank, rd] : m.ranks) {
    std::vector<std::tuple<bool, int64_t, int64_t, int64_t>> windows;  // has, step, a, b
    if (rd.steps.empty()) {
      windows.emplace_back(false, 0, rd.first_ts, rd.last_end);
    } else {
      for (size_t i = 0; i < rd.steps.size(); ++i) {
        const int64_t a = rd.steps[i].first;
        const int64_t b = i + 1 < rd.steps.size() ? rd.steps[i + 1].first : rd.last_end;
        windows.emplace_back(true, rd.steps[i].second, a, std::max(a, b));
      }
    }
    // This rank's waits (out->waits is by (rank, ts)): waiting in a call is no time spent in it.
    auto wfirst = std::lower_bound(out->waits.begin(), out->waits.end(), rank,
                                   [](const WaitState& w, int64_t r) { return w.rank < r; });
    for (const auto& [has, step, a, b] : windows) {
      window_lengths.push_back(b - a);
      t.clear();
      TimeByName(m, rd, a, b, &t);
      while (wfirst != out->waits.end() && wfirst->rank == rank && wfirst->ts < a) ++wfirst;
      lane_waits.clear();
      for (auto w = wfirst; w != out->waits.end() && w->rank == rank && w->ts < b; ++w) {
        const int64_t len = std::min(w->wait_ns, b - w->ts);
        if (w->on_lane) {
          lane_waits.emplace_back(w->ts, w->ts + len);
          continue;
        }
        auto n = t.find(w->call);
        if (n != t.end()) n->second = std::max<int64_t>(0, n->second - len);
      }
      // A wait in a call on a lane (PyTorch's c10d operations, run by gloo's threads) is not on
      // the rank's thread tracks: what those did meanwhile (DDP's backward blocked on its
      // bucket, a Python call waiting for the operation) is the wait, not time spent in their
      // names. Each instant of the waits' union counts once.
      std::sort(lane_waits.begin(), lane_waits.end());
      merged.clear();
      for (const auto& w : lane_waits) {
        if (merged.empty() || w.first > merged.back().second)
          merged.push_back(w);
        else
          merged.back().second = std::max(merged.back().second, w.second);
      }
      for (const auto& w : merged) {
        wait_time.clear();
        TimeByName(m, rd, std::max(a, w.first), std::min(b, w.second), &wait_time);
        for (const auto& [name, ns] : wait_time) {
          auto n = t.find(name);
          if (n != t.end()) n->second = std::max<int64_t>(0, n->second - ns);
        }
      }
      ranks_in_step[{has, step}]++;
      for (const auto& [name, ns] : t)
        if (ns > 0) groups[Key{has, step, name}].emplace_back(rank, ns);
    }
  }
  out->median_step_ns = Median(&window_lengths);
  std::vector<int64_t> v;
  std::pmr::unordered_map<int32_t, std::pmr::vector<int64_t>> devs(&pool), medians(&pool);
  for (auto& [key, rows] : groups) {
    // Ranks of the step without time in the name spent 0 ns in it.
    v.clear();
    for (const auto& r : rows) v.push_back(r.second);
    v.resize(static_cast<size_t>(std::max<int64_t>(ranks_in_step[{key.has_step, key.step}],
                                                   static_cast<int64_t>(rows.size()))),
             0);
    const int64_t med = Median(&v);
    for (const auto& [rank, ns] : rows)
      out->name_times.push_back(
          Analysis::NameTime{key.has_step, key.step, rank, key.name, ns, med});
    std::pmr::vector<int64_t>& d = devs[key.name];
    for (int64_t x : v) d.push_back(x > med ? x - med : med - x);
    medians[key.name].push_back(med);
  }
  // The spread per name: 1.4826 x MAD (the standard deviation for normal noise), at least 1% of
  // the name's typical time in a step and 1 us (a name without variation would otherwise
  // report any excess at all).
  out->name_sigma.assign(m.names.size(), 1000.0);
  for (auto& [name, d] : devs) {
    const double mad = 1.4826 * static_cast<double>(Median(&d));
    const double floor = std::max(1000.0, 0.01 * static_cast<double>(Median(&medians[name])));
    if (name >= 0 && static_cast<size_t>(name) < out->name_sigma.size())
      out->name_sigma[static_cast<size_t>(name)] = std::max(mad, floor);
  }
  std::sort(out->name_times.begin(), out->name_times.end(),
            [](const Analysis::NameTime& x, const Analysis::NameTime& y) {
              return std::tie(x.has_step, x.step, x.rank, x.name) <
                     std::tie(y.has_step, y.step, y.rank, y.name);
            });
}

void ComputeCauses(const Model& m, const Options& o, Analysis* out) {
  constexpr size_t kMaxParts = 8;
  // How many of the late rank's synchronisations are searched for one shared with the waiting
  // rank (farther back, the intervals would span much of the job).
  constexpr int kCommonSearch = 32;
  // The maps' nodes and the small vectors from a pool: no malloc per node, freed at once
  // (docs/why.md "Speed").
  std::pmr::unsynchronized_pool_resource pool;
  // Cause rows by (rank, has_step, step, name).
  std::pmr::map<std::tuple<int64_t, bool, int64_t, int32_t>, size_t> index(&pool);
  struct Extra {
    std::pmr::map<int32_t, double> calls;  // call -> direct wait charged there
  };
  std::vector<Extra> extra;
  auto cause_of = [&](int64_t rank, bool has_step, int64_t step, int32_t name) {
    auto [it, fresh] = index.try_emplace({rank, has_step, step, name}, out->causes.size());
    if (fresh) {
      Cause c;
      c.rank = rank;
      c.has_step = has_step;
      c.step = step;
      c.name = name;
      out->causes.push_back(c);
      extra.push_back(Extra{std::pmr::map<int32_t, double>(&pool)});
    }
    return it->second;
  };
  // Per waiting event: what its wait was charged to (cause, fraction of the wait), its wait.
  struct Charge {
    std::pmr::vector<std::pair<size_t, double>> parts;
    int64_t wait = 0;
    int64_t waited_for = -1;
  };
  std::pmr::unordered_map<int64_t, Charge> charged(&pool);
  // Each rank's waits by entry (out->waits is by (rank, ts)).
  std::unordered_map<int64_t, std::pair<size_t, size_t>> waits_of;
  for (size_t i = 0; i < out->waits.size();) {
    size_t j = i;
    while (j < out->waits.size() && out->waits[j].rank == out->waits[i].rank) ++j;
    waits_of[out->waits[i].rank] = {i, j};
    i = j;
  }
  const int32_t unattributed = m.name_index.at(kUnattributed);
  // A share of a lateness: `ns` of it charged to `cause`, directly or as propagated wait.
  struct Piece {
    size_t cause;
    double ns;
    bool indirect;
  };
  NameNs tl(&pool), tr(&pool);
  // Event -> shares (sum 1).
  std::pmr::unordered_map<int64_t, std::pmr::vector<Piece>> lateness_of(&pool);
  // Why rank `L` entered `el` `lateness` ns after rank `r` entered `er` (docs/why.md "Root
  // causes"): since their previous common synchronisation, L's extra time per name (direct),
  // L's own waits beyond r's (the causes of those waits, indirect); and the part of the
  // lateness L already had when it left that synchronisation, explained the same way there.
  std::function<void(int64_t, const Sync&, int64_t, const Sync&, double, int,
                     std::pmr::vector<Piece>*)>
      explain = [&](int64_t L, const Sync& el, int64_t r, const Sync& er, double lateness,
                    int depth, std::pmr::vector<Piece>* pieces) {
        if (lateness <= 0) return;
        const RankData& LD = m.ranks.at(L);
        const RankData& RD = m.ranks.at(r);
        int64_t step = 0;
        const bool has_step = LD.StepAt(el.ts - 1, &step);
        Sync cl, cr;
        const bool common = depth < 16 &&
                            PreviousCommonSync(m, LD, el.ts, r, &cl, &cr, kCommonSearch) &&
                            cr.ts < er.ts;
        // Without a common synchronisation close by, each rank's interval starts at its own
        // previous one (the ranks then compare what they did since they last communicated).
        auto own_start = [](const RankData& rd, const Sync& e) {
          const Sync* p = PreviousSync(rd, e.ts, e.id);
          return std::min(p ? p->end : rd.first_ts, e.ts);
        };
        const int64_t sl = common ? std::min(cl.end, el.ts) : own_start(LD, el);
        const int64_t sr = common ? std::min(cr.end, er.ts) : own_start(RD, er);
        const double carried =
            common ? std::clamp(static_cast<double>(sl - sr), 0.0, lateness) : 0.0;
        if (carried > 0) {
          const double late_in = std::min(carried, static_cast<double>(cl.ts - cr.ts));
          if (late_in > 0) {
            // Why L came late to that synchronisation is worked out once per event of L (as
            // shares of its lateness): every later wait that carries it reuses the answer.
            auto known = lateness_of.find(cl.id);
            if (known == lateness_of.end()) {
              std::pmr::vector<Piece> sub(&pool);
              explain(L, cl, r, cr, late_in, depth + 1, &sub);
              double total = 0;
              for (const Piece& p : sub) total += p.ns;
              if (total > 0) {
                std::pmr::map<std::pair<size_t, bool>, double> by_cause(&pool);
                for (const Piece& p : sub) by_cause[{p.cause, p.indirect}] += p.ns / total;
                sub.clear();
                for (const auto& [key, f] : by_cause)
                  sub.push_back(Piece{key.first, f, key.second});
                KeepLargest(&sub, kMaxParts, [](Piece& p) -> double& { return p.ns; });
              } else {
                sub.clear();
              }
              known = lateness_of.emplace(cl.id, std::move(sub)).first;
            }
            // Where r waited for L there, this is a further wait of the same delay.
            auto c = charged.find(cr.id);
            const bool waited = c != charged.end() && c->second.waited_for == L;
            for (const Piece& p : known->second)
              pieces->push_back(Piece{p.cause, p.ns * late_in, p.indirect || waited});
          }
          // L left the synchronisation later than it came late to it: its own share of that
          // communication took longer.
          if (carried - std::max(0.0, late_in) > 0) {
            int64_t cstep = 0;
            const bool chas = LD.StepAt(cl.ts, &cstep);
            pieces->push_back(
                Piece{cause_of(L, chas, cstep, cl.name), carried - std::max(0.0, late_in), false});
          }
        }
        const double interval = lateness - carried;
        if (interval <= 0) return;
        tl.clear();
        tr.clear();
        // What L did before r had left the common synchronisation is a head start, no delay.
        const int64_t lfrom = std::max(sl, sr);
        TimeByName(m, LD, lfrom, el.ts, &tl);
        TimeByName(m, RD, sr, er.ts, &tr);
        // Waits inside the intervals are not time spent in their calls but propagation.
        // (A wait that began before the interval counts for the part inside it.)
        auto waits_in = [&](int64_t rank, int64_t a, int64_t b, NameNs* t,
                            std::pmr::vector<std::pair<const WaitState*, int64_t>>* list) {
          int64_t total = 0;
          auto f = waits_of.find(rank);
          if (f == waits_of.end()) return total;
          auto first = out->waits.begin() + static_cast<long>(f->second.first);
          auto last = out->waits.begin() + static_cast<long>(f->second.second);
          auto it = std::lower_bound(first, last, a,
                                     [](const WaitState& w, int64_t v) { return w.ts < v; });
          for (int back = 0; it != first && back < 8; ++back) --it;
          for (; it != last && it->ts < b; ++it) {
            const int64_t w = std::min(it->ts + it->wait_ns, b) - std::max(it->ts, a);
            if (w <= 0) continue;
            total = engine::SaturatingAdd(total, w);
            auto n = t->find(it->call);
            if (n != t->end()) n->second = std::max<int64_t>(0, n->second - w);
            if (list) list->emplace_back(&*it, w);
          }
          return total;
        };
        std::pmr::vector<std::pair<const WaitState*, int64_t>> lwaits(&pool);
        const int64_t wl = waits_in(L, lfrom, el.ts, &tl, &lwaits);
        const int64_t wr = waits_in(r, sr, er.ts, &tr, nullptr);
        double excess = 0;
        for (const auto& [name, ns] : tl) {
          auto f = tr.find(name);
          excess += static_cast<double>(std::max<int64_t>(0, ns - (f == tr.end() ? 0 : f->second)));
        }
        const double bucket = static_cast<double>(std::max<int64_t>(0, wl - wr));
        if (excess + bucket <= 0) {
          pieces->push_back(Piece{cause_of(L, has_step, step, unattributed), interval, false});
          return;
        }
        const double scale = interval / (excess + bucket);
        for (const auto& [name, ns] : tl) {
          auto f = tr.find(name);
          const int64_t e = std::max<int64_t>(0, ns - (f == tr.end() ? 0 : f->second));
          if (e > 0)
            pieces->push_back(
                Piece{cause_of(L, has_step, step, name), scale * static_cast<double>(e), false});
        }
        if (bucket > 0 && wl > 0) {
          const double per = scale * bucket / static_cast<double>(wl);
          for (const auto& [w, inside] : lwaits) {
            auto c = charged.find(w->id);
            if (c == charged.end()) continue;
            const double ns = per * static_cast<double>(inside);
            for (const auto& [cause, frac] : c->second.parts)
              pieces->push_back(Piece{cause, ns * frac, true});
          }
        }
      };
  // In the order the waits end: a wait's causes are known before any wait it propagates to.
  std::vector<const WaitState*> order;
  for (const WaitState& w : out->waits) order.push_back(&w);
  std::sort(order.begin(), order.end(), [](const WaitState* x, const WaitState* y) {
    const int64_t ex = x->ts + x->wait_ns, ey = y->ts + y->wait_ns;
    return ex != ey ? ex < ey : x->id < y->id;
  });
  std::pmr::vector<Piece> pieces(&pool);
  for (const WaitState* w : order) {
    if (!m.ranks.count(w->waited_for) || !m.ranks.count(w->rank)) continue;
    pieces.clear();
    const Sync el{w->late_id, w->late_ts, w->late_ts, -1};
    const Sync er{w->id, w->ts, w->ts, w->call};
    explain(w->waited_for, el, w->rank, er, static_cast<double>(w->wait_ns), 0, &pieces);
    // Scale to the wait (the lateness was capped by the waiting call's duration).
    double sum = 0;
    for (const Piece& p : pieces) sum += p.ns;
    const double wait = static_cast<double>(w->wait_ns);
    auto at = charged.find(w->id);
    if (at == charged.end())
      at = charged.emplace(w->id, Charge{std::pmr::vector<std::pair<size_t, double>>(&pool)}).first;
    Charge& mine = at->second;
    mine.wait += w->wait_ns;
    mine.waited_for = w->waited_for;
    if (sum <= 0) {
      // Nothing explains it (an explanation carried from an earlier event that had none):
      // the wait is still charged, in full, to the late rank.
      int64_t step = 0;
      const bool has = m.ranks.at(w->waited_for).StepAt(w->late_ts - 1, &step);
      pieces.push_back(Piece{cause_of(w->waited_for, has, step, unattributed), wait, false});
      sum = wait;
    }
    std::pmr::map<size_t, double> merged(&pool);
    for (const Piece& p : pieces) {
      const double ns = p.ns * wait / sum;
      Cause& c = out->causes[p.cause];
      if (p.indirect) {
        c.indirect_ns += ns;
      } else {
        c.direct_ns += ns;
        c.waits++;
        if (std::find(c.waiting_ranks.begin(), c.waiting_ranks.end(), w->rank) ==
            c.waiting_ranks.end())
          c.waiting_ranks.push_back(w->rank);
        extra[p.cause].calls[w->call] += ns;
      }
      merged[p.cause] += ns / wait;
    }
    mine.parts.assign(merged.begin(), merged.end());
    KeepLargest(&mine.parts, kMaxParts,
                [](std::pair<size_t, double>& p) -> double& { return p.second; });
  }
  auto time_of = [&](const Cause& c) -> const Analysis::NameTime* {
    Analysis::NameTime k{c.has_step, c.step, c.rank, c.name, 0, 0};
    auto it = std::lower_bound(out->name_times.begin(), out->name_times.end(), k,
                               [](const Analysis::NameTime& x, const Analysis::NameTime& y) {
                                 return std::tie(x.has_step, x.step, x.rank, x.name) <
                                        std::tie(y.has_step, y.step, y.rank, y.name);
                               });
    if (it == out->name_times.end() || it->has_step != c.has_step || it->step != c.step ||
        it->rank != c.rank || it->name != c.name)
      return nullptr;
    return &*it;
  };
  for (size_t i = 0; i < out->causes.size(); ++i) {
    Cause& c = out->causes[i];
    c.cost_ns = c.direct_ns + c.indirect_ns;
    std::sort(c.waiting_ranks.begin(), c.waiting_ranks.end());
    double best = -1;
    for (const auto& [call, ns] : extra[i].calls)
      if (ns > best) {
        best = ns;
        c.call = call;
      }
    const Analysis::NameTime* t = time_of(c);
    if (t != nullptr) {
      c.excess_ns = t->ns - t->median_ns;
      const double sigma = c.name >= 0 && static_cast<size_t>(c.name) < out->name_sigma.size()
                               ? out->name_sigma[static_cast<size_t>(c.name)]
                               : 1000.0;
      c.noise_z = static_cast<double>(c.excess_ns) / sigma;
    }
    c.reported = c.name != unattributed && c.excess_ns > 0 && c.noise_z >= o.noise_threshold &&
                 static_cast<double>(c.excess_ns) >=
                     o.min_share * static_cast<double>(out->median_step_ns) &&
                 c.cost_ns >= 1;
  }
  std::sort(out->causes.begin(), out->causes.end(), [](const Cause& x, const Cause& y) {
    if (x.cost_ns != y.cost_ns) return x.cost_ns > y.cost_ns;
    return std::tie(x.has_step, x.step, x.rank, x.name) <
           std::tie(y.has_step, y.step, y.rank, y.name);
  });
}

}  // namespace internal
}  // namespace tracedb::query::analysis
