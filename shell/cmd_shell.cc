// `tracedb shell JOB.tdb`: interactive SQL over a trace database, with line editing, history
// (libedit, ~/.tracedb_history) and tab completion (shell/shell_complete.h), statements over
// several lines (run when complete), dot-commands (kHelp below; docs/cli.md), a pager for
// results longer than the terminal, and Ctrl-C that stops the running query, not the shell.
// Reads plain lines without prompts, banner or pager when stdin is not a terminal.
#include <editline/readline.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/db/sqlite.h"
#include "engine/util/parse_number.h"
#include "query/open/query_db.h"
#include "shell/commands.h"
#include "shell/shell_complete.h"
#include "shell/sql_dump.h"
#include "shell/sql_runner.h"
#include "shell/verbosity.h"

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
    "  .mode MODE           output as table, box, line, csv, json or markdown\n"
    "  .headers on|off      print column names (table, box, csv)\n"
    "  .nullvalue TEXT      print NULL as TEXT (default: nothing)\n"
    "  .width N1 N2 ...     minimum widths of the columns in table and box modes (0: auto)\n"
    "  .output [FILE]       send results to FILE (truncated), or back to stdout\n"
    "  .read FILE           run the SQL and dot-commands in FILE\n"
    "  .dump [TABLE]        the database (or tables LIKE TABLE) as SQL text\n"
    "  .pager on|off|CMD    page long results on a terminal (default on: $PAGER, else less)\n"
    "  .timer on|off        print the time each statement takes\n"
    "  .show                the current settings\n"
    "  .help                this text\n"
    "  .quit / .exit        leave (also Ctrl-D)\n"
    "Tab completes table, view, column and function names. Ctrl-C stops the running statement.\n"
    "Useful views: spans, span_stats, name_stats_all, name_summary, rank_time_split, step_times,\n"
    "step_summary, clock_alignment (docs/sql.md).\n";

constexpr int kMaxReadDepth = 16;  // .read inside .read, at most this deep

// The rows of the terminal on stdout, or 0 when stdout is not a terminal.
int TerminalRows() {
  if (!isatty(STDOUT_FILENO)) return 0;
  struct winsize ws = {};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0) return 24;
  return ws.ws_row;
}

class Shell {
 public:
  Shell(engine::Db* db, bool interactive) : db_(db), interactive_(interactive) {
    // The pager is for a person at a terminal: never when the output goes to a pipe or a file.
    pager_on_ = interactive_ && TerminalRows() > 0;
    const char* pager = std::getenv("PAGER");
    pager_cmd_ = pager != nullptr && *pager ? pager : "less -FRX";
  }
  ~Shell() {
    if (out_ != stdout) std::fclose(out_);
  }

  int Run() {
    if (interactive_) {
      if (GetVerbosity() != Verbosity::kQuiet) {
        std::printf("tracedb shell on %s. Type .help for help.\n", db_->path().c_str());
      }
      using_history();
      InstallCompletion(db_);
      if (const char* home = std::getenv("HOME"))
        history_file_ = std::string(home) + "/.tracedb_history";
      if (!history_file_.empty()) read_history(history_file_.c_str());
    }
    std::string buffer;
    bool ok = true;
    for (;;) {
      std::string line;
      const bool got = interactive_
                           ? ReadInteractive(buffer.empty() ? "tracedb> " : "    ...> ", &line)
                           : ReadPlain(stdin, &line);
      if (g_sigint && interactive_) {  // Ctrl-C while typing: drop the statement, keep the shell
        g_sigint = 0;
        buffer.clear();
        std::printf("^C\n");
        continue;
      }
      if (!got) break;  // end of input (Ctrl-D)
      if (!HandleLine(line, &buffer, &ok, 0)) break;
    }
    // A last statement without ';' at the end of the input still runs (as sqlite3 does).
    if (!quit_ && !Finish(&buffer)) ok = false;
    if (interactive_) {
      std::printf("\n");
      if (!history_file_.empty()) write_history(history_file_.c_str());
      InstallCompletion(nullptr);
    }
    return interactive_ || ok ? kExitOk : kExitError;
  }

 private:
  bool ReadInteractive(const char* prompt, std::string* line) {
    char* l = readline(prompt);
    if (l == nullptr) return false;
    *line = l;
    std::free(l);
    return true;
  }

  static bool ReadPlain(FILE* in, std::string* line) {
    char buf[65536];
    line->clear();
    while (std::fgets(buf, sizeof(buf), in)) {
      *line += buf;
      if (!line->empty() && line->back() == '\n') {
        line->pop_back();
        if (!line->empty() && line->back() == '\r') line->pop_back();
        return true;
      }
    }
    return !line->empty();
  }

  // Takes one input line: a dot-command, or part of an SQL statement (run once complete).
  // Sets *ok to false when something failed. Returns false to leave the shell (.quit).
  bool HandleLine(const std::string& line, std::string* buffer, bool* ok, int depth) {
    if (buffer->empty()) {
      const size_t first = line.find_first_not_of(" \t");
      if (first == std::string::npos) return true;
      if (line[first] == '.') {
        if (interactive_ && depth == 0) add_history(line.c_str());
        if (!DotCommand(line.substr(first), ok, depth)) {
          quit_ = true;
          return false;
        }
        return true;
      }
    }
    *buffer += line;
    *buffer += '\n';
    if (!sqlite3_complete(buffer->c_str())) return true;
    if (interactive_ && depth == 0) {
      std::string h = *buffer;
      while (!h.empty() && (h.back() == '\n' || h.back() == ' ')) h.pop_back();
      add_history(h.c_str());
    }
    if (!Execute(*buffer)) *ok = false;
    buffer->clear();
    return true;
  }

  bool Finish(std::string* buffer) {
    const bool pending = buffer->find_first_not_of(" \t\r\n") != std::string::npos;
    const bool ran = !pending || Execute(*buffer);
    buffer->clear();
    return ran;
  }

  // Runs `sql` and prints its rows to the output (through the pager when they are long).
  bool Execute(const std::string& sql) {
    g_sigint = 0;
    g_running_db.store(db_);
    const auto t0 = std::chrono::steady_clock::now();
    Status s;
    if (pager_on_ && out_ == stdout) {
      s = RunPaged(sql);
    } else {
      s = RunSql(db_, sql, print_, out_);
    }
    g_running_db.store(nullptr);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::fflush(out_);
    if (!s.ok()) {
      if (g_sigint) {
        std::fprintf(stderr, "\ninterrupted\n");
      } else {
        std::fprintf(stderr, "tracedb shell: %s\n", s.message().c_str());
      }
    }
    if (timer_) std::printf("time: %.3f ms\n", ms);
    g_sigint = 0;
    return s.ok();
  }

  // Prints the first column of each row of `sql` as it is, one row a line.
  bool PrintRaw(const std::string& sql) {
    auto st = db_->Prepare(sql);
    Status s = st.ok() ? Status::Ok() : st.status();
    while (s.ok()) {
      auto row = st->Step();
      if (!row.ok()) s = row.status();
      if (!s.ok() || !*row) break;
      const std::string_view text = st->Text(0);
      std::fwrite(text.data(), 1, text.size(), out_);
      std::fputc('\n', out_);
    }
    if (!s.ok()) std::fprintf(stderr, "tracedb shell: %s\n", s.message().c_str());
    return s.ok();
  }

  // Prints into memory first; more lines than the terminal has go to the pager.
  Status RunPaged(const std::string& sql) {
    char* data = nullptr;
    size_t size = 0;
    FILE* mem = open_memstream(&data, &size);
    if (mem == nullptr) return RunSql(db_, sql, print_, stdout);
    Status s = RunSql(db_, sql, print_, mem);
    std::fclose(mem);
    size_t lines = 0;
    for (size_t i = 0; i < size; ++i) lines += data[i] == '\n';
    FILE* pager = nullptr;
    if (lines + 1 >= static_cast<size_t>(TerminalRows())) {
      std::fflush(stdout);
      pager = popen(pager_cmd_.c_str(), "w");
      if (pager == nullptr) {
        std::fprintf(stderr, "cannot start the pager '%s': %s\n", pager_cmd_.c_str(),
                     std::strerror(errno));
      }
    }
    FILE* to = pager ? pager : stdout;
    std::fwrite(data, 1, size, to);  // a pager quit early: EPIPE here (SIGPIPE is ignored)
    if (pager != nullptr) {
      const int rc = pclose(pager);
      if (rc != 0 && WIFEXITED(rc) && WEXITSTATUS(rc) == 127) {
        std::fprintf(stderr, "the pager '%s' was not found (.pager off, or set $PAGER)\n",
                     pager_cmd_.c_str());
        std::fwrite(data, 1, size, stdout);
      }
    }
    std::free(data);
    return s;
  }

  // Reads one on|off argument into *flag; prints the usage otherwise.
  static bool OnOff(const std::string& arg, const char* usage, bool* flag) {
    if (arg == "on" || arg == "1" || arg == "yes") {
      *flag = true;
    } else if (arg == "off" || arg == "0" || arg == "no") {
      *flag = false;
    } else {
      std::fprintf(stderr, "usage: %s\n", usage);
      return false;
    }
    return true;
  }

  // Runs the SQL and dot-commands of `path` as if typed.
  bool ReadFile(const std::string& path, int depth) {
    if (depth >= kMaxReadDepth) {
      std::fprintf(stderr, ".read %s: nested more than %d deep\n", path.c_str(), kMaxReadDepth);
      return false;
    }
    FILE* in = std::fopen(path.c_str(), "r");
    if (in == nullptr) {
      std::fprintf(stderr, ".read: cannot open %s: %s\n", path.c_str(), std::strerror(errno));
      return false;
    }
    std::string buffer, line;
    bool ok = true;
    while (ReadPlain(in, &line)) {
      if (!HandleLine(line, &buffer, &ok, depth + 1)) break;
    }
    std::fclose(in);
    if (!quit_ && !Finish(&buffer)) ok = false;
    return ok;
  }

  // Returns false to leave the shell; sets *ok to false when the command failed.
  bool DotCommand(const std::string& line, bool* ok, int depth) {
    std::istringstream in(line);
    std::string cmd;
    std::vector<std::string> args;
    in >> cmd;
    for (std::string a; in >> a;) args.push_back(a);
    // The rest of the line after the command, for file names with spaces.
    std::string rest = line.substr(cmd.size());
    rest.erase(0, rest.find_first_not_of(" \t"));
    while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.pop_back();
    const std::string arg = args.empty() ? "" : args[0];
    bool good = true;
    if (cmd == ".quit" || cmd == ".exit" || cmd == ".q") return false;
    if (cmd == ".help") {
      std::fputs(kHelp, stdout);
    } else if (cmd == ".tables") {
      good = Execute(
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
      // Each statement as sqlite3's .schema prints it (no quoting), so it can be pasted there.
      good = PrintRaw(sql);
      if (arg.empty() || arg == "events") {
        std::fprintf(
            out_,
            "-- events: virtual table (id, rank, tid, track, track_name, lane, name, cat, kind, "
            "ts, dur, end_ts, depth, parent, bytes, peer, tag, comm, seq, flow, value, step, "
            "args)\n");
      }
    } else if (cmd == ".mode") {
      if (!ParseOutputFormat(arg, &print_.format)) {
        std::fprintf(stderr, "unknown mode '%s' (%s)\n", arg.c_str(), kOutputFormatNames);
        good = false;
      }
    } else if (cmd == ".headers" || cmd == ".header") {
      good = OnOff(arg, ".headers on|off", &print_.headers);
    } else if (cmd == ".nullvalue") {
      print_.null_value = rest;
    } else if (cmd == ".width") {
      std::vector<int> widths;
      for (const std::string& a : args) {
        int64_t w = 0;
        if (!engine::ParseInt64(a, &w) || w < 0 || w > 10000) {
          std::fprintf(stderr, ".width: '%s' is not a width (0 to 10000)\n", a.c_str());
          good = false;
          break;
        }
        widths.push_back(static_cast<int>(w));
      }
      if (good) print_.widths = widths;
    } else if (cmd == ".output") {
      good = SetOutput(rest);
    } else if (cmd == ".read") {
      if (rest.empty()) {
        std::fprintf(stderr, "usage: .read FILE\n");
        good = false;
      } else {
        good = ReadFile(rest, depth);
        if (quit_) return false;
      }
    } else if (cmd == ".dump") {
      Status s = DumpSql(db_, arg, out_);
      std::fflush(out_);
      if (!s.ok()) {
        std::fprintf(stderr, "tracedb shell: %s\n", s.message().c_str());
        good = false;
      }
    } else if (cmd == ".pager") {
      if (arg == "on" || arg == "off") {
        pager_on_ = arg == "on" && interactive_ && TerminalRows() > 0;
        if (arg == "on" && !pager_on_) std::fprintf(stderr, "no pager: stdout is not a terminal\n");
      } else if (!rest.empty()) {
        pager_cmd_ = rest;
        pager_on_ = interactive_ && TerminalRows() > 0;
      } else {
        std::fprintf(stderr, "usage: .pager on|off|COMMAND\n");
        good = false;
      }
    } else if (cmd == ".timer") {
      good = OnOff(arg, ".timer on|off", &timer_);
    } else if (cmd == ".show") {
      std::string widths;
      for (int w : print_.widths) widths += (widths.empty() ? "" : " ") + std::to_string(w);
      std::fprintf(out_,
                   "     mode: %s\n  headers: %s\nnullvalue: \"%s\"\n   output: %s\n    width: %s\n"
                   "    pager: %s (%s)\n    timer: %s\n database: %s\n",
                   OutputFormatName(print_.format), print_.headers ? "on" : "off",
                   print_.null_value.c_str(), out_ == stdout ? "stdout" : out_path_.c_str(),
                   widths.c_str(), pager_on_ ? "on" : "off", pager_cmd_.c_str(),
                   timer_ ? "on" : "off", db_->path().c_str());
    } else {
      std::fprintf(stderr, "unknown command %s; try .help\n", cmd.c_str());
      good = false;
    }
    if (!good) *ok = false;
    return true;
  }

  bool SetOutput(const std::string& path) {
    if (out_ != stdout) std::fclose(out_);
    out_ = stdout;
    out_path_.clear();
    if (path.empty() || path == "stdout") return true;
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, ".output: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
      return false;
    }
    out_ = f;
    out_path_ = path;
    return true;
  }

  engine::Db* db_;
  bool interactive_;
  PrintOptions print_;
  bool timer_ = false;
  bool quit_ = false;
  bool pager_on_ = false;
  std::string pager_cmd_;
  FILE* out_ = stdout;
  std::string out_path_;
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
  // A pager the user quits early, or a closed pipe, is an EPIPE to handle, not a kill.
  signal(SIGPIPE, SIG_IGN);
  Shell shell(db->get(), isatty(STDIN_FILENO) != 0);
  return shell.Run();
}

}  // namespace

void SetupShell(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ShellOptions>();
  CLI::App* sub = app.add_subcommand("shell", "Interactive SQL over a trace database");
  sub->add_option("db", o->db, "Trace database (.tdb)")->required();
  sub->add_flag("--writable", o->writable, "Open read-write (default: read-only)");
  AddVerbosityFlags(sub);
  sub->callback([o, exit_code] { *exit_code = RunShell(*o); });
}

}  // namespace tracedb::shell
