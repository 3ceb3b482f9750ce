// ChromeTraceWriter: turns decoded event rows into Chrome Trace Event JSON files. It writes
// each row as an X (span), i (instant) or C (counter) event, gives every process (rank) and
// thread (track) its metadata events in each file where they appear, draws flow arrows (s/f
// pairs) between the two ends of a request and between given event pairs, and starts a new
// complete file whenever the next row would pass the size limit.
// StringCache: the database's strings as JSON literals, loaded on first use.
// Thread safety: one thread at a time.
// Mapping: docs/export.md.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/db/event_block.h"
#include "engine/db/sqlite.h"
#include "engine/util/status.h"
#include "query/export/chrome_exporter.h"
#include "query/export/output_file.h"

namespace tracedb::query {

// The text and the JSON literal (quotes included) of each string id, read from the `strings`
// table the first time it is asked for. An id missing from the table reads as "". A read error
// is kept in status().
class StringCache {
 public:
  Status Init(engine::Db* db);
  const std::string& Literal(uint32_t id) { return Get(id).literal; }
  const std::string& Text(uint32_t id) { return Get(id).text; }
  const Status& status() const { return status_; }

 private:
  struct Entry {
    std::string text, literal;
  };
  const Entry& Get(uint32_t id) {
    if (id < slot_.size() && slot_[id] != 0) return entries_[slot_[id] - 1];
    return Load(id);
  }
  const Entry& Load(uint32_t id);

  engine::Stmt st_;
  std::vector<uint32_t> slot_;  // id -> index + 1 into entries_ (0: not loaded)
  std::deque<Entry> entries_;   // stable addresses
  Status status_;
};

struct ChromeWriterOptions {
  std::string output;           // part 0; see ChromePartPath()
  uint64_t max_file_bytes = 0;  // per file, uncompressed; 0: one file
  int gzip_level = 0;           // 0: plain
  int64_t origin_ns = 0;        // subtracted from every timestamp
  std::vector<std::pair<int64_t, int64_t>> extra_flows;
  std::string extra_flow_name;
  size_t max_open_flows = 1u << 20;
};

class ChromeTraceWriter {
 public:
  // `strings` and `stats` must outlive the writer.
  ChromeTraceWriter(ChromeWriterOptions o, StringCache* strings, ChromeExportStats* stats);
  ~ChromeTraceWriter();

  // Declares a process: its name is "rank R", plus " (HOST)" when `host` is not empty.
  void AddRank(int32_t rank, std::string_view host);
  // The ids of a track in the tracks table (-1: NULL), exported so that `tracedb import` finds
  // the same tracks again (two lanes of one name, a thread's OS id).
  struct TrackIds {
    int64_t tid = -1, pid = -1, local_id = -1;
  };
  // Declares a thread. `kind` "global" puts its instants in the global scope.
  void AddTrack(uint32_t track, int32_t rank, std::string_view kind, std::string_view name,
                int64_t sort_index, TrackIds ids);

  // Block columns Write() reads (DecodedBlock::Need).
  uint32_t columns() const;

  // Opens the first file. `other_data` holds the members of otherData shared by every file.
  Status Start(std::string other_data);
  // Rows come rank by rank: call before the rows of the next rank (request flows pair up
  // within a rank only).
  void BeginRank();
  // Writes row i of `b` (of block rank `rank`). False on an output error (see status()).
  bool Write(const engine::DecodedBlock& b, size_t i, int32_t rank);
  // Closes the last file and removes parts left by an earlier, larger export of the same name.
  Status Finish();
  // Removes every file written (after an error).
  void Abandon();

  // The first output error (a file that cannot be created, written or renamed).
  const Status& status() const {
    return !status_.ok() || out_ == nullptr ? status_ : out_->status();
  }
  // JSON bytes written so far, the open file included.
  uint64_t json_bytes() const;

 private:
  static constexpr uint64_t kNoFile = UINT64_MAX;
  struct RankOut {
    int32_t rank = 0;
    std::string pid;           // "pid":R
    std::string name_literal;  // "rank R (host)"
    uint64_t file = kNoFile;   // the last file given this process's metadata
  };
  struct TrackOut {
    int32_t pid = 0;
    bool global = false;       // tracks.kind = 'global': instants get scope "g"
    bool extra = false;        // an end of an extra flow lies on this track
    std::string prefix;        // "pid":R,"tid":T
    std::string name_literal;  // thread_name
    std::string kind_literal;  // tracks.kind as a JSON string, when not "thread"
    std::string ids_members;   // ,"tracedb_tid":T,… for the thread_name args
    int64_t sort_index = 0;    // thread_sort_index
    uint64_t file = kNoFile;   // the last file given this thread's metadata
    RankOut* rank = nullptr;
  };
  // An end of a request flow waiting for its partner.
  struct OpenFlow {
    int64_t ts = 0;
    uint32_t track = 0;
    uint32_t name = 0;
    uint64_t file = 0;
  };
  // An extra flow pair and the ends seen so far.
  struct ExtraPair {
    struct End {
      bool seen = false;
      int64_t ts = 0;
      uint32_t track = 0;
      uint64_t file = 0;
    } end[2];           // 0: from, 1: to
    bool done = false;  // drawn, or given up (an end cut off by a split)
  };
  // What a row brings into the current file; decided before writing it, applied once the row
  // is known to fit.
  struct Plan {
    bool rank_meta = false, track_meta = false;
    enum class Flow { kNone, kOpen, kPair, kCut } flow = Flow::kNone;
    OpenFlow partner;
    enum class Extra { kRecord, kDraw, kCut };
    struct ExtraEnd {
      uint32_t pair;
      int end;  // this row's end of the pair: 0 from, 1 to
      Extra action;
    };
    std::vector<ExtraEnd> extra;
    size_t extra_drawn = 0;
  };

  TrackOut* Track(uint32_t id, int32_t block_rank);
  RankOut* Rank(int32_t rank);
  Status OpenPart();
  Status ClosePart();
  void FinishRankFlows();
  void MakePlan(TrackOut* t, uint64_t flow, int64_t id);
  void ApplyPlan(const engine::DecodedBlock& b, size_t i, TrackOut* t, uint64_t flow);
  char* Sep(char* p);
  char* WriteMeta(char* p, TrackOut* t);
  char* WriteArgs(char* p, const engine::DecodedBlock& b, size_t i, uint32_t mask,
                  size_t json_members);
  char* WriteFlowPair(char* p, uint64_t id, const TrackOut& from, int64_t from_ts,
                      const TrackOut& to, int64_t to_ts, const std::string& name_literal);

  ChromeWriterOptions o_;
  StringCache* strings_;
  ChromeExportStats* stats_;

  std::unordered_map<int32_t, std::unique_ptr<RankOut>> ranks_;
  std::unordered_map<uint32_t, std::unique_ptr<TrackOut>> tracks_;
  TrackOut* last_track_ = nullptr;  // Write()'s cache: rows come in runs of one track
  uint32_t last_track_id_ = 0;

  std::unique_ptr<OutputFile> out_;
  uint64_t file_index_ = 0;
  uint64_t events_in_file_ = 0;
  bool file_empty_ = true;
  bool file_oversize_ = false;
  std::string other_data_;
  uint64_t footer_reserve_ = 0;

  std::unordered_map<uint64_t, OpenFlow> open_flows_;  // this rank's request flows, by flow
  uint64_t next_flow_id_ = 1;
  std::vector<ExtraPair> extra_pairs_;
  std::unordered_map<int64_t, std::vector<std::pair<uint32_t, int>>> extra_by_id_;
  std::unordered_map<uint32_t, bool> extra_tracks_;
  std::string extra_name_literal_;

  Plan plan_;              // the current row's
  std::string args_json_;  // scratch: the current row's JSON args, re-written
  Status status_;
};

}  // namespace tracedb::query
