// The `kineto` importer. See kineto_importer.h.
//
// Mapping (docs/importers.md): the generic Chrome mapping (chrome_core.h), plus:
//   - CPU ops, runtime calls and annotations stay on (pid, tid) thread tracks; kernels, memcpy
//     and memset run on (device pid, stream tid) tracks of kind "gpu" named "GPU <d> stream <s>";
//     categories are kept as `cat`;
//   - NCCL collectives (the record_param_comms args "Collective name", "In msg nelems", "dtype",
//     "Group size", "Process Group …" on kernels and nccl:* annotations) keep those args in the
//     JSON and get the typed `bytes` = In msg nelems × dtype size (else, for nccl:* annotations
//     of older profilers, the product of "Input Dims" × "Input type" sizes) and `seq` = "Seq";
//     memcpy/memset get `bytes` from their "bytes" arg;
//   - ProfilerStep#N spans also mark step N (TraceWriter::AddStep);
//   - ac2g flows (s/f) become flow rows.
#include "query/import/kineto/kineto_importer.h"

#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "query/import/chrome/chrome_core.h"
#include "query/import/import_common.h"
#include "query/import/json/json_scan.h"

namespace tracedb::query {
namespace {

bool IsGpuCategory(std::string_view cat) {
  return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" ||
         cat == "gpu_user_annotation";
}

// Elements of "Input Dims" ([[2048, 1], [], …]) times the sizes of their "Input type"s; 0 when
// unknown.
uint64_t InputBytes(std::string_view args) {
  auto dims = json::FindMember(args, "Input Dims");
  auto types = json::FindMember(args, "Input type");
  if (!dims || !types) return 0;
  std::vector<std::string_view> dim_list, type_list;
  json::ForEachElement(*dims, [&](std::string_view v) {
    dim_list.push_back(v);
    return true;
  });
  json::ForEachElement(*types, [&](std::string_view v) {
    type_list.push_back(v);
    return true;
  });
  uint64_t bytes = 0;
  for (size_t i = 0; i < dim_list.size() && i < type_list.size(); ++i) {
    const int size = KinetoDtypeSize(json::AsString(type_list[i]).value_or(""));
    if (size == 0) continue;
    unsigned __int128 elems = 1;
    bool ok = true;
    json::ForEachElement(dim_list[i], [&](std::string_view v) {
      const std::optional<int64_t> n = json::AsInt(v);
      ok = n && *n >= 0;
      if (ok) elems *= static_cast<uint64_t>(*n);
      ok = ok && elems <= (static_cast<unsigned __int128>(1) << 62);
      return ok;
    });
    if (ok) bytes += static_cast<uint64_t>(elems) * static_cast<uint64_t>(size);
  }
  return bytes;
}

class KinetoFlavor : public chrome::ChromeFlavor {
 public:
  const char* format() const override { return "kineto"; }

  void Annotate(const json::TraceEvent& ev, chrome::EventFacts* f) const override {
    f->gpu = IsGpuCategory(ev.cat);
    const std::string_view name = ev.name;
    if (name.rfind("ProfilerStep#", 0) == 0) {
      int64_t step;
      if (json::ParseInt64(name.substr(13), &step)) f->step = step;
      return;
    }
    if (ev.args.empty()) return;
    if (ev.cat == "gpu_memcpy" || ev.cat == "gpu_memset") {
      if (auto b = json::FindMember(ev.args, "bytes")) SetBytes(json::AsInt(*b), f);
      return;
    }
    const bool nccl = name.rfind("nccl", 0) == 0 || name.find("nccl") != std::string_view::npos;
    const bool comms = name == "record_param_comms";
    if (!nccl && !comms) return;
    std::optional<int64_t> nelems, seq;
    std::string dtype;
    json::ForEachMember(ev.args, [&](std::string_view key, std::string_view v) {
      if (key == "In msg nelems") {
        nelems = json::AsInt(v);
      } else if (key == "dtype") {
        dtype = json::AsString(v).value_or("");
      } else if (key == "Seq") {
        seq = json::AsInt(v);
      }
      return true;
    });
    if (nelems && *nelems >= 0) {
      const int size = KinetoDtypeSize(dtype);
      if (size > 0) SetBytes(*nelems * size, f);
    } else if (name.rfind("nccl:", 0) == 0) {
      const uint64_t b = InputBytes(ev.args);
      if (b > 0) SetBytes(static_cast<int64_t>(b), f);
    }
    if (seq && *seq >= 0) {
      f->args.seq = static_cast<uint64_t>(*seq);
      f->args.mask |= engine::EventArgs::kSeq;
    }
  }

  void NameTrack(const chrome::TrackFacts& t, engine::TrackSpec* spec) const override {
    if (t.type != chrome::TrackFacts::Type::kThread || !t.pid.is_int || !t.tid.is_int) return;
    if (!t.gpu && t.process_labels.rfind("GPU", 0) != 0) return;
    spec->kind = "gpu";
    spec->name = "GPU " + t.pid.text + " stream " + t.tid.text;
    spec->pid = t.pid.num;
    spec->tid = t.tid.num;
    spec->local_id = t.tid.num;
  }

 private:
  static void SetBytes(std::optional<int64_t> b, chrome::EventFacts* f) {
    if (!b || *b < 0) return;
    f->args.bytes = static_cast<uint64_t>(*b);
    f->args.mask |= engine::EventArgs::kBytes;
  }
};

class KinetoImporter : public Importer {
 public:
  const char* name() const override { return "kineto"; }

  int Detect(std::string_view path, std::string_view head) const override {
    const size_t first = head.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos || head[first] != '{') return 0;
    if (head.find("\"schemaVersion\"") != std::string_view::npos ||
        head.find("\"distributedInfo\"") != std::string_view::npos ||
        head.find("\"deviceProperties\"") != std::string_view::npos) {
      return 90;
    }
    if (head.find("\"traceEvents\"") != std::string_view::npos &&
        (head.find("\"cat\": \"cpu_op\"") != std::string_view::npos ||
         head.find("\"cat\": \"kernel\"") != std::string_view::npos ||
         head.find("\"cat\": \"cuda_runtime\"") != std::string_view::npos)) {
      return 80;
    }
    return 0;
  }

  Status Import(const ImportInput& input, engine::TraceWriter* writer,
                ImportResult* result) override {
    return chrome::ImportChromeInput(input, KinetoFlavor(), writer, result);
  }
};

}  // namespace

int KinetoDtypeSize(std::string_view dtype) {
  std::string d;
  for (char c : dtype) d.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (d.rfind("c10::", 0) == 0) d = d.substr(5);
  if (d.rfind("torch.", 0) == 0) d = d.substr(6);
  if (d == "float" || d == "float32" || d == "int" || d == "int32" || d == "uint32" ||
      d == "complexhalf") {
    return 4;
  }
  if (d == "double" || d == "float64" || d == "long" || d == "int64" || d == "uint64" ||
      d == "complexfloat" || d == "long int") {
    return 8;
  }
  if (d == "half" || d == "float16" || d == "bfloat16" || d == "short" || d == "int16" ||
      d == "uint16") {
    return 2;
  }
  if (d == "byte" || d == "uint8" || d == "char" || d == "int8" || d == "bool" ||
      d == "unsigned char" || d == "signed char" || d.rfind("float8", 0) == 0) {
    return 1;
  }
  if (d == "complexdouble") return 16;
  return 0;
}

std::unique_ptr<Importer> NewKinetoImporter() { return std::make_unique<KinetoImporter>(); }

}  // namespace tracedb::query
