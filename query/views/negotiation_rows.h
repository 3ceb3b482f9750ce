// Imported Horovod negotiations as rows of decoded blocks, shared by the two tables that read
// them: the collective arrivals (query/views/views_collective.h: each RANK_READY tick is an arrival
// at its negotiation) and the negotiation views (query/views/views_negotiation.h). Both must agree
// with the plain SQL on what a negotiation and a tick are, so the definitions live here once:
//   a negotiation  a span whose name matches `LIKE 'NEGOTIATE\_%' ESCAPE '\'`
//   a tick         an event named RANK_READY with a parent (events.parent IS NOT NULL); its
//                  peer (the rank that became ready) may be NULL
// Thread safety: plain functions of their arguments.
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/db/event_block.h"

namespace tracedb::query::negotiation {

// SQLite's `name LIKE 'NEGOTIATE\_%' ESCAPE '\'`: the ASCII prefix in any case (LIKE folds
// ASCII case only).
inline bool IsNegotiationName(std::string_view s) {
  static constexpr char kPrefix[] = "negotiate_";
  if (s.size() < 10) return false;
  for (size_t i = 0; i < 10; ++i) {
    const char c = s[i];
    const char lower = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    if (lower != kPrefix[i]) return false;
  }
  return true;
}

// events.id of row i (needs kColK).
inline int64_t IdAt(const engine::DecodedBlock& b, size_t i) {
  return (static_cast<int64_t>(b.track[i]) << 32) | static_cast<int64_t>(b.k[i]);
}

// A RANK_READY tick: its id, events.parent (the negotiation it belongs to, if that is one),
// ts, and peer (has_peer false: NULL).
struct Tick {
  int64_t id, parent, ts;
  int32_t peer;
  bool has_peer;
};

// Row i of `b` as a tick, when it has a parent (needs kColParent, kColTs, kColArgs); the caller
// has checked the name. False: events.parent is NULL, so the SQL has no tick.
inline bool TickAt(const engine::DecodedBlock& b, size_t i, Tick* t) {
  if (b.parent_k[i] == 0) return false;
  t->id = IdAt(b, i);
  // As events.parent: the parent is on the row's own track, k + 1 stored (0 = none).
  t->parent = (static_cast<int64_t>(b.track[i]) << 32) | static_cast<int64_t>(b.parent_k[i] - 1);
  t->ts = b.ts[i];
  t->has_peer = (b.arg_mask[i] & engine::EventArgs::kPeer) != 0;
  t->peer = t->has_peer ? b.peer[i] : 0;
  return true;
}

}  // namespace tracedb::query::negotiation
