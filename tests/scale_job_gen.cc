// Writes the segment files of a simulated data-parallel MPI job of many ranks, as the recorder and
// its MPI interposer write them, with known true clocks: the workload of issue 12 item 4
// (docs/bench-compaction.md "4,096 ranks") and of its 512-rank test (tests/scale_job_test.py).
//
// The job. RANKS processes on nodes of --ranks-per-node ranks (host "node0000", …). Each rank runs
// STEPS training steps: a step marker; "forward" and "backward" spans, each holding LAYERS "layer"
// spans (begin/end pairs, cat compute); three MPI_Allreduce calls (cat mpi, communicator 0, the
// per-communicator seq, 4 MiB, 16 MiB, 1 MiB) that every rank leaves when the last one has
// arrived plus a transfer time; an "optimizer" span. Compute durations vary by +-3% per rank and
// step. A straggler (--straggler RANK, repeatable) is slowed by --slow (default 1.25) in one step
// out of every K, K the number of stragglers, in turn (straggler i in the steps s >= 1 with
// s % K == i), so that it arrives last at that step's first allreduce; no other rank is ever
// slowed. Step 0 slows nobody: its first allreduce waits for the ranks that left the MPI_Init
// clock sync last (the nodes rank 0 served last), as in a real job.
//
// The clocks. Every node has a realtime clock (offset up to +-2 ms and drift up to +-1 ppm from
// true time, as NTP leaves them) and a recorder clock (TSC in ns: a boot-time origin and a
// calibration error up to +-20 ppm), shared by its ranks. The common clock is rank 0's recorder
// clock, offset by (realtime - clock) at its first anchor (docs/database-format.md "Clocks").
// Anchors are read every second as the flusher reads them: (realtime, recorder clock) with
// the realtime read off by up to half its width (30-120 ns). At MPI_Init and MPI_Finalize the
// clock synchronisation of recorder/mpi/clock_sync.cc is simulated round by round of its
// schedule: rank 0 serves its node's ranks and every other node's leader one after another
// (20 rounds when the best round trip is <= 10 us, else 50), then each leader serves its node's
// ranks, whose offsets add the leader's. The server reads its clock anywhere inside the best
// round trip (so the error is within the recorded half round trip). Inter-node minimum round
// trips are 2.5-15 us per node, intra-node 0.4-1.2 us per rank.
//
// Files. Per rank one segment file DIR/rank-<r>/seg-<pid>-000000.tds, written through the
// engine's SegmentWriter and block encoders (what the recorder's flusher uses), block by block
// in the flusher's order: META, STRINGS, THREADS, ANCHOR at open; then once a second the EVENTS
// recorded in that second, COMMS once defined, SYNC once measured, an ANCHOR; END at exit. One
// file is open at a time. The truth goes to OUT/truth.csv: rank,step,common_ns for every step
// marker (rank 0's recorder clock at its true instant, plus that offset), which compaction
// must reproduce within its stated uncertainty; OUT/collectives.csv: seq,last_rank,skew_ns of
// every MPI_Allreduce in true time (who really arrived last, and by how much); OUT/stragglers.txt
// lists the injected stragglers.
//
// Usage: scale_job_gen OUT RANKS [--ranks-per-node N] [--steps N] [--layers N]
//                      [--straggler RANK]... [--slow F] [--seed N] [--no-members]
// Prints "events N rows N ranks N nodes N bytes N" (recorder events, expected DB rows,
// segment bytes).
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/segment/segment_blocks.h"
#include "engine/segment/segment_writer.h"

using namespace tracedb::engine;

namespace {

constexpr int64_t kEpoch = 1764000000000000000;  // ns since the Unix epoch at true time 0
constexpr int64_t kMs = 1000000, kUs = 1000, kSec = 1000000000;
constexpr int kCollectives = 3;
constexpr uint64_t kBytes[kCollectives] = {4u << 20, 16u << 20, 1u << 20};

// Names in the order the recorder interns them (ids from 1).
enum Name : uint32_t {
  kStepName = 1,
  kMpiInit,
  kForward,
  kBackward,
  kLayer,
  kAllreduce,
  kOptimizer,
  kMpiFinalize,
  kNumNames
};
const char* const kNameText[] = {"",      "step",          "MPI_Init",  "forward",     "backward",
                                 "layer", "MPI_Allreduce", "optimizer", "MPI_Finalize"};
constexpr uint8_t kCatCompute = 1, kCatMpi = 4, kCatStep = 7;

struct Config {
  std::string out;
  int ranks = 0;
  int per_node = 8;
  int steps = 150;
  int layers = 4;
  std::vector<int> stragglers;
  double slow = 1.25;
  uint64_t seed = 1;
  bool members = true;
};

// ---- Deterministic randomness: every draw is a hash of (seed, rank, step, slot), so the
// step-major first pass and the rank-major second pass see the same values. ----
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
uint64_t g_seed = 1;
double U(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {  // in [0, 1)
  const uint64_t h = Mix(Mix(Mix(Mix(g_seed) ^ a) ^ b) ^ c) ^ d;
  return static_cast<double>(Mix(h) >> 11) * 0x1.0p-53;
}
int64_t Between(int64_t lo, int64_t hi, uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return lo + static_cast<int64_t>(U(a, b, c, d) * static_cast<double>(hi - lo + 1));
}
// Slot tags, so that draws for different purposes never collide.
enum Slot : uint64_t {
  kSlotNode = 1,
  kSlotStart,
  kSlotLayer,
  kSlotGap,
  kSlotExit,
  kSlotOpt,
  kSlotRtt,
  kSlotSync,
  kSlotInit,
  kSlotAnchor,
};

// ---- Clocks ----
struct NodeClock {
  int64_t rt_offset = 0;  // ns, realtime - true at true time 0
  double rt_drift = 0;    // realtime rate error
  int64_t boot = 0;       // ns, recorder clock at true time 0
  double tsc_error = 0;   // recorder clock rate error
  int64_t inter_rtt = 0;  // ns, min round trip to node 0
};
std::vector<NodeClock> g_nodes;

int64_t Scaled(int64_t t, double err) { return t + std::llround(static_cast<double>(t) * err); }
int64_t Local(int node, int64_t t) {
  const NodeClock& n = g_nodes[node];
  return n.boot + Scaled(t, n.tsc_error);
}
int64_t Realtime(int node, int64_t t) {
  const NodeClock& n = g_nodes[node];
  return kEpoch + n.rt_offset + Scaled(t, n.rt_drift);
}
// Realtime - recorder clock at rank 0's first anchor (as recorded, read error included): set
// when rank 0's file opens, before any truth is written (rank 0 is written first).
int64_t g_common_offset = 0;
bool g_common_offset_set = false;
int64_t Common(int64_t t) {
  if (!g_common_offset_set) {
    std::fprintf(stderr,
                 "scale_job_gen: the common clock is needed before rank 0's first anchor\n");
    std::exit(1);
  }
  return Local(0, t) + g_common_offset;
}

// ---- The MPI clock synchronisation (recorder/mpi/clock_sync.cc), simulated ----
struct SyncOut {
  SyncPoint point;   // what the rank records
  int64_t done = 0;  // true time the rank returns from SyncClocks
};

struct PingPong {
  int64_t mid = 0;   // true time of the best round trip's middle
  int64_t asym = 0;  // where in it the server read its clock, from the middle
  int64_t rtt = 0;   // its round trip
  int64_t end = 0;   // true time the exchange ended
};

PingPong SimulatePingPong(int64_t start, int64_t min_rtt, uint64_t rank, uint64_t which) {
  const int rounds = min_rtt <= 10 * kUs ? 20 : 50;
  const int best = static_cast<int>(U(rank, which, kSlotSync, 1) * rounds);
  int64_t t = start;
  PingPong p;
  for (int i = 0; i < rounds; ++i) {
    const int64_t rtt = i == best ? min_rtt
                                  : min_rtt + 1 +
                                        static_cast<int64_t>(U(rank, which, kSlotSync, 10 + i) *
                                                             static_cast<double>(min_rtt));
    if (i == best) {
      p.mid = t + rtt / 2;
      p.rtt = rtt;
      p.asym = Between(-rtt / 2, rtt / 2, rank, which, kSlotSync, 2);
    }
    t += rtt + 150;  // the client's bookkeeping between rounds
  }
  p.end = t;
  return p;
}

int64_t IntraRtt(int rank, uint64_t which) {
  return Between(400, 1200, static_cast<uint64_t>(rank), which, kSlotRtt, 0);
}

// Every rank's sync point at a synchronisation starting at true time `start` (all ranks inside
// SyncClocks by then). `which`: 0 at MPI_Init, 1 at MPI_Finalize.
std::vector<SyncOut> SimulateSync(const Config& c, int64_t start, uint64_t which) {
  const int nodes = (c.ranks + c.per_node - 1) / c.per_node;
  std::vector<SyncOut> out(static_cast<size_t>(c.ranks));
  std::vector<PingPong> leader_pp(static_cast<size_t>(nodes));
  int64_t t = start + 50 * kUs;  // Comm_split_type and the leader Bcast
  // Phase 1: rank 0 serves node 0's ranks and the other nodes' leaders, in rank order.
  for (int p = 1; p < c.ranks; ++p) {
    const int node = p / c.per_node;
    const bool served = node == 0 || p % c.per_node == 0;
    t += 200;  // receiving p's "wants" message
    if (!served) continue;
    const int64_t rtt = node == 0 ? IntraRtt(p, which) : g_nodes[node].inter_rtt;
    const PingPong pp = SimulatePingPong(t, rtt, static_cast<uint64_t>(p), which);
    t = pp.end;
    SyncOut& o = out[static_cast<size_t>(p)];
    o.point.ref_rank = 0;
    o.point.local_ns = Local(node, pp.mid);
    o.point.offset_ns = Local(0, pp.mid + pp.asym) - o.point.local_ns;
    o.point.uncertainty_ns = (pp.rtt + 1) / 2;
    o.done = pp.end;
    if (node != 0) leader_pp[static_cast<size_t>(node)] = pp;
  }
  const int64_t rank0_done = t;
  // Rank 0 records offset 0 at its end; node 0's ranks wait for its Bcast.
  out[0].point = SyncPoint{0, Local(0, rank0_done), 0, 0};
  out[0].done = rank0_done;
  for (int p = 1; p < std::min(c.per_node, c.ranks); ++p)
    out[static_cast<size_t>(p)].done = rank0_done + 5 * kUs;
  // Phase 2: every other node's leader serves its ranks after its own exchange.
  for (int node = 1; node < nodes; ++node) {
    const int leader = node * c.per_node;
    const SyncOut lead = out[static_cast<size_t>(leader)];
    int64_t tn = leader_pp[static_cast<size_t>(node)].end;
    const int last = std::min(c.ranks, leader + c.per_node);
    for (int p = leader + 1; p < last; ++p) {
      const PingPong pp = SimulatePingPong(tn, IntraRtt(p, which), static_cast<uint64_t>(p), which);
      tn = pp.end;
      SyncOut& o = out[static_cast<size_t>(p)];
      o.point.ref_rank = 0;
      o.point.local_ns = Local(node, pp.mid);
      o.point.offset_ns = Local(node, pp.mid + pp.asym) - o.point.local_ns + lead.point.offset_ns;
      o.point.uncertainty_ns = (pp.rtt + 1) / 2 + lead.point.uncertainty_ns;
    }
    for (int p = leader; p < last; ++p) out[static_cast<size_t>(p)].done = tn + 5 * kUs;  // Bcast
  }
  return out;
}

// ---- The workload ----
struct StepPlan {  // one rank's compute in one step (true ns)
  int64_t layer[2][16];
  int64_t gap[kCollectives + 2];
  int64_t exit_jitter[kCollectives];
  int64_t optimizer;
};

bool Slowed(const Config& c, int rank, int step) {
  if (c.stragglers.empty() || step == 0) return false;
  const int k = static_cast<int>(c.stragglers.size());
  return c.stragglers[static_cast<size_t>(step % k)] == rank;
}

StepPlan Plan(const Config& c, int rank, int step) {
  StepPlan p;
  const double f = Slowed(c, rank, step) ? c.slow : 1.0;
  const uint64_t r = static_cast<uint64_t>(rank), s = static_cast<uint64_t>(step);
  for (int pass = 0; pass < 2; ++pass) {
    const double base = (pass == 0 ? 20.0 : 40.0) * kMs / c.layers;
    for (int l = 0; l < c.layers; ++l) {
      const double jitter = 0.97 + 0.06 * U(r, s, kSlotLayer, static_cast<uint64_t>(pass * 64 + l));
      p.layer[pass][l] = static_cast<int64_t>(base * jitter * f);
    }
  }
  for (int g = 0; g < kCollectives + 2; ++g)
    p.gap[g] = Between(1 * kUs, 10 * kUs, r, s, kSlotGap, static_cast<uint64_t>(g));
  for (int k = 0; k < kCollectives; ++k)
    p.exit_jitter[k] = Between(0, 3 * kUs, r, s, kSlotExit, static_cast<uint64_t>(k));
  p.optimizer = static_cast<int64_t>(5.0 * kMs * (0.97 + 0.06 * U(r, s, kSlotOpt, 0)));
  return p;
}

// True start of a step's compute end: forward and backward with 200 ns between spans.
int64_t ComputeEnd(const Config& c, const StepPlan& p, int64_t start) {
  int64_t t = start + 100;  // the step marker, then forward
  for (int pass = 0; pass < 2; ++pass) {
    for (int l = 0; l < c.layers; ++l) t += p.layer[pass][l] + 200;
    t += 300;
  }
  return t;
}

int64_t Transfer(int k, int ranks) {  // ring allreduce at 10 GB/s plus log2(ranks) latencies
  return static_cast<int64_t>(2.0 * static_cast<double>(kBytes[k]) / 10.0) +
         static_cast<int64_t>(std::ceil(std::log2(std::max(ranks, 2)))) * 8 * kUs;
}

// ---- Pass 1 (step-major): when every collective ends; the job's global instants. ----
struct Timeline {
  std::vector<int64_t> proc_start;  // per rank
  int64_t init_done = 0;            // PMPI_Init returns everywhere
  std::vector<SyncOut> init_sync, fin_sync;
  std::vector<int64_t> first_step;  // per rank
  std::vector<int64_t> exits;       // [step * kCollectives + k]
  struct Coll {
    int last = 0;      // the rank that arrived last (the highest rank among equals)
    int64_t skew = 0;  // ns, last arrival - first arrival
  };
  std::vector<Coll> colls;          // [seq = step * kCollectives + k]
  std::vector<int64_t> fin_arrive;  // per rank: enters MPI_Finalize
  int64_t finalize_end = 0;         // PMPI_Finalize returns (+ per-rank jitter)
};

Timeline Simulate(const Config& c) {
  Timeline tl;
  const size_t n = static_cast<size_t>(c.ranks);
  tl.proc_start.resize(n);
  int64_t last_start = 0;
  for (size_t r = 0; r < n; ++r) {
    tl.proc_start[r] = Between(0, 300 * kMs, r, 0, kSlotStart, 0);
    last_start = std::max(last_start, tl.proc_start[r]);
  }
  tl.init_done = last_start + 400 * kMs;
  tl.init_sync = SimulateSync(c, tl.init_done + 100 * kUs, 0);
  std::vector<int64_t> t(n);
  tl.first_step.resize(n);
  for (size_t r = 0; r < n; ++r) {
    t[r] = tl.init_sync[r].done + Between(kMs, 2 * kMs, r, 0, kSlotStart, 1);
    tl.first_step[r] = t[r];
  }
  tl.exits.resize(static_cast<size_t>(c.steps) * kCollectives);
  std::vector<StepPlan> plans(n);
  std::vector<int64_t> arrive(n);
  for (int s = 0; s < c.steps; ++s) {
    for (size_t r = 0; r < n; ++r) {
      plans[r] = Plan(c, static_cast<int>(r), s);
      arrive[r] = ComputeEnd(c, plans[r], t[r]) + plans[r].gap[0];
    }
    for (int k = 0; k < kCollectives; ++k) {
      Timeline::Coll coll;
      int64_t first = arrive[0], last = arrive[0];
      for (size_t r = 0; r < n; ++r) {
        first = std::min(first, arrive[r]);
        if (arrive[r] >= last) {
          last = arrive[r];
          coll.last = static_cast<int>(r);
        }
      }
      coll.skew = last - first;
      tl.colls.push_back(coll);
      const int64_t exit = last + Transfer(k, c.ranks);
      tl.exits[static_cast<size_t>(s * kCollectives + k)] = exit;
      for (size_t r = 0; r < n; ++r)
        arrive[r] = exit + plans[r].exit_jitter[k] + plans[r].gap[k + 1];
    }
    for (size_t r = 0; r < n; ++r)
      t[r] = arrive[r] + plans[r].optimizer + plans[r].gap[kCollectives + 1];
  }
  tl.fin_arrive = t;
  tl.fin_sync = SimulateSync(c, *std::max_element(t.begin(), t.end()) + 100 * kUs, 1);
  int64_t last_sync = 0;
  for (const SyncOut& o : tl.fin_sync) last_sync = std::max(last_sync, o.done);
  tl.finalize_end = last_sync + 20 * kMs;
  return tl;
}

// ---- Pass 2 (rank-major): one rank's segment file, flush by flush. ----
class RankFile {
 public:
  RankFile(const Config& c, int rank, int64_t start)
      : c_(c), rank_(rank), node_(rank / c.per_node) {
    next_flush_ = start + kSec;
    pid_ = 20000 + static_cast<uint32_t>(rank % c.per_node) * 7 + static_cast<uint32_t>(node_ % 97);
    dir_ = c.out + "/trace/" + RankDirName(rank);
    std::filesystem::create_directories(dir_);
    Check(writer_.Open(dir_ + "/" + SegmentFileName(pid_, 0), pid_, 0));
    const AnchorPoint a = Anchor(start);
    SegmentMeta m;
    m.rank = rank;
    m.world_size = c.ranks;
    m.local_rank = rank % c.per_node;
    m.pid = pid_;
    char host[32];
    std::snprintf(host, sizeof(host), "node%04d", node_);
    m.host = host;
    m.tool_version = "scale_job_gen";
    m.command = "python3 train.py --ddp";
    m.clock = ClockKind::kTsc;
    m.tsc_hz = 2450000000ull;
    m.anchor_realtime_ns = a.realtime_ns;
    m.anchor_clock_ns = a.clock_ns;
    std::string raw;
    EncodeMeta(m, &raw);
    writer_.AppendBlock(BlockType::kMeta, raw, false);
    raw.clear();
    std::vector<std::string_view> names(kNameText + 1, kNameText + kNumNames);
    EncodeStrings(1, names, &raw);
    writer_.AppendBlock(BlockType::kStrings, raw, true);
    raw.clear();
    EncodeThreads({{1, pid_, "python3"}}, &raw);
    writer_.AppendBlock(BlockType::kThreads, raw, true);
    raw.clear();
    EncodeAnchors({a}, &raw);
    writer_.AppendBlock(BlockType::kAnchor, raw, false);
    enc_.Reset(1);
  }

  // Records an event at true time `when` (the flusher takes it at the next flush after it).
  void Begin(int64_t t, uint32_t name, uint8_t cat) {
    Add(t, EventKind::kBegin, name, cat, t, 0, nullptr);
  }
  void End(int64_t t, uint32_t name, uint8_t cat) {
    Add(t, EventKind::kEnd, name, cat, t, 0, nullptr);
  }
  void Step(int64_t t, int64_t step) {
    Add(t, EventKind::kStep, kStepName, kCatStep, t, step, nullptr);
  }
  void Complete(int64_t t0, int64_t t1, uint32_t name, uint8_t cat, const EventArgs* args) {
    Add(t1, EventKind::kComplete, name, cat, t0, t1, args);
  }
  void Sync(int64_t when, const SyncPoint& p) {
    FlushUntil(when);
    sync_.push_back(p);
  }
  void DefineComms(int64_t when) {
    FlushUntil(when);
    CommInfo world;
    world.comm = 0;
    world.size = c_.ranks;
    world.rank_in_comm = rank_;
    if (c_.members) {
      world.members.resize(static_cast<size_t>(c_.ranks));
      for (int i = 0; i < c_.ranks; ++i) world.members[static_cast<size_t>(i)] = i;
    }
    CommInfo self;  // MPI_COMM_SELF: PackCommId(rank, 0, world)
    self.comm = 2 + static_cast<uint32_t>(rank_);
    self.size = 1;
    self.members = {rank_};
    comms_ = {world, self};
  }
  // The exit-time flush: events, SYNC, ANCHOR, END; closes the file.
  uint64_t Close(int64_t when) {
    FlushUntil(when);
    Flush(when, /*final=*/true);
    Check(writer_.Close());
    return bytes_;
  }
  uint64_t events() const { return events_; }

 private:
  void Add(int64_t recorded, EventKind kind, uint32_t name, uint8_t cat, int64_t t, int64_t t1,
           const EventArgs* args) {
    FlushUntil(recorded);
    const int64_t ts = Local(node_, t);
    if (kind == EventKind::kComplete) {
      enc_.AddWithInt(kind, cat, ts, name, 0, Local(node_, t1) - ts, args);
    } else if (kind == EventKind::kStep) {
      enc_.AddWithInt(kind, cat, ts, name, 0, t1, args);
    } else {
      enc_.Add(kind, cat, ts, name, 0, args);
    }
    ++events_;
    ++file_events_;
  }
  void FlushUntil(int64_t t) {
    while (t >= next_flush_) {
      Flush(next_flush_, false);
      next_flush_ += kSec;
    }
  }
  void Flush(int64_t t, bool final) {
    std::string raw;
    if (!comms_.empty()) {
      EncodeComms(comms_, &raw);
      writer_.AppendBlock(BlockType::kComms, raw, true);
      comms_.clear();
    }
    const bool had_events = enc_.count() > 0;
    if (had_events) {
      raw.clear();
      enc_.Finish(&raw);
      writer_.AppendBlock(BlockType::kEvents, raw, true);
      enc_.Reset(1);
    }
    if (!sync_.empty()) {
      raw.clear();
      EncodeSync(sync_, &raw);
      writer_.AppendBlock(BlockType::kSync, raw, false);
      sync_.clear();
    }
    if (final || had_events) {
      raw.clear();
      EncodeAnchors({Anchor(t + 20 * kUs)}, &raw);
      writer_.AppendBlock(BlockType::kAnchor, raw, false);
    }
    if (final) {
      raw.clear();
      EncodeEnd(SegmentEnd{file_events_}, &raw);
      writer_.AppendBlock(BlockType::kEnd, raw, false);
    }
    bytes_ = writer_.size();
    Check(writer_.Flush());
  }
  AnchorPoint Anchor(int64_t t) {
    const uint64_t r = static_cast<uint64_t>(rank_), k = static_cast<uint64_t>(anchors_++);
    const int64_t width = Between(30, 120, r, k, kSlotAnchor, 0);
    const int64_t err = Between(-width / 2, width / 2, r, k, kSlotAnchor, 1);
    const AnchorPoint a{Realtime(node_, t) + err, Local(node_, t), width / 2 + 1};
    if (rank_ == 0 && k == 0) {
      g_common_offset = a.realtime_ns - a.clock_ns;
      g_common_offset_set = true;
    }
    return a;
  }
  void Check(const tracedb::Status& s) {
    if (!s.ok()) {
      std::fprintf(stderr, "scale_job_gen: rank %d: %s\n", rank_, s.ToString().c_str());
      std::exit(1);
    }
  }

  const Config& c_;
  int rank_, node_;
  uint32_t pid_ = 0;
  std::string dir_;
  SegmentWriter writer_;
  EventsBlockEncoder enc_;
  std::vector<SyncPoint> sync_;
  std::vector<CommInfo> comms_;
  int64_t next_flush_ = 0;
  int anchors_ = 0;
  uint64_t events_ = 0, file_events_ = 0, bytes_ = 0;
};

// Writes rank `r`'s file; appends its step markers' truth to `truth`. Returns (events, rows).
std::pair<uint64_t, uint64_t> WriteRank(const Config& c, const Timeline& tl, int r, FILE* truth,
                                        uint64_t* bytes) {
  const size_t ri = static_cast<size_t>(r);
  RankFile f(c, r, tl.proc_start[ri]);
  uint64_t rows = 0;
  // MPI_Init: PMPI_Init, then the clock sync; the span [t0, t1] is recorded after the sync.
  const int64_t init_t0 = tl.proc_start[ri] + Between(20 * kMs, 80 * kMs, ri, 0, kSlotInit, 0);
  const int64_t init_t1 = tl.init_done + Between(0, 50 * kUs, ri, 0, kSlotInit, 1);
  f.DefineComms(init_t1 + 10 * kUs);
  f.Sync(tl.init_sync[ri].done, tl.init_sync[ri].point);
  f.Complete(init_t0, init_t1, kMpiInit, kCatMpi, nullptr);
  ++rows;
  int64_t t = tl.first_step[ri];
  uint64_t seq = 0;
  for (int s = 0; s < c.steps; ++s) {
    const StepPlan p = Plan(c, r, s);
    f.Step(t, s);
    std::fprintf(truth, "%d,%d,%" PRId64 "\n", r, s, Common(t));
    t += 100;
    for (int pass = 0; pass < 2; ++pass) {
      const uint32_t name = pass == 0 ? kForward : kBackward;
      f.Begin(t, name, kCatCompute);
      for (int l = 0; l < c.layers; ++l) {
        t += 100;
        f.Begin(t, kLayer, kCatCompute);
        t += p.layer[pass][l];
        f.End(t, kLayer, kCatCompute);
        t += 100;
      }
      t += 100;
      f.End(t, name, kCatCompute);
      t += 200;
      rows += 1 + static_cast<uint64_t>(c.layers);
    }
    // ComputeEnd() walks the same durations: the two passes must agree.
    int64_t arrive = t + p.gap[0];
    for (int k = 0; k < kCollectives; ++k) {
      const int64_t exit = tl.exits[static_cast<size_t>(s * kCollectives + k)] + p.exit_jitter[k];
      EventArgs a;
      a.mask = EventArgs::kBytes | EventArgs::kComm | EventArgs::kSeq;
      a.bytes = kBytes[k];
      a.comm = 0;
      a.seq = seq++;
      f.Complete(arrive, exit, kAllreduce, kCatMpi, &a);
      ++rows;
      arrive = exit + p.gap[k + 1];
    }
    f.Begin(arrive, kOptimizer, kCatCompute);
    t = arrive + p.optimizer;
    f.End(t, kOptimizer, kCatCompute);
    ++rows;
    t += p.gap[kCollectives + 1];
  }
  if (t != tl.fin_arrive[ri]) {
    std::fprintf(stderr, "scale_job_gen: internal error: rank %d's two passes disagree\n", r);
    std::exit(1);
  }
  f.Sync(tl.fin_sync[ri].done, tl.fin_sync[ri].point);
  const int64_t fin_t0 = tl.fin_sync[ri].done + 10 * kUs;
  const int64_t fin_t1 = tl.finalize_end + Between(0, 50 * kUs, ri, 1, kSlotInit, 2);
  f.Complete(fin_t0, fin_t1, kMpiFinalize, kCatMpi, nullptr);
  ++rows;
  *bytes += f.Close(fin_t1 + 200 * kUs);
  return {f.events(), rows};
}

int Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s OUT RANKS [--ranks-per-node N] [--steps N] [--layers N] "
               "[--straggler RANK]... [--slow F] [--seed N] [--no-members]\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return Usage(argv[0]);
  Config c;
  c.out = argv[1];
  c.ranks = std::atoi(argv[2]);
  for (int i = 3; i < argc; ++i) {
    const std::string opt = argv[i];
    if (opt == "--no-members") {
      c.members = false;
      continue;
    }
    if (i + 1 >= argc) return Usage(argv[0]);
    const char* v = argv[++i];
    if (opt == "--ranks-per-node") {
      c.per_node = std::atoi(v);
    } else if (opt == "--steps") {
      c.steps = std::atoi(v);
    } else if (opt == "--layers") {
      c.layers = std::atoi(v);
    } else if (opt == "--straggler") {
      c.stragglers.push_back(std::atoi(v));
    } else if (opt == "--slow") {
      c.slow = std::atof(v);
    } else if (opt == "--seed") {
      c.seed = std::strtoull(v, nullptr, 10);
    } else {
      return Usage(argv[0]);
    }
  }
  if (c.ranks < 1 || c.per_node < 1 || c.steps < 1 || c.layers < 1 || c.layers > 16 ||
      c.slow < 1.0) {
    std::fprintf(stderr, "scale_job_gen: bad arguments (RANKS >= 1, layers 1-16, slow >= 1)\n");
    return 2;
  }
  for (int s : c.stragglers) {
    if (s < 0 || s >= c.ranks) {
      std::fprintf(stderr, "scale_job_gen: straggler %d is not a rank of %d\n", s, c.ranks);
      return 2;
    }
  }
  g_seed = c.seed;
  const int nodes = (c.ranks + c.per_node - 1) / c.per_node;
  g_nodes.resize(static_cast<size_t>(nodes));
  for (int n = 0; n < nodes; ++n) {
    const uint64_t k = static_cast<uint64_t>(n);
    NodeClock& nc = g_nodes[static_cast<size_t>(n)];
    nc.rt_offset = Between(-2 * kMs, 2 * kMs, k, 0, kSlotNode, 0);
    nc.rt_drift = (U(k, 0, kSlotNode, 1) * 2 - 1) * 1e-6;
    nc.boot = Between(1000 * kSec, 3000000 * kSec, k, 0, kSlotNode, 2);
    nc.tsc_error = (U(k, 0, kSlotNode, 3) * 2 - 1) * 20e-6;
    nc.inter_rtt = Between(2500, 15000, k, 0, kSlotNode, 4);
  }
  std::filesystem::create_directories(c.out + "/trace");
  const Timeline tl = Simulate(c);
  FILE* truth = std::fopen((c.out + "/truth.csv").c_str(), "w");
  if (!truth) {
    std::perror((c.out + "/truth.csv").c_str());
    return 1;
  }
  std::fputs("rank,step,common_ns\n", truth);
  uint64_t events = 0, rows = 0, bytes = 0;
  for (int r = 0; r < c.ranks; ++r) {
    const auto [e, n] = WriteRank(c, tl, r, truth, &bytes);
    events += e;
    rows += n;
  }
  if (std::fclose(truth) != 0) {
    std::perror("truth.csv");
    return 1;
  }
  FILE* co = std::fopen((c.out + "/collectives.csv").c_str(), "w");
  if (!co) {
    std::perror("collectives.csv");
    return 1;
  }
  std::fputs("seq,last_rank,skew_ns\n", co);
  for (size_t i = 0; i < tl.colls.size(); ++i)
    std::fprintf(co, "%zu,%d,%" PRId64 "\n", i, tl.colls[i].last, tl.colls[i].skew);
  if (std::fclose(co) != 0) {
    std::perror("collectives.csv");
    return 1;
  }
  FILE* st = std::fopen((c.out + "/stragglers.txt").c_str(), "w");
  if (!st) {
    std::perror("stragglers.txt");
    return 1;
  }
  for (int s : c.stragglers) std::fprintf(st, "%d\n", s);
  std::fclose(st);
  std::printf("events %" PRIu64 " rows %" PRIu64 " ranks %d nodes %d bytes %" PRIu64 "\n", events,
              rows, c.ranks, nodes, bytes);
  return 0;
}
