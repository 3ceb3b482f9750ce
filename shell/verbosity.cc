// The program-wide verbosity. See verbosity.h.
#include "shell/verbosity.h"

#include <cstdarg>
#include <cstdio>

namespace tracedb::shell {
namespace {
Verbosity g_verbosity = Verbosity::kNormal;
bool g_requested = false;  // a -q or -v was given

void Request(Verbosity v) {
  if (g_requested && g_verbosity != v) {
    throw CLI::ValidationError("-q and -v exclude each other");
  }
  g_requested = true;
  g_verbosity = v;
}
}  // namespace

Verbosity GetVerbosity() { return g_verbosity; }
void SetVerbosity(Verbosity v) { g_verbosity = v; }

void AddVerbosityFlags(CLI::App* app) {
  app->add_flag_callback(
      "-q,--quiet", [] { Request(Verbosity::kQuiet); },
      "Print nothing but results and errors (no summary, no progress)");
  app->add_flag_callback(
      "-v,--verbose", [] { Request(Verbosity::kVerbose); },
      "Say what is being done, on stderr: what was read, counts per file, timings");
}

void Verbose(const char* sub, const char* fmt, ...) {
  if (g_verbosity != Verbosity::kVerbose) return;
  std::fprintf(stderr, "tracedb %s: ", sub);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
}

}  // namespace tracedb::shell
