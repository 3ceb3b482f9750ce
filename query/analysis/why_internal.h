// Internals of the why analyses (query/analysis/why.h), shared by their parts:
//   why_load.cc    the model: one decoding of every block into per-rank self-time segments and
//                  communication events, the steps, the communicators, and the matching read
//                  from the collective and point-to-point tables
//   why_waits.cc   wait states and root causes (delay costs, propagation, the noise filter)
//   why_path.cc    the critical path per step window and the what-if
// Thread safety: plain data and functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"
#include "query/analysis/why.h"

namespace tracedb::query::analysis::internal {

// A stretch of a track's time spent in its deepest open span (self time).
struct Seg {
  int64_t a, b;  // [a, b)
  int32_t name;
};

// A communication event of a rank that synchronises it with others (a collective arrival, a
// matched send or the blocking call that completed a matched receive).
struct Sync {
  int64_t id, ts, end;
  int32_t name;
  // Who else took part: a collective (index into Model::groups), or the other side of a
  // message (partner_rank, partner_id); -1 when unknown.
  int64_t group = -1;
  int64_t partner_rank = -1, partner_id = -1;
};

struct RankData {
  std::vector<std::vector<Seg>> tracks;            // thread tracks; segments sorted by a
  std::vector<std::pair<int64_t, int64_t>> steps;  // (ts, step), by ts
  int64_t first_ts = INT64_MAX, last_end = INT64_MIN;
  std::vector<Sync> syncs;     // by (end, id)
  std::vector<Sync> by_entry;  // the same by (ts, id)
  int main_track = -1;         // the thread track with the most span time (critical path pieces)

  bool StepAt(int64_t ts, int64_t* step) const;
};

// A communication event (cat mpi, comm or nccl) by id.
struct CommEvent {
  int64_t rank, ts, dur;
  int32_t name;
  bool has_peer;
  int32_t peer;
  bool on_lane = false;  // on a lane (e.g. PyTorch's "c10d N"), not on a thread track
};

// A row of tracedb_collective_arrivals.
struct Arrival {
  int64_t rank, comm, seq, id, ts, end_ts, wait, last_rank;
  bool has_comm, has_dur;
  int32_t name;
};

// A matched point-to-point message, with both sides' events.
struct Message {
  int64_t send_id, recv_id, src, dst, send_ts;
  int64_t recv_posted_ts;
};

struct Model {
  std::vector<std::string> names;  // our name index -> text
  std::unordered_map<std::string, int32_t> name_index;
  std::map<int64_t, RankData> ranks;
  std::unordered_map<int64_t, CommEvent> comm;
  std::vector<Arrival> arrivals;  // by (comm, seq)
  std::vector<Message> messages;
  // Per collective (comm, seq): every rank's event in it (rank, sync).
  std::vector<std::vector<std::pair<int64_t, Sync>>> groups;
  std::map<std::pair<int64_t, int64_t>, int64_t> in_comm;    // (rank, comm) -> rank in comm
  std::map<std::pair<int64_t, int64_t>, int64_t> from_comm;  // (comm, rank in comm) -> rank
  int64_t events = 0;

  int32_t Intern(const std::string& s);
  RankData& Rank(int64_t r) { return ranks[r]; }
  // The global rank of `rank_in_comm` in `comm` (the rank itself when the DB has no member
  // list for the communicator).
  int64_t GlobalRank(int64_t comm, int64_t rank_in_comm) const;
};

StatusOr<Model> LoadModel(engine::Db* db);

// Time per name spent by `rank` in [a, b) (self time over its thread tracks; the time no span
// covers under the name kNoSpan). Adds to *out (name -> ns).
void TimeByName(const Model& m, const RankData& rd, int64_t a, int64_t b,
                std::unordered_map<int32_t, int64_t>* out);

// The latest synchronisation of `rd` that ended at or before `ts`, other than event `self`;
// nullptr when none.
const Sync* PreviousSync(const RankData& rd, int64_t ts, int64_t self);

// The latest synchronisation of `rd` entered before `ts` in which rank `other` took part too
// (the same collective, or a message between the two), with `other`'s side of it. False when
// none within the last `limit` synchronisations.
bool PreviousCommonSync(const Model& m, const RankData& rd, int64_t ts, int64_t other, Sync* mine,
                        Sync* theirs, int limit = 256);

// Wait states from the model (Analysis::waits, by (rank, ts)).
void ComputeWaits(const Model& m, Analysis* out);
// Per (step, rank, name) times and their medians over ranks (Analysis::name_times).
void ComputeNameTimes(const Model& m, Analysis* out);
// Root causes from the waits and the name times (Analysis::causes).
void ComputeCauses(const Model& m, const Options& o, Analysis* out);
// The critical path per step window (Analysis::path, Analysis::steps).
void ComputePath(const Model& m, Analysis* out);

}  // namespace tracedb::query::analysis::internal
