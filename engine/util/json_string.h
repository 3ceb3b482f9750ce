// The JSON string literal, the one policy of the project: quotes, backslashes and control
// characters escaped, ill-formed UTF-8 replaced by U+FFFD (one per maximal ill-formed subpart, as
// the WHATWG and Python decoders do), so every JSON the project writes is valid UTF-8. Header-only
// and in the engine's util layer so that the engine (step statistics' top names) and the query
// layer's JSON writer (engine/util/json_text.h: AppendString, numbers, objects) share it.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tracedb::engine {
namespace json_string_detail {

// 1 for the bytes a string literal cannot copy as they are: control characters, '"', '\\' and
// every non-ASCII byte (checked as UTF-8).
inline constexpr auto kJsonSpecial = [] {
  struct Table {
    bool v[256] = {};
  } t;
  for (int c = 0; c < 256; ++c) t.v[c] = c < 0x20 || c == '"' || c == '\\' || c >= 0x80;
  return t;
}();

inline constexpr char kJsonHex[] = "0123456789abcdef";
inline constexpr char kJsonReplacement[] = "\xef\xbf\xbd";  // U+FFFD

inline char* WriteJsonControl(char* p, unsigned char c) {
  *p++ = '\\';
  switch (c) {
    case '\b':
      *p++ = 'b';
      break;
    case '\f':
      *p++ = 'f';
      break;
    case '\n':
      *p++ = 'n';
      break;
    case '\r':
      *p++ = 'r';
      break;
    case '\t':
      *p++ = 't';
      break;
    default:
      *p++ = 'u';
      *p++ = '0';
      *p++ = '0';
      *p++ = kJsonHex[c >> 4];
      *p++ = kJsonHex[c & 15];
  }
  return p;
}

// The length of the well-formed UTF-8 sequence at s[i] (2 to 4), or, when it is ill-formed, the
// negated length of its maximal ill-formed subpart (-1 to -3). REQUIRES: s[i] >= 0x80.
inline int Utf8Sequence(const unsigned char* s, size_t n, size_t i) {
  const unsigned char c = s[i];
  int need;
  unsigned char lo = 0x80, hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) {
    need = 1;
  } else if (c >= 0xe0 && c <= 0xef) {
    need = 2;
    if (c == 0xe0) lo = 0xa0;  // no overlong forms
    if (c == 0xed) hi = 0x9f;  // no surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    need = 3;
    if (c == 0xf0) lo = 0x90;  // no overlong forms
    if (c == 0xf4) hi = 0x8f;  // nothing above U+10FFFF
  } else {
    return -1;
  }
  size_t j = i + 1;
  for (int k = 0; k < need; ++k, ++j) {
    if (j >= n || s[j] < lo || s[j] > hi) return -static_cast<int>(j - i);
    lo = 0x80;
    hi = 0xbf;
  }
  return static_cast<int>(j - i);
}

}  // namespace json_string_detail

// Writes the string body s (no quotes) escaped: control characters, '"' and '\\' escaped,
// ill-formed UTF-8 replaced. Room for 6 bytes per byte of s; returns the end.
inline char* WriteJsonStringBody(char* p, const unsigned char* s, size_t n) {
  size_t i = 0;
  while (i < n) {
    size_t run = i;
    while (run < n && !json_string_detail::kJsonSpecial.v[s[run]]) ++run;
    std::memcpy(p, s + i, run - i);
    p += run - i;
    i = run;
    if (i >= n) break;
    const unsigned char c = s[i];
    if (c < 0x80) {
      if (c < 0x20) {
        p = json_string_detail::WriteJsonControl(p, c);
      } else {
        *p++ = '\\';
        *p++ = static_cast<char>(c);
      }
      ++i;
      continue;
    }
    const int len = json_string_detail::Utf8Sequence(s, n, i);
    if (len > 0) {
      std::memcpy(p, s + i, static_cast<size_t>(len));
      p += len;
      i += static_cast<size_t>(len);
    } else {
      std::memcpy(p, json_string_detail::kJsonReplacement, 3);
      p += 3;
      i += static_cast<size_t>(-len);
    }
  }
  return p;
}

// Appends `s` as a JSON string literal, quotes included.
inline void AppendJsonString(std::string* out, std::string_view s) {
  const size_t at = out->size();
  out->resize(at + 6 * s.size() + 2);
  char* p = out->data() + at;
  *p++ = '"';
  p = WriteJsonStringBody(p, reinterpret_cast<const unsigned char*>(s.data()), s.size());
  *p++ = '"';
  out->resize(static_cast<size_t>(p - out->data()));
}

}  // namespace tracedb::engine
