// tracedb-mpi-compact: the MPI side of `tracedb compact --mpi DIR... -o JOB.tdb`, which execs
// this program (so that only it links MPI; the tracedb program runs where MPI is not installed).
// Run under any MPI launcher: `mpirun -np K tracedb compact --mpi DIR -o JOB.tdb`.
//
// Each of the K processes compacts the ranks r with r mod K == its MPI rank into its shard
// (JOB.tdb.shards/mpi-P-of-K.tdb; every process also reads rank 0's clock anchors, so all agree
// on the common clock); then process 0 merges the shards into JOB.tdb by copying their encoded
// blocks (engine/compact/shard_compact.h). Incremental and crash-safe: shards keep their progress,
// the merge records per shard the last block it copied. Exit codes: 0 done, 1 an error (printed by
// the process that met it), 2 bad arguments.
#include <mpi.h>
#include <sys/resource.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/compact/output_lock.h"
#include "engine/compact/shard_compact.h"
#include "shell/format.h"

namespace {

using tracedb::engine::CompactOptions;
using tracedb::shell::Now;

struct Args {
  CompactOptions compact;
  std::string output;
  bool quiet = false;
};

// The options `tracedb compact` declares for --mpi (shell/cmd_compact.cc), declared the same
// way: `tracedb compact --mpi` execs this program with them (and --mpi itself). Returns the exit
// code to leave with after printing (process 0 only), or -1 to go on.
int Parse(int argc, char** argv, int p, Args* a) {
  CLI::App app{"the MPI side of tracedb compact --mpi", "tracedb compact --mpi"};
  app.set_help_flag("-h,--help", "this help");
  bool mpi = false;
  app.add_option("DIR", a->compact.inputs, "the job's trace directories")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("-o,--output", a->output, "the trace database")->required();
  app.add_flag("--finish", a->compact.finish, "the job is over: close every open span");
  app.add_option("--stale-after", a->compact.stale_after_s,
                 "a file untouched this many seconds is a dead writer's");
  app.add_flag("-q,--quiet", a->quiet, "no progress");
  app.add_flag("--mpi", mpi, "(the flag that brought us here)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (p != 0) return e.get_exit_code() == 0 ? 0 : 2;
    if (e.get_exit_code() == 0) {  // --help
      std::fputs(app.help().c_str(), stdout);
      return 0;
    }
    std::fprintf(stderr, "tracedb compact --mpi: %s\n", e.what());
    return 2;
  }
  return -1;
}

double CpuSeconds() {
  struct rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// Waits for a non-blocking collective without spinning: Open MPI's blocking calls poll a core
// at 100% while they wait (here: every process while process 0 merges), which on a machine
// with as many processes as cores takes the merge's core away.
void WaitQuietly(MPI_Request* request) {
  int done = 0;
  for (;;) {
    MPI_Test(request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    ::usleep(2000);
  }
}

// Removes the output after a failure when this run created it (OutputLock::RemoveCreated).
void RemoveCreated(tracedb::engine::OutputLock* lock) {
  if (lock == nullptr) return;
  const std::string problems = lock->RemoveCreated();
  if (!problems.empty()) std::fprintf(stderr, "tracedb compact --mpi: %s\n", problems.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int p = 0, k = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &p);
  MPI_Comm_size(MPI_COMM_WORLD, &k);
  Args args;
  if (const int code = Parse(argc, argv, p, &args); code >= 0) {
    MPI_Finalize();
    return code;
  }
  // One writer at a time on the output (engine/compact/output_lock.h): process 0 holds its lock for
  // the whole run, the others wait for it at the barrier; a database is removed after a
  // failure only when this run created it.
  std::unique_ptr<tracedb::engine::OutputLock> lock;
  int locked = 1;
  if (p == 0) {
    tracedb::engine::LockOptions lo;
    lo.on_wait = [&args]() {
      std::fprintf(stderr,
                   "tracedb compact --mpi: %s is being written by another tracedb process; "
                   "waiting for it to finish\n",
                   args.output.c_str());
    };
    auto l = tracedb::engine::OutputLock::Acquire(args.output, lo);
    if (l.ok()) {
      lock = std::move(*l);
    } else {
      std::fprintf(stderr, "tracedb compact --mpi: %s\n", l.status().message().c_str());
      locked = 0;
    }
  }
  MPI_Request request;
  MPI_Ibcast(&locked, 1, MPI_INT, 0, MPI_COMM_WORLD, &request);
  WaitQuietly(&request);
  if (!locked) {
    MPI_Finalize();
    return 1;
  }
  MPI_Ibarrier(MPI_COMM_WORLD, &request);  // every process has looked before 0 may create it
  WaitQuietly(&request);

  // Phase 1: every process its shard.
  const double t0 = Now(), cpu0 = CpuSeconds();
  auto stats = tracedb::engine::CompactMpiShard(args.compact, args.output, p, k);
  if (!stats.ok()) {
    std::fprintf(stderr, "tracedb compact --mpi: process %d of %d: %s\n", p, k,
                 stats.status().message().c_str());
  }
  // Per process: ok, segment events, CPU s, wall s.
  double mine[4] = {stats.ok() ? 1.0 : 0.0, stats.ok() ? double(stats->segment_events) : 0,
                    CpuSeconds() - cpu0, Now() - t0};
  std::vector<double> all(p == 0 ? 4 * k : 0);
  MPI_Igather(mine, 4, MPI_DOUBLE, all.data(), 4, MPI_DOUBLE, 0, MPI_COMM_WORLD, &request);
  WaitQuietly(&request);

  // Phase 2: process 0 merges the shards (SQLite has one writer).
  int rc = stats.ok() ? 0 : 1;
  if (p == 0) {
    bool all_ok = true;
    double events = 0, cpu = 0, cpu_max = 0, wall = 0;
    for (int i = 0; i < k; ++i) {
      all_ok &= all[4 * i] == 1.0;
      events += all[4 * i + 1];
      cpu += all[4 * i + 2];
      cpu_max = std::max(cpu_max, all[4 * i + 2]);
      wall = std::max(wall, all[4 * i + 3]);
    }
    if (all_ok) {
      const double m0 = Now(), mcpu0 = CpuSeconds();
      auto merged = tracedb::engine::MergeMpiShards(args.output, k);
      if (!merged.ok()) {
        std::fprintf(stderr, "tracedb compact --mpi: merging the shards into %s: %s\n",
                     args.output.c_str(), merged.status().message().c_str());
        RemoveCreated(lock.get());
        rc = 1;
      } else if (!args.quiet) {
        std::fprintf(stderr,
                     "compacted %.0f segment events in %d processes: shards %.2f s wall "
                     "(slowest process), %.2f s CPU (busiest process), %.2f s CPU (all); merge "
                     "of %llu blocks (%llu with ids mapped) %.2f s wall, %.2f s CPU\n",
                     events, k, wall, cpu_max, cpu,
                     static_cast<unsigned long long>(merged->total.blocks),
                     static_cast<unsigned long long>(merged->total.blocks_rewritten), Now() - m0,
                     CpuSeconds() - mcpu0);
      }
    } else {
      rc = 1;
      RemoveCreated(lock.get());
    }
  }
  MPI_Ibcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD, &request);
  WaitQuietly(&request);
  MPI_Finalize();
  return rc;
}
