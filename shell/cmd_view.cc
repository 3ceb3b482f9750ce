// `tracedb view JOB.tdb [--port N] [--open]`: serves a browser timeline of the database on
// 127.0.0.1 (view/view_server.h) and prints its URL, which carries a random token. Runs until
// interrupted (Ctrl-C) or, with --exit-after, for that many seconds (tests, benchmarks).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
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
    std::fprintf(stderr, "tracedb view: %s\n", server.status().ToString().c_str());
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
  if (o.open) {
    const std::string cmd = "xdg-open '" + s->url() + "' >/dev/null 2>&1 &";
    if (std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr, "tracedb view: could not open a browser; open the URL above\n");
    }
  }
  const bool ok = s->Run();
  done = true;
  watcher.join();
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
  sub->add_flag("--open", opts->open, "Open the URL in the default browser (xdg-open)");
  sub->add_option("--exit-after", opts->exit_after, "Stop after this many seconds")
      ->check(CLI::NonNegativeNumber);
  sub->callback([opts, exit_code] { *exit_code = RunView(*opts); });
}

}  // namespace tracedb::shell
