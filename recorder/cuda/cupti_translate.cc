// CUPTI record translation and emission. See cupti_translate.h; docs/gpu-capture.md "CUDA
// activity".
#include "recorder/cuda/cupti_translate.h"

#include <cxxabi.h>

#include <cstdlib>
#include <cstring>

#include "tracedb/recorder.h"

namespace tracedb::cuda {

namespace {

bool Span(uint64_t start, uint64_t end, int64_t offset, GpuRecord* out) {
  if (start == 0 || end < start) return false;
  out->start = static_cast<int64_t>(start) + offset;
  out->end = static_cast<int64_t>(end) + offset;
  return true;
}

}  // namespace

bool Translate(const CUpti_Activity* rec, int64_t offset, GpuRecord* out) {
  if (rec == nullptr) return false;
  *out = GpuRecord();
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      out->kind = GpuKind::kKernel;
      out->device = k->deviceId;
      out->context = k->contextId;
      out->stream = k->streamId;
      out->correlation = k->correlationId;
      out->name = k->name;
      return Span(k->start, k->end, offset, out);
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      out->kind = GpuKind::kMemcpy;
      out->device = m->deviceId;
      out->context = m->contextId;
      out->stream = m->streamId;
      out->correlation = m->correlationId;
      out->bytes = m->bytes;
      out->subkind = m->copyKind;
      return Span(m->start, m->end, offset, out);
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
      out->kind = GpuKind::kMemset;
      out->device = m->deviceId;
      out->context = m->contextId;
      out->stream = m->streamId;
      out->correlation = m->correlationId;
      out->bytes = m->bytes;
      return Span(m->start, m->end, offset, out);
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(rec);
      out->kind = GpuKind::kSync;
      out->context = s->contextId;
      out->stream = s->streamId;
      out->correlation = s->correlationId;
      out->subkind = static_cast<uint32_t>(s->type);
      return Span(s->start, s->end, offset, out);
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
      out->kind = rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? GpuKind::kRuntime : GpuKind::kDriver;
      out->correlation = a->correlationId;
      out->thread = a->threadId;
      out->cbid = a->cbid;
      return Span(a->start, a->end, offset, out);
    }
    default:
      return false;
  }
}

const char* MemcpyName(uint32_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "Memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "Memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "Memcpy HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "Memcpy AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "Memcpy AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "Memcpy AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "Memcpy DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "Memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "Memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "Memcpy PtoP";
    default:
      return "Memcpy";
  }
}

const char* SyncName(uint32_t type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
      return "cudaEventSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
      return "cudaStreamWaitEvent";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
      return "cudaStreamSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
      return "cudaDeviceSynchronize";
    default:
      return "Synchronize";
  }
}

std::string KernelName(const char* mangled) {
  if (mangled == nullptr) return "<unnamed kernel>";
  if (mangled[0] != '_' || mangled[1] != 'Z') return mangled;
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = status == 0 && d != nullptr ? d : mangled;
  std::free(d);
  return out;
}

uint32_t GpuEmitter::Name(const std::string& s) {
  auto it = names_.find(s);
  if (it != names_.end()) return it->second;
  const uint32_t id = tracedb_intern(s.c_str());
  names_.emplace(s, id);
  return id;
}

uint32_t GpuEmitter::Lane(const std::string& s) {
  auto it = lanes_.find(s);
  if (it != lanes_.end()) return it->second;
  const uint32_t id = tracedb_lane(s.c_str());
  lanes_.emplace(s, id);
  return id;
}

void GpuEmitter::Emit(const GpuRecord& r) {
  tracedb_args a;
  a.fields = TRACEDB_ARG_TAG | TRACEDB_ARG_FLOW;
  a.tag = static_cast<int32_t>(static_cast<uint32_t>(r.kind) | (r.device & 0xffff) << 8);
  a.flow = CorrelationFlow(r.correlation);
  uint32_t name = 0;
  uint32_t lane = 0;
  switch (r.kind) {
    case GpuKind::kKernel: {
      const std::string mangled = r.name != nullptr ? r.name : "";
      auto it = kernel_names_.find(mangled);
      if (it == kernel_names_.end()) {
        it = kernel_names_.emplace(mangled, Name(KernelName(r.name))).first;
      }
      name = it->second;
      break;
    }
    case GpuKind::kMemcpy:
      name = Name(MemcpyName(r.subkind));
      a.fields |= TRACEDB_ARG_BYTES;
      a.bytes = r.bytes;
      break;
    case GpuKind::kMemset:
      name = Name("Memset");
      a.fields |= TRACEDB_ARG_BYTES;
      a.bytes = r.bytes;
      break;
    case GpuKind::kSync:
      name = Name(SyncName(r.subkind));
      lane = Lane("cuda sync");
      break;
    case GpuKind::kRuntime:
    case GpuKind::kDriver: {
      const char* n = api_name_ != nullptr ? api_name_(r.kind, r.cbid) : nullptr;
      name = Name(n != nullptr ? n
                               : std::string(r.kind == GpuKind::kRuntime ? "cuda runtime "
                                                                         : "cuda driver ") +
                                     std::to_string(r.cbid));
      // Runtime calls enclose driver calls, but CUPTI may deliver the inner one first: one
      // lane each per thread keeps every lane in start order without nesting.
      lane = Lane((r.kind == GpuKind::kRuntime ? "cuda api " : "cuda driver ") +
                  std::to_string(r.thread));
      break;
    }
  }
  if (lane == 0) {
    lane = Lane("cuda gpu" + std::to_string(r.device) + " stream " + std::to_string(r.stream));
  }
  tracedb_complete_ex(name, TRACEDB_CAT_CUDA, lane, r.start, r.end - r.start, &a);
  ++emitted_;
}

}  // namespace tracedb::cuda
