// The project's one JSON writer (exporters, importers, the shell's JSON output and reports):
// string literals (escaped, invalid UTF-8 replaced), integers and nanosecond times as exact
// decimal microseconds, doubles in the shortest form that reads back exactly (std::to_chars),
// and a validating re-writer for the JSON argument objects stored in event blocks. JSON has no
// NaN or infinity: AppendNumber() writes them as null. No iostreams, no printf: these run per
// event. Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tracedb::engine::json {

// Bytes a JSON string literal of `s` can take at most (quotes included): every byte may become
// a six-byte \u00XX escape or a three-byte U+FFFD.
inline size_t MaxStringLiteral(size_t n) { return 6 * n + 2; }

// Appends `s` as a JSON string literal, quotes included. Quotes, backslashes and control
// characters are escaped; ill-formed UTF-8 is replaced by U+FFFD, one per maximal ill-formed
// subpart (as the WHATWG and Python decoders do), so the output is always valid UTF-8.
void AppendString(std::string* out, std::string_view s);
// The same, written at `p`, which has room for MaxStringLiteral(s.size()) bytes; returns the end.
char* WriteString(char* p, std::string_view s);

// Appends `in`, the inside of a string literal read from a file (quotes excluded), re-escaped
// for output: its valid escapes kept, the backslash of an invalid one escaped itself (a lenient
// writer's "\\q" stays those two characters), raw quotes and control characters escaped, and
// ill-formed UTF-8 replaced as by AppendString. The importers' compact re-writer of argument
// objects (query/import/json/json_scan.h, AppendCompactJson) writes its strings with it.
void AppendLiteralBody(std::string* out, std::string_view in);

// Writes `v` in decimal at `p` (room for 20 bytes); returns the end.
char* WriteUint(char* p, uint64_t v);
char* WriteInt(char* p, int64_t v);  // room for 20 bytes

// Writes `ns` nanoseconds as decimal microseconds, exactly: the integer part, then '.' and the
// three ns digits with trailing zeros dropped (1234567 -> "1234.567", 1234500 -> "1234.5",
// 1234000 -> "1234", -1500 -> "-1.5"). Room for 24 bytes.
inline constexpr size_t kMaxMicros = 24;
char* WriteMicros(char* p, int64_t ns);

// Writes a finite double in the shortest form that reads back to the same value ("0.25",
// "1e-07", "3"). REQUIRES: std::isfinite(v). Room for 32 bytes.
inline constexpr size_t kMaxDouble = 32;
char* WriteDouble(char* p, double v);

// Checks that `text` is one JSON object (surrounding whitespace allowed) and appends its members
// without the braces, re-written: whitespace outside strings dropped, strings re-escaped as by
// AppendString (their valid escapes kept), numbers and literals copied. *members is the number
// of members. Returns false, leaving `out` as it was, when `text` is not a JSON object or nests
// deeper than 64 levels.
bool AppendObjectMembers(std::string* out, std::string_view text, size_t* members);

// `s` as a JSON string literal (AppendString).
std::string String(std::string_view s);
// `v` as a JSON number (AppendNumber: null for NaN and infinities).
std::string Number(double v);

// Appends a double as a JSON number: whole numbers below 2^53 in integer digits, others in the
// shortest exact form (WriteDouble); NaN and ±infinity, which JSON cannot hold, as null.
void AppendNumber(std::string* out, double v);

// A double as text for tables and CSV: as AppendNumber ("0.1", "1e-07", "3", "1000000"), and
// "nan", "inf", "-inf" for the others.
std::string DoubleText(double v);

}  // namespace tracedb::engine::json
