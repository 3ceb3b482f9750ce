// A real data-parallel training job over MPI, annotated with the tracedb recorder API: logistic
// regression on synthetic data, one shard per rank, with two ways to combine gradients:
//   --mode allreduce  every step averages the gradients of all ranks (MPI_Allreduce per tensor,
//                     with Horovod's phases: NEGOTIATE_ALLREDUCE, QUEUE,
//                     MEMCPY_IN_FUSION_BUFFER, COMMUNICATE, MEMCPY_OUT_FUSION_BUFFER)
//   --mode neighbor   decentralized averaging as in Bluefog: each rank averages its weights
//                     with its neighbors on an exponential-2 graph (MPI_Neighbor_allgather)
// The weights are split into named tensors, each on a lane of its own (as Horovod's and
// Bluefog's timelines show one row per tensor). --straggler-ms makes the last rank slower in
// its forward pass every 10th step, so that the straggler views have something to find.
// Recording starts when TRACEDB_DIR is set (or under `tracedb record`).
//
// Usage: mpirun -np 4 logreg_mpi [--mode allreduce|neighbor] [--steps N] [--samples N]
//                                [--features N] [--straggler-ms MS]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tracedb/recorder.hpp"

namespace {

struct Options {
  std::string mode = "allreduce";
  int steps = 100;
  int samples = 2000;
  int features = 4096;
  int straggler_ms = 0;
  double lr = 0.5;
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    const char* v = nullptr;
    if (a == "--mode" && (v = next("--mode")))
      o->mode = v;
    else if (a == "--steps" && (v = next("--steps")))
      o->steps = std::atoi(v);
    else if (a == "--samples" && (v = next("--samples")))
      o->samples = std::atoi(v);
    else if (a == "--features" && (v = next("--features")))
      o->features = std::atoi(v);
    else if (a == "--straggler-ms" && (v = next("--straggler-ms")))
      o->straggler_ms = std::atoi(v);
    else if (a == "--lr" && (v = next("--lr")))
      o->lr = std::atof(v);
    else {
      std::fprintf(stderr, "unknown or incomplete argument %s\n", a.c_str());
      return false;
    }
  }
  if (o->mode != "allreduce" && o->mode != "neighbor") {
    std::fprintf(stderr, "--mode must be allreduce or neighbor\n");
    return false;
  }
  return o->steps > 0 && o->samples > 0 && o->features >= 8;
}

// A slice of the weight vector, communicated as one tensor.
struct Tensor {
  std::string name;
  size_t offset, size;
  tracedb::Lane lane;
};

double Sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    MPI_Finalize();
    return 2;
  }
  tracedb_thread_name("trainer");

  static const tracedb::Name kForward("forward"), kBackward("backward"), kUpdate("update");
  static const tracedb::Name kNegotiate("NEGOTIATE_ALLREDUCE"), kQueue("QUEUE");
  static const tracedb::Name kMemcpyIn("MEMCPY_IN_FUSION_BUFFER"), kComm("COMMUNICATE");
  static const tracedb::Name kMemcpyOut("MEMCPY_OUT_FUSION_BUFFER");
  static const tracedb::Name kAllreduce("ALLREDUCE"), kNeighbor("NEIGHBOR_ALLREDUCE");
  static const tracedb::Name kLoss("loss");

  // Synthetic, linearly separable-ish data around a shared true weight vector.
  const int d = o.features, n = o.samples;
  std::mt19937_64 shared(42), local(1000 + static_cast<uint64_t>(rank));
  std::normal_distribution<double> gauss(0.0, 1.0);
  std::vector<double> truth(d);
  for (double& t : truth) t = gauss(shared) / std::sqrt(static_cast<double>(d));
  std::vector<float> x(static_cast<size_t>(n) * d);
  std::vector<float> y(n);
  for (int i = 0; i < n; ++i) {
    double z = 0;
    for (int j = 0; j < d; ++j) {
      const double v = gauss(local);
      x[static_cast<size_t>(i) * d + j] = static_cast<float>(v);
      z += v * truth[j];
    }
    y[i] = Sigmoid(4 * z + 0.3 * gauss(local)) > 0.5 ? 1.0f : 0.0f;
  }

  std::vector<Tensor> tensors;
  const char* kNames[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
  const size_t quarter = static_cast<size_t>(d) / 4;
  for (int t = 0; t < 4; ++t) {
    const size_t size = t == 3 ? static_cast<size_t>(d) - 3 * quarter : quarter;
    tensors.push_back(Tensor{kNames[t], t * quarter, size, tracedb::Lane(kNames[t])});
  }

  // The exponential-2 graph: rank r talks to r +- 1, 2, 4, ... (Bluefog's default topology).
  MPI_Comm graph = MPI_COMM_NULL;
  std::vector<int> neighbors;
  if (o.mode == "neighbor") {
    for (int k = 1; k < world; k *= 2) {
      const int out = (rank + k) % world;
      if (out != rank && std::find(neighbors.begin(), neighbors.end(), out) == neighbors.end()) {
        neighbors.push_back(out);
      }
    }
    std::vector<int> sources;
    for (int k = 1; k < world; k *= 2) {
      const int in = ((rank - k) % world + world) % world;
      if (in != rank && std::find(sources.begin(), sources.end(), in) == sources.end()) {
        sources.push_back(in);
      }
    }
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, static_cast<int>(sources.size()), sources.data(),
                                   MPI_UNWEIGHTED, static_cast<int>(neighbors.size()),
                                   neighbors.data(), MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &graph);
    neighbors = sources;  // we average what we receive
  }

  std::vector<double> w(d, 0.0), grad(d), fusion(d), recv;
  std::vector<double> z(n);
  double loss = 0;
  for (int step = 0; step < o.steps; ++step) {
    tracedb::Step(step);
    {
      tracedb::Span s(kForward, tracedb::Category::kCompute);
      loss = 0;
      for (int i = 0; i < n; ++i) {
        double acc = 0;
        const float* row = &x[static_cast<size_t>(i) * d];
        for (int j = 0; j < d; ++j) acc += row[j] * w[j];
        z[i] = acc;
        const double p = Sigmoid(acc);
        loss -= y[i] ? std::log(p + 1e-12) : std::log(1 - p + 1e-12);
      }
      loss /= n;
      if (o.straggler_ms > 0 && rank == world - 1 && step % 10 == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(o.straggler_ms));
      }
    }
    tracedb::Counter(kLoss, loss);
    {
      tracedb::Span s(kBackward, tracedb::Category::kCompute);
      std::fill(grad.begin(), grad.end(), 0.0);
      for (int i = 0; i < n; ++i) {
        const double err = Sigmoid(z[i]) - y[i];
        const float* row = &x[static_cast<size_t>(i) * d];
        for (int j = 0; j < d; ++j) grad[j] += err * row[j];
      }
      for (double& g : grad) g /= n;
    }
    if (o.mode == "allreduce") {
      for (Tensor& t : tensors) {
        tracedb::Span op(kAllreduce, tracedb::Category::kPhase, t.lane);
        {
          // Horovod's coordinator agrees that every rank has the tensor ready.
          tracedb::Span s(kNegotiate, tracedb::Category::kPhase, t.lane);
          int ready = 1, all = 0;
          MPI_Allreduce(&ready, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        }
        { tracedb::Span s(kQueue, tracedb::Category::kPhase, t.lane); }
        {
          tracedb::Span s(kMemcpyIn, tracedb::Category::kPhase, t.lane);
          std::memcpy(&fusion[t.offset], &grad[t.offset], t.size * sizeof(double));
        }
        {
          const tracedb::Args args = tracedb::Args().Bytes(t.size * sizeof(double)).Comm(0);
          tracedb::Span s(kComm, tracedb::Category::kComm, t.lane, &args);
          MPI_Allreduce(MPI_IN_PLACE, &fusion[t.offset], static_cast<int>(t.size), MPI_DOUBLE,
                        MPI_SUM, MPI_COMM_WORLD);
        }
        {
          tracedb::Span s(kMemcpyOut, tracedb::Category::kPhase, t.lane);
          for (size_t j = 0; j < t.size; ++j) grad[t.offset + j] = fusion[t.offset + j] / world;
        }
      }
      tracedb::Span s(kUpdate, tracedb::Category::kCompute);
      for (int j = 0; j < d; ++j) w[j] -= o.lr * grad[j];
    } else {
      {
        tracedb::Span s(kUpdate, tracedb::Category::kCompute);
        for (int j = 0; j < d; ++j) w[j] -= o.lr * grad[j];
      }
      for (Tensor& t : tensors) {
        tracedb::Span op(kNeighbor, tracedb::Category::kPhase, t.lane);
        recv.resize(t.size * neighbors.size());
        {
          const tracedb::Args args =
              tracedb::Args().Bytes(t.size * sizeof(double) * neighbors.size());
          tracedb::Span s(kComm, tracedb::Category::kComm, t.lane, &args);
          MPI_Neighbor_allgather(&w[t.offset], static_cast<int>(t.size), MPI_DOUBLE, recv.data(),
                                 static_cast<int>(t.size), MPI_DOUBLE, graph);
        }
        for (size_t j = 0; j < t.size; ++j) {
          double sum = w[t.offset + j];
          for (size_t k = 0; k < neighbors.size(); ++k) sum += recv[k * t.size + j];
          w[t.offset + j] = sum / static_cast<double>(neighbors.size() + 1);
        }
      }
    }
  }

  // Report the model's quality on this rank's shard, averaged over ranks.
  int correct = 0;
  for (int i = 0; i < n; ++i) {
    double acc = 0;
    for (int j = 0; j < d; ++j) acc += x[static_cast<size_t>(i) * d + j] * w[j];
    correct += (acc > 0) == (y[i] > 0.5);
  }
  double stats[2] = {loss, static_cast<double>(correct) / n}, sum[2];
  MPI_Reduce(stats, sum, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("mode %s, %d ranks, %d steps: loss %.4f, accuracy %.3f\n", o.mode.c_str(), world,
                o.steps, sum[0] / world, sum[1] / world);
  }
  if (graph != MPI_COMM_NULL) MPI_Comm_free(&graph);
  MPI_Finalize();
  return 0;
}
