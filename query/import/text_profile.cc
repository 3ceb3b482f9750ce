// Helpers for the text-profile importers. See text_profile.h.
// Thread safety: free functions and value types; no shared state.
#include "query/import/text_profile.h"
#include "engine/util/parse_number.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>

namespace tracedb::query::text_profile {

StatusOr<std::unique_ptr<LineReader>> LineReader::Open(const std::string& path,
                                                       uint64_t* size_on_disk) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno(path, errno);
  if (S_ISDIR(st.st_mode)) return Status::InvalidArgument(path + ": is a directory");
  *size_on_disk = static_cast<uint64_t>(st.st_size);
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return Status::FromErrno(path, errno ? errno : ENOMEM);
  std::unique_ptr<LineReader> r(new LineReader());
  r->gz_ = f;
  r->path_ = path;
  return r;
}

LineReader::LineReader(std::string_view text) : text_(text), eof_(true) {}

LineReader::~LineReader() {
  if (gz_ != nullptr) gzclose(static_cast<gzFile>(gz_));
}

bool LineReader::Fill() {
  if (eof_) return false;
  if (pos_ > 0) {  // drop what was consumed: the buffer holds at most a line and a piece
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  char piece[1 << 16];
  const int n = gzread(static_cast<gzFile>(gz_), piece, sizeof(piece));
  if (n < 0) {
    int errnum = 0;
    status_ = Status::IOError(path_ + ": read error after byte " +
                              std::to_string(complete_bytes_ + buf_.size()) + ": " +
                              gzerror(static_cast<gzFile>(gz_), &errnum));
    eof_ = true;
    return false;
  }
  // A gzip stream cut short reads as a shorter text: the importer then sees a truncated tail.
  if (n == 0) {
    eof_ = true;
    return false;
  }
  buf_.append(piece, static_cast<size_t>(n));
  return true;
}

bool LineReader::Next(Line* line) {
  if (!status_.ok()) return false;
  const bool file = gz_ != nullptr;
  size_t scanned = 0;  // bytes of the unconsumed input known to hold no '\n'
  for (;;) {
    std::string_view avail = file ? std::string_view(buf_).substr(pos_) : text_;
    const size_t nl = avail.find('\n', scanned);
    if (nl != std::string_view::npos) {
      ++number_;
      std::string_view text = avail.substr(0, nl);
      complete_bytes_ += nl + 1;
      if (file) {
        pos_ += nl + 1;
      } else {
        text_.remove_prefix(nl + 1);
      }
      if (text.size() > kMaxLineBytes) {  // only text in memory gets here
        if (long_lines_++ == 0) first_long_line_ = number_;
        text = text.substr(0, kMaxLineBytes);
      }
      if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
      *line = Line{number_, text};
      return true;
    }
    scanned = avail.size();
    if (file && avail.size() > kMaxLineBytes) {
      // A line longer than any profile's: keep its start, drop the rest up to its '\n'.
      ++number_;
      cut_.assign(avail.substr(0, kMaxLineBytes));
      uint64_t dropped = avail.size();
      buf_.clear();
      pos_ = 0;
      for (;;) {
        if (!Fill()) {  // the file ends inside the long line: its start is the tail
          if (!status_.ok()) return false;
          tail_ = cut_;
          tail_number_ = number_;
          tail_bytes_ = dropped;
          return false;
        }
        const size_t end = buf_.find('\n');
        if (end == std::string::npos) {
          dropped += buf_.size();
          buf_.clear();
          continue;
        }
        complete_bytes_ += dropped + end + 1;
        pos_ = end + 1;
        break;
      }
      if (long_lines_++ == 0) first_long_line_ = number_;  // (a cut tail is the tail's)
      std::string_view text = cut_;
      if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
      *line = Line{number_, text};
      return true;
    }
    if (!file || !Fill()) {
      if (!status_.ok()) return false;
      avail = file ? std::string_view(buf_).substr(pos_) : text_;
      if (!avail.empty()) {
        tail_ = avail.substr(0, kMaxLineBytes);
        tail_number_ = number_ + 1;
        tail_bytes_ = avail.size();
      }
      return false;
    }
  }
}

SplitText SplitLines(std::string_view text) {
  SplitText s;
  // One allocation for the lines, not one per doubling.
  s.lines.reserve(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')));
  size_t pos = 0;
  uint32_t number = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    ++number;
    if (nl == std::string_view::npos) {
      s.tail = text.substr(pos);
      s.tail_number = number;
      break;
    }
    std::string_view line = text.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    s.lines.push_back(Line{number, line});
    pos = nl + 1;
    s.complete_bytes = pos;
  }
  return s;
}

std::vector<std::string_view> Fields(std::string_view s) {
  // Counted first, so that a line costs one allocation, not one per doubling (a profile line
  // has up to a dozen fields; allocation was most of this function's time).
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool blank = s[i] == ' ' || s[i] == '\t';
    if (!blank && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) ++n;
  }
  std::vector<std::string_view> out;
  out.reserve(n);
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    if (i >= s.size()) break;
    const size_t start = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
    out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string CollapseSpaces(std::string_view s) {
  std::string out;
  for (std::string_view f : Fields(s)) {
    if (!out.empty()) out += ' ';
    out += f;
  }
  return out;
}

std::string_view BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool IsDashRule(std::string_view s) {
  if (s.size() < 3) return false;
  for (char c : s) {
    if (c != '-') return false;
  }
  return true;
}

bool IsName(std::string_view s) {
  if (s.empty()) return false;
  const char c = s.front();
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

bool ParseInt(std::string_view s, int64_t* out) { return engine::ParseInt64(s, out); }

bool ParseNumber(std::string_view s, double* out) {
  if (s.empty()) return false;
  // from_chars also takes "inf", "nan" and hex-less forms only; printf never writes a '+' sign
  // before the mantissa.
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(*out);
}

bool ScaleToInt(double value, double scale, int64_t* out) {
  const double v = value * scale;
  if (!std::isfinite(v) || v < 0 || v >= 9.2e18) return false;
  *out = std::llround(v);
  return true;
}

void ProblemLog::Skip(uint32_t line, std::string_view reason) {
  ++skipped_;
  if (line_warnings_.size() < kMaxLineWarnings) {
    line_warnings_.push_back(path_ + ": line " + std::to_string(line) + ": " + std::string(reason));
  }
}

void ProblemLog::Warn(std::string_view message) {
  other_warnings_.push_back(path_ + ": " + std::string(message));
}

void ProblemLog::MoveTo(ImportResult* result) {
  for (std::string& w : line_warnings_) result->warnings.push_back(std::move(w));
  if (skipped_ > line_warnings_.size()) {
    result->warnings.push_back(path_ + ": " + std::to_string(skipped_ - line_warnings_.size()) +
                               " more malformed lines skipped");
  }
  for (std::string& w : other_warnings_) result->warnings.push_back(std::move(w));
  result->skipped += skipped_;
  line_warnings_.clear();
  other_warnings_.clear();
  skipped_ = 0;
}

void BindOptional(engine::Stmt& st, int i, const std::optional<int64_t>& v) {
  if (v) {
    st.Bind(i, *v);
  } else {
    st.BindNull(i);
  }
}

void BindOptional(engine::Stmt& st, int i, const std::optional<double>& v) {
  if (v) {
    st.Bind(i, *v);
  } else {
    st.BindNull(i);
  }
}

void BindOptional(engine::Stmt& st, int i, const std::optional<std::string>& v) {
  if (v) {
    st.Bind(i, std::string_view(*v));
  } else {
    st.BindNull(i);
  }
}

Status UpsertRankTimes(engine::Db* db, const RankTimes& row, std::string_view source, Merge merge) {
  // In kOverwrite the new value comes first in COALESCE, in kFillMissing the stored one.
  const char* sql_overwrite =
      "INSERT INTO rank_times(rank, host, comm_ns, elapsed_ns, user_ns, system_ns, "
      "maxrss_bytes, source) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
      "ON CONFLICT(rank) DO UPDATE SET host = COALESCE(excluded.host, host), "
      "comm_ns = COALESCE(excluded.comm_ns, comm_ns), "
      "elapsed_ns = COALESCE(excluded.elapsed_ns, elapsed_ns), "
      "user_ns = COALESCE(excluded.user_ns, user_ns), "
      "system_ns = COALESCE(excluded.system_ns, system_ns), "
      "maxrss_bytes = COALESCE(excluded.maxrss_bytes, maxrss_bytes), source = excluded.source";
  const char* sql_fill =
      "INSERT INTO rank_times(rank, host, comm_ns, elapsed_ns, user_ns, system_ns, "
      "maxrss_bytes, source) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
      "ON CONFLICT(rank) DO UPDATE SET host = COALESCE(excluded.host, host), "
      "comm_ns = COALESCE(comm_ns, excluded.comm_ns), "
      "elapsed_ns = COALESCE(elapsed_ns, excluded.elapsed_ns), "
      "user_ns = COALESCE(user_ns, excluded.user_ns), "
      "system_ns = COALESCE(system_ns, excluded.system_ns), "
      "maxrss_bytes = COALESCE(maxrss_bytes, excluded.maxrss_bytes), "
      "source = COALESCE(source, excluded.source)";
  TRACEDB_ASSIGN_OR_RETURN(
      engine::Stmt st, db->PrepareCached(merge == Merge::kOverwrite ? sql_overwrite : sql_fill));
  st.Bind(1, row.rank);
  BindOptional(st, 2, row.host);
  BindOptional(st, 3, row.comm_ns);
  BindOptional(st, 4, row.elapsed_ns);
  BindOptional(st, 5, row.user_ns);
  BindOptional(st, 6, row.system_ns);
  BindOptional(st, 7, row.maxrss_bytes);
  st.Bind(8, source);
  return st.Run();
}

Status UpsertRank(engine::Db* db, int32_t rank, const std::optional<std::string>& host,
                  int32_t world_size, std::string_view source) {
  TRACEDB_ASSIGN_OR_RETURN(
      engine::Stmt st,
      db->PrepareCached(
          "INSERT INTO ranks(rank, host, world_size, local_rank, clock_method, offset_ns, "
          "drift_ppm, uncertainty_ns, sync_points, source) "
          "VALUES(?1, ?2, ?3, NULL, 'none', 0, 0, 0, 0, ?4) "
          "ON CONFLICT(rank) DO UPDATE SET "
          "host = CASE WHEN host IS NULL OR host = '' THEN excluded.host ELSE host END, "
          "world_size = CASE WHEN world_size IS NULL OR world_size <= 0 "
          "THEN excluded.world_size ELSE world_size END"));
  st.Bind(1, rank);
  BindOptional(st, 2, host);
  st.Bind(3, world_size).Bind(4, source);
  return st.Run();
}

Status WriteSource(engine::Db* db, const SourceRow& row) {
  TRACEDB_ASSIGN_OR_RETURN(
      engine::Stmt st,
      db->PrepareCached("INSERT OR REPLACE INTO sources(path, format, rank, pid, offset, size, "
                        "finished, events) VALUES(?1, ?2, ?3, ?4, ?5, ?6, 1, ?7)"));
  st.Bind(1, row.path).Bind(2, row.format);
  if (row.rank) {
    st.Bind(3, *row.rank);
  } else {
    st.BindNull(3);
  }
  BindOptional(st, 4, row.pid);
  st.Bind(5, static_cast<int64_t>(row.offset))
      .Bind(6, static_cast<int64_t>(row.size))
      .Bind(7, static_cast<int64_t>(row.events));
  return st.Run();
}

void AddImportStats(engine::TraceWriter* writer, int32_t rank, uint64_t skipped, bool truncated,
                    uint64_t sections_skipped) {
  if (skipped > 0) writer->AddStat("import_skipped", rank, static_cast<int64_t>(skipped));
  if (truncated) writer->AddStat("import_truncated", rank, 1);
  if (sections_skipped > 0) {
    writer->AddStat("import_sections_skipped", rank, static_cast<int64_t>(sections_skipped));
  }
}

std::string_view FirstNonBlankLine(std::string_view text) {
  const SplitText s = SplitLines(text);
  for (const Line& l : s.lines) {
    if (!Trim(l.text).empty()) return Trim(l.text);
  }
  return Trim(s.tail);
}

Status ReadFirstLine(LineReader* lines, const std::string& file, std::string_view what,
                     Line* line) {
  bool got;
  while ((got = lines->Next(line)) && Trim(line->text).empty()) {
  }
  if (!lines->status().ok()) return lines->status();
  if (got) return Status::Ok();
  if (!Trim(lines->tail()).empty()) {
    return Status::InvalidArgument(file + ": line " + std::to_string(lines->tail_number()) +
                                   ": file ends inside its first line; not " + std::string(what));
  }
  return Status::InvalidArgument(file + ": empty file; not " + std::string(what));
}

}  // namespace tracedb::query::text_profile
