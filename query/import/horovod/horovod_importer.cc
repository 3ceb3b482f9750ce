// The `horovod` importer. See horovod_importer.h.
//
// Mapping (docs/importers.md):
//   - the whole file is rank 0 (only the coordinator writes it);
//   - each tensor (a Chrome pid, named by its M process_name record) is a track of kind "lane"
//     named after the tensor;
//   - B/E pairs are spans (an unnamed E closes the innermost open span of its pid, and the
//     top-level E's args, dtype and shape, become the span's JSON args);
//   - an X named with digits and of zero duration inside a NEGOTIATE_* span is a rank-ready
//     tick: an instant RANK_READY with the typed peer argument = that rank, nested in the span;
//   - CYCLE_START (and any other global instant) is an instant on one track of kind "global";
//   - the pid-0 header's start_time_since_epoch_in_micros is added to every ts (and kept in the
//     meta table as horovod_start_time_since_epoch_us).
#include "query/import/horovod/horovod_importer.h"

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "engine/util/parse_number.h"
#include "query/import/import_common.h"
#include "query/import/json/event_reader.h"
#include "query/import/json/json_scan.h"
#include "query/import/ordered_stream.h"

namespace tracedb::query {
namespace {

constexpr std::string_view kMetaPrefix = "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": ";

class HorovodFile {
 public:
  HorovodFile(engine::TraceWriter* w, const ImportInput& input) : w_(w), input_(input), stream_(w) {
    rank_ready_ = stream_.Name("RANK_READY");
  }

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
    if (has_anchor_) {
      TRACEDB_RETURN_IF_ERROR(
          w_->SetMeta("horovod_start_time_since_epoch_us", std::to_string(anchor_ns_ / 1000)));
    }
    out->path = input_.path;
    out->format = "horovod";
    out->rank = 0;
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
    uint32_t track = 0;
  };

  Tensor& TensorOf(int64_t pid) {
    if (last_ != nullptr && last_pid_ == pid) return *last_;
    Tensor& t = tensors_[pid];
    last_pid_ = pid;
    last_ = &t;
    return t;
  }

  uint32_t Lane(int64_t pid) {
    Tensor& t = TensorOf(pid);
    if (t.track == 0) {
      engine::TrackSpec spec;
      spec.rank = 0;
      spec.kind = "lane";
      spec.name = !t.name.empty() ? t.name : "pid " + std::to_string(pid);
      spec.pid = pid;
      spec.sort_index = t.sort_index;
      t.track = stream_.Track(spec);
    }
    return t.track;
  }

  uint32_t GlobalTrack() {
    if (global_track_ == 0) {
      engine::TrackSpec spec;
      spec.rank = 0;
      spec.kind = "global";
      spec.name = "cycles";
      global_track_ = stream_.Track(spec);
    }
    return global_track_;
  }

  uint32_t Name(std::string_view s) {
    const uint32_t id = stream_.Name(s);
    if (s.rfind("NEGOTIATE_", 0) == 0) negotiate_.insert(id);
    return id;
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
    if (!ev.has_ts) {
      ++bad_;
      return;
    }
    const int64_t ts = ev.ts + anchor_ns_;
    if (ph == 'i' || ph == 'I') {
      const bool global = !ev.pid.is_int() || ev.scope == "g";
      const uint32_t track = global ? GlobalTrack() : Lane(ev.pid.num);
      stream_.Instant(track, ts, stream_.Name(ev.name), nullptr);
      return;
    }
    if (!ev.pid.is_int()) {
      ++bad_;  // every Horovod event but the markers names its tensor
      return;
    }
    const uint32_t track = Lane(ev.pid.num);
    json_.clear();
    if (!ev.args.empty()) AppendArgsJson(ev.args, &json_);
    switch (ph) {
      case 'B':
        stream_.Begin(track, ts, Name(ev.name), json_);
        return;
      case 'E':
        stream_.End(track, ts, json_);
        return;
      default: {  // 'X'
        const int64_t dur = ev.has_dur ? ev.dur : 0;
        const uint32_t open = stream_.Innermost(track);
        if (dur == 0 && engine::AllDigits(ev.name) && ev.name.size() <= 9 && open != 0 &&
            negotiate_.count(open) != 0) {
          engine::EventArgs args;
          args.mask = engine::EventArgs::kPeer;
          int64_t peer = 0;  // all digits, at most 9: fits
          engine::ParseInt64(ev.name, &peer);
          args.peer = static_cast<int32_t>(peer);
          stream_.Instant(track, ts, rank_ready_, &args);
          return;
        }
        stream_.Complete(track, ts, dur, Name(ev.name), json_);
        return;
      }
    }
  }

  void Meta(const json::TraceEvent& ev) {
    if (!ev.pid.is_int()) {
      ++ignored_;
      return;
    }
    if (ev.name == "process_name") {
      if (auto anchor = json::FindMember(ev.args, "start_time_since_epoch_in_micros")) {
        int64_t ns;
        if (json::ParseMicrosToNanos(*anchor, &ns)) {
          anchor_ns_ = ns;
          has_anchor_ = true;
        }
        return;
      }
      if (auto name = json::FindMember(ev.args, "name")) {
        Tensor& t = TensorOf(ev.pid.num);
        if (t.track == 0) t.name = json::AsString(*name).value_or(std::string(*name));
      }
    } else if (ev.name == "process_sort_index") {
      if (auto v = json::FindMember(ev.args, "sort_index")) {
        Tensor& t = TensorOf(ev.pid.num);
        if (t.track == 0) t.sort_index = json::AsInt(*v).value_or(0);
      }
    } else {
      ++ignored_;
    }
  }

  engine::TraceWriter* w_;
  const ImportInput& input_;
  OrderedStream stream_;
  uint32_t rank_ready_ = 0;
  std::unordered_map<int64_t, Tensor> tensors_;
  int64_t last_pid_ = 0;
  Tensor* last_ = nullptr;
  uint32_t global_track_ = 0;
  std::unordered_set<uint32_t> negotiate_;  // ids of the names that start with NEGOTIATE_
  std::string json_;
  int64_t anchor_ns_ = 0;
  bool has_anchor_ = false;
  uint64_t bad_ = 0;
  uint64_t ignored_ = 0;
};

class HorovodImporter : public Importer {
 public:
  const char* name() const override { return "horovod"; }

  int Detect(std::string_view path, std::string_view head) const override {
    const size_t first = head.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos || head[first] != '[') return 0;
    if (head.find("\"start_time_since_epoch_in_micros\"") != std::string_view::npos) return 100;
    // Horovod writes neither tid nor cat (Bluefog, from the same code, adds tid); a file with
    // both is a generic Chrome trace, whatever its names (e.g. one that has NEGOTIATE_ALLREDUCE
    // spans on (pid, tid) threads).
    const bool tid = head.find("\"tid\"") != std::string_view::npos;
    const bool cat = head.find("\"cat\"") != std::string_view::npos;
    if (tid && cat) return 0;
    const bool markers = head.find("\"NEGOTIATE_") != std::string_view::npos ||
                         head.find("\"name\": \"CYCLE_START\"") != std::string_view::npos;
    if (markers) return 90;
    // Without markers: Horovod's own metadata layout, and no tid or cat anywhere.
    const size_t meta = head.find(kMetaPrefix);
    if (meta == std::string_view::npos || tid || cat) return 0;
    size_t p = meta + kMetaPrefix.size();
    while (p < head.size() && head[p] >= '0' && head[p] <= '9') ++p;
    return head.substr(p, 10) == ", \"args\": " ? 70 : 0;
  }

  Status Import(const ImportInput& input, engine::TraceWriter* writer,
                ImportResult* result) override {
    HorovodFile file(writer, input);
    FileOutcome f;
    TRACEDB_RETURN_IF_ERROR(file.Run(&f, &result->warnings));
    TRACEDB_RETURN_IF_ERROR(RecordFile(writer, f));
    AddToResult(f, /*first=*/true, result);
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<Importer> NewHorovodImporter() { return std::make_unique<HorovodImporter>(); }

}  // namespace tracedb::query
