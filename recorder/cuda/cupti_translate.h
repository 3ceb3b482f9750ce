// CUPTI activity records -> tracedb events. Translate() reads one record of a kind that tracedb
// records (kernels, memcpy, memset, synchronization, runtime and driver API calls) into a
// GpuRecord; GpuEmitter records GpuRecords through the recorder's C ABI on the tracks described
// in docs/gpu-capture.md "CUDA activity". Both are pure of CUPTI calls, so they are tested on
// records built in the test; cupti_capture.cc feeds them from CUPTI's buffers.
// Thread safety: Translate is pure. A GpuEmitter is used by one thread at a time (CUPTI calls
// its buffer-completed callback from one thread).
#pragma once

#include <cupti_activity.h>

#include <cstdint>
#include <map>
#include <string>

namespace tracedb::cuda {

// What a record is; also the low byte of the event's `tag` (the views read it).
enum class GpuKind : uint8_t {
  kKernel = 1,
  kMemcpy = 2,
  kMemset = 3,
  kSync = 4,
  kRuntime = 5,
  kDriver = 6,
};

struct GpuRecord {
  GpuKind kind = GpuKind::kKernel;
  int64_t start = 0;  // ns, recorder clock (after the clock offset)
  int64_t end = 0;    // ns, recorder clock
  uint32_t device = 0;
  uint32_t context = 0;
  uint32_t stream = 0;
  uint32_t correlation = 0;    // links a GPU record to the API call that launched it
  uint64_t bytes = 0;          // memcpy, memset
  uint32_t thread = 0;         // API calls: the OS thread id
  uint32_t cbid = 0;           // API calls: CUPTI callback id (names the function)
  uint32_t subkind = 0;        // memcpy: CUpti_ActivityMemcpyKind; sync: its type
  const char* name = nullptr;  // kernel: its (mangled) name, owned by CUPTI
};

// Translates `rec` (of CUPTI_API_VERSION's record layout for its kind), adding `clock_offset_ns`
// to its timestamps. Returns false for a kind tracedb does not record, or a record whose end
// precedes its start (CUPTI writes 0 for an end it could not measure).
bool Translate(const CUpti_Activity* rec, int64_t clock_offset_ns, GpuRecord* out);

// The name of a memcpy kind as Nsight Systems shows it ("Memcpy HtoD", ...).
const char* MemcpyName(uint32_t copy_kind);
// The name of a synchronization type ("cudaStreamSynchronize", ...).
const char* SyncName(uint32_t sync_type);
// The flow id of a correlation id (kept apart from the NCCL plugin's task flows).
inline uint64_t CorrelationFlow(uint32_t correlation) { return (uint64_t{2} << 40) | correlation; }

// Records GpuRecords: GPU work as spans on lanes "cuda gpu<D> stream <S>", runtime API calls on
// lanes "cuda api <tid>", driver API calls on "cuda driver <tid>", synchronization on "cuda sync";
// names interned once.
class GpuEmitter {
 public:
  // `api_name(kind, cbid)` names an API call (cuptiGetCallbackName in the live path).
  using ApiNameFn = const char* (*)(GpuKind kind, uint32_t cbid);
  explicit GpuEmitter(ApiNameFn api_name) : api_name_(api_name) {}
  void Emit(const GpuRecord& r);
  uint64_t emitted() const { return emitted_; }

 private:
  uint32_t Name(const std::string& s);
  uint32_t Lane(const std::string& s);
  ApiNameFn api_name_;
  std::map<std::string, uint32_t> names_;
  std::map<std::string, uint32_t> lanes_;
  std::map<std::string, uint32_t> kernel_names_;  // mangled name -> id of the demangled one
  uint64_t emitted_ = 0;
};

// A kernel's name for people: demangled when it is a mangled C++ name, else as given.
std::string KernelName(const char* mangled);

}  // namespace tracedb::cuda
