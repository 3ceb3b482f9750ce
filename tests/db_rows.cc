// Test helpers that read a trace database back. See db_rows.h.
#include "tests/db_rows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "engine/db/event_block.h"
#include "engine/db/sqlite.h"
#include "engine/util/json_text.h"
#include "query/export/csv_text.h"
#include "query/open/query_db.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

std::string CsvField(const std::string& s) { return query::csv::Field(s); }

// Counter values exactly (the shortest form that reads back to the same double).
std::string Num(double v) { return engine::json::DoubleText(v); }

}  // namespace

std::vector<DbRow> ReadDbRows(const std::string& path) {
  std::vector<DbRow> rows;
  auto db = engine::Db::Open(path, engine::Db::Mode::kReadOnly);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  if (!db.ok()) return rows;
  std::map<uint32_t, std::string> strings;
  {
    auto st = (*db)->Prepare("SELECT id, s FROM strings");
    EXPECT_TRUE(st.ok());
    while (*st->Step()) strings[static_cast<uint32_t>(st->Int(0))] = std::string(st->Text(1));
  }
  struct TrackRow {
    int32_t rank;
    std::string kind, name;
    int64_t tid;
  };
  std::map<uint32_t, TrackRow> tracks;
  {
    auto st = (*db)->Prepare("SELECT track, rank, kind, name, tid FROM tracks");
    EXPECT_TRUE(st.ok());
    while (*st->Step()) {
      tracks[static_cast<uint32_t>(st->Int(0))] =
          TrackRow{static_cast<int32_t>(st->Int(1)), std::string(st->Text(2)),
                   std::string(st->Text(3)), st->IsNull(4) ? -1 : st->Int(4)};
    }
  }
  auto st = (*db)->Prepare("SELECT block, data FROM blocks ORDER BY block");
  EXPECT_TRUE(st.ok());
  while (*st->Step()) {
    engine::DecodedBlock b;
    Status s = engine::DecodeBlock(st->Blob(1), st->Int(0), &b);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) continue;
    for (size_t i = 0; i < b.n; ++i) {
      const engine::Row r = b.RowAt(i);
      DbRow d;
      const TrackRow& t = tracks[r.track];
      d.rank = t.rank;
      d.track = r.track;
      d.track_kind = t.kind;
      d.track_name = t.name;
      d.tid = t.tid;
      d.kind = engine::RowKindName(r.kind);
      d.name = strings[r.name];
      d.cat = r.cat ? strings[r.cat] : "";
      d.ts = r.ts;
      d.dur = r.dur;
      d.depth = r.depth;
      d.k = r.k;
      d.parent_k = r.parent_k;
      d.args = r.args;
      d.value = r.value;
      d.json = r.json;
      rows.push_back(std::move(d));
    }
  }
  std::map<std::pair<uint32_t, uint64_t>, std::string> by_id;
  for (const DbRow& r : rows) by_id[{r.track, r.k}] = r.name;
  for (DbRow& r : rows) {
    if (r.parent_k != 0) {
      auto it = by_id.find({r.track, r.parent_k - 1});
      r.parent = it != by_id.end() ? it->second : "?missing";
    }
  }
  std::sort(rows.begin(), rows.end(), [](const DbRow& a, const DbRow& b) {
    return std::tie(a.rank, a.track_name, a.track_kind, a.tid, a.ts, a.k) <
           std::tie(b.rank, b.track_name, b.track_kind, b.tid, b.ts, b.k);
  });
  return rows;
}

std::string RowsCsv(const std::vector<DbRow>& rows) {
  std::string out =
      "rank,track_kind,track,tid,kind,name,cat,ts,dur,depth,parent,bytes,peer,seq,"
      "flow,value,json\n";
  using engine::EventArgs;
  for (const DbRow& r : rows) {
    const EventArgs& a = r.args;
    out += std::to_string(r.rank) + "," + CsvField(r.track_kind) + "," + CsvField(r.track_name) +
           "," + (r.tid >= 0 ? std::to_string(r.tid) : "") + "," + r.kind + "," + CsvField(r.name) +
           "," + CsvField(r.cat) + "," + std::to_string(r.ts) + "," + std::to_string(r.dur) + "," +
           std::to_string(r.depth) + "," + CsvField(r.parent) + "," +
           (a.mask & EventArgs::kBytes ? std::to_string(a.bytes) : "") + "," +
           (a.mask & EventArgs::kPeer ? std::to_string(a.peer) : "") + "," +
           (a.mask & EventArgs::kSeq ? std::to_string(a.seq) : "") + "," +
           (a.mask & EventArgs::kFlow ? std::to_string(a.flow) : "") + "," +
           (r.kind == "counter" ? Num(r.value) : "") + "," + CsvField(r.json) + "\n";
  }
  return out;
}

std::string TablesCsv(const std::string& path) {
  std::string out;
  auto db = engine::Db::Open(path, engine::Db::Mode::kReadOnly);
  EXPECT_TRUE(db.ok());
  if (!db.ok()) return out;
  const std::pair<const char*, const char*> queries[] = {
      {"ranks",
       "SELECT rank, world_size, local_rank, clock_method, source FROM ranks "
       "ORDER BY rank"},
      {"sources",
       "SELECT replace(path, rtrim(path, replace(path, '/', '')), ''), format, rank, "
       "finished, events FROM sources ORDER BY 1"},
      {"stats", "SELECT name, rank, value FROM stats ORDER BY name, rank"},
      {"steps", "SELECT rank, ts, step FROM steps ORDER BY rank, ts"},
      {"meta",
       "SELECT key, value FROM meta WHERE key NOT IN ('format', 'schema_version', "
       "'tool_version') ORDER BY key"},
  };
  for (const auto& [title, sql] : queries) {
    out += std::string("# ") + title + "\n";
    auto st = (*db)->Prepare(sql);
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    if (!st.ok()) continue;
    while (*st->Step()) {
      for (int c = 0; c < st->ColumnCount(); ++c) {
        if (c) out += ",";
        out += CsvField(std::string(st->Text(c)));
      }
      out += "\n";
    }
  }
  return out;
}

std::string QueryRows(const std::string& db_path, const std::string& sql, bool sort) {
  auto db = query::OpenQueryDb(db_path);
  EXPECT_TRUE(db.ok()) << db.status().message();
  if (!db.ok()) return "";
  auto st = (*db)->Prepare(sql);
  EXPECT_TRUE(st.ok()) << sql << ": " << st.status().message();
  if (!st.ok()) return "";
  std::vector<std::string> lines;
  for (;;) {
    auto row = st->Step();
    EXPECT_TRUE(row.ok()) << sql << ": " << row.status().message();
    if (!row.ok() || !*row) break;
    std::string line;
    for (int c = 0; c < st->ColumnCount(); ++c) {
      if (c) line += '|';
      line += st->IsNull(c) ? "NULL" : std::string(st->Text(c));
    }
    lines.push_back(line);
  }
  if (sort) std::sort(lines.begin(), lines.end());
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

}  // namespace tracedb::testing
