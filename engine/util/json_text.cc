// Fast JSON text. See json_text.h.
// Thread safety: pure functions over caller-owned buffers; the tables are constant.
#include "engine/util/json_text.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "engine/util/json_string.h"

namespace tracedb::engine::json {
namespace {

constexpr char kDigitPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

// Re-writes JSON text into `out`; see AppendObjectMembers.
class Rewriter {
 public:
  Rewriter(std::string_view text, std::string* out)
      : p_(reinterpret_cast<const unsigned char*>(text.data())),
        end_(p_ + text.size()),
        out_(out) {}

  bool TopObject(size_t* members) {
    SkipWs();
    if (!Eat('{')) return false;
    *members = 0;
    if (!Members(0, members)) return false;
    SkipWs();
    return p_ == end_;
  }

 private:
  static constexpr int kMaxDepth = 64;

  void SkipWs() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  bool Eat(unsigned char c) {
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  // After '{': the members and the closing '}' (which is not written).
  bool Members(int depth, size_t* count) {
    SkipWs();
    if (Eat('}')) return true;
    for (;;) {
      SkipWs();
      if (*count > 0) out_->push_back(',');
      if (!String()) return false;
      SkipWs();
      if (!Eat(':')) return false;
      out_->push_back(':');
      if (!Value(depth + 1)) return false;
      ++*count;
      SkipWs();
      if (Eat('}')) return true;
      if (!Eat(',')) return false;
    }
  }
  bool Value(int depth) {
    if (depth > kMaxDepth) return false;
    SkipWs();
    if (p_ >= end_) return false;
    switch (*p_) {
      case '{': {
        ++p_;
        out_->push_back('{');
        size_t n = 0;
        if (!Members(depth, &n)) return false;
        out_->push_back('}');
        return true;
      }
      case '[': {
        ++p_;
        out_->push_back('[');
        SkipWs();
        if (!Eat(']')) {
          for (bool first = true;; first = false) {
            if (!first) out_->push_back(',');
            if (!Value(depth + 1)) return false;
            SkipWs();
            if (Eat(']')) break;
            if (!Eat(',')) return false;
          }
        }
        out_->push_back(']');
        return true;
      }
      case '"':
        return String();
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        return Number();
    }
  }
  bool Literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() ||
        std::memcmp(p_, word.data(), word.size()) != 0) {
      return false;
    }
    p_ += word.size();
    out_->append(word);
    return true;
  }
  static bool Digit(unsigned char c) { return c >= '0' && c <= '9'; }
  bool Number() {
    const unsigned char* start = p_;
    Eat('-');
    if (p_ >= end_ || !Digit(*p_)) return false;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ < end_ && Digit(*p_)) ++p_;
    }
    if (Eat('.')) {
      if (p_ >= end_ || !Digit(*p_)) return false;
      while (p_ < end_ && Digit(*p_)) ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (!Eat('+')) Eat('-');
      if (p_ >= end_ || !Digit(*p_)) return false;
      while (p_ < end_ && Digit(*p_)) ++p_;
    }
    out_->append(reinterpret_cast<const char*>(start), static_cast<size_t>(p_ - start));
    return true;
  }
  static bool Hex(unsigned char c) {
    return Digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  }
  // A string literal: valid escapes are kept, raw control characters escaped, ill-formed UTF-8
  // replaced.
  bool String() {
    if (!Eat('"')) return false;
    out_->push_back('"');
    const unsigned char* run = p_;
    auto flush = [&] {
      if (p_ > run) {
        const size_t at = out_->size();
        out_->resize(at + 6 * static_cast<size_t>(p_ - run));
        char* e =
            engine::WriteJsonStringBody(out_->data() + at, run, static_cast<size_t>(p_ - run));
        out_->resize(static_cast<size_t>(e - out_->data()));
      }
    };
    while (p_ < end_) {
      const unsigned char c = *p_;
      if (c == '"') {
        flush();
        ++p_;
        out_->push_back('"');
        return true;
      }
      if (c != '\\') {
        ++p_;
        continue;
      }
      flush();
      if (end_ - p_ < 2) return false;
      const unsigned char e = p_[1];
      size_t len = 2;
      if (e == 'u') {
        if (end_ - p_ < 6 || !Hex(p_[2]) || !Hex(p_[3]) || !Hex(p_[4]) || !Hex(p_[5])) {
          return false;
        }
        len = 6;
      } else if (std::strchr("\"\\/bfnrt", e) == nullptr || e == 0) {
        return false;
      }
      out_->append(reinterpret_cast<const char*>(p_), len);
      p_ += len;
      run = p_;
    }
    return false;  // unterminated
  }

  const unsigned char* p_;
  const unsigned char* end_;
  std::string* out_;
};

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

}  // namespace

void AppendLiteralBody(std::string* out, std::string_view in) {
  size_t run = 0;  // start of the pending run of bytes without a backslash
  auto flush = [&](size_t to) {
    if (to <= run) return;
    const size_t at = out->size();
    out->resize(at + 6 * (to - run));
    char* e = engine::WriteJsonStringBody(
        out->data() + at, reinterpret_cast<const unsigned char*>(in.data()) + run, to - run);
    out->resize(static_cast<size_t>(e - out->data()));
  };
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\\') continue;
    flush(i);
    const char n = i + 1 < in.size() ? in[i + 1] : '\0';
    const bool valid = n == '"' || n == '\\' || n == '/' || n == 'b' || n == 'f' || n == 'n' ||
                       n == 'r' || n == 't' ||
                       (n == 'u' && i + 6 <= in.size() && IsHex(in[i + 2]) && IsHex(in[i + 3]) &&
                        IsHex(in[i + 4]) && IsHex(in[i + 5]));
    if (valid) {  // kept; a \u escape's four digits follow as plain bytes
      out->push_back('\\');
      out->push_back(n);
      ++i;
    } else {
      out->append("\\\\");
    }
    run = i + 1;
  }
  flush(in.size());
}

char* WriteString(char* p, std::string_view s) {
  *p++ = '"';
  p = engine::WriteJsonStringBody(p, reinterpret_cast<const unsigned char*>(s.data()), s.size());
  *p++ = '"';
  return p;
}

void AppendString(std::string* out, std::string_view s) {
  const size_t at = out->size();
  out->resize(at + MaxStringLiteral(s.size()));
  char* e = WriteString(out->data() + at, s);
  out->resize(static_cast<size_t>(e - out->data()));
}

char* WriteUint(char* p, uint64_t v) {
  char tmp[20];
  char* t = tmp + sizeof(tmp);
  while (v >= 100) {
    const auto pair = static_cast<size_t>(v % 100) * 2;
    v /= 100;
    *--t = kDigitPairs[pair + 1];
    *--t = kDigitPairs[pair];
  }
  if (v >= 10) {
    const auto pair = static_cast<size_t>(v) * 2;
    *--t = kDigitPairs[pair + 1];
    *--t = kDigitPairs[pair];
  } else {
    *--t = static_cast<char>('0' + v);
  }
  const auto n = static_cast<size_t>(tmp + sizeof(tmp) - t);
  std::memcpy(p, t, n);
  return p + n;
}

char* WriteInt(char* p, int64_t v) {
  if (v < 0) {
    *p++ = '-';
    return WriteUint(p, ~static_cast<uint64_t>(v) + 1);
  }
  return WriteUint(p, static_cast<uint64_t>(v));
}

char* WriteMicros(char* p, int64_t ns) {
  uint64_t u;
  if (ns < 0) {
    *p++ = '-';
    u = ~static_cast<uint64_t>(ns) + 1;
  } else {
    u = static_cast<uint64_t>(ns);
  }
  p = WriteUint(p, u / 1000);
  const auto frac = static_cast<unsigned>(u % 1000);
  if (frac != 0) {
    *p++ = '.';
    *p++ = static_cast<char>('0' + frac / 100);
    const unsigned rest = frac % 100;
    if (rest != 0) {
      *p++ = static_cast<char>('0' + rest / 10);
      if (rest % 10 != 0) *p++ = static_cast<char>('0' + rest % 10);
    }
  }
  return p;
}

char* WriteDouble(char* p, double v) {
  if (v == 0) {  // also -0.0, which JSON readers would keep as a float anyway
    *p++ = '0';
    return p;
  }
  return std::to_chars(p, p + kMaxDouble, v).ptr;
}

std::string String(std::string_view s) {
  std::string out;
  AppendString(&out, s);
  return out;
}

std::string Number(double v) {
  std::string out;
  AppendNumber(&out, v);
  return out;
}

namespace {

// Whole numbers up to 2^53 in integer digits (to_chars' shortest form would write 1000000 as
// "1e+06"); everything else in the shortest exact form.
char* WriteExactDouble(char* p, double v) {
  constexpr double kExactInts = 9007199254740992.0;  // 2^53
  if (std::fabs(v) < kExactInts && v == std::trunc(v)) {
    return WriteInt(p, static_cast<int64_t>(v));
  }
  return WriteDouble(p, v);
}

}  // namespace

void AppendNumber(std::string* out, double v) {
  if (!std::isfinite(v)) {
    out->append("null");
    return;
  }
  char buf[kMaxDouble];
  out->append(buf, WriteExactDouble(buf, v));
}

std::string DoubleText(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[kMaxDouble];
  return std::string(buf, WriteExactDouble(buf, v));
}

bool AppendObjectMembers(std::string* out, std::string_view text, size_t* members) {
  const size_t before = out->size();
  Rewriter r(text, out);
  if (!r.TopObject(members)) {
    out->resize(before);
    *members = 0;
    return false;
  }
  return true;
}

}  // namespace tracedb::engine::json
