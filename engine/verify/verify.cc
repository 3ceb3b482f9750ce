// VerifyDb. See verify.h.
#include "engine/verify/verify.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "engine/db/block_check.h"
#include "engine/db/db_schema.h"
#include "engine/db/event_block.h"
#include "engine/db/sqlite.h"
#include "engine/util/coding.h"

namespace tracedb::engine {
namespace {

class Checker {
 public:
  Checker(const VerifyOptions& o, VerifyReport* r) : o_(o), r_(r) {}

  void Problem(const std::string& where, const std::string& what) {
    r_->problems++;
    if (r_->listed.size() < o_.max_listed) r_->listed.push_back(where + ": " + what);
  }

  Status Run(Db* db);

 private:
  struct NameZone {
    int64_t count = 0, max_dur = 0;
  };
  struct Stat {
    int64_t count = 0, total = 0, min = INT64_MAX, max = INT64_MIN;
  };
  using StatKey = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // rank, name, cat, kind

  Status Dictionaries(Db* db);
  Status LoadBlockNames(Db* db);
  Status Blocks(Db* db);
  void Block(int64_t block, int64_t rank, int64_t min_ts, int64_t max_end, int64_t max_dur,
             int64_t count, std::string_view data);
  Status NameStats(Db* db);

  const VerifyOptions& o_;
  VerifyReport* r_;
  std::vector<bool> strings_;                        // present ids, below the dense limit
  std::unordered_map<int64_t, int64_t> track_rank_;  // track -> rank
  std::map<int64_t, std::map<std::pair<int64_t, int64_t>, NameZone>> block_names_;
  std::set<int64_t> blocks_seen_;
  std::map<StatKey, Stat> stats_;
  DecodedBlock d_;
};

std::string N(int64_t v) { return std::to_string(v); }

Status Checker::Run(Db* db) {
  if (o_.sqlite_check) {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare("PRAGMA quick_check"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const std::string line(st.Text(0));
      if (line != "ok") Problem("sqlite", line);
    }
  }
  TRACEDB_RETURN_IF_ERROR(Dictionaries(db));
  TRACEDB_RETURN_IF_ERROR(LoadBlockNames(db));
  TRACEDB_RETURN_IF_ERROR(Blocks(db));
  for (const auto& [block, names] : block_names_) {
    if (!blocks_seen_.count(block)) {
      Problem("block_names", N(static_cast<int64_t>(names.size())) + " rows for block " + N(block) +
                                 ", which does not exist");
    }
  }
  return NameStats(db);
}

Status Checker::Dictionaries(Db* db) {
  TRACEDB_ASSIGN_OR_RETURN(int64_t nstrings, db->QueryInt("SELECT count(*) FROM strings", 0));
  r_->strings = static_cast<uint64_t>(nstrings);
  strings_.assign(static_cast<size_t>(DenseIdLimit(nstrings)) + 1, false);
  {
    TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare("SELECT id FROM strings"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const int64_t id = st.Int(0);
      if (!DenseIdOk(id, nstrings)) {
        Problem("strings", "id " + N(id) + " is out of range for a table of " + N(nstrings) +
                               " rows (the readers ignore it: names with this id read NULL)");
        continue;
      }
      strings_[static_cast<size_t>(id)] = true;
    }
  }
  TRACEDB_ASSIGN_OR_RETURN(int64_t ntracks, db->QueryInt("SELECT count(*) FROM tracks", 0));
  r_->tracks = static_cast<uint64_t>(ntracks);
  TRACEDB_ASSIGN_OR_RETURN(Stmt st, db->Prepare("SELECT track, rank FROM tracks"));
  for (;;) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    const int64_t id = st.Int(0);
    if (!DenseIdOk(id, ntracks) || id > UINT32_MAX) {
      Problem("tracks", "track " + N(id) + " is out of range for a table of " + N(ntracks) +
                            " rows (the readers ignore it)");
      continue;
    }
    track_rank_[id] = st.Int(1);
  }
  return Status::Ok();
}

Status Checker::LoadBlockNames(Db* db) {
  TRACEDB_ASSIGN_OR_RETURN(Stmt st,
                           db->Prepare("SELECT block, name, cat, count, max_dur FROM block_names"));
  for (;;) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    NameZone& z = block_names_[st.Int(0)][{st.Int(1), st.Int(2)}];
    z.count += st.Int(3);
    z.max_dur = st.Int(4);
  }
  return Status::Ok();
}

Status Checker::Blocks(Db* db) {
  TRACEDB_ASSIGN_OR_RETURN(
      Stmt st, db->Prepare("SELECT block, rank, min_ts, max_end, max_dur, count, data FROM blocks "
                           "ORDER BY block"));
  for (;;) {
    TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    r_->blocks++;
    Block(st.Int(0), st.Int(1), st.Int(2), st.Int(3), st.Int(4), st.Int(5), st.Blob(6));
  }
  return Status::Ok();
}

void Checker::Block(int64_t block, int64_t rank, int64_t min_ts, int64_t max_end, int64_t max_dur,
                    int64_t count, std::string_view data) {
  blocks_seen_.insert(block);
  const std::string where = "block " + N(block);
  if (!CheckBlockCount(block, count).ok()) {
    Problem(where, "zone map count " + N(count) + " is not a count a block can hold (1 to " +
                       N(kMaxBlockRows) + ")");
  }
  if (Status s = DecodeBlock(data, block, &d_, kColAll); !s.ok()) {
    Problem(where, s.message());
    return;  // nothing below can be compared
  }
  r_->events += d_.n;
  if (count != static_cast<int64_t>(d_.n)) {
    Problem(where, "zone map count " + N(count) + ", the block holds " + N(d_.n) + " events");
  }
  int64_t t_min = INT64_MAX, t_end = INT64_MIN, t_dur = 0;
  std::map<std::pair<int64_t, int64_t>, NameZone> names;
  uint64_t bad_track = 0, bad_rank = 0, bad_name = 0, bad_cat = 0;
  int64_t example_track = -1, example_name = -1, example_cat = -1, other_rank = 0;
  auto known = [&](uint32_t id) { return id < strings_.size() && strings_[id]; };
  for (size_t i = 0; i < d_.n; ++i) {
    const int64_t ts = d_.ts[i], dur = d_.dur[i];
    t_min = std::min(t_min, ts);
    t_end = std::max(t_end, SaturatingAdd(ts, dur));
    t_dur = std::max(t_dur, dur);
    NameZone& nz = names[{d_.name[i], d_.cat[i]}];
    nz.max_dur = nz.count == 0 ? dur : std::max(nz.max_dur, dur);
    nz.count++;
    auto t = track_rank_.find(d_.track[i]);
    if (t == track_rank_.end()) {
      bad_track++;
      example_track = d_.track[i];
    } else if (t->second != rank) {
      bad_rank++;
      example_track = d_.track[i];
      other_rank = t->second;
    }
    if (!known(d_.name[i])) {
      bad_name++;
      example_name = d_.name[i];
    }
    if (d_.cat[i] != 0 && !known(d_.cat[i])) {
      bad_cat++;
      example_cat = d_.cat[i];
    }
    Stat& s = stats_[{rank, d_.name[i], d_.cat[i], d_.kind[i]}];
    s.count++;
    s.total = SaturatingAdd(s.total, dur);
    s.min = std::min(s.min, dur);
    s.max = std::max(s.max, dur);
  }
  if (d_.n > 0) {
    if (t_min != min_ts) Problem(where, "zone map min_ts " + N(min_ts) + ", events' " + N(t_min));
    if (t_end != max_end) {
      Problem(where, "zone map max_end " + N(max_end) + ", events' " + N(t_end));
    }
    if (t_dur != max_dur) {
      Problem(where, "zone map max_dur " + N(max_dur) + ", events' " + N(t_dur));
    }
  }
  if (bad_track) {
    Problem(where,
            N(bad_track) + " events on tracks not in `tracks` (e.g. " + N(example_track) + ")");
  }
  if (bad_rank) {
    Problem(where, N(bad_rank) + " events on tracks of another rank (e.g. track " +
                       N(example_track) + " of rank " + N(other_rank) + "; the block's is " +
                       N(rank) + ")");
  }
  if (bad_name) {
    Problem(where,
            N(bad_name) + " events with a name id not in `strings` (e.g. " + N(example_name) + ")");
  }
  if (bad_cat) {
    Problem(where, N(bad_cat) + " events with a category id not in `strings` (e.g. " +
                       N(example_cat) + ")");
  }
  auto disk_it = block_names_.find(block);
  static const std::map<std::pair<int64_t, int64_t>, NameZone> kNone;
  const auto& disk = disk_it == block_names_.end() ? kNone : disk_it->second;
  for (const auto& [key, z] : names) {
    const std::string which = "(name " + N(key.first) + ", cat " + N(key.second) + ")";
    auto it = disk.find(key);
    if (it == disk.end()) {
      Problem(where, "block_names has no row for " + which + ", which " + N(z.count) +
                         " of its events have (a search by that name skips the block)");
      continue;
    }
    if (it->second.count != z.count) {
      Problem(where, "block_names count " + N(it->second.count) + " for " + which +
                         ", the events' " + N(z.count));
    }
    if (it->second.max_dur != z.max_dur) {
      Problem(where, "block_names max_dur " + N(it->second.max_dur) + " for " + which +
                         ", the events' " + N(z.max_dur));
    }
  }
  for (const auto& [key, z] : disk) {
    if (!names.count(key)) {
      Problem(where, "block_names row for (name " + N(key.first) + ", cat " + N(key.second) +
                         ") but no event of the block has it");
    }
  }
}

Status Checker::NameStats(Db* db) {
  // Ranks whose old events `tracedb archive` dropped keep their summaries
  // (engine/compact/archive.h).
  std::set<int64_t> archived;
  {
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st,
        db->Prepare("SELECT substr(key, 19) FROM meta WHERE key LIKE 'archive.cutoff_ns.%'"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      archived.insert(st.Int(0));
    }
  }
  std::map<StatKey, Stat> disk;
  {
    TRACEDB_ASSIGN_OR_RETURN(
        Stmt st, db->Prepare("SELECT rank, name, cat, kind, count, total_dur, min_dur, max_dur "
                             "FROM name_stats"));
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      r_->name_stats++;
      disk[{st.Int(0), st.Int(1), st.Int(2), st.Int(3)}] =
          Stat{st.Int(4), st.Int(5), st.Int(6), st.Int(7)};
    }
  }
  auto where = [](const StatKey& k) {
    const int64_t kind = std::get<3>(k);
    return "name_stats (rank " + N(std::get<0>(k)) + ", name " + N(std::get<1>(k)) + ", cat " +
           N(std::get<2>(k)) + ", kind " +
           (kind >= 0 && kind < kNumRowKinds ? RowKindName(static_cast<RowKind>(kind)) : N(kind)) +
           ")";
  };
  for (const auto& [key, ev] : stats_) {
    const bool cut = archived.count(std::get<0>(key)) != 0;
    auto it = disk.find(key);
    if (it == disk.end()) {
      Problem(where(key), "missing; the blocks hold " + N(ev.count) + " such events");
      continue;
    }
    const Stat& s = it->second;
    if (cut ? s.count < ev.count : s.count != ev.count) {
      Problem(where(key), "count " + N(s.count) + ", the blocks hold " + N(ev.count) +
                              (cut ? " (an archived rank: at least that many)" : ""));
    } else if (!cut && (s.total != ev.total || s.min != ev.min || s.max != ev.max)) {
      Problem(where(key), "durations total/min/max " + N(s.total) + "/" + N(s.min) + "/" +
                              N(s.max) + ", the events' " + N(ev.total) + "/" + N(ev.min) + "/" +
                              N(ev.max));
    }
  }
  for (const auto& [key, s] : disk) {
    if (!stats_.count(key) && !archived.count(std::get<0>(key)) && s.count != 0) {
      Problem(where(key), "count " + N(s.count) + ", but no block holds such an event");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<VerifyReport> VerifyDb(const std::string& path, const VerifyOptions& options) {
  VerifyReport report;
  auto db = OpenTraceDb(path, /*create=*/false, /*read_only=*/true);
  if (!db.ok()) return db.status();
  Checker c(options, &report);
  Status s = c.Run(db->get());
  if (!s.ok()) {
    // A table that cannot be read (damaged pages, a missing table) is itself what lies.
    c.Problem("sqlite", s.message());
  }
  return report;
}

}  // namespace tracedb::engine
