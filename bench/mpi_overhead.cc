// Benchmark of the MPI interposer's cost per call: an 8-byte MPI_Allreduce and a 0-byte
// MPI_Send/MPI_Recv ping-pong between 2 ranks. The program never calls tracedb;
// bench/run_mpi_overhead.sh runs it without the interposer, with it in pass-through
// (TRACEDB_DIR unset) and with it recording, and prints the differences (docs/bench-mpi.md).
//
//   mpirun -np 2 mpi_overhead [iterations] [repetitions]
//
// Rank 0 prints one line per repetition, ns per call:
//   allreduce_ns            8-byte MPI_Allreduce, 2 ranks (median batch; see Batched)
//   pingpong_ns             half a round trip of a 0-byte ping-pong: one MPI_Send and one
//                           MPI_Recv on the critical path (median batch)
//   *_mean_ns               the same, mean of all batches
//   self_allreduce_ns       8-byte MPI_Allreduce on MPI_COMM_SELF
//   send_procnull_ns        0-byte MPI_Send to MPI_PROC_NULL
//   isend_wait_procnull_ns  MPI_Isend + MPI_Wait pair to MPI_PROC_NULL
// The last three wait for no other rank, so they show the per-call cost without the scheduling
// noise of a busy 2-core machine (see BurstNs).
// Thread safety: single-threaded MPI program.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

double NowNs() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Lockstep loops are timed in batches of kBatch iterations. The median batch is robust to the
// occasional preemption by other processes of a shared machine; the mean of all batches counts
// everything (including the recorder flusher's turns on the CPU).
constexpr long kBatch = 1000;

struct Timing {
  double median_ns = 0;  // per call, median batch
  double mean_ns = 0;    // per call, all batches
};

template <class Step>
Timing Batched(long iterations, double calls_per_step, Step step) {
  std::vector<double> batches;
  double total = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (long done = 0; done < iterations; done += kBatch) {
    const double t0 = NowNs();
    for (long i = 0; i < kBatch; ++i) step();
    const double dt = NowNs() - t0;
    batches.push_back(dt / (kBatch * calls_per_step));
    total += dt;
  }
  std::sort(batches.begin(), batches.end());
  Timing t;
  t.median_ns = batches[batches.size() / 2];
  t.mean_ns = total / (static_cast<double>(batches.size()) * kBatch * calls_per_step);
  return t;
}

Timing AllreduceNs(long iterations) {
  double in = 1.0, out = 0.0;
  return Batched(iterations, 1,
                 [&] { MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); });
}

// Half a round trip: one MPI_Send and one MPI_Recv on the critical path.
Timing PingPongHalfRttNs(long iterations, int rank) {
  return Batched(iterations, 2, [rank] {
    if (rank == 0) {
      MPI_Send(nullptr, 0, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
      MPI_Recv(nullptr, 0, MPI_BYTE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(nullptr, 0, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(nullptr, 0, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
    }
  });
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
    const Timing allreduce = AllreduceNs(iterations);
    const Timing pingpong = PingPongHalfRttNs(iterations, rank);
    const double self = SelfAllreduceNs(iterations);
    const double procnull = SendProcNullNs(iterations);
    const double isend_wait = IsendWaitProcNullNs(iterations);
    if (rank == 0) {
      std::printf(
          "allreduce_ns=%.1f allreduce_mean_ns=%.1f pingpong_ns=%.1f pingpong_mean_ns=%.1f "
          "self_allreduce_ns=%.1f send_procnull_ns=%.1f isend_wait_procnull_ns=%.1f\n",
          allreduce.median_ns, allreduce.mean_ns, pingpong.median_ns, pingpong.mean_ns, self,
          procnull, isend_wait);
    }
  }
  MPI_Finalize();
  return 0;
}
