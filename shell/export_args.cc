// Parsing of export filter arguments. See export_args.h.
// Thread safety: pure functions.
#include "shell/export_args.h"

#include <cctype>
#include <cstdint>

namespace tracedb::shell {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// A non-negative decimal integer that fits int64, the whole of `s`.
bool ParseUint(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;  // 19 digits fit in uint64
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > static_cast<uint64_t>(INT64_MAX)) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

Status Bad(std::string_view what, std::string_view text, std::string_view why) {
  return Status::InvalidArgument("bad " + std::string(what) + " '" + std::string(text) +
                                 "': " + std::string(why));
}

}  // namespace

Status ParseRankList(std::string_view text, std::vector<std::pair<int64_t, int64_t>>* out) {
  out->clear();
  std::string_view rest = text;
  if (Trim(rest).empty()) return Bad("rank list", text, "empty");
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = Trim(rest.substr(0, comma));
    const size_t dash = item.find('-');
    int64_t lo, hi;
    if (dash == std::string_view::npos) {
      if (!ParseUint(item, &lo)) {
        return Bad("rank list", text, "expected ranks and ranges like 0,2-5");
      }
      hi = lo;
    } else if (!ParseUint(Trim(item.substr(0, dash)), &lo) ||
               !ParseUint(Trim(item.substr(dash + 1)), &hi)) {
      return Bad("rank list", text, "expected ranks and ranges like 0,2-5");
    } else if (hi < lo) {
      return Bad("rank list", text, "range " + std::string(item) + " ends before it starts");
    }
    out->emplace_back(lo, hi);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return Status::Ok();
}

Status ParseTimeBound(std::string_view text, bool is_to, query::ChromeTimeBound* out) {
  using Kind = query::ChromeTimeBound::Kind;
  const char* what = is_to ? "--to time" : "--from time";
  std::string_view s = Trim(text);
  *out = query::ChromeTimeBound();
  out->text = std::string(s);
  if (s.empty()) return Bad(what, text, "empty");
  if (s.substr(0, 5) == "step:") {
    int64_t step;
    if (!ParseUint(Trim(s.substr(5)), &step)) {
      return Bad(what, text, "expected step:N with N a step number");
    }
    out->kind = Kind::kStep;
    out->value = step;
    return Status::Ok();
  }
  const bool plus = s.front() == '+';
  if (plus) s.remove_prefix(1);
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  const std::string_view whole = s.substr(0, i);
  std::string_view frac;
  if (i < s.size() && s[i] == '.') {
    const size_t f = ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    frac = s.substr(f, i - f);
    if (frac.empty()) return Bad(what, text, "a digit must follow the decimal point");
  }
  const std::string_view unit = Trim(s.substr(i));
  static constexpr const char* kHelp =
      "expected ns since the epoch (1700000000000000000), a time since the job start with a "
      "unit (2.5s, 300ms), +DURATION for --to (after --from), or step:N";
  if (whole.empty() && frac.empty()) return Bad(what, text, kHelp);
  int64_t scale = 0;
  if (unit == "ns") {
    scale = 1;
  } else if (unit == "us" || unit == "\xc2\xb5s") {  // us or µs
    scale = 1000;
  } else if (unit == "ms") {
    scale = 1000000;
  } else if (unit == "s") {
    scale = 1000000000;
  } else if (unit == "min") {
    scale = 60 * int64_t{1000000000};
  } else if (unit == "h") {
    scale = 3600 * int64_t{1000000000};
  } else if (!unit.empty()) {
    return Bad(what, text, "unknown unit '" + std::string(unit) + "' (ns, us, ms, s, min, h)");
  }
  if (scale == 0) {
    // No unit: an absolute time in ns.
    int64_t ns;
    if (plus || !frac.empty()) return Bad(what, text, "a relative time needs a unit (2.5s)");
    if (!ParseUint(whole, &ns)) return Bad(what, text, "not an integer number of ns");
    out->kind = Kind::kEpochNs;
    out->value = ns;
    return Status::Ok();
  }
  int64_t w = 0;
  if (!whole.empty() && !ParseUint(whole, &w)) return Bad(what, text, "number too large");
  // ns = whole * scale + round(frac * scale / 10^digits), exact in 128-bit arithmetic.
  __int128 ns = static_cast<__int128>(w) * scale;
  if (!frac.empty()) {
    if (frac.size() > 18) frac = frac.substr(0, 18);  // far below a nanosecond already
    __int128 num = 0, den = 1;
    for (char c : frac) {
      num = num * 10 + (c - '0');
      den *= 10;
    }
    ns += (num * scale + den / 2) / den;
  }
  if (ns > INT64_MAX) return Bad(what, text, "too large");
  out->kind = plus && is_to ? Kind::kAfterFrom : Kind::kSinceStart;
  out->value = static_cast<int64_t>(ns);
  return Status::Ok();
}

}  // namespace tracedb::shell
