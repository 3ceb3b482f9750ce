// The `events` table's view of the database's dictionaries. See events_internal.h.
#include <algorithm>

#include "engine/db/block_check.h"
#include "query/sql/events_internal.h"

namespace tracedb::query::events {

void DbCatalog::Refresh(engine::Db* db) {
  // Nothing to reread unless a connection changed the file since the last look: another one
  // (PRAGMA data_version) or this one (sqlite3_total_changes).
  int64_t dv = -1;
  if (data_version_stmt.raw() == nullptr) {
    auto st = db->Prepare("PRAGMA data_version");
    if (st.ok()) data_version_stmt = std::move(*st);
  }
  if (data_version_stmt.raw() != nullptr) {
    auto row = data_version_stmt.Step();
    if (row.ok() && *row) dv = data_version_stmt.Int(0);
    data_version_stmt.Reset();
  }
  const int64_t changes = sqlite3_total_changes64(db->raw());
  if (dv >= 0 && dv == seen_data_version && changes == seen_changes) return;
  seen_data_version = dv;
  seen_changes = changes;
  // The string dictionary, through the block store (ids beyond DenseIdLimit, from a hostile or
  // damaged file, are left out: their events' names read NULL). A read error leaves the
  // strings read so far; the next refresh reads on from there.
  engine::BlockStore store(db);
  auto ms = store.ForEachString(max_string, [&](int64_t id64, std::string_view text) {
    const auto id = static_cast<size_t>(id64);
    if (strings.size() <= id) strings.resize(id + 1);
    strings[id] = std::string(text);
    ids[strings[id]] = static_cast<uint32_t>(id);
  });
  if (ms.ok()) max_string = *ms;
  auto ntracks = db->QueryInt("SELECT count(*) FROM tracks", 0);
  const int64_t track_limit = engine::DenseIdLimit(ntracks.ok() ? *ntracks : 0);
  auto mt = db->QueryInt(
      "SELECT max(track) FROM tracks WHERE track <= " + std::to_string(track_limit), 0);
  if (mt.ok() && *mt > max_track) {
    auto st = db->Prepare(
        "SELECT track, rank, tid, kind, name FROM tracks WHERE track > ?1 AND track <= ?2");
    if (st.ok()) {
      st->Bind(1, max_track);
      st->Bind(2, track_limit);
      while (true) {
        auto row = st->Step();
        if (!row.ok() || !*row) break;
        const auto id = static_cast<size_t>(st->Int(0));
        if (tracks.size() <= id) tracks.resize(id + 1);
        Track& t = tracks[id];
        t.rank = static_cast<int32_t>(st->Int(1));
        t.tid = st->IsNull(2) ? -1 : st->Int(2);
        t.lane = st->Text(3) != "thread";
        t.name = std::string(st->Text(4));
      }
    }
    max_track = *mt;
    // Dense keys for the grouped scan: equal values, equal keys (0 stands for NULL).
    std::map<int64_t, uint32_t> tids;
    std::map<std::string_view, uint32_t> names;
    for (Track& t : tracks) {
      t.tid_key = t.tid < 0 ? 0 : tids.emplace(t.tid, tids.size() + 1).first->second;
      t.name_key = names.emplace(t.name, names.size() + 1).first->second;
      t.lane_key = t.lane ? t.name_key : 0;
    }
  }
  // The steps themselves are read by LoadSteps, for a query that needs them.
  auto sc = db->QueryInt("SELECT count(*) FROM steps", 0);
  if (sc.ok() && *sc != step_count) {
    steps.clear();
    steps_loaded = false;
    step_count = *sc;
  }
  // name_stats grows with the blocks (one transaction): reread it when a block was added.
  auto mb = db->QueryInt("SELECT max(block) FROM blocks", 0);
  if (mb.ok() && *mb != data_version) {
    rank_min_dur.clear();
    auto st = db->Prepare("SELECT rank, min(min_dur) FROM name_stats GROUP BY rank");
    if (st.ok()) {
      while (true) {
        auto row = st->Step();
        if (!row.ok() || !*row) break;
        rank_min_dur[static_cast<int32_t>(st->Int(0))] = st->Int(1);
      }
    }
    data_version = *mb;
  }
}

void DbCatalog::LoadSteps(engine::Db* db) {
  if (steps_loaded) return;
  steps.clear();
  auto st = db->Prepare("SELECT rank, ts, step FROM steps ORDER BY rank, ts");
  if (st.ok()) {
    while (true) {
      auto row = st->Step();
      if (!row.ok() || !*row) break;
      steps[static_cast<int32_t>(st->Int(0))].emplace_back(st->Int(1), st->Int(2));
    }
  }
  steps_loaded = true;
}

std::optional<int64_t> DbCatalog::StepAt(int32_t rank, int64_t ts) const {
  auto it = steps.find(rank);
  if (it == steps.end()) return std::nullopt;
  const auto& v = it->second;
  auto p = std::upper_bound(v.begin(), v.end(), ts,
                            [](int64_t t, const auto& e) { return t < e.first; });
  if (p == v.begin()) return std::nullopt;
  return std::prev(p)->second;
}

}  // namespace tracedb::query::events
