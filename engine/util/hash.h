// The project's hashes. Fibonacci hashing: the one multiplicative hash of integer keys (ids,
// pointers, pairs) that the open-addressing tables of the engine, the importers and the
// recorder's interposers use; the product's high bits are well mixed: take them
// (h >> (64 - bits)), not the low ones. StringViewHash: the transparent hash of string keys, so
// that a std::unordered_map<std::string, V, StringViewHash, std::equal_to<>> is searched with a
// std::string_view without building a std::string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

namespace tracedb::engine {

// 2^64 / golden ratio, odd.
inline constexpr uint64_t kFibonacciMultiplier = 0x9E3779B97F4A7C15ull;

inline constexpr uint64_t FibonacciHash(uint64_t key) { return key * kFibonacciMultiplier; }

struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

}  // namespace tracedb::engine
