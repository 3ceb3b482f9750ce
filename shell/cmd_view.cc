// `tracedb view JOB.tdb [--port N] [--open]`: serves a browser timeline of the database on
// 127.0.0.1 (view/view_server.h) and prints its URL, which carries a random token. Runs until
// interrupted (Ctrl-C) or, with --exit-after, for that many seconds (tests, benchmarks).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "shell/commands.h"
#include "view/view_server.h"

namespace tracedb::shell {
namespace {

struct ViewOptions {
  std::string path;
  int port = 0;
  bool open = false;
  double exit_after = 0;
};

std::atomic<bool> g_view_stop{false};

void OnViewSignal(int) { g_view_stop = true; }  // the watcher thread stops the server

extern "C" char** environ;

// --open: the URL carries the token, and a command line is readable by every local user
// (/proc/PID/cmdline). The browser is given instead a file only this user can read (0600, in
// $TMPDIR) whose page sends it on to the URL; the file is removed when the server stops.
// Returns the file's path ("" after printing why it could not be done).
std::string OpenInBrowser(const std::string& url) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string path = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/tracedb-view-XXXXXX.html";
  const int fd = ::mkstemps(path.data(), 5);  // 0600
  if (fd < 0) {
    std::fprintf(stderr, "tracedb view: cannot create %s: %s; open the URL above\n", path.c_str(),
                 std::strerror(errno));
    return "";
  }
  const std::string page =
      "<!doctype html><meta charset=\"utf-8\"><meta name=\"referrer\" "
      "content=\"no-referrer\"><title>tracedb view</title><script>"
      "location.replace(\"" +
      url + "\")</script><a href=\"" + url + "\">tracedb view</a>\n";
  const bool wrote = ::write(fd, page.data(), page.size()) == static_cast<ssize_t>(page.size());
  ::close(fd);
  if (!wrote) {
    ::unlink(path.c_str());
    std::fprintf(stderr, "tracedb view: cannot write %s; open the URL above\n", path.c_str());
    return "";
  }
  std::string prog = "xdg-open";
  char* argv[] = {prog.data(), path.data(), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, prog.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  if (rc != 0 || ::waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "tracedb view: could not open a browser (xdg-open); open the URL above\n");
  }
  return path;
}

int RunView(const ViewOptions& o) {
  if (::access(o.path.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "tracedb view: %s: cannot read the database\n", o.path.c_str());
    return kExitError;
  }
  view::ViewServerOptions so;
  so.db_path = o.path;
  so.port = o.port;
  auto server = view::ViewServer::Start(so);
  if (!server.ok()) {
    std::fprintf(stderr, "tracedb view: %s\n", server.status().message().c_str());
    return kExitError;
  }
  std::unique_ptr<view::ViewServer> s = std::move(*server);
  std::printf("tracedb view: serving %s\n  %s\n(Ctrl-C stops it)\n", o.path.c_str(),
              s->url().c_str());
  std::fflush(stdout);
  struct sigaction sa = {};
  sa.sa_handler = OnViewSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // Stops the server on SIGINT/SIGTERM or after --exit-after seconds; ends with the server.
  std::atomic<bool> done{false};
  std::thread watcher([&s, &done, secs = o.exit_after] {
    const auto start = std::chrono::steady_clock::now();
    while (!done) {
      const double ran =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (g_view_stop || (secs > 0 && ran >= secs)) {
        s->Stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  std::string redirect;
  std::thread opener;
  if (o.open) opener = std::thread([&redirect, url = s->url()] { redirect = OpenInBrowser(url); });
  const bool ok = s->Run();
  done = true;
  watcher.join();
  if (opener.joinable()) opener.join();
  if (!redirect.empty()) ::unlink(redirect.c_str());
  if (!ok) {
    std::fprintf(stderr, "tracedb view: the server stopped with an error\n");
    return kExitError;
  }
  return kExitOk;
}

}  // namespace

void SetupView(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<ViewOptions>();
  CLI::App* sub =
      app.add_subcommand("view", "Browse a trace database as a timeline in a web browser");
  sub->add_option("db", opts->path, "Trace database (.tdb)")->required();
  sub->add_option("--port", opts->port, "Port on 127.0.0.1 (default: a free one)")
      ->check(CLI::Range(0, 65535));
  sub->add_flag("--open", opts->open,
                "Open the URL in the default browser (xdg-open is given a 0600 file that leads "
                "there, never the token)");
  sub->add_option("--exit-after", opts->exit_after, "Stop after this many seconds")
      ->check(CLI::NonNegativeNumber);
  sub->callback([opts, exit_code] { *exit_code = RunView(*opts); });
}

}  // namespace tracedb::shell
