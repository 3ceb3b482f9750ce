// Segment scanning. See segment_reader.h; format in docs/segment-format.md.
#include "engine/segment/segment_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/segment/segment_blocks.h"
#include "engine/util/coding.h"
#include "engine/util/crc32c.h"
#include "engine/util/lz4_codec.h"

namespace tracedb::engine {
namespace {

void Problem(SegmentScan* scan, uint64_t offset, const std::string& what) {
  if (scan->problems.size() < SegmentScan::kMaxProblems) {
    scan->problems.push_back("offset " + std::to_string(offset) + ": " + what);
  }
}

enum class FrameResult { kOk, kTruncated, kBad };

struct Frame {
  BlockType type;
  Codec codec;
  uint32_t stored;
  uint32_t raw;
  std::string_view payload;
};

// Checksums ranges of one file's bytes in linear total time, whatever the file holds. Ranges
// are summed directly while the bytes summed stay within twice the file's size (every honest
// file: each block is checked about once); past that budget (a damaged or hostile file whose
// many "TDBK" candidates claim long payloads) a table of the CRC of every 64-byte-aligned
// prefix is built once, and any range then costs at most 126 bytes of CRC and one
// Crc32cCombine, instead of its length.
class RangeCrc {
 public:
  explicit RangeCrc(std::string_view bytes) : bytes_(bytes), budget_(2 * bytes.size() + 4096) {}

  // CRC-32C of the 12 header bytes at h (h + 4 .. h + 16 of a frame) then bytes[a, b).
  uint32_t Frame(const char* h, uint64_t a, uint64_t b) {
    const uint32_t head = Crc32c(h, 12);
    if (prefix_.empty() && b - a <= budget_) {
      budget_ -= b - a;
      work_ += b - a;
      return Crc32c(bytes_.data() + a, b - a, head);
    }
    return Crc32cCombine(head, Range(a, b), b - a);
  }
  // Bytes summed so far (including the table), for tests of the linear bound.
  uint64_t work() const { return work_; }

 private:
  static constexpr uint64_t kStep = 64;
  // CRC of bytes[a, b) from two prefixes: crc(0..b) = crc(0..a) * x^(8(b-a)) + crc(a..b).
  uint32_t Range(uint64_t a, uint64_t b) {
    if (prefix_.empty()) Build();
    const uint32_t pa = Prefix(a), pb = Prefix(b);
    return pb ^ Crc32cCombine(pa, 0, b - a);
  }
  uint32_t Prefix(uint64_t end) {
    const uint64_t base = end / kStep * kStep;
    work_ += end - base;
    return Crc32c(bytes_.data() + base, end - base, prefix_[end / kStep]);
  }
  void Build() {
    prefix_.reserve(bytes_.size() / kStep + 1);
    uint32_t crc = 0;
    prefix_.push_back(crc);
    for (uint64_t at = 0; at + kStep <= bytes_.size(); at += kStep) {
      crc = Crc32c(bytes_.data() + at, kStep, crc);
      prefix_.push_back(crc);
    }
    work_ += bytes_.size();
  }

  std::string_view bytes_;
  uint64_t budget_;
  uint64_t work_ = 0;
  std::vector<uint32_t> prefix_;  // [i]: CRC-32C of bytes[0, 64 i)
};

// Parses the frame at bytes[pos]; "docs/segment-format.md: Block frame".
FrameResult ParseFrame(std::string_view bytes, uint64_t pos, RangeCrc* crcs, Frame* f,
                       std::string* why) {
  const uint64_t left = bytes.size() - pos;
  if (left < kBlockHeaderSize) {
    *why = "incomplete block header";
    return left >= 4 && DecodeFixed32(bytes.data() + pos) != kBlockMagic ? FrameResult::kBad
                                                                         : FrameResult::kTruncated;
  }
  const char* h = bytes.data() + pos;
  if (DecodeFixed32(h) != kBlockMagic) {
    *why = "no block magic";
    return FrameResult::kBad;
  }
  f->type = static_cast<BlockType>(static_cast<uint8_t>(h[4]));
  f->codec = static_cast<Codec>(static_cast<uint8_t>(h[5]));
  f->stored = DecodeFixed32(h + 8);
  f->raw = DecodeFixed32(h + 12);
  const uint32_t crc = DecodeFixed32(h + 16);
  if (f->stored > kMaxStoredBlockBytes || f->raw > kMaxRawBlockBytes) {
    *why = "block length out of range";
    return FrameResult::kBad;
  }
  if (left - kBlockHeaderSize < f->stored) {
    *why = "block extends past the end of the file";
    return FrameResult::kTruncated;
  }
  f->payload = std::string_view(h + kBlockHeaderSize, f->stored);
  const uint64_t payload_at = pos + kBlockHeaderSize;
  if (crcs->Frame(h + 4, payload_at, payload_at + f->stored) != crc) {
    *why = "bad CRC";
    return FrameResult::kBad;
  }
  if (f->codec != Codec::kRaw && f->codec != Codec::kLz4) {
    *why = "unknown codec";
    return FrameResult::kBad;
  }
  if (f->codec == Codec::kRaw && f->raw != f->stored) {
    *why = "raw block with differing sizes";
    return FrameResult::kBad;
  }
  return FrameResult::kOk;
}

// One block of a scan to the visitor, through the buffers of the scan (ScanBuffers).
Status Dispatch(const Frame& f, std::string_view raw, SegmentVisitor* v, SegmentScan* scan,
                ScanBuffers* bufs, const ScanOptions& options) {
  std::vector<SegmentEvent>* events_buf = &bufs->events;
  const size_t event_chunk = options.event_chunk;
  switch (f.type) {
    case BlockType::kMeta: {
      SegmentMeta m;
      TRACEDB_RETURN_IF_ERROR(DecodeMeta(raw, &m));
      v->OnMeta(m);
      return Status::Ok();
    }
    case BlockType::kStrings: {
      uint32_t first;
      std::vector<std::string> strings;
      TRACEDB_RETURN_IF_ERROR(DecodeStrings(raw, &first, &strings));
      v->OnStrings(first, strings);
      return Status::Ok();
    }
    case BlockType::kThreads: {
      std::vector<ThreadInfo> t;
      TRACEDB_RETURN_IF_ERROR(DecodeThreads(raw, &t));
      v->OnThreads(t);
      return Status::Ok();
    }
    case BlockType::kLanes: {
      std::vector<LaneInfo> l;
      TRACEDB_RETURN_IF_ERROR(DecodeLanes(raw, &l));
      v->OnLanes(l);
      return Status::Ok();
    }
    case BlockType::kEvents: {
      if (options.event_columns) {
        EventsBlockDecoder d;
        TRACEDB_RETURN_IF_ERROR(d.Init(raw));
        const uint64_t chunk = event_chunk == 0 ? d.count() : event_chunk;
        do {
          TRACEDB_RETURN_IF_ERROR(d.NextColumns(
              static_cast<size_t>(std::min<uint64_t>(chunk, SIZE_MAX)), &bufs->columns));
          scan->events += bufs->columns.n;
          v->OnEventColumns(d.thread_index(), bufs->columns);
        } while (!d.done());
        return Status::Ok();
      }
      if (event_chunk == 0) {
        uint32_t thread;
        TRACEDB_RETURN_IF_ERROR(DecodeEventsBlock(raw, &thread, events_buf));
        scan->events += events_buf->size();
        v->OnEvents(thread, *events_buf);
        return Status::Ok();
      }
      EventsBlockDecoder d;
      TRACEDB_RETURN_IF_ERROR(d.Init(raw));
      do {
        TRACEDB_RETURN_IF_ERROR(d.Next(event_chunk, events_buf));
        scan->events += events_buf->size();
        v->OnEvents(d.thread_index(), *events_buf);
      } while (!d.done());
      return Status::Ok();
    }
    case BlockType::kSync: {
      std::vector<SyncPoint> p;
      TRACEDB_RETURN_IF_ERROR(DecodeSync(raw, &p));
      v->OnSync(p);
      return Status::Ok();
    }
    case BlockType::kAnchor: {
      std::vector<AnchorPoint> p;
      TRACEDB_RETURN_IF_ERROR(DecodeAnchors(raw, &p));
      v->OnAnchors(p);
      return Status::Ok();
    }
    case BlockType::kStats: {
      std::vector<DropCount> d;
      TRACEDB_RETURN_IF_ERROR(DecodeStats(raw, &d));
      v->OnStats(d);
      return Status::Ok();
    }
    case BlockType::kComms: {
      std::vector<CommInfo> c;
      TRACEDB_RETURN_IF_ERROR(DecodeComms(raw, &c));
      v->OnComms(c);
      return Status::Ok();
    }
    case BlockType::kStepStats: {
      std::vector<StepStat> st;
      TRACEDB_RETURN_IF_ERROR(DecodeStepStats(raw, &st));
      v->OnStepStats(st);
      return Status::Ok();
    }
    case BlockType::kEnd: {
      SegmentEnd e;
      TRACEDB_RETURN_IF_ERROR(DecodeEnd(raw, &e));
      scan->closed = true;
      v->OnEnd(e);
      return Status::Ok();
    }
  }
  return Status::Corruption("unknown block type " + std::to_string(static_cast<int>(f.type)));
}

// Finds the next offset > pos where a whole, CRC-valid block starts; bytes.size() if none.
// Candidates claim at most what remains of the file (ParseFrame); their CRCs cost O(log n)
// once RangeCrc's budget is spent, so a scan stays linear in the file.
uint64_t Resync(std::string_view bytes, uint64_t pos, RangeCrc* crcs) {
  const char magic[4] = {'T', 'D', 'B', 'K'};
  for (uint64_t p = pos + 1; p + kBlockHeaderSize <= bytes.size(); ++p) {
    const void* hit = std::memchr(bytes.data() + p, magic[0], bytes.size() - p);
    if (hit == nullptr) break;
    p = static_cast<uint64_t>(static_cast<const char*>(hit) - bytes.data());
    if (p + kBlockHeaderSize > bytes.size()) break;
    if (std::memcmp(bytes.data() + p, magic, 4) != 0) continue;
    Frame f;
    std::string why;
    if (ParseFrame(bytes, p, crcs, &f, &why) == FrameResult::kOk) return p;
  }
  return bytes.size();
}

// The file header at bytes[0] (`file_size`: the whole file's, of which `bytes` may be the first
// part): the scan's version, pid and seq, and the header's size (the blocks start there).
Status ParseFileHeader(const std::string& name, std::string_view bytes, uint64_t file_size,
                       SegmentScan* scan, uint16_t* header_size) {
  if (bytes.size() < kFileHeaderSize) {
    return Status::Corruption("segment " + name + ": file shorter than its 32-byte header");
  }
  const char* h = bytes.data();
  if (std::memcmp(h, kSegmentMagic, 8) != 0) {
    return Status::Corruption("segment " + name + ": not a tracedb segment (bad magic)");
  }
  if (DecodeFixed32(h + 28) != Crc32c(h, 28)) {
    return Status::Corruption("segment " + name + ": bad file header CRC");
  }
  scan->version = DecodeFixed16(h + 8);
  if (scan->version != kSegmentVersion) {
    return Status::Corruption("segment " + name + ": format version " +
                              std::to_string(scan->version) + ", this build reads version " +
                              std::to_string(kSegmentVersion));
  }
  *header_size = DecodeFixed16(h + 10);
  if (*header_size < kFileHeaderSize || *header_size > file_size) {
    return Status::Corruption("segment " + name + ": bad header size");
  }
  scan->pid = DecodeFixed32(h + 16);
  scan->seq = DecodeFixed32(h + 20);
  return Status::Ok();
}

Status ResumeOffsetPastTheEnd(const std::string& name, uint64_t start_offset) {
  return Status::InvalidArgument("segment " + name + ": resume offset " +
                                 std::to_string(start_offset) + " is past the end of the file");
}

// A whole, CRC-checked block at `pos` (up to `next`): handed to the visitor, its payload
// decompressed, or only counted when the options do not want its type. A payload that does
// not decode is counted corrupt. IOError: no memory for the payload.
Status TakeFrame(const std::string& name, const Frame& f, uint64_t pos, uint64_t next,
                 SegmentVisitor* visitor, const ScanOptions& options, ScanBuffers* bufs,
                 SegmentScan* scan) {
  if (f.type == BlockType::kAnchor || f.type == BlockType::kEnd) scan->anchor_end = next;
  if (f.type == BlockType::kEvents ? !options.events : !options.catalog) {
    // CRC-checked above; the caller does not want its contents now.
    if (f.type == BlockType::kEnd) scan->closed = true;
    scan->blocks++;
    return Status::Ok();
  }
  std::string_view raw = f.payload;
  Status s;
  if (f.codec == Codec::kLz4) {
    char* const out = bufs->raw.Reserve(f.raw);
    if (out == nullptr) {  // (f.raw is at most kMaxRawBlockBytes: memory, not the file)
      return Status::IOError("segment " + name + ": no memory to decompress the block at " +
                             std::to_string(pos) + " (" + std::to_string(f.raw) + " bytes)");
    }
    s = Lz4DecompressTo(f.payload, f.raw, out);
    raw = std::string_view(out, f.raw);
  }
  if (s.ok()) s = Dispatch(f, raw, visitor, scan, bufs, options);
  if (!s.ok()) {
    Problem(scan, pos, s.message());
    scan->corrupt_blocks++;
    scan->corrupt_bytes += next - pos;
  } else {
    scan->blocks++;
  }
  return Status::Ok();
}

}  // namespace

StatusOr<SegmentScan> ScanSegmentBytes(const std::string& name, std::string_view bytes,
                                       SegmentVisitor* visitor, const ScanOptions& options) {
  const uint64_t start_offset = options.start_offset;
  static_assert(kBlockMagic == ('T' | 'D' << 8 | 'B' << 16 | 'K' << 24));
  SegmentScan scan;
  scan.file_size = bytes.size();
  uint16_t header_size = 0;
  TRACEDB_RETURN_IF_ERROR(ParseFileHeader(name, bytes, bytes.size(), &scan, &header_size));
  uint64_t pos = std::max<uint64_t>(start_offset, header_size);
  if (pos > bytes.size()) return ResumeOffsetPastTheEnd(name, start_offset);
  ScanBuffers own;
  ScanBuffers& bufs = options.buffers != nullptr ? *options.buffers : own;
  RangeCrc crcs(bytes);
  scan.end_offset = pos;
  while (pos < bytes.size() && pos < options.end_offset) {
    Frame f;
    std::string why;
    FrameResult r = ParseFrame(bytes, pos, &crcs, &f, &why);
    uint64_t next_valid = 0;  // 0: not searched yet
    if (r == FrameResult::kTruncated) {
      // Either the torn tail of the file, or a damaged length followed by more blocks.
      next_valid = Resync(bytes, pos, &crcs);
      if (next_valid >= bytes.size()) {
        scan.torn_tail_bytes = bytes.size() - pos;
        break;
      }
      r = FrameResult::kBad;
    }
    if (r == FrameResult::kBad) {
      const uint64_t next = next_valid != 0 ? next_valid : Resync(bytes, pos, &crcs);
      Problem(&scan, pos, why + "; skipped " + std::to_string(next - pos) + " bytes");
      scan.corrupt_blocks++;
      scan.corrupt_bytes += next - pos;
      pos = next;
      scan.end_offset = pos;
      continue;
    }
    const uint64_t next = pos + kBlockHeaderSize + f.stored;
    TRACEDB_RETURN_IF_ERROR(TakeFrame(name, f, pos, next, visitor, options, &bufs, &scan));
    pos = next;
    scan.end_offset = pos;
  }
  scan.crc_work_bytes = crcs.work();
  return scan;
}

namespace {

// Reads up to `n` bytes of fd at `at` into buf; fewer at the end of the file.
StatusOr<size_t> ReadAt(int fd, const std::string& path, uint64_t at, char* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, buf + got, n - got, static_cast<off_t>(at + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("cannot read segment " + path, errno);
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

StatusOr<std::string_view> ReadInto(int fd, const std::string& path, uint64_t at, uint64_t n,
                                    ReadBuffer* buf) {
  char* const bytes = n <= SIZE_MAX ? buf->Reserve(static_cast<size_t>(n)) : nullptr;
  if (bytes == nullptr) {
    return Status::IOError("cannot read segment " + path + ": no memory for its " +
                           std::to_string(n) + " bytes");
  }
  TRACEDB_ASSIGN_OR_RETURN(size_t got, ReadAt(fd, path, at, bytes, static_cast<size_t>(n)));
  return std::string_view(bytes, got);
}

// The window of a scan that passes over EVENTS blocks (ScanOptions::skip_unread_events).
constexpr size_t kSkipWindow = 4096;

// Whether the block header at `h` (20 bytes; `left` bytes of the file from there) is that of an
// EVENTS block whose header holds together as ParseFrame checks it, but for the CRC: its
// payload's size in *stored.
bool UnreadEventsBlock(const char* h, uint64_t left, uint32_t* stored) {
  const auto type = static_cast<BlockType>(static_cast<uint8_t>(h[4]));
  const auto codec = static_cast<Codec>(static_cast<uint8_t>(h[5]));
  *stored = DecodeFixed32(h + 8);
  const uint32_t raw = DecodeFixed32(h + 12);
  return DecodeFixed32(h) == kBlockMagic && type == BlockType::kEvents &&
         *stored <= kMaxStoredBlockBytes && raw <= kMaxRawBlockBytes &&
         (codec == Codec::kLz4 || (codec == Codec::kRaw && raw == *stored)) &&
         left - kBlockHeaderSize >= *stored;
}

// Where a windowed scan gets its bytes: up to `n` of them at offset `at` of the file, fewer at
// its end, valid until the next call.
using ReadRange = std::function<StatusOr<std::string_view>(uint64_t at, uint64_t n)>;

// The scan of a file larger than its window (ScanOptions::window_bytes): its blocks read a window
// at a time into one buffer, so that a large file no longer needs a buffer of its size (64 MB of
// compaction's peak memory at the recorder's default file size). Only whole, valid blocks are
// taken this way; at the first block that is not (a damaged one, a torn tail), the file is read
// whole and ScanSegmentBytes goes on from there, so that every defect is found and reported as
// a scan of the whole file does.
StatusOr<SegmentScan> ScanWindows(const std::string& path, uint64_t file_size,
                                  const ReadRange& read, SegmentVisitor* visitor,
                                  const ScanOptions& o) {
  // (At least a file header and a block header; a header larger than the first window comes
  // with the second.) Passing over EVENTS blocks, a window need hold little more than a header:
  // the other blocks are small, and one that is not gets a window of its size.
  const bool skip = !o.events && o.skip_unread_events;
  const uint64_t window =
      std::max<uint64_t>(skip ? std::min<size_t>(o.window_bytes, kSkipWindow) : o.window_bytes, 64);
  SegmentScan scan;
  uint64_t base = 0;
  // The first window holds the header; a scan resumed further on (compact --watch's passes)
  // reads no more of the file's start than a header can take.
  const uint64_t first = std::min(
      o.start_offset > (1u << 16) ? std::min<uint64_t>(window, 1u << 16) : window, file_size);
  TRACEDB_ASSIGN_OR_RETURN(std::string_view win, read(0, first));
  uint64_t end = win.size() < first ? win.size() : file_size;
  uint16_t header_size = 0;
  TRACEDB_RETURN_IF_ERROR(ParseFileHeader(path, win, end, &scan, &header_size));
  uint64_t pos = std::max<uint64_t>(o.start_offset, header_size);
  if (pos > end) return ResumeOffsetPastTheEnd(path, o.start_offset);
  scan.end_offset = pos;
  while (pos < end && pos < o.end_offset) {
    if (pos - base >= win.size()) {
      // (The window ended where this block starts: a payload ended it exactly, or a file
      // header longer than the first window.)
      base = pos;
      TRACEDB_ASSIGN_OR_RETURN(win, read(pos, std::min(window, end - pos)));
      if (win.size() < std::min(window, end - pos)) end = pos + win.size();  // the file shrank
      continue;
    }
    if (skip && win.size() - (pos - base) >= kBlockHeaderSize) {
      uint32_t stored = 0;
      if (UnreadEventsBlock(win.data() + (pos - base), end - pos, &stored)) {
        pos += kBlockHeaderSize + uint64_t{stored};
        scan.blocks++;
        scan.unread_blocks++;
        scan.end_offset = pos;
        continue;
      }
    }
    RangeCrc crcs(win);
    Frame f;
    std::string why;
    const FrameResult r = ParseFrame(win, pos - base, &crcs, &f, &why);
    if (r == FrameResult::kTruncated && base + win.size() < end && base != pos) {
      // The block goes on past the window: a window from its start, large enough for the
      // length its header gives (at most kMaxStoredBlockBytes). (A window that starts at the
      // block and still cuts it: the file shrank, or the header was cut; taken below.)
      uint64_t want = window;
      if (win.size() - (pos - base) >= kBlockHeaderSize) {
        const uint32_t stored = DecodeFixed32(win.data() + (pos - base) + 8);
        want = std::max<uint64_t>(want, kBlockHeaderSize + uint64_t{stored});
      }
      base = pos;
      TRACEDB_ASSIGN_OR_RETURN(win, read(pos, std::min(want, end - pos)));
      if (win.size() < std::min(want, end - pos)) end = pos + win.size();
      continue;
    }
    if (r != FrameResult::kOk && skip) {
      scan.skip_stopped = true;  // the caller scans again, checking every block
      break;
    }
    if (r != FrameResult::kOk) {
      // Not a whole, valid block: the rest as a scan of the whole file does it.
      TRACEDB_ASSIGN_OR_RETURN(std::string_view all, read(0, file_size));
      ScanOptions rest = o;
      rest.start_offset = pos;
      TRACEDB_ASSIGN_OR_RETURN(SegmentScan tail, ScanSegmentBytes(path, all, visitor, rest));
      tail.blocks += scan.blocks;
      tail.events += scan.events;
      tail.corrupt_blocks += scan.corrupt_blocks;
      tail.corrupt_bytes += scan.corrupt_bytes;
      tail.closed = tail.closed || scan.closed;
      if (tail.anchor_end == 0) tail.anchor_end = scan.anchor_end;
      tail.crc_work_bytes += scan.crc_work_bytes;
      std::vector<std::string> problems = std::move(scan.problems);
      for (std::string& p : tail.problems) {
        if (problems.size() < SegmentScan::kMaxProblems) problems.push_back(std::move(p));
      }
      tail.problems = std::move(problems);
      return tail;
    }
    const uint64_t next = pos + kBlockHeaderSize + f.stored;
    TRACEDB_RETURN_IF_ERROR(TakeFrame(path, f, pos, next, visitor, o, o.buffers, &scan));
    scan.crc_work_bytes += f.stored;
    pos = next;
    scan.end_offset = pos;
  }
  scan.file_size = end;
  return scan;
}

}  // namespace

StatusOr<SegmentScan> ScanSegment(const std::string& path, SegmentVisitor* visitor,
                                  const ScanOptions& options) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("cannot open segment " + path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno("cannot stat segment " + path, err);
  }
  // The file may still be growing: read what is there now. A scan that ends before the first
  // block (compaction's catalog pass when nothing was read before: resume offset 0) needs only
  // the file header, whose size field is 16 bits; reading the whole file for it was a third of
  // compaction's reads.
  const auto file_size = static_cast<uint64_t>(st.st_size);
  const bool header_only =
      options.end_offset <= kFileHeaderSize && options.start_offset <= kFileHeaderSize;
  const uint64_t want = header_only ? std::min<uint64_t>(file_size, 1u << 16) : file_size;
  // Not zero-filled: pread overwrites it, and the scan sees only the bytes read. The whole
  // file, or a window of it, in one buffer, the caller's when it passes one; the scan itself
  // (the blocks' buffers) is given the same.
  ScanBuffers own;
  ScanOptions o = options;
  if (o.buffers == nullptr) o.buffers = &own;
  StatusOr<SegmentScan> scan = Status::Ok();
  const bool skip = !o.events && o.skip_unread_events;
  if (!header_only && o.window_bytes != 0 && (want > o.window_bytes || skip)) {
    ReadBuffer* const buf = &o.buffers->file;
    scan = ScanWindows(
        path, file_size,
        [fd, &path, buf](uint64_t at, uint64_t n) { return ReadInto(fd, path, at, n, buf); },
        visitor, o);
  } else {
    StatusOr<std::string_view> bytes = ReadInto(fd, path, 0, want, &o.buffers->file);
    if (!bytes.ok()) {
      scan = bytes.status();
    } else {
      scan = ScanSegmentBytes(path, *bytes, visitor, o);
      if (scan.ok() && header_only && bytes->size() == want) scan->file_size = file_size;
    }
  }
  ::close(fd);
  return scan;
}

StatusOr<SegmentScan> ScanSegmentBytesInWindows(const std::string& name, std::string_view bytes,
                                                SegmentVisitor* visitor,
                                                const ScanOptions& options) {
  ScanBuffers own;
  ScanOptions o = options;
  if (o.buffers == nullptr) o.buffers = &own;
  if (o.window_bytes == 0 ||
      (bytes.size() <= o.window_bytes && (o.events || !o.skip_unread_events))) {
    return ScanSegmentBytes(name, bytes, visitor, o);
  }
  // Each window copied into the scan's buffer, as a read from a file is: under ASan, a decoder
  // that runs past its window is caught there.
  ReadBuffer* const buf = &o.buffers->file;
  return ScanWindows(
      name, bytes.size(),
      [bytes, buf](uint64_t at, uint64_t n) -> StatusOr<std::string_view> {
        const std::string_view part = bytes.substr(at, n);
        char* const to = buf->Reserve(part.size());
        if (to == nullptr) return Status::IOError("no memory for a segment window");
        std::memcpy(to, part.data(), part.size());
        return std::string_view(to, part.size());
      },
      visitor, o);
}

namespace {

class FirstMetaVisitor : public SegmentVisitor {
 public:
  void OnMeta(const SegmentMeta& m) override {
    if (!meta) meta = m;
  }
  std::optional<SegmentMeta> meta;
};

}  // namespace

StatusOr<SegmentMetaScan> ScanSegmentMeta(const std::string& path, ScanBuffers* buffers) {
  // The EVENTS blocks passed over unread; a file in which that meets a block not whole and
  // valid is scanned again, checked (its END block may lie past the damage).
  FirstMetaVisitor v;
  ScanOptions o;
  o.events = false;
  o.skip_unread_events = true;
  o.buffers = buffers;
  TRACEDB_ASSIGN_OR_RETURN(SegmentScan scan, ScanSegment(path, &v, o));
  if (scan.skip_stopped) {
    v = FirstMetaVisitor();
    o.skip_unread_events = false;
    TRACEDB_ASSIGN_OR_RETURN(scan, ScanSegment(path, &v, o));
  }
  return SegmentMetaScan{std::move(scan), std::move(v.meta)};
}

}  // namespace tracedb::engine
