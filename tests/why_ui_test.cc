// The "why" analyses where people see them: the "Why" section of `tracedb report html` and the
// /api/why overlay of `tracedb view` (view/why_overlay.h), on a trace with one delay injected at
// a known (step, rank, phase), and on a trace without communication. Known answers, worked out
// from the construction below, not read back from the analyses:
//   4 ranks, 6 steps of 1 ms from kT0; per step every rank runs `forward` 100 us, then the
//   phase kPhase 200 us, then MPI_Allreduce (comm 1, seq = step) until 10 us after the last
//   rank arrives. At step 3 rank 2 spends 800 us in kPhase (600 us injected): ranks 0, 1, 3
//   wait 600 us each in MPI_Allreduce (wait_at_nxn, waited for rank 2), 1.8 ms in all, and
//   rank 2's kPhase from 3.1 ms to 3.9 ms is on the critical path (kPhase's time on the path:
//   5 x 200 us + 800 us). No other wait exists (all ranks arrive together). kPhase is hostile:
//   quotes, '<', "</script>" and "<!--<script>".
#include <gtest/gtest.h>
#include <httplib.h>

#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "engine/db/trace_builder.h"
#include "engine/db/trace_writer.h"
#include "query/open/query_db.h"
#include "tests/hand_trace.h"
#include "tests/test_util.h"
#include "view/view_server.h"
#include "view/why_overlay.h"

namespace tracedb::testing {
namespace {

constexpr int64_t kUs = 1000;
constexpr int64_t kT0 = 1700000000000000000;
constexpr int kRanks = 4, kSteps = 6, kSlowStep = 3, kSlowRank = 2;
constexpr int64_t kDelay = 600 * kUs;
const char* const kPhase = "bw<\"x\">&</script><!--<script>";

// Writes the trace; `comm`: with the allreduces (else only the compute phases).
void WriteJob(const std::string& path, bool comm) {
  auto w = engine::TraceWriter::Open(path);
  ASSERT_TRUE(w.ok()) << w.status().message();
  engine::TraceWriter* tw = w->get();
  engine::TraceBuilder b(tw);
  ASSERT_TRUE(tw->BeginBatch().ok());
  const uint32_t mpi = tw->Intern("mpi"), compute = tw->Intern("compute");
  const uint32_t fwd = tw->Intern("forward"), phase = tw->Intern(kPhase),
                 ar = tw->Intern("MPI_Allreduce");
  for (int r = 0; r < kRanks; ++r) {
    const uint32_t t = AddRankTrack(tw, r, kRanks, "why-ui-test");
    for (int step = 0; step < kSteps; ++step) {
      const int64_t base = kT0 + step * 1000 * kUs;
      tw->AddStep(r, base, step);
      const int64_t bw = 200 * kUs + (step == kSlowStep && r == kSlowRank ? kDelay : 0);
      const int64_t end = base + 310 * kUs + (step == kSlowStep ? kDelay : 0);
      ASSERT_TRUE(b.Complete(t, base, 100 * kUs, fwd, compute, nullptr).ok());
      ASSERT_TRUE(b.Complete(t, base + 100 * kUs, bw, phase, compute, nullptr).ok());
      if (!comm) continue;
      engine::EventArgs a;
      a.mask = engine::EventArgs::kSeq | engine::EventArgs::kComm;
      a.comm = 1;
      a.seq = static_cast<uint64_t>(step + 1);
      const int64_t in = base + 100 * kUs + bw;
      ASSERT_TRUE(b.Complete(t, in, end - in, ar, mpi, &a).ok());
    }
  }
  ASSERT_TRUE(tw->CommitBatch().ok());
}

// `s` as a JSON string's content (quotes and backslashes escaped); `in_page`: then every '<' as
// \u003c, as the report's data element must have it.
std::string JsonText(const std::string& s, bool in_page = false) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '<' && in_page) {
      out += "\\u003c";
      continue;
    }
    out += c;
  }
  return out;
}
std::string JsonInPage(const std::string& s) { return JsonText(s, true); }

class WhyUi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    ASSERT_NO_FATAL_FAILURE(WriteJob(tmp_->Sub("delay.tdb"), true));
    ASSERT_NO_FATAL_FAILURE(WriteJob(tmp_->Sub("nocomm.tdb"), false));
  }
  static void TearDownTestSuite() { delete tmp_; }

  // Writes the report of `db` and returns the page's data element (empty on failure).
  static std::string ReportData(const std::string& db, std::string* page,
                                const std::string& options = "") {
    const std::string out = tmp_->Sub("r.html");
    int rc = 0;
    const std::string log = RunCommand(TracedbBin() + " report html " + ShellQuote(db) + " -o " +
                                           ShellQuote(out) + options + " 2>&1",
                                       &rc);
    EXPECT_EQ(rc, 0) << log;
    *page = ReadFile(out);
    const std::string open = "<script id=\"tracedb-data\" type=\"application/json\">";
    const size_t at = page->find(open);
    if (at == std::string::npos) return "";
    const size_t end = page->find("</script>", at);
    return page->substr(at + open.size(), end - at - open.size());
  }

  static TempDir* tmp_;
};
TempDir* WhyUi::tmp_ = nullptr;

TEST_F(WhyUi, ReportNamesTheInjectedDelayEscaped) {
  std::string page;
  const std::string data = ReportData(tmp_->Sub("delay.tdb"), &page);
  ASSERT_FALSE(data.empty());
  // The hostile name never reaches the page raw, and the data element holds no '<' at all.
  EXPECT_EQ(page.find(kPhase), std::string::npos);
  EXPECT_EQ(page.find("<!--<script>"), std::string::npos);
  EXPECT_EQ(data.find('<'), std::string::npos);
  // The top cause, in explain's words, about the injected (step, rank, phase).
  const std::string first =
      "\"why\":{\"causes\":[{\"step\":3,\"rank\":2,\"name\":\"" + JsonInPage(kPhase) + "\"";
  EXPECT_NE(data.find(first), std::string::npos) << data.substr(data.find("\"why\""), 600);
  const std::string text = "step 3: rank 2 spent 600.00 us more in " + JsonInPage(kPhase) +
                           " than the median rank; ranks 0, 1, 3 waited 1.80 ms in MPI_Allreduce";
  EXPECT_NE(data.find("\"text\":\"" + text), std::string::npos);
  // Wait-state totals: the three waits of 600 us, nothing else.
  EXPECT_NE(
      data.find("\"wait_states\":[{\"pattern\":\"wait_at_nxn\",\"waits\":3,\"wait_ns\":1800000}]"),
      std::string::npos);
  // The phase is on the critical path; the page has the section and its empty-case words.
  EXPECT_NE(data.find("{\"name\":\"" + JsonInPage(kPhase) + "\",\"ns\":1800000}"),
            std::string::npos)
      << data.substr(data.find("\"critical_path_ns\""), 400);
  EXPECT_NE(data.find("\"comm\":true"), std::string::npos);
  EXPECT_NE(page.find("function why()"), std::string::npos);
  EXPECT_NE(page.find("No waits found"), std::string::npos);
}

TEST_F(WhyUi, ReportWithoutCommunicationSaysNoWaits) {
  std::string page;
  const std::string data = ReportData(tmp_->Sub("nocomm.tdb"), &page);
  ASSERT_FALSE(data.empty());
  EXPECT_NE(data.find("\"why\":{\"causes\":[],"), std::string::npos);
  EXPECT_NE(data.find("\"wait_states\":[]"), std::string::npos);
  EXPECT_NE(data.find("\"comm\":false"), std::string::npos);
  EXPECT_NE(page.find("the trace has no communication events"), std::string::npos);
}

TEST_F(WhyUi, ReportLeavesTheSectionOutAboveTheEventBound) {
  // 4 ranks x 6 steps x 3 events = 72 events: above a bound of 71 the section is left out
  // and says why; at 72 it is there.
  std::string page;
  std::string data = ReportData(tmp_->Sub("delay.tdb"), &page, " --why-max-events 71");
  EXPECT_NE(data.find("\"why\":{\"skipped\":\"72 events, more than 71 (--why-max-events)"),
            std::string::npos)
      << data.substr(0, 300);
  data = ReportData(tmp_->Sub("delay.tdb"), &page, " --why-max-events 72");
  EXPECT_NE(data.find("\"why\":{\"causes\":[{\"step\":3,\"rank\":2,"), std::string::npos);
  data = ReportData(tmp_->Sub("delay.tdb"), &page, " --why-max-events 0");
  EXPECT_NE(data.find("\"why\":{\"skipped\":\"left out"), std::string::npos);
}

// /api/why rows, parsed: pieces [rank, ts, dur, name, step, order], waits [rank, ts, dur,
// pattern, waited_for, id, late_id, call, step].
struct WhyRows {
  std::vector<std::vector<std::string>> pieces, waits;
};
WhyRows Parse(const std::string& body) {
  WhyRows out;
  const std::string str = "\"((?:[^\"\\\\]|\\\\.)*)\"";
  const std::regex piece("\\[(-?\\d+),(-?\\d+),(\\d+)," + str + ",(null|-?\\d+),(\\d+)\\]");
  const std::regex wait("\\[(\\d+),(-?\\d+),(\\d+),\"(\\w+)\",(\\d+),\"?(\\d+)\"?,\"?(\\d+)\"?," +
                        str + ",(null|-?\\d+)\\]");
  const size_t p = body.find("\"pieces\""), w = body.find("\"waits\""),
               e = body.find("\"truncated\"");
  if (p == std::string::npos || w == std::string::npos || e == std::string::npos) return out;
  const std::string ps = body.substr(p, w - p), ws = body.substr(w, e - w);
  for (std::sregex_iterator it(ps.begin(), ps.end(), piece), end; it != end; ++it)
    out.pieces.push_back({(*it)[1], (*it)[2], (*it)[3], (*it)[4], (*it)[5], (*it)[6]});
  for (std::sregex_iterator it(ws.begin(), ws.end(), wait), end; it != end; ++it)
    out.waits.push_back(
        {(*it)[1], (*it)[2], (*it)[3], (*it)[4], (*it)[5], (*it)[6], (*it)[7], (*it)[8], (*it)[9]});
  return out;
}

TEST_F(WhyUi, ViewEndpointReturnsThePathAndTheWaitsOfTheWindow) {
  view::ViewServerOptions o;
  o.db_path = tmp_->Sub("delay.tdb");
  auto s = view::ViewServer::Start(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::unique_ptr<view::ViewServer> server = std::move(*s);
  std::thread run([&server] { server->Run(); });
  httplib::Client c("127.0.0.1", server->port());
  c.set_read_timeout(30, 0);
  auto get = [&](const std::string& q) {
    httplib::Result r = c.Get("/api/why?" + q + "&token=" + server->token());
    return r ? r->status == 200 ? r->body : "HTTP " + std::to_string(r->status) + r->body
             : std::string("no answer");
  };
  for (int i = 0; i < 200 && !c.Get("/"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // The slow step's window (times after the job's first event, meta.origin = kT0).
  const int64_t lo = kSlowStep * 1000 * kUs, hi = lo + 1000 * kUs;
  std::string body = get("t0=" + std::to_string(lo) + "&t1=" + std::to_string(hi));
  for (int i = 0; i < 100 && body.find("\"pending\"") != std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    body = get("t0=" + std::to_string(lo) + "&t1=" + std::to_string(hi));
  }
  const WhyRows rows = Parse(body);
  // The waits: ranks 0, 1, 3, 600 us each from 3.3 ms, for rank 2, in MPI_Allreduce.
  ASSERT_EQ(rows.waits.size(), 3u) << body;
  for (size_t i = 0; i < 3; ++i) {
    const auto& w = rows.waits[i];
    EXPECT_TRUE(w[0] == "0" || w[0] == "1" || w[0] == "3") << w[0];
    EXPECT_EQ(w[1], std::to_string(lo + 300 * kUs));
    EXPECT_EQ(w[2], std::to_string(kDelay));
    EXPECT_EQ(w[3], "wait_at_nxn");
    EXPECT_EQ(w[4], "2");
    EXPECT_EQ(w[7], "MPI_Allreduce");
    EXPECT_EQ(w[8], "3");
  }
  // Rank 2's injected phase is on the path, whole: 3.1 to 3.9 ms.
  bool injected = false;
  for (const auto& p : rows.pieces) {
    if (p[0] == "2" && p[3] == JsonText(kPhase) && std::stoll(p[1]) <= lo + 100 * kUs &&
        std::stoll(p[1]) + std::stoll(p[2]) >= lo + 900 * kUs && p[4] == "3")
      injected = true;
  }
  EXPECT_TRUE(injected) << body;
  EXPECT_NE(body.find("\"truncated\":false"), std::string::npos);
  EXPECT_NE(body.find("step 3: rank 2 spent 600.00 us more in bw"), std::string::npos);
  // A window of an earlier step has its path but no wait; an empty window is a 400.
  const WhyRows early = Parse(get("t0=0&t1=" + std::to_string(1000 * kUs)));
  EXPECT_TRUE(early.waits.empty());
  EXPECT_FALSE(early.pieces.empty());
  for (const auto& p : early.pieces) EXPECT_EQ(p[4], "0") << p[0] << " " << p[1];
  EXPECT_NE(get("t0=5&t1=5").find("HTTP 400"), std::string::npos);
  EXPECT_NE(get("t0=x&t1=5").find("HTTP 400"), std::string::npos);
  server->Stop();
  run.join();
  // A server whose bound the job exceeds answers an error that says so, and keeps serving.
  o.why_max_events = 71;
  auto bounded = view::ViewServer::Start(o);
  ASSERT_TRUE(bounded.ok()) << bounded.status().ToString();
  std::thread run2([&bounded] { (*bounded)->Run(); });
  httplib::Client c2("127.0.0.1", (*bounded)->port());
  for (int i = 0; i < 200 && !c2.Get("/"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const std::string q = "/api/why?t0=0&t1=1000&token=" + (*bounded)->token();
  httplib::Result r = c2.Get(q);
  for (int i = 0; i < 100 && r && r->body.find("\"pending\"") != std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    r = c2.Get(q);
  }
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  EXPECT_NE(r->body.find("72 events, more than 71"), std::string::npos) << r->body;
  EXPECT_TRUE(c2.Get("/api/meta?token=" + (*bounded)->token()));
  (*bounded)->Stop();
  run2.join();
}

TEST_F(WhyUi, OverlayAnswersAreBounded) {
  auto db = query::OpenQueryDb(tmp_->Sub("delay.tdb"));
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  view::WhyOverlay why;
  // Above its event bound (72 events here) the overlay refuses, saying why.
  const Status refused = why.Build(db->get(), 71);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("72 events, more than 71"), std::string::npos)
      << refused.message();
  ASSERT_TRUE(why.Build(db->get(), 72).ok());
  EXPECT_EQ(why.job_waits(), 3u);
  const std::string one = why.WindowJson(kT0, kT0 + kSteps * 1000 * kUs, kT0, 1);
  const WhyRows rows = Parse(one);
  EXPECT_EQ(rows.pieces.size(), 1u);
  EXPECT_EQ(rows.waits.size(), 1u);
  EXPECT_NE(one.find("\"truncated\":true"), std::string::npos);
  const WhyRows all = Parse(why.WindowJson(kT0, kT0 + kSteps * 1000 * kUs, kT0));
  EXPECT_EQ(all.pieces.size(), why.job_pieces());
  EXPECT_EQ(all.waits.size(), 3u);
}

}  // namespace
}  // namespace tracedb::testing
