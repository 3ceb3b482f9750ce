// `tracedb info PATH [--json]`: what a trace directory holds (ranks, events, drops, bytes,
// damage). Later versions also accept a trace database.
#include <cstdio>
#include <memory>
#include <string>

#include "engine/segment_dir.h"
#include "shell/commands.h"
#include "shell/format.h"
#include "shell/json_out.h"

namespace tracedb::shell {
namespace {

struct InfoOptions {
  std::string path;
  bool json = false;
};

void PrintDirJson(const std::string& path, const engine::DirSummary& s) {
  std::string out = "{";
  out += "\"path\": " + JsonString(path);
  out += ", \"kind\": \"segments\"";
  out += ", \"ranks\": " + std::to_string(s.ranks);
  out += ", \"events\": " + std::to_string(s.events);
  out += ", \"dropped\": " + std::to_string(s.dropped);
  out += ", \"bytes\": " + std::to_string(s.bytes);
  out += ", \"files\": " + std::to_string(s.files);
  out += ", \"steps\": " + std::to_string(s.steps);
  out += ", \"corrupt_blocks\": " + std::to_string(s.corrupt_blocks);
  out += ", \"torn_tails\": " + std::to_string(s.torn_tails);
  out += ", \"open_files\": " + std::to_string(s.open_files);
  out += ", \"unreadable_files\": " + std::to_string(s.unreadable_files);
  out += ", \"per_rank\": [";
  bool first = true;
  for (const auto& [rank, r] : s.per_rank) {
    if (!first) out += ", ";
    first = false;
    out += "{\"rank\": " + std::to_string(rank) + ", \"host\": " + JsonString(r.host) +
           ", \"files\": " + std::to_string(r.files) + ", \"events\": " + std::to_string(r.events) +
           ", \"dropped\": " + std::to_string(r.dropped) +
           ", \"bytes\": " + std::to_string(r.bytes) +
           ", \"span_ns\": " + std::to_string(r.last_ts - r.first_ts) +
           ", \"sync_points\": " + std::to_string(r.sync_points) + "}";
  }
  out += "], \"problems\": [";
  for (size_t i = 0; i < s.problems.size(); ++i) {
    if (i) out += ", ";
    out += JsonString(s.problems[i]);
  }
  out += "]}\n";
  std::fputs(out.c_str(), stdout);
}

void PrintDirText(const std::string& path, const engine::DirSummary& s) {
  std::printf("trace directory %s\n", path.c_str());
  std::printf("  ranks %llu, segment files %llu, events %s, dropped %s, %s on disk",
              static_cast<unsigned long long>(s.ranks), static_cast<unsigned long long>(s.files),
              WithCommas(s.events).c_str(), WithCommas(s.dropped).c_str(),
              HumanBytes(static_cast<double>(s.bytes)).c_str());
  if (s.events > 0) {
    std::printf(" (%.2f bytes/event)",
                static_cast<double>(s.bytes) / static_cast<double>(s.events));
  }
  std::printf("\n");
  if (s.steps > 0) std::printf("  step markers %s\n", WithCommas(s.steps).c_str());
  std::printf("\n  %6s  %-20s %6s %14s %10s %12s %12s\n", "rank", "host", "files", "events",
              "dropped", "bytes", "span");
  for (const auto& [rank, r] : s.per_rank) {
    std::printf("  %6d  %-20.20s %6llu %14s %10s %12s %12s\n", rank, r.host.c_str(),
                static_cast<unsigned long long>(r.files), WithCommas(r.events).c_str(),
                WithCommas(r.dropped).c_str(), HumanBytes(static_cast<double>(r.bytes)).c_str(),
                HumanDuration(static_cast<double>(r.last_ts - r.first_ts)).c_str());
  }
  if (s.corrupt_blocks || s.torn_tails || s.unreadable_files || s.open_files) {
    std::printf(
        "\n  damage: %llu corrupt blocks skipped, %llu torn tails (%llu bytes), %llu "
        "unreadable files, %llu files not closed\n",
        static_cast<unsigned long long>(s.corrupt_blocks),
        static_cast<unsigned long long>(s.torn_tails),
        static_cast<unsigned long long>(s.torn_bytes),
        static_cast<unsigned long long>(s.unreadable_files),
        static_cast<unsigned long long>(s.open_files));
  }
  for (const std::string& p : s.problems) std::printf("  problem: %s\n", p.c_str());
}

int RunInfo(const InfoOptions& o) {
  StatusOr<engine::DirSummary> s = engine::SummarizeSegmentDir(o.path);
  if (!s.ok()) {
    std::fprintf(stderr, "tracedb info: %s\n", s.status().message().c_str());
    return kExitError;
  }
  if (o.json) {
    PrintDirJson(o.path, *s);
  } else {
    PrintDirText(o.path, *s);
  }
  return kExitOk;
}

}  // namespace

void SetupInfo(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<InfoOptions>();
  CLI::App* sub = app.add_subcommand("info", "Summarise a trace directory");
  sub->add_option("path", opts->path, "Trace directory (DIR with rank-*/ subdirectories)")
      ->required();
  sub->add_flag("--json", opts->json, "Print JSON");
  sub->callback([opts, exit_code] { *exit_code = RunInfo(*opts); });
}

}  // namespace tracedb::shell
