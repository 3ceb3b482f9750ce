// Internals of the why analyses (query/analysis/why.h), shared by their parts:
//   why_load.cc    the model: one decoding of every block into per-rank self-time segments and
//                  communication events, the steps, the communicators
//   why_match.cc   the collective and point-to-point matching over that decoding, as the
//                  query layer's tables define it
//   why_waits.cc   wait states and root causes (delay costs, propagation, the noise filter)
//   why_path.cc    the critical path per step window and the what-if
// Thread safety: plain data and functions.
#pragma once

#include <cstdint>
#include <map>
#include <memory_resource>
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
  int64_t message = -1;  // a message's side: index into Model::messages
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

// A communication event (cat mpi, comm or nccl): what the analyses read of one.
struct CommEvent {
  int64_t ts = 0, dur = 0;  // dur 0 for an instant
  int32_t name = -1;
  bool on_lane = false;  // on a lane (e.g. PyTorch's "c10d N"), not on a thread track
};

// A row of the collective arrivals (query/views/views_collective.h), matched by why_match.cc.
struct Arrival {
  int64_t rank, comm, seq, id, ts, end_ts, wait, last_rank;
  bool has_comm, has_dur;
  int32_t name;
  // The event as a communication event (cat mpi, comm or nccl): its peer argument, and whether
  // it runs on a lane with a duration (waiting there is not time in the thread tracks' names).
  bool has_peer = false;
  int32_t peer = 0;
  bool lane_wait = false;
};

// A matched point-to-point message (query/views/views_p2p.h), with both sides' events.
struct Message {
  int64_t send_id, recv_id, src, dst, send_ts;
  int64_t recv_posted_ts;
  CommEvent send, recv;
};

// What the one decoding keeps for the matching (why_match.cc): the candidate rows of both
// tables, with the columns their definitions read.
struct MatchInput {
  // An MPI event (cat "mpi") that may be a send, a receive or a receive's completion.
  struct Mpi {
    int64_t id, ts, end_ts;  // end_ts as events.end_ts (saturating)
    int32_t rank;
    uint32_t name;  // string id
    uint32_t mask;  // EventArgs
    int32_t peer, tag;
    uint32_t comm;
    uint64_t flow;
    bool is_comm;  // also a communication event of the model (its category id is not 0)
    CommEvent ev;
  };
  std::vector<Mpi> mpi;           // in block order
  std::vector<uint8_t> p2p_name;  // per string id: comm_match::Role bits
  // Collective arrivals, in block order: the events with a seq, then the Horovod ticks (joined
  // to their negotiation spans by MatchCollectives).
  std::vector<Arrival> arrivals;
  struct Tick {
    int64_t id, parent, ts;
    int32_t peer;
    bool has_peer;  // the RANK_READY event's peer argument (the ready rank)
    bool is_comm;   // a communication event of the model
    bool lane_wait;
  };
  std::vector<Tick> ticks;
  std::vector<std::pair<int64_t, int32_t>> negotiations;  // span id -> name after NEGOTIATE_
};

struct Model {
  std::vector<std::string> names;  // our name index -> text
  std::unordered_map<std::string, int32_t> name_index;
  std::map<int64_t, RankData> ranks;
  int64_t comm_events = 0;        // events of cat mpi, comm or nccl
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

// Time per name (name index -> ns), its nodes from a pool resource of the caller.
using NameNs = std::pmr::unordered_map<int32_t, int64_t>;

// The matching of why_match.cc, with the semantics of the query layer's tables (the same rows
// in the same order): Model::arrivals as tracedb_collective_arrivals (by (comm, seq), latest
// first), Model::messages as tracedb_p2p_messages with the receives' posting times of
// tracedb_p2p_receives. Consumes `in`.
void MatchCollectives(MatchInput* in, Model* m);
void MatchMessages(MatchInput* in, Model* m);

// Time per name spent by `rank` in [a, b) (self time over its thread tracks; the time no span
// covers under the name kNoSpan). Adds to *out (name -> ns).
void TimeByName(const Model& m, const RankData& rd, int64_t a, int64_t b, NameNs* out);

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
