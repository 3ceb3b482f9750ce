// ByteSource implementation: read(2) on a file descriptor, or bytes in memory, with zlib's
// inflate in front when the data starts with the gzip magic. See byte_source.h.
#include "query/import/json/byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tracedb::query::json {
namespace {

constexpr size_t kRawChunk = 256 << 10;

class Source : public ByteSource {
 public:
  Source(int fd, std::string data, std::string name) : fd_(fd), mem_(std::move(data)) {
    name_ = std::move(name);
  }
  ~Source() override {
    if (fd_ >= 0) ::close(fd_);
    if (z_open_) inflateEnd(&z_);
  }

  // Looks at the first bytes: gzip or plain. Called once, before any Read().
  Status Start() {
    if (fd_ < 0) {
      file_size_ = mem_.size();
      size_known_ = true;
    }
    // Sized to a small file (and a byte, for the read that finds its end). Not zeroed: only
    // [raw_pos_, raw_end_) is read.
    raw_size_ = size_known_
                    ? static_cast<size_t>(std::clamp<uint64_t>(file_size_ + 1, 4096, kRawChunk))
                    : kRawChunk;
    raw_ = std::make_unique_for_overwrite<char[]>(raw_size_);
    TRACEDB_RETURN_IF_ERROR(FillRaw());
    compressed_ = raw_end_ - raw_pos_ >= 2 && static_cast<unsigned char>(raw_[raw_pos_]) == 0x1f &&
                  static_cast<unsigned char>(raw_[raw_pos_ + 1]) == 0x8b;
    if (compressed_) {
      std::memset(&z_, 0, sizeof(z_));
      if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) {
        return Status::Internal(name_ + ": cannot initialise zlib");
      }
      z_open_ = true;
    }
    return Status::Ok();
  }

  StatusOr<size_t> Read(char* dst, size_t n) override {
    if (n == 0) return size_t{0};
    if (!compressed_) {
      if (raw_pos_ == raw_end_) {
        // Large reads go straight to the caller's buffer.
        if (fd_ >= 0 && n >= kRawChunk) return ReadFd(dst, n);
        TRACEDB_RETURN_IF_ERROR(FillRaw());
        if (raw_pos_ == raw_end_) return size_t{0};
      }
      const size_t k = std::min(n, raw_end_ - raw_pos_);
      std::memcpy(dst, raw_.get() + raw_pos_, k);
      raw_pos_ += k;
      return k;
    }
    return Inflate(dst, n);
  }

 private:
  StatusOr<size_t> ReadFd(char* dst, size_t n) {
    for (;;) {
      const ssize_t r = ::read(fd_, dst, n);
      if (r < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno(name_ + ": read at byte offset " + std::to_string(raw_read_),
                                 errno);
      }
      raw_read_ += static_cast<uint64_t>(r);
      return static_cast<size_t>(r);
    }
  }

  Status FillRaw() {
    raw_pos_ = raw_end_ = 0;
    if (fd_ < 0) {
      const size_t k = std::min(raw_size_, mem_.size() - mem_pos_);
      std::memcpy(raw_.get(), mem_.data() + mem_pos_, k);
      mem_pos_ += k;
      raw_read_ += k;
      raw_end_ = k;
      return Status::Ok();
    }
    TRACEDB_ASSIGN_OR_RETURN(size_t k, ReadFd(raw_.get(), raw_size_));
    raw_end_ = k;
    return Status::Ok();
  }

  // Compressed offset of the next unconsumed input byte.
  uint64_t InputOffset() const { return raw_read_ - (raw_end_ - raw_pos_); }

  StatusOr<size_t> Inflate(char* dst, size_t n) {
    if (z_done_) return size_t{0};
    z_.next_out = reinterpret_cast<Bytef*>(dst);
    z_.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    while (z_.avail_out > 0) {
      if (raw_pos_ == raw_end_) {
        TRACEDB_RETURN_IF_ERROR(FillRaw());
        if (raw_pos_ == raw_end_) {
          // The compressed data ends before the gzip trailer: a cut file.
          if (!member_start_) {
            warning_ = "gzip stream ends early at compressed byte offset " +
                       std::to_string(raw_read_) + " (the file is truncated)";
          }
          z_done_ = true;
          break;
        }
      }
      if (member_start_) {
        // A further gzip member must start with the magic; anything else is trailing junk.
        if (static_cast<unsigned char>(raw_[raw_pos_]) != 0x1f) {
          if (!AllZero()) {
            warning_ = "ignored bytes after the gzip data at compressed byte offset " +
                       std::to_string(InputOffset());
          }
          z_done_ = true;
          break;
        }
        member_start_ = false;
      }
      z_.next_in = reinterpret_cast<Bytef*>(raw_.get() + raw_pos_);
      z_.avail_in = static_cast<uInt>(raw_end_ - raw_pos_);
      const int rc = inflate(&z_, Z_NO_FLUSH);
      raw_pos_ = raw_end_ - z_.avail_in;
      if (rc == Z_STREAM_END) {
        // Concatenated members (gzip allows them): go on with the next one, if any.
        if (inflateReset(&z_) != Z_OK) return Status::Internal(name_ + ": zlib reset failed");
        member_start_ = true;
        continue;
      }
      if (rc == Z_BUF_ERROR && z_.avail_in == 0) continue;  // needs more input
      if (rc != Z_OK) {
        return Status::Corruption(name_ + ": gzip data damaged at compressed byte offset " +
                                  std::to_string(InputOffset()) + ": " +
                                  (z_.msg ? z_.msg : "error " + std::to_string(rc)));
      }
    }
    return static_cast<size_t>(z_.next_out - reinterpret_cast<Bytef*>(dst));
  }

  // True when the rest of the raw input is zero padding (as tape/block tools leave).
  bool AllZero() {
    for (size_t i = raw_pos_; i < raw_end_; ++i) {
      if (raw_[i] != 0) return false;
    }
    return true;
  }

  int fd_;
  std::string mem_;
  size_t mem_pos_ = 0;
  std::unique_ptr<char[]> raw_;
  size_t raw_size_ = 0;
  size_t raw_pos_ = 0;
  size_t raw_end_ = 0;
  z_stream z_;
  bool z_open_ = false;
  bool z_done_ = false;
  bool member_start_ = false;
};

}  // namespace

StatusOr<std::unique_ptr<ByteSource>> ByteSource::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno(path, err);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + ": is a directory");
  }
  auto src = std::make_unique<Source>(fd, std::string(), path);
  src->file_size_ = static_cast<uint64_t>(st.st_size);
  src->size_known_ = S_ISREG(st.st_mode);
  TRACEDB_RETURN_IF_ERROR(src->Start());
  return std::unique_ptr<ByteSource>(std::move(src));
}

std::unique_ptr<ByteSource> ByteSource::FromString(std::string data, std::string name) {
  auto src = std::make_unique<Source>(-1, std::move(data), std::move(name));
  // Memory reads and zlib initialisation cannot fail short of memory exhaustion.
  (void)src->Start();
  return src;
}

StatusOr<std::string> ReadHead(const std::string& path, size_t max_bytes) {
  TRACEDB_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> src, ByteSource::Open(path));
  std::string head(max_bytes, '\0');
  size_t got = 0;
  while (got < max_bytes) {
    TRACEDB_ASSIGN_OR_RETURN(size_t k, src->Read(head.data() + got, max_bytes - got));
    if (k == 0) break;
    got += k;
  }
  head.resize(got);
  return head;
}

}  // namespace tracedb::query::json
