//===- OutputPaths.cpp - Checking where outputs will go, before the work ---===//

#include "runtime/support/OutputPaths.h"

#include "runtime/support/RegularFile.h"

#include <cerrno>
#include <sys/stat.h>
#include <unistd.h>

namespace mtc::rt {
namespace {

/// `dir` (which exists) must be a directory this process can create files in.
Error checkWritableDirectory(const std::filesystem::path &dir, const struct stat &st,
                             std::string_view what) {
  if (!S_ISDIR(st.st_mode))
    return makeError(what, ": ", dir, " is ", describeFileType(st.st_mode), ", not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return makeError(what, ": cannot write in ", dir, ": ", errnoCode());
  return Error::success();
}

std::filesystem::path parentOf(const std::filesystem::path &path) {
  std::filesystem::path parent = path.parent_path();
  return parent.empty() ? std::filesystem::path(".") : parent;
}

} // namespace

Error checkOutputDirectory(const std::filesystem::path &dir, std::string_view what) {
  // "d/" names d (whose parent_path would be "d").
  std::filesystem::path path = dir.lexically_normal();
  if (!path.has_filename() && path.has_relative_path())
    path = path.parent_path();
  // Up to the nearest existing ancestor: create_directories makes the rest.
  for (;;) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0)
      return checkWritableDirectory(path, st, what);
    if (errno != ENOENT && errno != ENOTDIR)
      return makeError(what, ": cannot access ", path, ": ", errnoCode());
    std::filesystem::path parent = parentOf(path);
    if (parent == path)
      return makeError(what, ": cannot access ", path, ": ", errnoCode(ENOENT));
    path = parent;
  }
}

Error checkOutputFile(const std::filesystem::path &file, std::string_view what) {
  struct stat st;
  if (::stat(file.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      return makeError(what, ": ", file, " is ", describeFileType(st.st_mode),
                       ", not a regular file");
  } else if (errno != ENOENT && errno != ENOTDIR) {
    return makeError(what, ": cannot access ", file, ": ", errnoCode());
  }
  std::filesystem::path parent = parentOf(file);
  if (::stat(parent.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return makeError(what, ": the directory ", parent, " does not exist");
    return makeError(what, ": cannot access ", parent, ": ", errnoCode());
  }
  return checkWritableDirectory(parent, st, what);
}

} // namespace mtc::rt
