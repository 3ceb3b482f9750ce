// The NCCL event mask of the tracedb profiler plugin: parsing TRACEDB_NCCL_EVENTS, and the
// packing of a task's descriptor fields (datatype, algorithm, protocol, channels) into the
// event's `tag` argument, as the views decode it (docs/gpu-capture.md "Fields").
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tracedb::nccl {

// Events recorded when TRACEDB_NCCL_EVENTS is unset: the API calls (v5), groups, tasks, the
// proxy ops and kernel channels that give each task its real completion.
extern const int kDefaultEventMask;

// Parses TRACEDB_NCCL_EVENTS: a number (decimal or 0x hex) or a comma/plus separated list of
// names (group, coll, p2p, proxyop, proxystep, proxyctrl, kernelch, netplugin, groupapi,
// collapi, p2papi, kernellaunch, default, all; case-insensitive). Returns false and names the
// bad word in *error for anything else.
bool ParseEventMask(std::string_view text, int* mask, std::string* error);

// Small codes for the strings NCCL passes (0: unknown or absent).
uint32_t DatatypeCode(const char* s);  // ncclInt8 = 1 ... ncclFloat8e5m2 = 12
uint32_t AlgoCode(const char* s);      // TREE 1, RING 2, COLLNET_DIRECT 3, COLLNET_CHAIN 4, NVLS 5,
                                       // NVLS_TREE 6, PAT 7
uint32_t ProtoCode(const char* s);     // LL 1, LL128 2, SIMPLE 3
// Bytes per element of a datatype code (0 when unknown).
uint32_t DatatypeSize(uint32_t code);

// The tag of a task event: datatype | algo << 8 | proto << 12 | channels << 16 | warps << 24.
// Always non-negative as an int32 (warps are capped at 127).
int32_t PackTaskTag(uint32_t datatype, uint32_t algo, uint32_t proto, uint32_t channels,
                    uint32_t warps);

}  // namespace tracedb::nccl
