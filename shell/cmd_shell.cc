// `tracedb shell JOB.tdb`: interactive SQL over a trace database, with line editing and history
// (libedit, history in ~/.tracedb_history), statements over several lines (run when complete),
// dot-commands (.tables .schema .mode .timer .headers .help .quit), and Ctrl-C that stops the
// running query, not the shell. Reads plain lines without prompts when stdin is not a terminal.
#include <editline/readline.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>

#include "engine/sqlite.h"
#include "query/query_db.h"
#include "shell/commands.h"
#include "shell/sql_runner.h"

namespace tracedb::shell {
namespace {

struct ShellOptions {
  std::string db;
  bool writable = false;
};

std::atomic<engine::Db*> g_running_db{nullptr};
volatile sig_atomic_t g_sigint = 0;

void OnSigint(int) {
  g_sigint = 1;
  if (engine::Db* db = g_running_db.load()) db->Interrupt();
}

const char* kHelp =
    "Enter SQL ending with ';' (it may span several lines; at the end of the input the last\n"
    "statement runs without it), or a dot-command:\n"
    "  .tables              list tables and views (events is a virtual table)\n"
    "  .schema [NAME]       show the CREATE statement of NAME, or of everything\n"
    "  .mode MODE           output as table, csv, json or markdown\n"
    "  .timer on|off        print the time each statement takes\n"
    "  .help                this text\n"
    "  .quit / .exit        leave (also Ctrl-D)\n"
    "Ctrl-C stops the running statement. Useful views: spans, span_stats, name_stats_all,\n"
    "name_summary, rank_time_split, step_times, step_summary, clock_alignment (docs/sql.md).\n";

class Shell {
 public:
  Shell(engine::Db* db, bool interactive) : db_(db), interactive_(interactive) {}

  int Run() {
    if (interactive_) {
      std::printf("tracedb shell on %s. Type .help for help.\n", db_->path().c_str());
      using_history();
      if (const char* home = std::getenv("HOME"))
        history_file_ = std::string(home) + "/.tracedb_history";
      if (!history_file_.empty()) read_history(history_file_.c_str());
    }
    std::string buffer;
    int status = kExitOk;
    for (;;) {
      std::string line;
      const bool got = ReadLine(buffer.empty() ? "tracedb> " : "    ...> ", &line);
      if (g_sigint) {  // Ctrl-C while typing: drop the statement being entered, keep the shell
        g_sigint = 0;
        buffer.clear();
        if (interactive_) std::printf("^C\n");
        continue;
      }
      if (!got) break;  // end of input (Ctrl-D)
      if (buffer.empty()) {
        const size_t first = line.find_first_not_of(" \t");
        if (first == std::string::npos) continue;
        if (line[first] == '.') {
          if (interactive_) add_history(line.c_str());
          if (!DotCommand(line.substr(first))) break;
          continue;
        }
      }
      buffer += line;
      buffer += '\n';
      if (!sqlite3_complete(buffer.c_str())) continue;
      if (interactive_) {
        std::string h = buffer;
        while (!h.empty() && (h.back() == '\n' || h.back() == ' ')) h.pop_back();
        add_history(h.c_str());
      }
      if (!Execute(buffer)) status = kExitError;
      buffer.clear();
    }
    // A last statement without ';' at the end of the input still runs (as sqlite3 does).
    if (buffer.find_first_not_of(" \t\r\n") != std::string::npos && !Execute(buffer)) {
      status = kExitError;
    }
    if (interactive_) {
      std::printf("\n");
      if (!history_file_.empty()) write_history(history_file_.c_str());
    }
    return interactive_ ? kExitOk : status;
  }

 private:
  bool ReadLine(const char* prompt, std::string* line) {
    if (interactive_) {
      char* l = readline(prompt);
      if (l == nullptr) return false;
      *line = l;
      std::free(l);
      return true;
    }
    char buf[65536];
    line->clear();
    while (std::fgets(buf, sizeof(buf), stdin)) {
      *line += buf;
      if (!line->empty() && line->back() == '\n') {
        line->pop_back();
        return true;
      }
    }
    return !line->empty();
  }

  bool Execute(const std::string& sql) {
    g_sigint = 0;
    g_running_db.store(db_);
    const auto t0 = std::chrono::steady_clock::now();
    Status s = RunSql(db_, sql, format_, stdout);
    g_running_db.store(nullptr);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::fflush(stdout);
    if (!s.ok()) {
      if (g_sigint) {
        std::fprintf(stderr, "\ninterrupted\n");
      } else {
        std::fprintf(stderr, "error: %s\n", s.message().c_str());
      }
    }
    if (timer_) std::printf("time: %.3f ms\n", ms);
    g_sigint = 0;
    return s.ok();
  }

  // Returns false to leave the shell.
  bool DotCommand(const std::string& line) {
    std::istringstream in(line);
    std::string cmd, arg;
    in >> cmd >> arg;
    if (cmd == ".quit" || cmd == ".exit" || cmd == ".q") return false;
    if (cmd == ".help") {
      std::fputs(kHelp, stdout);
    } else if (cmd == ".tables") {
      Execute(
          "SELECT name, type FROM (SELECT name, type FROM sqlite_master "
          "WHERE type IN ('table','view') UNION ALL SELECT name, type FROM sqlite_temp_master "
          "WHERE type IN ('table','view') UNION ALL SELECT 'events', 'virtual table') "
          "ORDER BY name;");
    } else if (cmd == ".schema") {
      std::string sql =
          "SELECT sql || ';' AS schema FROM (SELECT name, sql FROM sqlite_master WHERE sql IS NOT "
          "NULL UNION ALL SELECT name, sql FROM sqlite_temp_master WHERE sql IS NOT NULL)";
      if (!arg.empty()) {
        std::string quoted;
        for (char c : arg) {
          quoted += c;
          if (c == '\'') quoted += '\'';
        }
        sql += " WHERE name = '" + quoted + "'";
      }
      const OutputFormat saved = format_;
      format_ = OutputFormat::kCsv;
      Execute(sql + ";");
      format_ = saved;
      if (arg.empty() || arg == "events") {
        std::printf(
            "-- events: virtual table (id, rank, tid, track, track_name, lane, name, cat, kind, "
            "ts, dur, end_ts, depth, parent, bytes, peer, tag, comm, seq, flow, value, step, "
            "args)\n");
      }
    } else if (cmd == ".mode") {
      if (!ParseOutputFormat(arg, &format_)) {
        std::fprintf(stderr, "unknown mode '%s' (table, csv, json, markdown)\n", arg.c_str());
      }
    } else if (cmd == ".timer") {
      if (arg == "on")
        timer_ = true;
      else if (arg == "off")
        timer_ = false;
      else
        std::fprintf(stderr, "usage: .timer on|off\n");
    } else {
      std::fprintf(stderr, "unknown command %s; try .help\n", cmd.c_str());
    }
    return true;
  }

  engine::Db* db_;
  bool interactive_;
  OutputFormat format_ = OutputFormat::kTable;
  bool timer_ = false;
  std::string history_file_;
};

int RunShell(const ShellOptions& o) {
  auto db = query::OpenQueryDb(o.db, o.writable);
  if (!db.ok()) {
    std::fprintf(stderr, "tracedb shell: %s\n", db.status().message().c_str());
    return kExitError;
  }
  struct sigaction sa = {};
  sa.sa_handler = OnSigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  Shell shell(db->get(), isatty(STDIN_FILENO) != 0);
  return shell.Run();
}

}  // namespace

void SetupShell(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ShellOptions>();
  CLI::App* sub = app.add_subcommand("shell", "Interactive SQL over a trace database");
  sub->add_option("db", o->db, "Trace database (.tdb)")->required();
  sub->add_flag("--writable", o->writable, "Open read-write (default: read-only)");
  sub->callback([o, exit_code] { *exit_code = RunShell(*o); });
}

}  // namespace tracedb::shell
