// `tracedb view` in a real browser: Debian's chromium driven by npm playwright-core
// (tests/view_browser_test.mjs; playwright-core installed by tests/viewers/setup-playwright.sh,
// no browser download). The page loads, every rank's rows appear, W zooms in and the server's
// window follows, a click shows the right event (checked against SQL), search and SQL box
// highlight, a screenshot is not blank, the token is required. Skipped when chromium, node or
// npm is missing, except under CI=true, where that is a failure.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <regex>
#include <string>
#include <thread>

#include "query/open/query_db.h"
#include "tests/test_util.h"
#include "tests/view_fixture.h"
#include "view/view_server.h"

namespace tracedb::testing {
namespace {

bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

std::string Match(const std::string& s, const std::string& re) {
  std::smatch m;
  return std::regex_search(s, m, std::regex(re)) ? m[1].str() : "";
}

TEST(ViewBrowser, TimelineInChromium) {
  std::string chromium;
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (chromium.empty() && access(c, X_OK) == 0) chromium = c;
  }
  int rc = 0;
  RunCommand("command -v node && command -v npm", &rc);
  if (chromium.empty() || rc != 0) {
    if (InCi()) FAIL() << "CI=true but chromium, node or npm is missing (scripts/setup-deps.sh)";
    GTEST_SKIP() << "chromium, node or npm is not installed";
  }
  std::string pw = RunCommand(SourceRoot() + "/tests/viewers/setup-playwright.sh " +
                                  ShellQuote(std::string(TRACEDB_VIEWERS_DIR) + "/playwright"),
                              &rc);
  while (!pw.empty() && pw.back() == '\n') pw.pop_back();
  if (rc != 0) {
    if (InCi()) FAIL() << "playwright-core could not be installed: " << pw;
    GTEST_SKIP() << "playwright-core could not be installed from npm";
  }
  pw = pw.substr(pw.find_last_of('\n') + 1);

  TempDir tmp;
  const std::string db = tmp.Sub("view.tdb");
  ASSERT_NO_FATAL_FAILURE(WriteViewFixture(db));
  view::ViewServerOptions o;
  o.db_path = db;
  auto server = view::ViewServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::thread serve([&] { (*server)->Run(); });
  const std::string shot_dir = TRACEDB_VIEW_SHOT_DIR;
  const std::string out =
      RunCommand("node " + ShellQuote(SourceRoot() + "/tests/view_browser_test.mjs") + " " +
                     ShellQuote(pw) + " " + ShellQuote(chromium) + " " +
                     ShellQuote((*server)->url()) + " " + ShellQuote(shot_dir) + " 2>&1",
                 &rc);
  (*server)->Stop();
  serve.join();
  ASSERT_EQ(rc, 0) << out;

  // Every rank and track has its row.
  EXPECT_NE(out.find("\"ranks\":[0,1],\"rank_rows\":[0,1],\"track_rows\":[1,2,3,4,5,6]"),
            std::string::npos)
      << out;
  // W zoomed in: the view and the server's window shrank.
  const double first_t1 =
      std::stod(Match(out, "\"first_window\":\\{\"t0\":\"[0-9]+\",\"t1\":\"([0-9]+)\""));
  const double first_t0 = std::stod(Match(out, "\"first_window\":\\{\"t0\":\"([0-9]+)\""));
  const double zt0 = std::stod(Match(out, "\"zoomed_window\":\\{\"t0\":\"([0-9]+)\""));
  const double zt1 =
      std::stod(Match(out, "\"zoomed_window\":\\{\"t0\":\"[0-9]+\",\"t1\":\"([0-9]+)\""));
  EXPECT_LT(zt1 - zt0, 0.6 * (first_t1 - first_t0)) << out;
  // A key press asked the server at once and drew a preview within two frames.
  EXPECT_NE(out.find("\"key_press\":{\"sent\":1,\"previewed\":true}"), std::string::npos) << out;
  // The click showed the span under the mouse: SQL's row for its id.
  const std::string id =
      Match(out, "\"clicked\":\\{\"event\":\\{\"sql\":\"[^\"]*\",\"fields\":\\{\"id\":([0-9]+)");
  ASSERT_FALSE(id.empty()) << out;
  auto q = query::OpenQueryDb(db, false);
  ASSERT_TRUE(q.ok());
  auto st = (*q)->Prepare("SELECT name, ts, dur, step FROM events WHERE id = ?1");
  ASSERT_TRUE(st.ok());
  st->Bind(1, static_cast<int64_t>(std::stoll(id)));
  ASSERT_TRUE(*st->Step());
  EXPECT_EQ(std::string(st->Text(0)), "backward");
  EXPECT_EQ(st->Int(3), 100);
  EXPECT_NE(out.find("\"ts\":\"" + std::to_string(st->Int(1)) +
                     "\",\"dur\":" + std::to_string(st->Int(2)) + ","),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\"parents\":[{\"sql\""), std::string::npos);
  // Search, SQL box, highlights.
  EXPECT_EQ(Match(out, "\"search_rows\":([0-9]+)"),
            std::to_string(*(*q)->QueryInt("SELECT count(*) FROM events WHERE name = 'MPI_Send'")));
  EXPECT_EQ(Match(out, "\"sql_rows\":([0-9]+)"), "3");
  EXPECT_EQ(Match(out, "\"highlights\":([0-9]+)"), "3");
  // The critical path and waits of step 200: rank 0 waits in every MPI_Allreduce for rank 1
  // (307 ns later, the fixture's rank * 300 + 7) and rank 1's MPI_Recv for rank 0's MPI_Send
  // (75000 - 74007 = 993 ns, late_sender, the longest wait of the window); hatched in red on rank
  // 1's comm lane (track 5), and a piece's red bar on its rank's header, gone with the box off.
  EXPECT_NE(out.find("\"why_on\":{\"pieces\":"), std::string::npos) << out;
  EXPECT_NE(out.find("\"wait\":{\"rank\":1,\"pattern\":\"late_sender\",\"dur\":993,\"track\":5,"),
            std::string::npos)
      << out;
  const int wait_on = std::stoi(Match(out, "\"why_on\":\\{.*?\"wait\":\\{[^}]*\"red\":(-?[0-9]+)"));
  const int wait_off =
      std::stoi(Match(out, "\"why_off\":\\{.*?\"wait\":\\{[^}]*\"red\":(-?[0-9]+)"));
  const int bar_on = std::stoi(Match(out, "\"why_on\":\\{.*?\"piece\":\\{[^}]*\"red\":(-?[0-9]+)"));
  const int bar_off =
      std::stoi(Match(out, "\"why_off\":\\{.*?\"piece\":\\{[^}]*\"red\":(-?[0-9]+)"));
  EXPECT_GT(wait_on, wait_off + 10) << out;
  EXPECT_GT(bar_on, bar_off + 5) << out;
  EXPECT_NE(Match(out, "\"why_on\":\\{.*?\"info\":\"([^\"]*)\"").find("why: root causes"),
            std::string::npos)
      << out;
  // Above S.manyTracks, only the tracks on screen were asked for, a collapsed rank (1) by its
  // first track (4), and the answer held no other track.
  EXPECT_NE(out.find("\"only_tracks\":{\"asked\":\"1,2,3,4\",\"answered\":[1,2,3,4]}"),
            std::string::npos)
      << out;
  // Not blank; token required; no script errors.
  EXPECT_GT(std::stoi(Match(out, "\"colours\":([0-9]+)")), 20) << out;
  EXPECT_EQ(Match(out, "\"no_token_status\":([0-9]+)"), "403");
  EXPECT_NE(out.find("\"page_errors\":[]"), std::string::npos) << out;
  EXPECT_GT(ReadFile(shot_dir + "/view.png").size(), 10000u);
}

}  // namespace
}  // namespace tracedb::testing
