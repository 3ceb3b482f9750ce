// Rows of SQL as JSON (json_rows.h): every SQLite type against hand-written JSON, integers at and
// past ±2^53 in both modes. The three copies this replaced disagreed: only the viewer quoted
// integers past 2^53 (kept, for the viewer only: BigInts::kString), the viewer wrote whole reals
// as "1e+06" (now 1000000, as the shell did: the same number), the report page wrote a blob's
// bytes as text (now "<blob N bytes>", as the shell and the viewer did).
#include "query/export/json_rows.h"

#include <gtest/gtest.h>

#include <string>

namespace tracedb::query::json {
namespace {

std::string Row(const std::string& select, BigInts big) {
  auto db = engine::Db::Open(":memory:", engine::Db::Mode::kCreate);
  EXPECT_TRUE(db.ok());
  auto st = (*db)->Prepare(select);
  EXPECT_TRUE(st.ok()) << st.status().message();
  auto row = st->Step();
  EXPECT_TRUE(row.ok() && *row);
  std::string out;
  for (int c = 0; c < st->ColumnCount(); ++c) {
    if (c) out += ',';
    AppendColumn(&out, *st, c, big);
  }
  return out;
}

TEST(JsonRows, EveryTypeAsJson) {
  const std::string sql =
      "SELECT NULL, 42, -7, 0.25, 1e6, 1e300 * 1e300, x'0001ff', 'a\"b', CAST(x'61ff' AS TEXT)";
  const std::string want =
      "null,42,-7,0.25,1000000,null,\"<blob 3 bytes>\",\"a\\\"b\",\"a\xef\xbf\xbd\"";
  EXPECT_EQ(Row(sql, BigInts::kNumber), want);
  EXPECT_EQ(Row(sql, BigInts::kString), want);  // the same below 2^53
}

TEST(JsonRows, IntegersPastTwoToThe53AreStringsOnlyWhenAsked) {
  const std::string sql =
      "SELECT 9007199254740992, -9007199254740992, 9007199254740993, -9007199254740993, "
      "9223372036854775807, -9223372036854775808";
  EXPECT_EQ(Row(sql, BigInts::kNumber),
            "9007199254740992,-9007199254740992,9007199254740993,-9007199254740993,"
            "9223372036854775807,-9223372036854775808");
  EXPECT_EQ(Row(sql, BigInts::kString),
            "9007199254740992,-9007199254740992,\"9007199254740993\",\"-9007199254740993\","
            "\"9223372036854775807\",\"-9223372036854775808\"");
}

}  // namespace
}  // namespace tracedb::query::json
