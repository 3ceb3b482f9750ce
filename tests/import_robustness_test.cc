// Robustness of the JSON reader and the importers against damaged input: every trace cut at
// many offsets imports without error and keeps every complete record; thousands of random
// mutations of real and hand-written traces never crash, hang or break the reader's
// invariants. (The libFuzzer target query/import/json/json_fuzz.cc does the same open-ended when
// built with clang.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "engine/db/trace_writer.h"
#include "query/import/importer.h"
#include "query/import/json/byte_source.h"
#include "query/import/json/event_reader.h"
#include "tests/db_rows.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

namespace fs = std::filesystem;
using query::Importer;
using query::ImportResult;

// Thousands of small databases: on tmpfs when there is one, where fsync costs nothing.
class ScratchDir {
 public:
  ScratchDir() {
    std::error_code ec;
    if (fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0) {
      path_ = "/dev/shm/tracedb-import-test-" + std::to_string(::getpid()) + "-" +
              std::to_string(counter_++);
      fs::create_directories(path_, ec);
      if (!ec) return;
    }
    fallback_ = std::make_unique<TempDir>();
    path_ = fallback_->path();
  }
  ~ScratchDir() {
    if (!fallback_) RemoveTree(path_);
  }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  static inline int counter_ = 0;
  std::string path_;
  std::unique_ptr<TempDir> fallback_;
};

std::string Decompressed(const std::string& path) {
  auto src = query::json::ByteSource::Open(path);
  EXPECT_TRUE(src.ok());
  std::string out, buf(1 << 16, '\0');
  for (;;) {
    auto n = (*src)->Read(buf.data(), buf.size());
    EXPECT_TRUE(n.ok());
    if (!n.ok() || *n == 0) break;
    out.append(buf.data(), *n);
  }
  return out;
}

// Trace files to damage: the hand-written fixtures and the real ones (when present).
std::vector<std::string> SeedFiles() {
  std::vector<std::string> files;
  std::error_code ec;
  // The shared root is "" when absent (a failure under CI=true, tests/test_util.h).
  for (const std::string& root : {SourceRoot() + "/fixtures/import", SharedFixturePath()}) {
    if (root.empty()) continue;
    for (auto it = fs::recursive_directory_iterator(root, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      const std::string p = it->path().string();
      if (!it->is_regular_file()) continue;
      const bool json = p.size() > 5 && (p.ends_with(".json") || p.ends_with(".json.gz"));
      if (json && (p.find("/input/") != std::string::npos ||
                   p.find("/shared/fixtures/") != std::string::npos)) {
        files.push_back(p);
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The importer `tracedb import` would choose (chrome when none claims the damaged bytes).
Importer* DetectFor(const std::string& path, const std::string& content) {
  Importer* imp = query::DetectImporter(path, std::string_view(content).substr(0, 64 << 10));
  return imp != nullptr ? imp : query::FindImporter("chrome");
}

// Imports `bytes` (written to a file named like `name`) into a fresh database.
Status ImportBytes(const ScratchDir& dir, const std::string& bytes, const std::string& name,
                   Importer* imp, ImportResult* result, std::string* db_path = nullptr) {
  static int n = 0;
  const std::string sub = dir.Sub("case" + std::to_string(n++));
  fs::create_directories(sub);
  const std::string file = sub + "/" + fs::path(name).filename().string();
  WriteFile(file, bytes);
  const std::string db = sub + "/job.tdb";
  if (db_path) *db_path = db;
  auto w = engine::TraceWriter::Open(db);
  if (!w.ok()) return w.status();
  TRACEDB_RETURN_IF_ERROR((*w)->BeginBatch());
  query::ImportInput input;
  input.path = file;
  input.rank_hint = 0;
  TRACEDB_RETURN_IF_ERROR(imp->Import(input, w->get(), result));
  TRACEDB_RETURN_IF_ERROR((*w)->CommitBatch());
  fs::remove(file);
  return Status::Ok();
}

struct Record {
  uint64_t offset, size;
};

std::vector<Record> Records(const std::string& data, uint64_t* skipped) {
  query::json::EventReader r(query::json::ByteSource::FromString(data, "t.json"));
  std::vector<Record> out;
  query::json::TraceEvent ev;
  while (*r.Next(&ev)) out.push_back(Record{ev.offset, ev.size});
  *skipped = r.skipped();
  return out;
}

TEST(ImportRobustness, EveryCutKeepsEveryCompleteRecord) {
  std::mt19937 rng(5);
  ScratchDir dir;
  size_t files = 0;
  for (const std::string& path : SeedFiles()) {
    if (path.ends_with(".gz")) continue;  // cut gzip streams: see the next test
    SCOPED_TRACE(path);
    const std::string data = ReadFile(path);
    Importer* imp = DetectFor(path, data);
    ImportResult full;
    ASSERT_TRUE(ImportBytes(dir, data, path, imp, &full).ok());
    uint64_t bad = 0;
    const std::vector<Record> records = Records(data, &bad);
    // Offsets: record boundaries and their neighbours, plus random ones.
    std::set<size_t> cuts = {0, data.size()};
    for (const Record& r : records) {
      if (cuts.size() > 120) break;
      for (uint64_t k : {r.offset, r.offset + 1, r.offset + r.size - 1, r.offset + r.size}) {
        cuts.insert(std::min<size_t>(k, data.size()));
      }
    }
    while (cuts.size() < 160 && cuts.size() < data.size()) cuts.insert(rng() % data.size());
    uint64_t last_events = 0;
    for (size_t k : cuts) {
      ImportResult r;
      const Status s = ImportBytes(dir, data.substr(0, k), path, imp, &r);
      ASSERT_TRUE(s.ok()) << "cut at " << k << ": " << s.ToString();
      EXPECT_GE(r.events, last_events) << "cut at " << k;  // more bytes never lose a row
      EXPECT_LE(r.events, full.events) << "cut at " << k;
      EXPECT_LE(r.skipped, full.skipped) << "cut at " << k;
      last_events = r.events;
      if (bad == 0 && full.truncated_bytes == 0 && !records.empty() &&
          k >= records.front().offset && k <= records.back().offset + records.back().size) {
        // Exactly the bytes of the record the cut went through are counted as truncated (a cut
        // before or after the events, in the top-level object, counts the member it cut).
        uint64_t expect = 0;
        for (const Record& rec : records) {
          if (rec.offset < k && k < rec.offset + rec.size) expect = k - rec.offset;
        }
        EXPECT_EQ(r.truncated_bytes, expect) << "cut at " << k;
      }
    }
    EXPECT_EQ(last_events, full.events);
    ++files;
  }
  EXPECT_GE(files, 10u);
}

TEST(ImportRobustness, CutGzipStreamsImportWhatTheyHold) {
  ScratchDir dir;
  for (const std::string& path : SeedFiles()) {
    if (!path.ends_with(".gz")) continue;
    SCOPED_TRACE(path);
    const std::string data = ReadFile(path);
    Importer* imp = DetectFor(path, Decompressed(path));
    ImportResult full;
    ASSERT_TRUE(ImportBytes(dir, data, path, imp, &full).ok());
    uint64_t last = 0;
    for (int i = 1; i <= 12; ++i) {
      const size_t k = data.size() * i / 12;
      ImportResult r;
      const Status s = ImportBytes(dir, data.substr(0, k), path, imp, &r);
      ASSERT_TRUE(s.ok()) << "cut at " << k << ": " << s.ToString();
      EXPECT_GE(r.events, last);
      last = r.events;
      if (k < data.size()) {
        bool warned = false;
        for (const std::string& w : r.warnings) {
          warned |= w.find("gzip stream ends early") != std::string::npos;
        }
        EXPECT_TRUE(warned) << "cut at " << k;
      }
    }
    EXPECT_EQ(last, full.events);
  }
}

std::string Mutate(std::string s, std::mt19937& rng) {
  static const char kSpecial[] = "{}[]\",:\\0123456789.eE-+ \n\tu";
  const int n = 1 + static_cast<int>(rng() % 8);
  for (int i = 0; i < n && !s.empty(); ++i) {
    const size_t at = rng() % s.size();
    switch (rng() % 7) {
      case 0:
        s[at] = static_cast<char>(s[at] ^ (1u << (rng() % 8)));
        break;
      case 1:
        s[at] = kSpecial[rng() % (sizeof(kSpecial) - 1)];
        break;
      case 2:
        s.erase(at, 1 + rng() % 64);
        break;
      case 3: {
        const size_t len = std::min<size_t>(1 + rng() % 256, s.size() - at);
        s.insert(rng() % s.size(), s.substr(at, len));
        break;
      }
      case 4:
        s.insert(at, std::string(1 + rng() % 4, static_cast<char>(rng())));
        break;
      case 5:
        s.resize(at);
        break;
      default:
        s.insert(at, 1, kSpecial[rng() % (sizeof(kSpecial) - 1)]);
    }
  }
  return s;
}

TEST(ImportRobustness, RandomMutationsNeverBreakTheReader) {
  std::vector<std::pair<std::string, std::string>> seeds;  // path, content (first 16 KiB)
  for (const std::string& path : SeedFiles()) {
    seeds.emplace_back(path, Decompressed(path).substr(0, 16 << 10));
  }
  ASSERT_GE(seeds.size(), 10u);
  std::mt19937 rng(17);
  ScratchDir dir;
  const std::regex error_form("^t\\.json: byte offset ([0-9]+): .+");
  uint64_t imports = 0, skipped_total = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    const auto& [path, seed] = seeds[rng() % seeds.size()];
    const std::string data = Mutate(seed, rng);
    query::json::ReaderOptions o;
    o.chunk_bytes = 16 + rng() % 2048;
    o.max_record_bytes = 64 + rng() % 8192;
    query::json::EventReader r(query::json::ByteSource::FromString(data, "t.json"), o);
    query::json::TraceEvent ev;
    uint64_t events = 0, last_end = 0;
    for (;;) {
      auto more = r.Next(&ev);
      if (!more.ok()) {
        EXPECT_NE(more.status().message().find("t.json: byte offset "), std::string::npos)
            << more.status().message();
        break;
      }
      if (!*more) break;
      ++events;
      ASSERT_LE(ev.offset + ev.size, data.size());
      ASSERT_GE(ev.offset, last_end);
      ASSERT_EQ(data[ev.offset], '{');
      ASSERT_EQ(data[ev.offset + ev.size - 1], '}');
      last_end = ev.offset + ev.size;
      ASSERT_LE(events, data.size());
    }
    EXPECT_LE(r.truncated_bytes(), data.size());
    EXPECT_LE(r.skipped(), data.size());
    skipped_total += r.skipped();
    for (const std::string& e : r.errors()) {
      std::smatch m;
      ASSERT_TRUE(std::regex_match(e, m, error_form)) << e;
      EXPECT_LE(std::stoull(m[1]), data.size()) << e;
    }
    if (iter % 25 == 0) {
      // The whole importer on the damaged file: OK, or an error naming the file.
      Importer* imp = DetectFor(path, data);
      ImportResult result;
      std::string db;
      const Status s = ImportBytes(dir, data, path, imp, &result, &db);
      if (s.ok()) {
        EXPECT_EQ(ReadDbRows(db).size(), result.events);
      } else {
        EXPECT_NE(s.message().find(fs::path(path).filename().string()), std::string::npos)
            << s.ToString();
      }
      ++imports;
    }
  }
  EXPECT_GT(skipped_total, 0u);  // the mutations did produce bad records
  EXPECT_GT(imports, 100u);
}

TEST(ImportRobustness, DamagedGzipNeverCrashes) {
  std::mt19937 rng(23);
  int errors = 0;
  for (const std::string& path : SeedFiles()) {
    if (!path.ends_with(".gz")) continue;
    const std::string gz = ReadFile(path);
    for (int i = 0; i < 40; ++i) {
      std::string data = gz;
      for (int k = 0; k < 4; ++k) data[rng() % data.size()] ^= static_cast<char>(1 + rng() % 255);
      query::json::EventReader r(query::json::ByteSource::FromString(data, "t.json"));
      query::json::TraceEvent ev;
      for (;;) {
        auto more = r.Next(&ev);
        if (!more.ok()) {
          ++errors;
          EXPECT_NE(more.status().message().find("t.json: "), std::string::npos);
          break;
        }
        if (!*more) break;
      }
    }
  }
  if (SharedFixturePath().empty()) return;  // fails instead under CI=true (tests/test_util.h)
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace tracedb::testing
