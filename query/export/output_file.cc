// Buffered plain or gzip output file with a background writer thread. See output_file.h.
// Thread safety: as stated there; the hand-over of a buffer (pending_) is under mu_.
#include "query/export/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "engine/util/atomic_file.h"

namespace tracedb::query {
namespace {

constexpr size_t kBufferBytes = 4u << 20;  // handed over and written 4 MiB at a time
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
  // An output that exists and is not a regular file (/dev/null, /dev/stdout, a FIFO) is written
  // in place: renaming a temporary file over it would replace the device itself (as root,
  // `-o /dev/null` once turned /dev/null into a regular file for the whole machine).
  struct stat target;
  if (::stat(path.c_str(), &target) == 0 && !S_ISREG(target.st_mode)) {
    if (S_ISDIR(target.st_mode)) return Status::InvalidArgument(path + " is a directory");
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno("cannot open " + path, errno);
    return std::unique_ptr<OutputFile>(new OutputFile(path, std::string(), fd, std::move(z)));
  }
  // A name of our own next to the output (same filesystem, so the rename is atomic): two
  // exports to one path never share a temporary file.
  std::string partial;
  int fd = -1;
  TRACEDB_RETURN_IF_ERROR(engine::CreateTemporaryBeside(path, &partial, &fd));
  return std::unique_ptr<OutputFile>(new OutputFile(path, std::move(partial), fd, std::move(z)));
}

OutputFile::OutputFile(std::string path, std::string partial, int fd, std::unique_ptr<Deflater> z)
    : path_(std::move(path)),
      partial_(std::move(partial)),
      fd_(fd),
      z_(std::move(z)),
      on_interrupt_(partial_, "tracedb export") {
  for (Buffer& b : bufs_) {
    b.size = kBufferBytes;
    b.data.reset(new char[b.size]);
  }
  fill_ = &bufs_[0];
  cur_ = fill_->data.get();
  cap_ = cur_ + fill_->size;
  writer_ = std::thread([this] { WriterLoop(); });
}

OutputFile::~OutputFile() {
  if (!closed_) Abandon();
}

void OutputFile::Fail(Status s) {
  if (writer_status_.ok()) writer_status_ = std::move(s);
}

void OutputFile::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return pending_ != nullptr || stop_; });
    if (pending_ == nullptr) return;  // stopped with nothing left
    const char* data = pending_;
    const size_t n = pending_n_;
    const bool failed = !writer_status_.ok();
    lock.unlock();
    if (!failed) Write(data, n);
    lock.lock();
    pending_ = nullptr;
    cv_.notify_all();
  }
}

void OutputFile::WriteAll(const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd_, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      std::lock_guard<std::mutex> lock(mu_);
      Fail(Status::FromErrno("cannot write " + path_, err));
      return;
    }
    data += w;
    n -= static_cast<size_t>(w);
    disk_bytes_ += static_cast<uint64_t>(w);
  }
}

void OutputFile::Write(const char* data, size_t n) {
  if (!z_) {
    WriteAll(data, n);
    return;
  }
  z_->z.next_in = reinterpret_cast<unsigned char*>(const_cast<char*>(data));
  z_->z.avail_in = static_cast<uInt>(n);
  while (z_->z.avail_in > 0) {
    z_->z.next_out = z_->out.get();
    z_->z.avail_out = kZOutBytes;
    if (deflate(&z_->z, Z_NO_FLUSH) == Z_STREAM_ERROR) {
      std::lock_guard<std::mutex> lock(mu_);
      Fail(Status::Internal(path_ + ": zlib stream error"));
      return;
    }
    WriteAll(reinterpret_cast<const char*>(z_->out.get()), kZOutBytes - z_->z.avail_out);
  }
}

void OutputFile::WaitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return pending_ == nullptr; });
  if (status_.ok() && !writer_status_.ok()) status_ = writer_status_;
}

void OutputFile::HandOver() {
  const size_t n = static_cast<size_t>(cur_ - fill_->data.get());
  WaitIdle();  // the other buffer is free again
  if (n > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = fill_->data.get();
    pending_n_ = n;
    cv_.notify_all();
  }
  flushed_ += n;
  if (n > 0) fill_ = fill_ == &bufs_[0] ? &bufs_[1] : &bufs_[0];
  cur_ = fill_->data.get();
  cap_ = cur_ + fill_->size;
}

char* OutputFile::ReserveSlow(size_t n) {
  HandOver();
  if (fill_->size < n) {
    // One piece larger than a buffer (a huge argument object): grow this buffer to hold it.
    fill_->size = n;
    fill_->data.reset(new char[n]);
    cur_ = fill_->data.get();
    cap_ = cur_ + n;
  }
  return cur_;
}

void OutputFile::Append(const char* data, size_t n) {
  char* p = Reserve(n);
  std::memcpy(p, data, n);
  Commit(p + n);
}

void OutputFile::Rewind(uint64_t bytes_before) {
  if (bytes_before >= flushed_ && bytes_before <= bytes()) {
    cur_ = fill_->data.get() + (bytes_before - flushed_);
  }
}

Status OutputFile::Close() {
  if (closed_) return status_;
  HandOver();
  WaitIdle();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  writer_.join();
  // The writer thread is gone: what follows runs on this thread alone.
  if (z_ && writer_status_.ok()) {
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
    } while (rc != Z_STREAM_END && writer_status_.ok());
  }
  const bool in_place = partial_.empty();  // a device or FIFO: no temporary file, no rename
  // On disk before it takes the final name, so that a crash never leaves PATH short.
  if (!in_place && writer_status_.ok() && ::fsync(fd_) != 0) {
    Fail(Status::FromErrno("cannot sync " + partial_, errno));
  }
  if (::close(fd_) != 0) Fail(Status::FromErrno("cannot write " + path_, errno));
  fd_ = -1;
  closed_ = true;
  if (!in_place && writer_status_.ok()) {
    Status renamed = engine::RenameDurably(partial_, path_);  // and the directory synced
    if (!renamed.ok()) Fail(std::move(renamed));
  }
  if (status_.ok()) status_ = writer_status_;
  if (!status_.ok() && !in_place) ::unlink(partial_.c_str());
  on_interrupt_.Release();  // renamed into place, or removed
  return status_;
}

void OutputFile::Abandon() {
  if (writer_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    writer_.join();  // after finishing a buffer already handed over
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  closed_ = true;
  if (!partial_.empty()) ::unlink(partial_.c_str());
  on_interrupt_.Release();
}

}  // namespace tracedb::query
