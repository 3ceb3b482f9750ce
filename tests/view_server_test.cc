// The `tracedb view` server over HTTP (cpp-httplib's client): the token is required on every
// request, bad requests get clear JSON errors and the server goes on serving, the database stays
// read-only, /api/event's fields and parent chain equal SQL's, /api/flows' messages and
// collectives equal the views', and the real `tracedb view` command prints a working URL.
#include "view/view_server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <regex>
#include <string>
#include <thread>

#include "query/open/query_db.h"
#include "tests/test_util.h"
#include "tests/view_fixture.h"

namespace tracedb::testing {
namespace {

class ViewServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    db_path_ = tmp_->Sub("view.tdb");
    ASSERT_NO_FATAL_FAILURE(WriteViewFixture(db_path_));
    view::ViewServerOptions o;
    o.db_path = db_path_;
    auto s = view::ViewServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = s->release();
    thread_ = new std::thread([] { server_->Run(); });
    for (int i = 0; i < 200; ++i) {  // until it accepts
      httplib::Client c("127.0.0.1", server_->port());
      if (c.Get("/")) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  static void TearDownTestSuite() {
    server_->Stop();
    thread_->join();
    delete thread_;
    delete server_;
    delete tmp_;
  }
  httplib::Result Get(const std::string& path, bool token = true) {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(30, 0);
    std::string p = path;
    if (token) p += (p.find('?') == std::string::npos ? "?token=" : "&token=") + server_->token();
    return c.Get(p);
  }
  static std::string Field(const std::string& body, const std::string& key) {
    std::smatch m;
    const std::regex re("\"" + key + "\":(\"[^\"]*\"|[^,}\\]]*)");
    return std::regex_search(body, m, re) ? m[1].str() : "";
  }

  static TempDir* tmp_;
  static std::string db_path_;
  static view::ViewServer* server_;
  static std::thread* thread_;
};

TempDir* ViewServerTest::tmp_ = nullptr;
std::string ViewServerTest::db_path_;
view::ViewServer* ViewServerTest::server_ = nullptr;
std::thread* ViewServerTest::thread_ = nullptr;

TEST_F(ViewServerTest, TokenRequiredEverywhere) {
  EXPECT_EQ(server_->token().size(), 32u);
  EXPECT_NE(server_->url().find("http://127.0.0.1:"), std::string::npos);
  for (const char* p : {"/", "/index.html", "/app.js", "/units.js", "/api/meta",
                        "/api/window?t0=0&t1=9", "/api/sql?q=select%201", "/nope"}) {
    auto r = Get(p, false);
    ASSERT_TRUE(r) << p;
    EXPECT_EQ(r->status, 403) << p;
    EXPECT_NE(r->body.find("\"error\""), std::string::npos) << p;
    EXPECT_EQ(r->body.find("node-a"), std::string::npos) << p;
    auto wrong = Get(std::string(p) + (std::string(p).find('?') == std::string::npos ? "?" : "&") +
                         "token=" + std::string(32, '0'),
                     false);
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 403) << p;
  }
  // The header works as well as the parameter.
  httplib::Client c("127.0.0.1", server_->port());
  auto h = c.Get("/api/meta", {{"X-Tracedb-Token", server_->token()}});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_NE(h->body.find("node-b"), std::string::npos);
  // The page carries the token for its own requests.
  auto page = Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("app.js?token=" + server_->token()), std::string::npos);
  EXPECT_NE(page->body.find("units.js?token=" + server_->token()), std::string::npos);
  // The shared units module is served, and app.js uses it rather than a copy of its own.
  auto units = Get("/units.js");
  ASSERT_TRUE(units);
  EXPECT_EQ(units->status, 200);
  EXPECT_NE(units->body.find("function humanDuration"), std::string::npos);
  auto app = Get("/app.js");
  ASSERT_TRUE(app);
  EXPECT_EQ(app->body.find("function fmtNs"), std::string::npos);
}

// Over loopback compression only costs: the answers go as they are even to a client that accepts
// brotli and gzip, as browsers do (cpp-httplib would otherwise brotli them at its highest quality).
TEST_F(ViewServerTest, AnswersAreNotCompressed) {
  for (const char* p : {"/api/meta", "/api/window?t0=0&t1=2000000000&px=1000", "/app.js",
                        "/api/window?t0=5&t1=4"}) {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_decompress(false);
    auto r = c.Get(
        p, {{"X-Tracedb-Token", server_->token()}, {"Accept-Encoding", "gzip, deflate, br, zstd"}});
    ASSERT_TRUE(r) << p;
    EXPECT_FALSE(r->has_header("Content-Encoding"))
        << p << ": " << r->get_header_value("Content-Encoding");
    EXPECT_TRUE(r->body.size() > 20 && (r->body[0] == '{' || r->body[0] == '/')) << p;
  }
}

TEST_F(ViewServerTest, MetaListsRanksTracksSteps) {
  auto r = Get("/api/meta");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(Field(r->body, "origin"), "\"" + std::to_string(kViewEpoch) + "\"");
  auto db = query::OpenQueryDb(db_path_, false);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(Field(r->body, "events"),
            std::to_string(*(*db)->QueryInt("SELECT count(*) FROM events")));
  for (const char* s : {"\"main\"", "\"comm\"", "\"counters\"", "\"node-a\"", "\"node-b\""}) {
    EXPECT_NE(r->body.find(s), std::string::npos) << s;
  }
  // Step markers of rank 0, relative to the origin.
  EXPECT_NE(r->body.find("\"steps\":[[0,0],[100000,1],"), std::string::npos);
}

TEST_F(ViewServerTest, BadRequestsGetClearErrorsAndTheServerSurvives) {
  struct Case {
    std::string path;
    int status;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"/api/window", 400, "missing parameter 't0'"},
      {"/api/window?t0=abc&t1=5", 400, "'t0' is not an integer"},
      {"/api/window?t0=5&t1=5", 400, "empty window"},
      {"/api/window?t0=9&t1=5", 400, "empty window"},
      {"/api/window?t0=0&t1=5&px=0", 400, "'px' = 0 is out of range"},
      {"/api/window?t0=0&t1=5&px=99999999999999999999999", 400, "'px' is not an integer"},
      {"/api/window?t0=0&t1=5&tracks=1,x", 400, "not a track id: 'x'"},
      {"/api/window?t0=0&t1=5&tracks=4242", 404, "unknown track 4242"},
      // Track ids are parsed by the project's one strict policy (engine/util/parse_number.h): the
      // strtoull the handler used before took a '+' and leading spaces.
      {"/api/window?t0=0&t1=5&tracks=%2B1", 400, "not a track id: '+1'"},
      {"/api/window?t0=0&t1=5&tracks=%201", 400, "not a track id: ' 1'"},
      {"/api/window?t0=0&t1=5&tracks=4294967296", 400, "not a track id: '4294967296'"},
      {"/api/event?id=12&ts=0", 404, "unknown track"},
      {"/api/event?id=4294967296&ts=5", 404, "no event"},
      {"/api/sql", 400, "missing parameter 'q'"},
      {"/api/sql?q=DELETE%20FROM%20blocks", 400, "read-only"},
      {"/api/sql?q=SELECT%201;%20SELECT%202", 400, "one statement"},
      {"/api/sql?q=SELEKT", 400, "syntax error"},
      {"/api/search", 400, "missing parameter 'glob'"},
      {"/api/flows?t0=1&t1=0", 400, "empty window"},
      {"/no/such/page", 404, "no such page"},
  };
  for (const Case& c : cases) {
    auto r = Get(c.path);
    ASSERT_TRUE(r) << c.path;
    EXPECT_EQ(r->status, c.status) << c.path << ": " << r->body;
    EXPECT_NE(r->body.find("\"error\":"), std::string::npos) << c.path;
    EXPECT_NE(r->body.find(c.message), std::string::npos) << c.path << ": " << r->body;
  }
  // A huge window is answered, bounded.
  auto huge = Get("/api/window?t0=-4611686018427387904&t1=4611686018427387903&px=20000");
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->status, 200) << huge->body.substr(0, 300);
  EXPECT_LT(huge->body.size(), 4u << 20);
  // And one of the whole int64 range (its span and pixel width passed int64), one pixel wide.
  auto all = Get("/api/window?t0=-9223372036854775808&t1=9223372036854775807&px=1");
  ASSERT_TRUE(all);
  EXPECT_EQ(all->status, 200) << all->body.substr(0, 300);
  // A URI over the limit and a body over the limit are refused; the server still answers.
  auto long_uri = Get("/api/sql?q=" + std::string(20000, 'x'));
  ASSERT_TRUE(long_uri);
  EXPECT_GE(long_uri->status, 400);
  {
    httplib::Client c("127.0.0.1", server_->port());
    auto big =
        c.Post("/api/sql?token=" + server_->token(), std::string(1 << 20, 'y'), "text/plain");
    if (big) {
      EXPECT_GE(big->status, 400);  // refused (or the connection closed on it)
    }
  }
  // Raw garbage on the socket.
  {
    httplib::Client c("127.0.0.1", server_->port());
    auto r = c.Get("/api/window?t0=%ff%00&t1=%&token=" + server_->token());
    if (r) {
      EXPECT_EQ(r->status, 400);
    }
  }
  auto after = Get("/api/meta");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
  // The database is unchanged and was never opened for writing.
  auto db = query::OpenQueryDb(db_path_, false);
  ASSERT_TRUE(db.ok());
  EXPECT_GT(*(*db)->QueryInt("SELECT count(*) FROM blocks"), 0);
}

TEST_F(ViewServerTest, EventFieldsAndParentsEqualSql) {
  auto db = query::OpenQueryDb(db_path_, false);
  ASSERT_TRUE(db.ok());
  // A kernel of step 123 on rank 1: its parents are forward, then step.
  auto st = (*db)->Prepare(
      "SELECT id, ts, dur, parent, depth FROM events WHERE rank = 1 AND name = 'kernel' AND "
      "step = 123 ORDER BY ts LIMIT 1 OFFSET 4");
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(*st->Step());
  const int64_t id = st->Int(0), ts = st->Int(1);
  auto r = Get("/api/event?id=" + std::to_string(id) + "&ts=" + std::to_string(ts));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Field(r->body, "dur"), std::to_string(st->Int(2)));
  EXPECT_EQ(Field(r->body, "depth"), "2");
  EXPECT_EQ(Field(r->body, "name"), "\"kernel\"");
  const std::string sql = "SELECT * FROM events WHERE rank = 1 AND ts = " + std::to_string(ts) +
                          " AND id = " + std::to_string(id);
  EXPECT_NE(r->body.find("\"sql\":\"" + sql + "\""), std::string::npos) << r->body;
  // The SQL it shows selects exactly this event.
  EXPECT_EQ(*(*db)->QueryInt("SELECT count(*) FROM (" + sql + ")"), 1);
  const size_t p = r->body.find("\"parents\":[");
  ASSERT_NE(p, std::string::npos);
  const std::string parents = r->body.substr(p);
  const size_t f = parents.find("\"name\":\"forward\"");
  const size_t s = parents.find("\"name\":\"step\"");
  EXPECT_NE(f, std::string::npos);
  EXPECT_NE(s, std::string::npos);
  EXPECT_LT(f, s);  // innermost first
  EXPECT_NE(parents.find("\"id\":" + std::to_string(st->Int(3))), std::string::npos);
}

TEST_F(ViewServerTest, WindowSearchSqlAndFlowsAgreeWithSql) {
  auto db = query::OpenQueryDb(db_path_, false);
  ASSERT_TRUE(db.ok());
  // Steps 10..20: every event of the window is accounted for per track.
  const int64_t t0 = 10 * kViewStepNs, t1 = 20 * kViewStepNs;
  auto w = Get("/api/window?t0=" + std::to_string(t0) + "&t1=" + std::to_string(t1) +
               "&px=1500&client=c1&seq=1");
  ASSERT_TRUE(w);
  ASSERT_EQ(w->status, 200) << w->body.substr(0, 300);
  EXPECT_EQ(Field(w->body, "coarse"), "false");
  const std::string count_sql = "SELECT count(*) FROM events WHERE track = 1 AND ts < " +
                                std::to_string(kViewEpoch + t1) + " AND (end_ts > " +
                                std::to_string(kViewEpoch + t0) +
                                " OR ts >= " + std::to_string(kViewEpoch + t0) + ")";
  EXPECT_NE(w->body.find("{\"track\":1,\"rank\":0,\"events\":" +
                         std::to_string(*(*db)->QueryInt(count_sql)) + ","),
            std::string::npos);
  // An older request of the same client is refused as superseded.
  auto old = Get("/api/window?t0=0&t1=1000&client=c1&seq=0");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->status, 409);
  EXPECT_NE(old->body.find("superseded"), std::string::npos);
  // Search: the glob's matches in the window, longest first.
  auto s = Get("/api/search?glob=MPI_S*&t0=" + std::to_string(t0) + "&t1=" + std::to_string(t1));
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200) << s->body;
  size_t n = 0;
  for (size_t p = 0; (p = s->body.find("\"MPI_Send\"", p)) != std::string::npos; ++p) n++;
  EXPECT_EQ(static_cast<int64_t>(n),
            *(*db)->QueryInt("SELECT count(*) FROM events WHERE name GLOB 'MPI_S*' AND ts < " +
                             std::to_string(kViewEpoch + t1) +
                             " AND end_ts >= " + std::to_string(kViewEpoch + t0)));
  EXPECT_EQ(n, 10u);
  // SQL box.
  auto q = Get("/api/sql?q=SELECT%20count(*)%20AS%20n%20FROM%20events%20WHERE%20name%3D'mark'");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->body, "{\"columns\":[\"n\"],\"rows\":[[" + std::to_string(2 * kViewSteps) +
                         "]],\"truncated\":false}");
  // Flows: one message per step (rank 0 -> 1) and, per collective, rank -> the last rank.
  auto fl = Get("/api/flows?t0=" + std::to_string(t0) + "&t1=" + std::to_string(t1));
  ASSERT_TRUE(fl);
  ASSERT_EQ(fl->status, 200) << fl->body;
  size_t msgs = 0, colls = 0;
  for (size_t p = 0; (p = fl->body.find("[\"message\",", p)) != std::string::npos; ++p) msgs++;
  for (size_t p = 0; (p = fl->body.find("[\"MPI_Allreduce\",", p)) != std::string::npos; ++p)
    colls++;
  EXPECT_EQ(static_cast<int64_t>(msgs),
            *(*db)->QueryInt("SELECT count(*) FROM p2p_messages WHERE send_ts < " +
                             std::to_string(kViewEpoch + t1) +
                             " AND recv_end_ts >= " + std::to_string(kViewEpoch + t0)));
  EXPECT_GE(msgs, 10u);
  EXPECT_EQ(colls, 10u);
  // job_flows: every pair of the job, whatever the window: the messages, and per step one
  // collective pair (two ranks: the one that is not last -> the last).
  const int64_t job = *(*db)->QueryInt("SELECT count(*) FROM p2p_messages") + kViewSteps;
  EXPECT_NE(fl->body.find(",\"job_flows\":" + std::to_string(job) + "}"), std::string::npos)
      << fl->body.substr(fl->body.size() - 80);
}

TEST(ViewCommand, PrintsUrlAndRefusesMissingDb) {
  TempDir tmp;
  int rc = 0;
  const std::string out =
      RunCommand(TracedbBin() + " view " + ShellQuote(tmp.Sub("none.tdb")) + " 2>&1", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("none.tdb"), std::string::npos) << out;
  const std::string db = tmp.Sub("v.tdb");
  ASSERT_NO_FATAL_FAILURE(WriteViewFixture(db));
  const std::string got =
      RunCommand(TracedbBin() + " view " + ShellQuote(db) + " --exit-after 0.5 2>&1", &rc);
  EXPECT_EQ(rc, 0) << got;
  EXPECT_TRUE(
      std::regex_search(got, std::regex("http://127\\.0\\.0\\.1:[0-9]+/\\?token=[0-9a-f]{32}")))
      << got;
}

// The SQL box's values as JSON (query/export/json_rows.h): integers beyond 2^53, which the
// page's JavaScript would round, as strings; the bound itself and smaller ones as numbers; reals
// in the shortest exact form; NaN as null; blobs by size; invalid UTF-8 as U+FFFD.
TEST_F(ViewServerTest, SqlValuesAsJsonKeepBigIntegersExact) {
  const std::string sql =
      "SELECT 9007199254740992 AS a, 9007199254740993 AS b, -9007199254740993 AS c, 0.25 AS d, "
      "1e6 AS e, NULL AS f, x'00ff' AS g, CAST(x'61ff62' AS TEXT) AS h";
  auto r = Get("/api/sql?q=" + httplib::detail::encode_query_param(sql));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->body,
            "{\"columns\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\"],\"rows\":[["
            "9007199254740992,\"9007199254740993\",\"-9007199254740993\",0.25,1000000,null,"
            "\"<blob 2 bytes>\",\"a\xef\xbf\xbd"
            "b\"]],\"truncated\":false}");
}

// The SQL box is read-only in every sense (an authorizer): ATTACH (which stuck on the pooled
// connection), PRAGMA writes (temp_store_directory broke the views), transactions and temp
// objects are refused with a clear error; reading PRAGMAs and the views still work, and so does
// every connection afterwards.
TEST_F(ViewServerTest, SqlBoxIsReadOnlyThroughAnAuthorizer) {
  const std::string dir = tmp_->Sub("attached.tdb");
  for (const std::string& sql :
       {"ATTACH '" + dir + "' AS x", std::string("PRAGMA temp_store_directory = '/nonexistent'"),
        std::string("PRAGMA query_only = OFF"), std::string("BEGIN"), std::string("SAVEPOINT s"),
        std::string("CREATE TEMP VIEW v AS SELECT 1"), std::string("DETACH main")}) {
    auto r = Get("/api/sql?q=" + httplib::detail::encode_query_param(sql));
    ASSERT_TRUE(r) << sql;
    EXPECT_EQ(r->status, 400) << sql << ": " << r->body;
    EXPECT_NE(r->body.find("not allowed in the viewer"), std::string::npos) << sql << r->body;
  }
  struct stat st;
  EXPECT_NE(::stat(dir.c_str(), &st), 0);  // ATTACH created no file
  // Every pooled connection still answers, the views included (several requests in a row).
  for (int i = 0; i < 8; ++i) {
    auto r = Get("/api/sql?q=" + httplib::detail::encode_query_param(
                                     "SELECT count(*) AS n FROM events, (SELECT 1 FROM "
                                     "pragma_table_info('events') LIMIT 1)"));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  }
  auto info = Get("/api/sql?q=PRAGMA%20table_info(strings)");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->status, 200) << info->body;
}

// Only this machine's names for the server pass the Host check: a page on another site whose
// name resolves to 127.0.0.1 (DNS rebinding) is refused even with the token.
TEST_F(ViewServerTest, HostHeaderIsChecked) {
  const std::string p = ":" + std::to_string(server_->port());
  for (const auto& [host, want] :
       std::vector<std::pair<std::string, int>>{{"evil.example" + p, 403},
                                                {"127.0.0.1:1", 403},
                                                {"localhost" + p, 200},
                                                {"127.0.0.1" + p, 200},
                                                {"[::1]" + p, 200}}) {
    httplib::Client c("127.0.0.1", server_->port());
    auto r = c.Get("/api/meta?token=" + server_->token(), {{"Host", host}});
    ASSERT_TRUE(r) << host;
    EXPECT_EQ(r->status, want) << host << ": " << r->body;
  }
}

// A deadline and a size bound on the SQL box: a query past its deadline is interrupted, and an
// answer of 20 values of 3 MB stops (truncated) at the 16 MB bound instead of growing to 60 MB;
// a value over the length bound is an error, not an allocation. The bounds are checked on a
// server whose deadline no honest answer reaches (a 300 ms one interrupted the 16 MB answer
// when the machine was busy with other tests).
TEST_F(ViewServerTest, SqlBoxDeadlineAndSizeAreEnforced) {
  for (const int timeout_ms : {300, 120000}) {
    view::ViewServerOptions o;
    o.db_path = db_path_;
    o.sql_timeout_ms = timeout_ms;
    auto s = view::ViewServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    std::thread t([&] { (*s)->Run(); });
    httplib::Client c("127.0.0.1", (*s)->port());
    c.set_read_timeout(120, 0);
    for (int i = 0; i < 200 && !c.Get("/"); ++i) {  // until it accepts
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    auto q = [&](const std::string& sql) {
      return c.Get("/api/sql?token=" + (*s)->token() +
                   "&q=" + httplib::detail::encode_query_param(sql));
    };
    if (timeout_ms == 300) {
      auto slow =
          q("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
            "SELECT count(*) FROM c");
      EXPECT_TRUE(slow);
      if (slow) {
        EXPECT_EQ(slow->status, 400);
        EXPECT_NE(slow->body.find("interrupt"), std::string::npos) << slow->body;
      }
    } else {
      auto big =
          q("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 20) "
            "SELECT x, printf('%.*c', 3000000, 'x') AS b FROM c");
      EXPECT_TRUE(big);
      if (big) {
        EXPECT_EQ(big->status, 200) << big->body.substr(0, 200);
        EXPECT_NE(big->body.find("\"truncated\":true"), std::string::npos);
        EXPECT_LT(big->body.size(), 20u * 3000000u / 2);  // 16 MB and the row that passed it
      }
      auto huge = q("SELECT length(zeroblob(100000000))");
      EXPECT_TRUE(huge);
      if (huge) {
        EXPECT_EQ(huge->status, 400);
        EXPECT_NE(huge->body.find("too big"), std::string::npos) << huge->body;
      }
    }
    (*s)->Stop();
    t.join();
  }
}

// `view --open` gives the browser launcher a 0600 file that leads to the URL, never the token
// on a command line; the file is gone once the server stops. A fake xdg-open (first on PATH)
// records its arguments and what it was given.
TEST(ViewCommand, OpenKeepsTheTokenOffCommandLines) {
  TempDir tmp;
  const std::string db = tmp.Sub("v.tdb");
  ASSERT_NO_FATAL_FAILURE(WriteViewFixture(db));
  ::mkdir(tmp.Sub("bin").c_str(), 0755);
  WriteFile(tmp.Sub("bin/xdg-open"),
            "#!/bin/sh\n"
            "echo \"$@\" > " +
                ShellQuote(tmp.Sub("args")) +
                "\n"
                "stat -c %a \"$1\" > " +
                ShellQuote(tmp.Sub("mode")) +
                "\n"
                "cp \"$1\" " +
                ShellQuote(tmp.Sub("page")) + "\n");
  ::chmod(tmp.Sub("bin/xdg-open").c_str(), 0755);
  int rc = 0;
  const std::string got =
      RunCommand("PATH=" + ShellQuote(tmp.Sub("bin")) + ":$PATH " + TracedbBin() + " view " +
                     ShellQuote(db) + " --open --exit-after 1 2>&1",
                 &rc);
  EXPECT_EQ(rc, 0) << got;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(got, m, std::regex("token=([0-9a-f]{32})"))) << got;
  const std::string token = m[1].str();
  const std::string args = ReadFile(tmp.Sub("args"));
  EXPECT_EQ(args.find(token), std::string::npos) << args;
  EXPECT_EQ(ReadFile(tmp.Sub("mode")), "600\n");
  EXPECT_NE(ReadFile(tmp.Sub("page")).find("token=" + token), std::string::npos);
  std::string file = args.substr(0, args.find('\n'));
  struct stat st;
  EXPECT_NE(::stat(file.c_str(), &st), 0) << file << " left behind";
}

}  // namespace
}  // namespace tracedb::testing
