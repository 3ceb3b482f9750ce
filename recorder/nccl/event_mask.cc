// TRACEDB_NCCL_EVENTS parsing and task-field codes. See event_mask.h.
#include "recorder/nccl/event_mask.h"

#include <cstdlib>

#include "recorder/nccl/profiler_abi.h"

namespace tracedb::nccl {

const int kDefaultEventMask =
    kGroup | kColl | kP2p | kProxyOp | kKernelCh | kGroupApi | kCollApi | kP2pApi | kKernelLaunch;

namespace {

struct NamedBit {
  const char* name;
  int bits;
};
constexpr NamedBit kNames[] = {
    {"group", kGroup},
    {"coll", kColl},
    {"p2p", kP2p},
    {"proxyop", kProxyOp},
    {"proxystep", kProxyStep},
    {"proxyctrl", kProxyCtrl},
    {"kernelch", kKernelCh},
    {"netplugin", kNetPlugin},
    {"groupapi", kGroupApi},
    {"collapi", kCollApi},
    {"p2papi", kP2pApi},
    {"kernellaunch", kKernelLaunch},
    {"all", (1 << 12) - 1},
    {"default", 0 /* kDefaultEventMask */},
};

bool EqualsNoCase(std::string_view a, const char* b) {
  size_t i = 0;
  for (; i < a.size() && b[i]; ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (x != y) return false;
  }
  return i == a.size() && b[i] == 0;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Index + 1 of `s` in `table` compared without case and ignoring '_', else 0.
uint32_t Lookup(const char* s, const char* const* table, size_t n) {
  if (s == nullptr) return 0;
  for (size_t i = 0; i < n; ++i) {
    const char* a = s;
    const char* b = table[i];
    for (;;) {
      while (*a == '_') ++a;
      while (*b == '_') ++b;
      char x = *a, y = *b;
      if (x >= 'a' && x <= 'z') x = static_cast<char>(x - 'a' + 'A');
      if (y >= 'a' && y <= 'z') y = static_cast<char>(y - 'a' + 'A');
      if (x != y) break;
      if (x == 0) return static_cast<uint32_t>(i + 1);
      ++a;
      ++b;
    }
  }
  return 0;
}

}  // namespace

bool ParseEventMask(std::string_view text, int* mask, std::string* error) {
  text = Trim(text);
  if (text.empty()) {
    *mask = kDefaultEventMask;
    return true;
  }
  if (text[0] >= '0' && text[0] <= '9') {
    const std::string s(text);
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 0);
    if (end == s.c_str() || *end != 0 || v < 0 || v > 0x7fffffffL) {
      if (error) *error = "TRACEDB_NCCL_EVENTS: not a mask: '" + s + "'";
      return false;
    }
    *mask = static_cast<int>(v);
    return true;
  }
  int m = 0;
  while (!text.empty()) {
    size_t cut = text.find_first_of(",+|");
    std::string_view word = Trim(text.substr(0, cut));
    text = cut == std::string_view::npos ? std::string_view() : text.substr(cut + 1);
    if (word.empty()) continue;
    bool found = false;
    for (const NamedBit& n : kNames) {
      if (EqualsNoCase(word, n.name)) {
        m |= n.bits == 0 ? kDefaultEventMask : n.bits;
        found = true;
        break;
      }
    }
    if (!found) {
      if (error) {
        *error = "TRACEDB_NCCL_EVENTS: unknown event '" + std::string(word) +
                 "' (group, coll, p2p, proxyop, proxystep, proxyctrl, kernelch, netplugin, "
                 "groupapi, collapi, p2papi, kernellaunch, default, all)";
      }
      return false;
    }
  }
  *mask = m;
  return true;
}

uint32_t DatatypeCode(const char* s) {
  static const char* const kTypes[] = {"ncclInt8",     "ncclUint8",      "ncclInt32",
                                       "ncclUint32",   "ncclInt64",      "ncclUint64",
                                       "ncclFloat16",  "ncclFloat32",    "ncclFloat64",
                                       "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  return Lookup(s, kTypes, sizeof(kTypes) / sizeof(kTypes[0]));
}

uint32_t DatatypeSize(uint32_t code) {
  static const uint8_t kSizes[] = {0, 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return code < sizeof(kSizes) ? kSizes[code] : 0;
}

uint32_t AlgoCode(const char* s) {
  static const char* const kAlgos[] = {"Tree",     "Ring", "CollNetDirect", "CollNetChain", "NVLS",
                                       "NVLSTree", "PAT"};
  return Lookup(s, kAlgos, sizeof(kAlgos) / sizeof(kAlgos[0]));
}

uint32_t ProtoCode(const char* s) {
  static const char* const kProtos[] = {"LL", "LL128", "Simple"};
  return Lookup(s, kProtos, sizeof(kProtos) / sizeof(kProtos[0]));
}

int32_t PackTaskTag(uint32_t datatype, uint32_t algo, uint32_t proto, uint32_t channels,
                    uint32_t warps) {
  if (warps > 127) warps = 127;
  return static_cast<int32_t>((datatype & 0xff) | (algo & 0xf) << 8 | (proto & 0xf) << 12 |
                              (channels & 0xff) << 16 | warps << 24);
}

}  // namespace tracedb::nccl
