// The project's one CSV field writer (RFC 4180): the shell's `.mode csv` and `--format csv`,
// `tracedb report mpi --format csv`, and the tests' expected CSV files. A field holding a comma,
// a quote, CR or LF is quoted, with quotes doubled; any other field is written as it is.
// Header-only so that every target (the MPI-profile importer tests included) uses this one.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace tracedb::query::csv {

inline void AppendField(std::string* out, std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) {
    out->append(s);
    return;
  }
  out->push_back('"');
  for (char c : s) {
    if (c == '"') out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

inline std::string Field(std::string_view s) {
  std::string out;
  AppendField(&out, s);
  return out;
}

}  // namespace tracedb::query::csv
