// Benchmark of the MPI interposer's cost per call: an 8-byte MPI_Allreduce and a 0-byte
// MPI_Send/MPI_Recv ping-pong between 2 ranks. The program never calls tracedb;
// bench/run_mpi_overhead.sh runs it without the interposer, with it in pass-through
// (TRACEDB_DIR unset) and with it recording, and prints the differences (docs/bench-mpi.md).
//
//   mpirun -np 2 mpi_overhead [iterations] [repetitions]
//
// Rank 0 prints one line per repetition:
//   allreduce_ns=<ns per MPI_Allreduce> pingpong_ns=<half a round trip: one MPI_Send plus one
//   MPI_Recv on the critical path> self_allreduce_ns=<ns per 8-byte MPI_Allreduce on
//   MPI_COMM_SELF> send_procnull_ns=<ns per 0-byte MPI_Send to MPI_PROC_NULL>
//   isend_wait_procnull_ns=<ns per MPI_Isend + MPI_Wait pair to MPI_PROC_NULL>
// The last three wait for no other rank, so they show the per-call cost with little of the
// scheduling noise of a busy 2-core machine (see BurstNs).
// Thread safety: single-threaded MPI program.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

double NowNs() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double AllreduceNs(long iterations) {
  double in = 1.0, out = 0.0;
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = NowNs();
  for (long i = 0; i < iterations; ++i) {
    MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  return (NowNs() - t0) / static_cast<double>(iterations);
}

// No partner: the call's own cost (and the interposer's), without waiting for another rank. The
// calls run in bursts that fit a recorder thread buffer, with untimed pauses in between in which
// the recorder's flusher drains it: every call is then really recorded (none dropped), and the
// flusher's work is not charged to the calls.
constexpr long kBurst = 8192;
constexpr auto kPause = std::chrono::milliseconds(3);

template <class Call>
double BurstNs(long iterations, Call call) {
  double total = 0;
  for (long done = 0; done < iterations;) {
    const long n = iterations - done < kBurst ? iterations - done : kBurst;
    std::this_thread::sleep_for(kPause);
    const double t0 = NowNs();
    for (long i = 0; i < n; ++i) call();
    total += NowNs() - t0;
    done += n;
  }
  return total / static_cast<double>(iterations);
}

double SelfAllreduceNs(long iterations) {
  double in = 1.0, out = 0.0;
  return BurstNs(iterations,
                 [&] { MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF); });
}

double SendProcNullNs(long iterations) {
  return BurstNs(iterations,
                 [] { MPI_Send(nullptr, 0, MPI_BYTE, MPI_PROC_NULL, 7, MPI_COMM_WORLD); });
}

double IsendWaitProcNullNs(long iterations) {
  return BurstNs(iterations, [] {
    MPI_Request q;
    MPI_Isend(nullptr, 0, MPI_BYTE, MPI_PROC_NULL, 7, MPI_COMM_WORLD, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
  });
}

double PingPongHalfRttNs(long iterations, int rank) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = NowNs();
  for (long i = 0; i < iterations; ++i) {
    if (rank == 0) {
      MPI_Send(nullptr, 0, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
      MPI_Recv(nullptr, 0, MPI_BYTE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(nullptr, 0, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(nullptr, 0, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
    }
  }
  return (NowNs() - t0) / static_cast<double>(2 * iterations);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long iterations = argc > 1 ? std::atol(argv[1]) : 200000;
  const int repetitions = argc > 2 ? std::atoi(argv[2]) : 3;
  if (size != 2 || iterations <= 0 || repetitions <= 0) {
    if (rank == 0) std::fprintf(stderr, "usage: mpirun -np 2 mpi_overhead [iterations] [reps]\n");
    MPI_Finalize();
    return 2;
  }
  AllreduceNs(iterations / 10);  // warm-up
  PingPongHalfRttNs(iterations / 10, rank);
  for (int r = 0; r < repetitions; ++r) {
    const double allreduce = AllreduceNs(iterations);
    const double pingpong = PingPongHalfRttNs(iterations, rank);
    const double self = SelfAllreduceNs(iterations);
    const double procnull = SendProcNullNs(iterations);
    const double isend_wait = IsendWaitProcNullNs(iterations);
    if (rank == 0) {
      std::printf(
          "allreduce_ns=%.1f pingpong_ns=%.1f self_allreduce_ns=%.1f send_procnull_ns=%.1f "
          "isend_wait_procnull_ns=%.1f\n",
          allreduce, pingpong, self, procnull, isend_wait);
    }
  }
  MPI_Finalize();
  return 0;
}
