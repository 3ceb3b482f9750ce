// JSON text helpers. See json_scan.h.
#include "query/import/json/json_scan.h"
#include "engine/util/json_text.h"
#include "engine/util/parse_number.h"

#include <charconv>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tracedb::query::json {
namespace {

bool IsScalarChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
         c == '+' || c == '.';
}

// A JSON number: -?digits(.digits)?([eE][+-]?digits)?
bool IsNumber(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && s[i] == '-') ++i;
  const size_t int_start = i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  if (i == int_start) return false;
  if (i < s.size() && s[i] == '.') {
    const size_t f = ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == f) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    const size_t e = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == e) return false;
  }
  return i == s.size();
}

// Non-standard literals that Python's json module writes; compacted to null.
bool IsNonFinite(std::string_view s) { return s == "NaN" || s == "Infinity" || s == "-Infinity"; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Four hex digits at s[i..i+4), or -1.
int Hex4(std::string_view s, size_t i) {
  if (i + 4 > s.size()) return -1;
  int v = 0;
  for (size_t k = i; k < i + 4; ++k) {
    const int h = HexValue(s[k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

// Walks an object member's key and its ':' at *p, leaving *p at the value; with kEmit it also
// appends `"key":` to *out.
template <bool kEmit>
Scan WalkKey(const char** pp, const char* end, std::string* out) {
  const char* p = *pp;
  if (*p != '"') return Scan::kBad;
  const char* close;
  bool escaped;
  const Scan s = FindStringEnd(p + 1, end, &close, &escaped);
  if (s != Scan::kOk) return s;
  if constexpr (kEmit) {
    out->push_back('"');
    engine::json::AppendLiteralBody(out,
                                    std::string_view(p + 1, static_cast<size_t>(close - p - 1)));
    out->append("\":");
  }
  p = SkipSpace(close + 1, end);
  if (p >= end) return Scan::kNeedMore;
  if (*p != ':') return Scan::kBad;
  *pp = p + 1;
  return Scan::kOk;
}

// Walks one value; with kEmit it also appends the compact form to *out.
template <bool kEmit>
Scan Walk(const char* p, const char* end, const char** after, std::string* out) {
  char stack[kMaxDepth];
  int depth = 0;
  for (;;) {
    // At the start of a value.
    p = SkipSpace(p, end);
    if (p >= end) return Scan::kNeedMore;
    const char c = *p;
    if (c == '"') {
      const char* close;
      bool escaped;
      const Scan s = FindStringEnd(p + 1, end, &close, &escaped);
      if (s != Scan::kOk) return s;
      if constexpr (kEmit) {
        out->push_back('"');
        engine::json::AppendLiteralBody(
            out, std::string_view(p + 1, static_cast<size_t>(close - p - 1)));
        out->push_back('"');
      }
      p = close + 1;
    } else if (c == '{' || c == '[') {
      if (depth == kMaxDepth) return Scan::kBad;
      stack[depth++] = c == '{' ? '}' : ']';
      if constexpr (kEmit) out->push_back(c);
      ++p;
      p = SkipSpace(p, end);
      if (p >= end) return Scan::kNeedMore;
      if (*p == stack[depth - 1]) {
        if constexpr (kEmit) out->push_back(*p);
        ++p;
        --depth;
      } else {
        if (c == '{') {
          // A key, then ':', then the value.
          const Scan s = WalkKey<kEmit>(&p, end, out);
          if (s != Scan::kOk) return s;
        }
        continue;
      }
    } else {
      const char* q = p;
      while (q < end && IsScalarChar(*q)) ++q;
      if (q >= end) return Scan::kNeedMore;
      const std::string_view tok(p, static_cast<size_t>(q - p));
      const bool literal = tok == "true" || tok == "false" || tok == "null";
      const bool non_finite = IsNonFinite(tok);
      if (!literal && !non_finite && !IsNumber(tok)) return Scan::kBad;
      if constexpr (kEmit) {
        if (non_finite) {
          out->append("null");
        } else {
          out->append(tok);
        }
      }
      p = q;
    }
    // After a value: close containers, or move to the next element.
    for (;;) {
      if (depth == 0) {
        *after = p;
        return Scan::kOk;
      }
      p = SkipSpace(p, end);
      if (p >= end) return Scan::kNeedMore;
      const char closer = stack[depth - 1];
      if (*p == closer) {
        if constexpr (kEmit) out->push_back(closer);
        ++p;
        --depth;
        continue;
      }
      if (*p != ',') return Scan::kBad;
      ++p;
      p = SkipSpace(p, end);
      if (p >= end) return Scan::kNeedMore;
      if (*p == closer) continue;  // a trailing comma: tolerated, and dropped
      if constexpr (kEmit) out->push_back(',');
      if (closer == '}') {
        const Scan s = WalkKey<kEmit>(&p, end, out);
        if (s != Scan::kOk) return s;
      }
      break;
    }
  }
}

}  // namespace

Scan FindStringEnd(const char* p, const char* end, const char** close, bool* escaped) {
  bool esc = false;
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const unsigned mask = static_cast<unsigned>(
        _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash))));
    if (mask == 0) {
      p += 16;
      continue;
    }
    const char* hit = p + __builtin_ctz(mask);
    if (*hit == '"') {
      *close = hit;
      *escaped = esc;
      return Scan::kOk;
    }
    esc = true;
    p = hit + 2;  // skip the escaped byte
  }
#endif
  while (p < end) {
    const char c = *p;
    if (c == '"') {
      *close = p;
      *escaped = esc;
      return Scan::kOk;
    }
    if (c == '\\') {
      esc = true;
      p += 2;
      continue;
    }
    ++p;
  }
  return Scan::kNeedMore;
}

Scan SkipValue(const char* p, const char* end, const char** after) {
  return Walk<false>(p, end, after, nullptr);
}

void DecodeString(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    const char* bs = static_cast<const char*>(std::memchr(in.data() + i, '\\', in.size() - i));
    if (bs == nullptr) {
      out->append(in.data() + i, in.size() - i);
      break;
    }
    const size_t b = static_cast<size_t>(bs - in.data());
    out->append(in.data() + i, b - i);
    i = b + 1;
    if (i >= in.size()) {
      out->push_back('\\');
      break;
    }
    const char e = in[i++];
    switch (e) {
      case '"':
      case '\\':
      case '/':
        out->push_back(e);
        break;
      case 'b':
        out->push_back('\b');
        break;
      case 'f':
        out->push_back('\f');
        break;
      case 'n':
        out->push_back('\n');
        break;
      case 'r':
        out->push_back('\r');
        break;
      case 't':
        out->push_back('\t');
        break;
      case 'u': {
        const int hi = Hex4(in, i);
        if (hi < 0) {  // not an escape after all: keep it as written
          out->append("\\u");
          break;
        }
        i += 4;
        uint32_t cp = static_cast<uint32_t>(hi);
        if (cp >= 0xd800 && cp <= 0xdbff) {
          // A high surrogate must be followed by \u and a low one.
          const int lo =
              i + 1 < in.size() && in[i] == '\\' && in[i + 1] == 'u' ? Hex4(in, i + 2) : -1;
          if (lo >= 0xdc00 && lo <= 0xdfff) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (static_cast<uint32_t>(lo) - 0xdc00);
            i += 6;
          } else {
            cp = 0xfffd;
          }
        } else if (cp >= 0xdc00 && cp <= 0xdfff) {
          cp = 0xfffd;
        }
        AppendUtf8(cp, out);
        break;
      }
      default:  // an unknown escape is kept as written
        out->push_back('\\');
        out->push_back(e);
    }
  }
}

bool ParseMicrosToNanos(std::string_view s, int64_t* ns) {
  // Fast path: up to 15 integer digits and at most 3 fraction digits ("1412526048911",
  // "68.0", "1234.567"), which is what trace writers produce.
  {
    size_t i = 0;
    int64_t v = 0;
    while (i < s.size() && i < 15 && static_cast<unsigned>(s[i] - '0') < 10) {
      v = v * 10 + (s[i] - '0');
      ++i;
    }
    if (i > 0 && i == s.size()) {
      *ns = v * 1000;
      return true;
    }
    if (i > 0 && s[i] == '.' && s.size() - i - 1 <= 3 && s.size() - i - 1 >= 1) {
      int64_t frac = 0;
      size_t k = i + 1;
      for (; k < s.size() && static_cast<unsigned>(s[k] - '0') < 10; ++k) {
        frac = frac * 10 + (s[k] - '0');
      }
      if (k == s.size()) {
        for (size_t d = s.size() - i - 1; d < 3; ++d) frac *= 10;
        *ns = v * 1000 + frac;
        return true;
      }
    }
  }
  // value = digits × 10^exp10, digits without leading zeros (at most kMaxDigits kept).
  constexpr int kMaxDigits = 40;
  char digits[kMaxDigits];
  int n = 0;
  int64_t exp10 = 0;
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && s[i] == '-') {
    neg = true;
    ++i;
  }
  bool any = false;  // JSON numbers start with a digit
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    any = true;
    if (n == 0 && s[i] == '0') {
      // a leading zero
    } else if (n < kMaxDigits) {
      digits[n++] = s[i];
    } else {
      ++exp10;  // an integer digit beyond what we keep: only the magnitude matters (overflow)
    }
    ++i;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    const size_t f = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (n == 0 && s[i] == '0') {
        --exp10;
      } else if (n < kMaxDigits) {
        digits[n++] = s[i];
        --exp10;
      }
      ++i;
    }
    if (i == f) return false;
  }
  if (!any) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
    const size_t e = i;
    int64_t ev = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (ev < 100000) ev = ev * 10 + (s[i] - '0');
      ++i;
    }
    if (i == e) return false;
    exp10 += eneg ? -ev : ev;
  }
  if (i != s.size()) return false;
  if (n == 0) {
    *ns = 0;
    return true;
  }
  // ns = digits × 10^(exp10 + 3).
  const int64_t shift = exp10 + 3;
  __int128 v = 0;
  if (shift >= 0) {
    if (n + shift > 19) return false;
    for (int k = 0; k < n; ++k) v = v * 10 + (digits[k] - '0');
    for (int64_t k = 0; k < shift; ++k) v *= 10;
  } else {
    const int64_t keep = n + shift;  // digits at or above the nanosecond
    if (keep > 19) return false;
    for (int64_t k = 0; k < keep; ++k) v = v * 10 + (digits[k] - '0');
    if (keep >= 0 && keep < n && digits[keep] >= '5') ++v;  // round half away from zero
  }
  if (v > INT64_MAX) return false;
  *ns = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

bool ParseInt64(std::string_view s, int64_t* v) { return engine::ParseInt64(s, v); }

bool ParseDouble(std::string_view s, double* v) {
  if (!IsNumber(s)) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && ptr == s.data() + s.size();
}

std::optional<std::string> AsString(std::string_view value) {
  if (value.size() < 2 || value.front() != '"') return std::nullopt;
  const char* close;
  bool escaped;
  if (FindStringEnd(value.data() + 1, value.data() + value.size(), &close, &escaped) != Scan::kOk ||
      close != value.data() + value.size() - 1) {
    return std::nullopt;
  }
  const std::string_view inner = value.substr(1, value.size() - 2);
  if (!escaped) return std::string(inner);
  std::string out;
  DecodeString(inner, &out);
  return out;
}

std::optional<int64_t> AsInt(std::string_view value) {
  int64_t v;
  if (ParseInt64(value, &v)) return v;
  if (std::optional<std::string> s = AsString(value); s && ParseInt64(*s, &v)) return v;
  return std::nullopt;
}

bool ForEachMember(std::string_view object,
                   const std::function<bool(std::string_view key, std::string_view value)>& fn) {
  const char* p = object.data();
  const char* end = p + object.size();
  p = SkipSpace(p, end);
  if (p >= end || *p != '{') return false;
  ++p;
  std::string key;
  for (;;) {
    p = SkipSpace(p, end);
    if (p >= end) return false;
    if (*p == '}') return true;
    if (*p == ',') {  // between members, or a trailing comma
      ++p;
      continue;
    }
    if (*p != '"') return false;
    const char* close;
    bool escaped;
    if (FindStringEnd(p + 1, end, &close, &escaped) != Scan::kOk) return false;
    const std::string_view raw_key(p + 1, static_cast<size_t>(close - p - 1));
    if (escaped) {
      DecodeString(raw_key, &key);
    } else {
      key.assign(raw_key);
    }
    p = SkipSpace(close + 1, end);
    if (p >= end || *p != ':') return false;
    p = SkipSpace(p + 1, end);
    const char* after;
    if (SkipValue(p, end, &after) != Scan::kOk) {
      // A number that ends the span is complete here (the span is the whole object).
      return false;
    }
    if (!fn(key, std::string_view(p, static_cast<size_t>(after - p)))) return true;
    p = after;
  }
}

bool ForEachElement(std::string_view array, const std::function<bool(std::string_view value)>& fn) {
  const char* p = array.data();
  const char* end = p + array.size();
  p = SkipSpace(p, end);
  if (p >= end || *p != '[') return false;
  ++p;
  for (;;) {
    p = SkipSpace(p, end);
    if (p >= end) return false;
    if (*p == ']') return true;
    if (*p == ',') {
      ++p;
      continue;
    }
    const char* after;
    if (SkipValue(p, end, &after) != Scan::kOk) return false;
    if (!fn(std::string_view(p, static_cast<size_t>(after - p)))) return true;
    p = after;
  }
}

std::optional<std::string_view> FindMember(std::string_view object, std::string_view key) {
  std::optional<std::string_view> found;
  ForEachMember(object, [&](std::string_view k, std::string_view v) {
    if (k != key) return true;
    found = v;
    return false;
  });
  return found;
}

namespace {

// True when `v` (a container) is already in the compact form AppendCompactJson writes, as far as
// its bytes tell: no whitespace, control or non-ASCII byte (which strings may need re-escaped), no
// backslash (escapes are re-checked), no 'N' or 'I' (NaN, Infinity) and no ",}" or ",]" (a
// trailing comma). Such text, once validated, is copied as it is. Other text may still be
// compact: it takes the re-writing walk.
bool PlainCompact(std::string_view v) {
  const char* p = v.data();
  const char* end = p + v.size();
#if defined(__SSE2__)
  const __m128i low = _mm_set1_epi8(0x21);  // signed: controls, space and bytes >= 0x80
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i cap_n = _mm_set1_epi8('N');
  const __m128i cap_i = _mm_set1_epi8('I');
  for (; end - p >= 16; p += 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i bad =
        _mm_or_si128(_mm_or_si128(_mm_cmplt_epi8(x, low), _mm_cmpeq_epi8(x, backslash)),
                     _mm_or_si128(_mm_cmpeq_epi8(x, cap_n), _mm_cmpeq_epi8(x, cap_i)));
    if (_mm_movemask_epi8(bad) != 0) return false;
  }
#endif
  for (; p < end; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c < 0x21 || c >= 0x80 || c == '\\' || c == 'N' || c == 'I') return false;
  }
  for (const char* c = v.data(); c + 1 < end; ++c) {
    c = static_cast<const char*>(std::memchr(c, ',', static_cast<size_t>(end - c - 1)));
    if (c == nullptr) break;
    if (c[1] == '}' || c[1] == ']') return false;
  }
  return true;
}

}  // namespace

bool AppendCompactJson(std::string_view value, std::string* out) {
  const char* end = value.data() + value.size();
  const char* p = SkipSpace(value.data(), end);
  if (p >= end) return false;
  if ((*p == '{' || *p == '[') && PlainCompact(value)) {
    // Already compact: validate, then copy in one piece.
    const char* after;
    if (Walk<false>(p, end, &after, nullptr) != Scan::kOk || after != end) return false;
    out->append(value);
    return true;
  }
  if (*p != '{' && *p != '[' && *p != '"') {
    // A bare scalar: it runs to the end of the span (less trailing space).
    const char* q = p;
    while (q < end && IsScalarChar(*q)) ++q;
    if (SkipSpace(q, end) != end) return false;
    const std::string_view tok(p, static_cast<size_t>(q - p));
    if (IsNonFinite(tok)) {
      out->append("null");
      return true;
    }
    if (tok != "true" && tok != "false" && tok != "null" && !IsNumber(tok)) return false;
    out->append(tok);
    return true;
  }
  const char* after;
  return Walk<true>(p, end, &after, out) == Scan::kOk && SkipSpace(after, end) == end;
}

}  // namespace tracedb::query::json
