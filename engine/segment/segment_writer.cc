// SegmentWriter implementation. See segment_writer.h; format in docs/segment-format.md.
#include "engine/segment/segment_writer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "engine/util/coding.h"
#include "engine/util/crc32c.h"
#include "engine/util/lz4_codec.h"

namespace tracedb::engine {

std::string RankDirName(int32_t rank) { return "rank-" + std::to_string(rank); }

std::string SegmentFileName(uint32_t pid, uint32_t seq) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "seg-%u-%06u%s", pid, seq, kSegmentSuffix);
  return buf;
}

void EncodeFileHeader(uint32_t pid, uint32_t seq, std::string* dst) {
  const size_t start = dst->size();
  dst->append(kSegmentMagic, 8);
  PutFixed16(dst, kSegmentVersion);
  PutFixed16(dst, static_cast<uint16_t>(kFileHeaderSize));
  PutFixed32(dst, 0);  // flags
  PutFixed32(dst, pid);
  PutFixed32(dst, seq);
  PutFixed32(dst, 0);  // reserved
  PutFixed32(dst, Crc32c(dst->data() + start, 28));
}

void FrameBlock(BlockType type, Codec codec, std::string_view stored, uint32_t raw_size,
                std::string* dst) {
  const size_t start = dst->size();
  PutFixed32(dst, kBlockMagic);
  dst->push_back(static_cast<char>(type));
  dst->push_back(static_cast<char>(codec));
  PutFixed16(dst, 0);
  PutFixed32(dst, static_cast<uint32_t>(stored.size()));
  PutFixed32(dst, raw_size);
  uint32_t crc = Crc32c(dst->data() + start + 4, 12);
  crc = Crc32c(stored.data(), stored.size(), crc);
  PutFixed32(dst, crc);
  dst->append(stored.data(), stored.size());
}

SegmentWriter::~SegmentWriter() { (void)Close(); }

Status SegmentWriter::Open(const std::string& path, uint32_t pid, uint32_t seq) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) return Status::FromErrno("cannot create segment " + path, errno);
  // The lock is taken before the first byte is written, so a reader that finds bytes in an
  // unfinished file and can lock it knows the writer is gone ("Writer lock"). The file is new,
  // so nobody else can hold it: a failure means the filesystem has no flock.
  int r;
  do {
    r = ::flock(fd_, LOCK_EX | LOCK_NB);
  } while (r != 0 && errno == EINTR);
  locked_ = r == 0;
  path_ = path;
  written_ = 0;
  pending_.clear();
  append_error_ = Status::Ok();
  EncodeFileHeader(pid, seq, &pending_);
  return Status::Ok();
}

void SegmentWriter::Swap(SegmentWriter& other) noexcept {
  std::swap(fd_, other.fd_);
  std::swap(locked_, other.locked_);
  path_.swap(other.path_);
  std::swap(written_, other.written_);
  pending_.swap(other.pending_);
  scratch_.swap(other.scratch_);
  std::swap(append_error_, other.append_error_);
}

void SegmentWriter::AppendBlock(BlockType type, std::string_view raw, bool compress) {
  if (raw.size() > kMaxRawBlockBytes) {
    if (append_error_.ok()) {
      append_error_ = Status::InvalidArgument(
          "segment " + path_ + ": block of " + std::to_string(raw.size()) +
          " bytes exceeds the format's limit of " + std::to_string(kMaxRawBlockBytes));
    }
    return;
  }
  if (compress && raw.size() >= 64) {
    scratch_.clear();
    // A failed compression (not expected below the size limit) keeps the block raw.
    if (Lz4Compress(raw, &scratch_).ok() && scratch_.size() < raw.size()) {
      FrameBlock(type, Codec::kLz4, scratch_, static_cast<uint32_t>(raw.size()), &pending_);
      return;
    }
  }
  FrameBlock(type, Codec::kRaw, raw, static_cast<uint32_t>(raw.size()), &pending_);
}

Status SegmentWriter::Flush() {
  if (fd_ < 0) {
    pending_.clear();
    return Status::IOError("segment not open");
  }
  if (!append_error_.ok()) {
    // Write the blocks that were accepted; report the refused one.
    Status refused = append_error_;
    append_error_ = Status::Ok();
    Status w = Flush();
    return w.ok() ? refused : w;
  }
  const char* p = pending_.data();
  size_t left = pending_.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      pending_.clear();
      return Status::FromErrno("cannot write segment " + path_, err);
    }
    p += n;
    left -= static_cast<size_t>(n);
    written_ += static_cast<uint64_t>(n);
  }
  pending_.clear();
  return Status::Ok();
}

void SegmentWriter::Abandon() {
  // close(2) without LOCK_UN: the parent's descriptor keeps the lock.
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  locked_ = false;
  pending_.clear();
}

Status SegmentWriter::Close() {
  if (fd_ < 0) return Status::Ok();
  Status s = Flush();
  // Closing the last descriptor of the file releases the writer lock.
  if (::close(fd_) != 0 && s.ok()) s = Status::FromErrno("cannot close segment " + path_, errno);
  fd_ = -1;
  locked_ = false;
  return s;
}

WriterState ProbeSegmentWriter(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return WriterState::kUnknown;
  int r;
  do {
    r = ::flock(fd, LOCK_SH | LOCK_NB);
  } while (r != 0 && errno == EINTR);
  const int err = errno;
  // Closing drops our shared lock at once; the answer stays true for a dead writer (nobody
  // takes the lock of an existing file again) and is re-asked on every pass for a live one.
  ::close(fd);
  if (r == 0) return WriterState::kGone;
  return err == EWOULDBLOCK ? WriterState::kAlive : WriterState::kUnknown;
}

}  // namespace tracedb::engine
