// The `byteps` importer. See byteps_importer.h.
//
// Mapping (docs/importers.md): the generic Chrome mapping (chrome_core.h) with BytePS tracks:
// each (tensor, tid) is a track of kind "lane": tid "total" (the whole push_pull of one
// gradient) is named after the tensor's pid ("Comm.<tensor>"), a partition key tid is named
// "Comm.<tensor> partition <key>" with the key as tid; its events are the queue stages
// "Comm.<tensor>.<QUEUE>". Server-profile keys become lanes "server key <key>".
#include "query/import/byteps/byteps_importer.h"

#include <algorithm>
#include <filesystem>

#include "engine/util/parse_number.h"
#include "query/import/chrome/chrome_core.h"
#include "query/import/import_common.h"
#include "query/import/json/json_scan.h"

namespace tracedb::query {
namespace {

class BytepsFlavor : public chrome::ChromeFlavor {
 public:
  const char* format() const override { return "byteps"; }

  void NameTrack(const chrome::TrackFacts& t, engine::TrackSpec* spec) const override {
    if (t.type != chrome::TrackFacts::Type::kThread) return;
    spec->kind = "lane";
    spec->local_id = -1;
    if (!t.pid.is_int) {
      if (t.tid.text == "total" || !t.tid.present) {
        spec->name = t.pid.text;
        spec->tid = -1;
      } else {
        spec->name = t.pid.text + " partition " + t.tid.text;
        int64_t key = -1;
        if (json::ParseInt64(t.tid.text, &key)) spec->tid = key;
      }
    } else {
      // The server profile: pid = tid = the key.
      spec->name = "server key " + t.pid.text;
      spec->pid = t.pid.num;
    }
  }
};

// A directory name that is a rank: digits only, at most 9 (an int32).
bool IsRankName(const std::string& s) { return engine::AllDigits(s) && s.size() <= 9; }

int32_t RankOf(const std::string& s) {
  int64_t v = 0;
  engine::ParseInt64(s, &v);
  return static_cast<int32_t>(v);
}

class BytepsImporter : public Importer {
 public:
  const char* name() const override { return "byteps"; }

  int Detect(std::string_view path, std::string_view head) const override {
    if (head.empty()) {
      // A directory: the trace dir holds <n>/comm.json.
      std::error_code ec;
      if (std::filesystem::is_directory(std::string(path), ec) &&
          !BytepsTraceFiles(std::string(path)).empty()) {
        return 100;
      }
      return 0;
    }
    const size_t first = head.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos || head[first] != '{') return 0;
    if (head.find("\"traceEvents\"") == std::string_view::npos) return 0;
    if (head.find("\"tid\": \"total\"") != std::string_view::npos ||
        head.find("\"pid\": \"Comm.") != std::string_view::npos) {
      return 95;
    }
    if ((head.find("\"name\": \"push-") != std::string_view::npos ||
         head.find("\"name\": \"pull-") != std::string_view::npos) &&
        head.find("\"ph\": \"B\"") != std::string_view::npos) {
      return 80;  // the server profile
    }
    return 0;
  }

  Status Import(const ImportInput& input, engine::TraceWriter* writer,
                ImportResult* result) override {
    std::error_code ec;
    if (std::filesystem::is_directory(input.path, ec)) {
      const auto files = BytepsTraceFiles(input.path);
      if (files.empty()) {
        return Status::InvalidArgument(input.path + ": no <n>/comm.json in this directory");
      }
      bool first = true;
      for (const auto& [rank, path] : files) {
        TRACEDB_RETURN_IF_ERROR(ImportOne(path, rank, input, writer, first, result));
        first = false;
      }
      return Status::Ok();
    }
    // <dir>/<local rank>/comm.json: the directory's number is the rank.
    const std::string parent = std::filesystem::path(input.path).parent_path().filename().string();
    const int32_t rank = IsRankName(parent) ? RankOf(parent) : input.rank_hint;
    return ImportOne(input.path, rank, input, writer, /*first=*/true, result);
  }

 private:
  Status ImportOne(const std::string& path, int32_t rank, const ImportInput& input,
                   engine::TraceWriter* writer, bool first, ImportResult* result) {
    BytepsFlavor flavor;
    chrome::ChromeOptions options;
    options.rank_hint = rank;
    options.local_rank = std::max(rank, 0);
    options.progress = input.progress;
    FileOutcome f;
    TRACEDB_RETURN_IF_ERROR(
        chrome::ImportChromeFile(path, flavor, options, writer, &f, &result->warnings));
    TRACEDB_RETURN_IF_ERROR(RecordFile(writer, f));
    AddToResult(f, first, result);
    return Status::Ok();
  }
};

}  // namespace

std::vector<std::pair<int32_t, std::string>> BytepsTraceFiles(const std::string& dir) {
  std::vector<std::pair<int32_t, std::string>> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!IsRankName(name) || !entry.is_directory(ec)) continue;
    const std::filesystem::path comm = entry.path() / "comm.json";
    if (std::filesystem::is_regular_file(comm, ec)) files.emplace_back(RankOf(name), comm);
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::unique_ptr<Importer> NewBytepsImporter() { return std::make_unique<BytepsImporter>(); }

}  // namespace tracedb::query
