// Helpers for the tests of the MPI text-profile importers (mpitrace, mpiP): a trace database
// with one batch per import, tables read back as CSV text (diff tests), the folders of real and
// hand-made fixtures, and the truncation and random-mutation drivers both importers share.
// Thread safety: test code, one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/db/trace_writer.h"
#include "engine/util/status.h"
#include "query/import/importer.h"

namespace tracedb::testing {

// The folder of real files written by `format` ("mpitrace", "mpip") under ../shared/fixtures,
// or "" when that folder does not exist.
std::string SharedFixtureDir(std::string_view format);
// The regular files directly in `dir`, sorted by name.
std::vector<std::string> ListFiles(const std::string& dir);

struct ImportOutcome {
  Status status;
  query::ImportResult result;
};

// Imports text as an importer's ImportXText function does.
using TextImportFn = std::function<Status(std::string_view path, std::string_view text,
                                          engine::TraceWriter*, query::ImportResult*)>;

// A trace database (a file, or ":memory:") that imports each input in a batch of its own.
class ProfileDb {
 public:
  explicit ProfileDb(const std::string& path);
  engine::TraceWriter* writer() { return writer_.get(); }
  engine::Db* db() { return writer_->db(); }

  ImportOutcome Import(query::Importer* importer, const std::string& path, int32_t rank_hint = -1);
  ImportOutcome ImportText(const TextImportFn& fn, std::string_view path, std::string_view text);

  // The rows of `sql` as CSV: a header line, then one line per row. NULL prints as NULL, REAL
  // in the shortest form that reads back exactly; `strip` is removed from every text value.
  std::string Csv(const std::string& sql, const std::string& strip = "");
  int64_t Int(const std::string& sql);
  double Real(const std::string& sql);

 private:
  std::unique_ptr<engine::TraceWriter> writer_;
};

// The tables the importers write, as the diff tests print them.
std::string DumpImportTables(ProfileDb* db, const std::string& strip);

// Imports every prefix of `text` (each byte length from 0 to the whole) into one in-memory
// database and checks that each gives an error or a partial import that says it is truncated
// when the prefix ends inside a line. Returns the number of prefixes that imported.
size_t CheckEveryPrefix(const TextImportFn& fn, const std::string& label, const std::string& text);

// Imports `count` random mutants of `seeds` (bytes flipped, lines dropped, duplicated or swapped,
// numbers replaced by extreme values, tails cut) and checks that none crashes, that each gives
// either OK or an InvalidArgument naming the input, and that the tables stay sane.
void CheckRandomMutants(const TextImportFn& fn, const std::vector<std::string>& seeds,
                        uint32_t seed, int count);

}  // namespace tracedb::testing
