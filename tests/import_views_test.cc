// Every built-in view on every imported format: the project's fixtures of each format
// (fixtures/import/<format>/<case>/input) and, when present, the real files of
// ../shared/fixtures, imported with the real `tracedb import`, then each view compared with
// values computed here from the rows decoded straight from the blocks (tests/db_rows.h: no
// `events` table, no view, no SQL function of tracedb): counts, totals, percentiles, the time
// covered by compute and by communication (by the mapping docs/sql.md states, restated here per
// format), steps, Horovod negotiations and arrivals. A view that cannot answer on a format must
// be empty and say why in view_notes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "engine/db/sqlite.h"
#include "query/open/query_db.h"
#include "tests/db_rows.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

namespace fs = std::filesystem;

using Rows = std::multiset<std::string>;

std::string Str(int64_t v) { return std::to_string(v); }

// The rows of `sql` on the query surface, each as "a|b|c" (NULL as "NULL").
Rows ViewRows(engine::Db* db, const std::string& sql) {
  Rows out;
  auto st = db->Prepare(sql);
  EXPECT_TRUE(st.ok()) << sql << ": " << st.status().ToString();
  if (!st.ok()) return out;
  for (;;) {
    auto row = st->Step();
    EXPECT_TRUE(row.ok()) << sql << ": " << row.status().ToString();
    if (!row.ok() || !*row) break;
    std::string line;
    for (int i = 0; i < st->ColumnCount(); ++i) {
      if (i) line += "|";
      line += st->IsNull(i) ? "NULL" : std::string(st->Text(i));
    }
    out.insert(line);
  }
  return out;
}

// ns covered by the union of intervals.
int64_t Covered(std::vector<std::pair<int64_t, int64_t>> v) {
  std::sort(v.begin(), v.end());
  int64_t total = 0, end = INT64_MIN;
  for (auto [b, e] : v) {
    if (e <= end) continue;
    total += e - std::max(b, end);
    end = e;
  }
  return total;
}

// Union of intervals as disjoint sorted intervals.
std::vector<std::pair<int64_t, int64_t>> Union(std::vector<std::pair<int64_t, int64_t>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<int64_t, int64_t>> out;
  for (auto [b, e] : v) {
    if (e <= b) continue;
    if (!out.empty() && b <= out.back().second) {
      out.back().second = std::max(out.back().second, e);
    } else {
      out.emplace_back(b, e);
    }
  }
  return out;
}

int64_t Intersection(const std::vector<std::pair<int64_t, int64_t>>& a,
                     const std::vector<std::pair<int64_t, int64_t>>& b) {
  int64_t total = 0;
  for (auto [ab, ae] : a) {
    for (auto [bb, be] : b) total += std::max<int64_t>(0, std::min(ae, be) - std::max(ab, bb));
  }
  return total;
}

bool Prefix(const std::string& s, const std::string& p) {
  if (s.size() < p.size()) return false;
  for (size_t i = 0; i < p.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != p[i]) return false;
  }
  return true;
}

// What a span counts as, per format, as docs/sql.md ("Views on imported traces") states it.
std::string Expected(const std::string& source, const DbRow& r, bool gpu) {
  if (r.cat == "compute") return "compute";
  if (r.cat == "comm" || r.cat == "Comm" || r.cat == "mpi" || r.cat == "nccl") return "comm";
  if (source == "horovod" || source == "byteps") return "comm";
  if (source == "bluefog") {
    return r.name == "FORWARD" || r.name == "GRADIENT COMPT." || r.name == "BACKWARD" ? "compute"
                                                                                      : "comm";
  }
  if (r.cat == "kernel") return Prefix(r.name, "nccl") ? "comm" : "compute";
  if (!gpu && (r.cat == "cpu_op" || r.cat == "user_annotation")) {
    for (const char* p : {"nccl:", "gloo:", "c10d::", "processgroup"}) {
      if (Prefix(r.name, p)) return "comm";
    }
    return r.cat == "cpu_op" ? "compute" : "";
  }
  return "";
}

// Nearest-rank percentile of sorted values.
int64_t Percentile(const std::vector<int64_t>& sorted, double p) {
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

// Imports `inputs` and checks every view. Returns the view_notes rows (view|answers).
void CheckViews(const std::vector<std::string>& inputs, const std::string& label) {
  SCOPED_TRACE(label);
  TempDir tmp;
  const std::string path = tmp.Sub("j.tdb");
  std::string cmd = TracedbBin() + " import";
  for (const std::string& in : inputs) cmd += " " + ShellQuote(in);
  int rc = 0;
  const std::string out = RunCommand(cmd + " -o " + ShellQuote(path) + " 2>&1", &rc);
  ASSERT_EQ(rc, 0) << out;
  const std::vector<DbRow> rows = ReadDbRows(path);
  auto opened = query::OpenQueryDb(path);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  engine::Db* db = opened->get();

  // Sources and ranks, read with plain SQL on the database's own tables.
  std::map<int32_t, std::string> source;
  for (const std::string& r : ViewRows(db, "SELECT rank, coalesce(source, '') FROM main.ranks")) {
    source[std::stoi(r.substr(0, r.find('|')))] = r.substr(r.find('|') + 1);
  }
  std::map<std::string, size_t> sizes;  // rows of each view
  auto check = [&](const std::string& view, const std::string& sql, const Rows& expected) {
    const Rows got = ViewRows(db, sql);
    EXPECT_EQ(got, expected) << view << ": " << sql;
    sizes[view] = got.size();
  };

  // spans, span_stats, name_stats_all, name_summary.
  std::map<std::pair<int32_t, std::string>, std::vector<int64_t>> by_rank_name;
  std::map<std::string, std::pair<std::vector<int64_t>, std::set<int32_t>>> by_name;
  std::map<std::tuple<int32_t, std::string, std::string, std::string>, std::vector<int64_t>>
      by_kind;
  size_t spans = 0;
  for (const DbRow& r : rows) {
    by_kind[{r.rank, r.name, r.cat, r.kind}].push_back(r.dur);
    if (r.kind != "span") continue;
    ++spans;
    by_rank_name[{r.rank, r.name}].push_back(r.dur);
    by_name[r.name].first.push_back(r.dur);
    by_name[r.name].second.insert(r.rank);
  }
  check("spans", "SELECT count(*) FROM spans", {Str(static_cast<int64_t>(spans))});
  Rows e;
  for (auto& [k, v] : by_rank_name) {
    std::sort(v.begin(), v.end());
    int64_t total = 0;
    for (int64_t d : v) total += d;
    e.insert(Str(k.first) + "|" + k.second + "|" + Str(static_cast<int64_t>(v.size())) + "|" +
             Str(total) + "|" + Str(Percentile(v, 50)) + "|" + Str(Percentile(v, 95)) + "|" +
             Str(v.back()));
  }
  check("span_stats", "SELECT rank, name, count, total_ns, p50_ns, p95_ns, max_ns FROM span_stats",
        e);
  e.clear();
  for (auto& [name, v] : by_name) {
    std::sort(v.first.begin(), v.first.end());
    int64_t total = 0;
    for (int64_t d : v.first) total += d;
    e.insert(name + "|" + Str(static_cast<int64_t>(v.first.size())) + "|" +
             Str(static_cast<int64_t>(v.second.size())) + "|" + Str(total) + "|" +
             Str(v.first.back()));
  }
  check("name_stats_all", "SELECT name, count, ranks, total_ns, max_ns FROM name_stats_all", e);
  e.clear();
  for (auto& [k, v] : by_kind) {
    int64_t total = 0;
    for (int64_t d : v) total += d;
    e.insert(Str(std::get<0>(k)) + "|" + std::get<1>(k) + "|" + std::get<2>(k) + "|" +
             std::get<3>(k) + "|" + Str(static_cast<int64_t>(v.size())) + "|" + Str(total) + "|" +
             Str(*std::min_element(v.begin(), v.end())) + "|" +
             Str(*std::max_element(v.begin(), v.end())));
  }
  check("name_summary",
        "SELECT rank, name, coalesce(cat, ''), kind, count, total_ns, min_ns, max_ns FROM "
        "name_summary",
        e);

  // rank_time_split.
  std::set<int32_t> gpu;
  for (const DbRow& r : rows) {
    if (r.cat == "kernel") gpu.insert(r.rank);
  }
  std::map<int32_t, std::map<std::string, std::vector<std::pair<int64_t, int64_t>>>> act;
  std::map<int32_t, std::pair<int64_t, int64_t>> wall;
  for (const DbRow& r : rows) {
    if (r.kind != "span") continue;
    const std::string a = Expected(source[r.rank], r, gpu.count(r.rank) > 0);
    act[r.rank][a].emplace_back(r.ts, r.ts + r.dur);
    auto [it, fresh] = wall.emplace(r.rank, std::make_pair(r.ts, r.ts + r.dur));
    if (!fresh) {
      it->second.first = std::min(it->second.first, r.ts);
      it->second.second = std::max(it->second.second, r.ts + r.dur);
    }
  }
  e.clear();
  for (auto& [rank, m] : act) {
    const int64_t overlap = Intersection(Union(m["compute"]), Union(m["comm"]));
    e.insert(Str(rank) + "|" + Str(Covered(m["compute"])) + "|" + Str(Covered(m["comm"])) + "|" +
             Str(overlap) + "|" + Str(wall[rank].second - wall[rank].first));
  }
  check("rank_time_split",
        "SELECT rank, compute_ns, comm_ns, overlap_ns, wall_ns FROM rank_time_split", e);

  // step_times and step_summary: the steps table, each step lasting until the next one, the last
  // until the rank's last event ends.
  std::map<int32_t, std::vector<std::pair<int64_t, int64_t>>> steps;  // rank -> (ts, step)
  for (const std::string& r : ViewRows(db,
                                       "SELECT rank || '|' || ts || '|' || step FROM "
                                       "main.steps")) {
    const size_t a = r.find('|'), b = r.rfind('|');
    steps[std::stoi(r.substr(0, a))].emplace_back(std::stoll(r.substr(a + 1, b - a - 1)),
                                                  std::stoll(r.substr(b + 1)));
  }
  std::map<int32_t, int64_t> last_end;
  for (const DbRow& r : rows) last_end[r.rank] = std::max(last_end[r.rank], r.ts + r.dur);
  e.clear();
  std::map<int64_t, std::vector<std::pair<int64_t, int32_t>>> per_step;  // step -> (dur, rank)
  for (auto& [rank, v] : steps) {
    std::sort(v.begin(), v.end());
    for (size_t i = 0; i < v.size(); ++i) {
      const int64_t dur = (i + 1 < v.size() ? v[i + 1].first : last_end[rank]) - v[i].first;
      e.insert(Str(rank) + "|" + Str(v[i].second) + "|" + Str(v[i].first) + "|" + Str(dur));
      per_step[v[i].second].emplace_back(dur, rank);
    }
  }
  check("step_times", "SELECT rank, step, start_ts, dur FROM step_times", e);
  e.clear();
  for (auto& [step, v] : per_step) {
    std::sort(v.begin(), v.end());
    e.insert(Str(step) + "|" + Str(static_cast<int64_t>(v.size())) + "|" + Str(v.front().first) +
             "|" + Str(v.back().first));
  }
  check("step_summary", "SELECT step, ranks, min_ns, max_ns FROM step_summary", e);

  // Horovod negotiations: each NEGOTIATE_* span's RANK_READY ticks (by track and parent).
  struct Negotiation {
    std::string name;
    int32_t rank = 0;
    std::vector<std::pair<int64_t, int32_t>> ticks;  // (ts, ready rank)
  };
  std::map<std::tuple<int32_t, uint32_t, uint64_t>, Negotiation> negotiations;
  for (const DbRow& r : rows) {
    if (r.name != "RANK_READY" || r.parent.rfind("NEGOTIATE_", 0) != 0) continue;
    if (!(r.args.mask & engine::EventArgs::kPeer)) continue;
    Negotiation& n = negotiations[{r.rank, r.track, r.parent_k}];
    n.name = r.parent;
    n.rank = r.rank;
    n.ticks.emplace_back(r.ts, r.args.peer);
  }
  e.clear();
  Rows coll, strag;
  std::map<int32_t, std::tuple<int64_t, int64_t, int64_t>> straggler;  // times, wait, max skew
  std::map<int32_t, std::tuple<int64_t, int64_t, int64_t, int64_t>> wait;
  size_t calls = 0;
  for (auto& [k, n] : negotiations) {
    // Last: the latest tick, the smallest rank among equal times.
    auto last = *std::max_element(n.ticks.begin(), n.ticks.end(), [](auto a, auto b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    const int64_t first = std::min_element(n.ticks.begin(), n.ticks.end())->first;
    e.insert(Str(n.rank) + "|" + n.name + "|" + Str(last.second));
    coll.insert(n.name.substr(10) + "|" + Str(static_cast<int64_t>(n.ticks.size())) + "|" +
                Str(last.first - first) + "|" + Str(last.second));
    calls += n.ticks.size();
    if (n.ticks.size() > 1) {
      auto& [times, caused, max_skew] = straggler[last.second];
      ++times;
      caused += last.first - first;
      max_skew = std::max(max_skew, last.first - first);
    }
    for (auto [ts, rank] : n.ticks) {
      auto& [count, waited, late, times_last] = wait[rank];
      ++count;
      waited += last.first - ts;
      late += ts - first;
      times_last += rank == last.second ? 1 : 0;
    }
  }
  const size_t ticks = calls;
  // Collectives recorded with a sequence number (an export of a recorded MPI, PyTorch or NCCL
  // job): one call per event, matched across ranks by (comm, seq); the last to arrive is the
  // latest ts, the smallest rank among equal times.
  std::map<std::pair<int64_t, uint64_t>,
           std::pair<std::string, std::vector<std::pair<int64_t, int32_t>>>>
      by_seq;  // (comm or -1, seq) -> (name, (ts, rank))
  for (const DbRow& r : rows) {
    const bool collective =
        r.cat == "mpi" || r.cat == "comm" || (r.cat == "nccl" && r.kind == "instant");
    if (!collective || !(r.args.mask & engine::EventArgs::kSeq)) continue;
    const int64_t comm = (r.args.mask & engine::EventArgs::kComm) ? int64_t{r.args.comm} : -1;
    auto& [name, arrivals] = by_seq[{comm, r.args.seq}];
    name = r.name;
    arrivals.emplace_back(r.ts, r.rank);
  }
  for (auto& [k, c] : by_seq) {
    const auto& arrivals = c.second;
    auto last = *std::max_element(arrivals.begin(), arrivals.end(), [](auto a, auto b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    const int64_t first = std::min_element(arrivals.begin(), arrivals.end())->first;
    coll.insert(c.first + "|" + Str(static_cast<int64_t>(arrivals.size())) + "|" +
                Str(last.first - first) + "|" + Str(last.second));
    calls += arrivals.size();
    if (arrivals.size() > 1) {
      auto& [times, caused, max_skew] = straggler[last.second];
      ++times;
      caused += last.first - first;
      max_skew = std::max(max_skew, last.first - first);
    }
    for (auto [ts, rank] : arrivals) {
      auto& [count, waited, late, times_last] = wait[rank];
      ++count;
      waited += last.first - ts;
      late += ts - first;
      times_last += rank == last.second ? 1 : 0;
    }
  }
  check("negotiations", "SELECT rank, name, last_rank FROM negotiations", e);
  check("negotiation_ticks", "SELECT count(*) FROM negotiation_ticks",
        {Str(static_cast<int64_t>(ticks))});
  check("collective_calls", "SELECT count(*) FROM collective_calls",
        {Str(static_cast<int64_t>(calls))});
  check("collective_arrivals", "SELECT count(*) FROM collective_arrivals",
        {Str(static_cast<int64_t>(calls))});
  check("collectives", "SELECT name, ranks, skew_ns, last_rank FROM collectives", coll);
  for (auto& [rank, t] : straggler) {
    strag.insert(Str(rank) + "|" + Str(std::get<0>(t)) + "|" + Str(std::get<1>(t)) + "|" +
                 Str(std::get<2>(t)));
  }
  check("stragglers", "SELECT rank, times_last, caused_wait_ns, max_skew_ns FROM stragglers",
        strag);
  e.clear();
  for (auto& [rank, t] : wait) {
    e.insert(Str(rank) + "|" + Str(std::get<0>(t)) + "|" + Str(std::get<1>(t)) + "|" +
             Str(std::get<2>(t)) + "|" + Str(std::get<3>(t)));
  }
  check("collective_wait",
        "SELECT rank, collectives, waited_ns, late_ns, times_last FROM collective_wait", e);
  // No imported format has MPI point-to-point calls.
  for (const char* v : {"p2p_sends", "p2p_receives", "p2p_messages"}) {
    check(v, std::string("SELECT * FROM ") + v, {});
  }
  check("clock_alignment", "SELECT rank, clock_method FROM clock_alignment",
        ViewRows(db, "SELECT rank, clock_method FROM main.ranks"));
  // The GPU views: a Kineto trace's kernel events (cat 'kernel'); no imported format has
  // CUPTI's activity records or the NCCL plugin's tasks.
  {
    std::map<std::string, std::pair<std::vector<int64_t>, std::set<int32_t>>> kernels;
    std::set<int32_t> kernel_ranks;
    for (const DbRow& r : rows) {
      if (r.kind != "span" || r.cat != "kernel") continue;
      kernels[r.name].first.push_back(r.dur);
      kernels[r.name].second.insert(r.rank);
      kernel_ranks.insert(r.rank);
    }
    Rows k, ranks;
    for (const auto& [name, v] : kernels) {
      int64_t total = 0;
      for (int64_t d : v.first) total += d;
      k.insert(name + "|" + Str(static_cast<int64_t>(v.first.size())) + "|" +
               Str(static_cast<int64_t>(v.second.size())) + "|" + Str(total));
    }
    for (int32_t r : kernel_ranks) ranks.insert(Str(r));
    check("gpu_kernels", "SELECT name, instances, ranks, total_ns FROM gpu_kernels", k);
    check("gpu_step_time", "SELECT DISTINCT rank FROM gpu_step_time", ranks);
    check("nccl_ops", "SELECT * FROM nccl_ops", {});
    check("nccl_collectives", "SELECT * FROM nccl_collectives", {});
  }

  // The why views (query/analysis/): their rows are checked on hand-built and recorded traces
  // (why_views_test, why_mpi); here view_notes must say whether they answer.
  for (const char* v : {"wait_states", "wait_state_totals", "root_causes", "critical_path",
                        "critical_path_names", "critical_path_whatif"}) {
    sizes[v] = 0;
  }

  // view_notes: one row per built-in view; a view that answers nothing says "no" and why, and
  // one that says "no" answers nothing.
  const Rows notes = ViewRows(db, "SELECT view, answers, note FROM view_notes");
  EXPECT_EQ(notes.size(), sizes.size());
  for (const std::string& n : notes) {
    const std::string view = n.substr(0, n.find('|'));
    const std::string rest = n.substr(n.find('|') + 1);
    const std::string answers = rest.substr(0, rest.find('|'));
    const std::string note = rest.substr(rest.find('|') + 1);
    const Rows got = ViewRows(db, "SELECT count(*) FROM " + view);
    // "partly" may still be empty (stragglers of a one-rank Horovod run).
    if (answers == "no") {
      EXPECT_EQ(got, Rows{"0"}) << n;
    }
    if (answers == "yes") {
      EXPECT_NE(got, Rows{"0"}) << n;
    }
    EXPECT_EQ(answers == "yes", note.empty()) << n;
  }
}

std::vector<std::string> Inputs(const std::string& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path().string());
  std::sort(v.begin(), v.end());
  return v;
}

TEST(ImportViews, EveryViewOnEveryFormatsFixtures) {
  const std::string root = SourceRoot() + "/fixtures/import/";
  std::set<std::string> formats;
  for (const char* c :
       {"horovod/old_framing", "horovod/new_framing", "bluefog/ranks", "byteps/trace_dir",
        "kineto/distributed_gz", "kineto/older_profiler", "chrome/array_form",
        "chrome/tracedb_export", "mpitrace/mpitrace_new", "mpitrace/hpctw_old", "mpip/v35"}) {
    // The MPI profile cases hold their inputs beside expected.csv.
    std::vector<std::string> inputs;
    if (fs::is_directory(root + c + "/input")) {
      inputs = Inputs(root + c + "/input");
    } else {
      for (const std::string& f : Inputs(root + c)) {
        if (!f.ends_with(".csv")) inputs.push_back(f);
      }
    }
    CheckViews(inputs, c);
    formats.insert(std::string(c).substr(0, std::string(c).find('/')));
  }
  EXPECT_EQ(formats.size(), 7u);
}

TEST(ImportViews, EveryViewOnTheRealFiles) {
  const std::string dir = SharedFixturePath();  // a failure under CI=true when absent
  if (dir.empty()) GTEST_SKIP() << "../shared/fixtures is absent";
  for (const char* f : {"horovod/andrewor14_horovod_timeline_mpi_allreduce.json",
                        "horovod/alcf_timeline_cpu_n1.json", "byteps/zhtang_comm.json",
                        "mpip/hpc-mpip_driver.8.253.1.mpiP"}) {
    CheckViews({dir + "/" + f}, f);
  }
  CheckViews(Inputs(dir + "/kineto"), "kineto");
  CheckViews({dir + "/mpitrace/mlprof_polaris_deepspeed_mpi_profile.392815.0",
              dir + "/mpitrace/mlprof_polaris_deepspeed_mpi_profile.392815.1"},
             "mpitrace");
}

// Hand-derived values on the Bluefog fixture (rank 0: COMMUNICATE phases cover 100-113 µs, the
// FORWARD and GRADIENT COMPT. activities 120-130 µs) and the Kineto one (rank 3, a GPU rank:
// compute is the sgemm kernel, communication the two NCCL kernels).
TEST(ImportViews, HandDerivedTimeSplit) {
  const std::string root = SourceRoot() + "/fixtures/import/";
  TempDir tmp;
  int rc = 0;
  std::string out =
      RunCommand(TracedbBin() + " import " + ShellQuote(root + "bluefog/ranks/input") + " -o " +
                     tmp.Sub("b.tdb") + " 2>&1",
                 &rc);
  ASSERT_EQ(rc, 0) << out;
  auto db = query::OpenQueryDb(tmp.Sub("b.tdb"));
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(ViewRows(db->get(),
                     "SELECT rank, compute_ns, comm_ns, overlap_ns, wall_ns FROM "
                     "rank_time_split"),
            (Rows{"0|10000|13000|0|30000", "1|0|7000|0|7000"}));
  out =
      RunCommand(TracedbBin() + " import " +
                     ShellQuote(root + "kineto/distributed_gz/input/node_worker.pt.trace.json.gz") +
                     " -o " + tmp.Sub("k.tdb") + " 2>&1",
                 &rc);
  ASSERT_EQ(rc, 0) << out;
  db = query::OpenQueryDb(tmp.Sub("k.tdb"));
  ASSERT_TRUE(db.ok());
  // sgemm [31500, 43750) ns; NCCL kernels [210000, 210000 + d) and [700000, 710000).
  const Rows split =
      ViewRows(db->get(), "SELECT rank, compute_ns, overlap_ns FROM rank_time_split");
  EXPECT_EQ(split, (Rows{"3|12250|0"}));
}

}  // namespace
}  // namespace tracedb::testing
