// The hostile-database harness (docs/security.md): a small real trace database is damaged by a
// list of mutations decoded from arbitrary bytes (rows of blocks, strings, tracks, steps,
// block_names, name_stats and meta changed, inserted or deleted; tables replaced by views;
// block payloads altered), then opened through every reader: the `events` table and the views
// (through OpenQueryDb), the Chrome exporter, the report's data, the view's level of detail,
// the Python reader's decode path (python/src/event_columns.h), `verify` and `archive`.
// Each reader must end with a result or an error with a message; a crash, a sanitizer report, a
// hang or an exception is the bug this finds (libFuzzer: hostile_db_fuzz; CI: the seeded
// mutations of tests/hostile_db_test.cc, and HostileCases below run as a corpus).
// Thread safety: one call at a time per process (the base database is built once, in a
// temporary directory named by TRACEDB_FUZZ_TMP or /tmp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tracedb::query::fuzz {

struct DbResult {
  bool clean = true;                  // every reader ended with a result or a described error
  std::string detail;                 // the first unclean outcome
  int opened = 0;                     // readers that got a result
  int errors = 0;                     // readers that ended with a (described) error
  std::vector<std::string> messages;  // the errors, "<reader>: <message>"
};

// The base database (built on first use): 2 ranks, blocks of a few hundred events each,
// steps, counters, typed arguments, and a meta table. Its path.
const std::string& BaseDb();

// Copies the base database to `path`, then applies the SQL statements in order (each may fail:
// a hostile edit the schema refuses is just not made).
void MakeHostileCopy(const std::string& path, const std::vector<std::string>& statements);

// Opens `path` through every reader. `scratch` is a directory for outputs (export, archive).
DbResult ReadEverything(const std::string& path, const std::string& scratch);

// The mutations encoded in data[0..size): SQL statements for MakeHostileCopy.
std::vector<std::string> MutationsFromBytes(const uint8_t* data, size_t size);

// The libFuzzer entry point: MutationsFromBytes, a copy, ReadEverything.
DbResult HostileDb(const uint8_t* data, size_t size);

// Named hand-made hostile databases (the review's reproductions, and more): name -> statements.
std::vector<std::pair<std::string, std::vector<std::string>>> HostileCases();

}  // namespace tracedb::query::fuzz
