// Fibonacci hashing: the one multiplicative hash of integer keys (ids, pointers, pairs) that the
// open-addressing tables of the engine, the importers and the recorder's interposers use. The
// product's high bits are well mixed; take them (h >> (64 - bits)), not the low ones.
#pragma once

#include <cstdint>

namespace tracedb::engine {

// 2^64 / golden ratio, odd.
inline constexpr uint64_t kFibonacciMultiplier = 0x9E3779B97F4A7C15ull;

inline constexpr uint64_t FibonacciHash(uint64_t key) { return key * kFibonacciMultiplier; }

}  // namespace tracedb::engine
