// The CSV field writer (csv_text.h): a field is quoted only when it holds a comma, a quote, CR
// or LF, and its quotes are doubled.
#include "query/export/csv_text.h"

#include <gtest/gtest.h>

namespace tracedb::query::csv {
namespace {

TEST(CsvField, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(Field("plain"), "plain");
  EXPECT_EQ(Field("a,b"), "\"a,b\"");
  EXPECT_EQ(Field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(Field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(Field("cr\r"), "\"cr\r\"");
  EXPECT_EQ(Field(""), "");
}

}  // namespace
}  // namespace tracedb::query::csv
