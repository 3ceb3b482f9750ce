// Importer of mpiP reports. See mpip_importer.h. The sections it reads and the rows it writes are
// in docs/importers-mpi-profiles.md; the writer is LLNL/mpiP report.c (mpiPi_profile_print).
// Thread safety: no shared state; each Import() parses into its own Report.
#include "query/import/mpip/mpip_importer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/db/db_schema.h"
#include "query/import/text_profile.h"

namespace tracedb::query {
namespace {

using text_profile::BindOptional;
using text_profile::Fields;
using text_profile::Line;
using text_profile::ParseInt;
using text_profile::ParseNumber;
using text_profile::ProblemLog;
using text_profile::ScaleToInt;
using text_profile::Trim;

constexpr char kFormat[] = "mpip";
constexpr double kNsPerSecond = 1e9;
constexpr double kNsPerMs = 1e6;
constexpr int32_t kAggregateRank = -1;  // the `*` rows: every rank together

// One callsite from "Callsites: N".
struct Site {
  std::string routine;   // MPI_ + the MPI_Call column
  std::string location;  // "file:line function" (or "address function"), then "; " + outer levels
};

// The statistics of one (rank, site, routine) from the two "Callsite … statistics" sections.
struct SiteStats {
  std::optional<int64_t> calls;
  std::optional<double> max_ms, mean_ms, min_ms;
  std::optional<double> app_pct, mpi_pct;
  std::optional<double> bytes_sum;
  std::optional<int64_t> sent_calls;
};

// A site's line in "Aggregate Time" or "Aggregate Sent Message Size" (the top twenty): used for
// the rank -1 row of a site that has no `*` row.
struct Aggregate {
  std::optional<int64_t> calls;
  std::optional<double> time_ms, app_pct, mpi_pct;
  std::optional<double> sent_total;
};

using StatsKey = std::tuple<int32_t, int64_t, std::string>;  // (rank or -1, site, routine)

struct Report {
  std::vector<std::pair<std::string, std::string>> meta;
  std::optional<int64_t> collector_pid;
  std::map<int32_t, std::string> hosts;                // MPI Task Assignment
  std::map<int32_t, std::pair<double, double>> times;  // rank -> (AppTime s, MPITime s)
  int64_t declared_sites = -1;                         // N of "Callsites: N"
  std::map<int64_t, Site> sites;
  std::map<StatsKey, SiteStats> stats;
  std::map<std::pair<int64_t, std::string>, Aggregate> aggregates;
  bool complete = false;  // "End of Report" was read
  uint64_t sections_skipped = 0;
};

enum class Section {
  kHeader,
  kMpiTime,
  kCallsites,
  kAggregateTime,
  kAggregateSent,
  kSiteTime,
  kSiteSent,
  kEnd,
  kUnknown,
};

// A percentage column: a number, or nan/inf (mpiP divides by zero times) stored as NULL.
bool ParsePercent(std::string_view s, std::optional<double>* out) {
  double v = 0;
  if (ParseNumber(s, &v)) {
    *out = v;
    return true;
  }
  if (s.starts_with("-")) s.remove_prefix(1);
  if (s == "nan" || s == "inf" || s == "NaN" || s == "Inf") {
    out->reset();
    return true;
  }
  return false;
}

// A rank column: a rank, or "*" (kAggregateRank).
bool ParseRank(std::string_view s, int32_t* rank) {
  if (s == "*") {
    *rank = kAggregateRank;
    return true;
  }
  int64_t r = 0;
  if (!ParseInt(s, &r) || r < 0 || r > INT32_MAX) return false;
  *rank = static_cast<int32_t>(r);
  return true;
}

bool ParseMs(std::string_view s, std::optional<double>* out) {
  double v = 0;
  int64_t ns = 0;
  if (!ParseNumber(s, &v) || !ScaleToInt(v, kNsPerMs, &ns)) return false;
  *out = v;
  return true;
}

std::string MetaKey(std::string_view header_key) {
  std::string key = "mpip.";
  for (char c : header_key) {
    if (c >= 'A' && c <= 'Z') {
      key += static_cast<char>(c - 'A' + 'a');
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      key += c;
    } else if (key.back() != '_') {
      key += '_';
    }
  }
  while (key.back() == '_') key.pop_back();
  return key;
}

std::string Join(const std::vector<std::string_view>& f, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to; ++i) {
    if (!out.empty()) out += ' ';
    out += f[i];
  }
  return out;
}

class Parser {
 public:
  Parser(Report* report, ProblemLog* log) : r_(report), log_(log) {}
  void ParseLine(const Line& line);
  Section section() const { return section_; }

 private:
  void StartSection(const Line& line, std::string_view title);
  void SkipSection(const Line& line, std::string_view title, std::string_view why);
  bool CheckColumns(const Line& line, const std::vector<std::string_view>& f);
  void ParseHeaderLine(const Line& line, std::string_view text);
  void ParseMpiTime(const Line& line, const std::vector<std::string_view>& f);
  void ParseCallsite(const Line& line, const std::vector<std::string_view>& f);
  void ParseAggregateTime(const Line& line, const std::vector<std::string_view>& f);
  void ParseAggregateSent(const Line& line, std::string_view text,
                          const std::vector<std::string_view>& f);
  void ParseSiteTime(const Line& line, const std::vector<std::string_view>& f);
  void ParseSiteSent(const Line& line, const std::vector<std::string_view>& f);

  Report* r_;
  ProblemLog* log_;
  Section section_ = Section::kHeader;
  std::string title_;
  bool columns_seen_ = false;     // the current section's column header was read
  bool aggregate_count_ = false;  // Aggregate Time has a Count column (mpiP 3.5+)
  size_t aggregate_columns_ = 0;
};

void Parser::SkipSection(const Line& line, std::string_view title, std::string_view why) {
  section_ = Section::kUnknown;
  r_->sections_skipped++;
  log_->Warn("line " + std::to_string(line.number) + ": section \"" + std::string(title) + "\" " +
             std::string(why));
}

void Parser::StartSection(const Line& line, std::string_view title) {
  title_ = std::string(title);
  columns_seen_ = false;
  if (title == "MPI Time (seconds)") {
    section_ = Section::kMpiTime;
  } else if (title.starts_with("Callsites: ")) {
    section_ = Section::kCallsites;
    if (r_->declared_sites >= 0) {
      SkipSection(line, title, "appears twice; not imported");
      return;
    }
    int64_t n = 0;
    if (!ParseInt(title.substr(11), &n) || n < 0) {
      log_->Skip(line.number, "bad callsite count");
    } else {
      r_->declared_sites = n;
    }
  } else if (title.starts_with("Aggregate Time (")) {
    section_ = Section::kAggregateTime;
  } else if (title.starts_with("Aggregate Sent Message Size (")) {
    section_ = Section::kAggregateSent;
  } else if (title.starts_with("Callsite Time statistics (all, milliseconds)")) {
    section_ = Section::kSiteTime;
  } else if (title == "Callsite Message Sent statistics (all, sent bytes)") {
    section_ = Section::kSiteSent;
  } else if (title == "End of Report") {
    section_ = Section::kEnd;
    r_->complete = true;
  } else {
    SkipSection(line, title, "is not imported");
  }
}

// Checks the column header of the current section; a section laid out otherwise is skipped.
bool Parser::CheckColumns(const Line& line, const std::vector<std::string_view>& f) {
  using V = std::vector<std::string_view>;
  bool ok = false;
  switch (section_) {
    case Section::kMpiTime:
      ok = f == V{"Task", "AppTime", "MPITime", "MPI%"};
      break;
    case Section::kCallsites:
      ok = f == V{"ID", "Lev", "File/Address", "Line", "Parent_Funct", "MPI_Call"};
      break;
    case Section::kAggregateTime:
      // 3.4: Call Site Time App% MPI% [COV]; 3.5+: … MPI% Count [COV].
      ok = f.size() >= 5 && f.size() <= 7 &&
           V(f.begin(), f.begin() + 5) == V{"Call", "Site", "Time", "App%", "MPI%"};
      if (ok) {
        aggregate_count_ = f.size() >= 6 && f[5] == "Count";
        ok = f.size() == 5 || (f.size() == 6 && (aggregate_count_ || f[5] == "COV")) ||
             (f.size() == 7 && aggregate_count_ && f[6] == "COV");
        aggregate_columns_ = f.size();
      }
      break;
    case Section::kAggregateSent:
      ok = f == V{"Call", "Site", "Count", "Total", "Avrg", "Sent%"};
      break;
    case Section::kSiteTime:
      ok = f == V{"Name", "Site", "Rank", "Count", "Max", "Mean", "Min", "App%", "MPI%"};
      break;
    case Section::kSiteSent:
      ok = f == V{"Name", "Site", "Rank", "Count", "Max", "Mean", "Min", "Sum"};
      break;
    default:
      break;
  }
  if (!ok) SkipSection(line, title_, "has unexpected columns; not imported");
  return ok;
}

void Parser::ParseLine(const Line& line) {
  const std::string_view text = Trim(line.text);
  if (text.empty() || text_profile::IsDashRule(text)) return;
  if (text.starts_with("@--- ")) {
    std::string_view title = text.substr(5);
    while (!title.empty() && (title.back() == '-' || title.back() == ' ')) title.remove_suffix(1);
    if (section_ == Section::kEnd) {
      log_->Skip(line.number, "a section after \"End of Report\"");
      return;
    }
    StartSection(line, title);
    return;
  }
  if (text.starts_with("@ ") || text == "@") {
    if (section_ == Section::kHeader) {
      ParseHeaderLine(line, text);
    } else {
      log_->Skip(line.number, "a header line after the header");
    }
    return;
  }
  if (section_ == Section::kUnknown) return;
  if (section_ == Section::kHeader || section_ == Section::kEnd) {
    log_->Skip(line.number, section_ == Section::kHeader ? "unrecognized line in the header"
                                                         : "text after \"End of Report\"");
    return;
  }
  const std::vector<std::string_view> f = Fields(text);
  if (!columns_seen_) {
    columns_seen_ = true;
    CheckColumns(line, f);
    return;
  }
  switch (section_) {
    case Section::kMpiTime:
      ParseMpiTime(line, f);
      break;
    case Section::kCallsites:
      ParseCallsite(line, f);
      break;
    case Section::kAggregateTime:
      ParseAggregateTime(line, f);
      break;
    case Section::kAggregateSent:
      ParseAggregateSent(line, text, f);
      break;
    case Section::kSiteTime:
      ParseSiteTime(line, f);
      break;
    case Section::kSiteSent:
      ParseSiteSent(line, f);
      break;
    default:
      break;
  }
}

// "@ Key : value" lines; "@ MPI Task Assignment : <rank> <host>" names each rank's host.
void Parser::ParseHeaderLine(const Line& line, std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    log_->Skip(line.number, "header line without \"key : value\"");
    return;
  }
  const std::string_view key = Trim(text.substr(1, colon - 1));
  const std::string_view value = Trim(text.substr(colon + 1));
  if (key.empty()) {
    log_->Skip(line.number, "header line without a key");
    return;
  }
  if (key == "MPI Task Assignment") {
    const std::vector<std::string_view> f = Fields(value);
    int32_t rank = 0;
    if (f.empty() || f.size() > 2 || !ParseRank(f[0], &rank) || rank == kAggregateRank) {
      log_->Skip(line.number, "bad task assignment (expected: rank host)");
      return;
    }
    if (!r_->hosts.emplace(rank, f.size() == 2 ? std::string(f[1]) : std::string()).second) {
      log_->Skip(line.number, "rank " + std::to_string(rank) + " assigned twice");
    }
    return;
  }
  if (key == "Collector PID") {
    int64_t pid = 0;
    if (ParseInt(value, &pid) && pid >= 0) r_->collector_pid = pid;
  }
  r_->meta.emplace_back(MetaKey(key), std::string(value));
}

// Task AppTime MPITime MPI%, in seconds; the `*` row is the sum, which the rows already give.
void Parser::ParseMpiTime(const Line& line, const std::vector<std::string_view>& f) {
  int32_t rank = 0;
  double app = 0;
  double mpi = 0;
  std::optional<double> pct;
  int64_t ns = 0;
  if (f.size() != 4 || !ParseRank(f[0], &rank) || !ParseNumber(f[1], &app) ||
      !ParseNumber(f[2], &mpi) || !ParsePercent(f[3], &pct) ||
      !ScaleToInt(app, kNsPerSecond, &ns) || !ScaleToInt(mpi, kNsPerSecond, &ns)) {
    log_->Skip(line.number, "bad MPI Time row (expected: task AppTime MPITime MPI%)");
    return;
  }
  if (rank == kAggregateRank) return;
  if (!r_->times.emplace(rank, std::make_pair(app, mpi)).second) {
    log_->Skip(line.number, "task " + std::to_string(rank) + " listed twice");
  }
}

// ID Lev File Line Parent_Funct MPI_Call, or ID Lev Address Parent_Funct MPI_Call when the
// source line is unknown; levels above 0 (mpiP -k) have no MPI_Call.
void Parser::ParseCallsite(const Line& line, const std::vector<std::string_view>& f) {
  int64_t id = 0;
  int64_t lev = 0;
  if (f.size() < 3 || !ParseInt(f[0], &id) || id < 0 || !ParseInt(f[1], &lev) || lev < 0) {
    log_->Skip(line.number, "bad callsite row (expected: ID Lev File/Address Line Function Call)");
    return;
  }
  std::string location(f[2]);
  size_t next = 3;
  if (f.size() >= 4 && text_profile::AllDigits(f[3])) {
    location += ":" + std::string(f[3]);
    next = 4;
  }
  size_t end = f.size();
  std::string call;
  if (lev == 0) {
    if (end < next + 1 || !text_profile::IsName(f[end - 1])) {
      log_->Skip(line.number, "callsite row without its MPI call");
      return;
    }
    call = std::string(f[end - 1]);
    --end;
  }
  const std::string function = Join(f, next, end);
  if (!function.empty()) location += " " + function;
  if (lev == 0) {
    if (!r_->sites.emplace(id, Site{"MPI_" + call, location}).second) {
      log_->Skip(line.number, "callsite " + std::to_string(id) + " listed twice");
    }
    return;
  }
  auto it = r_->sites.find(id);
  if (it == r_->sites.end()) {
    log_->Skip(line.number,
               "stack level of callsite " + std::to_string(id) + " before its level 0");
    return;
  }
  it->second.location += "; " + location;
}

// Call Site Time App% MPI% [Count] [COV]: the top twenty sites over all ranks, in ms.
void Parser::ParseAggregateTime(const Line& line, const std::vector<std::string_view>& f) {
  int64_t site = 0;
  Aggregate a;
  std::optional<double> time;
  bool ok = f.size() == aggregate_columns_ && text_profile::IsName(f[0]) && ParseInt(f[1], &site) &&
            site >= 0 && ParseMs(f[2], &time) && ParsePercent(f[3], &a.app_pct) &&
            ParsePercent(f[4], &a.mpi_pct);
  if (ok && aggregate_count_) {
    int64_t calls = 0;
    ok = ParseInt(f[5], &calls) && calls >= 0;
    a.calls = calls;
  }
  if (!ok) {
    log_->Skip(line.number, "bad Aggregate Time row");
    return;
  }
  a.time_ms = time;
  Aggregate& dst = r_->aggregates[{site, "MPI_" + std::string(f[0])}];
  if (dst.time_ms) {
    log_->Skip(line.number, "site " + std::to_string(site) + " listed twice");
    return;
  }
  dst.time_ms = a.time_ms;
  dst.app_pct = a.app_pct;
  dst.mpi_pct = a.mpi_pct;
  if (a.calls) dst.calls = a.calls;
}

// Call Site Count Total Avrg Sent%: the top twenty sites by bytes sent over all ranks.
void Parser::ParseAggregateSent(const Line& line, std::string_view text,
                                const std::vector<std::string_view>& f) {
  // mpiP 3.5+ closes the section with a count of messages above a size threshold (-T).
  if (text.starts_with("Total send/collective operation calls")) return;
  int64_t site = 0;
  int64_t calls = 0;
  double total = 0;
  double avg = 0;
  std::optional<double> pct;
  if (f.size() != 6 || !text_profile::IsName(f[0]) || !ParseInt(f[1], &site) || site < 0 ||
      !ParseInt(f[2], &calls) || calls < 0 || !ParseNumber(f[3], &total) || total < 0 ||
      !ParseNumber(f[4], &avg) || !ParsePercent(f[5], &pct)) {
    log_->Skip(line.number, "bad Aggregate Sent Message Size row");
    return;
  }
  Aggregate& dst = r_->aggregates[{site, "MPI_" + std::string(f[0])}];
  if (dst.sent_total) {
    log_->Skip(line.number, "site " + std::to_string(site) + " listed twice");
    return;
  }
  dst.sent_total = total;
  if (!dst.calls) dst.calls = calls;
}

// Name Site Rank Count Max Mean Min App% MPI%, in ms; Rank `*` is the site over every rank.
void Parser::ParseSiteTime(const Line& line, const std::vector<std::string_view>& f) {
  int64_t site = 0;
  int32_t rank = 0;
  int64_t calls = 0;
  SiteStats s;
  if (f.size() != 9 || !text_profile::IsName(f[0]) || !ParseInt(f[1], &site) || site < 0 ||
      !ParseRank(f[2], &rank) || !ParseInt(f[3], &calls) || calls < 0 ||
      !ParseMs(f[4], &s.max_ms) || !ParseMs(f[5], &s.mean_ms) || !ParseMs(f[6], &s.min_ms) ||
      !ParsePercent(f[7], &s.app_pct) || !ParsePercent(f[8], &s.mpi_pct)) {
    log_->Skip(line.number, "bad Callsite Time statistics row");
    return;
  }
  SiteStats& dst = r_->stats[{rank, site, "MPI_" + std::string(f[0])}];
  if (dst.calls) {
    log_->Skip(line.number,
               "site " + std::to_string(site) + " rank " + std::string(f[2]) + " listed twice");
    return;
  }
  s.calls = calls;
  s.bytes_sum = dst.bytes_sum;
  s.sent_calls = dst.sent_calls;
  dst = s;
}

// Name Site Rank Count Max Mean Min Sum, in bytes; only sites that sent data.
void Parser::ParseSiteSent(const Line& line, const std::vector<std::string_view>& f) {
  int64_t site = 0;
  int32_t rank = 0;
  int64_t calls = 0;
  double v = 0;
  double sum = 0;
  if (f.size() != 8 || !text_profile::IsName(f[0]) || !ParseInt(f[1], &site) || site < 0 ||
      !ParseRank(f[2], &rank) || !ParseInt(f[3], &calls) || calls < 0 || !ParseNumber(f[4], &v) ||
      !ParseNumber(f[5], &v) || !ParseNumber(f[6], &v) || !ParseNumber(f[7], &sum) || sum < 0) {
    log_->Skip(line.number, "bad Callsite Message Sent statistics row");
    return;
  }
  SiteStats& dst = r_->stats[{rank, site, "MPI_" + std::string(f[0])}];
  if (dst.bytes_sum) {
    log_->Skip(line.number,
               "site " + std::to_string(site) + " rank " + std::string(f[2]) + " listed twice");
    return;
  }
  dst.bytes_sum = sum;
  dst.sent_calls = calls;
}

std::optional<int64_t> MsToNs(const std::optional<double>& ms) {
  int64_t ns = 0;
  if (!ms || !ScaleToInt(*ms, kNsPerMs, &ns)) return std::nullopt;
  return ns;
}

Status WriteReport(const Report& r, engine::TraceWriter* writer, uint64_t* rows) {
  engine::Db* db = writer->db();
  int32_t world_size = 0;
  for (const auto& [rank, host] : r.hosts) world_size = std::max(world_size, rank + 1);
  for (const auto& [rank, t] : r.times) world_size = std::max(world_size, rank + 1);
  for (const auto& [rank, host] : r.hosts) {
    TRACEDB_RETURN_IF_ERROR(text_profile::UpsertRank(
        db, rank, host.empty() ? std::nullopt : std::optional<std::string>(host), world_size,
        kFormat));
  }
  if (!r.times.empty()) TRACEDB_RETURN_IF_ERROR(engine::EnsureTable(db, "rank_times"));
  for (const auto& [rank, t] : r.times) {
    const auto h = r.hosts.find(rank);
    std::optional<std::string> host;
    if (h != r.hosts.end() && !h->second.empty()) host = h->second;
    if (h == r.hosts.end()) {
      TRACEDB_RETURN_IF_ERROR(text_profile::UpsertRank(db, rank, host, world_size, kFormat));
    }
    text_profile::RankTimes row;
    row.rank = rank;
    row.host = host;
    int64_t ns = 0;
    if (ScaleToInt(t.first, kNsPerSecond, &ns)) row.elapsed_ns = ns;
    if (ScaleToInt(t.second, kNsPerSecond, &ns)) row.comm_ns = ns;
    TRACEDB_RETURN_IF_ERROR(
        text_profile::UpsertRankTimes(db, row, kFormat, text_profile::Merge::kOverwrite));
    ++*rows;
  }

  TRACEDB_RETURN_IF_ERROR(engine::EnsureTable(db, "mpi_callsites"));
  TRACEDB_ASSIGN_OR_RETURN(
      engine::Stmt site_st,
      db->PrepareCached("INSERT OR REPLACE INTO mpi_callsites(rank, site, routine, calls, max_ns, "
                        "mean_ns, min_ns, app_pct, mpi_pct, bytes_sum, location) "
                        "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"));
  auto write_site = [&](int32_t rank, int64_t site, const std::string& routine,
                        const SiteStats& s) -> Status {
    const auto loc = r.sites.find(site);
    site_st.Bind(1, rank)
        .Bind(2, site)
        .Bind(3, std::string_view(routine))
        .Bind(4, s.calls ? *s.calls : *s.sent_calls);
    BindOptional(site_st, 5, MsToNs(s.max_ms));
    BindOptional(site_st, 6, MsToNs(s.mean_ms));
    BindOptional(site_st, 7, MsToNs(s.min_ms));
    BindOptional(site_st, 8, s.app_pct);
    BindOptional(site_st, 9, s.mpi_pct);
    BindOptional(site_st, 10, s.bytes_sum);
    if (loc != r.sites.end()) {
      site_st.Bind(11, std::string_view(loc->second.location));
    } else {
      site_st.BindNull(11);
    }
    TRACEDB_RETURN_IF_ERROR(site_st.Run());
    ++*rows;
    return Status::Ok();
  };

  // Per rank × routine totals for mpi_profile: calls, time = Σ count × mean, bytes = Σ sent.
  struct Totals {
    int64_t calls = 0;
    double time_ns = 0;
    double bytes = 0;
  };
  std::map<std::pair<int32_t, std::string>, Totals> totals;
  for (const auto& [key, s] : r.stats) {
    const auto& [rank, site, routine] = key;
    if (rank == kAggregateRank) {
      // A `*` row without a Message Sent statistics row (a report cut short) takes the site's
      // bytes from Aggregate Sent Message Size.
      SiteStats agg = s;
      const auto a = r.aggregates.find({site, routine});
      if (!agg.bytes_sum && a != r.aggregates.end()) agg.bytes_sum = a->second.sent_total;
      TRACEDB_RETURN_IF_ERROR(write_site(rank, site, routine, agg));
      continue;
    }
    TRACEDB_RETURN_IF_ERROR(write_site(rank, site, routine, s));
    Totals& t = totals[{rank, routine}];
    const int64_t calls = s.calls ? *s.calls : *s.sent_calls;
    if (__builtin_add_overflow(t.calls, calls, &t.calls)) t.calls = INT64_MAX;  // hostile counts
    if (s.mean_ms) t.time_ns += static_cast<double>(calls) * *s.mean_ms * kNsPerMs;
    if (s.bytes_sum) t.bytes += *s.bytes_sum;
  }
  // Sites of the Aggregate sections without a `*` row (e.g. a report cut before the callsite
  // statistics) get their rank -1 row from there, when their call count is known.
  for (const auto& [key, a] : r.aggregates) {
    const auto& [site, routine] = key;
    if (r.stats.count({kAggregateRank, site, routine}) > 0 || !a.calls) continue;
    SiteStats s;
    s.calls = a.calls;
    if (a.time_ms && *a.calls > 0) s.mean_ms = *a.time_ms / static_cast<double>(*a.calls);
    s.app_pct = a.app_pct;
    s.mpi_pct = a.mpi_pct;
    s.bytes_sum = a.sent_total;
    TRACEDB_RETURN_IF_ERROR(write_site(kAggregateRank, site, routine, s));
  }

  TRACEDB_RETURN_IF_ERROR(engine::EnsureTable(db, "mpi_profile"));
  TRACEDB_ASSIGN_OR_RETURN(
      engine::Stmt prof,
      db->PrepareCached("INSERT OR REPLACE INTO mpi_profile(rank, routine, calls, bytes, time_ns, "
                        "source) VALUES(?1, ?2, ?3, ?4, ?5, ?6)"));
  for (const auto& [key, t] : totals) {
    int64_t time_ns = 0;
    if (!ScaleToInt(t.time_ns, 1, &time_ns)) time_ns = INT64_MAX;  // saturates; never seen
    prof.Bind(1, key.first)
        .Bind(2, std::string_view(key.second))
        .Bind(3, t.calls)
        .Bind(4, t.bytes)
        .Bind(5, time_ns)
        .Bind(6, std::string_view(kFormat));
    TRACEDB_RETURN_IF_ERROR(prof.Run());
    ++*rows;
  }

  std::map<std::string, std::string> meta;
  for (const auto& [k, v] : r.meta) meta[k] = v;
  for (const auto& [k, v] : meta) TRACEDB_RETURN_IF_ERROR(writer->SetMeta(k, v));
  return Status::Ok();
}

// Does the file name look like mpiP's: <app>.<nprocs>.<pid>.<n>.mpiP (optionally .gz)?
bool IsReportName(std::string_view path) {
  std::string_view base = text_profile::BaseName(path);
  if (base.ends_with(".gz")) base.remove_suffix(3);
  if (!base.ends_with(".mpiP")) return false;
  base.remove_suffix(5);
  for (int i = 0; i < 3; ++i) {
    const size_t dot = base.rfind('.');
    if (dot == std::string_view::npos || !text_profile::AllDigits(base.substr(dot + 1))) {
      return false;
    }
    base = base.substr(0, dot);
  }
  return !base.empty();
}

class MpipImporter : public Importer {
 public:
  const char* name() const override { return kFormat; }

  int Detect(std::string_view path, std::string_view head) const override {
    const int name_bonus = IsReportName(path) ? 20 : 0;
    const std::string_view first = text_profile::FirstNonBlankLine(head.substr(0, 4096));
    if (first == "@ mpiP") return 80 + name_bonus;
    if (head.substr(0, 1024).find("\n@ mpiP") != std::string_view::npos) return 40 + name_bonus;
    return 0;
  }

  Status Import(const ImportInput& input, engine::TraceWriter* writer,
                ImportResult* result) override {
    uint64_t size = 0;
    TRACEDB_ASSIGN_OR_RETURN(auto lines, text_profile::LineReader::Open(input.path, &size));
    return ImportMpipLines(input.path, lines.get(), size, writer, result);
  }
};

}  // namespace

std::unique_ptr<Importer> NewMpipImporter() { return std::make_unique<MpipImporter>(); }

Status ImportMpipText(std::string_view path, std::string_view text, uint64_t size_on_disk,
                      engine::TraceWriter* writer, ImportResult* result) {
  text_profile::LineReader lines(text);
  return ImportMpipLines(path, &lines, size_on_disk, writer, result);
}

Status ImportMpipLines(std::string_view path, text_profile::LineReader* lines,
                       uint64_t size_on_disk, engine::TraceWriter* writer, ImportResult* result) {
  const std::string file(path);
  if (!writer->in_batch()) return Status::Internal(file + ": import needs an open batch");

  // Line by line (bounded memory, however many lines: text_profile.h).
  text_profile::Line line;
  TRACEDB_RETURN_IF_ERROR(text_profile::ReadFirstLine(lines, file, "an mpiP report", &line));
  if (Trim(line.text) != "@ mpiP") {
    return Status::InvalidArgument(file + ": line " + std::to_string(line.number) +
                                   ": not an mpiP report (expected \"@ mpiP\")");
  }

  Report report;
  ProblemLog log(file);
  Parser parser(&report, &log);
  while (lines->Next(&line)) parser.ParseLine(line);
  if (!lines->status().ok()) return lines->status();
  if (lines->long_lines() > 0) {
    log.Warn(std::to_string(lines->long_lines()) + " lines longer than " +
             std::to_string(text_profile::kMaxLineBytes) + " bytes were cut (the first: line " +
             std::to_string(lines->first_long_line()) + ")");
  }

  bool truncated = false;
  if (!lines->tail().empty()) {
    truncated = true;
    result->truncated_bytes += lines->tail_bytes();
    log.Warn("line " + std::to_string(lines->tail_number()) + ": incomplete last line (" +
             std::to_string(lines->tail_bytes()) + " bytes) ignored: the file is truncated");
  } else if (!report.complete) {
    truncated = true;
    log.Warn("the report ends before \"End of Report\": it is truncated");
  }
  if (report.complete && report.declared_sites >= 0 &&
      report.sites.size() != static_cast<size_t>(report.declared_sites)) {
    log.Warn("\"Callsites: " + std::to_string(report.declared_sites) + "\" but " +
             std::to_string(report.sites.size()) + " callsites listed");
  }

  uint64_t rows = 0;
  TRACEDB_RETURN_IF_ERROR(WriteReport(report, writer, &rows));
  text_profile::AddImportStats(writer, kAggregateRank, log.skipped(), truncated,
                               report.sections_skipped);
  text_profile::SourceRow src;
  src.path = file;
  src.format = kFormat;
  src.pid = report.collector_pid;
  src.offset = lines->complete_bytes();
  src.size = size_on_disk;
  src.events = rows;
  TRACEDB_RETURN_IF_ERROR(text_profile::WriteSource(writer->db(), src));

  result->rank = -1;
  for (const auto& [rank, host] : report.hosts) result->ranks.push_back(rank);
  for (const auto& [rank, t] : report.times) result->ranks.push_back(rank);
  std::sort(result->ranks.begin(), result->ranks.end());
  result->ranks.erase(std::unique(result->ranks.begin(), result->ranks.end()), result->ranks.end());
  result->world_size = result->ranks.empty() ? 0 : result->ranks.back() + 1;
  result->events += rows;
  result->rows_table = "rank_times, mpi_callsites, mpi_profile";
  log.MoveTo(result);
  return Status::Ok();
}

}  // namespace tracedb::query
