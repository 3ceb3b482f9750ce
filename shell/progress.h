// A progress line on stderr for the long commands (compact, import, export): one line rewritten in
// place with '\r' ("compact: file 3/8, 1,204,331 events, 48.0 MB of 120 MB, 31.2 MB/s, ETA 2 s"),
// cleared when the work ends, so that the summary that follows starts on a clean line.
//
// Shown only when stderr is a terminal and the program is not quiet (-q). TRACEDB_PROGRESS=1
// shows it on any stderr (tests, a terminal behind a pipe), TRACEDB_PROGRESS=0 never; -q wins
// over both. The first line waits for 0.5 s of work (a short command prints none) unless
// TRACEDB_PROGRESS=1; then it is rewritten at most every 0.25 s.
// Thread safety: one object per command, used from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tracedb::shell {

// What a command has done so far; a zero total means "not known" (no ETA from it).
struct ProgressState {
  uint64_t files_done = 0;   // files finished (or, for one file in progress, its 1-based index)
  uint64_t files_total = 0;  // 0: do not show files
  uint64_t events = 0;       // events (or rows) so far
  uint64_t bytes_done = 0;   // input bytes taken (import, compact) or output bytes (export)
  uint64_t bytes_total = 0;  // 0: unknown
  // Export knows its work in blocks rather than bytes: used for the ETA when bytes_total is 0.
  uint64_t units_done = 0;
  uint64_t units_total = 0;
};

class ProgressLine {
 public:
  // `label` starts the line ("compact", "import", "export"). Reads the verbosity and
  // TRACEDB_PROGRESS once, here.
  explicit ProgressLine(std::string label);
  ~ProgressLine() { Finish(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return enabled_; }

  // Rewrites the line when it is due (see above).
  void Update(const ProgressState& s);

  // Clears the line if one was printed. Idempotent; the destructor calls it.
  void Finish();

  // The line for `s` after `seconds` of work (no '\r'); exposed for tests.
  static std::string Render(const std::string& label, const ProgressState& s, double seconds);

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  bool enabled_ = false;
  bool forced_ = false;  // TRACEDB_PROGRESS=1
  bool shown_ = false;
  size_t last_width_ = 0;
  Clock::time_point start_, last_;
};

}  // namespace tracedb::shell
