// The hang report (`tracedb report hang`): where every rank of a job stood when it stopped, from
// the spans still open at its end (rows with `open = 1`, docs/database-format.md "Open spans").
//
// Per rank: the open spans, innermost first; `blocked_in`, the innermost open communication call
// (category mpi, nccl or comm) with its peer, communicator and sequence number; since when, and
// when the rank was last seen. Per communicator: the collective (comm, seq) each rank is blocked
// in. Culprits: the ranks that the others wait for, found by two rules (docs/hang.md):
//  1. a collective some members are blocked in (the same comm and seq) and others are not in:
//     each missing member is a culprit (it is elsewhere: blocked in another call, still
//     computing, or gone);
//  2. a blocking receive (or probe) from a peer that is not sending to it: the rank at the end
//     of the wait-for chain is a culprit (every rank of a cycle, when the chain closes on
//     itself), unless rule 1 already names the ranks the chain leads to.
// Thread safety: one call per Db at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::query::hang {

// One span still open when the rank stopped.
struct OpenSpan {
  std::string name;
  std::string cat;
  int64_t ts = 0;   // ns, common clock: when it began
  int64_t end = 0;  // ns: when the rank was last seen
  int64_t depth = 0;
  int64_t tid = -1;  // the thread (OS id), -1 when unknown
  std::optional<int64_t> peer, comm, seq, tag, bytes;
};

struct RankState {
  int32_t rank = 0;
  std::vector<OpenSpan> open_spans;  // innermost first (deepest, then latest start)
  std::optional<size_t> blocked;     // index in open_spans of the blocking call, if any
  int64_t last_seen = INT64_MIN;     // ns: the latest end of any of its events
  // The last communication call the rank finished on the communicator of a collective that
  // others are blocked in (filled for culprits of rule 1): name and seq.
  std::string note;
};

// One collective some ranks are blocked in.
struct BlockedCollective {
  std::string name;
  int64_t comm = 0;
  int64_t seq = 0;
  std::vector<int32_t> ranks_in;       // blocked in it
  std::vector<int32_t> ranks_missing;  // members not in it (rule 1 culprits)
  bool members_known = false;          // from the communicator's member list (else: the ranks
                                       // that used the communicator)
};

struct Culprit {
  int32_t rank = 0;
  std::string reason;
};

struct HangReport {
  std::vector<RankState> ranks;  // every rank of the database, by rank
  std::vector<BlockedCollective> collectives;
  std::vector<Culprit> culprits;
  uint64_t open_rows = 0;  // open spans in the database
};

// Builds the report from a database opened with query::OpenQueryDb (the `events` table).
StatusOr<HangReport> BuildHangReport(engine::Db* db);

// The report as JSON (keys: ranks[{rank, state, blocked_in, peer, comm, seq, tag, since_ns,
// blocked_ns, last_seen_ns, open_spans[...]}], collectives, culprits[{rank, reason}],
// open_spans) and as text for people.
std::string HangReportJson(const HangReport& r);
std::string HangReportText(const HangReport& r);

}  // namespace tracedb::query::hang
