// SegmentWriter implementation. See segment_writer.h; format in docs/segment-format.md.
#include "engine/segment_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "engine/coding.h"
#include "engine/crc32c.h"
#include "engine/lz4_codec.h"

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
  path_ = path;
  written_ = 0;
  pending_.clear();
  EncodeFileHeader(pid, seq, &pending_);
  return Status::Ok();
}

void SegmentWriter::AppendBlock(BlockType type, std::string_view raw, bool compress) {
  if (compress && raw.size() >= 64) {
    scratch_.clear();
    Lz4Compress(raw, &scratch_);
    if (scratch_.size() < raw.size()) {
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
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  pending_.clear();
}

Status SegmentWriter::Close() {
  if (fd_ < 0) return Status::Ok();
  Status s = Flush();
  if (::close(fd_) != 0 && s.ok()) s = Status::FromErrno("cannot close segment " + path_, errno);
  fd_ = -1;
  return s;
}

}  // namespace tracedb::engine
