// Small, bounds-checked JSON text helpers shared by the streaming event reader and the importers:
// finding the end of a string or of any value in a byte span (reporting "need more bytes" when
// the span ends first), decoding string escapes (\uXXXX with surrogate pairs), converting a
// decimal number of microseconds to integer nanoseconds exactly, looking up members of an object
// text, and re-writing a value as compact, valid JSON. (Reading JSON: this file. Writing JSON:
// engine/util/json_text.h, the one writer, whose policy on invalid UTF-8 this re-writer follows.)
//
// Tolerance (what trace writers really produce): raw control characters inside strings are
// accepted as they are (Horovod inserts tensor names without escaping); an unknown escape is
// kept as written; a lone surrogate decodes to U+FFFD. Nothing here reads outside [p, end).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace tracedb::query::json {

// What a scan over a partial buffer found.
enum class Scan : uint8_t {
  kOk,        // complete
  kNeedMore,  // the span ended first: more bytes may complete it
  kBad,       // malformed
};

inline bool IsJsonSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

inline const char* SkipSpace(const char* p, const char* end) {
  while (p < end && IsJsonSpace(*p)) ++p;
  return p;
}

// `p` points just after an opening quote. Finds the closing quote: sets *close to it and
// *escaped when the string holds a backslash escape.
Scan FindStringEnd(const char* p, const char* end, const char** close, bool* escaped);

// `p` points at the first byte of a value (after any space). Sets *after to the first byte after
// it. Containers are matched bracket by bracket (at most kMaxDepth deep); scalars must be
// numbers or true/false/null. A scalar that touches `end` is kNeedMore (it may go on).
inline constexpr int kMaxDepth = 512;
Scan SkipValue(const char* p, const char* end, const char** after);

// Decodes the inside of a string literal (without its quotes) into *out (replacing it).
void DecodeString(std::string_view inner, std::string* out);

// A number of microseconds written in decimal (optionally with fraction and exponent, e.g.
// "1234.567", "-5", "1.5e3") as integer nanoseconds, exact to the nanosecond: digits below the
// nanosecond are rounded half away from zero. False when not a number or out of int64 range.
bool ParseMicrosToNanos(std::string_view text, int64_t* ns);
// An integer (no fraction, no exponent). False otherwise or out of range.
bool ParseInt64(std::string_view text, int64_t* v);
// Any JSON number.
bool ParseDouble(std::string_view text, double* v);

// A value's text as a string: the decoded content of a string literal; nullopt for other values.
std::optional<std::string> AsString(std::string_view value);
// A value's integer: a JSON integer, or a string holding one ("44"); nullopt otherwise.
std::optional<int64_t> AsInt(std::string_view value);

// Calls fn(key, value) for every member of the object `object` (its full text "{...}"), keys
// decoded, values as raw text. fn returns false to stop. False when `object` is not a
// well-formed object.
bool ForEachMember(std::string_view object,
                   const std::function<bool(std::string_view key, std::string_view value)>& fn);
// Calls fn(value) for every element of the array `array` (its full text "[...]"), as raw text.
// fn returns false to stop. False when `array` is not a well-formed array.
bool ForEachElement(std::string_view array, const std::function<bool(std::string_view value)>& fn);
// The raw text of member `key` of object `object`, or nullopt.
std::optional<std::string_view> FindMember(std::string_view object, std::string_view key);

// Appends `value` to *out as compact valid JSON: no space outside strings, strings re-escaped by
// engine::json::AppendLiteralBody (control characters escaped, ill-formed UTF-8 replaced by U+FFFD:
// the one policy of every JSON the project writes). False (and *out unspecified) when `value` is
// not a well-formed JSON value.
bool AppendCompactJson(std::string_view value, std::string* out);

}  // namespace tracedb::query::json
