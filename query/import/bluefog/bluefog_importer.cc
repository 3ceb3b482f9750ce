// The `bluefog` importer. See bluefog_importer.h.
//
// Mapping (docs/importers.md): the rank is the number that ends the file name (which the shell
// passes as the rank hint unless --rank overrides it), else 0; each (tensor, thread) pair is a
// track of kind "lane" named after the tensor, with the thread index as its tid; B/E pairs nest per
// (pid, tid), an E closing the innermost open span of its (pid, tid). X and instants, which Bluefog
// does not write, are kept as spans and instants all the same.
#include "query/import/bluefog/bluefog_importer.h"

#include <map>
#include <string>
#include <unordered_map>

#include "query/import/import_common.h"
#include "query/import/json/event_reader.h"
#include "query/import/json/json_scan.h"
#include "query/import/ordered_stream.h"

namespace tracedb::query {
namespace {

constexpr std::string_view kMetaPrefix = "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": ";

class BluefogFile {
 public:
  BluefogFile(engine::TraceWriter* w, const ImportInput& input, int32_t rank)
      : input_(input), rank_(rank), stream_(w) {}

  Status Run(FileOutcome* out, std::vector<std::string>* warnings) {
    TRACEDB_ASSIGN_OR_RETURN(std::unique_ptr<json::EventReader> reader,
                             json::EventReader::Open(input_.path));
    json::TraceEvent ev;
    uint64_t n = 0;
    for (;;) {
      TRACEDB_ASSIGN_OR_RETURN(bool more, reader->Next(&ev));
      if (!more) break;
      OnEvent(ev);
      if ((++n & 0xffff) == 0 && input_.progress) {
        input_.progress(reader->source().raw_read(), reader->source().file_size());
      }
    }
    TRACEDB_RETURN_IF_ERROR(stream_.Finish());
    out->path = input_.path;
    out->format = "bluefog";
    out->rank = rank_;
    out->events = stream_.rows();
    out->first_ts = stream_.min_ts();
    out->last_end = stream_.max_end();
    out->skipped = reader->skipped() + bad_;
    out->truncated = reader->truncated_bytes();
    out->unmatched = stream_.unmatched();
    out->ignored = ignored_;
    AddReaderWarnings(*reader, warnings);
    return Status::Ok();
  }

 private:
  struct Tensor {
    std::string name;
    int64_t sort_index = 0;
    bool used = false;  // a track was made with this name
  };

  uint32_t Lane(int64_t pid, int64_t tid) {
    const std::pair<int64_t, int64_t> key(pid, tid);
    if (key == last_key_ && last_track_ != 0) return last_track_;
    uint32_t& track = lanes_[key];
    if (track == 0) {
      Tensor& t = tensors_[pid];
      t.used = true;
      engine::TrackSpec spec;
      spec.rank = rank_;
      spec.kind = "lane";
      spec.name = !t.name.empty() ? t.name : "pid " + std::to_string(pid);
      spec.pid = pid;
      spec.tid = tid;
      spec.local_id = tid;  // one track per (tensor, thread): keyed by (pid, local_id)
      spec.sort_index = t.sort_index;
      track = stream_.Track(spec);
    }
    last_key_ = key;
    last_track_ = track;
    return track;
  }

  void OnEvent(const json::TraceEvent& ev) {
    const char ph = ev.phase();
    if (ph == 'M') {
      Meta(ev);
      return;
    }
    if (ph != 'B' && ph != 'E' && ph != 'X' && ph != 'i' && ph != 'I') {
      if (ev.ph.empty()) {
        ++bad_;
      } else {
        ++ignored_;
      }
      return;
    }
    if (!ev.has_ts || !ev.pid.is_int()) {
      ++bad_;
      return;
    }
    // Files from before thread indexes (March 2020) have no tid: thread 0.
    const int64_t tid = ev.tid.is_int() ? ev.tid.num : 0;
    const uint32_t track = Lane(ev.pid.num, tid);
    switch (ph) {
      case 'B':
        stream_.Begin(track, ev.ts, stream_.Name(ev.name));
        break;
      case 'E':
        stream_.End(track, ev.ts);
        break;
      case 'X':
        stream_.Complete(track, ev.ts, ev.has_dur ? ev.dur : 0, stream_.Name(ev.name));
        break;
      default:
        stream_.Instant(track, ev.ts, stream_.Name(ev.name), nullptr);
    }
    return;
  }

  void Meta(const json::TraceEvent& ev) {
    if (!ev.pid.is_int()) {
      ++ignored_;
      return;
    }
    Tensor& t = tensors_[ev.pid.num];
    if (ev.name == "process_name") {
      if (auto name = json::FindMember(ev.args, "name"); name && !t.used) {
        t.name = json::AsString(*name).value_or(std::string(*name));
      }
    } else if (ev.name == "process_sort_index") {
      if (auto v = json::FindMember(ev.args, "sort_index"); v && !t.used) {
        t.sort_index = json::AsInt(*v).value_or(0);
      }
    } else {
      ++ignored_;
    }
  }

  const ImportInput& input_;
  int32_t rank_;
  OrderedStream stream_;
  std::unordered_map<int64_t, Tensor> tensors_;
  std::map<std::pair<int64_t, int64_t>, uint32_t> lanes_;
  std::pair<int64_t, int64_t> last_key_{0, 0};
  uint32_t last_track_ = 0;
  uint64_t bad_ = 0;
  uint64_t ignored_ = 0;
};

class BluefogImporter : public Importer {
 public:
  const char* name() const override { return "bluefog"; }

  int Detect(std::string_view path, std::string_view head) const override {
    const size_t first = head.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos || head[first] != '[') return 0;
    // Bluefog's metadata records carry the thread index right after the pid; Bluefog writes
    // neither categories nor durations.
    const size_t meta = head.find(kMetaPrefix);
    if (meta == std::string_view::npos || head.find("\"cat\"") != std::string_view::npos ||
        head.find("\"dur\"") != std::string_view::npos) {
      return 0;
    }
    size_t p = meta + kMetaPrefix.size();
    while (p < head.size() && head[p] >= '0' && head[p] <= '9') ++p;
    if (head.substr(p, 9) != ", \"tid\": ") return 0;
    return RankFromFileName(path) >= 0 ? 85 : 75;
  }

  Status Import(const ImportInput& input, engine::TraceWriter* writer,
                ImportResult* result) override {
    // The shell's hint is the file name's number, unless --rank overrides it.
    int32_t rank = input.rank_hint >= 0 ? input.rank_hint : RankFromFileName(input.path);
    if (rank < 0) rank = 0;
    BluefogFile file(writer, input, rank);
    FileOutcome f;
    TRACEDB_RETURN_IF_ERROR(file.Run(&f, &result->warnings));
    TRACEDB_RETURN_IF_ERROR(RecordFile(writer, f));
    AddToResult(f, /*first=*/true, result);
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<Importer> NewBluefogImporter() { return std::make_unique<BluefogImporter>(); }

}  // namespace tracedb::query
