// The invariant checker of db_invariants.h: reads `events`, `steps`, `name_stats` and `stats`
// with plain SQL (query::OpenQueryDb, as `tracedb query` opens the file), checks every rule in
// C++ over the rows, and runs `tracedb info --json` for the counts.
#include "tests/db_invariants.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "engine/util/coding.h"
#include "query/open/query_db.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

using engine::SaturatingAdd;

struct Ev {
  int64_t id, rank, track, ts, dur, end_ts, depth;
  std::optional<int64_t> parent, step;
  bool span;
  uint32_t name_cat;  // index into the (name, cat) pairs
};

// Collects violations per rule, at most kMaxPerRule sentences each, then a count of the rest.
class Violations {
 public:
  void Add(const std::string& rule, const std::string& what) {
    size_t& n = per_rule_[rule];
    if (++n <= kMaxPerRule) out_.push_back(rule + ": " + what);
  }
  std::vector<std::string> Finish() {
    for (const auto& [rule, n] : per_rule_) {
      if (n > kMaxPerRule) {
        out_.push_back(rule + ": " + std::to_string(n - kMaxPerRule) + " more");
      }
    }
    return std::move(out_);
  }

 private:
  static constexpr size_t kMaxPerRule = 20;
  std::map<std::string, size_t> per_rule_;
  std::vector<std::string> out_;
};

std::string Id(int64_t id) { return "event " + std::to_string(id); }

std::optional<int64_t> OptInt(const engine::Stmt& st, int c) {
  if (st.IsNull(c)) return std::nullopt;
  return st.Int(c);
}

// "key": N in a JSON text, the first occurrence after `from`.
std::optional<int64_t> JsonInt(const std::string& json, const std::string& key, size_t from = 0) {
  std::smatch m;
  const std::regex re("\"" + key + "\": (-?[0-9]+)");
  const std::string tail = json.substr(std::min(from, json.size()));
  if (!std::regex_search(tail, m, re)) return std::nullopt;
  return std::stoll(m[1]);
}

void CheckInfo(const std::string& path, size_t rows, const std::map<int64_t, int64_t>& per_rank,
               Violations* v) {
  int rc = 0;
  const std::string out =
      RunCommand(TracedbBin() + " info --format json " + ShellQuote(path) + " 2>&1", &rc);
  if (rc != 0) {
    v->Add("7 info", "tracedb info failed (" + std::to_string(rc) + "): " + out);
    return;
  }
  const auto events = JsonInt(out, "events");
  if (!events || *events != static_cast<int64_t>(rows)) {
    v->Add("7 info", "tracedb info counts " + (events ? std::to_string(*events) : "nothing") +
                         " events, the events table holds " + std::to_string(rows));
  }
  const size_t per = out.find("\"per_rank\"");
  if (per == std::string::npos) return;  // no per-rank list to compare
  const std::regex item("\\{\"rank\": (-?[0-9]+)[^}]*?\"events\": ([0-9]+)");
  std::map<int64_t, int64_t> info_ranks;
  const std::string list = out.substr(per);
  for (auto it = std::sregex_iterator(list.begin(), list.end(), item); it != std::sregex_iterator();
       ++it) {
    info_ranks[std::stoll((*it)[1])] = std::stoll((*it)[2]);
  }
  for (const auto& [rank, n] : per_rank) {
    const auto it = info_ranks.find(rank);
    const int64_t said = it == info_ranks.end() ? 0 : it->second;
    if (said != n) {
      v->Add("7 info", "rank " + std::to_string(rank) + ": tracedb info counts " +
                           std::to_string(said) + ", the events table holds " + std::to_string(n));
    }
  }
}

}  // namespace

std::vector<std::string> DbInvariantViolations(const std::string& path,
                                               const InvariantOptions& options) {
  Violations v;
  auto db = query::OpenQueryDb(path);
  if (!db.ok()) return {"cannot open " + path + ": " + db.status().ToString()};
  auto query = [&](const std::string& sql) -> std::optional<engine::Stmt> {
    auto st = (*db)->Prepare(sql);
    if (!st.ok()) {
      v.Add("read", sql + ": " + st.status().ToString());
      return std::nullopt;
    }
    return std::move(*st);
  };
  auto step = [&](engine::Stmt& st, const std::string& what) {
    auto row = st.Step();
    if (!row.ok()) v.Add("read", what + ": " + row.status().ToString());
    return row.ok() && *row;
  };

  // The rows, names and categories interned as pairs.
  std::vector<Ev> rows;
  std::map<std::pair<std::string, std::string>, uint32_t> pair_ids;
  std::vector<std::pair<std::string, std::string>> pairs;
  if (auto st = query("SELECT id, rank, track, kind, ts, dur, end_ts, depth, parent, step, "
                      "coalesce(name, ''), coalesce(cat, '') FROM events")) {
    while (step(*st, "events")) {
      Ev e;
      e.id = st->Int(0);
      e.rank = st->Int(1);
      e.track = st->Int(2);
      e.span = st->Text(3) == "span";
      e.ts = st->Int(4);
      e.dur = st->Int(5);
      e.end_ts = st->Int(6);
      e.depth = st->Int(7);
      e.parent = OptInt(*st, 8);
      e.step = OptInt(*st, 9);
      std::pair<std::string, std::string> nc{std::string(st->Text(10)), std::string(st->Text(11))};
      auto [it, fresh] = pair_ids.emplace(nc, static_cast<uint32_t>(pairs.size()));
      if (fresh) pairs.push_back(nc);
      e.name_cat = it->second;
      rows.push_back(e);
    }
  }

  std::map<std::string, int64_t> stats;  // job totals over ranks
  if (auto st = query("SELECT name, sum(value) FROM stats GROUP BY name")) {
    while (step(*st, "stats")) stats[std::string(st->Text(0))] = st->Int(1);
  }

  // 1. Unique ids.
  std::unordered_map<int64_t, size_t> by_id;
  by_id.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!by_id.emplace(rows[i].id, i).second) v.Add("1 unique ids", Id(rows[i].id) + " twice");
  }

  // 2, 3, 4: times, parents, depth.
  int64_t outlive_parent = 0;
  for (const Ev& e : rows) {
    int64_t end = 0;
    if (__builtin_add_overflow(e.ts, e.dur, &end) || e.end_ts != end) {
      v.Add("2 end_ts = ts + dur", Id(e.id) + ": ts " + std::to_string(e.ts) + " dur " +
                                       std::to_string(e.dur) + " end_ts " +
                                       std::to_string(e.end_ts));
    }
    if (e.dur < 0) v.Add("2 dur >= 0", Id(e.id) + ": dur " + std::to_string(e.dur));
    if (!e.parent) {
      if (e.depth != 0) {
        v.Add("4 depth", Id(e.id) + " has no parent but depth " + std::to_string(e.depth));
      }
      continue;
    }
    const auto it = by_id.find(*e.parent);
    if (it == by_id.end()) {
      v.Add("3 parent exists", Id(e.id) + ": parent " + std::to_string(*e.parent) + " is absent");
      continue;
    }
    const Ev& p = rows[it->second];
    const std::string pair = Id(e.id) + " [" + std::to_string(e.ts) + ", " +
                             std::to_string(e.end_ts) + "] track " + std::to_string(e.track) +
                             ", parent " + Id(p.id) + " [" + std::to_string(p.ts) + ", " +
                             std::to_string(p.end_ts) + "] track " + std::to_string(p.track);
    if (p.track != e.track) v.Add("3 parent on the same track", pair);
    if (!p.span) v.Add("3 parent is a span", pair);
    if (p.ts > e.ts) v.Add("3 parent starts at or before its child", pair);
    if (e.end_ts > p.end_ts) ++outlive_parent;
    if (e.depth != p.depth + 1) {
      v.Add("4 depth",
            pair + ": depth " + std::to_string(e.depth) + ", parent's " + std::to_string(p.depth));
    }
  }
  const int64_t improper = stats.count("improper_nesting") ? stats["improper_nesting"] : 0;
  if (outlive_parent > improper) {
    v.Add("3 parent ends at or after its child",
          std::to_string(outlive_parent) + " rows outlive their parent, stats count " +
              std::to_string(improper) + " improper_nesting");
    if (outlive_parent <= 20 || improper == 0) {
      size_t listed = 0;
      for (const Ev& e : rows) {
        if (!e.parent || listed >= 5) continue;
        const auto it = by_id.find(*e.parent);
        if (it != by_id.end() && e.end_ts > rows[it->second].end_ts) {
          ++listed;
          v.Add("3 parent ends at or after its child",
                Id(e.id) + " ends at " + std::to_string(e.end_ts) + ", its parent " +
                    Id(rows[it->second].id) + " at " + std::to_string(rows[it->second].end_ts));
        }
      }
    }
  }

  // 5. step against the steps table.
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> steps;  // rank -> (ts, step)
  if (auto st = query("SELECT rank, ts, step FROM steps ORDER BY rank, ts")) {
    while (step(*st, "steps")) steps[st->Int(0)].emplace_back(st->Int(1), st->Int(2));
  }
  for (const Ev& e : rows) {
    std::optional<int64_t> want;
    const auto it = steps.find(e.rank);
    if (it != steps.end()) {
      const auto& s = it->second;
      auto p = std::upper_bound(s.begin(), s.end(), std::make_pair(e.ts, INT64_MAX));
      if (p != s.begin()) want = std::prev(p)->second;
    }
    if (want != e.step) {
      v.Add("5 step", Id(e.id) + " at " + std::to_string(e.ts) + " on rank " +
                          std::to_string(e.rank) + ": step " +
                          (e.step ? std::to_string(*e.step) : "NULL") + ", the steps table says " +
                          (want ? std::to_string(*want) : "NULL"));
    }
  }

  // 6. name_stats.
  std::map<std::tuple<int64_t, uint32_t>, std::pair<int64_t, int64_t>> have;  // count, total dur
  std::map<int64_t, int64_t> per_rank;
  for (const Ev& e : rows) {
    auto& [n, total] = have[{e.rank, e.name_cat}];
    ++n;
    total = SaturatingAdd(total, e.dur);
    per_rank[e.rank]++;
  }
  std::map<std::tuple<int64_t, uint32_t>, std::pair<int64_t, int64_t>> want;
  if (auto st = query("SELECT ns.rank, coalesce(a.s, ''), coalesce(b.s, ''), sum(ns.count), "
                      "sum(ns.total_dur) FROM name_stats ns LEFT JOIN strings a ON a.id = ns.name "
                      "LEFT JOIN strings b ON b.id = ns.cat GROUP BY ns.rank, ns.name, ns.cat")) {
    while (step(*st, "name_stats")) {
      std::pair<std::string, std::string> nc{std::string(st->Text(1)), std::string(st->Text(2))};
      auto [it, fresh] = pair_ids.emplace(nc, static_cast<uint32_t>(pairs.size()));
      if (fresh) pairs.push_back(nc);
      auto& w = want[{st->Int(0), it->second}];
      w.first += st->Int(3);
      w.second = SaturatingAdd(w.second, st->Int(4));
    }
  }
  const bool archived =
      stats.count("archive_dropped_events") && stats["archive_dropped_events"] > 0;
  auto key_text = [&](const std::tuple<int64_t, uint32_t>& k) {
    const auto& [rank, pc] = k;
    return "rank " + std::to_string(rank) + " name '" + pairs[pc].first + "' cat '" +
           pairs[pc].second + "'";
  };
  for (const auto& [k, w] : want) {
    const auto it = have.find(k);
    const std::pair<int64_t, int64_t> h =
        it == have.end() ? std::make_pair(int64_t{0}, int64_t{0}) : it->second;
    const bool ok = archived ? h.first <= w.first : h == w;
    if (!ok) {
      v.Add("6 name_stats", key_text(k) + ": events has " + std::to_string(h.first) + " rows (" +
                                std::to_string(h.second) + " ns), name_stats " +
                                std::to_string(w.first) + " (" + std::to_string(w.second) + " ns)");
    }
  }
  for (const auto& [k, h] : have) {
    if (!want.count(k)) {
      v.Add("6 name_stats",
            key_text(k) + ": " + std::to_string(h.first) + " rows in events, none in name_stats");
    }
  }

  // 7. tracedb info.
  if (options.check_info) CheckInfo(path, rows.size(), per_rank, &v);
  return v.Finish();
}

size_t ExpectDbInvariants(const std::string& path, const InvariantOptions& options) {
  const std::vector<std::string> bad = DbInvariantViolations(path, options);
  std::string all;
  for (const std::string& b : bad) all += "  " + b + "\n";
  EXPECT_TRUE(bad.empty()) << path << " breaks " << bad.size() << " invariant(s):\n" << all;
  auto db = query::OpenQueryDb(path);
  if (!db.ok()) return 0;
  auto n = (*db)->QueryInt("SELECT count(*) FROM events", 0);
  return n.ok() ? static_cast<size_t>(*n) : 0;
}

}  // namespace tracedb::testing
