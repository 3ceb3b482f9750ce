// A small trace database for the `tracedb view` tests (tests/view_*): two ranks on two hosts,
// kViewSteps steps of kViewStepNs each. Per step on each rank's "main" thread: a `step` span
// (90% of the step) holding `forward` (with 20 tiny `kernel` spans inside) and `backward`, and
// an instant `mark`; on its "comm" lane an `MPI_Allreduce` (seq = step) and a matched message
// (rank 0 `MPI_Send` -> rank 1 `MPI_Recv`); on a counter track `loss` and `mem`. Step markers.
#pragma once

#include <cstdint>
#include <string>

namespace tracedb::testing {

inline constexpr int64_t kViewEpoch = 1700000000000000000;
inline constexpr int kViewSteps = 2000;
inline constexpr int64_t kViewStepNs = 100000;

// Writes the database at `path` (with TraceWriter/TraceBuilder). Fails the calling test on error.
void WriteViewFixture(const std::string& path);

}  // namespace tracedb::testing
