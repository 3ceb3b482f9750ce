// A small data-parallel-like MPI program for the tests and the false-alarm bench of
// `tracedb check` (tests/mpi/check_cmd_test.py, bench/check_false_alarm.sh): every step marks
// the step (tracedb_step), runs three compute phases that sleep for known times ("forward" 4 ms,
// "backward" 12 ms, "optimizer" 4 ms, category compute), an MPI_Barrier and one real MPI_Allreduce
// of the gradients (recorded by the MPI interposer under `tracedb record -- mpirun`). Knobs inject
// known changes:
//   --slow NAME=FACTOR   multiplies phase NAME's time on every rank (e.g. backward=1.4)
//   --allreduce-kb K     the gradients' size (default 64 KB): a larger one slows the collective
//   --extra-ms MS        adds a phase "injected_sleep" of MS per step (a name new to the run)
// Usage: mpirun -np N check_program [--steps 12] [--forward-ms 4] [--backward-ms 12]
//                                   [--optimizer-ms 4] [--slow NAME=F] [--allreduce-kb K]
//                                   [--extra-ms MS]
// Thread safety: single-threaded MPI program.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tracedb/recorder.h"

namespace {

void Phase(uint32_t name, double ms) {
  tracedb_begin_ex(name, TRACEDB_CAT_COMPUTE, 0, nullptr);
  std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(ms * 1000)));
  tracedb_end_ex(name, TRACEDB_CAT_COMPUTE, 0, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int steps = 12;
  double forward = 4, backward = 12, optimizer = 4, extra = 0;
  int kb = 64;
  std::string slow_name;
  double slow_factor = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (v == nullptr) {
      if (rank == 0) std::fprintf(stderr, "check_program: %s needs a value\n", a.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    ++i;
    if (a == "--steps") {
      steps = std::atoi(v);
    } else if (a == "--forward-ms") {
      forward = std::atof(v);
    } else if (a == "--backward-ms") {
      backward = std::atof(v);
    } else if (a == "--optimizer-ms") {
      optimizer = std::atof(v);
    } else if (a == "--allreduce-kb") {
      kb = std::atoi(v);
    } else if (a == "--extra-ms") {
      extra = std::atof(v);
    } else if (a == "--slow") {
      const char* eq = std::strchr(v, '=');
      if (eq == nullptr) MPI_Abort(MPI_COMM_WORLD, 2);
      slow_name.assign(v, eq);
      slow_factor = std::atof(eq + 1);
    } else {
      if (rank == 0) std::fprintf(stderr, "check_program: unknown option %s\n", a.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  auto ms = [&](const char* name, double base) {
    return slow_name == name ? base * slow_factor : base;
  };
  const uint32_t fwd = tracedb_intern("forward");
  const uint32_t bwd = tracedb_intern("backward");
  const uint32_t opt = tracedb_intern("optimizer");
  const uint32_t inj = tracedb_intern("injected_sleep");
  std::vector<float> grad(static_cast<size_t>(kb) * 256, 1.0f), sum(grad.size());
  for (int s = 0; s < steps; ++s) {
    tracedb_step(s);
    Phase(fwd, ms("forward", forward));
    Phase(bwd, ms("backward", backward));
    if (extra > 0) Phase(inj, extra);
    // The ranks wait for each other here, so that the allreduce's own time is the transfer (and
    // a larger one is slower by what the bytes cost, not by what the scheduler decides).
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Allreduce(grad.data(), sum.data(), static_cast<int>(grad.size()), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    Phase(opt, ms("optimizer", optimizer));
  }
  MPI_Finalize();
  return 0;
}
