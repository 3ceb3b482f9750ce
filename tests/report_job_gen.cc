// Writes a trace database of a synthetic data-parallel training job with known content, for the
// tests and the benchmark of report html, diff and top (docs/report.md "Testing").
//
// Every rank runs STEPS steps. A step: a step marker; "forward" and "backward" compute spans,
// each holding LAYERS "layer" compute spans; three "MPI_Allreduce" calls (cat mpi, comm 1, a
// per-communicator seq, 64 KiB, 1 MiB and 4 MiB) that start when the rank is ready and all end
// when the last rank has arrived plus a transfer time; an "optimizer" compute span. Durations
// are a base times a uniform jitter of +-5%. Options inject what the tests look for:
//   --slow NAME=F        NAME's durations × F on every rank (forward, backward, optimizer, layer)
//   --straggler RANK=F   that rank's compute × F (the others wait for it in the allreduces)
//   --spike STEP=F       every rank's compute in that step × F (an outlier step)
//   --dropped N          stats: N events dropped on rank 1, and 2 torn tails on rank 0
// Usage: report_job_gen OUT.tdb RANKS STEPS [LAYERS] [options] [--seed N]
// Prints "events N" (the rows written).
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/db/trace_builder.h"
#include "engine/db/trace_writer.h"

using tracedb::Status;
using tracedb::engine::EventArgs;
using tracedb::engine::RankRecord;
using tracedb::engine::TraceBuilder;
using tracedb::engine::TraceWriter;
using tracedb::engine::TrackSpec;

namespace {

int Fail(const Status& s) {
  std::fprintf(stderr, "report_job_gen: %s\n", s.message().c_str());
  return 1;
}

#define CHECK_OK(expr)             \
  do {                             \
    Status s_ = (expr);            \
    if (!s_.ok()) return Fail(s_); \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: %s OUT.tdb RANKS STEPS [LAYERS] [--slow NAME=F] [--straggler RANK=F] "
                 "[--spike STEP=F] [--dropped N] [--seed N]\n",
                 argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  const int ranks = std::atoi(argv[2]);
  const int steps = std::atoi(argv[3]);
  int layers = 4;
  int first_opt = 4;
  if (argc > 4 && argv[4][0] != '-') {
    layers = std::atoi(argv[4]);
    first_opt = 5;
  }
  std::map<std::string, double> slow;
  std::map<int, double> straggler, spike;
  int64_t dropped = 0;
  uint64_t seed = 1;
  for (int i = first_opt; i + 1 < argc; i += 2) {
    const std::string opt = argv[i], val = argv[i + 1];
    const size_t eq = val.find('=');
    if (opt == "--slow" && eq != std::string::npos) {
      slow[val.substr(0, eq)] = std::atof(val.c_str() + eq + 1);
    } else if (opt == "--straggler" && eq != std::string::npos) {
      straggler[std::atoi(val.c_str())] = std::atof(val.c_str() + eq + 1);
    } else if (opt == "--spike" && eq != std::string::npos) {
      spike[std::atoi(val.c_str())] = std::atof(val.c_str() + eq + 1);
    } else if (opt == "--dropped") {
      dropped = std::atoll(val.c_str());
    } else if (opt == "--seed") {
      seed = std::strtoull(val.c_str(), nullptr, 10);
    } else {
      std::fprintf(stderr, "report_job_gen: bad option %s %s\n", opt.c_str(), val.c_str());
      return 2;
    }
  }
  if (ranks < 1 || steps < 1 || layers < 0) {
    std::fprintf(stderr, "report_job_gen: RANKS and STEPS must be positive\n");
    return 2;
  }
  std::remove(out.c_str());
  auto w = TraceWriter::Open(out);
  if (!w.ok()) return Fail(w.status());
  TraceWriter* tw = w->get();
  TraceBuilder b(tw);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> jitter(0.95, 1.05);
  auto factor = [&](const std::string& name) {
    auto it = slow.find(name);
    return it == slow.end() ? 1.0 : it->second;
  };
  CHECK_OK(tw->BeginBatch());
  const uint32_t n_fwd = tw->Intern("forward"), n_bwd = tw->Intern("backward"),
                 n_layer = tw->Intern("layer"), n_ar = tw->Intern("MPI_Allreduce"),
                 n_opt = tw->Intern("optimizer");
  const uint32_t c_compute = tw->Intern("compute"), c_mpi = tw->Intern("mpi");
  std::vector<uint32_t> track(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    RankRecord rec;
    rec.rank = r;
    rec.host = "node" + std::to_string(r / 4);
    rec.world_size = ranks;
    rec.local_rank = r % 4;
    rec.clock_method = r == 0 ? "realtime" : "sync";
    rec.offset_ns = r * 1000;
    rec.drift_ppm = 0.1 * r;
    rec.uncertainty_ns = r == 0 ? 0 : 200 + 150 * r;
    rec.sync_points = r == 0 ? 0 : 2;
    rec.source = "segments";
    CHECK_OK(tw->SetRank(rec));
    TrackSpec s;
    s.rank = r;
    s.name = "main";
    s.tid = 100 + r;
    s.pid = 1000 + r;
    s.local_id = 0;
    track[static_cast<size_t>(r)] = tw->Track(s);
  }
  const int64_t kFwd = 3'000'000, kBwd = 6'000'000, kOpt = 1'000'000, kGap = 50'000;
  const uint64_t kBytes[3] = {64 << 10, 1 << 20, 4 << 20};
  uint64_t events = 0;
  uint64_t seq = 0;
  int64_t step_start = 1'700'000'000'000'000'000;
  std::vector<int64_t> t(static_cast<size_t>(ranks));
  for (int step = 0; step < steps; ++step) {
    if (step > 0 && step % 200 == 0) {
      CHECK_OK(b.SaveState("gen"));
      CHECK_OK(tw->CommitBatch());
      CHECK_OK(tw->BeginBatch());
    }
    const double step_factor = spike.count(step) ? spike[step] : 1.0;
    // Compute on each rank up to its first allreduce.
    std::vector<int64_t> ready(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      const uint32_t tr = track[static_cast<size_t>(r)];
      const double rf = (straggler.count(r) ? straggler[r] : 1.0) * step_factor;
      int64_t now = step_start;
      tw->AddStep(r, now, step);
      for (auto [name, base] : {std::pair{n_fwd, kFwd}, std::pair{n_bwd, kBwd}}) {
        const int64_t dur = static_cast<int64_t>(base * jitter(rng) * rf *
                                                 factor(name == n_fwd ? "forward" : "backward"));
        CHECK_OK(b.Complete(tr, now, dur, name, c_compute, nullptr));
        ++events;
        const int64_t layer = layers ? dur / layers : 0;
        for (int l = 0; l < layers; ++l) {
          const int64_t ld = static_cast<int64_t>(layer * 0.9 * factor("layer"));
          CHECK_OK(
              b.Complete(tr, now + l * layer, std::min(ld, layer), n_layer, c_compute, nullptr));
          ++events;
        }
        now += dur + kGap;
      }
      ready[static_cast<size_t>(r)] = now;
    }
    // Three allreduces: each rank arrives when ready; all leave together.
    for (int k = 0; k < 3; ++k) {
      int64_t last = 0;
      for (int64_t x : ready) last = std::max(last, x);
      const int64_t transfer = static_cast<int64_t>(20'000 + kBytes[k] / 10 * jitter(rng));
      ++seq;
      for (int r = 0; r < ranks; ++r) {
        EventArgs a;
        a.mask = EventArgs::kBytes | EventArgs::kComm | EventArgs::kSeq;
        a.bytes = kBytes[k];
        a.comm = 1;
        a.seq = seq;
        const int64_t arrive = ready[static_cast<size_t>(r)];
        CHECK_OK(b.Complete(track[static_cast<size_t>(r)], arrive, last + transfer - arrive, n_ar,
                            c_mpi, &a));
        ++events;
        ready[static_cast<size_t>(r)] = last + transfer + kGap;
      }
    }
    int64_t next = 0;
    for (int r = 0; r < ranks; ++r) {
      const double rf = (straggler.count(r) ? straggler[r] : 1.0) * step_factor;
      const int64_t dur = static_cast<int64_t>(kOpt * jitter(rng) * rf * factor("optimizer"));
      CHECK_OK(b.Complete(track[static_cast<size_t>(r)], ready[static_cast<size_t>(r)], dur, n_opt,
                          c_compute, nullptr));
      ++events;
      next = std::max(next, ready[static_cast<size_t>(r)] + dur + kGap);
    }
    step_start = next;
  }
  if (dropped > 0 && ranks > 1) {
    tw->AddStat("dropped", 1, dropped);
    tw->AddStat("torn_tails", 0, 2);
  }
  CHECK_OK(b.SaveState("gen"));
  CHECK_OK(tw->CommitBatch());
  std::printf("events %llu\n", static_cast<unsigned long long>(events));
  return 0;
}
