// The tracedb(1) manual page, written from the same CLI11 definitions that parse the arguments
// (`tracedb --help-man`), so that it cannot drift from the program: every subcommand, nested
// ones included, with its arguments and options, then the exit codes, the environment and the
// files. docs/tracedb.1 is its output, checked in (tests/shell_test.sh checks that the two are
// equal); the build writes it again into the build tree and `cmake --install` installs that
// one to share/man/man1.
// Thread safety: a pure function of `app`.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace tracedb::shell {

// roff (man(7) macros) for `app`, the fully set-up program.
std::string ManPage(const CLI::App& app);

// Adds the hidden flag `--help-man` to `app`: prints ManPage(app) on stdout and exits 0.
void AddManPageFlag(CLI::App* app);

}  // namespace tracedb::shell
