//===- TemporaryFiles.cpp - Naming and reclaiming atomic writes' temporaries ===//

#include "runtime/support/TemporaryFiles.h"

#include "runtime/support/Error.h"

#include <cerrno>
#include <charconv>
#include <csignal>
#include <fcntl.h>
#include <limits.h>
#include <optional>
#include <unistd.h>

namespace mtc::rt {
namespace {

constexpr std::string_view kTemporaryMarker = ".mtc-tmp.";

/// The process id of a temporary of `file` named `name` written on this host, if it is one.
std::optional<pid_t> temporaryOwner(std::string_view name, std::string_view file,
                                    std::string_view host) {
  std::string prefix = concat(file, kTemporaryMarker, host, '.');
  if (!name.starts_with(prefix))
    return std::nullopt;
  std::string_view digits = name.substr(prefix.size());
  pid_t pid = 0;
  auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (digits.empty() || err != std::errc() || end != digits.data() + digits.size() || pid <= 0)
    return std::nullopt;
  return pid;
}

} // namespace

Error writeAtomically(
    const std::filesystem::path &path,
    const std::function<Error(int fd, const std::filesystem::path &temporary)> &writer) {
  (void)removeStaleTemporaries(path);
  std::filesystem::path tmp = temporaryPathFor(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return makeError("cannot create ", tmp, ": ", errnoCode());
  Error err = writer(fd, tmp);
  if (err.ok() && ::fsync(fd) != 0)
    err = makeError("cannot sync ", tmp, ": ", errnoCode());
  if (::close(fd) != 0 && err.ok())
    err = makeError("cannot close ", tmp, ": ", errnoCode());
  if (err.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    err = makeError("cannot rename ", tmp, " to ", path, ": ", errnoCode());
  if (!err.ok()) {
    ::unlink(tmp.c_str());
    return err;
  }
  // Make the rename durable. Failure here does not undo the write, so it is not reported.
  std::filesystem::path dir = path.parent_path();
  if (dir.empty())
    dir = ".";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return Error::success();
}

std::string hostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0')
    return "localhost";
  return name;
}

std::filesystem::path temporaryPathFor(const std::filesystem::path &path) {
  std::filesystem::path tmp = path;
  tmp += concat(kTemporaryMarker, hostName(), '.', static_cast<long>(::getpid()));
  return tmp;
}

std::vector<std::filesystem::path> removeStaleTemporaries(const std::filesystem::path &path) {
  std::vector<std::filesystem::path> removed;
  std::filesystem::path dir = path.parent_path();
  if (dir.empty())
    dir = ".";
  std::string file = path.filename().string();
  std::string host = hostName();
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    std::optional<pid_t> owner = temporaryOwner(name, file, host);
    if (!owner || *owner == ::getpid())
      continue;
    if (::kill(*owner, 0) == 0 || errno != ESRCH)
      continue; // alive, or not ours to signal (EPERM): perhaps still writing
    std::error_code removeError;
    if (std::filesystem::remove(it->path(), removeError))
      removed.push_back(it->path());
  }
  return removed;
}

} // namespace mtc::rt
