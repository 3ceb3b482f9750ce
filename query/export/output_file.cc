// Buffered plain or gzip output file. See output_file.h.
// Thread safety: one thread at a time.
#include "query/export/output_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tracedb::query {
namespace {

constexpr size_t kBufferBytes = 4u << 20;  // written out in 4 MiB writes
constexpr size_t kZOutBytes = 1u << 20;

}  // namespace

struct OutputFile::Deflater {
  z_stream z{};
  std::unique_ptr<unsigned char[]> out{new unsigned char[kZOutBytes]};
  bool ready = false;
  ~Deflater() {
    if (ready) deflateEnd(&z);
  }
};

StatusOr<std::unique_ptr<OutputFile>> OutputFile::Create(const std::string& path, int gzip_level) {
  if (gzip_level < 0 || gzip_level > 9) {
    return Status::InvalidArgument("gzip level " + std::to_string(gzip_level) + " not in 0..9");
  }
  std::unique_ptr<Deflater> z;
  if (gzip_level > 0) {
    z = std::make_unique<Deflater>();
    // windowBits 15 + 16: a gzip header and trailer around the deflate stream.
    if (deflateInit2(&z->z, gzip_level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      return Status::Internal(path + ": cannot start zlib");
    }
    z->ready = true;
  }
  const std::string partial = path + ".partial";
  const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno("cannot create " + path, errno);
  return std::unique_ptr<OutputFile>(new OutputFile(path, fd, std::move(z)));
}

OutputFile::OutputFile(std::string path, int fd, std::unique_ptr<Deflater> z)
    : path_(std::move(path)), partial_(path_ + ".partial"), fd_(fd), z_(std::move(z)) {
  size_ = kBufferBytes;
  buf_.reset(new char[size_]);
  cur_ = buf_.get();
  cap_ = buf_.get() + size_;
}

OutputFile::~OutputFile() {
  if (!closed_) Abandon();
}

void OutputFile::Fail(Status s) {
  if (status_.ok()) status_ = std::move(s);
}

void OutputFile::WriteAll(const char* data, size_t n) {
  while (n > 0 && status_.ok()) {
    const ssize_t w = ::write(fd_, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      Fail(Status::FromErrno("cannot write " + path_, errno));
      return;
    }
    data += w;
    n -= static_cast<size_t>(w);
    disk_bytes_ += static_cast<uint64_t>(w);
  }
}

void OutputFile::Flush() {
  const size_t n = static_cast<size_t>(cur_ - buf_.get());
  if (n == 0) return;
  flushed_ += n;
  cur_ = buf_.get();
  if (!status_.ok()) return;
  if (!z_) {
    WriteAll(buf_.get(), n);
    return;
  }
  z_->z.next_in = reinterpret_cast<unsigned char*>(buf_.get());
  z_->z.avail_in = static_cast<uInt>(n);
  while (z_->z.avail_in > 0 && status_.ok()) {
    z_->z.next_out = z_->out.get();
    z_->z.avail_out = kZOutBytes;
    if (deflate(&z_->z, Z_NO_FLUSH) == Z_STREAM_ERROR) {
      Fail(Status::Internal(path_ + ": zlib stream error"));
      return;
    }
    WriteAll(reinterpret_cast<const char*>(z_->out.get()), kZOutBytes - z_->z.avail_out);
  }
}

char* OutputFile::ReserveSlow(size_t n) {
  Flush();
  if (size_ < n) {
    // One piece larger than the buffer (a huge argument object): grow to hold it.
    size_ = n;
    buf_.reset(new char[size_]);
    cur_ = buf_.get();
    cap_ = buf_.get() + size_;
  }
  return cur_;
}

void OutputFile::Append(const char* data, size_t n) {
  char* p = Reserve(n);
  std::memcpy(p, data, n);
  Commit(p + n);
}

void OutputFile::Rewind(uint64_t bytes_before) {
  const uint64_t now = bytes();
  if (bytes_before >= flushed_ && bytes_before <= now) {
    cur_ = buf_.get() + (bytes_before - flushed_);
  }
}

Status OutputFile::Close() {
  if (closed_) return status_;
  Flush();
  if (z_ && status_.ok()) {
    z_->z.next_in = nullptr;
    z_->z.avail_in = 0;
    int rc;
    do {
      z_->z.next_out = z_->out.get();
      z_->z.avail_out = kZOutBytes;
      rc = deflate(&z_->z, Z_FINISH);
      if (rc == Z_STREAM_ERROR) {
        Fail(Status::Internal(path_ + ": zlib stream error"));
        break;
      }
      WriteAll(reinterpret_cast<const char*>(z_->out.get()), kZOutBytes - z_->z.avail_out);
    } while (rc != Z_STREAM_END && status_.ok());
  }
  if (::close(fd_) != 0 && status_.ok()) Fail(Status::FromErrno("cannot write " + path_, errno));
  fd_ = -1;
  closed_ = true;
  if (status_.ok() && std::rename(partial_.c_str(), path_.c_str()) != 0) {
    Fail(Status::FromErrno("cannot rename " + partial_ + " to " + path_, errno));
  }
  if (!status_.ok()) ::unlink(partial_.c_str());
  return status_;
}

void OutputFile::Abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  closed_ = true;
  ::unlink(partial_.c_str());
}

}  // namespace tracedb::query
