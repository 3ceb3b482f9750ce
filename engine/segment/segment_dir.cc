// Trace directory listing and summary. See segment_dir.h.
#include "engine/segment/segment_dir.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <tuple>

#include "engine/segment/segment_format.h"
#include "engine/segment/segment_reader.h"
#include "engine/segment/segment_writer.h"
#include "engine/util/coding.h"

namespace tracedb::engine {
namespace {

bool ParseUint(const std::string& s, uint64_t* v) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t x = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    x = x * 10 + static_cast<uint64_t>(c - '0');
  }
  *v = x;
  return true;
}

// "seg-<pid>-<seq>.tds"
bool ParseSegmentName(const std::string& name, uint32_t* pid, uint32_t* seq) {
  const std::string suffix = kSegmentSuffix;
  if (name.size() < 4 + suffix.size() || name.compare(0, 4, "seg-") != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  const std::string mid = name.substr(4, name.size() - 4 - suffix.size());
  const size_t dash = mid.find('-');
  uint64_t p, q;
  if (dash == std::string::npos || !ParseUint(mid.substr(0, dash), &p) ||
      !ParseUint(mid.substr(dash + 1), &q) || p > UINT32_MAX || q > UINT32_MAX) {
    return false;
  }
  *pid = static_cast<uint32_t>(p);
  *seq = static_cast<uint32_t>(q);
  return true;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

void AddRankDir(const std::string& path, int32_t rank, std::vector<SegmentFileRef>* out) {
  for (const std::string& n : ListDir(path)) {
    SegmentFileRef ref;
    if (!ParseSegmentName(n, &ref.pid, &ref.seq)) continue;
    ref.rank = rank;
    ref.path = path + "/" + n;
    struct stat st;
    if (::stat(ref.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    ref.size = static_cast<uint64_t>(st.st_size);
    out->push_back(ref);
  }
}

bool ParseRankDir(const std::string& name, int32_t* rank) {
  uint64_t r;
  if (name.compare(0, 5, "rank-") != 0 || !ParseUint(name.substr(5), &r) || r > INT32_MAX) {
    return false;
  }
  *rank = static_cast<int32_t>(r);
  return true;
}

class SummaryVisitor : public SegmentVisitor {
 public:
  explicit SummaryVisitor(RankSummary* r, DirSummary* d) : rank_(r), dir_(d) {}
  void OnMeta(const SegmentMeta& m) override {
    if (rank_->host.empty()) rank_->host = m.host;
  }
  void OnEvents(uint32_t, const std::vector<SegmentEvent>& events) override {
    SegmentEventCount count;
    for (const SegmentEvent& e : events) {
      rank_->events_by_kind[static_cast<int>(e.kind)]++;
      if (!count.Add(e) && e.kind == EventKind::kStep) continue;  // a step marker
      if (rank_->first_ts == 0 || e.ts < rank_->first_ts) rank_->first_ts = e.ts;
      const int64_t end = e.kind == EventKind::kComplete ? SaturatingAdd(e.ts, e.ival) : e.ts;
      if (end > rank_->last_ts) rank_->last_ts = end;
    }
    rank_->events += count.events;
    dir_->steps += count.steps;
  }
  void OnStats(const std::vector<DropCount>& drops) override {
    for (const DropCount& d : drops) rank_->dropped += d.dropped;
  }
  void OnSync(const std::vector<SyncPoint>& p) override { rank_->sync_points += p.size(); }

 private:
  RankSummary* rank_;
  DirSummary* dir_;
};

}  // namespace

StatusOr<std::vector<SegmentFileRef>> ListSegmentFiles(
    const std::string& dir, const std::function<bool(int32_t rank)>& keep) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return Status::NotFound(dir + ": no such directory");
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(dir + ": not a directory");
  std::vector<SegmentFileRef> files;
  bool skipped = false;
  for (const std::string& n : ListDir(dir)) {
    int32_t rank;
    if (!ParseRankDir(n, &rank)) continue;
    if (keep && !keep(rank)) {
      skipped = true;
      continue;
    }
    AddRankDir(dir + "/" + n, rank, &files);
  }
  if (files.empty() && skipped) return ListSegmentFiles(dir);
  if (files.empty()) {
    // Maybe `dir` is itself a rank directory.
    std::string base = dir;
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    const size_t slash = base.rfind('/');
    int32_t rank;
    if (ParseRankDir(slash == std::string::npos ? base : base.substr(slash + 1), &rank)) {
      AddRankDir(base, rank, &files);
    }
  }
  if (files.empty()) {
    return Status::NotFound(dir + ": no segment files (expected rank-<r>/seg-*.tds)");
  }
  std::sort(files.begin(), files.end(), [](const SegmentFileRef& a, const SegmentFileRef& b) {
    return std::tie(a.rank, a.pid, a.seq) < std::tie(b.rank, b.pid, b.seq);
  });
  return files;
}

namespace {

// Walks `dir` as InspectSegmentDir describes; with `remove`, unlinks the segment files and
// removes the directories left empty.
SegmentDirContents WalkRecorded(const std::string& dir, const std::vector<std::string>& also,
                                bool remove) {
  SegmentDirContents c;
  auto foreign = [&c](const std::string& name) {
    if (c.foreign.size() < 8) c.foreign.push_back(name);
  };
  for (const std::string& n : ListDir(dir)) {
    const std::string path = dir + "/" + n;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    int32_t rank;
    if (std::find(also.begin(), also.end(), n) != also.end() && S_ISREG(st.st_mode)) continue;
    if (!S_ISDIR(st.st_mode) || !ParseRankDir(n, &rank)) {
      foreign(n);
      continue;
    }
    bool kept = false;
    for (const std::string& f : ListDir(path)) {
      const std::string fp = path + "/" + f;
      struct stat fst;
      uint32_t pid, seq;
      if (::lstat(fp.c_str(), &fst) != 0) continue;
      if (!S_ISREG(fst.st_mode) || !ParseSegmentName(f, &pid, &seq)) {
        foreign(n + "/" + f);
        kept = true;
        continue;
      }
      c.segment_files++;
      if (remove && ::unlink(fp.c_str()) != 0) {
        foreign(n + "/" + f);
        kept = true;
      }
    }
    if (remove && !kept && ::rmdir(path.c_str()) != 0) foreign(n);
  }
  if (remove && c.foreign.empty()) ::rmdir(dir.c_str());
  return c;
}

}  // namespace

SegmentDirContents InspectSegmentDir(const std::string& dir, const std::vector<std::string>& also) {
  return WalkRecorded(dir, also, /*remove=*/false);
}

std::vector<std::string> RemoveRecordedSegments(const std::string& dir) {
  return WalkRecorded(dir, {}, /*remove=*/true).foreign;
}

StatusOr<DirSummary> SummarizeSegmentDir(const std::string& dir) {
  TRACEDB_ASSIGN_OR_RETURN(std::vector<SegmentFileRef> files, ListSegmentFiles(dir));
  DirSummary sum;
  ScanBuffers buffers;  // one for every file (engine/util/read_buffer.h)
  ScanOptions options;
  options.buffers = &buffers;
  for (const SegmentFileRef& f : files) {
    RankSummary& r = sum.per_rank[f.rank];
    r.rank = f.rank;
    if (std::find(r.pids.begin(), r.pids.end(), f.pid) == r.pids.end()) r.pids.push_back(f.pid);
    r.files++;
    r.bytes += f.size;
    sum.files++;
    sum.bytes += f.size;
    SummaryVisitor v(&r, &sum);
    StatusOr<SegmentScan> scan = ScanSegment(f.path, &v, options);
    if (!scan.ok()) {
      sum.unreadable_files++;
      if (sum.problems.size() < 32) sum.problems.push_back(scan.status().message());
      continue;
    }
    sum.corrupt_blocks += scan->corrupt_blocks;
    if (scan->torn_tail_bytes > 0) {
      sum.torn_tails++;
      sum.torn_bytes += scan->torn_tail_bytes;
    }
    if (!scan->closed) {
      sum.open_files++;
      if (ProbeSegmentWriter(f.path) == WriterState::kGone) sum.dead_writer_files++;
    }
    for (const std::string& p : scan->problems) {
      if (sum.problems.size() < 32) sum.problems.push_back(f.path + ": " + p);
    }
  }
  sum.ranks = sum.per_rank.size();
  for (const auto& [rank, r] : sum.per_rank) {
    sum.events += r.events;
    sum.dropped += r.dropped;
  }
  return sum;
}

}  // namespace tracedb::engine
