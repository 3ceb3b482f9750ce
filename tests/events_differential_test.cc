// Differential test of the `events` virtual table (in the spirit of SQLite's sqllogictest and
// SQLancer): a generated trace is written into a real trace database (TraceWriter +
// TraceBuilder, the code compaction and the importers use, in several batches so every track
// spans several blocks), `events` is copied into a plain SQLite table `ref`, and random
// queries run against both must give the same rows: as multisets, in order when the query
// orders them fully, and for `ORDER BY dur DESC LIMIT n` (the top-n search) the same
// durations in the same order, each row one of the rows the WHERE clause selects.
// Every built-in view is compared with its plain-SQL definition (query::ViewsReferenceSql: the
// SQL that views computed in C++ replace) over `ref`.
//
// Environment:
//   TRACEDB_DIFF_QUERIES=N   queries per seed (default 5000); the documented long run is 1000000
//   TRACEDB_DIFF_SEED=S      a second seed, run after the fixed one (a new trace and new queries)
//   TRACEDB_DIFF_FIRST=N     start at query N (each query has its own generator seed), to rerun
//                            a reported mismatch in seconds
// One side failing with an evaluation error (malformed JSON) while the other returns rows is
// not a mismatch if both agree with json_extract made total (IsEvaluationError, TotalJson);
// such queries are counted and printed at the end of a seed.
// A mismatch prints the seed, the query number, both answers and a reproduction with the
// WHERE clause shrunk to what still disagrees.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "engine/db/trace_builder.h"
#include "engine/db/trace_writer.h"
#include "query/open/query_db.h"
#include "query/views/views.h"
#include "tests/test_util.h"

namespace tracedb::testing {
namespace {

using engine::EventArgs;
using engine::RowKind;

// ---- the generated trace ----

struct NameSpec {
  const char* name;
  std::vector<const char*> cats;  // "" = no category
};

const std::vector<NameSpec>& Names() {
  static const std::vector<NameSpec> names = {
      {"forward", {"compute", "phase"}},
      {"backward", {"compute"}},
      {"COMMUNICATE", {"comm", "mpi"}},
      {"MPI_Allreduce", {"mpi"}},
      {"MPI_Send", {"mpi"}},
      {"MPI_Recv", {"mpi"}},
      {"MPI_Irecv", {"mpi"}},
      {"MPI_Wait", {"mpi", "user"}},
      {"NEGOTIATE_ALLREDUCE", {"comm"}},
      {"ncclAllReduce", {"nccl", "cuda"}},
      {"marker", {"", "user"}},
      {"optimizer", {"compute", ""}},
  };
  return names;
}

// What the generator wrote, counted independently of the database.
struct Tally {
  int64_t rows = 0, spans = 0, instants = 0, counters = 0, flows = 0;
  int64_t sum_dur = 0, with_bytes = 0, with_json = 0;
};

class TraceGen {
 public:
  TraceGen(uint64_t seed, engine::TraceWriter* w)
      : rng_(seed), w_(w), b_(w), interleave_(seed % 2 == 1) {}

  Status Run(Tally* tally) {
    tally_ = tally;
    constexpr int kRanks = 4, kRounds = 160, kRoundsPerBatch = 12;
    struct RankTracks {
      uint32_t main, comm, lane, counter;
      int64_t t_main, t_comm, t_lane, t_counter;
      uint64_t seq = 0, flow = 0;
      int64_t step = 0;
    };
    std::vector<RankTracks> ranks(kRanks);
    TRACEDB_RETURN_IF_ERROR(w_->BeginBatch());
    for (int r = 0; r < kRanks; ++r) {
      engine::RankRecord rec;
      rec.rank = r;
      rec.host = "node" + std::to_string(r / 2);
      rec.world_size = kRanks;
      rec.clock_method = "realtime";
      rec.source = "differential-test";
      TRACEDB_RETURN_IF_ERROR(w_->SetRank(rec));
      ranks[r].t_main = ranks[r].t_comm = ranks[r].t_lane = ranks[r].t_counter =
          1'000'000'000 + r * 137;
    }
    // Track ids rank by rank, or (odd seeds) interleaved across ranks: the grouped scan keeps
    // `ORDER BY track` rank by rank only in the first case.
    auto add_track = [&](int r, int which) {
      engine::TrackSpec s;
      s.rank = r;
      s.kind = which == 2 ? "lane" : which == 3 ? "counter" : "thread";
      s.name = which == 0   ? "main"
               : which == 1 ? "comm"
               : which == 2 ? "grad.fc" + std::to_string(r % 2)
                            : "memory";
      s.tid = which == 0 ? 1000 + r : which == 1 ? 2000 + r : -1;
      s.local_id = which < 2 ? which + 1 : -1;
      uint32_t* slot[] = {&ranks[r].main, &ranks[r].comm, &ranks[r].lane, &ranks[r].counter};
      *slot[which] = w_->Track(s);
    };
    for (int i = 0; i < kRanks * 4; ++i) {
      if (interleave_)
        add_track(i % kRanks, i / kRanks);
      else
        add_track(i / 4, i % 4);
    }
    for (int round = 0; round < kRounds; ++round) {
      if (round > 0 && round % kRoundsPerBatch == 0) {
        TRACEDB_RETURN_IF_ERROR(w_->CommitBatch());
        TRACEDB_RETURN_IF_ERROR(w_->BeginBatch());
      }
      for (int r = 0; r < kRanks; ++r) {
        RankTracks& t = ranks[r];
        rank_ = r;
        seq_ = &t.seq;
        flow_ = &t.flow;
        if (round % 10 == 0) w_->AddStep(r, t.t_main, t.step++);
        TRACEDB_RETURN_IF_ERROR(Item(t.main, &t.t_main, 0));
        TRACEDB_RETURN_IF_ERROR(Item(t.comm, &t.t_comm, 0));
        if (Chance(0.5)) TRACEDB_RETURN_IF_ERROR(Item(t.lane, &t.t_lane, 1));
        if (Chance(0.4)) {
          t.t_counter += Int(1, 3000);
          const uint32_t name = w_->Intern(Chance(0.5) ? "loss" : "memory_mb");
          TRACEDB_RETURN_IF_ERROR(b_.Counter(t.counter, t.t_counter, name, 0,
                                             static_cast<double>(Int(-500, 500)) / 8.0));
          Count(RowKind::kCounter, 0, nullptr, "");
        }
      }
    }
    return w_->CommitBatch();
  }

 private:
  int64_t Int(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  // Durations with ties on purpose: a few round values recur.
  int64_t Dur() {
    if (Chance(0.15)) return std::vector<int64_t>{100, 250, 1000, 4096}[Int(0, 3)];
    return Int(1, 20000);
  }
  uint32_t Cat(const NameSpec& n) {
    const char* c = n.cats[static_cast<size_t>(Int(0, static_cast<int64_t>(n.cats.size()) - 1))];
    return *c ? w_->Intern(c) : 0;
  }
  void Count(RowKind kind, int64_t dur, const EventArgs* a, std::string_view json) {
    ++tally_->rows;
    tally_->sum_dur += dur;
    if (kind == RowKind::kSpan) ++tally_->spans;
    if (kind == RowKind::kInstant) ++tally_->instants;
    if (kind == RowKind::kCounter) ++tally_->counters;
    if (kind == RowKind::kFlow) ++tally_->flows;
    if (a && (a->mask & EventArgs::kBytes)) ++tally_->with_bytes;
    if (!json.empty()) ++tally_->with_json;
  }
  // Arguments for an event named `name`; some left out (NULL in SQL).
  EventArgs Args(const std::string& name) {
    EventArgs a;
    if (name == "MPI_Allreduce" || name == "ncclAllReduce") {
      a.mask |= EventArgs::kComm | EventArgs::kSeq;
      a.comm = name == "MPI_Allreduce" ? 0 : 1;
      // The collective views' edge cases too: a seq repeated on a rank, and no communicator
      // (a NULL comm, its own partition).
      a.seq = Chance(0.05) && *seq_ > 0 ? *seq_ - 1 : (*seq_)++;
      if (Chance(0.05)) a.mask &= ~EventArgs::kComm;
    }
    if (name == "MPI_Send" || name == "MPI_Recv") {
      a.mask |= EventArgs::kPeer | EventArgs::kTag | EventArgs::kComm;
      a.peer = (rank_ + (name == "MPI_Send" ? 1 : 3)) % 4;
      a.tag = static_cast<int32_t>(Int(0, 2));
      a.comm = 0;
    }
    if (name.rfind("MPI_", 0) == 0 && Chance(0.8)) {
      a.mask |= EventArgs::kBytes;
      a.bytes = static_cast<uint64_t>(1) << Int(2, 24);
    }
    return a;
  }
  std::string Json() {
    if (!Chance(0.2)) return "";
    return "{\"k\":" + std::to_string(Int(0, 9)) + ",\"s\":\"" + (Chance(0.5) ? "a" : "b") + "\"}";
  }

  // One top-level item (or a nested one when depth > 0) on `track` starting after *t.
  Status Item(uint32_t track, int64_t* t, int depth) {
    *t += Chance(0.1) ? 0 : Int(1, 500);
    const NameSpec& n =
        Names()[static_cast<size_t>(Int(0, static_cast<int64_t>(Names().size()) - 1))];
    const uint32_t name = w_->Intern(n.name);
    const uint32_t cat = Cat(n);
    const std::string json = Json();
    EventArgs a = Args(n.name);
    const EventArgs* ap = a.mask ? &a : nullptr;
    const int what = static_cast<int>(Int(0, 9));
    if (what <= 3 && depth < 3) {
      // A span with children; NEGOTIATE_ALLREDUCE holds RANK_READY ticks, and now and then
      // another span holds one (a tick of no negotiation). Ticks may tie in ts and lack a peer.
      TRACEDB_RETURN_IF_ERROR(b_.Begin(track, *t, name, cat, ap, json));
      const int64_t start = *t;
      const int kids = static_cast<int>(Int(0, 3));
      for (int i = 0; i < kids; ++i) {
        if (std::string(n.name) == "NEGOTIATE_ALLREDUCE" || Chance(0.05)) {
          *t += Chance(0.2) ? 0 : Int(1, 300);
          EventArgs ready;
          if (!Chance(0.1)) {
            ready.mask = EventArgs::kPeer;
            ready.peer = static_cast<int32_t>(Int(0, 3));
          }
          const EventArgs* rp = ready.mask ? &ready : nullptr;
          TRACEDB_RETURN_IF_ERROR(
              b_.Instant(track, *t, w_->Intern("RANK_READY"), w_->Intern("comm"), rp));
          Count(RowKind::kInstant, 0, rp, "");
        } else {
          TRACEDB_RETURN_IF_ERROR(Item(track, t, depth + 1));
        }
      }
      *t += Int(1, 2000);
      TRACEDB_RETURN_IF_ERROR(b_.End(track, *t));
      Count(RowKind::kSpan, *t - start, ap, json);
      return Status::Ok();
    }
    if (what <= 6) {
      const int64_t dur = Dur();
      TRACEDB_RETURN_IF_ERROR(b_.Complete(track, *t, dur, name, cat, ap, json));
      Count(RowKind::kSpan, dur, ap, json);
      *t += dur;
      return Status::Ok();
    }
    if (what == 7 && std::string(n.name) != "MPI_Irecv") {
      TRACEDB_RETURN_IF_ERROR(b_.Instant(track, *t, name, cat, ap, json));
      Count(RowKind::kInstant, 0, ap, json);
      return Status::Ok();
    }
    // A nonblocking receive and its completion: a flow end-point with the actual source and tag.
    const uint64_t flow = ++*flow_;
    EventArgs post;
    post.mask = EventArgs::kFlow | EventArgs::kComm;
    post.flow = flow;
    post.comm = 0;
    const int64_t dur = Dur();
    TRACEDB_RETURN_IF_ERROR(
        b_.Complete(track, *t, dur, w_->Intern("MPI_Irecv"), w_->Intern("mpi"), &post));
    Count(RowKind::kSpan, dur, &post, "");
    *t += dur + Int(0, 100);
    EventArgs done;
    done.mask = EventArgs::kFlow | EventArgs::kPeer | EventArgs::kTag | EventArgs::kBytes;
    done.flow = flow;
    done.peer = (rank_ + 3) % 4;
    done.tag = static_cast<int32_t>(Int(0, 2));
    done.bytes = 4096;
    TRACEDB_RETURN_IF_ERROR(b_.Instant(track, *t, w_->Intern("MPI_Wait"), w_->Intern("mpi"), &done,
                                       {}, RowKind::kFlow));
    Count(RowKind::kFlow, 0, &done, "");
    return Status::Ok();
  }

  std::mt19937_64 rng_;
  engine::TraceWriter* w_;
  engine::TraceBuilder b_;
  bool interleave_;
  Tally* tally_ = nullptr;
  int rank_ = 0;
  uint64_t* seq_ = nullptr;
  uint64_t* flow_ = nullptr;
};

// ---- running queries ----

using Result = std::vector<std::vector<std::string>>;

struct Answer {
  bool ok = true;
  std::string error;
  Result rows;
};

std::string Cell(sqlite3_stmt* st, int i) {
  char buf[64];
  switch (sqlite3_column_type(st, i)) {
    case SQLITE_NULL:
      return "NULL";
    case SQLITE_INTEGER:
      std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(sqlite3_column_int64(st, i)));
      return buf;
    case SQLITE_FLOAT:
      std::snprintf(buf, sizeof(buf), "r%.17g", sqlite3_column_double(st, i));
      return buf;
    case SQLITE_TEXT:
      return "'" + std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, i))) + "'";
    default: {
      std::string s = "x'";
      const auto* p = static_cast<const unsigned char*>(sqlite3_column_blob(st, i));
      for (int j = 0; j < sqlite3_column_bytes(st, i); ++j) {
        std::snprintf(buf, sizeof(buf), "%02x", p[j]);
        s += buf;
      }
      return s + "'";
    }
  }
}

Answer Run(sqlite3* db, const std::string& sql) {
  Answer a;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    a.ok = false;
    a.error = sqlite3_errmsg(db);
    return a;
  }
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int i = 0; i < sqlite3_column_count(st); ++i) row.push_back(Cell(st, i));
    a.rows.push_back(std::move(row));
  }
  if (rc != SQLITE_DONE) {
    a.ok = false;
    a.error = sqlite3_errmsg(db);
  }
  sqlite3_finalize(st);
  return a;
}

std::string Show(const Answer& a, size_t max_rows = 12) {
  if (!a.ok) return "error: " + a.error + "\n";
  std::string s = std::to_string(a.rows.size()) + " rows\n";
  for (size_t i = 0; i < a.rows.size() && i < max_rows; ++i) {
    s += "  ";
    for (const std::string& c : a.rows[i]) s += c + " | ";
    s += "\n";
  }
  if (a.rows.size() > max_rows) s += "  ...\n";
  return s;
}

// ---- random queries ----

// A WHERE clause as a tree, so that a mismatch can be shrunk.
struct Pred {
  enum Kind { kAtom, kAnd, kOr, kNot } kind = kAtom;
  std::string atom;  // with "{a}" for the table alias prefix
  std::vector<Pred> kids;
};

std::string Render(const Pred& p, const std::string& alias) {
  switch (p.kind) {
    case Pred::kAtom:
      return std::regex_replace(p.atom, std::regex("\\{a\\}"), alias);
    case Pred::kNot:
      return "NOT (" + Render(p.kids[0], alias) + ")";
    default: {
      std::string s = "(";
      for (size_t i = 0; i < p.kids.size(); ++i) {
        if (i) s += p.kind == Pred::kAnd ? " AND " : " OR ";
        s += Render(p.kids[i], alias);
      }
      return s + ")";
    }
  }
}

// Every tree one step smaller than `p`: a node replaced by one of its children, or a child of
// an AND/OR dropped, or an atom replaced by TRUE.
void Smaller(const Pred& p, std::vector<Pred>* out) {
  if (p.kind == Pred::kAtom) {
    if (p.atom != "1") out->push_back(Pred{Pred::kAtom, "1", {}});
    return;
  }
  for (const Pred& k : p.kids) out->push_back(k);
  for (size_t i = 0; i < p.kids.size(); ++i) {
    if (p.kids.size() > 1) {
      Pred q = p;
      q.kids.erase(q.kids.begin() + static_cast<long>(i));
      out->push_back(q);
    }
    std::vector<Pred> sub;
    Smaller(p.kids[i], &sub);
    for (Pred& s : sub) {
      Pred q = p;
      q.kids[i] = std::move(s);
      out->push_back(std::move(q));
    }
  }
}

enum class Compare { kMultiset, kOrdered, kTopN };

// A query over `{T}` (the table: events or ref) with up to two WHERE trees ({W1}, {W2}).
struct Query {
  std::string text;  // {T}, {V} (view prefix: "" or "ref_"), {W1}, {W2}
  Pred w1, w2;
  Compare compare = Compare::kMultiset;
  std::string kind;      // for the timing summary
  std::string all_text;  // kTopN: the same rows without ORDER BY/LIMIT (the candidates)
};

std::string Instantiate(const std::string& text, const Query& q, bool ref) {
  std::string s = std::regex_replace(text, std::regex("\\{T\\}"), ref ? "ref" : "events");
  s = std::regex_replace(s, std::regex("\\{V\\}"), ref ? "ref_" : "");
  // Regex replacement would interpret '$' in the predicate text: substitute by hand.
  for (const auto& [key, pred] : {std::pair<std::string, const Pred*>{"{W1}", &q.w1},
                                  std::pair<std::string, const Pred*>{"{W2}", &q.w2}}) {
    for (size_t at; (at = s.find(key)) != std::string::npos;) {
      // The alias the tree applies to precedes the key as "{a=X}".
      std::string alias;
      const size_t open = s.rfind("{a=", at);
      if (open != std::string::npos && s.find('}', open) + 1 == at) {
        alias = s.substr(open + 3, at - open - 4);
        s.erase(open, at - open);
        at = open;
      }
      s.replace(at, key.size(), Render(*pred, alias.empty() ? "" : alias + "."));
    }
  }
  return s;
}

struct Column {
  std::string name;
  char type;                      // 'i' integer, 't' text, 'r' real
  std::vector<std::string> pool;  // SQL literals of values present in the data
};

class QueryGen {
 public:
  QueryGen(uint64_t seed, const std::vector<Column>* cols, const std::vector<std::string>* views,
           const std::map<std::string, std::vector<Column>>* view_cols)
      : rng_(seed), cols_(cols), views_(views), view_cols_(view_cols) {}

  Query Next() {
    const int k = static_cast<int>(Int(0, 99));
    Query q = k < 30   ? Filter()
              : k < 50 ? TopN()
              : k < 68 ? Group()
              : k < 80 ? ParentJoin()
              : k < 90 ? Correlated()
                       : View();
    if (q.kind.empty())
      q.kind = k < 30   ? "filter"
               : k < 50 ? "top-n"
               : k < 68 ? "group"
               : k < 80 ? "join"
                        : "correlated";
    return q;
  }

 private:
  int64_t Int(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(Int(0, static_cast<int64_t>(v.size()) - 1))];
  }

  std::string Value(const Column& c) {
    if (c.type == 'i') {
      const int k = static_cast<int>(Int(0, 39));
      if (k == 0) return "NULL";
      if (k == 1) return "'abc'";
      if (k == 2)
        return Pick(std::vector<std::string>{"9223372036854775807", "-9223372036854775808", "1e19",
                                             "-1e19", "x'01'"});
      const std::string v = c.pool.empty() ? "0" : Pick(c.pool);
      if (v == "NULL") return v;
      if (k == 3) return "'" + v + "'";  // numeric text: INTEGER affinity applies
      if (k == 4) return v + ".5";
      if (k == 5) return v + ".0";
      if (k <= 9) return std::to_string(std::strtoll(v.c_str(), nullptr, 10) + Int(-2, 2));
      return v;
    }
    if (c.type == 'r') {
      if (Chance(0.1)) return "NULL";
      return c.pool.empty() ? "0" : Pick(c.pool);
    }
    const int k = static_cast<int>(Int(0, 29));
    if (k == 0) return "NULL";
    if (k == 1) return "'no such name'";
    if (k == 2) return "''";
    if (k == 3) return "x'41'";
    if (k == 4) return "5";
    return c.pool.empty() ? "''" : Pick(c.pool);
  }

  std::string Atom(const std::vector<Column>& cols) {
    const Column& c = Pick(cols);
    std::string col = "{a}" + c.name;
    if (Chance(0.08)) col = c.type == 't' ? col + " || ''" : "+" + col;  // not pushed down
    if (Chance(0.05) && c.name == "args")
      return "json_extract(" + col + ", '$.k') = " + std::to_string(Int(0, 9));
    const int k = static_cast<int>(Int(0, 19));
    static const char* kOps[] = {"=", "=", "=", "<>", "<", "<=", ">", ">="};
    if (k < 8) {
      const std::string op = kOps[k];
      const std::string v = Value(c);
      if (Chance(0.15)) {  // the value on the left
        static const std::map<std::string, std::string> flip = {
            {"=", "="}, {"<>", "<>"}, {"<", ">"}, {"<=", ">="}, {">", "<"}, {">=", "<="}};
        return v + " " + flip.at(op) + " " + col;
      }
      return col + " " + op + " " + v;
    }
    if (k < 10) return col + " BETWEEN " + Value(c) + " AND " + Value(c);
    if (k < 13) {
      std::string s = col + (Chance(0.2) ? " NOT IN (" : " IN (");
      const int n = static_cast<int>(Int(1, 4));
      for (int i = 0; i < n; ++i) s += (i ? ", " : "") + Value(c);
      return s + ")";
    }
    if (k < 15) return col + (Chance(0.5) ? " IS NULL" : " IS NOT NULL");
    if (k == 15 && c.type == 't')
      return col + " LIKE '" + std::string(1, "CMNfmbo"[Int(0, 6)]) + "%'";
    if (k == 16 && c.type == 't') return col + " = " + Value(c) + " COLLATE NOCASE";
    if (k == 17) return col + " IS " + Value(c);
    return col + " = " + Value(c);
  }

  Pred Tree(const std::vector<Column>& cols, int depth) {
    if (depth == 0 || Chance(0.35)) return Pred{Pred::kAtom, Atom(cols), {}};
    const int k = static_cast<int>(Int(0, 9));
    if (k == 0) return Pred{Pred::kNot, "", {Tree(cols, depth - 1)}};
    Pred p{k <= 6 ? Pred::kAnd : Pred::kOr, "", {}};
    const int n = static_cast<int>(Int(2, 4));
    for (int i = 0; i < n; ++i) p.kids.push_back(Tree(cols, depth - 1));
    return p;
  }
  Pred Where() { return Tree(*cols_, 3); }

  std::string SelectList(const std::string& alias, int min_cols) {
    std::vector<std::string> names;
    for (const Column& c : *cols_) names.push_back(c.name);
    std::shuffle(names.begin(), names.end(), rng_);
    const int n = static_cast<int>(Int(min_cols, 6));
    std::string s;
    for (int i = 0; i < n; ++i) s += (i ? ", " : "") + alias + names[static_cast<size_t>(i)];
    return s;
  }
  std::string LimitClause() {
    static const std::vector<std::string> limits = {"0", "1", "3", "10", "50", "-1", "2 + 3"};
    std::string s = " LIMIT " + Pick(limits);
    if (Chance(0.5)) s += " OFFSET " + Pick(std::vector<std::string>{"0", "2", "7", "40", "-3"});
    return s;
  }

  Query Filter() {
    Query q;
    q.w1 = Where();
    q.text = "SELECT " + SelectList("", 1) + ", id FROM {T} WHERE {W1}";
    if (Chance(0.5)) {
      static const std::vector<std::string> keys = {
          "ts", "dur DESC", "rank, ts", "name, dur", "end_ts DESC", "parent", "step, cat"};
      q.text += " ORDER BY " + Pick(keys) + ", id";
      q.compare = Compare::kOrdered;
      if (Chance(0.6)) q.text += LimitClause();
    }
    return q;
  }
  Query TopN() {
    Query q;
    q.w1 = Chance(0.1) ? Pred{Pred::kAtom, "1", {}} : Where();
    if (Chance(0.5)) {  // the flagship shape: a name, maybe a category or rank
      Pred p{Pred::kAnd, "", {Pred{Pred::kAtom, "{a}name = " + Pick((*cols_)[6].pool), {}}}};
      if (Chance(0.4)) p.kids.push_back(Tree(*cols_, 1));
      q.w1 = p;
    }
    const std::string sel = "id, dur" + (Chance(0.7) ? ", " + SelectList("", 1) : std::string());
    q.text = "SELECT " + sel + " FROM {T} WHERE {W1} ORDER BY dur DESC" + LimitClause();
    q.all_text = "SELECT " + sel + " FROM {T} WHERE {W1}";
    q.compare = Compare::kTopN;
    return q;
  }
  Query Group() {
    Query q;
    q.w1 = Chance(0.2) ? Pred{Pred::kAtom, "1", {}} : Where();
    static const std::vector<std::string> keys = {
        "rank",       "name",        "cat",       "kind",      "track",     "depth",    "step",
        "rank, name", "track, name", "name, cat", "tid, lane", "peer, tag", "comm, seq"};
    const std::string g = Pick(keys);
    static const std::vector<std::string> aggs = {"count(*)",
                                                  "sum(dur)",
                                                  "max(dur)",
                                                  "min(ts)",
                                                  "count(bytes)",
                                                  "max(end_ts)",
                                                  "median(dur)",
                                                  "percentile(dur, 90)",
                                                  "count(DISTINCT name)",
                                                  "min(value)",
                                                  "total(depth)",
                                                  "CAST(avg(dur) AS INTEGER)",
                                                  "covered_ns(ts, dur)"};
    std::string sel = g;
    const int n = static_cast<int>(Int(1, 4));
    for (int i = 0; i < n; ++i) sel += ", " + Pick(aggs);
    if (Chance(0.15)) {
      q.text = "SELECT DISTINCT " + g + " FROM {T} WHERE {W1}";
      return q;
    }
    q.text = "SELECT " + sel + " FROM {T} WHERE {W1} GROUP BY " + g;
    if (Chance(0.2)) q.text += " HAVING count(*) > " + std::to_string(Int(1, 20));
    if (Chance(0.3)) {
      q.text += " ORDER BY " + g;
      if (Chance(0.5)) q.text += LimitClause();
      // Group keys are unique per row: the order is total.
      q.compare = Compare::kOrdered;
    }
    return q;
  }
  Query ParentJoin() {
    Query q;
    q.w1 = Where();
    q.w2 = Chance(0.5) ? Pred{Pred::kAtom, "1", {}} : Where();
    const int k = static_cast<int>(Int(0, 3));
    const std::string sel = "c.id, p.id, c.name, p.name, c.dur, p.depth";
    if (k == 0)
      q.text = "SELECT " + sel +
               " FROM {T} c JOIN {T} p ON c.parent = p.id WHERE {a=c}{W1} AND {a=p}{W2}";
    else if (k == 1)
      q.text = "SELECT " + sel +
               " FROM {T} p JOIN {T} c ON p.id = c.parent WHERE {a=c}{W1} AND {a=p}{W2}";
    else if (k == 2)
      q.text = "SELECT " + sel + " FROM {T} c LEFT JOIN {T} p ON p.id = c.parent WHERE {a=c}{W1}";
    else
      q.text = "SELECT a.id, b.name, b.ts FROM {T} a JOIN {T} b ON b.id = a.id WHERE {a=a}{W1}";
    return q;
  }
  Query Correlated() {
    Query q;
    q.w1 = Where();
    q.w2 = Chance(0.5) ? Pred{Pred::kAtom, "1", {}} : Where();
    // A bounded set of outer rows (correlated subqueries run once per outer row).
    const std::string outer =
        " FROM {T} e WHERE e.id IN (SELECT id FROM {T} WHERE {W1} ORDER BY id LIMIT 25)";
    const int k = static_cast<int>(Int(0, 3));
    if (k == 0)
      q.text =
          "SELECT e.id, (SELECT count(*) FROM {T} k WHERE k.parent = e.id AND {a=k}{W2})" + outer;
    else if (k == 1)
      q.text = "SELECT e.id, e.name" + outer +
               " AND EXISTS (SELECT 1 FROM {T} k WHERE k.parent = e.id AND {a=k}{W2})";
    else if (k == 2)
      q.text = "SELECT e.id, e.dur" + outer +
               " AND e.dur >= (SELECT max(x.dur) FROM {T} x WHERE x.track = e.track AND x.name = "
               "e.name)";
    else
      q.text =
          "SELECT e.id, (SELECT x.id FROM {T} x WHERE x.rank = e.rank AND x.name = e.name "
          "AND x.ts > e.ts ORDER BY x.ts, x.id LIMIT 1)" +
          outer;
    return q;
  }
  Query View() {
    Query q;
    const std::string& v = Pick(*views_);
    q.text = "SELECT * FROM {V}" + v;
    q.kind = "view " + v;
    const auto it = view_cols_->find(v);
    if (it != view_cols_->end() && !it->second.empty() && Chance(0.7)) {
      q.w1 = Tree(it->second, 1);
      q.text += " WHERE {W1}";
    }
    return q;
  }

  std::mt19937_64 rng_;
  const std::vector<Column>* cols_;
  const std::vector<std::string>* views_;
  const std::map<std::string, std::vector<Column>>* view_cols_;
};

// ---- comparing ----

// An error raised while evaluating (not while preparing): whether it is raised depends on the
// plan, not on the rows. The vtab evaluates its pushed-down constraints first and SQLite may
// never evaluate the rest on a row they reject; over the plain copy it evaluates the terms in
// another order, and rewrites them: SQLite's WHERE-clause constant propagation turns
// `args = 'no such name' AND json_extract(args, '$.k') = 7` into json_extract('no such name',
// '$.k') over the plain table, which raises "malformed JSON" on the first row whatever the rows
// hold (seed 1127, query 9,790; `+args = ...` returns 0 rows), while over events the
// pushed-down constraints leave no row to evaluate it on (0 rows). So one side may fail where
// the other returns rows, neither of them wrong.
bool IsEvaluationError(const std::string& error) {
  return error.find("malformed JSON") != std::string::npos;
}

// `sql` with every json_extract(X, ...) made total: json_extract(CASE WHEN json_valid(X) THEN X
// END, ...), NULL where X is not JSON instead of an error. A row whose outcome needs that value
// is evaluated on both sides the same way; rows decided without it are unchanged.
std::string TotalJson(const std::string& sql) {
  static const std::string kFn = "json_extract(";
  std::string out;
  size_t at = 0;
  for (size_t f; (f = sql.find(kFn, at)) != std::string::npos;) {
    const size_t arg = f + kFn.size();
    const size_t comma = sql.find(", '$", arg);
    if (comma == std::string::npos) break;
    const std::string x = sql.substr(arg, comma - arg);
    out += sql.substr(at, arg - at) + "CASE WHEN json_valid(" + x + ") THEN " + x + " END";
    at = comma;
  }
  return out + sql.substr(at);
}

bool SameSql(sqlite3* db, const Query& q, const std::string& got_sql, const std::string& want_sql,
             const std::string& all_sql, bool retry, std::string* why);

bool Same(sqlite3* db, const Query& q, std::string* why) {
  return SameSql(db, q, Instantiate(q.text, q, false), Instantiate(q.text, q, true),
                 Instantiate(q.all_text, q, true), true, why);
}

// Counts the queries where one side raised an evaluation error and the total forms agreed
// (reported at the end of a seed: they are not mismatches, but they are not vacuous either).
int64_t g_order_dependent_errors = 0;

bool SameSql(sqlite3* db, const Query& q, const std::string& got_sql, const std::string& want_sql,
             const std::string& all_sql, bool retry, std::string* why) {
  const Answer got = Run(db, got_sql);
  const Answer want = Run(db, want_sql);
  if (!got.ok || !want.ok) {
    if (got.ok == want.ok) return true;  // both fail (e.g. a type error in a random literal)
    const Answer& failed = got.ok ? want : got;
    if (retry && IsEvaluationError(failed.error) && TotalJson(got_sql) != got_sql) {
      // An error that depends on evaluation order, or a wrong row? The total forms decide.
      std::string total_why;
      if (SameSql(db, q, TotalJson(got_sql), TotalJson(want_sql), TotalJson(all_sql), false,
                  &total_why)) {
        ++g_order_dependent_errors;
        return true;
      }
      *why = "events: " + Show(got) + "reference: " + Show(want) +
             "and with json_extract made total (the rows must then agree):\n" + total_why;
      return false;
    }
    *why = "events: " + Show(got) + "reference: " + Show(want);
    return false;
  }
  bool same;
  if (q.compare == Compare::kOrdered) {
    same = got.rows == want.rows;
  } else if (q.compare == Compare::kTopN) {
    // Ties in dur make several answers right: the same durations in the same order, each row
    // one of the rows the WHERE selects, none more often than it occurs there.
    same = got.rows.size() == want.rows.size();
    for (size_t i = 0; same && i < got.rows.size(); ++i) same = got.rows[i][1] == want.rows[i][1];
    if (same) {
      const Answer all = Run(db, all_sql);
      std::multiset<std::vector<std::string>> pool(all.rows.begin(), all.rows.end());
      for (const auto& r : got.rows) {
        auto it = pool.find(r);
        if (it == pool.end()) {
          same = false;
          break;
        }
        pool.erase(it);
      }
    }
  } else {
    Result a = got.rows, b = want.rows;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    same = a == b;
  }
  if (!same) *why = "events: " + Show(got) + "reference: " + Show(want);
  return same;
}

// Shrinks the WHERE trees of a failing query while it still fails.
Query Shrink(sqlite3* db, Query q) {
  std::string why;
  for (bool progress = true; progress;) {
    progress = false;
    for (Pred Query::*field : {&Query::w1, &Query::w2}) {
      std::vector<Pred> cands;
      Smaller(q.*field, &cands);
      for (Pred& c : cands) {
        Query t = q;
        t.*field = c;
        if (!Same(db, t, &why)) {
          q = t;
          progress = true;
          break;
        }
      }
      if (progress) break;
    }
  }
  return q;
}

// ---- the test ----

struct Env {
  TempDir tmp;
  std::unique_ptr<engine::Db> db;
  std::vector<Column> cols;
  std::vector<std::string> views;
  std::map<std::string, std::vector<Column>> view_cols;
};

// Values of `col` in `table` as SQL literals (a sample of at most 60, deterministic).
std::vector<std::string> Pool(sqlite3* db, const std::string& table, const std::string& col) {
  const Answer a = Run(db, "SELECT DISTINCT " + col + " FROM " + table + " ORDER BY 1");
  std::vector<std::string> out;
  const size_t step = std::max<size_t>(1, a.rows.size() / 60);
  for (size_t i = 0; i < a.rows.size(); i += step) {
    std::string v = a.rows[i][0];
    if (v[0] == 'r') v = v.substr(1);
    if (v[0] == 'x') continue;
    out.push_back(v);
  }
  if (!a.rows.empty()) {  // the largest value too
    std::string v = a.rows.back()[0];
    if (v[0] == 'r') v = v.substr(1);
    if (v[0] != 'x') out.push_back(v);
  }
  return out;
}

void Build(uint64_t seed, Env* env, Tally* tally) {
  const std::string path = env->tmp.Sub("diff.tdb");
  {
    auto w = engine::TraceWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().message();
    TraceGen gen(seed, w->get());
    const Status s = gen.Run(tally);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  auto db = query::OpenQueryDb(path, /*writable=*/true);
  ASSERT_TRUE(db.ok()) << db.status().message();
  env->db = std::move(*db);
  sqlite3* h = env->db->raw();
  // The plain copy, and indexes so that correlated subqueries over it stay fast.
  ASSERT_TRUE(env->db
                  ->Exec("CREATE TEMP TABLE ref AS SELECT * FROM events;"
                         "CREATE INDEX temp.ref_id ON ref(id);"
                         "CREATE INDEX temp.ref_parent ON ref(parent);"
                         "CREATE INDEX temp.ref_track_name ON ref(track, name)")
                  .ok());
  // The built-in views again, over the copy, in their plain-SQL definitions (the views computed
  // in C++ or reformulated for speed are checked against the SQL they replace): every view
  // name and `events` prefixed "ref_"/"ref".
  const std::string sql = query::ViewsSql();
  const std::string reference = query::ViewsReferenceSql();
  std::regex create("CREATE TEMP VIEW IF NOT EXISTS (\\w+)");
  for (auto it = std::sregex_iterator(sql.begin(), sql.end(), create); it != std::sregex_iterator();
       ++it) {
    env->views.push_back((*it)[1].str());
  }
  std::vector<std::string> reference_views;
  for (auto it = std::sregex_iterator(reference.begin(), reference.end(), create);
       it != std::sregex_iterator(); ++it) {
    reference_views.push_back((*it)[1].str());
  }
  ASSERT_EQ(env->views, reference_views);
  // The why views (query/analysis/why_views.h) have no plain-SQL twin: the reference reads the
  // same tables. They are checked here by their invariants on the random trace
  // (WhyViewsKeepTheirInvariants) and against plain SQL on a hand-built trace in
  // tests/why_views_test.cc; the random queries leave them out (each statement runs the whole
  // analysis).
  static const std::set<std::string> kWhyViews = {"wait_states",         "wait_state_totals",
                                                  "root_causes",         "critical_path",
                                                  "critical_path_names", "critical_path_whatif"};
  std::erase_if(env->views, [](const std::string& v) { return kWhyViews.count(v) > 0; });
  // The reference must not read the table-valued functions it checks.
  ASSERT_EQ(reference.find("tracedb_p2p_"), std::string::npos);
  ASSERT_EQ(reference.find("tracedb_collective_"), std::string::npos);
  ASSERT_EQ(reference.find("tracedb_negotiation"), std::string::npos);
  // Only table references (after FROM or JOIN) are renamed, never column aliases.
  std::string ref_sql =
      std::regex_replace(reference, std::regex("\\b(FROM|JOIN)(\\s+)events\\b"), "$1$2ref");
  for (const std::string& v : env->views) {
    ref_sql =
        std::regex_replace(ref_sql, std::regex("\\b(FROM|JOIN)(\\s+)" + v + "\\b"), "$1$2ref_" + v);
  }
  ref_sql = std::regex_replace(ref_sql, std::regex("(CREATE TEMP VIEW IF NOT EXISTS )(\\w+)"),
                               "$1ref_$2");
  const Status s = env->db->Exec(ref_sql);
  ASSERT_TRUE(s.ok()) << s.message();
  static const std::vector<std::pair<const char*, char>> kCols = {
      {"id", 'i'},    {"rank", 'i'},   {"tid", 'i'},   {"track", 'i'},  {"track_name", 't'},
      {"lane", 't'},  {"name", 't'},   {"cat", 't'},   {"kind", 't'},   {"ts", 'i'},
      {"dur", 'i'},   {"end_ts", 'i'}, {"depth", 'i'}, {"parent", 'i'}, {"bytes", 'i'},
      {"peer", 'i'},  {"tag", 'i'},    {"comm", 'i'},  {"seq", 'i'},    {"flow", 'i'},
      {"value", 'r'}, {"step", 'i'},   {"args", 't'}};
  for (const auto& [name, type] : kCols)
    env->cols.push_back(Column{name, type, Pool(h, "ref", name)});
  for (const std::string& v : env->views) {
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(h, ("SELECT * FROM " + v).c_str(), -1, &st, nullptr), SQLITE_OK);
    std::vector<Column> cols;
    for (int i = 0; i < sqlite3_column_count(st); ++i) {
      const std::string c = sqlite3_column_name(st, i);
      const Answer types =
          Run(h, "SELECT typeof(" + c + ") FROM ref_" + v + " WHERE " + c + " IS NOT NULL LIMIT 1");
      char type = 'i';
      if (!types.rows.empty() && types.rows[0][0] == "'text'") type = 't';
      if (!types.rows.empty() && types.rows[0][0] == "'real'") type = 'r';
      cols.push_back(Column{c, type, Pool(h, "ref_" + v, c)});
    }
    sqlite3_finalize(st);
    env->view_cols[v] = std::move(cols);
  }
}

int64_t Queries() {
  const char* n = std::getenv("TRACEDB_DIFF_QUERIES");
  return n ? std::max<int64_t>(1, std::atoll(n)) : 5000;
}

void RunSeed(uint64_t seed) {
  Env env;
  Tally tally;
  ASSERT_NO_FATAL_FAILURE(Build(seed, &env, &tally));
  sqlite3* h = env.db->raw();
  // The copy against the generator's own count of what it wrote.
  const Answer facts = Run(h,
                           "SELECT count(*), sum(kind = 'span'), sum(kind = 'instant'), "
                           "sum(kind = 'counter'), sum(kind = 'flow'), sum(dur), count(bytes), "
                           "count(args), count(DISTINCT id), count(DISTINCT track) FROM ref");
  ASSERT_TRUE(facts.ok) << facts.error;
  const std::vector<std::string> expect = {
      std::to_string(tally.rows),       std::to_string(tally.spans),
      std::to_string(tally.instants),   std::to_string(tally.counters),
      std::to_string(tally.flows),      std::to_string(tally.sum_dur),
      std::to_string(tally.with_bytes), std::to_string(tally.with_json),
      std::to_string(tally.rows),       "16"};
  ASSERT_EQ(facts.rows.at(0), expect);
  // The generator writes only valid JSON: every args the copy holds must be JSON (a row decoded
  // or written wrong shows here, whatever the random queries touch).
  const Answer bad_json = Run(h,
                              "SELECT id, kind, args FROM ref WHERE args IS NOT NULL AND "
                              "NOT json_valid(args) LIMIT 5");
  ASSERT_TRUE(bad_json.ok) << bad_json.error;
  EXPECT_TRUE(bad_json.rows.empty()) << "args that are not JSON:\n" << Show(bad_json);
  // Every track's rows lie in the time ranges of several blocks, and names occur under
  // several categories: the shapes the defects of issue 9 needed.
  const Answer spread = Run(h,
                            "SELECT min(n) FROM (SELECT r.track, count(DISTINCT b.block) AS n "
                            "FROM ref r JOIN main.blocks b ON b.rank = r.rank AND r.ts BETWEEN "
                            "b.min_ts AND b.max_end GROUP BY r.track)");
  ASSERT_TRUE(spread.ok) << spread.error;
  EXPECT_GE(std::atoll(spread.rows.at(0).at(0).c_str()), 3);
  const Answer blocks_per_rank =
      Run(h, "SELECT min(n) FROM (SELECT rank, count(*) AS n FROM main.blocks GROUP BY rank)");
  EXPECT_GE(std::atoll(blocks_per_rank.rows.at(0).at(0).c_str()), 5);
  const Answer multi_cat =
      Run(h,
          "SELECT count(*) FROM (SELECT name FROM ref GROUP BY name HAVING count(DISTINCT "
          "coalesce(cat, '')) > 1)");
  EXPECT_GE(std::atoll(multi_cat.rows.at(0).at(0).c_str()), 5);
  // Each view column compares with text as its reference does (the same affinity): a column
  // computed in C++ must not gain one that the SQL expression lacks, nor lose one.
  for (const std::string& v : env.views) {
    for (const Column& c : env.view_cols.at(v)) {
      const std::string probe = " WHERE " + c.name + " > '-1'";
      const Answer got = Run(h, "SELECT count(*) FROM " + v + probe);
      const Answer want = Run(h, "SELECT count(*) FROM ref_" + v + probe);
      ASSERT_TRUE(got.ok && want.ok) << v << "." << c.name << ": " << got.error << want.error;
      EXPECT_EQ(got.rows, want.rows) << v << "." << c.name << " compares with text differently";
    }
  }
  // The why views on the random trace: every wait charged once, in full (direct plus indirect
  // cost add up to the waits, up to rounding per cause); each wait's event is its rank's call
  // (a Horovod tick stands for its negotiation); the critical path covers each step window.
  const Answer why =
      Run(h,
          "SELECT (SELECT coalesce(sum(direct_ns + indirect_ns), 0) FROM tracedb_root_causes) - "
          "(SELECT coalesce(sum(wait_ns), 0) FROM wait_states), "
          "(SELECT count(*) FROM tracedb_root_causes), (SELECT count(*) FROM wait_states), "
          "(SELECT count(*) FROM wait_states w JOIN ref e ON e.id = w.id "
          " WHERE e.name <> 'RANK_READY' AND (e.name IS NOT w.call OR e.ts <> w.ts)), "
          "(SELECT count(*) FROM (SELECT step, sum(dur) AS d, min(ts) AS a, max(ts + dur) AS b "
          " FROM critical_path GROUP BY step) WHERE d <> b - a)");
  ASSERT_TRUE(why.ok) << why.error;
  EXPECT_LE(std::llabs(std::atoll(why.rows.at(0).at(0).c_str())),
            std::atoll(why.rows.at(0).at(1).c_str()));
  EXPECT_GT(std::atoll(why.rows.at(0).at(2).c_str()), 0) << "no waits: the check is vacuous";
  EXPECT_EQ(why.rows.at(0).at(3), "0");
  EXPECT_EQ(why.rows.at(0).at(4), "0");
  // The point-to-point views (computed in C++) have messages to match, blocking receives and
  // nonblocking ones paired with their completions: their comparison is not vacuous.
  const Answer p2p =
      Run(h,
          "SELECT (SELECT count(*) FROM ref_p2p_messages), (SELECT count(*) FROM "
          "ref_p2p_receives r JOIN ref e ON e.id = r.id WHERE e.name <> 'MPI_Recv')");
  ASSERT_TRUE(p2p.ok) << p2p.error;
  EXPECT_GT(std::atoll(p2p.rows.at(0).at(0).c_str()), 0);
  EXPECT_GT(std::atoll(p2p.rows.at(0).at(1).c_str()), 0);
  // The collective views (computed in C++) have the shapes they must get right: collectives
  // on several ranks, ranks missing from some, a NULL comm, a rank arriving twice (a repeated
  // seq, or two RANK_READY ticks of one rank), and Horovod ticks (NULL dur).
  const Answer coll =
      Run(h,
          "SELECT (SELECT count(*) FROM ref_collectives WHERE ranks > 1), "
          "(SELECT count(*) FROM ref_collectives WHERE ranks < 4), "
          "(SELECT count(*) FROM ref_collective_arrivals WHERE comm IS NULL), "
          "(SELECT count(*) FROM (SELECT 1 FROM ref_collective_calls GROUP BY comm, seq, rank "
          "HAVING count(*) > 1)), "
          "(SELECT count(*) FROM ref_collective_calls WHERE dur IS NULL)");
  ASSERT_TRUE(coll.ok) << coll.error;
  for (size_t i = 0; i < coll.rows.at(0).size(); ++i)
    EXPECT_GT(std::atoll(coll.rows[0][i].c_str()), 0) << "collective shape " << i;
  // The negotiation views (computed in C++) have ticks without a peer, ticks tied in ts within
  // a negotiation, ticks whose parent is no negotiation, and negotiations on several ranks.
  const Answer neg =
      Run(h,
          "SELECT (SELECT count(*) FROM ref_negotiation_ticks WHERE ready_rank IS NULL), "
          "(SELECT count(*) FROM (SELECT 1 FROM ref_negotiation_ticks GROUP BY negotiation, ts "
          "HAVING count(*) > 1)), "
          "(SELECT count(*) FROM ref_negotiation_ticks WHERE negotiation NOT IN "
          "(SELECT id FROM ref_negotiations)), "
          "(SELECT count(DISTINCT rank) - 1 FROM ref_negotiations)");
  ASSERT_TRUE(neg.ok) << neg.error;
  for (size_t i = 0; i < neg.rows.at(0).size(); ++i)
    EXPECT_GT(std::atoll(neg.rows[0][i].c_str()), 0) << "negotiation shape " << i;
  // And the whole views, row for row (not only the random queries' samples).
  for (const char* v : {"collective_calls", "collective_arrivals", "collectives", "stragglers",
                        "collective_wait", "negotiation_ticks", "negotiations"}) {
    const std::string q = std::string("SELECT (SELECT count(*) FROM (SELECT * FROM ") + v +
                          " EXCEPT SELECT * FROM ref_" + v +
                          ")), (SELECT count(*) FROM (SELECT * FROM ref_" + v +
                          " EXCEPT SELECT * FROM " + v + ")), (SELECT count(*) FROM " + v +
                          "), (SELECT count(*) FROM ref_" + v + ")";
    const Answer d = Run(h, q);
    ASSERT_TRUE(d.ok) << v << ": " << d.error;
    EXPECT_EQ(d.rows.at(0).at(0), "0") << v << ": rows not in the reference";
    EXPECT_EQ(d.rows.at(0).at(1), "0") << v << ": reference rows missing";
    EXPECT_EQ(d.rows.at(0).at(2), d.rows.at(0).at(3)) << v << ": row counts";
  }
  // The span statistics (computed in C++): every row, value and type, in the reference's order
  // (GROUP BY's), over groups large enough for p50, p95 and p99 to be different elements.
  const Answer big = Run(h, "SELECT count(*) FROM ref_span_stats WHERE count >= 100");
  ASSERT_TRUE(big.ok) << big.error;
  EXPECT_GT(std::atoll(big.rows.at(0).at(0).c_str()), 3);
  for (const char* v : {"span_stats", "name_stats_all"}) {
    const Answer got = Run(h, std::string("SELECT * FROM ") + v);
    const Answer want = Run(h, std::string("SELECT * FROM ref_") + v);
    ASSERT_TRUE(got.ok && want.ok) << v << ": " << got.error << want.error;
    EXPECT_FALSE(want.rows.empty()) << v;
    EXPECT_EQ(got.rows, want.rows) << v << ": not the reference's rows in its order";
  }
  const int64_t n = Queries();
  int64_t failures = 0;
  std::map<std::string, std::pair<int64_t, double>> by_kind;  // kind -> (queries, seconds)
  // TRACEDB_DIFF_FIRST=N starts at query N (each query has its own generator seed): a
  // reported mismatch reruns in seconds.
  const char* first = std::getenv("TRACEDB_DIFF_FIRST");
  for (int64_t i = first ? std::atoll(first) : 0; i < n && failures < 5; ++i) {
    QueryGen gen(seed * 1000003 + static_cast<uint64_t>(i), &env.cols, &env.views, &env.view_cols);
    const Query q = gen.Next();
    std::string why;
    const auto t0 = std::chrono::steady_clock::now();
    const bool same = Same(h, q, &why);
    auto& k = by_kind[q.kind];
    ++k.first;
    k.second += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if ((i + 1) % 50000 == 0) {  // progress of long runs
      std::printf("seed %" PRIu64 ": %" PRId64 " queries done, %" PRId64 " mismatches\n", seed,
                  i + 1, failures);
      std::fflush(stdout);
    }
    if (same) continue;
    ++failures;
    const Query small = Shrink(h, q);
    std::string small_why;
    Same(h, small, &small_why);
    ADD_FAILURE() << "mismatch: seed " << seed << ", query #" << i
                  << " (rerun: TRACEDB_DIFF_SEED=" << seed << ")\n"
                  << "query: " << Instantiate(q.text, q, false) << "\n"
                  << why << "minimal reproduction: " << Instantiate(small.text, small, false)
                  << "\n  reference: " << Instantiate(small.text, small, true) << "\n"
                  << small_why;
  }
  std::printf("seed %" PRIu64 ": %" PRId64 " queries, %" PRId64 " rows, %" PRId64
              " mismatches, %" PRId64 " evaluation-order errors (agreeing when made total)\n",
              seed, n, tally.rows, failures, g_order_dependent_errors);
  g_order_dependent_errors = 0;
  for (const auto& [kind, v] : by_kind) {
    std::printf("  %-28s %8" PRId64 " queries %8.3f s\n", kind.c_str(), v.first, v.second);
  }
}

// The oracle on known answers, over two plain tables standing for `events` and `ref`: the
// "events" side never evaluates json_extract on the row whose args is not JSON (it does not
// hold it; the real events table skips such rows by its pushed-down constraints), the "ref"
// side evaluates it first and fails. That is an evaluation-order error, not a mismatch; a row
// that only one side returns stays a mismatch though the other side failed.
TEST(EventsDifferential, OracleTellsEvaluationOrderErrorsFromWrongRows) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
  auto exec = [&](const char* sql) {
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  };
  exec(
      "CREATE TABLE events(id, kind, args); CREATE TABLE ref(id, kind, args);"
      "INSERT INTO events VALUES(1, 'span', '{\"k\":7}');"
      "INSERT INTO ref VALUES(1, 'span', '{\"k\":7}'), (2, 'counter', 'not json');");
  Query q;
  q.text = "SELECT id FROM {T} WHERE json_extract(args, '$.k') = 7 AND kind = 'span'";
  ASSERT_FALSE(testing::Run(db, Instantiate(q.text, q, true)).ok);  // the reference side fails
  ASSERT_TRUE(testing::Run(db, Instantiate(q.text, q, false)).ok);
  std::string why;
  g_order_dependent_errors = 0;
  EXPECT_TRUE(Same(db, q, &why)) << why;
  EXPECT_EQ(g_order_dependent_errors, 1);
  // A wrong row on the events side: still a mismatch, whatever the reference's error.
  exec("INSERT INTO events VALUES(3, 'span', '{\"k\":7}')");
  EXPECT_FALSE(Same(db, q, &why));
  EXPECT_NE(why.find("made total"), std::string::npos) << why;
  // Both sides failing is no mismatch (as before); an error of another kind is one.
  Query bad;
  bad.text = "SELECT id FROM {T} WHERE json_extract(args, '$[') IS NULL";
  EXPECT_TRUE(Same(db, bad, &why));
  g_order_dependent_errors = 0;
  sqlite3_close(db);
}

TEST(EventsDifferential, FixedSeed) { RunSeed(20261125); }

TEST(EventsDifferential, SeedFromEnvironment) {
  const char* s = std::getenv("TRACEDB_DIFF_SEED");
  if (!s) GTEST_SKIP() << "TRACEDB_DIFF_SEED not set";
  RunSeed(std::strtoull(s, nullptr, 10));
}

// median() and percentile() against plain SQL: the nearest rank written out with window
// functions over the plain copy (`ref`), no C++ aggregate involved: the value whose row number
// in its group, by value, is max(1, ceil(p * n / 100)), in integer arithmetic. Groups of every
// size (one row, even counts), ties (depth, the generator's recurring durations), NULLs (bytes,
// value: absent arguments), reals (value) and the edges p = 0 and p = 100.
std::string NearestRankSql(const std::string& x, const std::string& g, int num, int den,
                           const std::string& where) {
  // p = num / den: rank = ceil(num * n / (100 * den)) = (num * n + 100 * den - 1) / (100 * den).
  const std::string d = std::to_string(100 * den);
  return "WITH v AS (SELECT " + g + " AS g, " + x + " AS x, row_number() OVER (PARTITION BY " + g +
         " ORDER BY " + x + ") AS rn, count(*) OVER (PARTITION BY " + g + ") AS n FROM ref WHERE " +
         where + " AND " + x + " IS NOT NULL), groups AS (SELECT DISTINCT " + g +
         " AS g FROM ref WHERE " + where + ") SELECT groups.g, (SELECT v.x FROM v WHERE v.g IS " +
         "groups.g AND v.rn = max(1, (" + std::to_string(num) + " * v.n + " + d + " - 1) / " + d +
         ")) FROM groups ORDER BY 1";
}

// Run() for the TEST body below (inside a test, Run names the test's own Run()).
Answer Sql(sqlite3* db, const std::string& sql) { return Run(db, sql); }

TEST(EventsDifferential, PercentileAgainstPlainSql) {
  Env env;
  Tally tally;
  ASSERT_NO_FATAL_FAILURE(Build(20261125, &env, &tally));
  sqlite3* h = env.db->raw();
  struct P {
    std::string sql;  // as written in percentile()
    int num, den;     // p = num / den
  };
  const std::vector<P> ps = {{"0", 0, 1},   {"1", 1, 1},       {"7", 7, 1},    {"12.5", 25, 2},
                             {"25", 25, 1}, {"50", 50, 1},     {"90", 90, 1},  {"95", 95, 1},
                             {"99", 99, 1}, {"99.75", 399, 4}, {"100", 100, 1}};
  const std::vector<std::string> xs = {"dur", "depth", "bytes", "value", "ts"};
  const std::vector<std::string> gs = {"name", "rank", "track", "cat", "kind", "depth"};
  // Small groups too: one rank and a time window leave groups of 0, 1, 2, 3... rows.
  const Answer ts = Sql(h, "SELECT min(ts), max(ts) FROM ref");
  ASSERT_TRUE(ts.ok && !ts.rows.empty()) << ts.error;
  const int64_t t0 = std::atoll(ts.rows[0][0].c_str()), t1 = std::atoll(ts.rows[0][1].c_str());
  const std::vector<std::string> wheres = {
      "1", "rank = 1", "rank = 2 AND ts < " + std::to_string(t0 + (t1 - t0) / 50),
      "track = 3 AND ts BETWEEN " + std::to_string(t0 + (t1 - t0) / 3) + " AND " +
          std::to_string(t0 + (t1 - t0) / 3 + (t1 - t0) / 200)};
  int compared = 0, small_groups = 0;
  for (const std::string& where : wheres) {
    for (const std::string& g : gs) {
      for (const std::string& x : xs) {
        for (const P& p : ps) {
          const std::string got_sql = "SELECT " + g + ", percentile(" + x + ", " + p.sql +
                                      ") FROM events WHERE " + where + " GROUP BY " + g +
                                      " ORDER BY 1";
          const Answer got = Sql(h, got_sql);
          const Answer want = Sql(h, NearestRankSql(x, g, p.num, p.den, where));
          ASSERT_TRUE(got.ok) << got_sql << ": " << got.error;
          ASSERT_TRUE(want.ok) << want.error;
          EXPECT_EQ(got.rows, want.rows)
              << got_sql << "\nevents: " << Show(got) << "reference: " << Show(want);
          ++compared;
        }
        const std::string med_sql = "SELECT " + g + ", median(" + x + ") FROM events WHERE " +
                                    where + " GROUP BY " + g + " ORDER BY 1";
        const Answer med = Sql(h, med_sql);
        const Answer want = Sql(h, NearestRankSql(x, g, 50, 1, where));
        EXPECT_EQ(med.rows, want.rows)
            << med_sql << "\nevents: " << Show(med) << "reference: " << Show(want);
        const Answer sizes =
            Sql(h, "SELECT count(*) FROM (SELECT count(" + x + ") AS n FROM ref WHERE " + where +
                       " GROUP BY " + g + ") WHERE n BETWEEN 1 AND 4");
        small_groups += std::atoi(sizes.rows.at(0).at(0).c_str());
      }
    }
  }
  EXPECT_GT(small_groups, 20);  // the windows did make small (and even) groups
  // Every group size from 1 to 120 against every integer p: the rank arithmetic alone
  // (p / 100.0 * n in doubles is one too high, e.g. for p = 7 and n = 100).
  for (int n = 1; n <= 120; ++n) {
    const std::string s =
        "WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < " +
        std::to_string(n) + ") ";
    std::string got_sql = s + "SELECT ", want;
    for (int p = 0; p <= 100; ++p) {
      got_sql += (p ? ", percentile(11 * x, " : "percentile(11 * x, ") + std::to_string(p) + ")";
      want += (p ? "," : "") + std::to_string(11 * std::max(1, (p * n + 99) / 100));
    }
    const Answer got = Sql(h, got_sql + " FROM s");
    ASSERT_TRUE(got.ok) << got.error;
    std::string got_row;
    for (size_t i = 0; i < got.rows.at(0).size(); ++i) got_row += (i ? "," : "") + got.rows[0][i];
    EXPECT_EQ(got_row, want) << "n = " << n;
  }
  // Integers beyond 2^53 stay exact; a real turns the group into reals; NULLs are skipped and
  // a group of NULLs only is NULL; p outside [0, 100] is an error.
  const Answer big = Sql(h,
                         "SELECT median(x), percentile(x, 100), percentile(x, 0) FROM (SELECT "
                         "4611686018427387905 AS x UNION ALL SELECT 4611686018427387907 UNION ALL "
                         "SELECT 4611686018427387903 UNION ALL SELECT NULL)");
  ASSERT_TRUE(big.ok) << big.error;
  EXPECT_EQ(big.rows.at(0), (std::vector<std::string>{"4611686018427387905", "4611686018427387907",
                                                      "4611686018427387903"}));
  const Answer mixed =
      Sql(h,
          "SELECT median(x), median(NULL), count(*) FROM (SELECT 3 AS x UNION ALL SELECT 1.5 "
          "UNION ALL SELECT 2 UNION ALL SELECT -7)");
  ASSERT_TRUE(mixed.ok) << mixed.error;
  EXPECT_EQ(mixed.rows.at(0), (std::vector<std::string>{"r1.5", "NULL", "4"}));
  for (const char* bad : {"101", "-1", "100.5"}) {
    EXPECT_FALSE(Sql(h, std::string("SELECT percentile(dur, ") + bad + ") FROM ref").ok) << bad;
  }
  std::printf("%d percentile queries compared with plain SQL\n", compared);
}

// Grouped scans hand their decoded blocks and row order to the next one on the connection
// (ScanScratch in query/sql/events_internal.h): consecutive scans reading other columns, a
// grouped subquery re-run for every outer row while the outer grouped scan is open, and two
// statements stepped in turn must each see their own rows. Each query is compared with the
// same text over the plain copy, twice over (the second pass runs on reused memory).
TEST(EventsDifferential, GroupedScansReuseMemory) {
  Env env;
  Tally tally;
  ASSERT_NO_FATAL_FAILURE(Build(20261125, &env, &tally));
  sqlite3* h = env.db->raw();
  auto over = [](std::string sql, const std::string& table) {
    for (size_t at; (at = sql.find("events")) != std::string::npos;) sql.replace(at, 6, table);
    return sql;
  };
  const std::vector<std::string> queries = {
      "SELECT name, median(dur), count(*) FROM events GROUP BY name ORDER BY 1",
      "SELECT rank, name, count(*), sum(dur), min(id) FROM events GROUP BY rank, name ORDER BY 1, "
      "2",
      "SELECT cat, kind, max(ts), min(depth), count(bytes) FROM events GROUP BY cat, kind "
      "ORDER BY 1, 2",
      "SELECT track, percentile(ts, 90), sum(value) FROM events WHERE depth > 0 GROUP BY track "
      "ORDER BY 1",
      "SELECT o.name, o.n, (SELECT count(*) FROM events e WHERE e.rank = 1 AND e.name = o.name "
      "GROUP BY e.name) FROM (SELECT name, count(*) AS n FROM events GROUP BY name) o ORDER BY 1",
      "SELECT a.name, a.m, b.m FROM (SELECT name, max(dur) AS m FROM events GROUP BY name) a "
      "JOIN (SELECT name, min(ts) AS m FROM events GROUP BY name) b USING (name) ORDER BY 1",
  };
  for (int pass = 0; pass < 2; ++pass) {
    for (const std::string& q : queries) {
      const Answer got = Sql(h, q);
      const Answer want = Sql(h, over(q, "ref"));
      ASSERT_TRUE(got.ok) << q << ": " << got.error;
      ASSERT_TRUE(want.ok) << want.error;
      EXPECT_FALSE(got.rows.empty()) << q;
      EXPECT_EQ(got.rows, want.rows)
          << q << "\nevents: " << Show(got) << "reference: " << Show(want);
    }
  }
  // Two grouped statements open at once, stepped in turn.
  const std::string qa = "SELECT name, sum(dur) FROM events GROUP BY name ORDER BY 1";
  const std::string qb = "SELECT rank, name, max(ts) FROM events GROUP BY rank, name ORDER BY 1, 2";
  sqlite3_stmt *a = nullptr, *b = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(h, qa.c_str(), -1, &a, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_prepare_v2(h, qb.c_str(), -1, &b, nullptr), SQLITE_OK);
  Result ra, rb;
  bool more_a = true, more_b = true;
  while (more_a || more_b) {
    for (auto [st, more, out] : {std::tuple{a, &more_a, &ra}, std::tuple{b, &more_b, &rb}}) {
      if (!*more) continue;
      const int rc = sqlite3_step(st);
      ASSERT_TRUE(rc == SQLITE_ROW || rc == SQLITE_DONE) << sqlite3_errmsg(h);
      *more = rc == SQLITE_ROW;
      if (!*more) continue;
      std::vector<std::string> row;
      for (int i = 0; i < sqlite3_column_count(st); ++i) row.push_back(Cell(st, i));
      out->push_back(std::move(row));
    }
  }
  sqlite3_finalize(a);
  sqlite3_finalize(b);
  EXPECT_EQ(ra, Sql(h, over(qa, "ref")).rows);
  EXPECT_EQ(rb, Sql(h, over(qb, "ref")).rows);
}

}  // namespace
}  // namespace tracedb::testing
