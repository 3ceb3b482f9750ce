// The segment file format: constants and the decoded forms of every block type.
//
// A segment file is a 32-byte file header followed by framed blocks (20-byte frame header, then a
// payload that is raw or LZ4-compressed). Each rank writes its own files under DIR/rank-<r>/.
// Specified byte by byte in docs/segment-format.md; every clause cited below refers to it.
// Thread safety: plain data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tracedb::engine {

// --- File header (docs/segment-format.md "File header") ---
inline constexpr char kSegmentMagic[8] = {'T', 'D', 'B', 'S', 'E', 'G', '\n', '\x1a'};
inline constexpr uint16_t kSegmentVersion = 1;
inline constexpr size_t kFileHeaderSize = 32;
inline constexpr const char* kSegmentSuffix = ".tds";

// --- Block frame (docs/segment-format.md "Block frame") ---
inline constexpr uint32_t kBlockMagic = 0x4B424454u;  // "TDBK" in file byte order
inline constexpr size_t kBlockHeaderSize = 20;
inline constexpr uint32_t kMaxStoredBlockBytes = (64u << 20) + (1u << 20);

enum class BlockType : uint8_t {
  kMeta = 1,
  kStrings = 2,
  kThreads = 3,
  kLanes = 4,
  kEvents = 5,
  kSync = 6,
  kAnchor = 7,
  kStats = 8,
  kEnd = 9,
  kComms = 10,
  kStepStats = 11,
};

enum class Codec : uint8_t { kRaw = 0, kLz4 = 1 };

// --- Event kinds (docs/segment-format.md "EVENTS block") ---
enum class EventKind : uint8_t {
  kBegin = 0,     // opens a span on (thread, lane)
  kEnd = 1,       // closes the innermost open span on (thread, lane)
  kInstant = 2,   // a point in time
  kCounter = 3,   // a sampled value (value column)
  kComplete = 4,  // a span with explicit start and duration (ints column: dur)
  kStep = 5,      // the process entered training step N (ints column: step)
};
inline constexpr uint8_t kNumEventKinds = 6;
inline constexpr uint8_t kKindMask = 0x0f;
inline constexpr uint8_t kKindHasArgs = 0x10;

// Categories (the C ABI's TRACEDB_CAT_* values; docs/segment-format.md "Categories").
inline constexpr uint8_t kNumCategories = 8;
const char* CategoryName(uint8_t cat);  // "user", "compute", …; "user" when out of range

// Typed communication arguments. `mask` says which fields are present.
struct EventArgs {
  enum : uint32_t {
    kBytes = 1,
    kPeer = 2,
    kTag = 4,
    kComm = 8,
    kSeq = 16,
    kFlow = 32,
    kAllFields = 63
  };
  uint32_t mask = 0;
  uint64_t bytes = 0;
  int32_t peer = 0;
  int32_t tag = 0;
  uint32_t comm = 0;
  uint64_t seq = 0;
  uint64_t flow = 0;  // links events of one operation (a request and its completion, a message)
  bool operator==(const EventArgs&) const = default;
};

// One decoded event of an EVENTS block.
struct SegmentEvent {
  int64_t ts = 0;     // ns, the recorder's clock (see SegmentMeta::clock)
  int64_t ival = 0;   // kComplete: dur (ns); kStep: the step number; else 0
  double value = 0;   // kCounter only
  uint32_t name = 0;  // string id (0 = none)
  uint32_t lane = 0;  // 0 = the thread's own track
  EventKind kind = EventKind::kInstant;
  uint8_t cat = 0;
  bool has_args = false;
  EventArgs args;
};

enum class ClockKind : uint8_t { kTsc = 1, kMonotonic = 2 };

// META block: who wrote this file. Always the first block of a file.
struct SegmentMeta {
  int32_t rank = 0;
  int32_t world_size = 1;
  int32_t local_rank = 0;
  uint32_t pid = 0;
  std::string host;
  std::string tool_version;
  std::string command;  // the process's command line, arguments separated by spaces
  ClockKind clock = ClockKind::kMonotonic;
  int64_t anchor_realtime_ns = 0;  // CLOCK_REALTIME at the anchor
  int64_t anchor_clock_ns = 0;     // the recorder's clock at the same instant
  uint64_t tsc_hz = 0;             // TSC frequency used for conversion (0 when not TSC)
  int64_t start_step = -1;         // TRACEDB_START_STEP (-1: no window)
  int64_t end_step = -1;           // TRACEDB_END_STEP (-1: no window)
};

struct ThreadInfo {
  uint32_t index = 0;  // per-process thread index, from 1
  uint32_t os_tid = 0;
  std::string name;
};

struct LaneInfo {
  uint32_t lane = 0;  // per-process lane id, from 1
  uint32_t name = 0;  // string id of its name
};

// One clock-sync measurement: at local time `local_ns` the reference rank's clock read
// local_ns + offset_ns, within +-uncertainty_ns (half the best round trip).
struct SyncPoint {
  int32_t ref_rank = 0;
  int64_t local_ns = 0;
  int64_t offset_ns = 0;
  int64_t uncertainty_ns = 0;
};

// A (realtime, recorder clock) pair read together, within +-uncertainty_ns.
struct AnchorPoint {
  int64_t realtime_ns = 0;
  int64_t clock_ns = 0;
  int64_t uncertainty_ns = 0;
};

// Cumulative count of events dropped by one thread (index 0: threads that got no buffer).
struct DropCount {
  uint32_t thread_index = 0;
  uint64_t dropped = 0;
};

// STEPSTATS block entry: the recorder's summary of one training step of this process
// (docs/flight.md "step_stats"), written in every mode, flight or not. Times are the recorder's
// clock; the *_ns sums run over the process's threads, so they may exceed the step's duration.
struct StepStat {
  static constexpr size_t kMaxTopNames = 16;  // the decoder refuses more
  int64_t step = 0;
  int64_t start_ns = 0;    // the tracedb_step(step) marker
  int64_t dur_ns = 0;      // to the next marker (the last step: to its last event), >= 0
  int64_t compute_ns = 0;  // inside outermost spans of category compute or cuda
  int64_t comm_ns = 0;     // inside outermost communication calls (mpi, nccl, comm)
  int64_t wait_ns = 0;     // the part of comm_ns in blocking calls (not MPI_I*, not nccl)
  uint64_t bytes = 0;      // the `bytes` argument of the communication calls begun in the step
  uint64_t events = 0;     // its rows of the events table (a span once, by its start)
  std::vector<std::pair<uint32_t, int64_t>> top;  // (string id, inclusive ns), most time first
  bool operator==(const StepStat&) const = default;
};

// COMMS block entry: a communicator as seen by this rank. `comm` is the id events carry in their
// `comm` argument; it is the same on every member rank.
struct CommInfo {
  uint32_t comm = 0;
  int32_t size = 0;              // members
  int32_t rank_in_comm = 0;      // this rank's position in it
  std::vector<int32_t> members;  // world ranks of the members in comm order; may be empty
  bool operator==(const CommInfo&) const = default;
};

// END block: the file was closed cleanly.
struct SegmentEnd {
  uint64_t events = 0;  // events written to this file
};

}  // namespace tracedb::engine
