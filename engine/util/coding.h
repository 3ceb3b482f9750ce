// Byte-level codecs shared by every on-disk structure: little-endian fixed-width integers,
// LEB128 varints, zigzag for signed values, and a bounds-checked Reader over a byte span.
//
// Writers append to a std::string. Readers never read past their span: every Get* returns false
// on truncation or an over-long varint, and the caller turns that into a Corruption error.
// Thread safety: none needed (no shared state). Format: docs/segment-format.md, section
// "Encodings".
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "engine/util/saturating.h"  // SaturatingAdd/Sub, which coding.h's users take from here

namespace tracedb::engine {

// Two's-complement wrap-around arithmetic on int64: what decoders use on values read from disk,
// so that hostile input gives wrong numbers (rejected or stored as they come), never undefined
// behaviour. Encoders use the same, so a value round-trips exactly whatever its range.
inline int64_t WrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t WrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t WrapMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
// Converts a double to int64 (truncating toward zero); false when it is NaN or out of range,
// where a plain cast would be undefined behaviour.
inline bool DoubleToInt64(double d, int64_t* out) {
  // 2^63 is exactly representable; every double below it in magnitude converts.
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return false;
  *out = static_cast<int64_t>(d);
  return true;
}

inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

inline void PutFixed16(std::string* dst, uint16_t v) {
  char b[2] = {static_cast<char>(v), static_cast<char>(v >> 8)};
  dst->append(b, 2);
}
inline void PutFixed32(std::string* dst, uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);  // little-endian hosts only (static_assert in coding.cc)
  dst->append(b, 4);
}
inline void PutFixed64(std::string* dst, uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  dst->append(b, 8);
}
inline void EncodeFixed32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }
inline void EncodeFixed64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }
inline uint32_t DecodeFixed32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t DecodeFixed64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint16_t DecodeFixed16(const char* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Varints of up to 8 bytes (values below 2^56) read without a loop: the bytes' 7-bit groups
// gathered by three mask-and-shift steps. Varint lengths vary from value to value (time deltas,
// durations): a byte-at-a-time loop mispredicts its exit. (The same trick for writing measured
// slower than the loop in compaction, so writers keep the loop.)
inline uint64_t GatherVarintGroups(uint64_t x) {  // x: bytes with their top bits cleared
  x = (x & 0x007f007f007f007full) | ((x & 0x7f007f007f007f00ull) >> 1);
  x = (x & 0x00003fff00003fffull) | ((x & 0x3fff00003fff0000ull) >> 2);
  return (x & 0x000000000fffffffull) | ((x & 0x0fffffff00000000ull) >> 4);
}

// Writes the varint of v at p (which must have 10 bytes of room); returns the end.
inline char* EncodeVarint64(char* p, uint64_t v) {
  auto* u = reinterpret_cast<unsigned char*>(p);
  while (v >= 0x80) {
    *u++ = static_cast<unsigned char>(v | 0x80);
    v >>= 7;
  }
  *u++ = static_cast<unsigned char>(v);
  return reinterpret_cast<char*>(u);
}
inline void PutVarint64(std::string* dst, uint64_t v) {
  char buf[10];
  char* end = EncodeVarint64(buf, v);
  dst->append(buf, end - buf);
}
inline void PutVarsigned(std::string* dst, int64_t v) { PutVarint64(dst, ZigZag(v)); }
inline void PutLengthPrefixed(std::string* dst, std::string_view s) {
  PutVarint64(dst, s.size());
  dst->append(s.data(), s.size());
}
inline int VarintLength(uint64_t v) {
  int n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// A growable byte buffer with unchecked appends after Reserve(). Faster than std::string::append
// for the many 1-to-10-byte writes of column encoding.
class ByteBuf {
 public:
  void Clear() { len_ = 0; }
  size_t size() const { return len_; }
  const char* data() const { return buf_.data(); }
  std::string_view view() const { return std::string_view(buf_.data(), len_); }
  void Reserve(size_t extra) {
    if (buf_.size() - len_ < extra) buf_.resize(std::max(buf_.size() * 2, len_ + extra + 256));
  }
  // The Put* calls below require Reserve() of enough room first.
  void PutU8(uint8_t v) { buf_[len_++] = static_cast<char>(v); }
  void PutVarint(uint64_t v) {
    len_ = static_cast<size_t>(EncodeVarint64(&buf_[len_], v) - buf_.data());
  }
  void PutFixed64(uint64_t v) {
    EncodeFixed64(&buf_[len_], v);
    len_ += 8;
  }
  void PutBytes(const char* p, size_t n) {
    std::memcpy(&buf_[len_], p, n);
    len_ += n;
  }

 private:
  std::string buf_;
  size_t len_ = 0;
};

// The number of significant bits of v (0 for 0).
inline int BitLength(uint64_t v) { return v == 0 ? 0 : 64 - __builtin_clzll(v); }

// Appends bit fields to a std::string, least significant bit first (a field's bit 0 follows the
// previous field's last bit). Finish() pads the last byte with zeros.
class BitWriter {
 public:
  explicit BitWriter(std::string* dst) : dst_(dst) {}
  // Appends the low `bits` bits of v (0 <= bits <= 64; the bits above must be zero).
  void Put(uint64_t v, int bits) {
    if (bits == 0) return;
    acc_ |= v << used_;  // used_ < 64 always
    if (used_ + bits < 64) {
      used_ += bits;
      return;
    }
    char b[8];
    EncodeFixed64(b, acc_);
    dst_->append(b, 8);
    const int spill = used_ + bits - 64;  // bits of v not yet in the written word
    acc_ = used_ == 0 ? 0 : v >> (64 - used_);
    used_ = spill;
  }
  void Finish() {
    for (int i = 0; i < used_; i += 8) dst_->push_back(static_cast<char>(acc_ >> i));
    acc_ = 0;
    used_ = 0;
  }

 private:
  std::string* dst_;
  uint64_t acc_ = 0;
  int used_ = 0;
};

// Reads what BitWriter wrote (an LSB-first bit stream), never past its span: Get() and Skip()
// return false when the field would run past the end. Peek() is a window on the next (up to) 57
// bits, zeros past the end, for decoders that look before they take (block_column_codec.cc).
class BitReader {
 public:
  explicit BitReader(std::string_view s) : p_(s.data()), size_(s.size()) {}
  // Up to 64 bits.
  bool Get(int bits, uint64_t* v) {
    if (bits == 0) {
      *v = 0;
      return true;
    }
    if (static_cast<uint64_t>(bits) > size_ * 8 - pos_) return false;
    if (bits <= 56) {
      *v = Peek() & (~0ull >> (64 - bits));
      pos_ += static_cast<uint64_t>(bits);
      return true;
    }
    const uint64_t lo = Peek() & 0xffffffffu;
    pos_ += 32;
    *v = lo | ((Peek() & (~0ull >> (96 - bits))) << 32);
    pos_ += static_cast<uint64_t>(bits - 32);
    return true;
  }
  // Takes `bits` bits only when there are that many.
  bool Skip(int bits) {
    if (static_cast<uint64_t>(bits) > size_ * 8 - pos_) return false;
    pos_ += static_cast<uint64_t>(bits);
    return true;
  }
  // The (up to) 57 bits from the position on, zeros past the end.
  uint64_t Peek() const {
    const size_t byte = static_cast<size_t>(pos_ >> 3);
    uint64_t w = 0;
    if (size_ - byte >= 8) {
      w = DecodeFixed64(p_ + byte);
    } else if (byte < size_) {
      char b[8] = {};
      std::memcpy(b, p_ + byte, size_ - byte);
      w = DecodeFixed64(b);
    }
    return w >> (pos_ & 7);
  }
  uint64_t pos() const { return pos_; }
  // REQUIRES: pos <= the stream's bits.
  void Seek(uint64_t pos) { pos_ = pos; }
  // Bits left, and whether only the zero padding of the last byte remains.
  uint64_t remaining_bits() const { return size_ * 8 - pos_; }
  bool at_end() const {
    const uint64_t rem = size_ * 8 - pos_;
    if (rem >= 8) return false;
    return rem == 0 || (static_cast<unsigned char>(p_[size_ - 1]) >> (pos_ & 7)) == 0;
  }

 private:
  const char* p_;
  size_t size_;
  uint64_t pos_ = 0;
};

// A bounds-checked cursor over bytes read from disk. Every getter returns false (and leaves the
// output unspecified) when the data is short or malformed; nothing here asserts on input.
class Reader {
 public:
  Reader() = default;
  Reader(const char* data, size_t size) : p_(data), end_(data + size), begin_(data) {}
  explicit Reader(std::string_view s) : Reader(s.data(), s.size()) {}

  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  size_t offset() const { return static_cast<size_t>(p_ - begin_); }
  bool empty() const { return p_ == end_; }
  const char* data() const { return p_; }

  bool GetU8(uint8_t* v) {
    if (p_ == end_) return false;
    *v = static_cast<uint8_t>(*p_++);
    return true;
  }
  bool GetFixed16(uint16_t* v) {
    if (remaining() < 2) return false;
    *v = DecodeFixed16(p_);
    p_ += 2;
    return true;
  }
  bool GetFixed32(uint32_t* v) {
    if (remaining() < 4) return false;
    *v = DecodeFixed32(p_);
    p_ += 4;
    return true;
  }
  bool GetFixed64(uint64_t* v) {
    if (remaining() < 8) return false;
    *v = DecodeFixed64(p_);
    p_ += 8;
    return true;
  }
  bool GetVarint64(uint64_t* v) {
    // Fast path: a varint of at most 8 bytes with 8 bytes to read, without a loop.
    if (end_ - p_ >= 8) {
      uint64_t w;
      std::memcpy(&w, p_, 8);
      const uint64_t stops = ~w & 0x8080808080808080ull;  // bit 7 clear: the last byte
      if (stops != 0) {
        const uint64_t keep = stops ^ (stops - 1);  // the bits up to that byte's bit 7
        *v = GatherVarintGroups(w & keep & 0x7f7f7f7f7f7f7f7full);
        p_ += (__builtin_ctzll(stops) >> 3) + 1;
        return true;
      }
    }
    // Near the end of the span, or a varint of 9 or 10 bytes.
    if (p_ != end_ && static_cast<unsigned char>(*p_) < 0x80) {
      *v = static_cast<unsigned char>(*p_++);
      return true;
    }
    uint64_t result = 0;
    for (int shift = 0; shift <= 63 && p_ != end_; shift += 7) {
      uint64_t byte = static_cast<unsigned char>(*p_++);
      if (shift == 63 && byte > 1) return false;  // overflows 64 bits
      result |= (byte & 0x7f) << shift;
      if (byte < 0x80) {
        *v = result;
        return true;
      }
    }
    return false;
  }
  bool GetVarint32(uint32_t* v) {
    uint64_t x;
    if (!GetVarint64(&x) || x > 0xffffffffu) return false;
    *v = static_cast<uint32_t>(x);
    return true;
  }
  bool GetVarsigned(int64_t* v) {
    uint64_t x;
    if (!GetVarint64(&x)) return false;
    *v = UnZigZag(x);
    return true;
  }
  bool GetBytes(size_t n, std::string_view* out) {
    if (remaining() < n) return false;
    *out = std::string_view(p_, n);
    p_ += n;
    return true;
  }
  bool GetLengthPrefixed(std::string_view* out) {
    uint64_t n;
    if (!GetVarint64(&n) || n > remaining()) return false;
    return GetBytes(static_cast<size_t>(n), out);
  }
  bool Skip(size_t n) {
    if (remaining() < n) return false;
    p_ += n;
    return true;
  }

 private:
  const char* p_ = nullptr;
  const char* end_ = nullptr;
  const char* begin_ = nullptr;
};

}  // namespace tracedb::engine
