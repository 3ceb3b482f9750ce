// `tracedb record [-o JOB.tdb] [--dir DIR] [--mpi|--no-mpi] -- COMMAND...`: runs a command
// (for example `mpirun -np 4 ./app`) with the recorder, and the MPI interposer, injected into
// every rank, waits for it, compacts its segments into JOB.tdb and prints a short summary, as
// `bfrun --timeline-filename` or `nsys profile` do. Exits with the command's exit code.
//
// Injection: TRACEDB_DIR and LD_PRELOAD reach the ranks, not the launcher: after an Open MPI
// `mpirun`/`mpiexec` they are passed as `-x NAME=VALUE` (in every app context of an MPMD
// command line), after an MPICH (Hydra) one as
// `-genv NAME VALUE`; other commands (including `srun`, which exports the environment) get them
// in their environment.
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/compactor.h"
#include "engine/trace_writer.h"
#include "query/query_db.h"
#include "shell/commands.h"
#include "shell/format.h"

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
  std::string probe = "'" + cmd + "' --version 2>&1";
  FILE* p = popen(probe.c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof(buf), p)) out += buf;
  pclose(p);
  if (out.find("Open MPI") != std::string::npos || out.find("OpenRTE") != std::string::npos) {
    return "openmpi";
  }
  if (out.find("HYDRA") != std::string::npos || out.find("Hydra") != std::string::npos) {
    return "hydra";
  }
  return "";
}

double Now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
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
  std::fprintf(stderr, "\ntracedb: %s: %lld ranks, %s events, %s (recorded %.1f s)\n",
               db_path.c_str(), static_cast<long long>(ranks),
               WithCommas(static_cast<uint64_t>(events)).c_str(),
               HumanBytes(static_cast<double>(ec ? 0 : bytes)).c_str(), seconds);
  if (dropped > 0) {
    std::fprintf(stderr, "tracedb: the recorder dropped %s events (full buffers)\n",
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
  if (own_dir) fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "tracedb record: cannot create %s: %s\n", dir.c_str(),
                 ec.message().c_str());
    return kExitError;
  }
  dir = fs::absolute(dir).string();

  const bool launcher = IsMpiLauncher(o.command[0]);
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

  std::vector<std::string> argv = o.command;
  std::vector<std::string> env_add;  // NAME=VALUE for the child's own environment
  const std::string flavor = launcher ? LauncherFlavor(o.command[0]) : "";
  if (flavor == "openmpi") {
    // `-x` belongs to an app context: repeat it in every one of an MPMD command (A : B : C).
    const std::vector<std::string> flags = {"-x", "TRACEDB_DIR=" + dir, "-x",
                                            "LD_PRELOAD=" + preload};
    for (size_t i = argv.size(); i-- > 1;) {
      if (argv[i] == ":")
        argv.insert(argv.begin() + static_cast<long>(i) + 1, flags.begin(), flags.end());
    }
    argv.insert(argv.begin() + 1, flags.begin(), flags.end());
  } else if (flavor == "hydra") {
    argv.insert(argv.begin() + 1, {"-genv", "TRACEDB_DIR", dir, "-genv", "LD_PRELOAD", preload});
  } else {
    env_add = {"TRACEDB_DIR=" + dir, "LD_PRELOAD=" + preload};
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    bool replaced = false;
    for (const std::string& a : env_add) replaced |= a.compare(0, key.size() + 1, key + "=") == 0;
    if (!replaced) env.push_back(kv);
  }
  env.insert(env.end(), env_add.begin(), env_add.end());

  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);

  std::fprintf(stderr, "tracedb: recording into %s\n", dir.c_str());
  const double t0 = Now();
  pid_t pid;
  const int rc = posix_spawnp(&pid, argv[0].c_str(), nullptr, nullptr, cargv.data(), cenv.data());
  if (rc != 0) {
    std::fprintf(stderr, "tracedb record: cannot run %s: %s\n", argv[0].c_str(), strerror(rc));
    return 127;
  }
  // Ctrl-C reaches the command through the terminal; we wait for it and keep what it wrote.
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const double seconds = Now() - t0;
  signal(SIGINT, SIG_DFL);
  signal(SIGQUIT, SIG_DFL);
  const int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (exit_code != 0) {
    std::fprintf(stderr, "tracedb: the command exited with %d; compacting what it recorded\n",
                 exit_code);
  }

  if (o.force) fs::remove(o.output, ec);
  auto writer = engine::TraceWriter::Open(o.output);
  if (!writer.ok()) {
    std::fprintf(stderr, "tracedb record: %s\n", writer.status().message().c_str());
    return exit_code != 0 ? exit_code : kExitError;
  }
  engine::CompactOptions co;
  co.inputs = {dir};
  co.finish = true;  // the job is over: take every file whole
  auto stats = engine::Compact(writer->get(), co);
  writer->reset();
  if (!stats.ok()) {
    std::fprintf(stderr, "tracedb record: compaction: %s (segments kept in %s)\n",
                 stats.status().message().c_str(), dir.c_str());
    return exit_code != 0 ? exit_code : kExitError;
  }
  PrintSummary(o.output, seconds);
  if (own_dir && !o.keep_segments) {
    fs::remove_all(dir, ec);
  } else {
    std::fprintf(stderr, "tracedb: segments kept in %s\n", dir.c_str());
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
  sub->add_option("command", o->command, "The command to run, after --")->required();
  sub->callback([o, exit_code] { *exit_code = RunRecord(*o); });
}

}  // namespace tracedb::shell
