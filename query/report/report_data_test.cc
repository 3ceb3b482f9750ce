// Tests of report_data.h: the Mann-Whitney U test against values worked out by hand and by the
// textbook definitions (and scipy.stats.mannwhitneyu's documented results), interval unions,
// percentiles, and the aggregates of a generated job against the built-in views (plain SQL).
#include "query/report/report_data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/db/trace_builder.h"
#include "engine/db/trace_writer.h"
#include "query/open/query_db.h"
#include "tests/hand_trace.h"
#include "tests/test_util.h"

namespace tracedb::query {
namespace {

TEST(MannWhitneyTest, ExactSeparatedSamples) {
  // a entirely below b: U_a = 0, U_b = 9. Of the C(6,3) = 20 arrangements, one has U = 0 and
  // one U = 9: two-sided p = 2/20 (scipy: mannwhitneyu([1,2,3],[4,5,6]).pvalue == 0.1).
  MannWhitney m = MannWhitneyU({1, 2, 3}, {4, 5, 6});
  EXPECT_TRUE(m.exact);
  EXPECT_DOUBLE_EQ(m.u_a, 0);
  EXPECT_DOUBLE_EQ(m.u_b, 9);
  EXPECT_NEAR(m.p, 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(m.effect, 1.0);
}

TEST(MannWhitneyTest, ExactSmallTable) {
  // n = 4 and 4, U = 1: arrangements with U <= 1 are 2 of C(8,4) = 70 (U = 0 and U = 1 have
  // one each): p = 2 * 2/70.
  MannWhitney m = MannWhitneyU({1, 2, 3, 5}, {4, 6, 7, 8});
  EXPECT_TRUE(m.exact);
  EXPECT_DOUBLE_EQ(m.u_a, 1);
  EXPECT_NEAR(m.p, 4.0 / 70.0, 1e-12);
  // Identical distributions interleaved: U = n_a n_b / 2 gives p = 1.
  MannWhitney same = MannWhitneyU({1, 4, 5, 8}, {2, 3, 6, 7});
  EXPECT_DOUBLE_EQ(same.u_a, 8);
  EXPECT_NEAR(same.p, 1.0, 1e-12);
}

TEST(MannWhitneyTest, TiesUseTheNormalApproximationWithTieCorrection) {
  // Pooled 1 2 2 2 3 3: mid-ranks 1, 3, 3, 3, 5.5, 5.5. R_a = 1 + 3 + 3 = 7, U_a = 7 - 6 = 1.
  // Ties: t = 3 and t = 2, sum(t^3 - t) = 30. var = 3*3/12 * (7 - 30/30) = 4.5.
  // z = (|1 - 4.5| - 0.5) / sqrt(4.5) = 1.41421; p = 2 * (1 - Phi(1.41421)) = 0.157299.
  MannWhitney m = MannWhitneyU({1, 2, 2}, {2, 3, 3});
  EXPECT_FALSE(m.exact);
  EXPECT_DOUBLE_EQ(m.u_a, 1);
  EXPECT_DOUBLE_EQ(m.u_b, 8);
  EXPECT_NEAR(m.z, -1.414214, 1e-6);
  EXPECT_NEAR(m.p, 0.157299, 1e-6);
}

TEST(MannWhitneyTest, LargeSamplesDetectAShiftAndNotNoise) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> n(100, 10);
  std::vector<double> a, b, c;
  for (int i = 0; i < 200; ++i) {
    a.push_back(n(rng));
    b.push_back(n(rng) * 1.1);
    c.push_back(n(rng));
  }
  MannWhitney shifted = MannWhitneyU(a, b);
  EXPECT_FALSE(shifted.exact);
  EXPECT_LT(shifted.p, 1e-6);
  EXPECT_GT(shifted.effect, 0.7);
  MannWhitney same = MannWhitneyU(a, c);
  EXPECT_GT(same.p, 0.01);
  // U_a + U_b = n_a n_b always.
  EXPECT_DOUBLE_EQ(shifted.u_a + shifted.u_b, 200.0 * 200.0);
}

TEST(MannWhitneyTest, EmptyOrConstant) {
  EXPECT_DOUBLE_EQ(MannWhitneyU({}, {1, 2}).p, 1);
  MannWhitney c = MannWhitneyU(std::vector<double>(30, 5.0), std::vector<double>(30, 5.0));
  EXPECT_DOUBLE_EQ(c.p, 1);
}

TEST(ReportDataTest, MergeIntervalsAndPercentile) {
  std::vector<Interval> v = {{10, 20}, {0, 5}, {15, 30}, {30, 31}, {40, 40}};
  EXPECT_EQ(MergeIntervals(&v), 5 + 21 + 0);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[1].begin, 10);
  EXPECT_EQ(v[1].end, 31);
  std::vector<double> p = {5, 1, 4, 2, 3};
  EXPECT_DOUBLE_EQ(Percentile(&p, 50), 3);
  EXPECT_DOUBLE_EQ(Percentile(&p, 99), 5);
  EXPECT_DOUBLE_EQ(Percentile(&p, 0), 1);
  // The nearest rank as percentile() computes it: 7 / 100.0 * 100 in doubles is
  // 7.000000000000001, whose ceil (8) the report's own copy took.
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_DOUBLE_EQ(Percentile(&hundred, 7), 7);
  EXPECT_DOUBLE_EQ(Percentile(&hundred, 99), 99);
}

// Step durations whose sum over the ranks passes int64 (a DB made elsewhere): the mean is still
// the exact mean. Two ranks, each with step 1 at -4e18 and step 2 at 4.5e18 and no events (so
// step 2 has no end and no duration): step 1 lasts 8.5e18 ns on both, whose sum is 1.7e19.
TEST(ReportDataTest, StepMeansOfDurationsWhoseSumPassesInt64) {
  testing::TempDir dir;
  const std::string path = dir.Sub("steps.tdb");
  constexpr int64_t kStart = -4'000'000'000'000'000'000, kNext = 4'500'000'000'000'000'000;
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().message();
    engine::TraceWriter* tw = w->get();
    ASSERT_TRUE(tw->BeginBatch().ok());
    for (int32_t r = 0; r < 2; ++r) {
      ASSERT_NE(testing::AddRankTrack(tw, r, 2, "report-data-test"), 0u);
      tw->AddStep(r, kStart, 1);
      tw->AddStep(r, kNext, 2);
    }
    ASSERT_TRUE(tw->CommitBatch().ok());
  }
  auto db = OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  auto steps = BuildStepSeries(db->get());
  ASSERT_TRUE(steps.ok()) << steps.status().message();
  ASSERT_EQ(steps->size(), 1u);
  const StepPoint& p = steps->front();
  EXPECT_EQ(p.step, 1);
  EXPECT_EQ(p.ranks, 2);
  EXPECT_EQ(p.start_ts, kStart);
  EXPECT_EQ(p.max_ns, kNext - kStart);
  EXPECT_EQ(p.mean_ns, kNext - kStart);
}

// Span durations whose total passes int64 (a DB made elsewhere): the total saturates at the
// int64 maximum instead of wrapping, and the mean and percentiles are the durations' own. Two
// ranks, one span "big" of 6e18 ns each (sum 1.2e19), and one "small" of 5 ns.
TEST(ReportDataTest, NameTotalsOfDurationsWhoseSumPassesInt64) {
  testing::TempDir dir;
  const std::string path = dir.Sub("spans.tdb");
  constexpr int64_t kBig = 6'000'000'000'000'000'000;
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().message();
    engine::TraceWriter* tw = w->get();
    engine::TraceBuilder b(tw);
    ASSERT_TRUE(tw->BeginBatch().ok());
    const uint32_t big = tw->Intern("big"), small = tw->Intern("small"), cat = tw->Intern("c");
    for (int32_t r = 0; r < 2; ++r) {
      const uint32_t track = testing::AddRankTrack(tw, r, 2, "report-data-test");
      ASSERT_NE(track, 0u);
      ASSERT_TRUE(b.Complete(track, 10, kBig, big, cat, nullptr).ok());
      if (r == 0) {
        ASSERT_TRUE(b.Complete(track, 20, 5, small, cat, nullptr).ok());
      }
    }
    ASSERT_TRUE(tw->CommitBatch().ok());
  }
  auto db = OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  auto names = BuildNameStats(db->get());
  ASSERT_TRUE(names.ok()) << names.status().message();
  ASSERT_EQ(names->size(), 2u);
  const NameStats& b = names->front();  // by total, largest first
  EXPECT_EQ(b.name, "big");
  EXPECT_EQ(b.count, 2u);
  EXPECT_EQ(b.total_ns, INT64_MAX);
  EXPECT_DOUBLE_EQ(b.mean_ns, static_cast<double>(kBig));
  EXPECT_EQ(b.p50_ns, kBig);
  EXPECT_EQ(b.p99_ns, kBig);
  EXPECT_EQ(names->back().name, "small");
  EXPECT_EQ(names->back().total_ns, 5);
  EXPECT_DOUBLE_EQ(names->back().mean_ns, 5.0);
}

// Collectives whose arrivals lie at both ends of the int64 range (a DB made elsewhere): every
// difference and sum of timestamps saturates at the int64 maximum instead of wrapping (UBSan
// reported none of this before; now it must stay clean). Two ranks, spans of 10 ns:
//   collective 1 (comm 1, seq 1): rank 0 at kLo, rank 1 at kHi   (skew past int64, rank 1 last)
//   collective 2 (comm 1, seq 2): rank 0 at kHi + 100, rank 1 at kHi + 40   (skew 60, rank 0 last)
TEST(ReportDataTest, CollectivesAndOverviewAtTheInt64Extremes) {
  testing::TempDir dir;
  const std::string path = dir.Sub("extremes.tdb");
  constexpr int64_t kLo = -9'000'000'000'000'000'000, kHi = 9'000'000'000'000'000'000;
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().message();
    engine::TraceWriter* tw = w->get();
    engine::TraceBuilder b(tw);
    ASSERT_TRUE(tw->BeginBatch().ok());
    const uint32_t name = tw->Intern("MPI_Allreduce"), cat = tw->Intern("mpi");
    const int64_t ts[2][2] = {{kLo, kHi + 100}, {kHi, kHi + 40}};
    for (int32_t r = 0; r < 2; ++r) {
      const uint32_t track = testing::AddRankTrack(tw, r, 2, "report-data-test");
      ASSERT_NE(track, 0u);
      for (uint64_t seq = 1; seq <= 2; ++seq) {
        engine::EventArgs a;
        a.mask = engine::EventArgs::kComm | engine::EventArgs::kSeq;
        a.comm = 1;
        a.seq = seq;
        ASSERT_TRUE(b.Complete(track, ts[r][seq - 1], 10, name, cat, &a).ok());
      }
    }
    ASSERT_TRUE(tw->CommitBatch().ok());
  }
  auto db = OpenQueryDb(path);
  ASSERT_TRUE(db.ok()) << db.status().message();

  auto cd = BuildCollectives(db->get());
  ASSERT_TRUE(cd.ok()) << cd.status().message();
  ASSERT_EQ(cd->collectives.size(), 2u);
  EXPECT_EQ(cd->collectives[0].first_arrival, kLo);
  EXPECT_EQ(cd->collectives[0].skew_ns, INT64_MAX);
  EXPECT_EQ(cd->collectives[0].last_rank, 1);
  EXPECT_EQ(cd->collectives[1].first_arrival, kHi + 40);
  EXPECT_EQ(cd->collectives[1].skew_ns, 60);
  EXPECT_EQ(cd->collectives[1].last_rank, 0);
  ASSERT_EQ(cd->ranks.size(), 2u);
  const RankCollectives &r0 = cd->ranks[0], &r1 = cd->ranks[1];
  EXPECT_EQ(r0.waited_ns, INT64_MAX);
  EXPECT_EQ(r0.late_ns, 60);
  EXPECT_EQ(r0.caused_wait_ns, 60);
  EXPECT_EQ(r1.waited_ns, 60);
  EXPECT_EQ(r1.late_ns, INT64_MAX);
  EXPECT_EQ(r1.caused_wait_ns, INT64_MAX);
  EXPECT_EQ(r1.max_skew_ns, INT64_MAX);

  // The trace spans [kLo, kHi + 110): 100 bins of ceil(1.8e19 + 110) / 100) ns, by hand.
  auto ov = BuildOverview(db->get(), 100);
  ASSERT_TRUE(ov.ok()) << ov.status().message();
  EXPECT_EQ(ov->t0, kLo);
  EXPECT_EQ(ov->bin_ns, 180'000'000'000'000'002);
  EXPECT_EQ(ov->t1, 9'000'000'000'000'000'200);
  ASSERT_EQ(ov->ranks.size(), 2u);
  EXPECT_EQ(ov->ranks[0].wall_ns, INT64_MAX);  // kHi + 110 - kLo
  EXPECT_EQ(ov->ranks[1].wall_ns, 50);
  for (const RankActivity& ra : ov->ranks) {
    EXPECT_EQ(ra.busy_ns, 20) << "rank " << ra.rank;
    ASSERT_EQ(ra.busy_bins.size(), 100u);
  }
  EXPECT_EQ(ov->ranks[0].busy_bins[0], 10);
  EXPECT_EQ(ov->ranks[0].busy_bins[99], 10);
  EXPECT_EQ(ov->ranks[1].busy_bins[99], 20);

  // The skew over time: first arrivals 0 and 1.8e19 + 40 ns after kLo, in 500 bins of
  // ceil((1.8e19 + 41) / 500) = 36,000,000,000,000,001 ns: bins 0 and 499, the second's
  // middle (1.7982e19) saturating.
  const std::vector<SkewBin> bins = BinSkew(*cd, ov->t0, 500);
  ASSERT_EQ(bins.size(), 2u);
  EXPECT_EQ(bins[0].t, 18'000'000'000'000'000);
  EXPECT_EQ(bins[0].max_ns, INT64_MAX);
  EXPECT_DOUBLE_EQ(bins[0].mean_ns, static_cast<double>(INT64_MAX));
  EXPECT_EQ(bins[0].collectives, 1);
  EXPECT_EQ(bins[1].t, INT64_MAX);
  EXPECT_EQ(bins[1].max_ns, 60);
  EXPECT_DOUBLE_EQ(bins[1].mean_ns, 60.0);
  EXPECT_EQ(bins[1].collectives, 1);
}

// BinSkew on ordinary times, by hand: 4 collectives (one of a single rank, left out) in 2 bins.
TEST(ReportDataTest, BinSkewByHand) {
  CollectiveData cd;
  auto add = [&cd](int64_t first, int64_t skew, int32_t ranks) {
    CollectiveSkew c;
    c.first_arrival = first;
    c.skew_ns = skew;
    c.ranks = ranks;
    cd.collectives.push_back(c);
  };
  add(1000, 5, 2);
  add(1001, 100, 1);  // one rank: no skew
  add(1004, 7, 4);
  add(1019, 40, 2);
  // From t0 = 1000: points at 0, 4 and 19; 2 bins of ceil(20 / 2) = 10 ns.
  const std::vector<SkewBin> bins = BinSkew(cd, 1000, 2);
  ASSERT_EQ(bins.size(), 2u);
  EXPECT_EQ(bins[0].t, 5);
  EXPECT_EQ(bins[0].max_ns, 7);
  EXPECT_DOUBLE_EQ(bins[0].mean_ns, 6.0);
  EXPECT_EQ(bins[0].collectives, 2);
  EXPECT_EQ(bins[1].t, 15);
  EXPECT_EQ(bins[1].max_ns, 40);
  EXPECT_EQ(bins[1].collectives, 1);
  EXPECT_TRUE(BinSkew(CollectiveData{}, 0, 500).empty());
}

#ifdef REPORT_JOB_GEN_PATH
// The aggregates of a generated job equal the built-in views' answers (plain SQL over events).
TEST(ReportDataTest, AggregatesMatchTheViews) {
  testing::TempDir dir;
  const std::string db_path = dir.Sub("job.tdb");
  int rc = -1;
  testing::RunCommand(std::string(REPORT_JOB_GEN_PATH) + " " + testing::ShellQuote(db_path) +
                          " 3 40 3 --straggler 1=1.3 --spike 20=4",
                      &rc);
  ASSERT_EQ(rc, 0);
  auto db = OpenQueryDb(db_path);
  ASSERT_TRUE(db.ok()) << db.status().message();
  engine::Db* d = db->get();
  auto ov = BuildOverview(d, 7);
  ASSERT_TRUE(ov.ok()) << ov.status().message();
  ASSERT_EQ(ov->ranks.size(), 3u);
  for (const auto& r : ov->ranks) {
    auto q = [&](const std::string& col) {
      return *d->QueryInt("SELECT " + col +
                          " FROM rank_time_split WHERE rank = " + std::to_string(r.rank));
    };
    EXPECT_EQ(r.compute_ns, q("compute_ns"));
    EXPECT_EQ(r.comm_ns, q("comm_ns"));
    EXPECT_EQ(r.wall_ns, q("wall_ns"));
    int64_t compute = 0, comm = 0;
    for (int b = 0; b < 7; ++b) {
      compute += r.compute_bins[b];
      comm += r.comm_bins[b];
      EXPECT_LE(r.busy_bins[b], ov->bin_ns);
    }
    EXPECT_EQ(compute, r.compute_ns);  // the bins cover the whole trace
    EXPECT_EQ(comm, r.comm_ns);
  }
  auto steps = BuildStepSeries(d);
  ASSERT_TRUE(steps.ok());
  ASSERT_EQ(steps->size(), 40u);
  for (const auto& p : *steps) {
    const std::string w = " FROM step_summary WHERE step = " + std::to_string(p.step);
    EXPECT_EQ(p.max_ns, *d->QueryInt("SELECT max_ns" + w));
    EXPECT_EQ(p.mean_ns, *d->QueryInt("SELECT mean_ns" + w));
    EXPECT_EQ(p.outlier, p.step == 20) << p.step;
  }
  auto names = BuildNameStats(d);
  ASSERT_TRUE(names.ok());
  ASSERT_EQ(names->size(), 5u);
  for (const auto& n : *names) {
    const std::string w = " FROM name_stats_all WHERE name = '" + n.name + "'";
    EXPECT_EQ(static_cast<int64_t>(n.count), *d->QueryInt("SELECT count" + w));
    EXPECT_EQ(n.total_ns, *d->QueryInt("SELECT total_ns" + w));
    EXPECT_EQ(n.p50_ns, *d->QueryInt("SELECT p50_ns" + w));
    EXPECT_EQ(n.p99_ns, *d->QueryInt("SELECT p99_ns" + w));
    EXPECT_EQ(n.per_step.size(), 40u);
    EXPECT_EQ(n.routine, n.name == "MPI_Allreduce");
    // The per-step values average over the ranks: their sum times the ranks is the total.
    double sum = 0;
    for (double v : n.per_step) sum += v;
    EXPECT_NEAR(sum * 3, static_cast<double>(n.total_ns), 1.0 * n.per_step.size());
  }
  // Collectives in one pass equal the window-function views.
  auto cd = BuildCollectives(d);
  ASSERT_TRUE(cd.ok()) << cd.status().message();
  EXPECT_EQ(static_cast<int64_t>(cd->collectives.size()),
            *d->QueryInt("SELECT count(*) FROM collectives"));
  int64_t max_skew = 0;
  for (const auto& c : cd->collectives) max_skew = std::max(max_skew, c.skew_ns);
  EXPECT_EQ(max_skew, *d->QueryInt("SELECT max(skew_ns) FROM collectives"));
  ASSERT_EQ(cd->ranks.size(), 3u);
  for (const auto& r : cd->ranks) {
    const std::string w = " WHERE rank = " + std::to_string(r.rank);
    EXPECT_EQ(r.waited_ns, *d->QueryInt("SELECT waited_ns FROM collective_wait" + w));
    EXPECT_EQ(r.late_ns, *d->QueryInt("SELECT late_ns FROM collective_wait" + w));
    EXPECT_EQ(static_cast<int64_t>(r.collectives),
              *d->QueryInt("SELECT collectives FROM collective_wait" + w));
    EXPECT_EQ(static_cast<int64_t>(r.times_last),
              *d->QueryInt("SELECT times_last FROM stragglers" + w, 0));
    EXPECT_EQ(r.caused_wait_ns, *d->QueryInt("SELECT caused_wait_ns FROM stragglers" + w, 0));
    EXPECT_EQ(r.max_skew_ns, *d->QueryInt("SELECT max_skew_ns FROM stragglers" + w, 0));
  }
  std::string basis;
  auto s = FindStragglers(d, 3, &basis);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(basis, "collectives");
  ASSERT_FALSE(s->empty());
  EXPECT_EQ((*s)[0], 1);
}
#endif

}  // namespace
}  // namespace tracedb::query
