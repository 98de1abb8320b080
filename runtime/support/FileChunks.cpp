//===- FileChunks.cpp - streaming a file through a callback ---------------===//

#include "runtime/support/FileChunks.h"

#include "runtime/support/RegularFile.h"

#include <array>
#include <cerrno>
#include <unistd.h>

using namespace mtc::rt;

Error mtc::rt::readFileChunks(const std::filesystem::path &path,
                              const std::function<Error(const char *, size_t)> &consume) {
  Expected<RegularFile> file = openInputFile(path);
  if (!file)
    return file.takeError();
  std::array<char, 1 << 16> buf;
  for (;;) {
    ssize_t n = ::read(file->handle.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return makeError("cannot read ", path, ": ", errnoCode());
    if (n == 0)
      break;
    if (Error err = consume(buf.data(), static_cast<size_t>(n)); !err.ok())
      return err;
  }
  return Error::success();
}
