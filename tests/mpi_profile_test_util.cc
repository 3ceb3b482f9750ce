// Test helpers for the MPI text-profile importers. See mpi_profile_test_util.h.
// Thread safety: test code, one thread.
#include "tests/mpi_profile_test_util.h"

#include "query/export/csv_text.h"

#include "tests/test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <random>

namespace tracedb::testing {

std::string SharedFixtureDir(std::string_view format) {
  // Fails the test under CI=true when absent (tests/test_util.h).
  return SharedFixturePath(std::string(format));
}

std::vector<std::string> ListFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_regular_file()) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

ProfileDb::ProfileDb(const std::string& path) {
  auto w = engine::TraceWriter::Open(path);
  if (!w.ok()) {
    ADD_FAILURE() << w.status().ToString();
    return;
  }
  writer_ = std::move(w).value();
}

ImportOutcome ProfileDb::Import(query::Importer* importer, const std::string& path,
                                int32_t rank_hint) {
  ImportOutcome o;
  Status s = writer_->BeginBatch();
  if (!s.ok()) {
    o.status = s;
    return o;
  }
  query::ImportInput in;
  in.path = path;
  in.rank_hint = rank_hint;
  o.status = importer->Import(in, writer_.get(), &o.result);
  // A failed import writes nothing (the importers parse everything before writing), so the
  // batch is committed either way; a real caller may roll it back instead.
  s = writer_->CommitBatch();
  if (!s.ok()) ADD_FAILURE() << s.ToString();
  return o;
}

ImportOutcome ProfileDb::ImportText(const TextImportFn& fn, std::string_view path,
                                    std::string_view text) {
  ImportOutcome o;
  Status s = writer_->BeginBatch();
  if (!s.ok()) {
    o.status = s;
    return o;
  }
  o.status = fn(path, text, writer_.get(), &o.result);
  s = writer_->CommitBatch();
  if (!s.ok()) ADD_FAILURE() << s.ToString();
  return o;
}

namespace {

std::string CsvField(std::string s, const std::string& strip) {
  if (!strip.empty()) {
    for (size_t at = s.find(strip); at != std::string::npos; at = s.find(strip, at)) {
      s.erase(at, strip.size());
    }
  }
  return query::csv::Field(s);
}

}  // namespace

std::string ProfileDb::Csv(const std::string& sql, const std::string& strip) {
  auto st = db()->Prepare(sql);
  if (!st.ok()) {
    ADD_FAILURE() << st.status().ToString();
    return "";
  }
  std::string out;
  for (int c = 0; c < st->ColumnCount(); ++c) {
    if (c > 0) out += ',';
    out += st->ColumnName(c);
  }
  out += '\n';
  for (;;) {
    auto row = st->Step();
    if (!row.ok()) {
      ADD_FAILURE() << row.status().ToString();
      return out;
    }
    if (!*row) break;
    for (int c = 0; c < st->ColumnCount(); ++c) {
      if (c > 0) out += ',';
      switch (st->ColumnType(c)) {
        case SQLITE_NULL:
          out += "NULL";
          break;
        case SQLITE_INTEGER:
          out += std::to_string(st->Int(c));
          break;
        case SQLITE_FLOAT: {
          // The shortest digits that read back exactly, without an exponent where one is not
          // needed (3770000000, not 3.77e+09).
          const double v = st->Double(c);
          const double a = v < 0 ? -v : v;
          char buf[400];
          const auto r = a == 0 || (a >= 1e-6 && a < 1e21)
                             ? std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed)
                             : std::to_chars(buf, buf + sizeof(buf), v);
          out.append(buf, r.ptr);
          break;
        }
        default:
          out += CsvField(std::string(st->Text(c)), strip);
          break;
      }
    }
    out += '\n';
  }
  return out;
}

int64_t ProfileDb::Int(const std::string& sql) {
  auto v = db()->QueryInt(sql, INT64_MIN);
  if (!v.ok()) {
    ADD_FAILURE() << v.status().ToString();
    return INT64_MIN;
  }
  return *v;
}

double ProfileDb::Real(const std::string& sql) {
  auto st = db()->Prepare(sql);
  if (!st.ok()) {
    ADD_FAILURE() << st.status().ToString();
    return 0;
  }
  auto row = st->Step();
  if (!row.ok() || !*row) {
    ADD_FAILURE() << "no row for " << sql;
    return 0;
  }
  return st->Double(0);
}

std::string DumpImportTables(ProfileDb* db, const std::string& strip) {
  static const std::pair<const char*, const char*> kTables[] = {
      {"ranks",
       "SELECT rank, host, world_size, local_rank, clock_method, source FROM ranks ORDER BY rank"},
      {"rank_times", "SELECT * FROM rank_times ORDER BY rank"},
      {"mpi_profile", "SELECT * FROM mpi_profile ORDER BY rank, routine"},
      {"mpi_msgsize", "SELECT * FROM mpi_msgsize ORDER BY rank, routine, min_bytes"},
      {"mpi_callsites", "SELECT * FROM mpi_callsites ORDER BY rank, site, routine"},
      {"sources",
       "SELECT path, format, rank, pid, offset, size, finished, events FROM sources "
       "ORDER BY path"},
      {"stats", "SELECT name, rank, value FROM stats ORDER BY name, rank"},
      {"meta",
       "SELECT key, value FROM meta WHERE key NOT IN ('format', 'schema_version', "
       "'tool_version') ORDER BY key"},
  };
  std::string out;
  for (const auto& [name, sql] : kTables) {
    out += "# ";
    out += name;
    out += '\n';
    out += db->Csv(sql, strip);
  }
  return out;
}

size_t CheckEveryPrefix(const TextImportFn& fn, const std::string& label, const std::string& text) {
  ProfileDb db(":memory:");
  size_t imported = 0;
  for (size_t n = 0; n <= text.size(); ++n) {
    const std::string_view prefix(text.data(), n);
    const ImportOutcome o = db.ImportText(fn, label, prefix);
    if (!o.status.ok()) {
      EXPECT_EQ(o.status.code(), Status::Code::kInvalidArgument)
          << label << " prefix " << n << ": " << o.status.ToString();
      EXPECT_NE(o.status.message().find(label), std::string::npos) << o.status.ToString();
    } else {
      ++imported;
      if (n < text.size() && n > 0 && prefix.back() != '\n') {
        EXPECT_GT(o.result.truncated_bytes, 0u) << label << " prefix " << n;
        bool says = false;
        for (const std::string& w : o.result.warnings) {
          says = says || w.find("truncated") != std::string::npos;
        }
        EXPECT_TRUE(says) << label << " prefix " << n << " imported without a truncation warning";
      }
    }
    if (::testing::Test::HasFailure()) break;
  }
  return imported;
}

namespace {

std::vector<std::string> SplitKeep(const std::string& s) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    if (nl == std::string::npos) nl = s.size() - 1;
    lines.push_back(s.substr(pos, nl + 1 - pos));
    pos = nl + 1;
  }
  return lines;
}

std::string Join(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l;
  return s;
}

void Mutate(std::string* m, std::mt19937* rng) {
  static const char* kExtremes[] = {"-1",
                                    "-0.5",
                                    "0",
                                    "1e308",
                                    "1e-300",
                                    "99999999999999999999999",
                                    "nan",
                                    "-nan",
                                    "inf",
                                    "4.2e+18",
                                    "9223372036854775807",
                                    "0.5",
                                    "2147483648",
                                    "-2147483649",
                                    "1e19",
                                    "0x10",
                                    "*",
                                    "",
                                    "1,5",
                                    "12abc"};
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>((*rng)() % n); };
  if (m->empty()) {
    *m = "x\n";
    return;
  }
  std::vector<std::string> lines = SplitKeep(*m);
  switch ((*rng)() % 8) {
    case 0:  // flip a byte
      (*m)[pick(m->size())] = static_cast<char>((*rng)() % 256);
      return;
    case 1:  // drop a line
      lines.erase(lines.begin() + static_cast<long>(pick(lines.size())));
      break;
    case 2: {  // duplicate a line
      const size_t i = pick(lines.size());
      lines.insert(lines.begin() + static_cast<long>(i), lines[i]);
      break;
    }
    case 3:  // swap two lines
      std::swap(lines[pick(lines.size())], lines[pick(lines.size())]);
      break;
    case 4: {  // replace one field of a line by an extreme value
      std::string& l = lines[pick(lines.size())];
      std::vector<std::pair<size_t, size_t>> fields;
      for (size_t i = 0; i < l.size();) {
        while (i < l.size() && (l[i] == ' ' || l[i] == '\n')) ++i;
        const size_t start = i;
        while (i < l.size() && l[i] != ' ' && l[i] != '\n') ++i;
        if (i > start) fields.emplace_back(start, i - start);
      }
      if (fields.empty()) return;
      const auto [at, len] = fields[pick(fields.size())];
      l.replace(at, len, kExtremes[pick(std::size(kExtremes))]);
      break;
    }
    case 5:  // cut the tail
      m->resize(pick(m->size() + 1));
      return;
    case 6: {  // insert junk
      std::string junk;
      const size_t n = 1 + pick(40);
      for (size_t i = 0; i < n; ++i) junk += static_cast<char>(1 + (*rng)() % 255);
      m->insert(pick(m->size() + 1), junk);
      return;
    }
    default: {  // delete a range of bytes
      const size_t at = pick(m->size());
      m->erase(at, 1 + pick(200));
      return;
    }
  }
  *m = Join(lines);
}

}  // namespace

void CheckRandomMutants(const TextImportFn& fn, const std::vector<std::string>& seeds,
                        uint32_t seed, int count) {
  ASSERT_FALSE(seeds.empty());
  std::mt19937 rng(seed);
  ProfileDb db(":memory:");
  // The tables' sanity checks after each mutant, compiled once (not the importer's work).
  static const char* const kChecks[] = {
      "SELECT count(*) FROM mpi_profile WHERE calls < 0 OR time_ns < 0 OR bytes < 0",
      "SELECT count(*) FROM mpi_msgsize WHERE calls < 0 OR time_ns < 0 OR "
      "min_bytes > max_bytes OR avg_bytes < min_bytes OR avg_bytes > max_bytes",
      "SELECT count(*) FROM rank_times WHERE comm_ns < 0 OR elapsed_ns < 0 OR "
      "user_ns < 0 OR system_ns < 0 OR maxrss_bytes < 0 OR rank < 0",
      "SELECT count(*) FROM mpi_callsites WHERE calls < 0 OR max_ns < 0 OR "
      "mean_ns < 0 OR min_ns < 0 OR bytes_sum < 0 OR rank < -1",
      "SELECT count(*) FROM ranks WHERE world_size <= rank OR rank < 0",
  };
  std::vector<engine::Stmt> checks;
  for (const char* sql : kChecks) {
    auto st = db.db()->Prepare(sql);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    checks.push_back(std::move(st).value());
  }
  int ok = 0;
  for (int i = 0; i < count; ++i) {
    std::string m = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) Mutate(&m, &rng);
    const std::string label = "mutant-" + std::to_string(i);
    const ImportOutcome o = db.ImportText(fn, label, m);
    if (!o.status.ok()) {
      EXPECT_EQ(o.status.code(), Status::Code::kInvalidArgument) << o.status.ToString();
      EXPECT_NE(o.status.message().find(label), std::string::npos) << o.status.ToString();
    } else {
      ++ok;
      for (const std::string& w : o.result.warnings) {
        EXPECT_EQ(w.rfind(label + ": ", 0), 0u) << w;
      }
    }
    for (engine::Stmt& check : checks) {
      const auto row = check.Step();
      if (!row.ok() || !*row) {
        ADD_FAILURE() << (row.ok() ? "no row" : row.status().ToString());
      } else {
        EXPECT_EQ(check.Int(0), 0) << sqlite3_sql(check.raw());
      }
      check.Reset();
    }
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "mutant " << i << " (seed " << seed << "):\n" << m;
      return;
    }
  }
  // The mutants must not all be rejected at the header: most keep it and import partly.
  EXPECT_GT(ok, count / 4);
}

}  // namespace tracedb::testing
