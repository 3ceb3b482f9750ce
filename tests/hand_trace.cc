// See hand_trace.h.
#include "tests/hand_trace.h"

#include <gtest/gtest.h>

namespace tracedb::testing {

uint32_t AddRankTrack(engine::TraceWriter* tw, int rank, int world_size, const std::string& source,
                      const std::string& host) {
  engine::RankRecord rec;
  rec.rank = rank;
  rec.world_size = world_size;
  rec.source = source;
  if (!host.empty()) rec.host = host;
  const Status s = tw->SetRank(rec);
  EXPECT_TRUE(s.ok()) << "rank " << rank << ": " << s.message();
  if (!s.ok()) return 0;
  engine::TrackSpec t;
  t.rank = rank;
  t.name = "main";
  t.tid = 100 + rank;
  t.local_id = 1;
  return tw->Track(t);
}

std::vector<std::string> SqlRows(engine::Db* db, const std::string& sql) {
  std::vector<std::string> out;
  auto st = db->Prepare(sql);
  EXPECT_TRUE(st.ok()) << sql << ": " << st.status().message();
  if (!st.ok()) return out;
  for (;;) {
    auto row = st->Step();
    EXPECT_TRUE(row.ok()) << sql << ": " << row.status().message();
    if (!row.ok() || !*row) break;
    std::string r;
    for (int i = 0; i < sqlite3_column_count(st->raw()); ++i) {
      if (i) r += "|";
      r += sqlite3_column_type(st->raw(), i) == SQLITE_NULL ? "NULL" : std::string(st->Text(i));
    }
    out.push_back(r);
  }
  return out;
}

}  // namespace tracedb::testing
