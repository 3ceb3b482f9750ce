// Parsing of `tracedb export` filter arguments: rank lists ("0,2-5") and time bounds
// ("1700000000000000000", "2.5s", "+500ms", "step:100"). Syntax in docs/export.md.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/util/status.h"
#include "query/export/chrome_exporter.h"

namespace tracedb::shell {

// "0,2-5" -> {{0,0},{2,5}}: comma-separated ranks and inclusive ranges of non-negative ranks.
// InvalidArgument with the reason on anything else.
Status ParseRankList(std::string_view text, std::vector<std::pair<int64_t, int64_t>>* out);

// A --from (is_to false) or --to (is_to true) bound:
//   N            ns since the Unix epoch (an integer without a unit)
//   N[.F]UNIT    time after the job's first event; UNIT is ns, us, ms, s, min or h
//   +N[.F]UNIT   --to: time after --from (rank by rank with a step bound); --from: as above
//   step:N       the start (--from) or the end (--to) of training step N, rank by rank
// Fractions are exact to the nanosecond (rounded to the nearest).
Status ParseTimeBound(std::string_view text, bool is_to, query::ChromeTimeBound* out);

}  // namespace tracedb::shell
