// `tracedb import FILE|DIR... -o JOB.tdb [--input-format F] [--rank N]`: reads traces written by
// other tools (Horovod, BytePS, Bluefog, PyTorch profiler, any Chrome JSON; mpitrace and mpiP once
// their importers are registered) into one trace database. Each input file is one batch (one
// SQLite transaction), so a failure keeps the files imported before it. Formats are detected from
// the first 64 KiB of content (decompressed); a directory is a BytePS trace dir or else every
// regular file in it, in name order. Importers: docs/importers.md.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/db/trace_writer.h"
#include "engine/util/atomic_file.h"
#include "engine/util/interrupt_cleanup.h"
#include "query/import/byteps/byteps_importer.h"
#include "query/import/import_common.h"
#include "query/import/importer.h"
#include "query/import/job_check.h"
#include "query/import/json/byte_source.h"
#include "shell/commands.h"
#include "shell/format.h"
#include "shell/progress.h"
#include "shell/verbosity.h"

namespace tracedb::shell {
namespace {

constexpr size_t kHeadBytes = 64 << 10;
constexpr const char* kFormats[] = {"chrome", "horovod",  "byteps", "bluefog",
                                    "kineto", "mpitrace", "mpip"};

struct ImportOptions {
  std::vector<std::string> inputs;
  std::string output;
  std::string format = "auto";  // --input-format
  std::string old_format;       // --format: the deprecated name of --input-format
  int rank = -1;
  bool merge = false;     // inputs of another job go into the same ranks anyway
  bool separate = false;  // inputs of another job go into a database of their own
};

// One input after directories were expanded.
struct Item {
  std::string path;
  query::Importer* importer = nullptr;  // nullptr: detect
  int32_t rank_hint = -1;
};

struct Done {
  std::string path;
  std::string format;
  std::string output;  // the database it went into
  query::ImportResult result;
};

bool KnownFormat(const std::string& f) {
  for (const char* k : kFormats) {
    if (f == k) return true;
  }
  return false;
}

// The importer that claims `path` with the highest score, or an error saying why none does.
StatusOr<query::Importer*> DetectFormat(const std::string& path, bool* empty) {
  *empty = false;
  std::string head;
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    TRACEDB_ASSIGN_OR_RETURN(head, query::json::ReadHead(path, kHeadBytes));
    // Nothing at all, or a whole file without a single record ("[\n": a Horovod timeline that
    // recorded nothing; "[]", "{}"): there is nothing to import, and no format to tell.
    const size_t first = head.find_first_not_of(" \t\r\n");
    if (first == std::string::npos ||
        (head.size() < kHeadBytes && (head[first] == '[' || head[first] == '{') &&
         head.find('{', first + 1) == std::string::npos)) {
      *empty = true;
      return static_cast<query::Importer*>(nullptr);
    }
  }
  query::Importer* best = query::DetectImporter(path, head);
  if (best == nullptr) {
    return Status::InvalidArgument(path + ": not a trace format tracedb can import " +
                                   "(name one with --input-format)");
  }
  return best;
}

// Expands directories; errors for inputs that do not exist.
Status Expand(const ImportOptions& o, query::Importer* forced, std::vector<Item>* items) {
  for (const std::string& in : o.inputs) {
    struct stat st;
    if (::stat(in.c_str(), &st) != 0) return Status::FromErrno(in, errno);
    if (!S_ISDIR(st.st_mode)) {
      items->push_back(Item{in, forced, -1});
      continue;
    }
    const bool byteps_dir = !query::BytepsTraceFiles(in).empty();
    if (byteps_dir && (forced == nullptr || std::string(forced->name()) == "byteps")) {
      items->push_back(Item{in, query::FindImporter("byteps"), -1});
      continue;
    }
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(in, ec)) {
      if (e.is_regular_file(ec)) files.push_back(e.path().string());
    }
    if (ec) return Status::FromErrno(in, ec.value());
    std::sort(files.begin(), files.end());
    if (files.empty()) return Status::InvalidArgument(in + ": no files in this directory");
    for (std::string& f : files) items->push_back(Item{std::move(f), forced, -1});
  }
  return Status::Ok();
}

void PrintSummary(const std::vector<Done>& done) {
  if (done.empty() || GetVerbosity() == Verbosity::kQuiet) return;
  std::printf("%-40s %-8s %5s %12s %8s %10s\n", "file", "format", "rank", "events", "skipped",
              "truncated");
  for (const Done& d : done) {
    const query::ImportResult& r = d.result;
    std::string name = d.path;
    if (name.size() > 40) name = "…" + name.substr(name.size() - 39);
    std::printf("%-40s %-8s %5s %12s %8s %10s\n", name.c_str(), d.format.c_str(),
                r.rank >= 0 ? std::to_string(r.rank).c_str() : "*", WithCommas(r.events).c_str(),
                WithCommas(r.skipped).c_str(),
                HumanBytes(static_cast<double>(r.truncated_bytes)).c_str());
    for (const std::string& w : r.warnings) std::printf("    warning: %s\n", w.c_str());
  }
  // One line per output database, in the order they were first used.
  std::vector<std::string> outputs;
  for (const Done& d : done) {
    if (std::find(outputs.begin(), outputs.end(), d.output) == outputs.end()) {
      outputs.push_back(d.output);
    }
  }
  // Said per table: a profile (mpitrace, mpiP) adds rows to the MPI profile tables and no
  // timeline event, and "imported 81 events" would send the reader to an empty `events`.
  for (const std::string& output : outputs) {
    std::vector<std::string> tables;
    for (const Done& d : done) {
      if (d.output == output &&
          std::find(tables.begin(), tables.end(), d.result.rows_table) == tables.end()) {
        tables.push_back(d.result.rows_table);
      }
    }
    for (const std::string& table : tables) {
      uint64_t rows = 0;
      size_t files = 0;
      for (const Done& d : done) {
        if (d.output != output || d.result.rows_table != table) continue;
        rows += d.result.events;
        ++files;
      }
      if (table == "events") {
        std::printf("imported %s events from %zu file%s into %s\n", WithCommas(rows).c_str(), files,
                    files == 1 ? "" : "s", output.c_str());
      } else {
        // The tables' rows as the database now holds them (a rank's row is written once per
        // place the file states it, so the importer's count is of writes, not rows).
        std::string held;
        auto db = engine::Db::Open(output, engine::Db::Mode::kReadOnly);
        for (size_t b = 0; db.ok() && b < table.size();) {
          size_t e = table.find(", ", b);
          if (e == std::string::npos) e = table.size();
          const std::string t = table.substr(b, e - b);
          auto n = (*db)->QueryInt("SELECT count(*) FROM " + t);
          if (n.ok()) held += (held.empty() ? "" : ", ") + t + " " + WithCommas(*n);
          b = e + 2;
        }
        std::printf(
            "imported an MPI profile from %zu file%s into %s: no timeline events; "
            "its tables hold %s rows (tracedb report mpi %s)\n",
            files, files == 1 ? "" : "s", output.c_str(), held.c_str(), output.c_str());
        (void)rows;
      }
    }
  }
}

// One output database.
struct Output {
  std::string path;
  bool existed = false;  // before this command
  // A database this command creates is removed whole on Ctrl-C/SIGTERM (a partial import).
  engine::InterruptCleanup on_interrupt;
  std::unique_ptr<engine::TraceWriter> writer;
  uint64_t imported = 0;  // inputs committed into it
  Done last;              // the input ImportInto() committed last

  // (Re)opens the writer: dropping a writer rolls its open batch back.
  Status Reopen() {
    writer.reset();
    TRACEDB_ASSIGN_OR_RETURN(writer, engine::TraceWriter::Open(path));
    return Status::Ok();
  }
};

// "job.tdb", n -> "job-n.tdb" (the n-th job kept apart by --separate).
std::string SeparatePath(const std::string& path, size_t n) {
  const std::filesystem::path p(path);
  return (p.parent_path() / (p.stem().string() + "-" + std::to_string(n) + p.extension().string()))
      .string();
}

enum class Attempt { kDone, kFailed, kOtherJob };

// Imports one input into `out` in a batch of its own; commits it unless it fails, skips every
// record, or (without `merge`) is not of the job already in `out`.
// The progress of the whole command: the files before this one, and this one's bytes.
struct ImportProgress {
  ProgressLine line{"import"};
  ProgressState state;
  uint64_t bytes_before = 0;  // input bytes of the files done
};

Attempt ImportInto(Output* out, const Item& it, query::Importer* imp, const ImportOptions& o,
                   ImportProgress* progress) {
  auto before = query::SnapshotJob(out->writer->db());
  if (!before.ok()) {
    std::fprintf(stderr, "tracedb import: %s\n", before.status().message().c_str());
    return Attempt::kFailed;
  }
  const auto t0 = std::chrono::steady_clock::now();
  query::ImportInput input;
  input.path = it.path;
  input.rank_hint = it.rank_hint;
  input.progress = [progress](uint64_t done, uint64_t) {
    progress->state.bytes_done = progress->bytes_before + done;
    progress->line.Update(progress->state);
  };
  progress->line.Update(progress->state);  // this file starts
  query::ImportResult result;
  Status s = out->writer->BeginBatch();
  if (s.ok()) s = imp->Import(input, out->writer.get(), &result);
  // Every record skipped: the wrong format (a forced --format), not an empty trace.
  if (s.ok() && result.events == 0 && result.skipped > 0) {
    s = Status::InvalidArgument(
        "all " + WithCommas(result.skipped) + " records skipped, none imported" +
        (it.importer != nullptr ? " (is --input-format " + std::string(imp->name()) + " right?)"
                                : ""));
  }
  bool other_job = false;
  if (s.ok() && !o.merge) {
    s = query::CheckSameJob(*before, it.path, imp->name(), result);
    other_job = !s.ok();
  }
  if (s.ok()) s = out->writer->CommitBatch();
  if (!s.ok()) {
    progress->line.Finish();
    if (other_job && o.separate) {
      std::fprintf(stderr, "tracedb import: %s: another job than %s's, kept apart\n",
                   it.path.c_str(), out->path.c_str());
    } else {
      std::fprintf(stderr, "tracedb import: %s (as %s): %s\n", it.path.c_str(), imp->name(),
                   s.message().c_str());
    }
    // Dropping the writer rolls the file's batch back; the next file starts afresh from what
    // is committed.
    if (Status r = out->Reopen(); !r.ok()) {
      std::fprintf(stderr, "tracedb import: %s\n", r.message().c_str());
      return Attempt::kFailed;
    }
    return other_job ? Attempt::kOtherJob : Attempt::kFailed;
  }
  if (result.skipped > 0) {
    progress->line.Finish();
    std::fprintf(stderr, "tracedb import: warning: %s (as %s): %s records skipped\n",
                 it.path.c_str(), imp->name(), WithCommas(result.skipped).c_str());
  }
  progress->state.events += result.events;
  Verbose("import", "%s: %s%s, %s events, %s skipped, into %s in %.3f s", it.path.c_str(),
          imp->name(), it.importer != nullptr ? "" : " (detected)",
          WithCommas(result.events).c_str(), WithCommas(result.skipped).c_str(), out->path.c_str(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  out->imported++;
  out->last = Done{it.path, imp->name(), out->path, std::move(result)};
  return Attempt::kDone;
}

int RunImport(ImportOptions o) {
  if (!o.old_format.empty()) {
    // Kept so that scripts written before --input-format still run; -f/--format names an
    // output format in every other subcommand.
    if (o.format != "auto" && o.format != o.old_format) {
      std::fprintf(stderr, "tracedb import: --format %s and --input-format %s disagree\n",
                   o.old_format.c_str(), o.format.c_str());
      return kExitUsage;
    }
    o.format = o.old_format;
    if (GetVerbosity() != Verbosity::kQuiet) {
      std::fprintf(stderr,
                   "tracedb import: note: --format is deprecated here, use --input-format %s\n",
                   o.format.c_str());
    }
  }
  query::Importer* forced = nullptr;
  if (o.format != "auto") {
    forced = query::FindImporter(o.format);
    if (forced == nullptr) {
      std::fprintf(stderr, "tracedb import: %s format '%s'\n",
                   KnownFormat(o.format) ? "this build has no importer for the" : "unknown",
                   o.format.c_str());
      return kExitUsage;
    }
  }
  std::vector<Item> items;
  if (Status s = Expand(o, forced, &items); !s.ok()) {
    std::fprintf(stderr, "tracedb import: %s\n", s.message().c_str());
    return kExitError;
  }
  if (o.rank >= 0 && items.size() != 1) {
    std::fprintf(stderr, "tracedb import: --rank names the rank of one input file, not %zu\n",
                 items.size());
    return kExitUsage;
  }
  // Rank hints: --rank, else the file name's number, else the input order.
  for (size_t i = 0; i < items.size(); ++i) {
    Item& it = items[i];
    std::error_code ec;
    if (std::filesystem::is_directory(it.path, ec)) continue;  // a BytePS dir names its ranks
    it.rank_hint = o.rank >= 0 ? o.rank : query::RankFromFileName(it.path);
    if (it.rank_hint < 0) it.rank_hint = static_cast<int32_t>(i);
  }

  // Outputs: o.output, then (with --separate) one more database per job that does not fit the
  // ones before: JOB-2.tdb, JOB-3.tdb, ...
  ImportProgress progress;
  progress.state.files_total = items.size();
  for (const Item& it : items) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(it.path, ec);  // 0 for a BytePS directory
    if (!ec) progress.state.bytes_total += size;
  }
  std::vector<Output> outs;
  std::vector<Done> done;
  int failures = 0;
  bool skipped_already = false;  // an input already imported (not a failure)
  uint64_t bytes_before = 0;     // input bytes of the items before this one
  for (const Item& it : items) {
    progress.state.files_done++;
    progress.bytes_before = bytes_before;
    progress.state.bytes_done = bytes_before;
    {
      std::error_code ec;
      const auto size = std::filesystem::file_size(it.path, ec);
      if (!ec) bytes_before += size;
    }
    query::Importer* imp = it.importer;
    if (imp == nullptr) {
      bool empty = false;
      auto detected = DetectFormat(it.path, &empty);
      if (!detected.ok()) {
        progress.line.Finish();
        std::fprintf(stderr, "tracedb import: %s\n", detected.status().message().c_str());
        ++failures;
        continue;
      }
      if (empty) {
        progress.line.Finish();
        std::fprintf(stderr, "tracedb import: %s: no events, nothing to import\n", it.path.c_str());
        continue;
      }
      imp = *detected;
    }
    for (size_t k = 0;; ++k) {
      if (k == outs.size()) {
        Output out;
        out.path = k == 0 ? o.output : SeparatePath(o.output, k + 1);
        std::error_code ec;
        out.existed = std::filesystem::exists(out.path, ec);
        if (!out.existed) {
          out.on_interrupt = engine::InterruptCleanup(out.path, "tracedb import", true);
        }
        if (Status s = out.Reopen(); !s.ok()) {
          progress.line.Finish();
          std::fprintf(stderr, "tracedb import: %s\n", s.message().c_str());
          PrintSummary(done);
          return kExitError;
        }
        outs.push_back(std::move(out));
      }
      Output& out = outs[k];
      auto already = query::AlreadyImported(out.writer.get(), it.path);
      if (already.ok() && *already) {
        progress.line.Finish();
        std::fprintf(stderr, "tracedb import: %s: already in %s, skipped\n", it.path.c_str(),
                     out.path.c_str());
        skipped_already = true;
        break;
      }
      const Attempt a = ImportInto(&out, it, imp, o, &progress);
      if (a == Attempt::kDone) {
        done.push_back(std::move(out.last));
        break;
      }
      if (a == Attempt::kOtherJob && o.separate) continue;  // try the next database
      ++failures;
      if (!out.writer) {
        PrintSummary(done);
        return kExitError;
      }
      break;
    }
  }
  progress.line.Finish();
  PrintSummary(done);
  // A database this command created and put nothing into is removed again.
  for (Output& out : outs) {
    if (out.imported > 0 || out.existed) continue;
    out.writer.reset();
    engine::RemoveDbFiles(out.path);
  }
  if (done.empty() && !skipped_already) {
    std::error_code ec;
    std::fprintf(stderr, "tracedb import: nothing imported; %s %s\n", o.output.c_str(),
                 std::filesystem::exists(o.output, ec) ? "unchanged" : "not created");
    return kExitError;
  }
  return failures > 0 ? kExitError : kExitOk;
}

}  // namespace

void SetupImport(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<ImportOptions>();
  CLI::App* sub = app.add_subcommand(
      "import", "Import Horovod, BytePS, Bluefog, PyTorch-profiler or Chrome JSON traces");
  sub->add_option("inputs", opts->inputs,
                  "Trace files (.json, .json.gz) or directories (a BytePS trace dir, or every "
                  "file in it)")
      ->required();
  sub->add_option("-o,--output", opts->output, "Trace database to create or append to")->required();
  sub->add_option("--input-format", opts->format,
                  "auto (default: detect from content), chrome, horovod, byteps, bluefog, "
                  "kineto, mpitrace or mpip");
  sub->add_option("--format", opts->old_format,
                  "Deprecated: the old name of --input-format (prints a note)");
  CLI::Option* merge =
      sub->add_flag("--merge", opts->merge,
                    "Import inputs that look like another job (same rank from another file of the "
                    "format, another world size or mpitrace job id) into the same ranks anyway");
  sub->add_flag("--separate", opts->separate,
                "Put each such job in a database of its own: JOB-2.tdb, JOB-3.tdb, ...")
      ->excludes(merge);
  sub->add_option("--rank", opts->rank, "Rank of the one input file when its content does not say")
      ->check(CLI::NonNegativeNumber);
  AddVerbosityFlags(sub);
  sub->callback([opts, exit_code] { *exit_code = RunImport(*opts); });
}

}  // namespace tracedb::shell
