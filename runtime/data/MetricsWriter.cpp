//===- MetricsWriter.cpp - Metrics as JSON lines --------------------------===//

#include "runtime/data/MetricsWriter.h"

#include "runtime/support/RegularFile.h"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>
#include <utility>

namespace mtc::rt {

Expected<MetricsWriter> MetricsWriter::open(const std::filesystem::path &path, bool truncate) {
  // Only a regular file: a FIFO would block the open or every write (RegularFile.h).
  int flags = O_WRONLY | O_CREAT | O_APPEND | (truncate ? O_TRUNC : 0);
  Expected<RegularFile> file = openRegularFile(path, flags);
  if (!file)
    return file.takeError().withContext("metrics file");
  return MetricsWriter(path, file->handle.release());
}

MetricsWriter::MetricsWriter(MetricsWriter &&other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

MetricsWriter &MetricsWriter::operator=(MetricsWriter &&other) noexcept {
  if (this != &other) {
    (void)close();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

MetricsWriter::~MetricsWriter() { (void)close(); }

Error MetricsWriter::write(const JsonObject &record) {
  if (fd_ < 0)
    return makeError("metrics file ", path_, ": write after close");
  std::string line = JsonValue(record).serialize();
  line.push_back('\n');
  const char *p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return makeError("metrics file ", path_, ": cannot write: ", errnoCode());
    p += n;
    left -= size_t(n);
  }
  return Error::success();
}

Error MetricsWriter::sync() {
  if (fd_ < 0)
    return makeError("metrics file ", path_, ": sync after close");
  if (::fsync(fd_) != 0)
    return makeError("metrics file ", path_, ": cannot sync: ", errnoCode());
  return Error::success();
}

Error MetricsWriter::close() {
  if (fd_ < 0)
    return Error::success();
  Error err;
  if (::fsync(fd_) != 0)
    err = makeError("metrics file ", path_, ": cannot sync: ", errnoCode());
  if (::close(fd_) != 0 && err.ok())
    err = makeError("metrics file ", path_, ": cannot close: ", errnoCode());
  fd_ = -1;
  return err;
}

} // namespace mtc::rt
