// The "why" overlay of `tracedb view` (/api/why, docs/view.md): the critical path's pieces (a
// rank's time on the path, per step window) and the wait states (the waiting rank's time in a
// communication call until the late rank arrived), computed once over the whole job by the
// analyses of query/analysis/why.h and answered per time window, bounded in size, with the
// job's ranked causes in words (query/analysis/why_summary.h, the sentences of `tracedb
// explain`). Thread safety: Build once, then WindowJson from any thread (const).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/db/sqlite.h"
#include "engine/util/status.h"

namespace tracedb::view {

class WhyOverlay {
 public:
  // At most this many pieces and this many waits in one answer (the rest: "truncated").
  static constexpr size_t kMaxRows = 5000;

  // Runs the analyses over the database (a query connection) and keeps what the overlay draws;
  // NotSupported, saying so, when the database has more than `max_events` events.
  Status Build(engine::Db* db, int64_t max_events);

  // The pieces and waits that overlap [lo, hi) (absolute ns), their times relative to `origin`:
  // {"pieces":{"columns":[…],"rows":[[…]…]},"waits":{…},"truncated":b,"job_pieces":n,
  //  "job_waits":n,"summary":{…}} (summary: WhySummaryJson of the whole job, 10 causes).
  std::string WindowJson(int64_t lo, int64_t hi, int64_t origin, size_t max_rows = kMaxRows) const;

  size_t job_pieces() const { return pieces_.size(); }
  size_t job_waits() const { return waits_.size(); }

 private:
  struct Piece {
    int64_t ts = 0, dur = 0, rank = 0, step = 0, order = 0;
    bool has_step = false;
    int32_t name = -1;
  };
  struct Wait {
    int64_t ts = 0, dur = 0, rank = 0, id = 0, waited_for = 0, late_id = 0, step = 0;
    bool has_step = false;
    uint8_t pattern = 0;
    int32_t call = -1;
  };
  std::vector<std::string> names_;
  std::vector<Piece> pieces_;  // by ts
  std::vector<Wait> waits_;    // by ts
  int64_t longest_piece_ = 0, longest_wait_ = 0;
  std::string summary_json_;
};

}  // namespace tracedb::view
