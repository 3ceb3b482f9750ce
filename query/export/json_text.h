// Fast JSON text for the exporters: string literals (escaped, invalid UTF-8 replaced), integers
// and nanosecond times as exact decimal microseconds, doubles, and a validating re-writer for the
// JSON argument objects stored in event blocks. No iostreams, no printf: these run per event.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tracedb::query::json {

// Bytes a JSON string literal of `s` can take at most (quotes included): every byte may become
// a six-byte \u00XX escape or a three-byte U+FFFD.
inline size_t MaxStringLiteral(size_t n) { return 6 * n + 2; }

// Appends `s` as a JSON string literal, quotes included. Quotes, backslashes and control
// characters are escaped; ill-formed UTF-8 is replaced by U+FFFD, one per maximal ill-formed
// subpart (as the WHATWG and Python decoders do), so the output is always valid UTF-8.
void AppendString(std::string* out, std::string_view s);
// The same, written at `p`, which has room for MaxStringLiteral(s.size()) bytes; returns the end.
char* WriteString(char* p, std::string_view s);

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

}  // namespace tracedb::query::json
