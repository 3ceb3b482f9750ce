// Flusher implementation. See flusher.h; format in docs/segment-format.md.
#include "recorder/flusher.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "engine/util/version.h"
#include "recorder/catalog.h"
#include "recorder/clock.h"
#include "tracedb/recorder.h"

namespace tracedb::recorder {

std::atomic<uint64_t> Flusher::written_events{0};
std::atomic<uint64_t> Flusher::discarded_events{0};
std::atomic<uint64_t> Flusher::written_bytes{0};
std::atomic<uint64_t> Flusher::write_errors{0};
std::atomic<uint64_t> Flusher::cpu_ns{0};
std::atomic<uint64_t> Flusher::flight_forgotten_events{0};

namespace {

using engine::BlockType;
using engine::EventKind;

constexpr size_t kMaxEventsPerBlock = 65536;
// An anchor at most every second, with events or without: it is also when the process was last
// seen, where its open spans end if it never closes its file (a hung rank killed by SIGKILL),
// so a rank blocked in a call keeps writing one (about 20 bytes a second) while it waits.
constexpr int64_t kAnchorIntervalNs = 1000000000;
uint64_t g_nobuf_reported = 0;  // flusher-owned

// Wake-up of the flusher (one per process at a time). Producers bump g_full_chunks when they
// seal a chunk and wake the flusher only when it sleeps (a Dekker pair, seq_cst on both sides);
// every other request bumps g_wake_word and wakes it unconditionally.
std::atomic<uint32_t> g_wake_word{0};
std::atomic<uint32_t> g_sleeping{0};
std::atomic<uint64_t> g_full_chunks{0};
// Full chunks as of the flusher's last cycle, and how many more wake it: a batch of chunks per
// write (a 16th of the pool, 1 to 64 chunks: 4 MiB of the default 64) rather than one wake-up and
// one write(2) per chunk.
std::atomic<uint64_t> g_full_seen{0};
std::atomic<uint32_t> g_wake_batch{1};
std::atomic<uint32_t> g_drain_request{0};  // TRACEDB_ON_FULL=wait: write the full chunks now
// SIGTERM/SIGINT: the handler asks, the flusher answers after its last write.
std::atomic<uint32_t> g_flusher_running{0};
std::atomic<uint32_t> g_terminate_request{0};
std::atomic<uint32_t> g_terminate_done{0};
std::atomic<uint32_t> g_trigger_request{0};  // flight mode: write the ring

void WakeFlusher() noexcept {
  g_wake_word.fetch_add(1, std::memory_order_seq_cst);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_wake_word), FUTEX_WAKE_PRIVATE, INT_MAX,
            nullptr, nullptr, 0);
}

void WaitForWake(uint32_t seen, int64_t timeout_ns) noexcept {
  if (timeout_ns <= 0) return;
  timespec ts;
  ts.tv_sec = static_cast<time_t>(timeout_ns / 1000000000);
  ts.tv_nsec = static_cast<long>(timeout_ns % 1000000000);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_wake_word), FUTEX_WAIT_PRIVATE, seen, &ts,
            nullptr, 0);
}

Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Status::Ok();
    return Status::IOError(path + " exists and is not a directory");
  }
  return Status::FromErrno("cannot create directory " + path, errno);
}

Status MakeDirs(const std::string& path) {
  for (size_t i = 1; i < path.size(); ++i) {
    if (path[i] == '/') TRACEDB_RETURN_IF_ERROR(MakeDir(path.substr(0, i)));
  }
  return MakeDir(path);
}

std::string ReadCommandLine() {
  std::string cmd;
  FILE* f = std::fopen("/proc/self/cmdline", "rb");
  if (f == nullptr) return cmd;
  char buf[4096];
  const size_t n = std::fread(buf, 1, sizeof(buf), f);
  std::fclose(f);
  cmd.assign(buf, n);
  while (!cmd.empty() && cmd.back() == '\0') cmd.pop_back();
  for (char& c : cmd) {
    if (c == '\0') c = ' ';
  }
  return cmd;
}

std::string HostName() {
  // TRACEDB_HOSTNAME names the host for clock alignment (containers that share a name, tests
  // that simulate several hosts on one machine).
  if (const char* h = std::getenv("TRACEDB_HOSTNAME"); h != nullptr && *h) return h;
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "unknown";
  return host;
}

}  // namespace

Flusher::~Flusher() { Stop(); }

Status Flusher::Start(const FlusherConfig& config) {
  config_ = config;
  ring_ = FlightRing(config.flight_ns);
  steps_ = StepStats();
  steps_.Configure(
      config.flight_ns > 0 && config.slow_step_trigger_name != 0 ? config.slow_step_factor : 0);
  step_rows_.clear();
  slow_trigger_ = false;
  detail_until_ns_ = 0;
  g_trigger_request.store(0, std::memory_order_relaxed);
  std::string dir = config.dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  rank_dir_ = dir + "/" + engine::RankDirName(config.rank.rank);
  TRACEDB_RETURN_IF_ERROR(MakeDirs(rank_dir_));

  meta_ = engine::SegmentMeta();
  meta_.rank = config.rank.rank;
  meta_.world_size = config.rank.world_size;
  meta_.local_rank = config.rank.local_rank;
  meta_.pid = static_cast<uint32_t>(::getpid());
  meta_.host = HostName();
  meta_.tool_version = engine::kTracedbVersion;
  meta_.command = ReadCommandLine();
  meta_.clock = CurrentClockKind();
  meta_.tsc_hz = g_clock.tsc_hz;
  meta_.start_step = config.start_step;
  meta_.end_step = config.end_step;
  seq_ = 0;
  TRACEDB_RETURN_IF_ERROR(OpenNextFile());
  Status s = writer_.Flush();
  if (!s.ok()) return s;
  last_write_ns_ = NowNs();
  full_seen_ = g_full_chunks.load(std::memory_order_relaxed);
  g_full_seen.store(full_seen_, std::memory_order_relaxed);
  g_wake_batch.store(
      config_.pool != nullptr ? std::clamp<uint32_t>(config_.pool->chunks() / 16, 1, 64) : 1,
      std::memory_order_relaxed);
  if (config_.pool != nullptr) config_.pool->Prefault(config_.prefault_chunks);
  g_terminate_request.store(0, std::memory_order_relaxed);
  g_terminate_done.store(0, std::memory_order_relaxed);
  try {
    thread_ = std::thread([this] { Run(); });
  } catch (...) {
    writer_.Abandon();
    return Status::Internal("cannot start the flusher thread");
  }
  g_flusher_running.store(1, std::memory_order_release);
  return Status::Ok();
}

Status Flusher::CreateNextFile(engine::SegmentWriter* w) {
  for (int attempt = 0; attempt < 1000000; ++attempt, ++seq_) {
    const std::string path = rank_dir_ + "/" + engine::SegmentFileName(meta_.pid, seq_);
    Status s = w->Open(path, meta_.pid, seq_);
    if (s.ok()) {
      ++seq_;
      return Status::Ok();
    }
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return s;  // a real error, not a name collision
  }
  return Status::IOError("no free segment file name in " + rank_dir_);
}

Status Flusher::OpenNextFile() {
  TRACEDB_RETURN_IF_ERROR(CreateNextFile(&writer_));
  WriteFileHeaderBlocks();
  return Status::Ok();
}

bool Flusher::RotateFile() {
  const Status created = CreateNextFile(&next_writer_);
  if (!created.ok()) {
    // The current file is ended as usual; nothing more is written.
    CloseFile();
    FailWriting(created);
    return false;
  }
  CloseFile();
  if (writing_disabled_) {  // the END block could not be written
    // The new file holds nothing yet: removed, its descriptor (and so its lock) closed.
    const std::string path = next_writer_.path();
    next_writer_.Abandon();
    ::unlink(path.c_str());
    return false;
  }
  writer_.Swap(next_writer_);  // next_writer_ now holds the closed file's emptied buffers
  WriteFileHeaderBlocks();
  return true;
}

void Flusher::WriteFileHeaderBlocks() {
  const engine::AnchorPoint anchor = ReadAnchor();
  meta_.anchor_realtime_ns = anchor.realtime_ns;
  meta_.anchor_clock_ns = anchor.clock_ns;
  block_scratch_.clear();
  engine::EncodeMeta(meta_, &block_scratch_);
  writer_.AppendBlock(BlockType::kMeta, block_scratch_, false);
  strings_written_ = 0;
  lanes_written_ = 0;
  file_events_ = 0;
  AppendCatalogDeltas(/*all=*/true);
  if (!all_comms_.empty()) {
    block_scratch_.clear();
    engine::EncodeComms(all_comms_, &block_scratch_);
    writer_.AppendBlock(BlockType::kComms, block_scratch_, true);
  }
  block_scratch_.clear();
  engine::EncodeAnchors({anchor}, &block_scratch_);
  writer_.AppendBlock(BlockType::kAnchor, block_scratch_, false);
  last_anchor_ns_ = anchor.clock_ns;
}

void Flusher::AppendCatalogDeltas(bool all) {
  Catalog& cat = Catalog::Get();
  cat.NewStrings(strings_written_ + 1, &string_scratch_);
  if (!string_scratch_.empty()) {
    block_scratch_.clear();
    engine::EncodeStrings(strings_written_ + 1, string_scratch_, &block_scratch_);
    writer_.AppendBlock(BlockType::kStrings, block_scratch_, true);
    strings_written_ += static_cast<uint32_t>(string_scratch_.size());
  }
  cat.NewLanes(lanes_written_, &lane_scratch_);
  if (!lane_scratch_.empty()) {
    block_scratch_.clear();
    engine::EncodeLanes(lane_scratch_, &block_scratch_);
    writer_.AppendBlock(BlockType::kLanes, block_scratch_, true);
    lanes_written_ += lane_scratch_.size();
  }
  cat.ThreadInfos(all, &thread_scratch_);
  if (!thread_scratch_.empty()) {
    block_scratch_.clear();
    engine::EncodeThreads(thread_scratch_, &block_scratch_);
    writer_.AppendBlock(BlockType::kThreads, block_scratch_, true);
  }
}

void Flusher::FinishBlock(uint32_t thread_index) {
  if (staged_count_ == staged_events_.size()) staged_events_.emplace_back();
  if (staged_counts_.size() < staged_events_.size()) staged_counts_.resize(staged_events_.size());
  staged_counts_[staged_count_] = encoder_.count();
  std::string& out = staged_events_[staged_count_++];
  out.clear();
  encoder_.Finish(&out);
  staged_events_total_ += encoder_.count();
  encoder_.Reset(thread_index);
}

void Flusher::DecodeSlots(ThreadBuffer* b, const Record* slots, uint32_t from, uint32_t to) {
  engine::EventArgs args;
  StepStats::Thread* const st = steps_.ThreadState(b->index);
  uint32_t t = from;
  while (t < to) {
    const Record r = slots[t++];
    const auto kind = static_cast<EventKind>(r.kind & 0x0f);
    uint64_t payload = 0;
    if (r.kind & kRecPayload) payload = reinterpret_cast<const ExtSlot*>(&slots[t++])->a;
    const engine::EventArgs* ap = nullptr;
    if (r.kind & kRecArgs) {
      const ExtSlot e1 = *reinterpret_cast<const ExtSlot*>(&slots[t]);
      const ExtSlot e2 = *reinterpret_cast<const ExtSlot*>(&slots[t + 1]);
      const ExtSlot e3 = *reinterpret_cast<const ExtSlot*>(&slots[t + 2]);
      t += 3;
      args.bytes = e1.a;
      args.peer = static_cast<int32_t>(static_cast<uint32_t>(e1.b));
      args.tag = static_cast<int32_t>(static_cast<uint32_t>(e1.b >> 32));
      args.seq = e2.a;
      args.comm = static_cast<uint32_t>(e2.b);
      args.mask = static_cast<uint32_t>(e2.b >> 32) & engine::EventArgs::kAllFields;
      args.flow = e3.a;
      ap = &args;
    }
    if (config_.hang_timeout_ns > 0 &&
        (r.cat == TRACEDB_CAT_MPI || r.cat == TRACEDB_CAT_NCCL || r.cat == TRACEDB_CAT_COMM)) {
      if (kind == EventKind::kBegin) {
        if (b->comm_depth++ == 0) {
          b->comm_open_since = r.ts;
          b->comm_watchdog_fired = false;
        }
      } else if (kind == EventKind::kEnd && b->comm_depth > 0) {
        --b->comm_depth;
      }
    }
    if (steps_.OnEvent(st, kind, r.cat, r.ts, r.name, r.lane, static_cast<int64_t>(payload), ap) &&
        ClaimTrigger()) {
      // A slow step (flight mode) just ended at this marker: its trigger instant goes on this
      // thread just before the marker, inside the slow step; the cycle then writes the ring.
      encoder_.Add(EventKind::kInstant, TRACEDB_CAT_USER, r.ts - 1, config_.slow_step_trigger_name,
                   0, nullptr);
      slow_trigger_ = true;
      if (encoder_.count() >= kMaxEventsPerBlock) FinishBlock(b->index);
    }
    if (kind == EventKind::kStep) last_step_thread_ = b->index;
    switch (kind) {
      case EventKind::kComplete:
      case EventKind::kStep:
        encoder_.AddWithInt(kind, r.cat, r.ts, r.name, r.lane, static_cast<int64_t>(payload), ap);
        break;
      case EventKind::kCounter: {
        double v;
        std::memcpy(&v, &payload, 8);
        encoder_.AddCounter(r.cat, r.ts, r.name, r.lane, v);
        break;
      }
      default:
        encoder_.Add(kind, r.cat, r.ts, r.name, r.lane, ap);
        break;
    }
    if (encoder_.count() == kMaxEventsPerBlock) FinishBlock(b->index);
  }
}

void Flusher::DrainBuffer(ThreadBuffer* b, bool partial) {
  if (b->read_chunk == nullptr) {
    b->read_chunk = b->first.load(std::memory_order_acquire);
    b->read_pos = 0;
    if (b->read_chunk == nullptr) return;
  }
  encoder_.Reset(b->index);
  for (;;) {
    Chunk* c = b->read_chunk;
    const uint32_t committed = c->committed.load(std::memory_order_acquire);
    const bool sealed = (committed & kSealed) != 0;
    if (!sealed && !partial) break;
    const uint32_t n = committed & ~kSealed;
    DecodeSlots(b, c->slots, b->read_pos, n);
    b->read_pos = n;
    if (!sealed) break;
    // The producer linked `next` before the seal and never touches this chunk again.
    Chunk* next = c->next.load(std::memory_order_relaxed);
    config_.pool->Release(c);
    b->read_chunk = next;
    b->read_pos = 0;
  }
  if (encoder_.count() > 0) FinishBlock(b->index);
}

void Flusher::AppendStatsIfChanged(bool force) {
  std::vector<engine::DropCount> deltas;
  for (auto& [index, dropped] : drops_) {
    if (dropped > 0) deltas.push_back(engine::DropCount{index, dropped});
  }
  if (deltas.empty() && !force) return;
  block_scratch_.clear();
  engine::EncodeStats(deltas, &block_scratch_);
  writer_.AppendBlock(BlockType::kStats, block_scratch_, false);
  drops_.clear();
}

void Flusher::Cycle(bool final, bool partial, bool trigger) {
  std::lock_guard<std::mutex> file_lock(file_mu_);
  Catalog& cat = Catalog::Get();
  // Every event that started before now is drained by a partial cycle: the steps that ended
  // before it are final.
  const int64_t drained_to_ns = NowNs();
  steps_.RefreshNames();
  cat.Buffers(&buffers_scratch_);
  // The thread that marked the last step first: its marker then delimits the other threads'
  // events of the same cycle (recorder/step_stats.h).
  for (size_t i = 1; i < buffers_scratch_.size(); ++i) {
    if (buffers_scratch_[i]->index == last_step_thread_) {
      std::swap(buffers_scratch_[0], buffers_scratch_[i]);
      break;
    }
  }
  staged_count_ = 0;
  staged_events_total_ = 0;
  for (ThreadBuffer* b : buffers_scratch_) {
    const bool retired = b->retired.load(std::memory_order_acquire);
    DrainBuffer(b, partial || retired);
    if (retired && b->read_chunk != nullptr) {
      // The thread has exited: its last chunk (never sealed) is drained and free.
      config_.pool->Release(b->read_chunk);
      b->read_chunk = nullptr;
    }
    const uint64_t d = b->TotalDropped();
    if (d != b->reported_dropped) {
      drops_[b->index] += d - b->reported_dropped;
      b->reported_dropped = d;
    }
    if (retired) {
      retired_scratch_.push_back(b);
      steps_.ForgetThread(b->index);
    }
  }
  // Released only after this cycle has written their thread names (AppendCatalogDeltas).
  struct ReleaseRetired {
    Flusher* f;
    ~ReleaseRetired() {
      for (ThreadBuffer* b : f->retired_scratch_) Catalog::Get().Release(b);
      f->retired_scratch_.clear();
    }
  } release_retired{this};
  if (partial || final) steps_.TakeFinished(drained_to_ns, final, &step_rows_);
  if (slow_trigger_) {
    slow_trigger_ = false;
    trigger = trigger || ring_.enabled();
  }
  const uint64_t nobuf = g_nobuf_dropped.load(std::memory_order_relaxed);
  if (nobuf != g_nobuf_reported) {
    drops_[0] += nobuf - g_nobuf_reported;
    g_nobuf_reported = nobuf;
  }
  std::vector<engine::SyncPoint> sync;
  std::vector<engine::CommInfo> comms;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sync.swap(pending_sync_);
    comms.swap(pending_comms_);
  }
  all_comms_.insert(all_comms_.end(), comms.begin(), comms.end());
  if (writing_disabled_) {
    step_rows_.clear();
    discarded_events.fetch_add(staged_events_total_, std::memory_order_relaxed);
    drops_.clear();
    return;
  }
  if (writer_.size() >= config_.segment_bytes && file_events_ > 0 && !RotateFile()) {
    discarded_events.fetch_add(staged_events_total_, std::memory_order_relaxed);
    return;
  }
  AppendCatalogDeltas(/*all=*/false);
  if (!comms.empty()) {
    block_scratch_.clear();
    engine::EncodeComms(comms, &block_scratch_);
    writer_.AppendBlock(BlockType::kComms, block_scratch_, true);
  }
  // Flight mode: the blocks go to the ring, except around a trigger (the ring is written, then
  // everything for one more window).
  uint64_t written_now = 0;
  const int64_t cycle_ns = NowNs();
  if (ring_.enabled() && trigger) {
    ring_.TakeAll([&](FlightRing::Block& b) {
      writer_.AppendBlock(BlockType::kEvents, b.payload, true);
      written_now += b.events;
    });
    detail_until_ns_ = cycle_ns + ring_.window_ns();
  }
  const bool to_ring = ring_.enabled() && cycle_ns >= detail_until_ns_ && !trigger;
  for (size_t i = 0; i < staged_count_; ++i) {
    if (to_ring) {
      ring_.Push(cycle_ns, staged_counts_[i], &staged_events_[i]);
    } else {
      writer_.AppendBlock(BlockType::kEvents, staged_events_[i], true);
      written_now += staged_counts_[i];
    }
  }
  if (ring_.enabled()) {
    flight_forgotten_events.store(ring_.forgotten_events(), std::memory_order_relaxed);
  }
  file_events_ += written_now;
  if (!step_rows_.empty()) {  // written in flight mode too: the summary of every step
    block_scratch_.clear();
    engine::EncodeStepStats(step_rows_, &block_scratch_);
    writer_.AppendBlock(BlockType::kStepStats, block_scratch_, true);
    step_rows_.clear();
  }
  AppendStatsIfChanged(/*force=*/false);
  if (!sync.empty()) {
    block_scratch_.clear();
    engine::EncodeSync(sync, &block_scratch_);
    writer_.AppendBlock(BlockType::kSync, block_scratch_, false);
  }
  const int64_t now = NowNs();
  if (final || now - last_anchor_ns_ >= kAnchorIntervalNs) {
    block_scratch_.clear();
    const engine::AnchorPoint a = ReadAnchor();
    engine::EncodeAnchors({a}, &block_scratch_);
    writer_.AppendBlock(BlockType::kAnchor, block_scratch_, false);
    last_anchor_ns_ = a.clock_ns;
  }
  if (final) {
    block_scratch_.clear();
    engine::EncodeEnd(engine::SegmentEnd{file_events_}, &block_scratch_);
    writer_.AppendBlock(BlockType::kEnd, block_scratch_, false);
  }
  const uint64_t bytes = writer_.staged();
  const uint64_t good = writer_.size() - bytes;  // the file's size after the last whole write
  Status s = writer_.Flush();
  if (!s.ok()) {
    const std::string path = writer_.path();
    FailWriting(s);
    CutBackTo(path, good, file_events_ - written_now);
    discarded_events.fetch_add(written_now, std::memory_order_relaxed);
    return;
  }
  written_events.fetch_add(written_now, std::memory_order_relaxed);
  written_bytes.fetch_add(bytes, std::memory_order_relaxed);
  if (final) (void)writer_.Close();
}

bool Flusher::WatchdogFires(int64_t now_ns) {
  if (config_.hang_timeout_ns <= 0) return false;
  bool fire = false;
  Catalog::Get().Buffers(&buffers_scratch_);
  for (ThreadBuffer* b : buffers_scratch_) {
    if (b->comm_depth == 0 || b->comm_watchdog_fired) continue;
    if (now_ns - b->comm_open_since < config_.hang_timeout_ns) continue;
    b->comm_watchdog_fired = true;  // once per call: it stays open, or a new one restarts it
    fire = true;
  }
  return fire;
}

void Flusher::CloseFile() {
  block_scratch_.clear();
  engine::EncodeEnd(engine::SegmentEnd{file_events_}, &block_scratch_);
  writer_.AppendBlock(BlockType::kEnd, block_scratch_, false);
  const uint64_t bytes = writer_.staged();
  const uint64_t good = writer_.size() - bytes;
  const std::string path = writer_.path();
  Status s = writer_.Close();
  if (!s.ok()) {
    FailWriting(s);
    CutBackTo(path, good, file_events_);
  } else {
    written_bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
}

void Flusher::CutBackTo(const std::string& path, uint64_t size, uint64_t events) {
  // A write that failed half way (a full disk) may have left whole blocks whose events are
  // counted as discarded, and a torn one: the file is cut back to the end of the last whole
  // write, so that it holds exactly what was counted as written, and closed with an END block
  // (a few bytes, in the space the cut freed) so that compaction takes it whole. A file with
  // nothing whole is removed.
  if (path.empty()) return;
  if (size == 0) {
    ::unlink(path.c_str());
    return;
  }
  if (::truncate(path.c_str(), static_cast<off_t>(size)) != 0) return;
  std::string end, framed;
  engine::EncodeEnd(engine::SegmentEnd{events}, &end);
  engine::FrameBlock(BlockType::kEnd, engine::Codec::kRaw, end, static_cast<uint32_t>(end.size()),
                     &framed);
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return;
  if (::write(fd, framed.data(), framed.size()) != static_cast<ssize_t>(framed.size())) {
    (void)::ftruncate(fd, static_cast<off_t>(size));  // no END rather than a torn one
  }
  ::close(fd);
}

void Flusher::FailWriting(const Status& s) {
  if (!writing_disabled_) {
    std::fprintf(stderr, "tracedb: %s; recording to %s is disabled for this process\n",
                 s.message().c_str(), rank_dir_.c_str());
  }
  if (!writing_disabled_) write_errors.fetch_add(1, std::memory_order_relaxed);
  writing_disabled_ = true;
  failed_.store(true, std::memory_order_release);
  writer_.Abandon();
}

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void Flusher::Run() {
  pthread_setname_np(pthread_self(), "tracedb-flusher");
  // SIGTERM/SIGINT/SIGHUP go to the application's threads: their handler waits for this one.
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &block, nullptr);
  for (;;) {
    // Read the wake word first: a request made after this point changes it, and the futex wait
    // below then returns at once.
    const uint32_t word = g_wake_word.load(std::memory_order_seq_cst);
    bool stopping, asked;
    uint64_t requested;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping = stop_;
      requested = flush_requested_;
      asked = requested > flush_done_;
    }
    const bool terminate = g_terminate_request.load(std::memory_order_acquire) != 0;
    const uint64_t full = g_full_chunks.load(std::memory_order_seq_cst);
    const uint32_t batch = g_wake_batch.load(std::memory_order_relaxed);
    const int64_t idle_ns = NowNs() - last_write_ns_;
    const bool timer = idle_ns >= config_.flush_interval_ns;
    const bool drain = g_drain_request.exchange(0, std::memory_order_acq_rel) != 0;
    bool trigger = g_trigger_request.exchange(0, std::memory_order_acq_rel) != 0;
    // The hang watchdog looks at what the last cycle decoded: a call begun and not ended for
    // the timeout. Its trigger instant is recorded from here, then written with the ring.
    if (timer && !stopping && !terminate && WatchdogFires(NowNs())) {
      if (config_.hang_trigger_name != 0) {
        tracedb_instant_ex(config_.hang_trigger_name, TRACEDB_CAT_USER, 0, nullptr);
      }
      trigger = true;
    }
    if (stopping || asked || terminate || timer || drain || trigger || full - full_seen_ >= batch) {
      full_seen_ = full;
      g_full_seen.store(full, std::memory_order_relaxed);
      const int64_t cpu0 = ThreadCpuNs();
      const bool everything = stopping || asked || terminate || timer || trigger;
      // A terminating signal (SIGTERM, a crash) writes the flight ring too: the moments before
      // a job is stopped or dies are the ones to keep.
      Cycle(/*final=*/stopping || terminate, /*partial=*/everything,
            /*trigger=*/trigger || terminate);
      // The signal handler waits (bounded) for the last write only: it is answered before
      // anything else, and no chunk is prefaulted for producers that will not write again (up
      // to 64 chunks of page faults, slow on a machine short of memory).
      if (terminate) g_terminate_done.store(1, std::memory_order_release);
      if (config_.pool != nullptr && !stopping && !terminate) {
        config_.pool->Prefault(config_.prefault_chunks);
      }
      cpu_ns.fetch_add(static_cast<uint64_t>(ThreadCpuNs() - cpu0), std::memory_order_relaxed);
      if (everything) last_write_ns_ = NowNs();
      if (asked) {
        std::lock_guard<std::mutex> lock(mu_);
        flush_done_ = requested;
        flush_status_ = writing_disabled_ ? Status::IOError("writing is disabled after an error")
                                          : Status::Ok();
        done_cv_.notify_all();
      }
      if (stopping || terminate) break;
      continue;
    }
    g_sleeping.store(1, std::memory_order_seq_cst);
    if (g_full_chunks.load(std::memory_order_seq_cst) - full_seen_ < batch) {
      WaitForWake(word, config_.flush_interval_ns - idle_ns);
    }
    g_sleeping.store(0, std::memory_order_relaxed);
  }
}

void Flusher::NotifyChunkFull() noexcept {
  const uint64_t full = g_full_chunks.fetch_add(1, std::memory_order_seq_cst) + 1;
  if (full - g_full_seen.load(std::memory_order_relaxed) >=
          g_wake_batch.load(std::memory_order_relaxed) &&
      g_sleeping.load(std::memory_order_seq_cst) != 0) {
    WakeFlusher();
  }
}

void Flusher::RequestTrigger() noexcept {
  g_trigger_request.store(1, std::memory_order_release);
  WakeFlusher();
}

void Flusher::RequestDrain() noexcept {
  g_drain_request.store(1, std::memory_order_release);
  WakeFlusher();
}

bool Flusher::RequestTerminateFlush(int timeout_ms) noexcept {
  if (g_flusher_running.load(std::memory_order_acquire) == 0) return false;
  g_terminate_request.store(1, std::memory_order_release);
  WakeFlusher();
  for (int waited_us = 0; waited_us < timeout_ms * 1000; waited_us += 500) {
    if (g_terminate_done.load(std::memory_order_acquire) != 0) return true;
    timespec ts = {0, 500 * 1000};
    nanosleep(&ts, nullptr);
  }
  return false;
}

Status Flusher::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!thread_.joinable()) return Status::IOError("flusher not running");
  const uint64_t mine = ++flush_requested_;
  WakeFlusher();
  if (!done_cv_.wait_for(lock, std::chrono::seconds(30), [&] { return flush_done_ >= mine; })) {
    return Status::Aborted("timed out waiting for the flusher");
  }
  return flush_status_;
}

void Flusher::Stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  WakeFlusher();
  thread_.join();
  g_flusher_running.store(0, std::memory_order_release);
}

void Flusher::LockForFork() { file_mu_.lock(); }
void Flusher::UnlockAfterFork() { file_mu_.unlock(); }

void Flusher::AbandonInChild() {
  // The thread and the mutex state belong to the parent: the caller leaks this object. Only the
  // inherited descriptor is released here: close(2) alone, never flock(LOCK_UN), which would
  // release the parent's lock on the same open file.
  writer_.Abandon();
  file_mu_.unlock();
  g_flusher_running.store(0, std::memory_order_relaxed);
  g_sleeping.store(0, std::memory_order_relaxed);
}

void Flusher::AddComm(engine::CommInfo c) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_comms_.push_back(std::move(c));
}

void Flusher::AddSync(const engine::SyncPoint& p) {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    pending_sync_.push_back(p);
  } catch (...) {
  }
}

}  // namespace tracedb::recorder
