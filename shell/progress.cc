// The progress line of long commands. See progress.h.
#include "shell/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "shell/format.h"
#include "shell/verbosity.h"

namespace tracedb::shell {
namespace {

constexpr double kFirstAfterS = 0.5;  // a shorter command prints no progress at all
constexpr double kEveryS = 0.25;      // the line is rewritten at most this often

}  // namespace

ProgressLine::ProgressLine(std::string label)
    : label_(std::move(label)), start_(Clock::now()), last_(start_) {
  const char* env = std::getenv("TRACEDB_PROGRESS");
  forced_ = env != nullptr && std::strcmp(env, "1") == 0;
  const bool off = env != nullptr && std::strcmp(env, "0") == 0;
  enabled_ =
      GetVerbosity() != Verbosity::kQuiet && !off && (forced_ || ::isatty(STDERR_FILENO) != 0);
}

std::string ProgressLine::Render(const std::string& label, const ProgressState& s, double seconds) {
  std::string line = label + ":";
  if (s.files_total > 0) {
    line += " file " + std::to_string(s.files_done) + "/" + std::to_string(s.files_total) + ",";
  }
  line += " " + WithCommas(s.events) + " events";
  if (s.bytes_done > 0 || s.bytes_total > 0) {
    line += ", " + HumanBytes(static_cast<double>(s.bytes_done));
    if (s.bytes_total > 0) line += " of " + HumanBytes(static_cast<double>(s.bytes_total));
  }
  if (seconds > 0) {
    if (s.bytes_done > 0) {
      line += ", " + HumanBytes(static_cast<double>(s.bytes_done) / seconds) + "/s";
    } else {
      line += ", " + WithCommas(static_cast<uint64_t>(static_cast<double>(s.events) / seconds)) +
              " events/s";
    }
  }
  // ETA from the bytes when their total is known, else from the units (export's blocks).
  double done = 0, total = 0;
  if (s.bytes_total > 0) {
    done = static_cast<double>(s.bytes_done);
    total = static_cast<double>(s.bytes_total);
  } else if (s.units_total > 0) {
    done = static_cast<double>(s.units_done);
    total = static_cast<double>(s.units_total);
  }
  if (seconds > 0 && done > 0 && total > done) {
    const double left_s = seconds * (total - done) / done;
    line += ", ETA " + HumanDuration(left_s * 1e9);
  }
  return line;
}

void ProgressLine::Update(const ProgressState& s) {
  if (!enabled_) return;
  const Clock::time_point now = Clock::now();
  const double since_start = std::chrono::duration<double>(now - start_).count();
  if (!forced_ && since_start < kFirstAfterS) return;
  if (shown_ && std::chrono::duration<double>(now - last_).count() < kEveryS) return;
  last_ = now;
  const std::string line = Render(label_, s, since_start);
  // Pad over the tail of a longer previous line.
  const size_t pad = last_width_ > line.size() ? last_width_ - line.size() : 0;
  std::fprintf(stderr, "\r%s%*s", line.c_str(), static_cast<int>(pad), "");
  std::fflush(stderr);
  last_width_ = line.size();
  shown_ = true;
}

void ProgressLine::Finish() {
  if (!shown_) return;
  std::fprintf(stderr, "\r%*s\r", static_cast<int>(last_width_), "");
  std::fflush(stderr);
  shown_ = false;
  last_width_ = 0;
}

}  // namespace tracedb::shell
