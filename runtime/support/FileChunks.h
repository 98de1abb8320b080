//===- FileChunks.h - streaming a file through a callback -------*- C++ -*-===//
//
// The checksums and hashes of whole files (CRC-32C, SHA-256) and line-by-line readers of
// inputs (mtc-data) read the same way: in 64 KiB chunks, retrying on EINTR, with errors
// naming the file; only a regular file is read (RegularFile.h).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_SUPPORT_FILECHUNKS_H
#define MTC_RUNTIME_SUPPORT_FILECHUNKS_H

#include "runtime/support/Error.h"

#include <cstddef>
#include <filesystem>
#include <functional>

namespace mtc::rt {

/// Calls `consume` with consecutive chunks of the file at `path`, in order. The first error
/// `consume` returns stops the reading and is returned (a bad line early in a large input
/// is reported without reading the rest).
Error readFileChunks(const std::filesystem::path &path,
                     const std::function<Error(const char *data, size_t size)> &consume);

} // namespace mtc::rt

#endif // MTC_RUNTIME_SUPPORT_FILECHUNKS_H
