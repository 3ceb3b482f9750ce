// The hang report: open spans per rank, blocked collectives, culprits. See hang_report.h and
// docs/hang.md.
#include "query/hang/hang_report.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "engine/util/human_units.h"
#include "engine/util/json_text.h"
#include "engine/util/parse_number.h"

namespace tracedb::query::hang {
namespace {

bool IsCommunication(const std::string& cat) {
  return cat == "mpi" || cat == "nccl" || cat == "comm";
}

bool Contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// A call that waits for a message from `peer` (a receive or a probe).
bool IsReceive(const OpenSpan& s) {
  return (Contains(s.name, "Recv") || Contains(s.name, "recv") || Contains(s.name, "Probe")) &&
         !Contains(s.name, "Sendrecv");
}
// A call that waits for `peer` to take a message.
bool IsSend(const OpenSpan& s) {
  return Contains(s.name, "Send") || Contains(s.name, "send") || Contains(s.name, "Sendrecv");
}

std::optional<int64_t> OptInt(engine::Stmt& st, int col) {
  if (st.IsNull(col)) return std::nullopt;
  return st.Int(col);
}

std::string RankList(const std::vector<int32_t>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out;
}

// The call `r` is blocked in, in words: "MPI_Recv from rank 3 (tag 7) in fetch_batch".
std::string Describe(const RankState& r) {
  if (!r.blocked) {
    if (!r.open_spans.empty())
      return "in " + r.open_spans.front().name + " (no communication call open)";
    return "no span open";
  }
  const OpenSpan& s = r.open_spans[*r.blocked];
  std::string out = s.name;
  if (s.peer) out += (IsSend(s) ? " to rank " : " from rank ") + std::to_string(*s.peer);
  if (s.comm) out += " (comm " + std::to_string(*s.comm);
  if (s.comm && s.seq) out += ", seq " + std::to_string(*s.seq);
  if (s.comm) out += ")";
  for (size_t i = *r.blocked + 1; i < r.open_spans.size(); ++i) {
    if (!IsCommunication(r.open_spans[i].cat)) {
      out += " inside " + r.open_spans[i].name;
      break;
    }
  }
  return out;
}

// The world ranks of communicator `comm`, from its member list; else the ranks that declared it.
std::vector<int32_t> CommMembers(engine::Db* db, int64_t comm, bool* known) {
  std::vector<int32_t> out;
  *known = false;
  auto st =
      db->Prepare("SELECT members FROM comms WHERE comm = ?1 AND members IS NOT NULL LIMIT 1");
  if (st.ok()) {
    st->Bind(1, comm);
    auto row = st->Step();
    if (row.ok() && *row) {
      const std::string members(st->Text(0));
      size_t pos = 0;
      while (pos < members.size()) {
        size_t next = members.find(',', pos);
        if (next == std::string::npos) next = members.size();
        const std::string part = members.substr(pos, next - pos);
        int64_t v = 0;
        if (engine::ParseInt64(part, &v) && v >= INT32_MIN && v <= INT32_MAX) {
          out.push_back(static_cast<int32_t>(v));
        }
        pos = next + 1;
      }
      if (!out.empty()) {
        *known = true;
        std::sort(out.begin(), out.end());
        return out;
      }
    }
  }
  auto all = db->Prepare("SELECT DISTINCT rank FROM comms WHERE comm = ?1 ORDER BY rank");
  if (all.ok()) {
    all->Bind(1, comm);
    for (;;) {
      auto row = all->Step();
      if (!row.ok() || !*row) break;
      out.push_back(static_cast<int32_t>(all->Int(0)));
    }
  }
  return out;
}

}  // namespace

StatusOr<HangReport> BuildHangReport(engine::Db* db) {
  HangReport rep;
  std::map<int32_t, RankState> ranks;
  {
    TRACEDB_ASSIGN_OR_RETURN(
        engine::Stmt st,
        db->Prepare("SELECT rank FROM ranks UNION SELECT DISTINCT rank FROM blocks ORDER BY 1"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const auto rank = static_cast<int32_t>(st.Int(0));
      ranks[rank].rank = rank;
    }
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(engine::Stmt st,
                             db->Prepare("SELECT rank, max(max_end) FROM blocks GROUP BY rank"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      ranks[static_cast<int32_t>(st.Int(0))].last_seen = st.Int(1);
    }
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(
        engine::Stmt st,
        db->Prepare("SELECT rank, tid, name, cat, ts, dur, depth, peer, comm, seq, tag, bytes "
                    "FROM events WHERE open = 1"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const auto rank = static_cast<int32_t>(st.Int(0));
      RankState& r = ranks[rank];
      r.rank = rank;
      OpenSpan s;
      s.tid = st.IsNull(1) ? -1 : st.Int(1);
      s.name = std::string(st.Text(2));
      s.cat = std::string(st.Text(3));
      s.ts = st.Int(4);
      s.end = s.ts + st.Int(5);
      s.depth = st.Int(6);
      s.peer = OptInt(st, 7);
      s.comm = OptInt(st, 8);
      s.seq = OptInt(st, 9);
      s.tag = OptInt(st, 10);
      s.bytes = OptInt(st, 11);
      r.last_seen = std::max(r.last_seen, s.end);
      r.open_spans.push_back(std::move(s));
      ++rep.open_rows;
    }
  }
  for (auto& [rank, r] : ranks) {
    // Innermost first: deepest, then the latest start (threads apart: the deepest of any).
    std::sort(r.open_spans.begin(), r.open_spans.end(), [](const OpenSpan& a, const OpenSpan& b) {
      if (a.depth != b.depth) return a.depth > b.depth;
      return a.ts > b.ts;
    });
    for (size_t i = 0; i < r.open_spans.size(); ++i) {
      if (IsCommunication(r.open_spans[i].cat)) {
        r.blocked = i;
        break;
      }
    }
  }

  // Rule 1: the collectives ranks are blocked in, and their members that are not in them.
  std::map<std::pair<int64_t, int64_t>, BlockedCollective> colls;  // (comm, seq)
  for (const auto& [rank, r] : ranks) {
    if (!r.blocked) continue;
    const OpenSpan& s = r.open_spans[*r.blocked];
    if (!s.comm || !s.seq) continue;
    BlockedCollective& c = colls[{*s.comm, *s.seq}];
    c.comm = *s.comm;
    c.seq = *s.seq;
    if (c.name.empty()) c.name = s.name;
    c.ranks_in.push_back(rank);
  }
  std::set<int32_t> culprit_set;
  std::set<int32_t> in_collective;
  for (auto& [key, c] : colls) {
    std::vector<int32_t> members = CommMembers(db, c.comm, &c.members_known);
    if (members.empty()) {
      for (const auto& [rank, r] : ranks) members.push_back(rank);
    }
    for (int32_t m : members) {
      if (!std::binary_search(c.ranks_in.begin(), c.ranks_in.end(), m))
        c.ranks_missing.push_back(m);
    }
    for (int32_t m : c.ranks_in) in_collective.insert(m);
  }
  for (auto& [key, c] : colls) {
    for (int32_t m : c.ranks_missing) {
      RankState& r = ranks[m];
      r.rank = m;
      std::string reason = "not in " + c.name + " (comm " + std::to_string(c.comm) + ", seq " +
                           std::to_string(c.seq) + ") that rank" +
                           (c.ranks_in.size() > 1 ? "s " : " ") + RankList(c.ranks_in) +
                           (c.ranks_in.size() > 1 ? " are" : " is") + " blocked in; ";
      if (r.blocked) {
        reason += "it is blocked in " + Describe(r);
        const OpenSpan& s = r.open_spans[*r.blocked];
        if (s.peer && IsReceive(s) && in_collective.count(static_cast<int32_t>(*s.peer))) {
          reason += ", whose sender is itself waiting in the collective (a deadlock)";
        }
      } else if (!r.open_spans.empty()) {
        reason += "it is " + Describe(r);
      } else {
        reason += "it has no span open (it ended, or was computing without a span)";
      }
      // Its last finished call on the communicator.
      auto st = db->Prepare(
          "SELECT name, seq FROM events WHERE rank = ?1 AND comm = ?2 AND seq IS NOT NULL "
          "AND open = 0 ORDER BY seq DESC LIMIT 1");
      if (st.ok()) {
        st->Bind(1, m).Bind(2, c.comm);
        auto row = st->Step();
        if (row.ok() && *row) {
          r.note = "last finished on comm " + std::to_string(c.comm) + ": " +
                   std::string(st->Text(0)) + " seq " + std::to_string(st->Int(1));
          reason += "; " + r.note;
        }
      }
      if (culprit_set.insert(m).second) rep.culprits.push_back({m, reason});
    }
  }

  // Rule 2: wait-for chains of blocking receives whose peer is not sending to the receiver.
  std::map<int32_t, int32_t> waits_for;
  for (const auto& [rank, r] : ranks) {
    if (!r.blocked) continue;
    const OpenSpan& s = r.open_spans[*r.blocked];
    if (!IsReceive(s) || !s.peer || *s.peer < 0) continue;
    const auto peer = static_cast<int32_t>(*s.peer);
    auto p = ranks.find(peer);
    if (p != ranks.end() && p->second.blocked) {
      const OpenSpan& ps = p->second.open_spans[*p->second.blocked];
      if (IsSend(ps) && ps.peer && *ps.peer == rank) continue;  // matched: it is sending
    }
    waits_for[rank] = peer;
  }
  for (const auto& [start, first] : waits_for) {
    std::vector<int32_t> chain = {start};
    std::set<int32_t> seen_in_chain = {start};
    int32_t cur = first;
    bool cycle = false;
    while (true) {
      if (seen_in_chain.count(cur)) {
        cycle = true;
        break;
      }
      chain.push_back(cur);
      seen_in_chain.insert(cur);
      auto next = waits_for.find(cur);
      if (next == waits_for.end()) break;
      cur = next->second;
    }
    if (cycle) {
      for (int32_t m : chain) {
        if (in_collective.count(m) || culprit_set.count(m)) continue;
        culprit_set.insert(m);
        rep.culprits.push_back({m, "in a cycle of blocking receives (" + RankList(chain) +
                                       "): it waits for rank " + std::to_string(waits_for[m]) +
                                       ", " + Describe(ranks[m])});
      }
      continue;
    }
    const int32_t last = chain.back();
    if (in_collective.count(last) || culprit_set.count(last)) continue;  // rule 1 speaks for it
    RankState& lr = ranks[last];
    lr.rank = last;
    std::string reason = "rank " + std::to_string(chain[chain.size() - 2]) +
                         " waits for a message from it; it is " +
                         (lr.blocked ? "blocked in " + Describe(lr)
                                     : (lr.open_spans.empty() ? std::string("in no open span (it "
                                                                            "ended, or computes)")
                                                              : Describe(lr)));
    culprit_set.insert(last);
    rep.culprits.push_back({last, reason});
  }

  for (auto& [rank, r] : ranks) rep.ranks.push_back(std::move(r));
  for (auto& [key, c] : colls) rep.collectives.push_back(std::move(c));
  return rep;
}

namespace {

void Key(std::string* out, const char* k) {
  engine::json::AppendString(out, k);
  *out += ':';
}
void Int(std::string* out, const char* k, int64_t v) {
  Key(out, k);
  *out += std::to_string(v);
}
void OptInt(std::string* out, const char* k, const std::optional<int64_t>& v) {
  Key(out, k);
  *out += v ? std::to_string(*v) : "null";
}
void Str(std::string* out, const char* k, const std::string& v) {
  Key(out, k);
  engine::json::AppendString(out, v);
}

const char* State(const RankState& r) {
  return r.blocked ? "blocked" : (r.open_spans.empty() ? "no_open_span" : "open");
}

}  // namespace

std::string HangReportJson(const HangReport& rep) {
  std::string o = "{";
  Key(&o, "ranks");
  o += '[';
  for (size_t i = 0; i < rep.ranks.size(); ++i) {
    const RankState& r = rep.ranks[i];
    const OpenSpan* b = r.blocked ? &r.open_spans[*r.blocked] : nullptr;
    o += i ? ",{" : "{";
    Int(&o, "rank", r.rank);
    o += ',';
    Str(&o, "state", State(r));
    o += ',';
    Key(&o, "blocked_in");
    if (b) {
      engine::json::AppendString(&o, b->name);
    } else {
      o += "null";
    }
    o += ',';
    OptInt(&o, "peer", b ? b->peer : std::nullopt);
    o += ',';
    OptInt(&o, "comm", b ? b->comm : std::nullopt);
    o += ',';
    OptInt(&o, "seq", b ? b->seq : std::nullopt);
    o += ',';
    OptInt(&o, "tag", b ? b->tag : std::nullopt);
    o += ',';
    OptInt(&o, "since_ns", b ? std::optional<int64_t>(b->ts) : std::nullopt);
    o += ',';
    OptInt(&o, "blocked_ns", b ? std::optional<int64_t>(b->end - b->ts) : std::nullopt);
    o += ',';
    OptInt(&o, "last_seen_ns",
           r.last_seen == INT64_MIN ? std::nullopt : std::optional<int64_t>(r.last_seen));
    o += ',';
    Key(&o, "open_spans");
    o += '[';
    for (size_t j = 0; j < r.open_spans.size(); ++j) {
      const OpenSpan& s = r.open_spans[j];
      o += j ? ",{" : "{";
      Str(&o, "name", s.name);
      o += ',';
      Str(&o, "cat", s.cat);
      o += ',';
      Int(&o, "ts_ns", s.ts);
      o += ',';
      Int(&o, "dur_ns", s.end - s.ts);
      o += ',';
      Int(&o, "depth", s.depth);
      o += ',';
      OptInt(&o, "tid", s.tid >= 0 ? std::optional<int64_t>(s.tid) : std::nullopt);
      o += ',';
      OptInt(&o, "peer", s.peer);
      o += ',';
      OptInt(&o, "comm", s.comm);
      o += ',';
      OptInt(&o, "seq", s.seq);
      o += '}';
    }
    o += "]}";
  }
  o += "],";
  Key(&o, "collectives");
  o += '[';
  for (size_t i = 0; i < rep.collectives.size(); ++i) {
    const BlockedCollective& c = rep.collectives[i];
    o += i ? ",{" : "{";
    Str(&o, "name", c.name);
    o += ',';
    Int(&o, "comm", c.comm);
    o += ',';
    Int(&o, "seq", c.seq);
    o += ',';
    Key(&o, "ranks_in");
    o += "[" + RankList(c.ranks_in) + "],";
    Key(&o, "ranks_missing");
    o += "[" + RankList(c.ranks_missing) + "],";
    Key(&o, "members_known");
    o += c.members_known ? "true}" : "false}";
  }
  o += "],";
  Key(&o, "culprits");
  o += '[';
  for (size_t i = 0; i < rep.culprits.size(); ++i) {
    o += i ? ",{" : "{";
    Int(&o, "rank", rep.culprits[i].rank);
    o += ',';
    Str(&o, "reason", rep.culprits[i].reason);
    o += '}';
  }
  o += "],";
  Int(&o, "open_spans", static_cast<int64_t>(rep.open_rows));
  o += "}\n";
  return o;
}

std::string HangReportText(const HangReport& rep) {
  std::string o;
  if (rep.open_rows == 0) {
    o += "No span was open when the job stopped: no rank was blocked (or the database was "
         "compacted before open spans were kept).\n";
  }
  int64_t end = INT64_MIN;
  for (const RankState& r : rep.ranks) end = std::max(end, r.last_seen);
  if (!rep.culprits.empty()) {
    o += "Culprits:\n";
    for (const Culprit& c : rep.culprits) {
      o += "  rank " + std::to_string(c.rank) + ": " + c.reason + "\n";
    }
    o += "\n";
  }
  if (!rep.collectives.empty()) {
    o += "Collectives ranks are blocked in:\n";
    for (const BlockedCollective& c : rep.collectives) {
      o += "  " + c.name + " comm " + std::to_string(c.comm) + " seq " + std::to_string(c.seq) +
           ": in " + RankList(c.ranks_in) +
           (c.ranks_missing.empty() ? "" : "; missing " + RankList(c.ranks_missing)) + "\n";
    }
    o += "\n";
  }
  o += "Ranks at the end:\n";
  for (const RankState& r : rep.ranks) {
    o += "  rank " + std::to_string(r.rank) + ": ";
    if (r.blocked) {
      const OpenSpan& s = r.open_spans[*r.blocked];
      o += "blocked in " + Describe(r) + " for " +
           engine::HumanDuration(static_cast<double>(s.end - s.ts));
    } else {
      o += Describe(r);
    }
    if (end != INT64_MIN && r.last_seen != INT64_MIN && r.last_seen < end) {
      o += "; last seen " + engine::HumanDuration(static_cast<double>(end - r.last_seen)) +
           " before the others";
    }
    o += "\n";
    if (!r.open_spans.empty()) {
      o += "    open:";
      for (size_t i = 0; i < r.open_spans.size(); ++i) {
        o += (i ? " < " : " ") + r.open_spans[i].name;
      }
      o += "\n";
    }
  }
  return o;
}

}  // namespace tracedb::query::hang
