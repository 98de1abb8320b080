//===- OutputPaths.h - Checking where outputs will go, before the work -*- C++ -*-===//
//
// A run writes its checkpoint and its exported parameters at the end; a path that cannot be
// written would only be found then, and the run lost. These checks run before the first
// step: they fail on what is certain to fail (a missing or non-directory parent, a directory
// where a file goes, no write permission, a read-only file system) and name the path. They
// do not reserve anything: the disk can still fill up, and the writers still report that.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_SUPPORT_OUTPUTPATHS_H
#define MTC_RUNTIME_SUPPORT_OUTPUTPATHS_H

#include "runtime/support/Error.h"

#include <filesystem>
#include <string_view>

namespace mtc::rt {

/// Whether `dir` can be a directory written into: it is one and is writable, or it does not
/// exist and its nearest existing ancestor is a writable directory (it will be created).
/// `what` names the output in messages ("--save").
Error checkOutputDirectory(const std::filesystem::path &dir, std::string_view what);

/// Whether `file` can be written (atomically, by a rename in its directory): its parent is an
/// existing writable directory and `file`, if it exists, is a regular file.
Error checkOutputFile(const std::filesystem::path &file, std::string_view what);

} // namespace mtc::rt

#endif // MTC_RUNTIME_SUPPORT_OUTPUTPATHS_H
