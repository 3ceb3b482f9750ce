// Shared importer pieces. See import_common.h.
#include "query/import/import_common.h"

#include <algorithm>
#include <filesystem>

#include "engine/util/json_text.h"
#include "engine/util/parse_number.h"
#include "query/import/json/json_scan.h"

namespace tracedb::query {

int32_t RankFromFileName(std::string_view path) {
  std::string_view base = path;
  if (const size_t slash = base.find_last_of('/'); slash != std::string_view::npos) {
    base = base.substr(slash + 1);
  }
  // Drop extensions (".json", ".json.gz", ".pt.trace.json") but not a number after a dot
  // ("mpi_profile.176073.1" keeps its ".1").
  for (;;) {
    const size_t dot = base.find_last_of('.');
    if (dot == std::string_view::npos || dot == 0) break;
    const std::string_view ext = base.substr(dot + 1);
    if (!ext.empty() && ext.find_first_not_of("0123456789") == std::string_view::npos) break;
    base = base.substr(0, dot);
  }
  size_t end = base.size();
  size_t begin = end;
  while (begin > 0 && base[begin - 1] >= '0' && base[begin - 1] <= '9') --begin;
  if (begin == end || end - begin > 9) return -1;
  int64_t rank = -1;  // all digits, at most 9: fits
  engine::ParseInt64(base.substr(begin, end - begin), &rank);
  return static_cast<int32_t>(rank);
}

std::string SourcePath(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) return path;
  return p.lexically_normal().string();
}

Status RecordFile(engine::TraceWriter* writer, const FileOutcome& f) {
  if (f.rank >= 0) {
    engine::RankRecord r;
    r.rank = f.rank;
    r.world_size = f.world_size;
    r.local_rank = f.local_rank;
    r.clock_method = "file";
    r.source = f.format;
    TRACEDB_RETURN_IF_ERROR(writer->SetRank(r));
  }
  std::error_code ec;
  const auto size = std::filesystem::file_size(f.path, ec);
  TRACEDB_ASSIGN_OR_RETURN(engine::Stmt st,
                           writer->db()->PrepareCached(
                               "INSERT OR REPLACE INTO sources(path, format, rank, pid, offset, "
                               "size, finished, events) VALUES(?1, ?2, ?3, NULL, ?4, ?4, 1, ?5)"));
  st.Bind(1, SourcePath(f.path))
      .Bind(2, f.format)
      .Bind(3, f.rank)
      .Bind(4, static_cast<int64_t>(ec ? 0 : size))
      .Bind(5, static_cast<int64_t>(f.events));
  TRACEDB_RETURN_IF_ERROR(st.Run());
  writer->AddStat("import_skipped", f.rank, static_cast<int64_t>(f.skipped));
  writer->AddStat("import_truncated", f.rank, static_cast<int64_t>(f.truncated));
  writer->AddStat("import_unmatched", f.rank, static_cast<int64_t>(f.unmatched));
  if (f.ignored > 0) writer->AddStat("import_ignored", f.rank, static_cast<int64_t>(f.ignored));
  return Status::Ok();
}

void AddReaderWarnings(const json::EventReader& reader, std::vector<std::string>* warnings) {
  for (const std::string& e : reader.errors()) warnings->push_back(e);
  if (!reader.source().warning().empty()) {
    warnings->push_back(reader.source().name() + ": " + reader.source().warning());
  }
}

void AddToResult(const FileOutcome& f, bool first, ImportResult* result) {
  if (first) {
    result->rank = f.rank;
  } else if (result->rank != f.rank) {
    result->rank = -1;
  }
  if (f.rank >= 0 && !std::binary_search(result->ranks.begin(), result->ranks.end(), f.rank)) {
    result->ranks.insert(std::upper_bound(result->ranks.begin(), result->ranks.end(), f.rank),
                         f.rank);
  }
  if (f.world_size > 0) result->world_size = f.world_size;
  result->first_ts = std::min(result->first_ts, f.first_ts);
  result->last_end = std::max(result->last_end, f.last_end);
  result->events += f.events;
  result->skipped += f.skipped;
  result->truncated_bytes += f.truncated;
  if (f.truncated > 0) {
    result->warnings.push_back(f.path + ": the last " + std::to_string(f.truncated) +
                               " bytes hold an incomplete record (ignored)");
  }
  if (f.unmatched > 0) {
    result->warnings.push_back(f.path + ": " + std::to_string(f.unmatched) +
                               " begin/end events without their other half");
  }
  if (f.ignored > 0) {
    result->warnings.push_back(f.path + ": " + std::to_string(f.ignored) +
                               " events of phases this format does not import were ignored");
  }
}

StatusOr<bool> AlreadyImported(engine::TraceWriter* writer, const std::string& path) {
  TRACEDB_ASSIGN_OR_RETURN(
      engine::Stmt st,
      writer->db()->PrepareCached("SELECT finished FROM sources WHERE path = ?1 AND finished = 1"));
  st.Bind(1, SourcePath(path));
  return st.Step();
}

void AddJsonMember(std::string* object, std::string_view key, std::string_view value_json) {
  if (object->size() < 2) {
    object->assign("{");
  } else {
    object->pop_back();  // the closing brace
    object->push_back(',');
  }
  engine::json::AppendString(object, key);
  object->push_back(':');
  object->append(value_json);
  object->push_back('}');
}

void AppendArgsJson(std::string_view raw_args, std::string* out) {
  const char* p = json::SkipSpace(raw_args.data(), raw_args.data() + raw_args.size());
  if (p == raw_args.data() + raw_args.size()) return;
  const size_t start = out->size();
  if (*p == '{') {
    if (json::AppendCompactJson(raw_args, out)) {
      if (out->size() - start == 2) out->resize(start);  // "{}": no args
      return;
    }
    out->resize(start);
  }
  // Not an object (or not valid JSON): keep it under "args".
  std::string value;
  if (!json::AppendCompactJson(raw_args, &value)) {
    value.clear();
    engine::json::AppendString(&value, raw_args);
  }
  std::string obj;
  AddJsonMember(&obj, "args", value);
  out->append(obj);
}

}  // namespace tracedb::query
