//===- RegularFile.cpp - Opening the runtime's files safely ---------------===//

#include "runtime/support/RegularFile.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace mtc::rt {

FileHandle::FileHandle(FileHandle &&other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

FileHandle &FileHandle::operator=(FileHandle &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

FileHandle::~FileHandle() {
  if (fd_ >= 0)
    ::close(fd_);
}

Error FileHandle::close(std::string_view name) {
  if (fd_ < 0)
    return Error::success();
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0)
    return makeError("cannot close ", name, ": ", errnoCode());
  return Error::success();
}

std::string_view describeFileType(unsigned mode) {
  switch (mode & S_IFMT) {
  case S_IFREG:
    return "a regular file";
  case S_IFDIR:
    return "a directory";
  case S_IFIFO:
    return "a FIFO (named pipe)";
  case S_IFSOCK:
    return "a socket";
  case S_IFCHR:
    return "a character device";
  case S_IFBLK:
    return "a block device";
  case S_IFLNK:
    return "a symbolic link";
  default:
    return "not a file";
  }
}

Expected<RegularFile> openRegularFile(const std::filesystem::path &path, int flags,
                                      std::string_view name, int *openErrno, unsigned mode) {
  std::string quoted = name.empty() ? concat(path) : std::string(name);
  if (openErrno)
    *openErrno = 0;
  // O_NONBLOCK: opening a FIFO without a peer returns at once (reading) or fails with ENXIO
  // (writing) instead of waiting for one.
  FileHandle fd(::open(path.c_str(), flags | O_NONBLOCK | O_CLOEXEC, mode));
  if (!fd) {
    int err = errno;
    if (openErrno)
      *openErrno = err;
    struct stat st;
    if (err == ENXIO && ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      return makeError(quoted, " is ", describeFileType(st.st_mode), ", not a regular file");
    return makeError("cannot open ", quoted, ": ", errnoCode(err));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    return makeError("cannot stat ", quoted, ": ", errnoCode());
  if (!S_ISREG(st.st_mode))
    return makeError(quoted, " is ", describeFileType(st.st_mode), ", not a regular file");
  int status = ::fcntl(fd.get(), F_GETFL);
  if (status < 0 || ::fcntl(fd.get(), F_SETFL, status & ~O_NONBLOCK) != 0)
    return makeError("cannot open ", quoted, ": ", errnoCode());
  return RegularFile{std::move(fd), static_cast<uint64_t>(st.st_size)};
}

Expected<RegularFile> openInputFile(const std::filesystem::path &path, std::string_view name,
                                    int *openErrno) {
  return openRegularFile(path, O_RDONLY, name, openErrno);
}

Error readExactlyAt(int fd, uint64_t offset, void *buffer, size_t size, std::string_view name) {
  auto *out = static_cast<char *>(buffer);
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::pread(fd, out + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return makeError("cannot read ", name, ": ", errnoCode());
    if (n == 0) {
      struct stat st;
      uint64_t now = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : offset + got;
      return makeError(name, " ended at byte ", now, " while ", offset + size,
                       " were needed: it was truncated while in use");
    }
    got += static_cast<size_t>(n);
  }
  return Error::success();
}

Error writeAll(int fd, const void *data, size_t size, const std::filesystem::path &path) {
  const char *p = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, std::min<size_t>(size, size_t(1) << 30));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return makeError("cannot write ", path, ": ", errnoCode());
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Error::success();
}

Expected<std::string> readInputFile(const std::filesystem::path &path, std::string_view name) {
  Expected<RegularFile> file = openInputFile(path, name);
  if (!file)
    return file.takeError();
  std::string text(file->size, '\0');
  if (Error err = readExactlyAt(file->handle.get(), 0, text.data(), text.size(),
                                name.empty() ? concat(path) : std::string(name));
      !err.ok())
    return err;
  return text;
}

} // namespace mtc::rt
