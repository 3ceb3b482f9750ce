// Test helpers that read a trace database back as plain rows: every block of the `blocks` table
// decoded with engine::DecodeBlock, names and categories resolved through `strings`, tracks
// through `tracks`; and CSV renderings of rows and of the stats, ranks and sources tables for
// diff tests (input trace -> import -> expected CSV).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/segment_format.h"

namespace tracedb::testing {

struct DbRow {
  int32_t rank = 0;
  uint32_t track = 0;
  std::string track_kind, track_name;
  int64_t tid = -1;  // tracks.tid, -1 when NULL
  std::string kind;  // "span", "instant", "counter", "flow"
  std::string name, cat;
  int64_t ts = 0, dur = 0;
  uint32_t depth = 0;
  uint64_t k = 0, parent_k = 0;
  std::string parent;  // the parent's name, "" at the top
  engine::EventArgs args;
  double value = 0;
  std::string json;
};

// Every row of the database at `path`, sorted by (rank, track name, track kind, ts, k). Fails the
// calling test when the database cannot be read or a block does not decode.
std::vector<DbRow> ReadDbRows(const std::string& path);

// rank,track_kind,track,tid,kind,name,cat,ts,dur,depth,parent,bytes,peer,seq,flow,value,json
std::string RowsCsv(const std::vector<DbRow>& rows);

// The ranks, sources (file name only), stats and steps tables as CSV sections.
std::string TablesCsv(const std::string& path);

// Runs a shell command; returns its exit status and stores stdout+stderr in *output.
int RunCommand(const std::string& command, std::string* output);

// The source tree (TRACEDB_SOURCE_DIR, else the directory this test binary was built from).
std::string SourceDir();

}  // namespace tracedb::testing
