// `tracedb record [-o JOB.tdb] [--dir DIR] [--mpi|--no-mpi] [--nproc N] -- COMMAND...`: runs a
// command (for example `mpirun -np 4 ./app`) with the recorder, and the MPI interposer, injected
// into every rank, waits for it, compacts its segments into JOB.tdb and prints a short summary, as
// `bfrun --timeline-filename` or `nsys profile` do. Exits with the command's exit code. With
// `--nproc N` it is the launcher itself: N local ranks with RANK, LOCAL_RANK, WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT set, as torchrun does. A command that dies (a signal, a non-zero
// exit) is reported with the rank and pid that died, and what was flushed is still compacted.
//
// Stopping: SIGTERM, SIGINT or SIGHUP sent to `tracedb record` (by `timeout`, a batch scheduler,
// Ctrl-C) is forwarded to the job, which is then given `--grace` seconds to stop (its ranks'
// recorders flush on SIGTERM/SIGINT/SIGHUP) before it is killed (SIGKILL); what it flushed is
// compacted either way. The job runs in a process group of its own, so that the signal reaches
// it once, from here, however it was sent; only when `tracedb record` runs in the foreground of
// a terminal does the job stay in its group (the terminal's Ctrl-C and job control then reach it
// directly, and a signal from the terminal is not sent twice). A stop signal this process was
// started with ignored (`nohup`'s SIGHUP) stays ignored, here and in the job.
//
// Python: the tracedb package's start-up directory (python/_boot, docs/python.md) is put first on
// PYTHONPATH, so that every Python rank imports tracedb (recording starts) and, under an MPI
// launcher, gets the RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT torch.distributed needs.
//
// Injection: TRACEDB_DIR and LD_PRELOAD reach the ranks, not the launcher: after an Open MPI
// `mpirun`/`mpiexec` they are passed as `-x NAME=VALUE` (in every app context of an MPMD
// command line), after an MPICH (Hydra) one as
// `-genv NAME VALUE`; other commands (including `srun`, which exports the environment) get them
// in their environment.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/compact/compactor.h"
#include "engine/compact/output_lock.h"
#include "engine/db/trace_writer.h"
#include "engine/segment/segment_dir.h"
#include "engine/segment/segment_reader.h"
#include "query/open/query_db.h"
#include "recorder/cuda/record_env.h"
#include "recorder/flight_ring.h"
#include "shell/commands.h"
#include "shell/format.h"
#include "shell/record_meta.h"
#include "shell/verbosity.h"

extern char** environ;

namespace tracedb::shell {
namespace {

namespace fs = std::filesystem;

struct RecordOptions {
  std::string output = "trace.tdb";
  std::string dir;
  bool mpi = false, no_mpi = false;
  bool keep_segments = false;
  bool force = false;
  int nproc = 0;             // > 0: launch this many local ranks of the command
  double grace_s = 10;       // a stopping job's time to flush and exit before SIGKILL
  std::string flight;        // flight-recorder mode: TRACEDB_FLIGHT for every rank (docs/flight.md)
  std::string hang_timeout;  // the hang watchdog: TRACEDB_HANG_TIMEOUT for every rank
  double slow_step = -1;     // >= 0: TRACEDB_SLOW_STEP for every rank (flight mode)
  bool nccl = false, cuda = false, nvtx = false;  // GPU capture (docs/gpu-capture.md)
  std::string nccl_events;                        // TRACEDB_NCCL_EVENTS for the NCCL plugin
  std::vector<std::string> command;
};

std::string SelfDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

// Finds a library next to this binary (build tree or installed layout), or from `env`.
std::string FindLibrary(const char* env, const std::string& name,
                        const std::vector<std::string>& subdirs) {
  if (const char* v = std::getenv(env); v != nullptr && *v) return v;
  const std::string self = SelfDir();
  for (const std::string& sub : subdirs) {
    const fs::path p = fs::path(self) / sub / name;
    if (fs::exists(p)) return fs::canonical(p).string();
  }
  return "";
}

std::string Basename(const std::string& p) { return fs::path(p).filename().string(); }

bool IsMpiLauncher(const std::string& cmd) {
  const std::string b = Basename(cmd);
  return b == "mpirun" || b == "mpiexec" || b == "orterun" || b == "mpiexec.hydra" ||
         b == "mpiexec.openmpi" || b == "mpirun.openmpi" || b == "mpiexec.mpich" ||
         b == "mpirun.mpich" || b == "srun";
}

// "openmpi", "hydra" or "" (other, or srun: the environment is inherited).
std::string LauncherFlavor(const std::string& cmd) {
  if (Basename(cmd) == "srun") return "";
  // `cmd --version`, run without a shell (the path is an argument, never parsed), its stdout
  // and stderr read through a pipe.
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return "";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::string arg0 = cmd, arg1 = "--version";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, cmd.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(pipefd[1]);
  std::string out;
  if (rc == 0) {
    char buf[512];
    for (;;) {
      const ssize_t n = ::read(pipefd[0], buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || out.size() > (1 << 20)) break;
      out.append(buf, static_cast<size_t>(n));
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  ::close(pipefd[0]);
  if (out.find("Open MPI") != std::string::npos || out.find("OpenRTE") != std::string::npos) {
    return "openmpi";
  }
  if (out.find("HYDRA") != std::string::npos || out.find("Hydra") != std::string::npos) {
    return "hydra";
  }
  return "";
}

// The Python package's directories: "_boot" (sitecustomize.py) and the package's parent, in the
// build tree (build/python) or installed (lib/tracedb/python). Empty when not built.
std::vector<std::string> FindPythonDirs() {
  if (const char* v = std::getenv("TRACEDB_PYTHON_DIR"); v != nullptr && *v) {
    return {(fs::path(v) / "_boot").string(), v};
  }
  const std::string self = SelfDir();
  for (const char* sub : {"python", "../lib/tracedb/python"}) {
    const fs::path p = fs::path(self) / sub;
    if (fs::exists(p / "_boot" / "sitecustomize.py") && fs::exists(p / "tracedb" / "__init__.py")) {
      const std::string dir = fs::canonical(p).string();
      return {dir + "/_boot", dir};
    }
  }
  return {};
}

// A TCP port that was free a moment ago on this host (for MASTER_PORT); 29500 if none is found.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 29500;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 29500;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "127.0.0.1";
  return buf;
}

// "exited with status 3", "was killed by signal 11 (Segmentation fault)".
std::string DescribeStatus(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* what = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (what ? what : "?") + ")" +
           (WCOREDUMP(status) ? ", core dumped" : "");
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended with wait status " + std::to_string(status);
}

int ExitCodeOf(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// After a failed run: the processes whose recorder never closed its last segment file (killed,
// or still running when the launcher gave up), found from the files themselves. Their events up
// to the last flush are compacted; what they held in memory is lost.
void ReportUnfinishedWriters(const std::string& dir) {
  auto files = engine::ListSegmentFiles(dir);
  if (!files.ok()) return;
  std::map<std::pair<int32_t, uint32_t>, const engine::SegmentFileRef*> last;  // (rank, pid)
  for (const auto& f : *files) {
    auto& slot = last[{f.rank, f.pid}];
    if (slot == nullptr || f.seq > slot->seq) slot = &f;
  }
  engine::ScanOptions so;
  so.events = false;
  so.catalog = false;
  engine::ScanBuffers buffers;  // one for every file (engine/util/read_buffer.h)
  so.buffers = &buffers;
  for (const auto& [key, f] : last) {
    engine::SegmentVisitor none;
    auto scan = engine::ScanSegment(f->path, &none, so);
    if (scan.ok() && scan->closed) continue;
    std::fprintf(stderr,
                 "tracedb record: rank %d (pid %u) did not finish: its recorder never closed %s; "
                 "events it flushed are kept, the last flush interval is lost\n",
                 key.first, key.second, f->path.c_str());
  }
}

// The stop signals this process was started with ignored (`nohup` ignores SIGHUP, a
// non-interactive shell's `&` SIGINT and SIGQUIT): they stay ignored, here and in the job.
sigset_t g_inherited_ignored;

// Starts argv; `pgroup` >= 0 puts it in process group `pgroup` (0: a new group of its own).
pid_t Spawn(std::vector<std::string> argv, std::vector<std::string> env, pid_t pgroup = -1) {
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  pid_t pid = -1;
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The child starts with the default action for every signal we catch or ignore, unless we
  // were started with it ignored.
  sigset_t def;
  sigemptyset(&def);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) {
    if (!sigismember(&g_inherited_ignored, sig)) sigaddset(&def, sig);
  }
  posix_spawnattr_setsigdefault(&attr, &def);
  short flags = POSIX_SPAWN_SETSIGDEF;
  if (pgroup >= 0) {
    posix_spawnattr_setpgroup(&attr, pgroup);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&attr, flags);
  const int rc = posix_spawnp(&pid, argv[0].c_str(), nullptr, &attr, cargv.data(), cenv.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    std::fprintf(stderr, "tracedb record: cannot run %s: %s\n", argv[0].c_str(), strerror(rc));
    return -1;
  }
  return pid;
}

// The current environment with every NAME=VALUE of `add` replacing (or adding) NAME.
std::vector<std::string> EnvWith(const std::vector<std::string>& add) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    bool replaced = false;
    for (const std::string& a : add) replaced |= a.compare(0, key.size() + 1, key + "=") == 0;
    if (!replaced) env.push_back(kv);
  }
  env.insert(env.end(), add.begin(), add.end());
  return env;
}

// ---- Stopping the job ----

// The last stop signal received (SIGTERM, SIGINT, SIGHUP), how many, and whether the last came
// from the terminal (then the job, in our process group, got it too).
volatile sig_atomic_t g_stop_signal = 0;
volatile sig_atomic_t g_stop_count = 0;
volatile sig_atomic_t g_stop_from_tty = 0;

void OnStopSignal(int sig, siginfo_t* info, void*) {
  g_stop_signal = sig;
  g_stop_from_tty = info != nullptr && info->si_code == SI_KERNEL;
  g_stop_count = g_stop_count + 1;
}

void InstallStopHandlers() {
  sigemptyset(&g_inherited_ignored);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) {
    struct sigaction old;
    if (sigaction(sig, nullptr, &old) == 0 && (old.sa_flags & SA_SIGINFO) == 0 &&
        old.sa_handler == SIG_IGN) {
      sigaddset(&g_inherited_ignored, sig);
    }
  }
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = OnStopSignal;
  sa.sa_flags = SA_SIGINFO;  // no SA_RESTART: a sleep or wait returns at once
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    if (!sigismember(&g_inherited_ignored, sig)) sigaction(sig, &sa, nullptr);
  }
  signal(SIGQUIT, SIG_IGN);
}

void RestoreStopHandlers() {
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) {
    signal(sig, sigismember(&g_inherited_ignored, sig) ? SIG_IGN : SIG_DFL);
  }
}

std::string SignalName(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGKILL:
      return "SIGKILL";
    default:
      return "signal " + std::to_string(sig);
  }
}

// The processes of the job: one command, or the N ranks of `--nproc`.
struct Job {
  std::vector<pid_t> pids;  // rank i = pids[i] under --nproc; else one pid
  bool nproc = false;       // the ranks are ours (`--nproc`): a failed one stops the others
  pid_t pgid = 0;           // > 0: the job's own process group (signals go to -pgid)
  double grace_s = 10;      // how long a stopping job may take before SIGKILL
  std::string name;         // the command, for messages
};

// What happened while waiting.
struct JobEnd {
  int exit_code = 0;       // the first failure's exit code (128 + signal when killed), else 0
  int stop_signal = 0;     // the stop signal received, if any
  bool killed = false;     // the job outlived its grace and was killed
  double stop_wait_s = 0;  // from the forward to the job's end
};

void SignalJob(const Job& job, int sig) {
  if (job.pgid > 0) {
    kill(-job.pgid, sig);
  } else {
    for (pid_t p : job.pids) kill(p, sig);
  }
}

// Waits for every process of `job`. A stop signal received meanwhile is forwarded to the job
// (unless it came from the terminal, which gave it to the job already), the job is then given
// `grace_s` seconds, then killed; a second stop signal a second or more after the first kills
// it at once. Under --nproc, a rank that fails stops the others (SIGTERM, SIGKILL after the
// grace), as torchrun does: a job with a dead rank would hang in its next collective.
JobEnd WaitJob(const Job& job) {
  std::map<pid_t, int> rank_of;
  for (size_t i = 0; i < job.pids.size(); ++i) rank_of[job.pids[i]] = static_cast<int>(i);
  JobEnd end;
  bool failed_once = false;
  double kill_at = 0;    // > 0: SIGKILL the job at this time
  double stop_at = 0;    // when the stop signal was forwarded
  int seen_signals = 0;  // g_stop_count already handled
  while (!rank_of.empty()) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno != EINTR) break;  // ECHILD: nothing left to wait for
    if (pid > 0) {
      auto it = rank_of.find(pid);
      if (it == rank_of.end()) continue;
      const int rank = it->second;
      rank_of.erase(it);
      const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (failed && !failed_once) end.exit_code = ExitCodeOf(status);
      if (failed && end.stop_signal == 0) {
        if (!job.nproc) {
          std::fprintf(stderr, "tracedb record: %s (pid %d) %s\n", job.name.c_str(),
                       static_cast<int>(pid), DescribeStatus(status).c_str());
        } else if (!failed_once) {
          std::fprintf(stderr,
                       "tracedb record: rank %d (pid %d) %s; stopping the other %zu ranks\n", rank,
                       static_cast<int>(pid), DescribeStatus(status).c_str(), rank_of.size());
          for (const auto& [p, r] : rank_of) kill(p, SIGTERM);
          kill_at = Now() + job.grace_s;
        } else {
          std::fprintf(stderr, "tracedb record: rank %d (pid %d) %s\n", rank, static_cast<int>(pid),
                       DescribeStatus(status).c_str());
        }
      }
      failed_once |= failed;
      continue;  // reap everything that ended before sleeping
    }
    const int count = g_stop_count;
    if (count != seen_signals) {
      seen_signals = count;
      const int sig = g_stop_signal;
      const double now = Now();
      if (end.stop_signal == 0) {
        end.stop_signal = sig;
        stop_at = now;
        kill_at = now + job.grace_s;
        const bool from_tty = g_stop_from_tty != 0 && job.pgid == 0;
        if (!from_tty) SignalJob(job, sig);
        std::fprintf(stderr,
                     "tracedb record: got %s: %s the job; waiting up to %.0f s for it to stop, "
                     "then compacting what it flushed\n",
                     SignalName(sig).c_str(),
                     from_tty ? "the terminal sent it to" : "forwarded it to", job.grace_s);
      } else if (now - stop_at >= 1.0 && !end.killed) {
        // A second signal (a second Ctrl-C), not the echo of the first (`timeout` sends its
        // signal to us and to its process group at once): stop now.
        std::fprintf(stderr, "tracedb record: got %s again: killing the job (SIGKILL)\n",
                     SignalName(sig).c_str());
        SignalJob(job, SIGKILL);
        end.killed = true;
        kill_at = 0;
      }
    }
    if (kill_at > 0 && Now() >= kill_at) {
      if (end.stop_signal != 0) {
        std::fprintf(stderr,
                     "tracedb record: the job did not stop within %.0f s of %s: killing it "
                     "(SIGKILL)\n",
                     job.grace_s, SignalName(end.stop_signal).c_str());
        SignalJob(job, SIGKILL);
      } else {
        for (const auto& [p, r] : rank_of) kill(p, SIGKILL);
      }
      end.killed = true;
      kill_at = 0;
    }
    timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, nullptr);  // returns early on a signal
  }
  if (end.stop_signal != 0) {
    end.stop_wait_s = Now() - stop_at;
    if (end.exit_code == 0) end.exit_code = 128 + end.stop_signal;
  }
  return end;
}

void PrintSummary(const std::string& db_path, double seconds) {
  auto db = query::OpenQueryDb(db_path);
  if (!db.ok()) return;
  auto q = [&](const std::string& sql) -> int64_t {
    auto v = (*db)->QueryInt(sql, 0);
    return v.ok() ? *v : 0;
  };
  const int64_t ranks = q("SELECT count(DISTINCT rank) FROM blocks");
  const int64_t events = q("SELECT coalesce(sum(count), 0) FROM blocks");
  const int64_t dropped = q("SELECT coalesce(sum(value), 0) FROM stats WHERE name = 'dropped'");
  std::error_code ec;
  const auto bytes = fs::file_size(db_path, ec);
  std::fprintf(stderr, "\ntracedb record: %s: %lld ranks, %s events, %s (recorded %.1f s)\n",
               db_path.c_str(), static_cast<long long>(ranks),
               WithCommas(static_cast<uint64_t>(events)).c_str(),
               HumanBytes(static_cast<double>(ec ? 0 : bytes)).c_str(), seconds);
  if (dropped > 0) {
    std::fprintf(stderr, "tracedb record: the recorder dropped %s events (full buffers)\n",
                 WithCommas(static_cast<uint64_t>(dropped)).c_str());
  }
  auto st = (*db)->Prepare(
      "SELECT name, cat, sum(count) AS n, sum(total_ns) AS total FROM name_summary "
      "WHERE kind = 'span' GROUP BY name, cat ORDER BY total DESC LIMIT 8");
  if (st.ok()) {
    std::fprintf(stderr, "  %-32s %-8s %12s %14s\n", "top spans by total time", "cat", "count",
                 "total");
    for (;;) {
      auto row = st->Step();
      if (!row.ok() || !*row) break;
      std::fprintf(stderr, "  %-32.32s %-8.8s %12s %14s\n", std::string(st->Text(0)).c_str(),
                   std::string(st->Text(1)).c_str(),
                   WithCommas(static_cast<uint64_t>(st->Int(2))).c_str(),
                   HumanDuration(static_cast<double>(st->Int(3))).c_str());
    }
  }
  std::fprintf(stderr,
               "next: tracedb shell %s | tracedb report mpi %s | tracedb report "
               "stragglers %s\n",
               db_path.c_str(), db_path.c_str(), db_path.c_str());
}

int RunRecord(const RecordOptions& o) {
  if (o.command.empty()) {
    std::fprintf(stderr, "tracedb record: no command given (tracedb record -- COMMAND...)\n");
    return kExitUsage;
  }
  if (fs::exists(o.output) && !o.force) {
    std::fprintf(stderr, "tracedb record: %s exists (use --force to replace it)\n",
                 o.output.c_str());
    return kExitUsage;
  }
  std::string dir = o.dir;
  const bool own_dir = dir.empty();
  if (own_dir) {
    std::string stem = o.output;
    if (stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".tdb") == 0) {
      stem.resize(stem.size() - 4);
    }
    dir = stem + ".segments";
  }
  std::error_code ec;
  if (own_dir && fs::exists(fs::symlink_status(dir, ec))) {
    // OUTPUT.segments is this command's to make and remove: an existing one may hold the user's
    // files (or another run's segments, which would be compacted into this database). Only the
    // segment files of an earlier recording are removed, with --force; anything else refuses.
    const engine::SegmentDirContents c =
        engine::InspectSegmentDir(dir, {engine::SegmentDirLock::kFileName});
    if (!fs::is_directory(fs::symlink_status(dir, ec)) || !c.foreign.empty()) {
      std::fprintf(stderr,
                   "tracedb record: %s exists and holds files that are not segments (%s%s): "
                   "remove it or name another directory with --dir\n",
                   dir.c_str(), c.foreign.empty() ? "not a directory" : c.foreign[0].c_str(),
                   c.foreign.size() > 1 ? ", ..." : "");
      return kExitError;
    }
    if (c.segment_files > 0 && !o.force) {
      std::fprintf(stderr,
                   "tracedb record: %s holds %llu segment files of an earlier recording (use "
                   "--force to remove them, or --dir DIR)\n",
                   dir.c_str(), static_cast<unsigned long long>(c.segment_files));
      return kExitUsage;
    }
  }
  fs::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "tracedb record: cannot create %s: %s\n", dir.c_str(),
                 ec.message().c_str());
    return kExitError;
  }
  dir = fs::absolute(dir).string();
  // This run owns the directory's files until it has compacted them: a `compact
  // --delete-compacted` on it would delete segments this database then lacks.
  auto dir_lock = engine::SegmentDirLock::Acquire(
      dir, "tracedb record (pid " + std::to_string(::getpid()) + ")");
  if (!dir_lock.ok()) {
    std::fprintf(stderr, "tracedb record: %s\n", dir_lock.status().message().c_str());
    return kExitError;
  }
  if (own_dir && o.force) {
    const std::vector<std::string> left = engine::RemoveRecordedSegments(dir);
    (void)left;  // only the lock file (just checked: nothing foreign)
  }

  const bool launcher = IsMpiLauncher(o.command[0]);
  if (o.nproc > 0 && launcher) {
    std::fprintf(stderr, "tracedb record: --nproc launches the ranks itself; drop %s or --nproc\n",
                 o.command[0].c_str());
    return kExitUsage;
  }
  const bool mpi = o.mpi || (launcher && !o.no_mpi);
  const std::vector<std::string> subdirs = {".", "recorder/mpi", "../lib", "../lib/tracedb"};
  std::string preload = mpi ? FindLibrary("TRACEDB_MPI_LIB", "libtracedb_mpi.so", subdirs)
                            : FindLibrary("TRACEDB_LIB", "libtracedb.so", subdirs);
  if (preload.empty()) {
    std::fprintf(stderr, "tracedb record: cannot find %s next to %s (set %s)\n",
                 mpi ? "libtracedb_mpi.so" : "libtracedb.so", SelfDir().c_str(),
                 mpi ? "TRACEDB_MPI_LIB" : "TRACEDB_LIB");
    return kExitError;
  }
  if (const char* old = std::getenv("LD_PRELOAD"); old != nullptr && *old) {
    preload += std::string(":") + old;
  }

  // What every rank gets: the trace directory, the preloaded recorder, the Python start-up
  // directory, and where rank 0 of a torch.distributed job listens (used by python/_boot only
  // when the launcher sets no MASTER_ADDR/MASTER_PORT of its own).
  std::vector<std::pair<std::string, std::string>> vars = {{"TRACEDB_DIR", dir},
                                                           {"LD_PRELOAD", preload}};
  const std::vector<std::string> py = FindPythonDirs();
  if (!py.empty()) {
    std::string path = py[0] + ":" + py[1];
    if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old) {
      path += std::string(":") + old;
    }
    vars.emplace_back("PYTHONPATH", path);
  }
  if (o.nccl || o.cuda || o.nvtx || !o.nccl_events.empty()) {
    std::string error;
    if (!tracedb::gpu::GpuRecordEnv(
            {o.nccl || !o.nccl_events.empty(), o.cuda, o.nvtx, o.nccl_events}, SelfDir(), &vars,
            &error)) {
      std::fprintf(stderr, "tracedb record: %s\n", error.c_str());
      return kExitError;
    }
  }
  if (!o.flight.empty()) {
    if (recorder::ParseDurationNs(o.flight.c_str()) <= 0) {
      std::fprintf(stderr, "tracedb record: --flight %s is no duration (30s, 500ms, 2m)\n",
                   o.flight.c_str());
      return kExitUsage;
    }
    vars.emplace_back("TRACEDB_FLIGHT", o.flight);
  }
  if (!o.hang_timeout.empty()) {
    if (recorder::ParseDurationNs(o.hang_timeout.c_str()) <= 0) {
      std::fprintf(stderr, "tracedb record: --hang-timeout %s is no duration (30s, 500ms, 2m)\n",
                   o.hang_timeout.c_str());
      return kExitUsage;
    }
    vars.emplace_back("TRACEDB_HANG_TIMEOUT", o.hang_timeout);
  }
  if (o.slow_step >= 0) {
    if (o.slow_step != 0 && o.slow_step <= 1) {
      std::fprintf(stderr, "tracedb record: --slow-step %g: 0 (off) or a factor above 1\n",
                   o.slow_step);
      return kExitUsage;
    }
    char k[32];
    std::snprintf(k, sizeof(k), "%.17g", o.slow_step);
    vars.emplace_back("TRACEDB_SLOW_STEP", k);
  }
  const std::string master_port = std::to_string(FreePort());
  const std::string master_addr = o.nproc > 0 ? "127.0.0.1" : HostName();
  vars.emplace_back("TRACEDB_MASTER_ADDR", master_addr);
  vars.emplace_back("TRACEDB_MASTER_PORT", master_port);

  std::vector<std::string> argv = o.command;
  std::vector<std::string> env_add;  // NAME=VALUE for the child's own environment
  const std::string flavor = launcher ? LauncherFlavor(o.command[0]) : "";
  if (flavor == "openmpi") {
    // `-x` belongs to an app context: repeat it in every one of an MPMD command (A : B : C).
    std::vector<std::string> flags;
    for (const auto& [k, v] : vars) flags.insert(flags.end(), {"-x", k + "=" + v});
    for (size_t i = argv.size(); i-- > 1;) {
      if (argv[i] == ":")
        argv.insert(argv.begin() + static_cast<long>(i) + 1, flags.begin(), flags.end());
    }
    argv.insert(argv.begin() + 1, flags.begin(), flags.end());
    // Open MPI's mpirun (4.1) sends its ranks SIGTERM and SIGKILL close together after its
    // odls_base_sigkill_timeout (1 s): measured under load, too close for every rank's recorder
    // to write its last events (ranks' files left unclosed). Unless the user set it, the
    // launcher (not the ranks) gets 3 s, within our own grace.
    if (std::getenv("OMPI_MCA_odls_base_sigkill_timeout") == nullptr) {
      const int t = std::max(1, std::min(3, static_cast<int>(o.grace_s / 2)));
      env_add.push_back("OMPI_MCA_odls_base_sigkill_timeout=" + std::to_string(t));
    }
  } else if (flavor == "hydra") {
    std::vector<std::string> flags;
    for (const auto& [k, v] : vars) flags.insert(flags.end(), {"-genv", k, v});
    argv.insert(argv.begin() + 1, flags.begin(), flags.end());
  } else {
    for (const auto& [k, v] : vars) env_add.push_back(k + "=" + v);
  }

  const bool quiet = GetVerbosity() == Verbosity::kQuiet;
  if (!quiet) std::fprintf(stderr, "tracedb record: recording into %s\n", dir.c_str());
  for (const std::string& e : env_add) Verbose("record", "environment: %s", e.c_str());
  {
    std::string cmd;
    for (const std::string& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    Verbose("record", "running: %s", cmd.c_str());
  }
  const double t0 = Now();
  const double started_at = static_cast<double>(std::time(nullptr));  // for record.started_at
  // The job gets a process group of its own (the stop signals are forwarded to it), except in
  // the foreground of a terminal, where it must stay in the terminal's foreground group.
  const bool foreground_tty = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  InstallStopHandlers();
  Job job;
  job.nproc = o.nproc > 0;
  job.grace_s = o.grace_s;
  job.name = o.command[0];
  int exit_code = 0;
  if (o.nproc > 0) {
    // The local launcher (as torchrun): rank i of N, all on this host, in one process group.
    for (int r = 0; r < o.nproc; ++r) {
      std::vector<std::string> add = env_add;
      const std::string n = std::to_string(o.nproc), rs = std::to_string(r);
      add.insert(add.end(), {"RANK=" + rs, "LOCAL_RANK=" + rs, "GROUP_RANK=0", "WORLD_SIZE=" + n,
                             "LOCAL_WORLD_SIZE=" + n, "MASTER_ADDR=" + master_addr,
                             "MASTER_PORT=" + master_port});
      const pid_t pid = Spawn(argv, EnvWith(add), foreground_tty ? -1 : job.pgid);
      if (pid < 0) {
        for (pid_t p : job.pids) kill(p, SIGTERM);
        WaitJob(job);
        exit_code = 127;
        break;
      }
      if (!foreground_tty && job.pgid == 0) job.pgid = pid;
      job.pids.push_back(pid);
    }
  } else {
    const pid_t pid = Spawn(argv, EnvWith(env_add), foreground_tty ? -1 : 0);
    if (pid < 0) {
      RestoreStopHandlers();
      return 127;
    }
    job.pids.push_back(pid);
    if (!foreground_tty) job.pgid = pid;
  }
  JobEnd job_end;
  if (exit_code == 0) {
    job_end = WaitJob(job);
    exit_code = job_end.exit_code;
  }
  const double seconds = Now() - t0;
  RestoreStopHandlers();
  if (job_end.stop_signal != 0) {
    ReportUnfinishedWriters(dir);
    std::fprintf(stderr,
                 "tracedb record: the job %s %.1f s after %s; compacting what it flushed "
                 "(open spans are kept, ending when each rank was last seen)\n",
                 job_end.killed ? "was killed" : "stopped", job_end.stop_wait_s,
                 SignalName(job_end.stop_signal).c_str());
  } else if (exit_code != 0) {
    ReportUnfinishedWriters(dir);
    std::fprintf(stderr,
                 "tracedb record: the job failed (exit code %d); compacting what it flushed\n",
                 exit_code);
  }

  if (o.force) fs::remove(o.output, ec);
  // One writer at a time on the output, as `compact` (engine/compact/output_lock.h); released after
  // the database is closed.
  engine::LockOptions lo;
  lo.on_wait = [&o]() {
    std::fprintf(stderr,
                 "tracedb record: %s is being written by another tracedb process; waiting\n",
                 o.output.c_str());
  };
  auto out_lock = engine::OutputLock::Acquire(o.output, lo);
  if (!out_lock.ok()) {
    std::fprintf(stderr, "tracedb record: %s (segments kept in %s)\n",
                 out_lock.status().message().c_str(), dir.c_str());
    return exit_code != 0 ? exit_code : kExitError;
  }
  // A new database is built aside and put in place whole (engine/compact/output_lock.h).
  auto begun = engine::FreshBuild::Begin(out_lock->get(), "tracedb record");
  if (!begun.ok()) {
    std::fprintf(stderr, "tracedb record: %s (segments kept in %s)\n",
                 begun.status().message().c_str(), dir.c_str());
    return exit_code != 0 ? exit_code : kExitError;
  }
  std::unique_ptr<engine::FreshBuild> build = std::move(*begun);  // null: written in place
  auto writer = engine::TraceWriter::Open(build ? build->path() : o.output);
  if (writer.ok() && build) {
    if (const Status s = engine::FreshBuild::Configure((*writer)->db()); !s.ok()) writer = s;
  }
  if (!writer.ok()) {
    std::fprintf(stderr, "tracedb record: %s\n", writer.status().message().c_str());
    return exit_code != 0 ? exit_code : kExitError;
  }
  engine::CompactOptions co;
  co.inputs = {dir};
  co.finish = true;  // the job is over: take every file whole
  const double t_compact = Now();
  auto stats = engine::Compact(writer->get(), co);
  if (stats.ok()) {
    // How the run was made (command, git revision, environment), for `tracedb runs add`.
    Status meta = WriteRecordMeta(writer->get(), o.command, started_at);
    if (!meta.ok()) {
      std::fprintf(stderr, "tracedb record: %s: cannot write the run's meta: %s\n",
                   o.output.c_str(), meta.message().c_str());
    }
  }
  writer->reset();
  if (stats.ok() && build) {
    // Synced and renamed into place before any segment may be removed below.
    if (const Status s = build->Install(); !s.ok()) stats = s;
  }
  build.reset();  // a build not put in place is removed
  if (stats.ok()) {
    Verbose("record", "compacted %s segment events from %llu files in %.2f s",
            WithCommas(stats->segment_events).c_str(),
            static_cast<unsigned long long>(stats->files), Now() - t_compact);
  }
  if (!stats.ok()) {
    std::fprintf(stderr, "tracedb record: compaction: %s (segments kept in %s)\n",
                 stats.status().message().c_str(), dir.c_str());
    return exit_code != 0 ? exit_code : kExitError;
  }
  if (!quiet) PrintSummary(o.output, seconds);
  out_lock->reset();
  dir_lock->reset();  // removes the lock file: the directory may now be emptied
  if (own_dir && !o.keep_segments) {
    // Only what the recording made: a file the user put there stays, and so does the directory.
    const std::vector<std::string> left = engine::RemoveRecordedSegments(dir);
    if (!left.empty()) {
      std::fprintf(stderr, "tracedb record: segments removed; %s kept: it holds %s%s\n",
                   dir.c_str(), left[0].c_str(), left.size() > 1 ? " and more" : "");
    }
  } else if (!quiet) {
    std::fprintf(stderr, "tracedb record: segments kept in %s\n", dir.c_str());
  }
  return exit_code;
}

}  // namespace

void SetupRecord(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<RecordOptions>();
  CLI::App* sub = app.add_subcommand(
      "record", "Run a command (e.g. mpirun -np 4 ./app) with tracing injected, then compact");
  sub->add_option("-o,--output", o->output, "Trace database to write (default trace.tdb)");
  sub->add_option("--dir", o->dir,
                  "Segment directory (default: OUTPUT.segments, removed after compaction)");
  sub->add_flag("--mpi", o->mpi, "Inject the MPI interposer even if the command is no launcher");
  sub->add_flag("--no-mpi", o->no_mpi, "Inject only the recorder (no MPI interposer)");
  sub->add_flag("--keep-segments", o->keep_segments, "Keep the segment files");
  sub->add_flag("--force", o->force, "Replace OUTPUT if it exists");
  sub->add_option("--nproc", o->nproc,
                  "Launch N local ranks of the command (RANK, WORLD_SIZE, MASTER_ADDR... set, as "
                  "torchrun does)")
      ->check(CLI::Range(1, 4096));
  sub->add_option("--grace", o->grace_s,
                  "Seconds a job stopped by SIGTERM/SIGINT/SIGHUP (forwarded to it) or by a "
                  "failed rank has to exit before SIGKILL (default 10)")
      ->check(CLI::Range(0.0, 3600.0));
  sub->add_option("--flight", o->flight,
                  "Flight-recorder mode: keep the last DURATION (30s, 500ms, 2m) of events in "
                  "memory, write them only around a trigger (SIGUSR1, tracedb_trigger, a "
                  "terminating signal); docs/flight.md");
  sub->add_option("--hang-timeout", o->hang_timeout,
                  "Hang watchdog: a rank in one communication call (MPI, NCCL) this long writes "
                  "its flight ring (and flushes) at once; docs/flight.md");
  sub->add_option("--slow-step", o->slow_step,
                  "Flight mode: a step longer than K times the median of the last 20 steps "
                  "writes its flight ring (default 2; 0: off); docs/flight.md")
      ->check(CLI::Range(0.0, 1e6));
  sub->add_flag("--nccl", o->nccl,
                "Load the NCCL profiler plugin: collectives, p2p, proxy ops (docs/gpu-capture.md)");
  sub->add_option("--nccl-events", o->nccl_events,
                  "NCCL event kinds to record (TRACEDB_NCCL_EVENTS; implies --nccl)");
  sub->add_flag("--cuda", o->cuda, "Record CUDA kernels, copies and syncs through CUPTI");
  sub->add_flag("--nvtx", o->nvtx, "Turn the program's NVTX ranges and marks into spans");
  sub->add_option("command", o->command, "The command to run, after --")->required();
  AddVerbosityFlags(sub);
  sub->callback([o, exit_code] { *exit_code = RunRecord(*o); });
}

}  // namespace tracedb::shell
