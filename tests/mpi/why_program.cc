// An MPI training-like loop with named phases (recorder API) and delays injected at known
// (step, rank, phase), for the known-answer tests of the why analyses (why_mpi_test.cc). Each
// step: forward, backward, MPI_Allreduce (wait at N x N); pack, a ring exchange with MPI_Send
// then MPI_Recv (late sender), MPI_Barrier; load, MPI_Bcast from rank 0 (late broadcast),
// MPI_Barrier. (The barrier before the broadcast keeps a late sender's lateness out of the
// broadcast, where Open MPI's tree would hide it in a non-root's MPI_Bcast: docs/why.md.)
// Phases sleep (no CPU: the ranks share two cores); a delay adds to one phase's sleep.
//
// Usage: mpirun -np 4 why_program STEPS [STEP:RANK:PHASE:MS ...]
#include <mpi.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tracedb/recorder.hpp"

namespace {

struct Delay {
  int step, rank;
  std::string phase;
  int ms;
};

void SleepMs(double ms) {
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(ms / 1000);
  ts.tv_nsec = static_cast<long>((ms - 1000.0 * static_cast<double>(ts.tv_sec)) * 1e6);
  while (nanosleep(&ts, &ts) != 0) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 2) {
    if (rank == 0) std::fprintf(stderr, "usage: why_program STEPS [STEP:RANK:PHASE:MS ...]\n");
    MPI_Finalize();
    return 2;
  }
  const int steps = std::atoi(argv[1]);
  std::vector<Delay> delays;
  for (int i = 2; i < argc; ++i) {
    char phase[64] = {0};
    Delay d;
    if (std::sscanf(argv[i], "%d:%d:%63[^:]:%d", &d.step, &d.rank, phase, &d.ms) != 4) {
      if (rank == 0) std::fprintf(stderr, "why_program: bad delay '%s'\n", argv[i]);
      MPI_Finalize();
      return 2;
    }
    d.phase = phase;
    delays.push_back(d);
  }
  tracedb_thread_name("trainer");
  auto phase = [&](const tracedb::Name& name, const char* text, int step, double ms) {
    for (const Delay& d : delays)
      if (d.step == step && d.rank == rank && d.phase == text) ms += d.ms;
    tracedb::Span s(name, tracedb::Category::kCompute);
    SleepMs(ms);
  };
  static const tracedb::Name kForward("forward"), kBackward("backward"), kPack("pack");
  static const tracedb::Name kLoad("load");
  double grad[64] = {0}, sum[64] = {0};
  char out[256] = {0}, in[256] = {0};
  int params[16] = {0};
  MPI_Barrier(MPI_COMM_WORLD);
  for (int step = 0; step < steps; ++step) {
    tracedb::Step(step);
    phase(kForward, "forward", step, 4);
    phase(kBackward, "backward", step, 6);
    MPI_Allreduce(grad, sum, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    phase(kPack, "pack", step, 1);
    MPI_Send(out, sizeof(out), MPI_CHAR, (rank + 1) % size, 7, MPI_COMM_WORLD);
    MPI_Recv(in, sizeof(in), MPI_CHAR, (rank + size - 1) % size, 7, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    phase(kLoad, "load", step, 1);
    MPI_Bcast(params, 16, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
