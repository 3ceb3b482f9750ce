// CRC-32C (Castagnoli, polynomial 0x82F63B78, reflected), as used by iSCSI, ext4 and leveldb.
// Uses the SSE4.2 crc32 instruction when the CPU has it, else a slicing-by-8 table.
// Thread safety: pure functions; the table is built once, thread-safely.
// Format: docs/segment-format.md, section "Checksums".
#pragma once

#include <cstddef>
#include <cstdint>

namespace tracedb::engine {

// Returns the CRC-32C of data[0, n) continued from `init` (0 for a fresh CRC).
uint32_t Crc32c(const void* data, size_t n, uint32_t init = 0);

// The CRC-32C of A followed by B, from crc_a = Crc32c(A), crc_b = Crc32c(B) and len_b = |B|,
// without reading the bytes: O(log len_b). (CRCs are linear over GF(2): appending B multiplies
// A's remainder by x^(8 len_b) modulo the polynomial.)
uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

}  // namespace tracedb::engine
