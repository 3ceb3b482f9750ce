// Human-readable numbers. See human_units.h.
#include "engine/util/human_units.h"

#include <cmath>
#include <cstdio>

namespace tracedb::engine {

std::string WithCommas(uint64_t v) {
  const std::string digits = std::to_string(v);
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    out.push_back(digits[i]);
    if ((n - i - 1) % 3 == 0 && i + 1 != n) out.push_back(',');
  }
  return out;
}

std::string HumanBytes(double bytes) {
  static const char* const kUnits[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (std::fabs(bytes) >= 1000 && u < 5) {
    bytes /= 1000;
    ++u;
  }
  char buf[48];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", bytes, kUnits[u]);
  return buf;
}

std::string HumanDuration(double ns) {
  char buf[48];
  const double a = std::fabs(ns);
  if (a < 1e3) {
    std::snprintf(buf, sizeof(buf), "%.0f ns", ns);
  } else if (a < 1e6) {
    std::snprintf(buf, sizeof(buf), "%.2f us", ns / 1e3);
  } else if (a < 1e9) {
    std::snprintf(buf, sizeof(buf), "%.2f ms", ns / 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%.3f s", ns / 1e9);
  }
  return buf;
}

}  // namespace tracedb::engine
