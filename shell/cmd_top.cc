// `tracedb top DIR_OR_DB [--once] [--interval S] [--window S] [--db PATH] [--frames N]`: a live
// view of a running job, like htop: per rank the steps, step time, compute and communication
// share, events and drops per second, and the current stragglers, over the last --window
// seconds of trace time. Given a trace directory, every refresh is an incremental compaction
// into a database of top's own (a temporary file, or --db), so the job's files are only read;
// given a database (kept up to date by `tracedb compact --watch`), it is re-read. On a terminal
// the frame is redrawn in place and q or Ctrl-C quits; elsewhere frames are printed one after
// another. docs/top.md.
#include <poll.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/compact/compactor.h"
#include "engine/db/trace_writer.h"
#include "engine/util/atomic_file.h"
#include "engine/util/saturating.h"
#include "query/open/query_db.h"
#include "query/report/report_data.h"
#include "shell/commands.h"
#include "shell/format.h"

namespace tracedb::shell {
namespace {

struct TopOptions {
  std::string input;
  std::string db;  // with a directory: the database top compacts into
  bool once = false;
  double interval_s = 2;
  double window_s = 10;
  int frames = 0;  // 0: until q, Ctrl-C or the end of input
};

std::atomic<bool> g_top_stop{false};
void OnTopSignal(int) { g_top_stop.store(true); }

double WallNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool IsDir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Per rank, what one frame shows.
struct RankRow {
  int32_t rank = 0;
  int64_t steps = 0;  // step markers so far
  int64_t last_step = -1;
  double step_ns = 0;  // mean step time in the window (0: fewer than two steps in it)
  double last_step_ns = 0;
  double compute_share = 0;
  double comm_share = 0;
  double overlap_share = 0;  // time in both compute and communication spans / wall
  int64_t compute_ns = 0;
  double events_per_s = 0;
  int64_t dropped = 0;      // so far
  double drops_per_s = -1;  // -1: not known yet (first frame)
};

struct Previous {
  double wall = 0;
  std::map<int32_t, int64_t> dropped;
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Builds one frame from the database. `prev` carries the drop counts of the previous frame.
StatusOr<std::string> Frame(engine::Db* db, const TopOptions& o, const std::string& title,
                            Previous* prev) {
  const double now = WallNow();
  TRACEDB_ASSIGN_OR_RETURN(int64_t total, db->QueryInt("SELECT sum(count) FROM main.blocks", 0));
  TRACEDB_ASSIGN_OR_RETURN(int64_t t_end, db->QueryInt("SELECT max(max_end) FROM main.blocks", 0));
  TRACEDB_ASSIGN_OR_RETURN(int64_t t_first, db->QueryInt("SELECT min(min_ts) FROM main.blocks", 0));
  // (Saturating: --window 1e30 is "all of it", not an undefined conversion.)
  const int64_t window = std::max<int64_t>(1, engine::SaturateInt64(o.window_s * 1e9));
  // Saturating: the times of a DB made elsewhere can lie at the ends of int64.
  const int64_t t0 = std::max(t_first, engine::SaturatingSub(t_end, window));
  const double span_s = std::max(1e-9, static_cast<double>(engine::SaturatingSub(t_end, t0)) / 1e9);
  std::map<int32_t, RankRow> rows;
  if (total > 0) {
    TRACEDB_ASSIGN_OR_RETURN(query::Overview ov,
                             query::BuildOverview(db, 1, t0, engine::SaturatingAdd(t_end, 1)));
    for (const auto& ra : ov.ranks) {
      RankRow& r = rows[ra.rank];
      r.rank = ra.rank;
      const int64_t wall = engine::SaturatingSub(
          std::min(ra.last_end, engine::SaturatingAdd(t_end, 1)), std::max(ra.first_ts, t0));
      if (wall > 0) {
        r.compute_share = static_cast<double>(ra.compute_ns) / static_cast<double>(wall);
        r.comm_share = static_cast<double>(ra.comm_ns) / static_cast<double>(wall);
        // busy is the union of the two: what exceeds it was counted in both.
        r.overlap_share =
            std::max(0.0, static_cast<double>(ra.compute_ns) + static_cast<double>(ra.comm_ns) -
                              static_cast<double>(ra.busy_ns)) /
            static_cast<double>(wall);
      }
      r.compute_ns = ra.compute_ns;
    }
    TRACEDB_ASSIGN_OR_RETURN(
        engine::Stmt ev,
        db->Prepare("SELECT rank, count(*) FROM events WHERE ts >= ?1 GROUP BY rank"));
    ev.Bind(1, t0);
    while (true) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, ev.Step());
      if (!row) break;
      RankRow& r = rows[static_cast<int32_t>(ev.Int(0))];
      r.rank = static_cast<int32_t>(ev.Int(0));
      r.events_per_s = static_cast<double>(ev.Int(1)) / span_s;
    }
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(engine::Stmt st,
                             db->Prepare("SELECT rank, count(*), max(step) FROM main.steps "
                                         "GROUP BY rank"));
    while (true) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      RankRow& r = rows[static_cast<int32_t>(st.Int(0))];
      r.rank = static_cast<int32_t>(st.Int(0));
      r.steps = st.Int(1);
      r.last_step = st.Int(2);
    }
    // Step starts in the window (and the one before it), per rank.
    TRACEDB_ASSIGN_OR_RETURN(engine::Stmt ts,
                             db->Prepare("SELECT rank, ts FROM main.steps WHERE ts >= ?1 "
                                         "ORDER BY rank, ts"));
    ts.Bind(1, t0);
    std::map<int32_t, std::vector<int64_t>> starts;
    while (true) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, ts.Step());
      if (!row) break;
      starts[static_cast<int32_t>(ts.Int(0))].push_back(ts.Int(1));
    }
    for (const auto& [rank, v] : starts) {
      if (v.size() < 2) continue;
      RankRow& r = rows[rank];
      r.step_ns = static_cast<double>(v.back() - v.front()) / static_cast<double>(v.size() - 1);
      r.last_step_ns = static_cast<double>(v.back() - v[v.size() - 2]);
    }
  }
  {
    TRACEDB_ASSIGN_OR_RETURN(engine::Stmt st,
                             db->Prepare("SELECT rank, sum(value) FROM main.stats WHERE "
                                         "name = 'dropped' GROUP BY rank"));
    while (true) {
      TRACEDB_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      const int32_t rank = static_cast<int32_t>(st.Int(0));
      if (rank < 0) continue;
      RankRow& r = rows[rank];
      r.rank = rank;
      r.dropped = st.Int(1);
    }
  }
  for (auto& [rank, r] : rows) {
    if (prev->wall > 0 && now > prev->wall) {
      r.drops_per_s = static_cast<double>(r.dropped - prev->dropped[rank]) / (now - prev->wall);
    }
  }
  prev->wall = now;
  prev->dropped.clear();
  for (const auto& [rank, r] : rows) prev->dropped[rank] = r.dropped;

  // Stragglers: a step time or a compute time more than 10% over the median rank's.
  std::vector<double> steps, computes;
  for (const auto& [rank, r] : rows) {
    if (r.step_ns > 0) steps.push_back(r.step_ns);
    computes.push_back(static_cast<double>(r.compute_ns));
  }
  const double step_med = Median(steps), compute_med = Median(computes);
  std::string stragglers;
  for (const auto& [rank, r] : rows) {
    std::string why;
    if (rows.size() > 1 && step_med > 0 && r.step_ns > 1.1 * step_med) {
      why = Fmt("step time %+.0f%%", 100 * (r.step_ns / step_med - 1));
    }
    if (rows.size() > 1 && compute_med > 0 && r.compute_ns > 1.1 * compute_med) {
      why += (why.empty() ? "" : ", ") +
             Fmt("compute %+.0f%%", 100 * (static_cast<double>(r.compute_ns) / compute_med - 1));
    }
    if (!why.empty()) stragglers += Fmt("  rank %d (%s over the median)\n", rank, why.c_str());
  }

  int64_t dropped = 0;
  double ev_rate = 0;
  for (const auto& [rank, r] : rows) {
    dropped += r.dropped;
    ev_rate += r.events_per_s;
  }
  std::string out = title + "\n";
  out +=
      Fmt("%zu ranks, %s events, %s of trace, %s dropped; last %s of trace time: "
          "%s events/s\n\n",
          rows.size(), WithCommas(static_cast<uint64_t>(total)).c_str(),
          HumanDuration(static_cast<double>(engine::SaturatingSub(t_end, t_first))).c_str(),
          WithCommas(static_cast<uint64_t>(dropped)).c_str(),
          HumanDuration(static_cast<double>(engine::SaturatingSub(t_end, t0))).c_str(),
          WithCommas(static_cast<uint64_t>(ev_rate + 0.5)).c_str());
  out += Fmt("%6s %8s %8s %11s %11s %9s %7s %12s %9s %8s\n", "rank", "steps", "step", "step time",
             "last step", "compute", "comm", "events/s", "dropped", "drops/s");
  for (const auto& [rank, r] : rows) {
    out +=
        Fmt("%6d %8lld %8s %11s %11s %8.1f%% %6.1f%% %12s %9s %8s\n", rank,
            static_cast<long long>(r.steps),
            r.last_step >= 0 ? std::to_string(r.last_step).c_str() : "-",
            r.step_ns > 0 ? HumanDuration(r.step_ns).c_str() : "-",
            r.last_step_ns > 0 ? HumanDuration(r.last_step_ns).c_str() : "-", 100 * r.compute_share,
            100 * r.comm_share, WithCommas(static_cast<uint64_t>(r.events_per_s + 0.5)).c_str(),
            WithCommas(static_cast<uint64_t>(r.dropped)).c_str(),
            r.drops_per_s < 0 ? "-" : Fmt("%.0f", r.drops_per_s).c_str());
  }
  // Shares that add up to more than 100%: say so (communication hidden behind computation).
  std::string overlapping;
  double max_overlap = 0;
  for (const auto& [rank, r] : rows) {
    if (r.overlap_share < 0.005) continue;
    overlapping += (overlapping.empty() ? "" : ",") + std::to_string(rank);
    max_overlap = std::max(max_overlap, r.overlap_share);
  }
  if (!overlapping.empty()) {
    out +=
        Fmt("\ncompute and communication overlap on rank%s %s (up to %.1f%% of the time is "
            "in both, so compute + comm can exceed 100%%)\n",
            overlapping.find(',') == std::string::npos ? "" : "s", overlapping.c_str(),
            100 * max_overlap);
  }
  out += stragglers.empty() ? "\nstragglers: none\n" : "\nstragglers:\n" + stragglers;
  return out;
}

// The terminal in non-canonical mode (keys without Enter, no echo) while it lives.
class RawTerminal {
 public:
  RawTerminal() {
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  // Waits up to `seconds` for q (true) or a signal.
  bool WaitForQuit(double seconds) const {
    const double until = WallNow() + seconds;
    while (!g_top_stop.load()) {
      const double left = until - WallNow();
      if (left <= 0) return false;
      if (!active_) {
        usleep(static_cast<useconds_t>(std::min(left, 0.05) * 1e6));
        continue;
      }
      pollfd p{STDIN_FILENO, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(std::min(left, 0.05) * 1000) + 1) > 0) {
        char c = 0;
        if (read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q')) return true;
      }
    }
    return true;
  }

 private:
  termios saved_{};
  bool active_ = false;
};

int RunTop(const TopOptions& o) {
  const bool from_dir = IsDir(o.input);
  if (!from_dir && ::access(o.input.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "tracedb top: cannot read %s: %s\n", o.input.c_str(),
                 std::strerror(errno));
    return kExitError;
  }
  if (!(o.interval_s > 0) || !(o.window_s > 0)) {  // (NaN too)
    std::fprintf(stderr, "tracedb top: --interval and --window must be positive\n");
    return kExitUsage;
  }
  std::string db_path = o.input;
  std::string temp_dir;
  std::unique_ptr<engine::TraceWriter> writer;
  if (from_dir) {
    if (o.db.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/tracedb-top-XXXXXX";
      if (mkdtemp(tmpl.data()) == nullptr) {
        std::fprintf(stderr, "tracedb top: cannot create a temporary directory %s: %s\n",
                     tmpl.c_str(), std::strerror(errno));
        return kExitError;
      }
      temp_dir = tmpl;
      db_path = temp_dir + "/top.tdb";
    } else {
      db_path = o.db;
    }
  }
  auto cleanup = [&] {
    writer.reset();
    if (!temp_dir.empty()) {
      engine::RemoveDbFiles(db_path);
      ::rmdir(temp_dir.c_str());
    }
  };
  struct sigaction sa = {};
  sa.sa_handler = OnTopSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const bool tty = isatty(STDOUT_FILENO) && !o.once;
  std::unique_ptr<RawTerminal> term;
  if (tty) term = std::make_unique<RawTerminal>();
  engine::CompactOptions co;
  co.inputs = {o.input};
  Previous prev;
  int frames = 0;
  int rc = kExitOk;
  while (!g_top_stop.load()) {
    std::string error;
    if (from_dir) {
      if (writer == nullptr) {
        auto w = engine::TraceWriter::Open(db_path);
        if (!w.ok()) {
          std::fprintf(stderr, "tracedb top: %s\n", w.status().message().c_str());
          rc = kExitError;
          break;
        }
        writer = std::move(*w);
      }
      auto stats = engine::Compact(writer.get(), co, {});
      if (!stats.ok() && !stats.status().IsNotFound()) {
        std::fprintf(stderr, "tracedb top: %s\n", stats.status().message().c_str());
        rc = kExitError;
        break;
      }
    }
    std::string frame;
    {
      auto db = query::OpenQueryDb(db_path);
      if (!db.ok()) {
        std::fprintf(stderr, "tracedb top: %s\n", db.status().message().c_str());
        rc = kExitError;
        break;
      }
      char when[32];
      const std::time_t t = std::time(nullptr);
      std::tm tm{};
      localtime_r(&t, &tm);
      std::strftime(when, sizeof(when), "%H:%M:%S", &tm);
      const std::string title = Fmt(
          "tracedb top %s   %s%s", o.input.c_str(), when,
          o.once ? ""
                 : Fmt("   (every %g s; %s)", o.interval_s, tty ? "q to quit" : "Ctrl-C to stop")
                       .c_str());
      auto f = Frame(db->get(), o, title, &prev);
      if (!f.ok()) {
        std::fprintf(stderr, "tracedb top: %s: %s\n", db_path.c_str(),
                     f.status().message().c_str());
        rc = kExitError;
        break;
      }
      frame = std::move(*f);
    }
    if (tty) {
      std::fputs("\x1b[H\x1b[2J", stdout);  // home, clear
    } else if (frames > 0) {
      std::fputs("\n", stdout);
    }
    std::fputs(frame.c_str(), stdout);
    std::fflush(stdout);
    ++frames;
    if (o.once || (o.frames > 0 && frames >= o.frames)) break;
    if (term != nullptr) {
      if (term->WaitForQuit(o.interval_s)) break;
    } else {
      for (double w = 0; w < o.interval_s && !g_top_stop.load(); w += 0.05) usleep(50000);
    }
  }
  cleanup();
  return rc;
}

}  // namespace

void SetupTop(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<TopOptions>();
  CLI::App* sub = app.add_subcommand(
      "top", "Live view of a running job: step time, communication, stragglers, events/s");
  sub->add_option("input", o->input, "A trace directory (compacted incrementally) or a database")
      ->required();
  sub->add_flag("--once", o->once, "Print one frame and exit");
  sub->add_option("--interval", o->interval_s, "Seconds between refreshes (default 2)");
  sub->add_option("--window", o->window_s, "Seconds of trace time each frame covers (default 10)");
  sub->add_option("--db", o->db,
                  "With a directory: the database to compact into (kept; default: a temporary "
                  "file, removed at exit)");
  sub->add_option("--frames", o->frames, "Stop after this many frames (default: until q/Ctrl-C)");
  sub->callback([o, exit_code] { *exit_code = RunTop(*o); });
}

}  // namespace tracedb::shell
