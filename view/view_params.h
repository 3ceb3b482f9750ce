// Requests and answers of the `tracedb view` server (view_server.h), shared by its handlers: the
// access token, the integer and track-list parameters (a 400 answer naming the parameter when
// one is malformed) and the JSON error answer {"error": "..."}. Internal to view/.
// Thread safety: pure functions.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tracedb::view {

// The type of every JSON answer. Debian's cpp-httplib is built with brotli and compresses, at
// brotli's highest quality, any answer whose type is exactly "application/json" (or starts with
// "text/") for a client that accepts it, as browsers do: 2 s of server CPU for a 350 KB window
// on a loaded machine, for nothing over loopback. A charset parameter makes it send as is.
inline constexpr char kJson[] = "application/json; charset=utf-8";

// 32 random hex digits (getrandom).
std::string RandomToken();
// a == b in time that does not depend on where they differ.
bool SameToken(const std::string& a, const std::string& b);

// `s` as a JSON string literal.
std::string Quote(std::string_view s);
// Answers `status` with {"error": msg}.
void Error(httplib::Response& res, int status, std::string_view msg);

// A request parameter that must be an integer in [lo, hi]: false (and a 400 answer) when it is
// not; an absent parameter is an error only when `required` (*out is then left as it was).
bool IntParam(const httplib::Request& req, httplib::Response& res, const char* name, int64_t* out,
              bool required, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX);
// The parameter `tracks` (comma-separated track ids, at most 100000) appended to *out; absent
// or empty: none. False (and a 400 answer) when one is not a track id.
bool TrackListParam(const httplib::Request& req, httplib::Response& res,
                    std::vector<uint32_t>* out);

}  // namespace tracedb::view
