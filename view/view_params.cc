// Requests and answers of the `tracedb view` server. See view_params.h.
#include "view/view_params.h"

#include <sys/random.h>

#include <algorithm>

#include "engine/util/json_text.h"
#include "engine/util/parse_number.h"

namespace tracedb::view {

std::string RandomToken() {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof b) {
    const ssize_t n = getrandom(b + got, sizeof b - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string t;
  for (unsigned char c : b) {
    t += kHex[c >> 4];
    t += kHex[c & 15];
  }
  return t;
}

bool SameToken(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

std::string Quote(std::string_view s) {
  std::string out;
  engine::json::AppendString(&out, s);
  return out;
}

void Error(httplib::Response& res, int status, std::string_view msg) {
  res.status = status;
  res.set_content("{\"error\":" + Quote(msg) + "}", kJson);
}

// A request parameter that must be an integer: false (and a 400 answer) when it is not.
bool IntParam(const httplib::Request& req, httplib::Response& res, const char* name, int64_t* out,
              bool required, int64_t lo, int64_t hi) {
  if (!req.has_param(name)) {
    if (!required) return true;
    Error(res, 400, std::string("missing parameter '") + name + "'");
    return false;
  }
  const std::string v = req.get_param_value(name);
  int64_t x = 0;
  if (!engine::ParseInt64(v, &x)) {
    Error(res, 400,
          std::string("parameter '") + name + "' is not an integer: '" + v.substr(0, 64) + "'");
    return false;
  }
  if (x < lo || x > hi) {
    Error(res, 400,
          std::string("parameter '") + name + "' = " + v + " is out of range [" +
              std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return false;
  }
  *out = x;
  return true;
}

bool TrackListParam(const httplib::Request& req, httplib::Response& res,
                    std::vector<uint32_t>* out) {
  if (!req.has_param("tracks") || req.get_param_value("tracks").empty()) return true;
  const std::string list = req.get_param_value("tracks");
  size_t p = 0;
  while (p <= list.size()) {
    const size_t c = std::min(list.find(',', p), list.size());
    const std::string one = list.substr(p, c - p);
    int64_t v =
        0;  // the project's one strict policy (engine/util/parse_number.h): no spaces, no '+'
    if (!engine::ParseInt64(one, &v) || v < 0 || v > UINT32_MAX) {
      Error(res, 400, "parameter 'tracks': not a track id: '" + one.substr(0, 64) + "'");
      return false;
    }
    out->push_back(static_cast<uint32_t>(v));
    p = c + 1;
  }
  if (out->size() > 100000) {
    Error(res, 400, "parameter 'tracks': too many tracks");
    return false;
  }
  return true;
}

}  // namespace tracedb::view
