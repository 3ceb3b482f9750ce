// The progress line's text: the parts shown for what is known, the rate, and the ETA from the
// bytes (or from the units when the bytes' total is unknown). Numbers worked by hand.
#include "shell/progress.h"

#include <gtest/gtest.h>

namespace tracedb::shell {
namespace {

TEST(ProgressLine, ShowsFilesEventsBytesRateAndEta) {
  ProgressState s;
  s.files_done = 3;
  s.files_total = 8;
  s.events = 1204331;
  s.bytes_done = 25000000;
  s.bytes_total = 100000000;
  // 25 MB in 2 s: 12.5 MB/s; 75 MB left at that rate: 6 s.
  const std::string line = ProgressLine::Render("compact", s, 2.0);
  EXPECT_NE(line.find("compact: file 3/8, 1,204,331 events, "), std::string::npos) << line;
  EXPECT_NE(line.find(" of "), std::string::npos) << line;
  EXPECT_NE(line.find("/s, ETA 6"), std::string::npos) << line;
}

TEST(ProgressLine, EtaFromUnitsWhenTheBytesTotalIsUnknown) {
  ProgressState s;
  s.events = 500;
  s.bytes_done = 1000;
  s.units_done = 10;
  s.units_total = 40;
  // A quarter of the blocks in 1 s: 3 s left.
  const std::string line = ProgressLine::Render("export", s, 1.0);
  EXPECT_EQ(line.find(" of "), std::string::npos) << line;
  EXPECT_NE(line.find("ETA 3"), std::string::npos) << line;
  EXPECT_EQ(line.find("file"), std::string::npos) << line;
}

TEST(ProgressLine, NoEtaWhenNothingIsKnownOrAllIsDone) {
  ProgressState s;
  s.events = 42;
  EXPECT_EQ(ProgressLine::Render("import", s, 2.0), "import: 42 events, 21 events/s");
  s.bytes_done = s.bytes_total = 5000;
  EXPECT_EQ(ProgressLine::Render("import", s, 1.0).find("ETA"), std::string::npos);
}

}  // namespace
}  // namespace tracedb::shell
