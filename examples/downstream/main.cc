// A downstream program that records with the installed tracedb (its C++ wrapper over the C ABI).
// Usage: downstream DIR STEPS
// Records STEPS "step" spans on rank 0, each holding one "compute" span and one "allreduce" span
// with a byte count, then prints "spans N records R dropped D": the spans it made, and the
// recorder's counters (records written to segments: a begin, an end, a step mark each; dropped).
#include <cstdio>
#include <cstdlib>

#include <tracedb/recorder.hpp>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s DIR STEPS\n", argv[0]);
    return 2;
  }
  const long steps = std::strtol(argv[2], nullptr, 10);
  if (tracedb_start(argv[1]) != TRACEDB_OK) {
    std::fprintf(stderr, "%s: cannot record into %s\n", argv[0], argv[1]);
    return 1;
  }
  const tracedb::Name step_name("step"), compute("compute"), allreduce("allreduce");
  volatile double sink = 0;
  for (long s = 0; s < steps; ++s) {
    tracedb::Step(s);
    tracedb::Span step(step_name, tracedb::Category::kStep);
    {
      tracedb::Span c(compute, tracedb::Category::kCompute);
      for (int i = 0; i < 1000; ++i) sink = sink + i * 0.5;
    }
    tracedb::Args args;
    args.Bytes(4096 * (s + 1));
    tracedb::Span a(allreduce, tracedb::Category::kComm, 0, &args);
  }
  if (tracedb_stop() != TRACEDB_OK) {
    std::fprintf(stderr, "%s: writing %s failed\n", argv[0], argv[1]);
    return 1;
  }
  tracedb_counters counters;
  tracedb_get_counters(&counters);
  std::printf("spans %ld records %llu dropped %llu\n", steps * 3,
              static_cast<unsigned long long>(counters.written),
              static_cast<unsigned long long>(counters.dropped));
  return 0;
}
