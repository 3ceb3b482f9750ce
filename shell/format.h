// Human-readable numbers for the shell's text output: 1,234,567; 12.3 MB; 4.56 ms.
#pragma once

#include <cstdint>
#include <string>

namespace tracedb::shell {

std::string WithCommas(uint64_t v);
std::string HumanBytes(double bytes);
std::string HumanDuration(double ns);

}  // namespace tracedb::shell
