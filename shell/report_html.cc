// `tracedb report html`: gathers the aggregates of a trace database (query/report/report_data.h and
// a few views), writes them as JSON into the page template (shell/report_page.html, embedded at
// build time as kReportPage), and writes the page. The page holds aggregates only, so its size
// depends on the number of ranks, names and steps, not on the number of events. docs/report.md.
#include "shell/report_html.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>

#include "engine/util/atomic_file.h"
#include "engine/util/interrupt_cleanup.h"
#include "engine/util/json_text.h"
#include "engine/util/saturating.h"
#include "engine/util/version.h"
#include "query/analysis/why.h"
#include "query/analysis/why_summary.h"
#include "query/export/json_rows.h"
#include "query/open/query_db.h"
#include "shell/commands.h"
#include "shell/format.h"
#include "shell/run_history.h"
#include "shell/verbosity.h"

namespace tracedb::shell {

extern const char kReportPage[];  // report_page.html, generated into the build tree

namespace {

struct HtmlOptions {
  std::string db;
  std::string output;
  std::vector<std::string> baselines;  // paths or runs:LABEL[:N]; the last is compared
  std::string catalog;
  int bins = 0;  // 0: chosen from the number of ranks
  double alpha = 0.01;
  // The "Why" section's analyses hold about 90 bytes per event (docs/why.md "Speed"): above
  // this many events the section is left out and says so. 0: always left out.
  int64_t why_max_events = 20000000;
};

// Exact (shortest round-trip) numbers, null for NaN and infinities: the project's JSON writer.
std::string Num(double v) { return engine::json::Number(v); }
std::string Num(int64_t v) { return std::to_string(v); }

template <typename T>
std::string Array(const std::vector<T>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += Num(v[i]);
  }
  return out + "]";
}

std::string NameStatsJson(const query::NameStats* s) {
  if (s == nullptr) return "null";
  return "{\"count\":" + Num(static_cast<int64_t>(s->count)) + ",\"total_ns\":" + Num(s->total_ns) +
         ",\"mean_ns\":" + Num(s->mean_ns) + ",\"p50_ns\":" + Num(s->p50_ns) +
         ",\"p99_ns\":" + Num(s->p99_ns) +
         ",\"steps\":" + Num(static_cast<int64_t>(s->per_step.size())) + "}";
}

std::string RunJson(const query::RunSummary& r, double step_mean) {
  std::string out = "{\"path\":" + engine::json::String(r.path) +
                    ",\"ranks\":" + Num(int64_t{r.ranks}) +
                    ",\"events\":" + Num(static_cast<int64_t>(r.events)) +
                    ",\"steps\":" + Num(static_cast<int64_t>(r.step_ns.size())) +
                    ",\"step_mean_ns\":" + Num(step_mean) + ",\"comm_share\":" + Num(r.comm_share) +
                    ",\"stragglers\":[";
  for (size_t i = 0; i < r.stragglers.size(); ++i) {
    out += (i ? "," : "") + Num(int64_t{r.stragglers[i]});
  }
  return out + "],\"straggler_basis\":" + engine::json::String(r.straggler_basis) + "}";
}

// The straggler ranks' caused wait in A and B (query::CompareStragglerWait).
std::string StragglerWaitJson(const query::RunDiff& d) {
  std::string out = "[";
  bool first = true;
  for (const auto& w : query::CompareStragglerWait(d.a, d.b)) {
    out += (first ? "{\"rank\":" : ",{\"rank\":") + Num(int64_t{w.rank}) +
           ",\"a_ns\":" + Num(w.a_ns) + ",\"b_ns\":" + Num(w.b_ns) + "}";
    first = false;
  }
  return out + "]";
}

// Steps of the page, at most this many points (consecutive steps grouped beyond).
constexpr size_t kMaxStepPoints = 5000;

class PageData {
 public:
  explicit PageData(engine::Db* db) : db_(db) {}

  Status Build(const std::string& path, int bins, int64_t why_max_events) {
    TRACEDB_ASSIGN_OR_RETURN(int64_t events,
                             db_->QueryInt("SELECT sum(count) FROM main.blocks", 0));
    TRACEDB_ASSIGN_OR_RETURN(int64_t nranks, db_->QueryInt("SELECT count(*) FROM (SELECT DISTINCT "
                                                           "rank FROM main.blocks)",
                                                           0));
    if (bins <= 0) {
      // About 2M numbers for the overview at most, between 50 and 600 bins.
      bins = static_cast<int>(
          std::clamp<int64_t>(2000000 / (3 * std::max<int64_t>(1, nranks)), 50, 600));
    }
    TRACEDB_ASSIGN_OR_RETURN(query::Overview ov, query::BuildOverview(db_, bins));
    char when[64];
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
    out_ = "{\"db\":" + engine::json::String(path) +
           ",\"version\":" + engine::json::String(engine::kTracedbVersion) +
           ",\"generated\":" + engine::json::String(when) + ",\"events\":" + Num(events) +
           ",\"ranks\":" + Num(static_cast<int64_t>(ov.ranks.size())) + ",\"duration_ns\":" +
           Num(ov.ranks.empty() ? int64_t{0} : engine::SaturatingSub(ov.t1, ov.t0));
    Overview(ov);
    TRACEDB_RETURN_IF_ERROR(Names());
    TRACEDB_RETURN_IF_ERROR(Slowest());
    TRACEDB_RETURN_IF_ERROR(Collectives(ov));
    TRACEDB_RETURN_IF_ERROR(Steps());
    TRACEDB_RETURN_IF_ERROR(Startup(ov));
    TRACEDB_RETURN_IF_ERROR(Rows("clock",
                                 "SELECT rank, host, clock_method, offset_ns, drift_ppm, "
                                 "uncertainty_ns, sync_points FROM clock_alignment ORDER BY rank"));
    TRACEDB_RETURN_IF_ERROR(
        Rows("stats", "SELECT name, rank, value FROM main.stats ORDER BY name, rank"));
    TRACEDB_RETURN_IF_ERROR(Why(events, why_max_events));
    return Status::Ok();
  }
  void AddDiff(const query::RunDiff& d, double alpha) { out_ += ",\"diff\":" + DiffJson(d, alpha); }
  void AddTrend(const std::vector<query::RunSummary>& runs) {
    out_ += ",\"trend\":" + TrendJson(runs);
  }
  std::string Finish() { return out_ + "}"; }

 private:
  void Overview(const query::Overview& ov) {
    out_ += ",\"overview\":{\"t0\":" + Num(ov.t0) + ",\"t1\":" + Num(ov.t1) +
            ",\"bin_ns\":" + Num(ov.bin_ns) + ",\"bins\":" + Num(int64_t{ov.bins}) + ",\"ranks\":[";
    for (size_t i = 0; i < ov.ranks.size(); ++i) {
      const auto& r = ov.ranks[i];
      out_ += (i ? "," : "");
      out_ += "{\"rank\":" + Num(int64_t{r.rank}) + ",\"compute_ns\":" + Num(r.compute_ns) +
              ",\"comm_ns\":" + Num(r.comm_ns) + ",\"busy_ns\":" + Num(r.busy_ns) +
              ",\"wall_ns\":" + Num(r.wall_ns) + ",\"compute\":" + Array(r.compute_bins) +
              ",\"comm\":" + Array(r.comm_bins) + ",\"busy\":" + Array(r.busy_bins) + "}";
    }
    out_ += "]}";
  }

  Status Names() {
    TRACEDB_ASSIGN_OR_RETURN(auto names, query::BuildNameStats(db_));
    out_ += ",\"names\":[";
    for (size_t i = 0; i < names.size() && i < 50; ++i) {
      const auto& n = names[i];
      out_ += (i ? "," : "");
      out_ += "{\"name\":" + engine::json::String(n.name) +
              ",\"cat\":" + engine::json::String(n.cat) +
              ",\"routine\":" + (n.routine ? "true" : "false") +
              ",\"count\":" + Num(static_cast<int64_t>(n.count)) +
              ",\"total_ns\":" + Num(n.total_ns) + ",\"mean_ns\":" + Num(n.mean_ns) +
              ",\"p50_ns\":" + Num(n.p50_ns) + ",\"p99_ns\":" + Num(n.p99_ns) + "}";
    }
    out_ += "]";
    MessageSizes(names);
    return Status::Ok();
  }

  Status Slowest() {
    TRACEDB_ASSIGN_OR_RETURN(
        engine::Stmt st,
        db_->Prepare("SELECT rank, name, coalesce(cat, ''), ts, dur, step FROM events "
                     "WHERE kind = 'span' ORDER BY dur DESC LIMIT 20"));
    out_ += ",\"slowest\":[";
    for (bool first = true;; first = false) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      out_ += (first ? "" : ",");
      out_ += "{\"rank\":" + Num(st.Int(0)) + ",\"name\":" + engine::json::String(st.Text(1)) +
              ",\"cat\":" + engine::json::String(st.Text(2)) + ",\"ts\":" + Num(st.Int(3)) +
              ",\"dur\":" + Num(st.Int(4)) +
              ",\"step\":" + (st.IsNull(5) ? std::string("null") : Num(st.Int(5))) + "}";
    }
    out_ += "]";
    return Status::Ok();
  }

  Status Collectives(const query::Overview& ov) {
    TRACEDB_ASSIGN_OR_RETURN(query::CollectiveData cd, query::BuildCollectives(db_));
    std::map<int32_t, const query::RankCollectives*> by_rank;
    for (const auto& r : cd.ranks) by_rank[r.rank] = &r;
    out_ += ",\"rank_comm\":[";
    for (size_t i = 0; i < ov.ranks.size(); ++i) {
      const auto& r = ov.ranks[i];
      auto it = by_rank.find(r.rank);
      const bool has = it != by_rank.end() && it->second->collectives > 0;
      out_ += (i ? "," : "");
      out_ += "{\"rank\":" + Num(int64_t{r.rank}) + ",\"compute_ns\":" + Num(r.compute_ns) +
              ",\"comm_ns\":" + Num(r.comm_ns) + ",\"wall_ns\":" + Num(r.wall_ns) +
              ",\"wait_ns\":" + (has ? Num(it->second->waited_ns) : "null") +
              ",\"late_ns\":" + (has ? Num(it->second->late_ns) : "null") + "}";
    }
    // The stragglers, worst first (as the stragglers view ordered by caused_wait_ns).
    std::vector<const query::RankCollectives*> order;
    for (const auto& r : cd.ranks) {
      if (r.times_last > 0) order.push_back(&r);
    }
    std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
      return a->caused_wait_ns != b->caused_wait_ns ? a->caused_wait_ns > b->caused_wait_ns
                                                    : a->rank < b->rank;
    });
    out_ += "],\"stragglers\":[";
    for (size_t i = 0; i < order.size() && i < 20; ++i) {
      const auto* r = order[i];
      out_ += (i ? "," : "");
      out_ += "{\"rank\":" + Num(int64_t{r->rank}) +
              ",\"times_last\":" + Num(static_cast<int64_t>(r->times_last)) +
              ",\"caused_wait_ns\":" + Num(r->caused_wait_ns) +
              ",\"max_skew_ns\":" + Num(r->max_skew_ns) + "}";
    }
    out_ += "]";
    // The last arrival at the first matched collective (where start-up ends, Startup()).
    for (const auto& c : cd.collectives) {
      if (c.ranks > 1) {
        first_collective_end_ = engine::SaturatingAdd(c.first_arrival, c.skew_ns);
        break;
      }
    }
    // Skew over time, binned: per bin the maximum and mean skew.
    out_ += ",\"skew\":[";
    bool first = true;
    for (const query::SkewBin& b : query::BinSkew(cd, ov.t0, 500)) {
      out_ += (first ? "" : ",");
      first = false;
      out_ += "{\"t\":" + Num(b.t) + ",\"max_ns\":" + Num(b.max_ns) +
              ",\"mean_ns\":" + Num(b.mean_ns) + ",\"collectives\":" + Num(b.collectives) + "}";
    }
    out_ += "]";
    return Status::Ok();
  }

  // Message-size histograms of every name with byte counts, by name.
  void MessageSizes(const std::vector<query::NameStats>& names) {
    std::vector<const query::NameStats*> with;
    for (const auto& n : names) {
      if (!n.size_buckets.empty()) with.push_back(&n);
    }
    std::sort(with.begin(), with.end(), [](const auto* x, const auto* y) {
      return x->name != y->name ? x->name < y->name : x->cat < y->cat;
    });
    out_ += ",\"msgsize\":[";
    for (size_t i = 0; i < with.size(); ++i) {
      out_ += (i ? "," : "");
      out_ += "{\"routine\":" + engine::json::String(with[i]->name) + ",\"buckets\":[";
      for (size_t k = 0; k < with[i]->size_buckets.size(); ++k) {
        const auto& [bucket, n] = with[i]->size_buckets[k];
        out_ += (k ? ",[" : "[") + Num(int64_t{bucket}) + "," + Num(static_cast<int64_t>(n)) + "]";
      }
      out_ += "]}";
    }
    out_ += "]";
  }

  Status Steps() {
    TRACEDB_ASSIGN_OR_RETURN(auto steps, query::BuildStepSeries(db_));
    for (const auto& p : steps) {
      if (first_step_ts_ < 0 || p.start_ts < first_step_ts_) first_step_ts_ = p.start_ts;
    }
    const size_t group = std::max<size_t>(1, (steps.size() + kMaxStepPoints - 1) / kMaxStepPoints);
    out_ += ",\"steps_total\":" + Num(static_cast<int64_t>(steps.size())) +
            ",\"steps_grouped\":" + Num(static_cast<int64_t>(group)) + ",\"steps\":[";
    for (size_t i = 0; i < steps.size(); i += group) {
      query::StepPoint p = steps[i];
      __int128 sum = 0;  // the mean of the group's means, summed wide as BuildStepSeries does
      size_t n = 0;
      for (size_t j = i; j < steps.size() && j < i + group; ++j, ++n) {
        if (steps[j].max_ns > p.max_ns) {
          p.max_ns = steps[j].max_ns;
          p.slowest_rank = steps[j].slowest_rank;
        }
        p.outlier = p.outlier || steps[j].outlier;
        sum += steps[j].mean_ns;
      }
      p.mean_ns = static_cast<int64_t>(sum / static_cast<__int128>(n));  // a mean of int64s fits
      out_ += (i ? "," : "");
      out_ += "{\"step\":" + Num(p.step) + ",\"ranks\":" + Num(int64_t{p.ranks}) +
              ",\"max_ns\":" + Num(p.max_ns) + ",\"mean_ns\":" + Num(p.mean_ns) +
              ",\"slowest_rank\":" + Num(int64_t{p.slowest_rank}) +
              ",\"outlier\":" + (p.outlier ? "true" : "false") + "}";
    }
    out_ += "]";
    return Status::Ok();
  }

  // Start-up (process-group set-up, the first collective's connection set-up) is set apart on
  // the page: it ends when the first step starts or the first matched collective ends,
  // whichever is later (docs/report.md "Start-up").
  Status Startup(const query::Overview& ov) {
    int64_t end = -1;
    std::string basis;
    if (first_step_ts_ >= 0) {
      end = first_step_ts_;
      basis = "first step";
    }
    if (first_collective_end_ > end) {
      end = first_collective_end_;
      basis = "first collective";
    }
    if (end <= ov.t0 || end >= ov.t1) {
      end = -1;
      basis.clear();
    }
    out_ += ",\"startup\":{\"end_ns\":" +
            (end < 0 ? std::string("null") : Num(engine::SaturatingSub(end, ov.t0))) +
            ",\"basis\":" + engine::json::String(basis) + ",\"names\":{";
    // Each span name's time inside start-up (spans that start before it ends): the page keeps
    // names spent mostly there (MPI_Init, init_process_group) from setting the scale of the
    // slowest-phases chart. Only start-up's blocks are read (ts < end is pushed down).
    if (end >= 0) {
      TRACEDB_ASSIGN_OR_RETURN(
          engine::Stmt st,
          db_->Prepare(
              "SELECT name, sum(dur) FROM events WHERE kind = 'span' AND ts < ?1 GROUP BY name"));
      st.Bind(1, end);
      for (bool first = true;; first = false) {
        TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
        if (!row) break;
        out_ += (first ? "" : ",") + engine::json::String(st.Text(0)) + ":" + Num(st.Int(1));
      }
    }
    out_ += "}}";
    return Status::Ok();
  }

  // The "Why" section: the job's root causes in words, wait-state totals per pattern and the
  // critical path's top names, as `tracedb explain -f json` gives them (why_summary.h). A
  // database the analyses cannot read gets the error on the page, not a failed report; one
  // with more than `max_events` events gets the reason it was left out.
  Status Why(int64_t events, int64_t max_events) {
    namespace wa = query::analysis;
    if (events > max_events) {
      out_ += ",\"why\":{\"skipped\":" +
              engine::json::String(
                  max_events <= 0
                      ? std::string("left out (--why-max-events 0)")
                      : WithCommas(static_cast<uint64_t>(events)) + " events, more than " +
                            WithCommas(static_cast<uint64_t>(max_events)) +
                            " (--why-max-events): run tracedb explain, with --steps for part "
                            "of the job") +
              "}";
      return Status::Ok();
    }
    // Whether the job has communication at all (what view_notes counts: the communication
    // categories, and Horovod's RANK_READY ticks).
    TRACEDB_ASSIGN_OR_RETURN(
        int64_t comm,
        db_->QueryInt("SELECT EXISTS (SELECT 1 FROM main.name_stats ns JOIN main.strings c ON "
                      "c.id = ns.cat WHERE c.s IN ('mpi', 'comm', 'nccl')) OR EXISTS (SELECT 1 "
                      "FROM main.name_stats ns JOIN main.strings n ON n.id = ns.name WHERE "
                      "n.s = 'RANK_READY')",
                      0));
    auto a = wa::Analyze(db_);
    if (!a.ok()) {
      out_ += ",\"why\":{\"error\":" + engine::json::String(a.status().message()) + "}";
      return Status::Ok();
    }
    std::string why = wa::WhySummaryJson(*a, wa::Summarize(*a, wa::StepRange{}, 10));
    why.pop_back();  // the closing brace: the fields below join the object
    out_ += ",\"why\":" + why + ",\"steps\":" + Num(static_cast<int64_t>(a->steps.size())) +
            ",\"comm\":" + (comm ? "true" : "false") + "}";
    return Status::Ok();
  }

  // The rows of `sql` as an array of objects named by the columns.
  Status Rows(const char* key, const char* sql) {
    TRACEDB_ASSIGN_OR_RETURN(engine::Stmt st, db_->Prepare(sql));
    out_ += ",\"" + std::string(key) + "\":[";
    for (bool first = true;; first = false) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      out_ += first ? "{" : ",{";
      for (int c = 0; c < st.ColumnCount(); ++c) {
        out_ += (c ? "," : "") + engine::json::String(st.ColumnName(c)) + ":";
        query::json::AppendColumn(&out_, st, c);
      }
      out_ += "}";
    }
    out_ += "]";
    return Status::Ok();
  }

  engine::Db* db_;
  std::string out_;
  int64_t first_step_ts_ = -1;         // earliest rank's start of the first step
  int64_t first_collective_end_ = -1;  // last arrival at the first matched collective
};

int RunReportHtml(const HtmlOptions& o) {
  const char* cmd = "report html";
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&t0] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto db = query::OpenQueryDb(o.db);
  if (!db.ok()) {
    std::fprintf(stderr, "tracedb %s: %s\n", cmd, db.status().message().c_str());
    return kExitError;
  }
  PageData data(db->get());
  Status s = data.Build(o.db, o.bins, o.why_max_events);
  if (!s.ok()) {
    std::fprintf(stderr, "tracedb %s: %s: %s\n", cmd, o.db.c_str(), s.message().c_str());
    return kExitError;
  }
  Verbose("report html", "%s: the page's aggregates computed in %.2f s", o.db.c_str(), seconds());
  if (!o.baselines.empty()) {
    std::vector<std::string> paths;
    if (!ResolveRunPaths(cmd, o.baselines, o.catalog, o.db, &paths)) return kExitUsage;
    // Every run, baselines first (in the order given), this run last.
    std::vector<query::RunSummary> runs(paths.size() + 1);
    for (size_t i = 0; i < paths.size(); ++i) {
      if (!LoadRunSummary(cmd, paths[i], &runs[i])) return kExitError;
    }
    if (!LoadRunSummary(cmd, o.db, &runs.back())) return kExitError;
    data.AddTrend(runs);
    query::RunDiff d;
    query::CompareRuns(runs[runs.size() - 2], runs.back(), &d);
    data.AddDiff(d, o.alpha);
    Verbose("report html", "compared with %zu baseline runs (%.2f s so far)", paths.size(),
            seconds());
  }
  std::string json = data.Finish();
  // Inside a <script> element neither "</" nor "<!--" may appear (the second would make the
  // parser look for a nested script): '<' occurs only inside JSON strings, where \u003c is it.
  for (size_t p = 0; (p = json.find('<', p)) != std::string::npos; p += 6)
    json.replace(p, 1, "\\u003c");
  std::string page = kReportPage;
  const std::string marker = "/*TRACEDB_DATA*/";
  const size_t at = page.find(marker);
  if (at == std::string::npos) {
    std::fprintf(stderr, "tracedb %s: the built-in page template has no data marker\n", cmd);
    return kExitError;
  }
  page.replace(at, marker.size(), json);
  const Status wrote = engine::WriteFileAtomically(o.output, page, std::string("tracedb ") + cmd);
  if (!wrote.ok()) {
    std::fprintf(stderr, "tracedb %s: %s\n", cmd, wrote.message().c_str());
    return kExitError;
  }
  Verbose("report html", "wrote %s (%s) in %.2f s", o.output.c_str(),
          HumanBytes(static_cast<double>(page.size())).c_str(), seconds());
  return kExitOk;
}

}  // namespace

bool LoadRunSummary(const char* cmd, const std::string& path, query::RunSummary* out) {
  const auto t0 = std::chrono::steady_clock::now();
  auto db = query::OpenQueryDb(path);
  if (!db.ok()) {
    std::fprintf(stderr, "tracedb %s: %s\n", cmd, db.status().message().c_str());
    return false;
  }
  auto r = query::BuildRunSummary(db->get(), path);
  if (!r.ok()) {
    std::fprintf(stderr, "tracedb %s: %s: %s\n", cmd, path.c_str(), r.status().message().c_str());
    return false;
  }
  *out = std::move(*r);
  Verbose(cmd, "%s: %d ranks, %s events, %zu names, %zu steps, read in %.3f s", path.c_str(),
          out->ranks, WithCommas(out->events).c_str(), out->names.size(), out->step_ns.size(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return true;
}

std::string DiffJson(const query::RunDiff& d, double alpha) {
  std::string out = "{\"alpha\":" + Num(alpha) + ",\"a\":" + RunJson(d.a, d.step_mean_a) +
                    ",\"b\":" + RunJson(d.b, d.step_mean_b) +
                    ",\"step_change\":" + Num(d.step_change) +
                    ",\"step_p\":" + (d.has_step_test ? Num(d.step_test.p) : "null") +
                    ",\"straggler_wait\":" + StragglerWaitJson(d) + ",\"names\":[";
  for (size_t i = 0; i < d.names.size(); ++i) {
    const auto& n = d.names[i];
    out += (i ? "," : "");
    out += "{\"name\":" + engine::json::String(n.name) + ",\"cat\":" + engine::json::String(n.cat) +
           ",\"kind\":" + (n.routine ? "\"routine\"" : "\"phase\"") + ",\"status\":" +
           (n.a == nullptr   ? "\"new\""
            : n.b == nullptr ? "\"vanished\""
                             : "\"both\"") +
           ",\"a\":" + NameStatsJson(n.a) + ",\"b\":" + NameStatsJson(n.b) +
           ",\"mean_change\":" + (n.has_change ? Num(n.mean_change) : "null") +
           ",\"total_change\":" + (n.a && n.b && n.a->total_ns > 0 ? Num(n.total_change) : "null") +
           ",\"u\":" + (n.has_test ? Num(n.test.u_b) : "null") +
           ",\"p\":" + (n.has_test ? Num(n.test.p) : "null") +
           ",\"significant\":" + (n.has_test && n.test.p < alpha ? "true" : "false") + "}";
  }
  return out + "]}";
}

void SetupReportHtml(CLI::App* report, int* exit_code) {
  auto o = std::make_shared<HtmlOptions>();
  CLI::App* html = report->add_subcommand(
      "html", "One self-contained HTML page with plots of the job (aggregates, not events)");
  html->add_option("db", o->db, "Trace database (.tdb)")->required();
  html->add_option("-o,--output", o->output, "The HTML file to write")->required();
  html->add_option("--baseline", o->baselines,
                   "Baseline runs (databases or runs:LABEL[:N]): a comparison with the last (as "
                   "tracedb diff) and the trend of step time and top names across all")
      ->expected(1, -1);
  html->add_option("--catalog", o->catalog,
                   "The run history for runs:LABEL (default $TRACEDB_RUNS, else "
                   "~/.local/share/tracedb/runs.db)");
  html->add_option("--bins", o->bins, "Time bins of the rank x time overview (default: by ranks)")
      ->check(CLI::Range(1, 100000));
  html->add_option("--alpha", o->alpha, "Significance level of the comparison (default 0.01)")
      ->check(CLI::Range(0.0, 1.0));
  html->add_option("--why-max-events", o->why_max_events,
                   "Leave the Why section (root causes, waits, critical path) out above this "
                   "many events (default 20000000; 0: always)")
      ->check([](const std::string& v) {
        return !v.empty() && v[0] == '-' ? std::string("must be 0 or more") : std::string();
      });
  AddVerbosityFlags(html);
  html->callback([o, exit_code] { *exit_code = RunReportHtml(*o); });
}

}  // namespace tracedb::shell
