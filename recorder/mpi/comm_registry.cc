// Communicator and window ids. See comm_registry.h and docs/mpi-capture.md.
#include "recorder/mpi/comm_registry.h"

#include <cstdlib>
#include <new>

namespace tracedb::mpi {

HandleState g_world_state;
HandleRegistry g_comms;
HandleRegistry g_wins;

namespace {

std::atomic<int> g_counter{1};  // communicators and windows this process has joined, + 1

struct CacheEntry {
  const HandleRegistry* registry;
  uintptr_t key;
  uint64_t gen;
  HandleState* state;
};
__attribute__((tls_model("initial-exec"))) thread_local CacheEntry tls_cache[8];

inline CacheEntry& CacheSlot(uintptr_t key) { return tls_cache[((key >> 4) ^ (key >> 12)) & 7]; }

// World ranks of the `n` members of `g`, in group order, into `out`.
void WorldRanks(MPI_Group g, int n, int32_t* out) {
  if (n <= 0) return;
  int* ranks = static_cast<int*>(std::calloc(n, sizeof(int)));
  if (ranks == nullptr) {
    for (int i = 0; i < n; ++i) out[i] = -1;
    return;
  }
  for (int i = 0; i < n; ++i) ranks[i] = i;
  static_assert(sizeof(int) == sizeof(int32_t));
  if (PMPI_Group_translate_ranks(g, n, ranks, g_world.group, reinterpret_cast<int*>(out)) !=
      MPI_SUCCESS) {
    for (int i = 0; i < n; ++i) out[i] = -1;
  }
  std::free(ranks);
}

// Declares `id` with the members of `g` (this process at `rank_in_comm`).
void Define(uint32_t id, MPI_Group g, int rank_in_comm) {
  int n = 0;
  if (PMPI_Group_size(g, &n) != MPI_SUCCESS || n <= 0) return;
  auto* members = static_cast<int32_t*>(std::malloc(sizeof(int32_t) * n));
  if (members != nullptr) WorldRanks(g, n, members);
  tracedb_comm_define(id, n, rank_in_comm, members);
  std::free(members);
}

int MinWorldRank(MPI_Group g) {
  int n = 0;
  if (PMPI_Group_size(g, &n) != MPI_SUCCESS || n <= 0) return 0;
  auto* members = static_cast<int32_t*>(std::malloc(sizeof(int32_t) * n));
  if (members == nullptr) return 0;
  WorldRanks(g, n, members);
  int lo = members[0];
  for (int i = 1; i < n; ++i) lo = members[i] < lo ? members[i] : lo;
  std::free(members);
  return lo;
}

int Outdegree(MPI_Comm c, int rank) {
  int topo = MPI_UNDEFINED;
  if (PMPI_Topo_test(c, &topo) != MPI_SUCCESS) return -1;
  if (topo == MPI_CART) {
    int ndims = 0;
    return PMPI_Cartdim_get(c, &ndims) == MPI_SUCCESS ? 2 * ndims : -1;
  }
  if (topo == MPI_GRAPH) {
    int n = 0;
    return PMPI_Graph_neighbors_count(c, rank, &n) == MPI_SUCCESS ? n : -1;
  }
  if (topo == MPI_DIST_GRAPH) {
    int in = 0, out = 0, weighted = 0;
    return PMPI_Dist_graph_neighbors_count(c, &in, &out, &weighted) == MPI_SUCCESS ? out : -1;
  }
  return -1;
}

// The id agreement: one MINLOC allreduce of (world rank, counter) over `over`.
uint32_t AgreeId(MPI_Comm over) {
  int in[2] = {g_world.rank, g_counter.fetch_add(1, std::memory_order_relaxed)};
  int out[2] = {0, 0};
  if (PMPI_Allreduce(in, out, 1, MPI_2INT, MPI_MINLOC, over) != MPI_SUCCESS) return kUnknownComm;
  return PackCommId(out[0], out[1], g_world.size);
}

// Registers intracommunicator `c` under `id` and declares it.
void RegisterIntra(MPI_Comm c, uint32_t id) {
  HandleState init;
  init.id = id;
  PMPI_Comm_size(c, &init.size);
  PMPI_Comm_rank(c, &init.rank);
  init.outdegree = Outdegree(c, init.rank);
  g_comms.Insert(Key(c), init);
  MPI_Group g;
  if (PMPI_Comm_group(c, &g) != MPI_SUCCESS) return;
  Define(id, g, init.rank);
  PMPI_Group_free(&g);
}

// Intercommunicators: both groups merge (the group holding the smaller world rank first), agree
// on an id inside the merged communicator, and declare the merged member list.
void RegisterInter(MPI_Comm c) {
  HandleState init;
  PMPI_Comm_size(c, &init.size);
  PMPI_Comm_rank(c, &init.rank);
  PMPI_Comm_remote_size(c, &init.remote_size);
  MPI_Group local, remote;
  if (PMPI_Comm_group(c, &local) != MPI_SUCCESS) return;
  if (PMPI_Comm_remote_group(c, &remote) != MPI_SUCCESS) {
    PMPI_Group_free(&local);
    return;
  }
  const int high = MinWorldRank(local) > MinWorldRank(remote) ? 1 : 0;
  PMPI_Group_free(&local);
  PMPI_Group_free(&remote);
  MPI_Comm merged;
  if (PMPI_Intercomm_merge(c, high, &merged) != MPI_SUCCESS) return;
  init.id = AgreeId(merged);
  g_comms.Insert(Key(c), init);
  int merged_rank = 0;
  PMPI_Comm_rank(merged, &merged_rank);
  MPI_Group g;
  if (PMPI_Comm_group(merged, &g) == MPI_SUCCESS) {
    Define(init.id, g, merged_rank);
    PMPI_Group_free(&g);
  }
  PMPI_Comm_free(&merged);
}

}  // namespace

HandleState* HandleRegistry::Find(uintptr_t key) noexcept {
  const CacheEntry& e = CacheSlot(key);
  if (e.registry == this && e.key == key && e.gen == gen_.load(std::memory_order_acquire)) {
    return e.state;
  }
  return FindSlow(key);
}

HandleState* HandleRegistry::FindSlow(uintptr_t key) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  CacheSlot(key) = CacheEntry{this, key, gen_.load(std::memory_order_relaxed), it->second};
  return it->second;
}

HandleState* HandleRegistry::Insert(uintptr_t key, const HandleState& init) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  HandleState* s = free_;
  if (s != nullptr) {
    free_ = s->next_free;
  } else {
    s = new (std::nothrow) HandleState();
    if (s == nullptr) return nullptr;
  }
  s->id = init.id;
  s->size = init.size;
  s->rank = init.rank;
  s->remote_size = init.remote_size;
  s->outdegree = init.outdegree;
  s->seq.store(0, std::memory_order_relaxed);
  s->next_free = nullptr;
  try {
    auto [it, inserted] = map_.try_emplace(key, s);
    if (!inserted) {  // a freed handle we did not see being freed, now reused
      it->second->next_free = free_;
      free_ = it->second;
      it->second = s;
      gen_.fetch_add(1, std::memory_order_release);
    }
  } catch (...) {
    s->next_free = free_;
    free_ = s;
    return nullptr;
  }
  return s;
}

void HandleRegistry::Erase(uintptr_t key) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return;
  it->second->next_free = free_;
  free_ = it->second;
  map_.erase(it);
  gen_.fetch_add(1, std::memory_order_release);
}

uint32_t PackCommId(int leader, int counter, int world_size) noexcept {
  const uint64_t v = static_cast<uint64_t>(counter) * static_cast<uint64_t>(world_size) +
                     static_cast<uint64_t>(leader);
  return 2 + static_cast<uint32_t>(v % 0xFFFFFFFEull);
}

CommShape ShapeOf(const HandleState* hs, MPI_Comm c) noexcept {
  CommShape s;
  if (hs != nullptr) {
    s.size = hs->size;
    s.rank = hs->rank;
    s.remote_size = hs->remote_size;
    s.outdegree = hs->outdegree > 0 ? hs->outdegree : 0;
    return s;
  }
  PMPI_Comm_size(c, &s.size);
  PMPI_Comm_rank(c, &s.rank);
  int inter = 0;
  PMPI_Comm_test_inter(c, &inter);
  if (inter) {
    PMPI_Comm_remote_size(c, &s.remote_size);
  } else {
    const int d = Outdegree(c, s.rank);
    s.outdegree = d > 0 ? d : 0;
  }
  return s;
}

void RegisterPredefined() noexcept {
  PMPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &g_world.size);
  PMPI_Comm_group(MPI_COMM_WORLD, &g_world.group);
  g_world_state.id = kWorldComm;
  g_world_state.size = g_world.size;
  g_world_state.rank = g_world.rank;
  g_world_state.remote_size = 0;
  g_world_state.outdegree = -1;
  g_world_state.seq.store(0, std::memory_order_relaxed);
  Define(kWorldComm, g_world.group, g_world.rank);

  HandleState self;
  self.id = PackCommId(g_world.rank, 0, g_world.size);
  self.size = 1;
  self.rank = 0;
  g_comms.Insert(Key(MPI_COMM_SELF), self);
  const int32_t me = g_world.rank;
  tracedb_comm_define(self.id, 1, 0, &me);
}

void RegisterComm(MPI_Comm c) noexcept {
  if (c == MPI_COMM_NULL) return;
  int inter = 0;
  if (PMPI_Comm_test_inter(c, &inter) != MPI_SUCCESS) return;
  if (inter) {
    RegisterInter(c);
  } else {
    RegisterIntra(c, AgreeId(c));
  }
}

void UnregisterComm(MPI_Comm c) noexcept { g_comms.Erase(Key(c)); }

void RegisterWin(MPI_Win w, MPI_Comm comm) noexcept {
  if (w == MPI_WIN_NULL) return;
  HandleState init;
  init.id = AgreeId(comm);
  MPI_Group g;
  if (PMPI_Win_get_group(w, &g) != MPI_SUCCESS) return;
  PMPI_Group_size(g, &init.size);
  PMPI_Group_rank(g, &init.rank);
  g_wins.Insert(Key(w), init);
  Define(init.id, g, init.rank);
  PMPI_Group_free(&g);
}

void UnregisterWin(MPI_Win w) noexcept { g_wins.Erase(Key(w)); }

PendingIdup* BeginIdup(MPI_Comm parent, MPI_Comm* newcomm) noexcept {
  auto* p = static_cast<PendingIdup*>(std::malloc(sizeof(PendingIdup)));
  if (p == nullptr) return nullptr;
  p->newcomm = newcomm;
  p->agree = MPI_REQUEST_NULL;
  p->agreeing = false;
  int inter = 1;
  PMPI_Comm_test_inter(parent, &inter);
  if (!inter) {
    p->in[0] = g_world.rank;
    p->in[1] = g_counter.fetch_add(1, std::memory_order_relaxed);
    p->out[0] = p->out[1] = 0;
    p->agreeing =
        PMPI_Iallreduce(p->in, p->out, 1, MPI_2INT, MPI_MINLOC, parent, &p->agree) == MPI_SUCCESS;
  }
  return p;
}

void FinishIdup(PendingIdup* p, bool register_it) noexcept {
  if (p == nullptr) return;
  if (p->agreeing && PMPI_Wait(&p->agree, MPI_STATUS_IGNORE) == MPI_SUCCESS && register_it &&
      *p->newcomm != MPI_COMM_NULL) {
    RegisterIntra(*p->newcomm, PackCommId(p->out[0], p->out[1], g_world.size));
  }
  std::free(p);
}

}  // namespace tracedb::mpi
