//===- FileChunks.cpp - streaming a file through a callback ---------------===//

#include "runtime/support/FileChunks.h"

#include <array>
#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

using namespace mtc::rt;

Error mtc::rt::readFileChunks(const std::filesystem::path &path,
                              const std::function<void(const char *, size_t)> &consume) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return makeError("cannot open ", path, ": ", errnoCode());
  std::array<char, 1 << 16> buf;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return makeError("cannot read ", path, ": ", errnoCode(err));
    }
    if (n == 0)
      break;
    consume(buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return Error::success();
}
