// Parsing of `tracedb export` rank lists and time bounds.
#include "shell/export_args.h"

#include <gtest/gtest.h>

namespace tracedb::shell {
namespace {

using Kind = query::ChromeTimeBound::Kind;
using Ranges = std::vector<std::pair<int64_t, int64_t>>;

Ranges Ranks(const std::string& s) {
  Ranges r;
  Status st = ParseRankList(s, &r);
  EXPECT_TRUE(st.ok()) << s << ": " << st.message();
  return r;
}

query::ChromeTimeBound Bound(const std::string& s, bool is_to = false) {
  query::ChromeTimeBound b;
  Status st = ParseTimeBound(s, is_to, &b);
  EXPECT_TRUE(st.ok()) << s << ": " << st.message();
  return b;
}

std::string BoundError(const std::string& s, bool is_to = false) {
  query::ChromeTimeBound b;
  Status st = ParseTimeBound(s, is_to, &b);
  EXPECT_FALSE(st.ok()) << s;
  return st.message();
}

TEST(ExportArgs, RankLists) {
  EXPECT_EQ(Ranks("3"), (Ranges{{3, 3}}));
  EXPECT_EQ(Ranks("0,2-5"), (Ranges{{0, 0}, {2, 5}}));
  EXPECT_EQ(Ranks(" 7 , 1 - 2 ,4"), (Ranges{{7, 7}, {1, 2}, {4, 4}}));
  EXPECT_EQ(Ranks("4095"), (Ranges{{4095, 4095}}));
  for (const char* bad : {"", ",", "1,", ",1", "a", "1-", "-1", "1-2-3", "3-1", "1.5", "1 2",
                          "99999999999999999999"}) {
    Ranges r;
    Status st = ParseRankList(bad, &r);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find(std::string("'") + bad + "'"), std::string::npos) << st.message();
  }
}

TEST(ExportArgs, AbsoluteTimes) {
  const auto b = Bound("1700000000123456789");
  EXPECT_EQ(b.kind, Kind::kEpochNs);
  EXPECT_EQ(b.value, 1700000000123456789);
  EXPECT_EQ(b.text, "1700000000123456789");
  EXPECT_EQ(Bound("0").value, 0);
}

TEST(ExportArgs, TimesSinceTheJobStartAreExact) {
  EXPECT_EQ(Bound("2.5s").kind, Kind::kSinceStart);
  EXPECT_EQ(Bound("2.5s").value, 2500000000);
  EXPECT_EQ(Bound("300ms").value, 300000000);
  EXPECT_EQ(Bound("1.000000001s").value, 1000000001);
  EXPECT_EQ(Bound("0.1us").value, 100);
  EXPECT_EQ(Bound("12\xc2\xb5s").value, 12000);  // µs
  EXPECT_EQ(Bound("7ns").value, 7);
  EXPECT_EQ(Bound(".5ms").value, 500000);
  EXPECT_EQ(Bound("1.5min").value, 90000000000);
  EXPECT_EQ(Bound("2h").value, 7200000000000);
  EXPECT_EQ(Bound("0.0000000015s").value, 2);  // 1.5 ns rounds to 2
  EXPECT_EQ(Bound(" 4 s ").value, 4000000000);
  // + on --from is the same as no sign; on --to it is after --from.
  EXPECT_EQ(Bound("+2s").kind, Kind::kSinceStart);
  EXPECT_EQ(Bound("+500ms", true).kind, Kind::kAfterFrom);
  EXPECT_EQ(Bound("+500ms", true).value, 500000000);
  EXPECT_EQ(Bound("500ms", true).kind, Kind::kSinceStart);
}

TEST(ExportArgs, Steps) {
  EXPECT_EQ(Bound("step:100").kind, Kind::kStep);
  EXPECT_EQ(Bound("step:100").value, 100);
  EXPECT_EQ(Bound("step:0", true).value, 0);
}

TEST(ExportArgs, BadTimesSayWhy) {
  EXPECT_NE(BoundError("").find("empty"), std::string::npos);
  EXPECT_NE(BoundError("2.5parsecs").find("unknown unit 'parsecs'"), std::string::npos);
  EXPECT_NE(BoundError("+500").find("needs a unit"), std::string::npos);
  EXPECT_NE(BoundError("1.5").find("needs a unit"), std::string::npos);
  EXPECT_NE(BoundError("step:").find("step:N"), std::string::npos);
  EXPECT_NE(BoundError("step:-3").find("step:N"), std::string::npos);
  EXPECT_NE(BoundError("step:x", true).find("--to"), std::string::npos);
  EXPECT_NE(BoundError("-5s").find("expected"), std::string::npos);
  EXPECT_NE(BoundError("s").find("expected"), std::string::npos);
  EXPECT_NE(BoundError("1.s").find("decimal point"), std::string::npos);
  EXPECT_NE(BoundError("99999999999999999999").find("integer"), std::string::npos);
  EXPECT_NE(BoundError("99999999999h").find("too large"), std::string::npos);
  EXPECT_NE(BoundError("yesterday").find("expected"), std::string::npos);
}

}  // namespace
}  // namespace tracedb::shell
