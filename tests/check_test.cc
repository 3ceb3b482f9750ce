// Unit tests of `tracedb check`'s analysis (query/check/regression_check.h) on run summaries with
// known, injected changes: per-step values drawn from a seeded generator, a name slowed by a set
// factor, run-to-run offsets, a new name, a slow warm-up step; and of the run catalog
// (query/check/run_catalog.h) read back with plain SQL. docs/check.md "Testing".
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/db/sqlite.h"
#include "query/check/regression_check.h"
#include "query/check/run_catalog.h"
#include "tests/test_util.h"

namespace tracedb::query::check {
namespace {

// A run of `steps` steps: names forward (3 ms), backward (6 ms), MPI_Allreduce (1 ms, a
// routine), each with 3% normal noise, times `scale` (a run-to-run offset); factors[name]
// multiplies that name. The step time is their sum.
RunSummary MakeRun(uint32_t seed, int steps, double scale,
                   const std::map<std::string, double>& factors = {},
                   const std::map<std::string, double>& extra = {}) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> noise(1.0, 0.03);
  std::map<std::string, double> base = {
      {"forward", 3e6}, {"backward", 6e6}, {"MPI_Allreduce", 1e6}};
  for (const auto& [n, v] : extra) base[n] = v;
  RunSummary r;
  r.path = "run" + std::to_string(seed);
  r.ranks = 2;
  std::map<std::string, NameStats> names;
  for (int s = 0; s < steps; ++s) {
    double step = 0;
    for (const auto& [n, v] : base) {
      auto f = factors.find(n);
      const double x = v * scale * noise(gen) * (f == factors.end() ? 1.0 : f->second);
      NameStats& ns = names[n];
      ns.name = n;
      ns.cat = n == "MPI_Allreduce" ? "mpi" : "compute";
      ns.routine = n == "MPI_Allreduce";
      ns.per_step.push_back(x);
      ns.per_step_ids.push_back(s);
      ++ns.count;
      step += x;
    }
    r.step_ns.push_back(step);
    r.step_ids.push_back(s);
  }
  for (auto& [n, ns] : names) r.names.push_back(ns);
  return r;
}

const CheckedName* Find(const CheckResult& r, const std::string& name) {
  for (const auto& c : r.names) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::set<std::string> Failed(const CheckResult& r) {
  std::set<std::string> out;
  for (const auto& c : r.names) {
    if (c.failed) out.insert(c.name);
  }
  return out;
}

TEST(CheckRun, UnchangedRunsPass) {
  // 30 candidates from the same distribution as 4 baselines: no false alarm.
  std::vector<RunSummary> base;
  for (uint32_t i = 0; i < 4; ++i) base.push_back(MakeRun(100 + i, 20, 1.0));
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    const CheckResult r = CheckRun(base, MakeRun(seed, 20, 1.0), CheckOptions{});
    EXPECT_TRUE(r.passed()) << "seed " << seed;
    EXPECT_EQ(r.names.size(), 4u);  // step + 3 names
    EXPECT_EQ(r.names.front().name, "step");
  }
}

TEST(CheckRun, SlowedPhaseFailsNamingItAndTheStepOnly) {
  std::vector<RunSummary> base;
  for (uint32_t i = 0; i < 4; ++i) base.push_back(MakeRun(200 + i, 20, 1.0));
  const CheckResult r = CheckRun(base, MakeRun(7, 20, 1.0, {{"backward", 1.4}}), CheckOptions{});
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(Failed(r), (std::set<std::string>{"backward", "step"}));
  const CheckedName* b = Find(r, "backward");
  ASSERT_NE(b, nullptr);
  EXPECT_NEAR(b->change, 0.40, 0.05);
  EXPECT_LT(b->p, 1e-6);
  EXPECT_EQ(b->verdict, Verdict::kSlower);
  EXPECT_EQ(b->baseline_runs, 4);
  EXPECT_EQ(b->baseline_values, 4u * 19);  // the warm-up step of each run left out
  EXPECT_EQ(b->run_values, 19u);
  // The step time: 6 ms of 10 ms slowed by 40% = +24%.
  EXPECT_NEAR(Find(r, "step")->change, 0.24, 0.04);
}

TEST(CheckRun, FasterIsAnImprovementNotAFailure) {
  std::vector<RunSummary> base;
  for (uint32_t i = 0; i < 3; ++i) base.push_back(MakeRun(300 + i, 20, 1.0));
  const CheckResult r = CheckRun(base, MakeRun(9, 20, 1.0, {{"forward", 0.5}}), CheckOptions{});
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(r.improvements, 2);  // forward and the step time
  EXPECT_EQ(Find(r, "forward")->verdict, Verdict::kFaster);
}

TEST(CheckRun, RunToRunVariationRaisesTheThreshold) {
  // Baselines 12% apart from run to run (scale 0.88 .. 1.12, cv about 10%): a candidate at
  // +20% is significant within runs, above min_change, but inside 3 x the history's variation.
  std::vector<RunSummary> base = {MakeRun(400, 20, 0.88), MakeRun(401, 20, 1.0),
                                  MakeRun(402, 20, 1.12), MakeRun(403, 20, 0.94)};
  const RunSummary cand = MakeRun(11, 20, 1.20);
  const CheckResult r = CheckRun(base, cand, CheckOptions{});
  EXPECT_TRUE(r.passed());
  const CheckedName* b = Find(r, "backward");
  ASSERT_NE(b, nullptr);
  EXPECT_LT(b->p, 0.01);
  EXPECT_GT(b->change, 0.15);
  EXPECT_GT(b->threshold, b->change);
  EXPECT_GT(b->between_cv, 0.05);
  // With one baseline the run-to-run variation is unknown: the same change fails.
  const CheckResult one = CheckRun({MakeRun(401, 20, 1.0)}, cand, CheckOptions{});
  EXPECT_TRUE(Failed(one).count("backward"));
  // And a change far beyond the history fails with it.
  const CheckResult far = CheckRun(base, MakeRun(12, 20, 1.0, {{"backward", 1.6}}), {});
  EXPECT_TRUE(Failed(far).count("backward"));
}

TEST(CheckRun, AbsoluteThresholdIgnoresTinyNames) {
  // A 20 us name slowed by 50%: significant, relative change large, absolute change 10 us.
  std::vector<RunSummary> base;
  for (uint32_t i = 0; i < 3; ++i) base.push_back(MakeRun(500 + i, 20, 1.0, {}, {{"tiny", 2e4}}));
  const CheckResult r =
      CheckRun(base, MakeRun(13, 20, 1.0, {{"tiny", 1.5}}, {{"tiny", 2e4}}), CheckOptions{});
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(Find(r, "tiny")->reason, "below the absolute threshold");
  CheckOptions o;
  o.min_abs_ns = 5000;
  EXPECT_EQ(Failed(CheckRun(base, MakeRun(13, 20, 1.0, {{"tiny", 1.5}}, {{"tiny", 2e4}}), o)),
            (std::set<std::string>{"tiny"}));
}

TEST(CheckRun, NewAndVanishedNames) {
  std::vector<RunSummary> base;
  for (uint32_t i = 0; i < 3; ++i) base.push_back(MakeRun(600 + i, 20, 1.0, {}, {{"old", 1e6}}));
  // A new 2 ms phase per step (20% of the 10 ms step): a regression; "old" vanished: not one.
  RunSummary cand = MakeRun(14, 20, 1.0, {}, {{"injected_sleep", 2e6}});
  const CheckResult r = CheckRun(base, cand, CheckOptions{});
  const CheckedName* n = Find(r, "injected_sleep");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->verdict, Verdict::kNew);
  EXPECT_TRUE(n->failed);
  EXPECT_EQ(Find(r, "old")->verdict, Verdict::kVanished);
  EXPECT_FALSE(Find(r, "old")->failed);
  // A new name of 50 us per step is listed, not failed.
  const CheckResult small = CheckRun(base, MakeRun(15, 20, 1.0, {}, {{"helper", 5e4}}), {});
  EXPECT_EQ(Find(small, "helper")->verdict, Verdict::kNew);
  EXPECT_FALSE(Find(small, "helper")->failed);
}

TEST(CheckRun, WarmupStepIsLeftOut) {
  std::vector<RunSummary> base;
  for (uint32_t i = 0; i < 3; ++i) base.push_back(MakeRun(700 + i, 10, 1.0));
  // The candidate's first step (a start-up collective) is 50x slower, and its ids start at 5.
  RunSummary cand = MakeRun(16, 10, 1.0);
  for (auto& id : cand.step_ids) id += 5;
  for (auto& n : cand.names) {
    for (auto& id : n.per_step_ids) id += 5;
    if (n.name == "MPI_Allreduce") n.per_step[0] *= 50;
  }
  cand.step_ns[0] += 49e6;
  EXPECT_TRUE(CheckRun(base, cand, CheckOptions{}).passed());
  CheckOptions none;
  none.warmup_steps = 0;
  none.alpha = 1;  // the one slow value does not move the median: only the mean would
  EXPECT_TRUE(CheckRun(base, cand, none).passed());
}

TEST(CheckRun, TooFewStepsAreSkipped) {
  const CheckResult r = CheckRun({MakeRun(800, 3, 1.0)}, MakeRun(17, 3, 2.0), CheckOptions{});
  EXPECT_TRUE(r.passed());
  for (const auto& c : r.names) EXPECT_EQ(c.verdict, Verdict::kSkipped) << c.name;
}

TEST(RunCatalog, AddAndListAgainstPlainSql) {
  testing::TempDir dir;
  const std::string path = dir.Sub("sub/runs.db");
  EXPECT_FALSE(RunCatalog::Open(path, false).ok());  // none yet: an error naming it
  auto cat = RunCatalog::Open(path, true);
  ASSERT_TRUE(cat.ok()) << cat.status().message();
  const RunSummary s = MakeRun(900, 8, 1.0);
  for (int i = 0; i < 5; ++i) {
    RunEntry e = MakeEntry(dir.Sub("r" + std::to_string(i) + ".tdb"), i % 2 ? "pr" : "nightly", s,
                           {{"command", "mpirun -np 2 ./a"}, {"git_rev", "abc"}});
    ASSERT_TRUE((*cat)->Add(&e).ok());
  }
  auto last2 = (*cat)->List("nightly", 2);
  ASSERT_TRUE(last2.ok());
  ASSERT_EQ(last2->size(), 2u);
  EXPECT_EQ((*last2)[0].path, dir.Sub("r2.tdb"));  // oldest first
  EXPECT_EQ((*last2)[1].path, dir.Sub("r4.tdb"));
  EXPECT_EQ((*last2)[1].command, "mpirun -np 2 ./a");
  EXPECT_EQ((*last2)[1].steps, 8);
  cat->reset();
  // The same from SQL on the file.
  auto db = engine::Db::Open(path, engine::Db::Mode::kReadOnly);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(*(*db)->QueryInt("SELECT count(*) FROM runs WHERE label = 'nightly'"), 3);
  EXPECT_EQ(*(*db)->QueryInt("SELECT count(*) FROM runs WHERE git_rev = 'abc' AND steps = 8"), 5);
  EXPECT_EQ(*(*db)->QueryInt("SELECT max(id) FROM runs WHERE label = 'pr'"), 4);
  // A file that is not a catalog is an error naming it.
  testing::WriteFile(dir.Sub("junk.db"), "not sqlite at all, not at all, not at all........");
  auto junk = RunCatalog::Open(dir.Sub("junk.db"), false);
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("junk.db"), std::string::npos);
}

}  // namespace
}  // namespace tracedb::query::check
