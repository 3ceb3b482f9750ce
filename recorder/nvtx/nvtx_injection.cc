// libtracedb_nvtx.so: an NVTX v3 injection library. An application that uses NVTX (the header-only
// nvtx3/nvToolsExt.h: PyTorch's emit_nvtx, Megatron, NCCL's own ranges) and runs with
// NVTX_INJECTION64_PATH=/path/libtracedb_nvtx.so loads it on its first NVTX call; NVTX then calls
// InitializeInjectionNvtx2, which fills NVTX's callback tables with the functions below. They
// record through the recorder's C ABI (tracedb/recorder.h):
//   - push/pop ranges: spans on the calling thread's track (begin/end, so they nest with every
//     other span of the thread);
//   - start/end ranges (may end on another thread, may overlap): spans on lanes
//     "nvtx <domain> ranges #<row>", each range taking the lowest row free when it starts, so that
//     ranges on one row never overlap;
//   - marks: instants on the thread's track; a mark with a numeric payload is a counter;
//   - domains: events of a domain other than the default one are named "<domain>: <message>";
//     registered strings, ASCII and wide messages; the category (when set) goes in `tag`;
//   - nvtxNameOsThread of the calling thread names its track.
// docs/gpu-capture.md "NVTX".
// Thread safety: every callback may run on any thread at once. Names are interned through a
// per-thread cache keyed by content (NVTX messages are often built per call, so their address
// says nothing); domains and registered strings live until the process exits.
#include <sys/syscall.h>
#include <unistd.h>
#include <wchar.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#define NVTX_NO_IMPL
#include "nvtx3/nvToolsExt.h"
#include "tracedb/recorder.h"

namespace tracedb::nvtx {
namespace {

constexpr int kRows = 64;  // start/end range rows per domain

struct Domain {
  std::string name;  // "" for the default domain
  std::atomic<uint32_t> row_lanes[kRows] = {};
  std::atomic<uint8_t> row_busy[kRows] = {};
};

struct RegisteredString {
  std::string text;
};

// A start/end range in flight; its id (nvtxRangeId_t) is its address.
struct OpenRange {
  Domain* domain;
  uint32_t name;
  int32_t category;
  int row;
  uint32_t lane;
  int64_t start;
};

Domain g_default;
std::atomic<uint64_t> g_overflow_rows{0};

// ---- strings ----

void AppendUtf8(std::string* out, uint32_t c) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | c >> 6));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | c >> 12));
    out->push_back(static_cast<char>(0x80 | (c >> 6 & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x110000) {
    out->push_back(static_cast<char>(0xF0 | c >> 18));
    out->push_back(static_cast<char>(0x80 | (c >> 12 & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c >> 6 & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->append("\xEF\xBF\xBD");  // U+FFFD
  }
}

std::string FromWide(const wchar_t* w) {
  std::string s;
  if (w == nullptr) return s;
  for (; *w; ++w) AppendUtf8(&s, static_cast<uint32_t>(*w));
  return s;
}

// The id of `domain`-qualified `text`, through a per-thread cache (bounded: cleared when full).
uint32_t Intern(const Domain* domain, std::string_view text) {
  thread_local std::unordered_map<std::string, uint32_t>* cache = nullptr;
  thread_local std::string key;
  if (cache == nullptr) {
    cache = new (std::nothrow) std::unordered_map<std::string, uint32_t>;
    if (cache == nullptr) return 0;
  }
  key.clear();
  if (domain != nullptr && !domain->name.empty()) {
    key.append(domain->name).append(": ");
  }
  key.append(text);
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  if (cache->size() >= 8192) cache->clear();
  const uint32_t id = tracedb_intern(key.c_str());
  cache->emplace(key, id);
  return id;
}

uint32_t NameOf(const Domain* d, const nvtxEventAttributes_t* a) {
  if (a == nullptr) return Intern(d, "");
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return Intern(d, a->message.ascii != nullptr ? a->message.ascii : "");
    case NVTX_MESSAGE_TYPE_UNICODE:
      return Intern(d, FromWide(a->message.unicode));
    case NVTX_MESSAGE_TYPE_REGISTERED: {
      const auto* s = reinterpret_cast<const RegisteredString*>(a->message.registered);
      return Intern(d, s != nullptr ? std::string_view(s->text) : std::string_view());
    }
    default:
      return Intern(d, "");
  }
}

// `tag` carries the NVTX category when one is set.
const tracedb_args* CategoryArgs(const nvtxEventAttributes_t* a, tracedb_args* args) {
  if (a == nullptr || a->category == 0) return nullptr;
  args->fields = TRACEDB_ARG_TAG;
  args->tag = static_cast<int32_t>(a->category);
  return args;
}

Domain* DomainOf(nvtxDomainHandle_t h) {
  return h != nullptr ? reinterpret_cast<Domain*>(h) : &g_default;
}

// ---- push/pop: the thread's own track ----

thread_local int t_depth = 0;
// Bit d: the push at depth d was recorded (recording may start or stop between a push and its
// pop, e.g. at the edge of the step window; a pop then ends only what was begun).
thread_local uint64_t t_begun = 0;

int Push(const Domain* d, uint32_t name, const tracedb_args* args) {
  const bool on = TRACEDB_ACTIVE();
  if (on) tracedb_begin_ex(name, TRACEDB_CAT_USER, 0, args);
  if (t_depth < 64) {
    const uint64_t bit = uint64_t{1} << t_depth;
    t_begun = on ? (t_begun | bit) : (t_begun & ~bit);
  }
  return t_depth++;
}

int Pop() {
  if (t_depth == 0) return -1;  // NVTX: pop without push
  --t_depth;
  if (t_depth >= 64 || (t_begun >> t_depth & 1) != 0) {
    tracedb_end_ex(0, TRACEDB_CAT_USER, 0, nullptr);
  }
  return t_depth;
}

// ---- start/end: rows of lanes ----

uint32_t RowLane(Domain* d, int row) {
  uint32_t lane = d->row_lanes[row].load(std::memory_order_acquire);
  if (lane != 0) return lane;
  std::string name = "nvtx ";
  name += d->name.empty() ? "default" : d->name;
  name += " ranges #" + std::to_string(row);
  lane = tracedb_lane(name.c_str());
  d->row_lanes[row].store(lane, std::memory_order_release);
  return lane;
}

nvtxRangeId_t StartRange(Domain* d, uint32_t name, const nvtxEventAttributes_t* a) {
  if (!TRACEDB_ACTIVE()) return 0;
  auto* r = new (std::nothrow) OpenRange;
  if (r == nullptr) return 0;
  r->domain = d;
  r->name = name;
  r->category = a != nullptr ? static_cast<int32_t>(a->category) : 0;
  r->row = kRows - 1;
  for (int i = 0; i < kRows; ++i) {
    uint8_t expected = 0;
    if (d->row_busy[i].compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      r->row = i;
      break;
    }
    if (i == kRows - 1)
      g_overflow_rows.fetch_add(1, std::memory_order_relaxed);  // shares the last row
  }
  r->lane = RowLane(d, r->row);
  r->start = tracedb_now();
  return static_cast<nvtxRangeId_t>(reinterpret_cast<uintptr_t>(r));
}

void EndRange(nvtxRangeId_t id) {
  if (id == 0) return;
  auto* r = reinterpret_cast<OpenRange*>(static_cast<uintptr_t>(id));
  const int64_t now = tracedb_now();
  tracedb_args args;
  args.fields = 0;
  if (r->category != 0) {
    args.fields = TRACEDB_ARG_TAG;
    args.tag = r->category;
  }
  tracedb_complete_ex(r->name, TRACEDB_CAT_USER, r->lane, r->start, now - r->start,
                      args.fields ? &args : nullptr);
  r->domain->row_busy[r->row].store(0, std::memory_order_release);
  delete r;
}

// ---- marks ----

void Mark(const Domain* d, const nvtxEventAttributes_t* a) {
  if (!TRACEDB_ACTIVE()) return;
  const uint32_t name = NameOf(d, a);
  if (a != nullptr) {
    double v = 0;
    bool numeric = true;
    switch (a->payloadType) {
      case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64:
        v = static_cast<double>(a->payload.ullValue);
        break;
      case NVTX_PAYLOAD_TYPE_INT64:
        v = static_cast<double>(a->payload.llValue);
        break;
      case NVTX_PAYLOAD_TYPE_DOUBLE:
        v = a->payload.dValue;
        break;
      case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32:
        v = a->payload.uiValue;
        break;
      case NVTX_PAYLOAD_TYPE_INT32:
        v = a->payload.iValue;
        break;
      case NVTX_PAYLOAD_TYPE_FLOAT:
        v = a->payload.fValue;
        break;
      default:
        numeric = false;
        break;
    }
    if (numeric) {
      tracedb_counter_ex(name, TRACEDB_CAT_USER, 0, v);
      return;
    }
  }
  tracedb_args args;
  tracedb_instant_ex(name, TRACEDB_CAT_USER, 0, CategoryArgs(a, &args));
}

// ---- the callbacks NVTX calls ----

void NVTX_API MarkEx(const nvtxEventAttributes_t* a) { Mark(&g_default, a); }
void NVTX_API MarkA(const char* m) {
  if (TRACEDB_ACTIVE())
    tracedb_instant_ex(Intern(nullptr, m ? m : ""), TRACEDB_CAT_USER, 0, nullptr);
}
void NVTX_API MarkW(const wchar_t* m) {
  if (TRACEDB_ACTIVE())
    tracedb_instant_ex(Intern(nullptr, FromWide(m)), TRACEDB_CAT_USER, 0, nullptr);
}
nvtxRangeId_t NVTX_API RangeStartEx(const nvtxEventAttributes_t* a) {
  return TRACEDB_ACTIVE() ? StartRange(&g_default, NameOf(&g_default, a), a) : 0;
}
nvtxRangeId_t NVTX_API RangeStartA(const char* m) {
  return TRACEDB_ACTIVE() ? StartRange(&g_default, Intern(nullptr, m ? m : ""), nullptr) : 0;
}
nvtxRangeId_t NVTX_API RangeStartW(const wchar_t* m) {
  return TRACEDB_ACTIVE() ? StartRange(&g_default, Intern(nullptr, FromWide(m)), nullptr) : 0;
}
void NVTX_API RangeEnd(nvtxRangeId_t id) { EndRange(id); }
int NVTX_API RangePushEx(const nvtxEventAttributes_t* a) {
  tracedb_args args;
  return Push(&g_default, TRACEDB_ACTIVE() ? NameOf(&g_default, a) : 0, CategoryArgs(a, &args));
}
int NVTX_API RangePushA(const char* m) {
  return Push(&g_default, TRACEDB_ACTIVE() ? Intern(nullptr, m ? m : "") : 0, nullptr);
}
int NVTX_API RangePushW(const wchar_t* m) {
  return Push(&g_default, TRACEDB_ACTIVE() ? Intern(nullptr, FromWide(m)) : 0, nullptr);
}
int NVTX_API RangePop() { return Pop(); }
void NVTX_API NameCategoryA(uint32_t, const char*) {}  // categories are kept as numbers (tag)
void NVTX_API NameCategoryW(uint32_t, const wchar_t*) {}
void NVTX_API NameOsThreadA(uint32_t tid, const char* name) {
  if (name != nullptr && tid == static_cast<uint32_t>(syscall(SYS_gettid))) {
    tracedb_thread_name(name);
  }
}
void NVTX_API NameOsThreadW(uint32_t tid, const wchar_t* name) {
  if (name != nullptr && tid == static_cast<uint32_t>(syscall(SYS_gettid))) {
    tracedb_thread_name(FromWide(name).c_str());
  }
}

void NVTX_API DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  Mark(DomainOf(d), a);
}
nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return TRACEDB_ACTIVE() ? StartRange(DomainOf(d), NameOf(DomainOf(d), a), a) : 0;
}
void NVTX_API DomainRangeEnd(nvtxDomainHandle_t, nvtxRangeId_t id) { EndRange(id); }
int NVTX_API DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  tracedb_args args;
  return Push(DomainOf(d), TRACEDB_ACTIVE() ? NameOf(DomainOf(d), a) : 0, CategoryArgs(a, &args));
}
int NVTX_API DomainRangePop(nvtxDomainHandle_t) { return Pop(); }
void NVTX_API DomainNameCategoryA(nvtxDomainHandle_t, uint32_t, const char*) {}
void NVTX_API DomainNameCategoryW(nvtxDomainHandle_t, uint32_t, const wchar_t*) {}
nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t, const char* s) {
  auto* r = new (std::nothrow) RegisteredString{s != nullptr ? s : ""};
  return reinterpret_cast<nvtxStringHandle_t>(r);
}
nvtxStringHandle_t NVTX_API DomainRegisterStringW(nvtxDomainHandle_t, const wchar_t* s) {
  auto* r = new (std::nothrow) RegisteredString{FromWide(s)};
  return reinterpret_cast<nvtxStringHandle_t>(r);
}
nvtxDomainHandle_t NVTX_API DomainCreateA(const char* name) {
  auto* d = new (std::nothrow) Domain;
  if (d != nullptr) d->name = name != nullptr ? name : "";
  return reinterpret_cast<nvtxDomainHandle_t>(d);
}
nvtxDomainHandle_t NVTX_API DomainCreateW(const wchar_t* name) {
  auto* d = new (std::nothrow) Domain;
  if (d != nullptr) d->name = FromWide(name);
  return reinterpret_cast<nvtxDomainHandle_t>(d);
}
// Domains are kept: a range of the domain may still be open, and its rows name its lanes.
void NVTX_API DomainDestroy(nvtxDomainHandle_t) {}
void NVTX_API Initialize(const void*) {}

template <typename F>
void Set(NvtxFunctionTable table, unsigned int size, unsigned int id, F* fn) {
  if (table != nullptr && id < size && table[id] != nullptr) {
    *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
  }
}

}  // namespace
}  // namespace tracedb::nvtx

using namespace tracedb::nvtx;

// NVTX's entry point: fills the CORE and CORE2 callback tables. Returns 1 on success, 0 when NVTX
// offers no callback table (NVTX then stays a no-op).
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  if (get_export_table == nullptr) return 0;
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->GetModuleFunctionTable == nullptr) return 0;
  NvtxFunctionTable core = nullptr;
  unsigned int core_size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size)) return 0;
  Set(core, core_size, NVTX_CBID_CORE_MarkEx, MarkEx);
  Set(core, core_size, NVTX_CBID_CORE_MarkA, MarkA);
  Set(core, core_size, NVTX_CBID_CORE_MarkW, MarkW);
  Set(core, core_size, NVTX_CBID_CORE_RangeStartEx, RangeStartEx);
  Set(core, core_size, NVTX_CBID_CORE_RangeStartA, RangeStartA);
  Set(core, core_size, NVTX_CBID_CORE_RangeStartW, RangeStartW);
  Set(core, core_size, NVTX_CBID_CORE_RangeEnd, RangeEnd);
  Set(core, core_size, NVTX_CBID_CORE_RangePushEx, RangePushEx);
  Set(core, core_size, NVTX_CBID_CORE_RangePushA, RangePushA);
  Set(core, core_size, NVTX_CBID_CORE_RangePushW, RangePushW);
  Set(core, core_size, NVTX_CBID_CORE_RangePop, RangePop);
  Set(core, core_size, NVTX_CBID_CORE_NameCategoryA, NameCategoryA);
  Set(core, core_size, NVTX_CBID_CORE_NameCategoryW, NameCategoryW);
  Set(core, core_size, NVTX_CBID_CORE_NameOsThreadA, NameOsThreadA);
  Set(core, core_size, NVTX_CBID_CORE_NameOsThreadW, NameOsThreadW);
  NvtxFunctionTable core2 = nullptr;
  unsigned int core2_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size)) {
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainMarkEx, DomainMarkEx);
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainRangeStartEx, DomainRangeStartEx);
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainRangeEnd, DomainRangeEnd);
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, DomainRangePushEx);
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, DomainRangePop);
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainNameCategoryA, DomainNameCategoryA);
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainNameCategoryW, DomainNameCategoryW);
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, DomainRegisterStringA);
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringW, DomainRegisterStringW);
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, DomainCreateA);
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainCreateW, DomainCreateW);
    Set(core2, core2_size, NVTX_CBID_CORE2_DomainDestroy, DomainDestroy);
    Set(core2, core2_size, NVTX_CBID_CORE2_Initialize, Initialize);
  }
  return 1;
}
