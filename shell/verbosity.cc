// The program-wide verbosity. See verbosity.h.
#include "shell/verbosity.h"

namespace tracedb::shell {
namespace {
Verbosity g_verbosity = Verbosity::kNormal;
}  // namespace

Verbosity GetVerbosity() { return g_verbosity; }
void SetVerbosity(Verbosity v) { g_verbosity = v; }

}  // namespace tracedb::shell
