// `tracedb compact DIR... -o JOB.tdb [--watch] [--interval S] [--finish]`: merges every rank's
// segments into one trace database, incrementally (a re-run appends only what is new; --watch
// follows a live job until all its files are closed, or Ctrl-C).
// A compact that fails leaves no database behind when there was none before (the inputs are
// checked before it is created, and a database created by a run that then fails is removed);
// an existing database is opened only once there is something to compact, and keeps every
// file's transaction that committed before a failure (docs/database-format.md "Incremental and
// crash-safe compaction").
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/compact/compactor.h"
#include "engine/compact/output_lock.h"
#include "engine/compact/segment_gc.h"
#include "engine/compact/shard_compact.h"
#include "engine/db/trace_writer.h"
#include "engine/segment/segment_dir.h"
#include "shell/commands.h"
#include "shell/format.h"
#include "shell/progress.h"
#include "shell/verbosity.h"

namespace tracedb::shell {
namespace {

struct CompactCmdOptions {
  std::vector<std::string> inputs;
  std::string output;
  bool watch = false;
  double interval_s = 2.0;
  bool finish = false;
  int64_t stale_after_s = 120;
  bool mpi = false;               // exec tracedb-mpi-compact (run under mpirun)
  std::string shard_by;           // "node": one database per node and a manifest at `output`
  bool delete_compacted = false;  // remove segment files once durably in the database
  bool no_wait = false;           // fail at once when another process writes the output
};

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

void PrintSummary(const engine::CompactStats& s, double seconds) {
  std::fprintf(
      stderr,
      "compacted %s segment events%s from %llu of %llu files into %s rows in %.2f s "
      "(%s events/s)\n",
      WithCommas(s.segment_events).c_str(),
      s.step_markers ? (" and " + WithCommas(s.step_markers) + " step markers").c_str() : "",
      static_cast<unsigned long long>(s.files_read), static_cast<unsigned long long>(s.files),
      WithCommas(s.rows).c_str(), seconds,
      WithCommas(static_cast<uint64_t>(seconds > 0 ? s.segment_events / seconds : 0)).c_str());
  if (s.dropped) {
    std::fprintf(stderr, "  the recorder dropped %s events (full buffers)\n",
                 WithCommas(s.dropped).c_str());
  }
  if (s.corrupt_blocks || s.torn_tails || s.unreadable_files) {
    std::fprintf(stderr,
                 "  damage: %llu corrupt blocks skipped, %llu torn tails, %llu unreadable files\n",
                 static_cast<unsigned long long>(s.corrupt_blocks),
                 static_cast<unsigned long long>(s.torn_tails),
                 static_cast<unsigned long long>(s.unreadable_files));
  }
  if (s.files_dead_writer) {
    std::fprintf(
        stderr, "  %llu unclosed files whose writer is gone (killed or crashed) were taken whole\n",
        static_cast<unsigned long long>(s.files_dead_writer));
  }
  if (s.files_waiting) {
    std::fprintf(stderr,
                 "  %llu files are still being written; their newest events wait for the next "
                 "run (--finish takes them whole, e.g. for files copied from another host)\n",
                 static_cast<unsigned long long>(s.files_waiting));
  }
  for (const std::string& p : s.problems) std::fprintf(stderr, "  problem: %s\n", p.c_str());
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// The first input without segment files (NotFound), or another error reading the inputs.
Status CheckInputs(const std::vector<std::string>& inputs) {
  for (const std::string& dir : inputs) {
    auto files = engine::ListSegmentFiles(dir);
    if (!files.ok()) return files.status();
  }
  return Status::Ok();
}

// `--mpi`: this process becomes tracedb-mpi-compact (beside this program, or $TRACEDB_MPI_COMPACT),
// with the same arguments; MPI's environment from the launcher passes through exec.
int ExecMpiCompact(const CompactCmdOptions& o) {
  std::string helper;
  if (const char* env = std::getenv("TRACEDB_MPI_COMPACT"); env != nullptr && *env) {
    helper = env;
  } else {
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
      std::fprintf(stderr, "tracedb compact --mpi: cannot find this program: %s\n",
                   std::strerror(errno));
      return kExitError;
    }
    self[n] = '\0';
    helper = self;
    helper = helper.substr(0, helper.rfind('/') + 1) + "tracedb-mpi-compact";
  }
  std::vector<std::string> args = {helper, "--mpi"};
  args.insert(args.end(), o.inputs.begin(), o.inputs.end());
  args.insert(args.end(), {"-o", o.output, "--stale-after", std::to_string(o.stale_after_s)});
  if (o.finish) args.push_back("--finish");
  if (GetVerbosity() == Verbosity::kQuiet) args.push_back("-q");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(helper.c_str(), argv.data());
  std::fprintf(stderr,
               "tracedb compact --mpi: cannot run %s: %s (it is built where MPI is found; "
               "TRACEDB_MPI_COMPACT names another)\n",
               helper.c_str(), std::strerror(errno));
  return kExitError;
}

// The writer lock on OUTPUT (engine/compact/output_lock.h), waiting for another writer unless
// --no-wait, and saying so; nullptr after printing the error.
std::unique_ptr<engine::OutputLock> LockOutput(const CompactCmdOptions& o) {
  engine::LockOptions lo;
  lo.wait = !o.no_wait;
  lo.on_wait = [&]() {
    std::fprintf(stderr,
                 "tracedb compact: %s is being written by another tracedb process; waiting "
                 "for it to finish (--no-wait fails instead)\n",
                 o.output.c_str());
  };
  auto l = engine::OutputLock::Acquire(o.output, lo);
  if (!l.ok()) {
    std::fprintf(stderr, "tracedb compact: %s\n", l.status().message().c_str());
    return nullptr;
  }
  return std::move(*l);
}

// `--shard-by node`: a database per node in OUTPUT.shards/ and the manifest OUTPUT. The
// manifest's writer lock is held for the whole run, so that two of them on one output take
// turns (the second finds the first's shards and extends them); each shard is locked too.
int RunShardByNode(const CompactCmdOptions& o) {
  const Status inputs = CheckInputs(o.inputs);
  if (!inputs.ok()) {
    std::fprintf(stderr, "tracedb compact: %s\n", inputs.message().c_str());
    return kExitError;
  }
  std::unique_ptr<engine::OutputLock> lock = LockOutput(o);
  if (lock == nullptr) return kExitError;
  engine::CompactOptions co;
  co.inputs = o.inputs;
  co.finish = o.finish;
  co.stale_after_s = o.stale_after_s;
  const double t0 = Now();
  auto shards = engine::CompactByNode(co, o.output);
  if (!shards.ok()) {
    std::fprintf(stderr, "tracedb compact: %s\n", shards.status().message().c_str());
    // The manifest only when this run created it (the shards it wrote are kept: each is a
    // complete database that the next run extends).
    const std::string problems = lock->RemoveCreated();
    if (!problems.empty()) std::fprintf(stderr, "tracedb compact: %s\n", problems.c_str());
    return kExitError;
  }
  if (GetVerbosity() != Verbosity::kQuiet) {
    for (const engine::NodeShard& s : *shards) {
      std::fprintf(stderr, "  node %s: %s rows into %s\n", s.host.c_str(),
                   WithCommas(s.stats.rows).c_str(), s.path.c_str());
    }
    std::fprintf(stderr, "%zu shards in %.2f s; manifest %s\n", shards->size(), Now() - t0,
                 o.output.c_str());
  }
  return kExitOk;
}

// A database made by `compact --mpi` keeps its ranks' progress in its shards: a plain compact
// would take every file again from the start.
Status CheckNotMpiMade(const std::string& path) {
  if (!Exists(path) || engine::IsManifest(path)) return Status::Ok();
  auto db = engine::Db::Open(path, engine::Db::Mode::kReadOnly);
  if (!db.ok() || !(*db)->HasTable("meta")) return Status::Ok();
  auto k = (*db)->QueryInt("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'mpi_processes'");
  if (k.ok() && *k > 0) {
    return Status::InvalidArgument(path + ": made by `compact --mpi` with " + std::to_string(*k) +
                                   " processes; extend it the same way (mpirun -np " +
                                   std::to_string(*k) + " tracedb compact --mpi ...)");
  }
  return Status::Ok();
}

// --delete-compacted: removes the files the database now holds for good
// (engine/compact/segment_gc.h). An error is returned; files kept for a reason are not one.
// *deleted_any is set once a file is gone (from then on the database is the only copy and is never
// removed on failure).
Status DeleteCompacted(engine::Db* db, const CompactCmdOptions& o, bool finish, bool quiet,
                       bool* deleted_any) {
  engine::DeleteCompactedOptions d;
  d.inputs = o.inputs;
  d.finish = finish;
  auto r = engine::DeleteCompactedSegments(db, d);
  if (!r.ok()) return r.status();
  if (r->files > 0) *deleted_any = true;
  for (const std::string& p : r->problems) std::fprintf(stderr, "  problem: %s\n", p.c_str());
  if (!quiet && r->files > 0) {
    std::fprintf(stderr, "  deleted %s compacted segment files (%s)\n",
                 WithCommas(r->files).c_str(), HumanBytes(double(r->bytes)).c_str());
  }
  return Status::Ok();
}

int RunCompact(const CompactCmdOptions& o) {
  for (const std::string& in : o.inputs) {
    struct stat st;
    if (::stat(in.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      std::fprintf(stderr, "tracedb compact: %s: %s\n", in.c_str(),
                   ::stat(in.c_str(), &st) != 0 ? "no such directory" : "not a directory");
      return kExitError;
    }
  }
  if (o.mpi && (o.watch || !o.shard_by.empty())) {
    std::fprintf(stderr, "tracedb compact: --mpi goes with neither --watch nor --shard-by\n");
    return kExitUsage;
  }
  if (o.delete_compacted && (o.mpi || !o.shard_by.empty())) {
    std::fprintf(stderr,
                 "tracedb compact: --delete-compacted goes with neither --mpi nor --shard-by\n");
    return kExitUsage;
  }
  if (o.mpi) return ExecMpiCompact(o);
  if (!o.shard_by.empty()) {
    if (o.watch) {
      std::fprintf(stderr, "tracedb compact: --shard-by does not go with --watch\n");
      return kExitUsage;
    }
    return RunShardByNode(o);
  }
  if (engine::IsManifest(o.output)) {
    std::fprintf(stderr,
                 "tracedb compact: %s is a shard manifest: extend it with --shard-by node\n",
                 o.output.c_str());
    return kExitError;
  }
  if (Status s = CheckNotMpiMade(o.output); !s.ok()) {
    std::fprintf(stderr, "tracedb compact: %s\n", s.message().c_str());
    return kExitError;
  }
  const bool quiet = GetVerbosity() == Verbosity::kQuiet;
  // --delete-compacted owns the inputs' files for the run: a `tracedb record` writing there
  // (which compacts every file at its end) and another deleting compact are refused.
  std::vector<std::unique_ptr<engine::SegmentDirLock>> dir_locks;
  if (o.delete_compacted) {
    for (const std::string& in : o.inputs) {
      auto l = engine::SegmentDirLock::Acquire(
          in, "tracedb compact --delete-compacted (pid " + std::to_string(::getpid()) + ")");
      if (!l.ok()) {
        std::fprintf(stderr, "tracedb compact: --delete-compacted refused: %s\n",
                     l.status().message().c_str());
        return kExitError;
      }
      dir_locks.push_back(std::move(*l));
    }
  }
  bool deleted_any = false;  // --delete-compacted removed a file: keep the database whatever
  // Declared before the writer: released after the database is closed (output_lock.h).
  std::unique_ptr<engine::OutputLock> lock;
  // A new database of a one-shot run is built aside and put in place whole (output_lock.h).
  std::unique_ptr<engine::FreshBuild> build;
  std::unique_ptr<engine::TraceWriter> writer;
  // Removes the database when this run created it (and nothing made it the only copy).
  auto remove_created = [&]() {
    if (lock == nullptr || deleted_any) return;
    const std::string problems = lock->RemoveCreated();
    if (!problems.empty()) std::fprintf(stderr, "tracedb compact: %s\n", problems.c_str());
  };
  // Opens (or creates) the database, locked for this run; false after printing the error.
  auto open_db = [&]() {
    lock = LockOutput(o);
    if (lock == nullptr) return false;
    // Not for --watch, whose readers watch the database grow, nor for --delete-compacted, which
    // deletes segments once each commit is durable in place.
    auto b = engine::FreshBuild::Begin(lock.get(), "tracedb compact",
                                       /*wanted=*/!o.watch && !o.delete_compacted);
    if (!b.ok()) {
      std::fprintf(stderr, "tracedb compact: %s\n", b.status().message().c_str());
      remove_created();
      return false;
    }
    build = std::move(*b);
    if (build) {
      Verbose("compact", "building %s aside as %s (put in place when complete)", o.output.c_str(),
              build->path().c_str());
    }
    auto w = engine::TraceWriter::Open(build ? build->path() : o.output);
    Status wal =
        !w.ok() ? w.status()
        : build
            ? engine::FreshBuild::Configure((*w)->db())
            : engine::EnterWalForWriting((*w)->db(), [&]() {
                std::fprintf(stderr,
                             "tracedb compact: waiting for a reader of %s that began before this "
                             "compaction (later readers do not hold it up)\n",
                             o.output.c_str());
              });
    if (!wal.ok()) {
      std::fprintf(stderr, "tracedb compact: %s\n", wal.message().c_str());
      if (w.ok()) w->reset();
      build.reset();
      remove_created();
      return false;
    }
    writer = std::move(*w);
    if (o.watch) {
      // A `tracedb archive` beside the watch holds the database for its VACUUM (minutes on a
      // large file): wait for it rather than end the watch (the job's files keep meanwhile).
      sqlite3_busy_timeout(writer->db()->raw(), 3600 * 1000);
    }
    if (o.delete_compacted) {
      // Each commit durable before its files may go (the journal's unlink synced too).
      const Status s = writer->db()->Exec("PRAGMA synchronous=EXTRA");
      if (!s.ok()) {
        std::fprintf(stderr, "tracedb compact: %s\n", s.message().c_str());
        return false;
      }
    }
    return true;
  };
  // Every error exit after the database was opened.
  auto fail = [&](const Status& s) {
    std::fprintf(stderr, "tracedb compact: %s\n", s.message().c_str());
    if (writer != nullptr && !writer->in_batch() && build == nullptr) {
      (void)engine::LeaveWalAtRest(writer->db());  // one file again, as far as it can be
    }
    writer.reset();  // rolls back the open batch (in place), closes the file
    build.reset();   // removes a database built aside
    remove_created();
    return kExitError;
  };
  // Every other exit with the database open: one rollback-journal file again, or the database
  // built aside put in place; false after printing why it could not be.
  auto close_db = [&]() {
    if (writer == nullptr) return true;
    if (build != nullptr) {
      writer.reset();
      const Status s = build->Install();
      build.reset();
      if (!s.ok()) {
        std::fprintf(stderr, "tracedb compact: %s\n", s.message().c_str());
        remove_created();
        return false;
      }
      return true;
    }
    auto rest = engine::LeaveWalAtRest(writer->db());
    if (!rest.ok()) {
      std::fprintf(stderr, "tracedb compact: %s\n", rest.status().message().c_str());
    } else if (!*rest && !quiet) {
      std::fprintf(stderr,
                   "tracedb compact: note: a reader has %s open, so it stays in WAL mode "
                   "(its -wal file emptied) until the next writer\n",
                   o.output.c_str());
    }
    writer.reset();
    return true;
  };
  engine::CompactOptions co;
  co.inputs = o.inputs;
  co.finish = o.finish && !o.watch;
  co.stale_after_s = o.stale_after_s;
  const double t0 = Now();
  ProgressLine line("compact");
  // -v: one line per segment file taken, with the rows it added and the time it took.
  size_t file_index = 0;
  std::string file_path;
  uint64_t file_rows = 0, file_bytes = 0;
  double file_start = t0;
  auto file_done = [&](uint64_t rows, uint64_t bytes) {
    if (file_index == 0) return;
    Verbose("compact", "%s: %s rows from %s in %.3f s", file_path.c_str(),
            WithCommas(rows - file_rows).c_str(),
            HumanBytes(static_cast<double>(bytes - file_bytes)).c_str(), Now() - file_start);
  };
  uint64_t last_rows = 0, last_bytes = 0;
  auto progress = [&](const engine::CompactProgress& p) {
    if (p.file_index != file_index) {
      file_done(p.rows, p.bytes_done);
      file_index = p.file_index;
      file_path = p.path;
      file_rows = last_rows;
      file_bytes = last_bytes;
      file_start = Now();
    }
    last_rows = p.rows;
    last_bytes = p.bytes_done;
    ProgressState st;
    st.files_done = p.file_index;
    st.files_total = p.files;
    st.events = p.rows;
    st.bytes_done = p.bytes_done;
    st.bytes_total = p.bytes_total;
    line.Update(st);
  };
  // Ends a pass: the last file's -v line, the progress line cleared.
  auto pass_done = [&]() {
    file_done(last_rows, last_bytes);
    file_index = 0;
    last_rows = last_bytes = 0;
    line.Finish();
  };
  for (const std::string& in : o.inputs) Verbose("compact", "input %s", in.c_str());
  if (!o.watch) {
    // Nothing to compact is an error that creates nothing and touches no existing database.
    const Status inputs = CheckInputs(o.inputs);
    if (!inputs.ok()) {
      std::fprintf(stderr, "tracedb compact: %s\n", inputs.message().c_str());
      return kExitError;
    }
    if (!open_db()) return kExitError;
    Verbose("compact", "database %s (%s)", o.output.c_str(),
            lock->created() ? "created" : "extended");
    auto stats = engine::Compact(writer.get(), co, progress);
    pass_done();
    if (!stats.ok()) return fail(stats.status());
    if (!quiet) PrintSummary(*stats, Now() - t0);
    if (o.delete_compacted) {
      const Status d = DeleteCompacted(writer->db(), o, o.finish, quiet, &deleted_any);
      if (!d.ok()) {
        std::fprintf(stderr, "tracedb compact: %s\n", d.message().c_str());
        (void)close_db();
        return kExitError;
      }
    }
    return close_db() ? kExitOk : kExitError;
  }
  // --watch: follow the job until every file is closed (and nothing new arrives), or Ctrl-C.
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  int idle_passes = 0;
  while (true) {
    const double pass_start = Now();
    // The database is opened once the job has written something (a watch stopped before that
    // leaves no file behind).
    StatusOr<engine::CompactStats> stats = Status::NotFound("no segments yet");
    if (writer != nullptr || CheckInputs(o.inputs).ok()) {
      if (writer == nullptr && !open_db()) return kExitError;
      stats = engine::Compact(writer.get(), co, progress);
      pass_done();
    }
    // The job is over when two passes in a row find every file closed and taken (a pass that
    // finds a file still written, or new events, starts the count again). A recorder creates
    // its next file before it ends the current one, so a live one always holds an open file.
    bool idle = false;
    if (o.delete_compacted && writer != nullptr && (stats.ok() || stats.status().IsNotFound())) {
      const Status d = DeleteCompacted(writer->db(), o, false, quiet, &deleted_any);
      if (!d.ok()) return fail(d);
      // Every file was closed, taken and deleted: as idle as a pass over closed files.
      idle = !stats.ok();
    }
    if (!stats.ok()) {
      if (stats.status().IsNotFound()) {
        // The job has not written anything yet (or every file was deleted).
      } else {
        return fail(stats.status());
      }
    } else if (stats->rows > 0 || stats->segment_events > 0) {
      if (!quiet) {
        std::fprintf(stderr, "+%s rows (%s segment events) in %.2f s\n",
                     WithCommas(stats->rows).c_str(), WithCommas(stats->segment_events).c_str(),
                     Now() - pass_start);
      }
    } else if (stats->files > 0 && stats->files_waiting == 0) {
      idle = true;  // every file is closed and taken
    }
    idle_passes = idle ? idle_passes + 1 : 0;
    if (idle_passes >= 2) break;
    if (g_stop.load()) break;
    for (double waited = 0; waited < o.interval_s && !g_stop.load(); waited += 0.05) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (g_stop.load()) {
      // One last pass so that nothing already written is left behind.
      co.finish = o.finish;
      if (writer == nullptr && CheckInputs(o.inputs).ok() && !open_db()) return kExitError;
      if (writer == nullptr) break;  // nothing was ever written
      auto last = engine::Compact(writer.get(), co, {});
      if (!last.ok() && !last.status().IsNotFound()) return fail(last.status());
      if (o.delete_compacted) {
        const Status d = DeleteCompacted(writer->db(), o, o.finish, quiet, &deleted_any);
        if (!d.ok()) return fail(d);
      }
      break;
    }
  }
  (void)close_db();
  if (!quiet) std::fprintf(stderr, "watch ended after %.1f s\n", Now() - t0);
  return kExitOk;
}

}  // namespace

void SetupCompact(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<CompactCmdOptions>();
  CLI::App* sub = app.add_subcommand(
      "compact", "Merge every rank's segment files into one trace database (incremental)");
  // A missing directory is a file missing (exit 1, docs/cli.md "Exit codes"), said by RunCompact.
  sub->add_option("dirs", o->inputs, "Trace directories (with rank-*/ subdirectories)")->required();
  sub->add_option("-o,--output", o->output, "Trace database to create or extend")->required();
  sub->add_flag("--watch", o->watch, "Follow a live job until all its files are closed");
  sub->add_option("--interval", o->interval_s, "Seconds between passes with --watch")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--finish", o->finish,
                "The job is over: take unclosed files whole (needed only for files whose writer "
                "lock cannot be seen: another host, a filesystem without flock)");
  sub->add_option("--stale-after", o->stale_after_s,
                  "Without flock only: seconds after which an unclosed, unchanged file counts "
                  "as finished");
  AddVerbosityFlags(sub);
  sub->add_flag("--mpi", o->mpi,
                "Run as an MPI job (mpirun -np K tracedb compact --mpi DIR -o JOB.tdb): the ranks "
                "shared among the K processes, their shards merged into JOB.tdb");
  sub->add_option("--shard-by", o->shard_by,
                  "Write one database per node (JOB.tdb.shards/) and a manifest JOB.tdb that "
                  "query, shell, export and report open as one database")
      ->check(CLI::IsMember({"node"}));
  sub->add_flag("--no-wait", o->no_wait,
                "Fail at once when another tracedb process is writing the output (default: "
                "wait for it, saying so)");
  sub->add_flag("--delete-compacted", o->delete_compacted,
                "Remove each segment file once its events are committed to the database and "
                "no writer can append to it (closed, or its writer gone)");
  sub->callback([o, exit_code] { *exit_code = RunCompact(*o); });
}

}  // namespace tracedb::shell
