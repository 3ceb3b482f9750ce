// `tracedb shards create DB... -o JOB.tdb`: writes a shard manifest listing trace databases of
// distinct ranks of one job (compacted independently: per node, per group of ranks), which every
// reader (query, shell, export, report, info, view, top) then opens as one database, reading the
// shards in place (engine/compact/shard_catalog.h). The ranks of the databases must not overlap.
// `tracedb shards list JOB.tdb` prints the shard files a manifest lists.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/compact/shard_catalog.h"
#include "engine/compact/shard_compact.h"
#include "engine/util/interrupt_cleanup.h"
#include "shell/commands.h"
#include "shell/verbosity.h"

namespace tracedb::shell {
namespace {

struct ShardsOptions {
  std::vector<std::string> dbs;
  std::string output;
  std::string manifest;
};

int RunCreate(const ShardsOptions& o) {
  // A manifest this command makes is removed whole on Ctrl-C/SIGTERM (an existing one is
  // refused by CreateManifest and never registered).
  engine::InterruptCleanup on_interrupt;
  if (::access(o.output.c_str(), F_OK) != 0) {
    on_interrupt = engine::InterruptCleanup(o.output, "tracedb shards create", true);
  }
  Status s = engine::CreateManifest(o.output, o.dbs);
  if (!s.ok()) {
    on_interrupt.Release();  // not written by this command (or not at all)
    std::fprintf(stderr, "tracedb shards create: %s\n", s.message().c_str());
    return kExitError;
  }
  // Built now, so that the first query does not pay for it and a bad file is reported here.
  auto sum = engine::RefreshCatalog(o.output);
  if (!sum.ok()) {
    std::fprintf(stderr, "tracedb shards create: %s\n", sum.status().message().c_str());
    return kExitError;
  }
  if (GetVerbosity() != Verbosity::kQuiet) {
    std::printf("%s: %d shards, %llu blocks, %llu events (catalog %s)\n", o.output.c_str(),
                sum->shards, static_cast<unsigned long long>(sum->total.blocks),
                static_cast<unsigned long long>(sum->total.rows),
                engine::CatalogPath(o.output).c_str());
  }
  return kExitOk;
}

int RunList(const ShardsOptions& o) {
  auto shards = engine::ReadManifest(o.manifest);
  if (!shards.ok()) {
    std::fprintf(stderr, "tracedb shards list: %s\n", shards.status().message().c_str());
    return kExitError;
  }
  for (const std::string& s : *shards) std::printf("%s\n", s.c_str());
  return kExitOk;
}

}  // namespace

void SetupShards(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ShardsOptions>();
  CLI::App* sub = app.add_subcommand(
      "shards", "Query several trace databases (distinct ranks of one job) as one");
  sub->require_subcommand(1);
  CLI::App* create = sub->add_subcommand(
      "create", "Write a manifest listing trace databases; readers open it as one database");
  create->add_option("dbs", o->dbs, "Trace databases (.tdb) holding disjoint ranks")
      ->required()
      ->check(CLI::ExistingFile);
  create->add_option("-o,--output", o->output, "The manifest to write (a new file)")->required();
  AddVerbosityFlags(create);
  create->callback([o, exit_code] { *exit_code = RunCreate(*o); });
  CLI::App* list = sub->add_subcommand("list", "Print the shard files a manifest lists");
  list->add_option("manifest", o->manifest, "Shard manifest")->required();
  list->callback([o, exit_code] { *exit_code = RunList(*o); });
}

}  // namespace tracedb::shell
