// Flusher implementation. See flusher.h; format in docs/segment-format.md.
#include "recorder/flusher.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "engine/version.h"
#include "recorder/catalog.h"
#include "recorder/clock.h"

namespace tracedb::recorder {

std::atomic<uint64_t> Flusher::written_events{0};
std::atomic<uint64_t> Flusher::discarded_events{0};
std::atomic<uint64_t> Flusher::written_bytes{0};
std::atomic<uint64_t> Flusher::write_errors{0};
std::atomic<uint64_t> Flusher::cpu_ns{0};

namespace {

using engine::BlockType;
using engine::EventKind;

constexpr size_t kMaxEventsPerBlock = 65536;
constexpr auto kPollInterval = std::chrono::milliseconds(5);
constexpr auto kBusyPollInterval = std::chrono::microseconds(500);  // after a large drain
constexpr int64_t kAnchorIntervalNs = 1000000000;       // with events: at most every second
constexpr int64_t kIdleAnchorIntervalNs = 60000000000;  // without: every minute
uint64_t g_nobuf_reported = 0;                          // flusher-owned

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
  try {
    thread_ = std::thread([this] { Run(); });
  } catch (...) {
    writer_.Abandon();
    return Status::Internal("cannot start the flusher thread");
  }
  return Status::Ok();
}

Status Flusher::OpenNextFile() {
  for (int attempt = 0; attempt < 1000000; ++attempt, ++seq_) {
    const std::string path = rank_dir_ + "/" + engine::SegmentFileName(meta_.pid, seq_);
    Status s = writer_.Open(path, meta_.pid, seq_);
    if (s.ok()) {
      ++seq_;
      WriteFileHeaderBlocks();
      return Status::Ok();
    }
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return s;  // a real error, not a name collision
  }
  return Status::IOError("no free segment file name in " + rank_dir_);
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

void Flusher::DrainBuffer(ThreadBuffer* b) {
  uint64_t t = b->tail.load(std::memory_order_relaxed);
  const uint64_t h = b->head.load(std::memory_order_acquire);
  if (t == h) return;
  encoder_.Reset(b->index);
  auto finish_block = [&] {
    if (staged_count_ == staged_events_.size()) staged_events_.emplace_back();
    std::string& out = staged_events_[staged_count_++];
    out.clear();
    encoder_.Finish(&out);
    staged_events_total_ += encoder_.count();
    encoder_.Reset(b->index);
  };
  engine::EventArgs args;
  while (t < h) {
    const Record r = SlotAt(b, t++);
    const auto kind = static_cast<EventKind>(r.kind & 0x0f);
    uint64_t payload = 0;
    if (r.kind & kRecPayload) payload = ExtAt(b, t++).a;
    const engine::EventArgs* ap = nullptr;
    if (r.kind & kRecArgs) {
      const ExtSlot e1 = ExtAt(b, t);
      const ExtSlot e2 = ExtAt(b, t + 1);
      const ExtSlot e3 = ExtAt(b, t + 2);
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
    if (encoder_.count() == kMaxEventsPerBlock) finish_block();
  }
  if (encoder_.count() > 0) finish_block();
  b->tail.store(h, std::memory_order_release);
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

void Flusher::Cycle(bool final) {
  Catalog& cat = Catalog::Get();
  cat.Buffers(&buffers_scratch_);
  staged_count_ = 0;
  staged_events_total_ = 0;
  for (ThreadBuffer* b : buffers_scratch_) {
    const bool retired = b->retired.load(std::memory_order_acquire);
    DrainBuffer(b);
    const uint64_t d = b->dropped.load(std::memory_order_relaxed);
    if (d != b->reported_dropped) {
      drops_[b->index] += d - b->reported_dropped;
      b->reported_dropped = d;
    }
    if (retired) retired_scratch_.push_back(b);
  }
  // Released only after this cycle has written their thread names (AppendCatalogDeltas).
  struct ReleaseRetired {
    Flusher* f;
    ~ReleaseRetired() {
      for (ThreadBuffer* b : f->retired_scratch_) Catalog::Get().Release(b);
      f->retired_scratch_.clear();
    }
  } release_retired{this};
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
    discarded_events.fetch_add(staged_events_total_, std::memory_order_relaxed);
    drops_.clear();
    return;
  }
  if (writer_.size() >= config_.segment_bytes && file_events_ > 0) {
    CloseFile();
    Status s = OpenNextFile();
    if (!s.ok()) {
      FailWriting(s);
      discarded_events.fetch_add(staged_events_total_, std::memory_order_relaxed);
      return;
    }
  }
  AppendCatalogDeltas(/*all=*/false);
  if (!comms.empty()) {
    block_scratch_.clear();
    engine::EncodeComms(comms, &block_scratch_);
    writer_.AppendBlock(BlockType::kComms, block_scratch_, true);
  }
  for (size_t i = 0; i < staged_count_; ++i) {
    writer_.AppendBlock(BlockType::kEvents, staged_events_[i], true);
  }
  file_events_ += staged_events_total_;
  AppendStatsIfChanged(/*force=*/false);
  if (!sync.empty()) {
    block_scratch_.clear();
    engine::EncodeSync(sync, &block_scratch_);
    writer_.AppendBlock(BlockType::kSync, block_scratch_, false);
  }
  const int64_t now = NowNs();
  if (final || (staged_events_total_ > 0 && now - last_anchor_ns_ >= kAnchorIntervalNs) ||
      now - last_anchor_ns_ >= kIdleAnchorIntervalNs) {
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
  Status s = writer_.Flush();
  if (!s.ok()) {
    FailWriting(s);
    discarded_events.fetch_add(staged_events_total_, std::memory_order_relaxed);
    return;
  }
  written_events.fetch_add(staged_events_total_, std::memory_order_relaxed);
  written_bytes.fetch_add(bytes, std::memory_order_relaxed);
  if (final) (void)writer_.Close();
}

void Flusher::CloseFile() {
  block_scratch_.clear();
  engine::EncodeEnd(engine::SegmentEnd{file_events_}, &block_scratch_);
  writer_.AppendBlock(BlockType::kEnd, block_scratch_, false);
  const uint64_t bytes = writer_.staged();
  Status s = writer_.Close();
  if (!s.ok()) {
    FailWriting(s);
  } else {
    written_bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
}

void Flusher::FailWriting(const Status& s) {
  if (!writing_disabled_) {
    std::fprintf(stderr, "tracedb: %s; recording to %s is disabled for this process\n",
                 s.message().c_str(), rank_dir_.c_str());
  }
  writing_disabled_ = true;
  write_errors.store(1, std::memory_order_relaxed);
  writer_.Abandon();
}

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void Flusher::Run() {
  pthread_setname_np(pthread_self(), "tracedb-flusher");
  std::unique_lock<std::mutex> lock(mu_);
  bool busy = false;
  for (;;) {
    const std::chrono::microseconds poll =
        busy ? kBusyPollInterval : std::chrono::microseconds(kPollInterval);
    cv_.wait_for(lock, poll, [&] { return stop_ || flush_requested_ > flush_done_; });
    const bool stopping = stop_;
    const uint64_t requested = flush_requested_;
    const bool asked = requested > flush_done_;
    lock.unlock();
    bool due = stopping || asked || NowNs() - last_write_ns_ >= config_.flush_interval_ns;
    if (!due) {
      Catalog::Get().Buffers(&buffers_scratch_);
      for (ThreadBuffer* b : buffers_scratch_) {
        const uint64_t used =
            b->head.load(std::memory_order_relaxed) - b->tail.load(std::memory_order_relaxed);
        if (used >= b->capacity / 4 || b->retired.load(std::memory_order_relaxed)) {
          due = true;
          break;
        }
      }
    }
    busy = false;
    if (due) {
      const int64_t cpu0 = ThreadCpuNs();
      Cycle(stopping);
      cpu_ns.fetch_add(static_cast<uint64_t>(ThreadCpuNs() - cpu0), std::memory_order_relaxed);
      last_write_ns_ = NowNs();
      // Producers are writing fast: come back sooner so that their rings do not fill up.
      busy = staged_events_total_ > 4096;
    }
    lock.lock();
    if (asked) {
      flush_done_ = requested;
      flush_status_ =
          writing_disabled_ ? Status::IOError("writing is disabled after an error") : Status::Ok();
      done_cv_.notify_all();
    }
    if (stopping) break;
  }
}

Status Flusher::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!thread_.joinable()) return Status::IOError("flusher not running");
  const uint64_t mine = ++flush_requested_;
  cv_.notify_one();
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
  cv_.notify_one();
  thread_.join();
}

void Flusher::AbandonInChild() {
  // The thread and the mutex state belong to the parent: the caller leaks this object, and only
  // the descriptor is released here.
  writer_.Abandon();
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
