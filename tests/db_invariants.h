// The invariants every trace database the suite makes must hold (recorded, compacted, imported,
// PyTorch, GPU harness), checked from outside the product: the `events` rows read with plain SQL
// and compared in C++ with each other, with the `steps`, `name_stats` and `stats` tables, and
// with `tracedb info --json`. The differential test compares `events` with a copy of itself and
// cannot see a wrong parent; these checks can. The rules, one per check:
//   1. ids are unique;
//   2. end_ts = ts + dur, and dur >= 0;
//   3. a parent exists, is a span on the same track and starts at or before its child; it ends
//      at or after its child, except where the input nested improperly (a child that outlives
//      its parent, by design kept and counted): rows that outlive their parent are at most the
//      `improper_nesting` count of `stats` (e.g. NCCL proxy steps, some imported traces);
//   4. depth is 0 at the top and the parent's depth plus one below it;
//   5. `step` is the step of the rank's last `steps` marker at or before ts (NULL before any);
//   6. per (rank, name, cat), the rows' count and total duration equal `name_stats` (archive may
//      have dropped blocks: then counted in `archive_dropped_events`, and the rows are fewer);
//   7. `tracedb info --json` counts the rows of `events`, in all and per rank.
#pragma once

#include <string>
#include <vector>

namespace tracedb::testing {

struct InvariantOptions {
  // Rule 7 runs the CLI (TracedbBin()); off for tests that have no CLI to run.
  bool check_info = true;
};

// Every violation found, one sentence each naming the rule and the row (at most 20 per rule;
// the count of the rest). Empty when every rule holds. A DB that cannot be read is a violation.
std::vector<std::string> DbInvariantViolations(const std::string& db_path,
                                               const InvariantOptions& options = {});

// Fails the calling test (EXPECT) with the violations, if any; returns the number of rows checked.
size_t ExpectDbInvariants(const std::string& db_path, const InvariantOptions& options = {});

}  // namespace tracedb::testing
