// Human-readable numbers for the shell's text output: the one definition is
// query/human_units.h, shared with the SQL functions human_duration() and human_bytes().
#pragma once

#include "query/human_units.h"

namespace tracedb::shell {

using query::HumanBytes;
using query::HumanDuration;
using query::WithCommas;

}  // namespace tracedb::shell
