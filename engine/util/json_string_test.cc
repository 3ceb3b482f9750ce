// The JSON string literal (json_string.h) against hand-written literals, and the step statistics'
// top names (engine/db/flight_tables.h), which had an escaper of their own that passed ill-formed
// UTF-8 through and wrote \b as \u0008: they now follow the one policy.
#include "engine/util/json_string.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/db/flight_tables.h"

namespace tracedb::engine {
namespace {

std::string Literal(std::string_view s) {
  std::string out = "x";  // appends after what is there
  AppendJsonString(&out, s);
  return out.substr(1);
}

TEST(JsonString, EscapesAndRepairs) {
  EXPECT_EQ(Literal(""), "\"\"");
  EXPECT_EQ(Literal("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(Literal(std::string("\b\f\n\r\t\x01\x1f", 7)), "\"\\b\\f\\n\\r\\t\\u0001\\u001f\"");
  EXPECT_EQ(Literal(std::string("nul\0", 4)), "\"nul\\u0000\"");
  // Whole: é, €, 😀. Replaced: a lone continuation byte, a cut form (one U+FFFD for E2 82), an
  // overlong form (C0 AF: two), a surrogate (ED A0 80: three), past U+10FFFF (F4 90 80 80: four).
  EXPECT_EQ(Literal("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"),
            "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
  const std::string r = "\xef\xbf\xbd";
  EXPECT_EQ(Literal("\x80"), "\"" + r + "\"");
  EXPECT_EQ(Literal("\xe2\x82z"), "\"" + r + "z\"");
  EXPECT_EQ(Literal("\xc0\xaf"), "\"" + r + r + "\"");
  EXPECT_EQ(Literal("\xed\xa0\x80"), "\"" + r + r + r + "\"");
  EXPECT_EQ(Literal("\xf4\x90\x80\x80"), "\"" + r + r + r + r + "\"");
}

TEST(JsonString, StepStatsTopNamesFollowThePolicy) {
  EXPECT_EQ(TopNamesJson({{"MPI_Allreduce", 12}, {"a\bb\xff", -3}}),
            "[[\"MPI_Allreduce\",12],[\"a\\bb\xef\xbf\xbd\",-3]]");
  EXPECT_EQ(TopNamesJson({}), "[]");
}

}  // namespace
}  // namespace tracedb::engine
