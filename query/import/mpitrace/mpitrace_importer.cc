// Importer of IBM mpitrace / hpctw profiles. See mpitrace_importer.h. The layout it reads
// (both dialects) and the rows it writes are in docs/importers-mpi-profiles.md; the writer is
// IBM/mpitrace src/mpitrace_common.c (write_profile_data).
// Thread safety: no shared state; each Import() parses into its own Profile.
#include "query/import/mpitrace/mpitrace_importer.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/db/db_schema.h"
#include "query/import/text_profile.h"

namespace tracedb::query {
namespace {

using text_profile::CollapseSpaces;
using text_profile::Fields;
using text_profile::Line;
using text_profile::ParseInt;
using text_profile::ParseNumber;
using text_profile::ProblemLog;
using text_profile::RankTimes;
using text_profile::ScaleToInt;
using text_profile::Trim;

constexpr char kFormat[] = "mpitrace";
constexpr double kNsPerSecond = 1e9;
constexpr double kBytesPerMiB = 1048576.0;
// The largest message-size bin whose bounds fit an int64: (2^61, 2^62].
constexpr double kMaxBinAverage = 4611686018427387904.0;

// One row of the routine table.
struct RoutineRow {
  std::string routine;
  int64_t calls = 0;
  double avg_bytes = 0;
  int64_t time_ns = 0;
};

// One bin of a message-size distribution, with the bounds derived from its average.
struct BinRow {
  std::string routine;
  int64_t min_bytes = 0;
  int64_t max_bytes = 0;
  int64_t calls = 0;
  double avg_bytes = 0;
  int64_t time_ns = 0;
};

// Everything read from one profile, written to the database once the whole file is parsed.
struct Profile {
  int32_t rank = -1;
  int32_t world_size = 0;
  std::vector<RoutineRow> routines;
  std::vector<BinRow> bins;
  RankTimes own;
  bool has_own_times = false;
  std::vector<RankTimes> all_ranks;                   // rank 0's "MPI timing summary for all ranks"
  std::vector<std::pair<double, int64_t>> histogram;  // (time-bin seconds, #ranks)
  std::vector<std::pair<std::string, std::string>> meta;
  bool reached_msgsizes = false;  // the file got as far as "Message size distributions:"
  uint64_t sections_skipped = 0;
};

// Where the parser is in the file.
enum class State {
  kPreamble,       // header and "Times from" line
  kRoutines,       // inside the routine table
  kAfterRoutines,  // totals and "Rank N reported" lines
  kMsgSizes,       // the message-size distributions
  kAfterMsgSizes,  // after the dashes that close them
  kSummary,        // rank 0: "Summary for all tasks:"
  kHistogram,      // rank 0: "Histogram of times spent in MPI"
  kTiming,         // rank 0: "MPI timing summary for all ranks:"
  kUnknown,        // a section this importer does not read
};

// Parses "Data for MPI rank R of N:" (optionally followed by "(all communicators)").
bool ParseRankHeader(std::string_view text, int32_t* rank, int32_t* world_size,
                     bool* all_communicators) {
  const std::vector<std::string_view> f = Fields(text);
  if (f.size() < 7 || f[0] != "Data" || f[1] != "for" || f[2] != "MPI" || f[3] != "rank" ||
      f[5] != "of") {
    return false;
  }
  std::string_view n = f[6];
  if (n.empty() || n.back() != ':') return false;
  n.remove_suffix(1);
  int64_t r = 0;
  int64_t size = 0;
  if (!ParseInt(f[4], &r) || !ParseInt(n, &size)) return false;
  if (size <= 0 || size > INT32_MAX || r < 0 || r >= size) return false;
  *rank = static_cast<int32_t>(r);
  *world_size = static_cast<int32_t>(size);
  *all_communicators = f.size() >= 9 && f[7] == "(all" && f[8] == "communicators)";
  return true;
}

// mpitrace puts a call of `bytes` bytes into bin 0 when bytes == 0, bin 1 when 1 <= bytes <= 4,
// and bin k >= 2 when 2^k < bytes <= 2^(k+1); it prints each bin's average (%.1f). The average of
// a bin lies within the bin, and rounding it to 0.1 cannot cross a bound (bounds are integers),
// so the bin follows from the printed average alone.
// An average that lies in no bin (between 0 and 1, or between 2^k and 2^k + 1) is impossible.
bool BinBounds(double avg, int64_t* min_bytes, int64_t* max_bytes) {
  if (!(avg >= 0) || avg > kMaxBinAverage) return false;
  if (avg == 0) {
    *min_bytes = 0;
    *max_bytes = 0;
  } else if (avg <= 4) {
    *min_bytes = 1;
    *max_bytes = 4;
  } else {
    const auto upper = std::bit_ceil(static_cast<uint64_t>(std::ceil(avg)));
    *max_bytes = static_cast<int64_t>(upper);
    *min_bytes = static_cast<int64_t>(upper / 2 + 1);
  }
  return avg >= static_cast<double>(*min_bytes) && avg <= static_cast<double>(*max_bytes);
}

// Bytes in one unit of a memory size printed by mpitrace ("MiB", "MBytes", …), or 0.
double MemoryUnit(std::string_view unit) {
  while (!unit.empty() && unit.back() == '.') unit.remove_suffix(1);
  // ru_maxrss / 1024.0 in both dialects: the old dialect's "MBytes" are MiB as well.
  if (unit == "MiB" || unit == "MBytes" || unit == "MB") return kBytesPerMiB;
  if (unit == "GiB" || unit == "GBytes" || unit == "GB") return kBytesPerMiB * 1024;
  if (unit == "KiB" || unit == "KBytes" || unit == "KB") return 1024;
  return 0;
}

std::string FormatNumber(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : std::string("0");
}

class Parser {
 public:
  Parser(Profile* profile, ProblemLog* log) : p_(profile), log_(log) {}

  void ParseLine(const Line& line);
  bool stopped() const { return stopped_; }
  State state() const { return state_; }
  // Lines read after the header of the all-ranks timing table, well-formed or not.
  size_t timing_rows() const { return timing_rows_; }

 private:
  enum class Match { kNotMine, kDone };

  void Meta(std::string key, std::string value) {
    p_->meta.emplace_back(std::move(key), std::move(value));
  }
  std::string RankKey(std::string_view name) const {
    return "mpitrace.rank" + std::to_string(p_->rank) + "." + std::string(name);
  }
  void EnterUnknown(const Line& line, std::string_view title);

  Match ParseGlobal(const Line& line, std::string_view text,
                    const std::vector<std::string_view>& f);
  Match ParseAssignment(const Line& line, std::string_view text);
  void ParseRoutineRow(const Line& line, const std::vector<std::string_view>& f);
  void ParseMsgSizeLine(const Line& line, const std::vector<std::string_view>& f);
  void ParseHistogramLine(const Line& line, const std::vector<std::string_view>& f);
  void ParseTimingLine(const Line& line, const std::vector<std::string_view>& f);

  Profile* p_;
  ProblemLog* log_;
  State state_ = State::kPreamble;
  bool stopped_ = false;
  bool routine_header_seen_ = false;
  bool routine_rows_seen_ = false;
  bool after_rule_ = false;  // the previous non-blank line is an unindented rule of dashes
  std::string bin_routine_;  // routine of the current message-size block; "" between blocks
  std::set<std::string> routines_seen_;
  std::set<std::pair<std::string, int64_t>> bins_seen_;  // (routine, min_bytes)
  std::set<int32_t> timing_ranks_seen_;
  std::vector<std::string> timing_columns_;
  size_t timing_rows_ = 0;
};

void Parser::EnterUnknown(const Line& line, std::string_view title) {
  state_ = State::kUnknown;
  p_->sections_skipped++;
  log_->Warn("line " + std::to_string(line.number) + ": section \"" + std::string(title) +
             "\" is not imported");
}

void Parser::ParseLine(const Line& line) {
  const std::string_view text = Trim(line.text);
  if (text.empty()) {
    bin_routine_.clear();  // a blank line ends a message-size block
    return;
  }
  const bool unindented = line.text.front() != ' ' && line.text.front() != '\t';
  const bool after_rule = after_rule_;
  after_rule_ = false;
  if (text_profile::IsDashRule(text)) {
    if (state_ == State::kRoutines && routine_rows_seen_) state_ = State::kAfterRoutines;
    if (state_ == State::kMsgSizes) state_ = State::kAfterMsgSizes;
    after_rule_ = unindented;
    return;
  }
  const std::vector<std::string_view> f = Fields(text);
  if (ParseGlobal(line, text, f) == Match::kDone) return;
  // A heading this importer does not know ("Profile data by communicator size:", "Profile by
  // call stack, …") starts a section that is skipped. No row of a known table ends with ':'.
  // Inside a skipped section only a top-level heading (unindented, under an unindented rule of
  // dashes, as mpitrace writes its sections) starts another one.
  const bool heading = text.back() == ':' || text.starts_with("Profile ");
  if (state_ == State::kUnknown) {
    if (heading && unindented && after_rule) EnterUnknown(line, text);
    return;  // the rest of a section that is not imported
  }
  if (heading) {
    EnterUnknown(line, text);
    return;
  }
  switch (state_) {
    case State::kRoutines:
      ParseRoutineRow(line, f);
      return;
    case State::kMsgSizes:
      ParseMsgSizeLine(line, f);
      return;
    case State::kHistogram:
      ParseHistogramLine(line, f);
      return;
    case State::kTiming:
      ParseTimingLine(line, f);
      return;
    default:
      log_->Skip(line.number, "unrecognized line");
      return;
  }
}

Parser::Match Parser::ParseGlobal(const Line& line, std::string_view text,
                                  const std::vector<std::string_view>& f) {
  if (text.starts_with("Data for MPI rank ")) {
    log_->Skip(line.number, "a second profile starts here; the rest of the file is ignored");
    stopped_ = true;
    return Match::kDone;
  }
  if (text.starts_with("Times from ") || text.starts_with("Times and statistics from ")) {
    const bool old_dialect = text.starts_with("Times and");
    Meta("mpitrace.dialect", old_dialect ? "hpctw" : "mpitrace");
    std::string_view window = text.substr(text.find(" from ") + 6);
    if (window.ends_with(".")) window.remove_suffix(1);
    Meta("mpitrace.window", std::string(window));
    return Match::kDone;
  }
  if (f.size() == 6 && f[0] == "MPI" && f[1] == "Routine" && f[2] == "#calls" && f[3] == "avg." &&
      f[4] == "bytes" && f[5] == "time(sec)") {
    if (!routine_header_seen_) {
      routine_header_seen_ = true;
      state_ = State::kRoutines;
    } else if (state_ != State::kUnknown) {
      log_->Skip(line.number, "a second routine table");
    }
    return Match::kDone;
  }
  // "MPI task R of N had the minimum communication time."
  if (f.size() == 10 && f[0] == "MPI" && f[1] == "task" && f[3] == "of" && f[5] == "had" &&
      f[8] == "communication" && f[9] == "time.") {
    int64_t task = 0;
    if (!ParseInt(f[2], &task) || (f[7] != "minimum" && f[7] != "median" && f[7] != "maximum")) {
      log_->Skip(line.number, "bad \"MPI task … communication time\" line");
    } else {
      Meta("mpitrace.comm_time_" + std::string(f[7].substr(0, 3)) + "_task", std::to_string(task));
    }
    return Match::kDone;
  }
  // "Rank N reported the largest memory utilization : X MiB" / "… elapsed time : X sec"
  if (f.size() >= 5 && f[0] == "Rank" && f[2] == "reported" && f[3] == "the" && f[4] == "largest") {
    const size_t colon = text.find(':');
    const std::vector<std::string_view> v =
        Fields(colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1));
    int64_t rank = 0;
    double value = 0;
    int64_t scaled = 0;
    const bool memory = text.find("memory utilization") != std::string_view::npos;
    const bool elapsed = text.find("elapsed time") != std::string_view::npos;
    const double unit = memory ? (v.size() >= 2 ? MemoryUnit(v[1]) : 0) : kNsPerSecond;
    if (!ParseInt(f[1], &rank) || v.empty() || !ParseNumber(v[0], &value) || unit == 0 ||
        (!memory && !elapsed) || !ScaleToInt(value, unit, &scaled)) {
      log_->Skip(line.number, "bad \"Rank N reported the largest …\" line");
    } else if (memory) {
      Meta("mpitrace.max_memory_rank", std::to_string(rank));
      Meta("mpitrace.max_memory_bytes", std::to_string(scaled));
    } else {
      Meta("mpitrace.max_elapsed_rank", std::to_string(rank));
      Meta("mpitrace.max_elapsed_ns", std::to_string(scaled));
    }
    return Match::kDone;
  }
  if (text.starts_with("Message size distributions:")) {
    state_ = State::kMsgSizes;
    p_->reached_msgsizes = true;
    bin_routine_.clear();
    return Match::kDone;
  }
  if (text == "Summary for all tasks:" || text == "Communication summary for all tasks:") {
    state_ = State::kSummary;
    return Match::kDone;
  }
  if (text == "Histogram of times spent in MPI") {
    state_ = State::kHistogram;
    return Match::kDone;
  }
  if (text == "MPI timing summary for all ranks:") {
    state_ = State::kTiming;
    timing_columns_.clear();
    return Match::kDone;
  }
  if (text.find('=') != std::string_view::npos) return ParseAssignment(line, text);
  return Match::kNotMine;
}

// "label = value unit…" lines: totals of this rank, and rank 0's min/median/max summary.
Parser::Match Parser::ParseAssignment(const Line& line, std::string_view text) {
  const size_t eq = text.find('=');
  const std::string label = CollapseSpaces(text.substr(0, eq));
  const std::vector<std::string_view> v = Fields(text.substr(eq + 1));
  double value = 0;
  const bool has_value = !v.empty() && ParseNumber(v[0], &value);
  int64_t ns = 0;
  const bool has_ns = has_value && ScaleToInt(value, kNsPerSecond, &ns);

  std::optional<int64_t>* own = nullptr;
  if (label == "total communication time") own = &p_->own.comm_ns;
  if (label == "total elapsed time") own = &p_->own.elapsed_ns;
  if (label == "user cpu time") own = &p_->own.user_ns;
  if (label == "system time") own = &p_->own.system_ns;
  if (own != nullptr) {
    if (!has_ns) {
      log_->Skip(line.number, "bad value for \"" + label + "\"");
    } else {
      *own = ns;
      p_->has_own_times = true;
    }
    return Match::kDone;
  }
  if (label == "max resident set size" || label == "aggregate memory") {
    int64_t bytes = 0;
    const double unit = v.size() >= 2 ? MemoryUnit(v[1]) : 0;
    if (!has_value || unit == 0 || !ScaleToInt(value, unit, &bytes)) {
      log_->Skip(line.number, "bad value for \"" + label + "\"");
    } else if (label == "aggregate memory") {
      Meta("mpitrace.aggregate_memory_bytes", std::to_string(bytes));
    } else {
      p_->own.maxrss_bytes = bytes;
      p_->has_own_times = true;
    }
    return Match::kDone;
  }
  const char* rank_key = nullptr;
  if (label == "synchronization time") rank_key = "sync_ns";
  if (label == "exclusive elapsed time") rank_key = "exclusive_elapsed_ns";
  if (label == "total MPI-IO time") rank_key = "mpi_io_ns";
  if (rank_key != nullptr) {
    if (!has_ns) {
      log_->Skip(line.number, "bad value for \"" + label + "\"");
    } else {
      Meta(RankKey(rank_key), std::to_string(ns));
    }
    return Match::kDone;
  }
  // "minimum communication time = X sec for task T" (rank 0's summary)
  for (const char* which : {"minimum", "median", "maximum"}) {
    if (label == std::string(which) + " communication time") {
      int64_t task = 0;
      if (!has_ns || v.size() != 5 || v[2] != "for" || v[3] != "task" || !ParseInt(v[4], &task)) {
        log_->Skip(line.number, "bad value for \"" + label + "\"");
      } else {
        const std::string key = "mpitrace.comm_time_" + std::string(which).substr(0, 3);
        Meta(key + "_ns", std::to_string(ns));
        Meta(key + "_task", std::to_string(task));
      }
      return Match::kDone;
    }
  }
  for (const char* which : {"minimum", "average", "maximum"}) {
    if (label == std::string(which) + " MPI-IO time") {
      if (!has_ns) {
        log_->Skip(line.number, "bad value for \"" + label + "\"");
      } else {
        Meta("mpitrace.mpi_io_" + std::string(which).substr(0, 3) + "_ns", std::to_string(ns));
      }
      return Match::kDone;
    }
  }
  return Match::kNotMine;
}

void Parser::ParseRoutineRow(const Line& line, const std::vector<std::string_view>& f) {
  RoutineRow r;
  double time_s = 0;
  if (f.size() != 4 || !text_profile::IsName(f[0]) || !ParseInt(f[1], &r.calls) || r.calls < 0 ||
      !ParseNumber(f[2], &r.avg_bytes) || r.avg_bytes < 0 || !ParseNumber(f[3], &time_s) ||
      !ScaleToInt(time_s, kNsPerSecond, &r.time_ns)) {
    log_->Skip(line.number, "bad routine-table row (expected: routine #calls avg.bytes time)");
    return;
  }
  r.routine = std::string(f[0]);
  if (!routines_seen_.insert(r.routine).second) {
    log_->Skip(line.number, "routine " + r.routine + " listed twice");
    return;
  }
  routine_rows_seen_ = true;
  p_->routines.push_back(std::move(r));
}

void Parser::ParseMsgSizeLine(const Line& line, const std::vector<std::string_view>& f) {
  if (f.size() == 5 && f[1] == "#calls" && f[2] == "avg." && f[3] == "bytes" &&
      f[4] == "time(sec)") {
    if (!text_profile::IsName(f[0])) {
      log_->Skip(line.number, "bad message-size header");
      bin_routine_.clear();
    } else {
      bin_routine_ = std::string(f[0]);
    }
    return;
  }
  BinRow b;
  double time_s = 0;
  if (f.size() != 3 || !ParseInt(f[0], &b.calls) || b.calls < 0 ||
      !ParseNumber(f[1], &b.avg_bytes) || !ParseNumber(f[2], &time_s) ||
      !ScaleToInt(time_s, kNsPerSecond, &b.time_ns) ||
      !BinBounds(b.avg_bytes, &b.min_bytes, &b.max_bytes)) {
    log_->Skip(line.number, "bad message-size row (expected: #calls avg.bytes time)");
    return;
  }
  if (bin_routine_.empty()) {
    log_->Skip(line.number, "message-size row outside a routine's block");
    return;
  }
  b.routine = bin_routine_;
  if (!bins_seen_.emplace(b.routine, b.min_bytes).second) {
    log_->Skip(line.number, "a second row for the " + b.routine + " bin of " +
                                std::to_string(b.min_bytes) + " to " + std::to_string(b.max_bytes) +
                                " bytes");
    return;
  }
  p_->bins.push_back(std::move(b));
}

void Parser::ParseHistogramLine(const Line& line, const std::vector<std::string_view>& f) {
  if (f.size() == 2 && f[0] == "time-bin" && f[1] == "#ranks") return;
  double t = 0;
  int64_t n = 0;
  if (f.size() != 2 || !ParseNumber(f[0], &t) || !ParseInt(f[1], &n) || n < 0) {
    log_->Skip(line.number, "bad histogram row (expected: time-bin #ranks)");
    return;
  }
  p_->histogram.emplace_back(t, n);
}

void Parser::ParseTimingLine(const Line& line, const std::vector<std::string_view>& f) {
  if (timing_columns_.empty()) {
    if (f.empty() || f[0] != "taskid") {
      log_->Skip(line.number, "expected the header of the all-ranks timing table");
      return;
    }
    for (std::string_view c : f) timing_columns_.emplace_back(c);
    return;
  }
  ++timing_rows_;
  if (f.size() != timing_columns_.size()) {
    log_->Skip(line.number, "timing-table row has " + std::to_string(f.size()) + " columns, " +
                                "the header " + std::to_string(timing_columns_.size()));
    return;
  }
  RankTimes t;
  bool ok = true;
  for (size_t i = 0; i < f.size() && ok; ++i) {
    const std::string& c = timing_columns_[i];
    double v = 0;
    int64_t scaled = 0;
    if (c == "taskid") {
      int64_t r = 0;
      ok = ParseInt(f[i], &r) && r >= 0 && r < p_->world_size;
      t.rank = static_cast<int32_t>(r);
    } else if (c == "hostname" || c == "host") {
      t.host = std::string(f[i]);
    } else if (c == "comm(s)" || c == "elapsed(s)" || c == "user(s)" || c == "system(s)") {
      ok = ParseNumber(f[i], &v) && ScaleToInt(v, kNsPerSecond, &scaled);
      if (c == "comm(s)") t.comm_ns = scaled;
      if (c == "elapsed(s)") t.elapsed_ns = scaled;
      if (c == "user(s)") t.user_ns = scaled;
      if (c == "system(s)") t.system_ns = scaled;
    } else if (c.starts_with("size(") && c.ends_with(")")) {
      const double unit = MemoryUnit(std::string_view(c).substr(5, c.size() - 6));
      ok = unit > 0 && ParseNumber(f[i], &v) && ScaleToInt(v, unit, &scaled);
      t.maxrss_bytes = scaled;
    }
    // cpu and switches have no column in rank_times.
  }
  if (!ok) {
    log_->Skip(line.number, "bad timing-table row");
    return;
  }
  if (!timing_ranks_seen_.insert(t.rank).second) {
    log_->Skip(line.number, "rank " + std::to_string(t.rank) + " listed twice in the timing table");
    return;
  }
  p_->all_ranks.push_back(std::move(t));
}

Status WriteProfile(const Profile& p, engine::TraceWriter* writer, uint64_t* rows) {
  engine::Db* db = writer->db();
  std::optional<std::string> own_host;
  for (const RankTimes& t : p.all_ranks) {
    if (t.rank == p.rank) own_host = t.host;
  }
  TRACEDB_RETURN_IF_ERROR(text_profile::UpsertRank(db, p.rank, own_host, p.world_size, kFormat));
  for (const RankTimes& t : p.all_ranks) {
    if (t.rank != p.rank) {
      TRACEDB_RETURN_IF_ERROR(text_profile::UpsertRank(db, t.rank, t.host, p.world_size, kFormat));
    }
  }
  if (p.has_own_times || !p.all_ranks.empty()) {
    TRACEDB_RETURN_IF_ERROR(engine::EnsureTable(db, "rank_times"));
  }
  if (p.has_own_times) {
    RankTimes own = p.own;
    own.rank = p.rank;
    own.host = own_host;
    TRACEDB_RETURN_IF_ERROR(
        text_profile::UpsertRankTimes(db, own, kFormat, text_profile::Merge::kOverwrite));
    ++*rows;
  }
  for (const RankTimes& t : p.all_ranks) {
    TRACEDB_RETURN_IF_ERROR(
        text_profile::UpsertRankTimes(db, t, kFormat, text_profile::Merge::kFillMissing));
    ++*rows;
  }
  {
    TRACEDB_RETURN_IF_ERROR(engine::EnsureTable(db, "mpi_profile"));
    TRACEDB_ASSIGN_OR_RETURN(
        engine::Stmt st,
        db->PrepareCached(
            "INSERT OR REPLACE INTO mpi_profile(rank, routine, calls, bytes, time_ns, "
            "source) VALUES(?1, ?2, ?3, ?4, ?5, ?6)"));
    for (const RoutineRow& r : p.routines) {
      // Bytes are whole; the product of the count and a one-decimal average is rounded.
      const double bytes = std::round(static_cast<double>(r.calls) * r.avg_bytes);
      st.Bind(1, p.rank)
          .Bind(2, std::string_view(r.routine))
          .Bind(3, r.calls)
          .Bind(4, bytes)
          .Bind(5, r.time_ns)
          .Bind(6, std::string_view(kFormat));
      TRACEDB_RETURN_IF_ERROR(st.Run());
      ++*rows;
    }
  }
  {
    TRACEDB_RETURN_IF_ERROR(engine::EnsureTable(db, "mpi_msgsize"));
    TRACEDB_ASSIGN_OR_RETURN(
        engine::Stmt st,
        db->PrepareCached("INSERT OR REPLACE INTO mpi_msgsize(rank, routine, min_bytes, max_bytes, "
                          "calls, avg_bytes, time_ns) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
    for (const BinRow& b : p.bins) {
      st.Bind(1, p.rank)
          .Bind(2, std::string_view(b.routine))
          .Bind(3, b.min_bytes)
          .Bind(4, b.max_bytes)
          .Bind(5, b.calls)
          .Bind(6, b.avg_bytes)
          .Bind(7, b.time_ns);
      TRACEDB_RETURN_IF_ERROR(st.Run());
      ++*rows;
    }
  }
  std::map<std::string, std::string> meta;
  for (const auto& [k, v] : p.meta) meta[k] = v;  // the last value of a repeated key wins
  meta["mpitrace.world_size"] = std::to_string(p.world_size);
  if (!p.histogram.empty()) {
    std::string json = "[";
    for (size_t i = 0; i < p.histogram.size(); ++i) {
      if (i > 0) json += ',';
      json += "[" + FormatNumber(p.histogram[i].first) + "," +
              std::to_string(p.histogram[i].second) + "]";
    }
    json += "]";
    meta["mpitrace.comm_time_histogram"] = json;
  }
  for (const auto& [k, v] : meta) TRACEDB_RETURN_IF_ERROR(writer->SetMeta(k, v));
  return Status::Ok();
}

// Does the file name look like mpitrace's: [prefix]mpi_profile.<jobid>.<rank> or
// [prefix]mpi_profile.<jobid>.<timestamp>.<rank>, optionally .gz?
bool IsProfileName(std::string_view path) {
  std::string_view base = text_profile::BaseName(path);
  if (base.ends_with(".gz")) base.remove_suffix(3);
  const size_t at = base.rfind("mpi_profile.");
  if (at == std::string_view::npos) return false;
  std::string_view rest = base.substr(at + 12);
  std::vector<std::string_view> parts;
  size_t pos = 0;
  for (;;) {
    const size_t dot = rest.find('.', pos);
    parts.push_back(rest.substr(pos, dot == std::string_view::npos ? dot : dot - pos));
    if (dot == std::string_view::npos) break;
    pos = dot + 1;
  }
  if (parts.size() != 2 && parts.size() != 3) return false;
  return text_profile::AllDigits(parts.front()) && text_profile::AllDigits(parts.back()) &&
         !parts[1].empty();
}

class MpitraceImporter : public Importer {
 public:
  const char* name() const override { return kFormat; }

  int Detect(std::string_view path, std::string_view head) const override {
    const int name_bonus = IsProfileName(path) ? 20 : 0;
    // The header is the first line mpitrace writes; look past a few blank lines.
    const std::string_view first = text_profile::FirstNonBlankLine(head.substr(0, 4096));
    int32_t rank = 0;
    int32_t size = 0;
    bool all = false;
    if (ParseRankHeader(first, &rank, &size, &all)) return 80 + name_bonus;
    if (head.substr(0, 1024).find("Data for MPI rank ") != std::string_view::npos) {
      return 40 + name_bonus;
    }
    return 0;
  }

  Status Import(const ImportInput& input, engine::TraceWriter* writer,
                ImportResult* result) override {
    uint64_t size = 0;
    TRACEDB_ASSIGN_OR_RETURN(auto lines, text_profile::LineReader::Open(input.path, &size));
    return ImportMpitraceLines(input.path, lines.get(), size, input.rank_hint, writer, result);
  }
};

}  // namespace

std::unique_ptr<Importer> NewMpitraceImporter() { return std::make_unique<MpitraceImporter>(); }

Status ImportMpitraceText(std::string_view path, std::string_view text, uint64_t size_on_disk,
                          int32_t rank_hint, engine::TraceWriter* writer, ImportResult* result) {
  text_profile::LineReader lines(text);
  return ImportMpitraceLines(path, &lines, size_on_disk, rank_hint, writer, result);
}

Status ImportMpitraceLines(std::string_view path, text_profile::LineReader* lines,
                           uint64_t size_on_disk, int32_t rank_hint, engine::TraceWriter* writer,
                           ImportResult* result) {
  const std::string file(path);
  if (!writer->in_batch()) return Status::Internal(file + ": import needs an open batch");

  // The first non-blank line must be the header: anything else is not an mpitrace profile.
  // Line by line (bounded memory, however many lines: text_profile.h).
  text_profile::Line line;
  TRACEDB_RETURN_IF_ERROR(text_profile::ReadFirstLine(lines, file, "an mpitrace profile", &line));
  Profile p;
  bool all_communicators = false;
  if (!ParseRankHeader(Trim(line.text), &p.rank, &p.world_size, &all_communicators)) {
    return Status::InvalidArgument(file + ": line " + std::to_string(line.number) +
                                   ": not an IBM mpitrace profile (expected \"Data for MPI rank "
                                   "R of N:\")");
  }
  if (all_communicators) p.meta.emplace_back("mpitrace.communicators", "all");

  ProblemLog log(file);
  if (rank_hint >= 0 && rank_hint != p.rank) {
    log.Warn("the file name says rank " + std::to_string(rank_hint) + ", its content rank " +
             std::to_string(p.rank) + "; using " + std::to_string(p.rank));
  }
  Parser parser(&p, &log);
  while (!parser.stopped() && lines->Next(&line)) parser.ParseLine(line);
  // Past where the parser stops, the lines are only counted (the tail says whether the file
  // was cut short).
  while (lines->Next(&line)) {
  }
  if (!lines->status().ok()) return lines->status();
  if (lines->long_lines() > 0) {
    log.Warn(std::to_string(lines->long_lines()) + " lines longer than " +
             std::to_string(text_profile::kMaxLineBytes) + " bytes were cut (the first: line " +
             std::to_string(lines->first_long_line()) + ")");
  }

  // Truncation: an incomplete last line is dropped; a file that stops before its message-size
  // section, or inside rank 0's all-ranks summary, lost its end.
  bool truncated = false;
  if (!lines->tail().empty()) {
    truncated = true;
    result->truncated_bytes += lines->tail_bytes();
    log.Warn("line " + std::to_string(lines->tail_number()) + ": incomplete last line (" +
             std::to_string(lines->tail_bytes()) + " bytes) ignored: the file is truncated");
  } else if (!parser.stopped()) {
    const State s = parser.state();
    if (!p.reached_msgsizes) {
      truncated = true;
      log.Warn("the file ends before its message-size section: it is truncated");
    } else if (s == State::kSummary || s == State::kHistogram ||
               (s == State::kTiming && parser.timing_rows() < static_cast<size_t>(p.world_size))) {
      truncated = true;
      log.Warn("the file ends inside the all-ranks summary: it is truncated");
    }
  }

  uint64_t rows = 0;
  TRACEDB_RETURN_IF_ERROR(WriteProfile(p, writer, &rows));
  text_profile::AddImportStats(writer, p.rank, log.skipped(), truncated, p.sections_skipped);
  text_profile::SourceRow src;
  src.path = file;
  src.format = kFormat;
  src.rank = p.rank;
  src.offset = lines->complete_bytes();
  src.size = size_on_disk;
  src.events = rows;
  TRACEDB_RETURN_IF_ERROR(text_profile::WriteSource(writer->db(), src));

  result->rank = p.rank;
  result->ranks = {p.rank};
  result->world_size = p.world_size;
  result->events += rows;
  result->rows_table = "rank_times, mpi_profile, mpi_msgsize";
  log.MoveTo(result);
  return Status::Ok();
}

}  // namespace tracedb::query
