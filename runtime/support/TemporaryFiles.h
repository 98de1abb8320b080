//===- TemporaryFiles.h - Naming and reclaiming atomic writes' temporaries -*- C++ -*-===//
//
// A file written atomically (a checkpoint, an export) is first written whole to a temporary
// next to it, then renamed over it. A process killed in between leaves the temporary, as
// large as the file, and nothing else would remove it. The temporary's name says whose it is,
// `<file>.mtc-tmp.<host>.<pid>`, so the next write or read of the same file removes those of
// this host whose process is gone (kill(pid, 0) fails with ESRCH). Temporaries of other
// hosts are left alone: on a shared file system their writer may still be running, and no
// process here can tell. Only this naming pattern is ever removed.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_SUPPORT_TEMPORARYFILES_H
#define MTC_RUNTIME_SUPPORT_TEMPORARYFILES_H

#include "runtime/support/Error.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace mtc::rt {

/// The temporary that this process writes `path` through: `<path>.mtc-tmp.<host>.<pid>`.
std::filesystem::path temporaryPathFor(const std::filesystem::path &path);

/// Removes the temporaries of `path` (temporaryPathFor's pattern) left by processes of this
/// host that no longer run; returns the paths removed. Errors are ignored: a temporary that
/// cannot be removed is not worth failing a save or a load for.
std::vector<std::filesystem::path> removeStaleTemporaries(const std::filesystem::path &path);

/// Writes `path` atomically through `writer(fd, temporary)`, which writes the contents to the
/// open descriptor `fd` of `temporary` (temporaryPathFor(path)): then fsync, rename over
/// `path`, fsync of the directory. Removes the stale temporaries of `path` first. On failure
/// `path` is untouched and the temporary removed; errors name the temporary or `path`.
Error writeAtomically(
    const std::filesystem::path &path,
    const std::function<Error(int fd, const std::filesystem::path &temporary)> &writer);

/// This host's name (gethostname), or "localhost" when it has none.
std::string hostName();

} // namespace mtc::rt

#endif // MTC_RUNTIME_SUPPORT_TEMPORARYFILES_H
