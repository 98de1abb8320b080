//===- RegularFile.h - Opening the runtime's files safely --------*- C++ -*-===//
//
// Every file the runtime reads or appends to (plans, checkpoints, data, metrics) is opened
// here, and only a regular file is accepted. A FIFO, socket or device given where a file
// belongs would otherwise block the open (a FIFO without a writer) or the reads forever, and
// a directory fails later with a confusing message. The open itself never blocks: it uses
// O_NONBLOCK, checks the type of what it opened with fstat (no window between a check and
// the open), and clears O_NONBLOCK again. Reads at an offset (pread) report a file that
// shrank under the reader as an error instead of the SIGBUS of a mapping.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_SUPPORT_REGULARFILE_H
#define MTC_RUNTIME_SUPPORT_REGULARFILE_H

#include "runtime/support/Error.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

namespace mtc::rt {

/// An open file descriptor, closed when destroyed.
class FileHandle {
public:
  FileHandle() = default;
  explicit FileHandle(int fd) : fd_(fd) {}
  FileHandle(FileHandle &&other) noexcept;
  FileHandle &operator=(FileHandle &&other) noexcept;
  FileHandle(const FileHandle &) = delete;
  FileHandle &operator=(const FileHandle &) = delete;
  ~FileHandle();

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  /// Gives the descriptor up to the caller, who closes it.
  int release() { return std::exchange(fd_, -1); }
  /// Closes now; the error of close(2), if any, names `name`.
  Error close(std::string_view name);

private:
  int fd_ = -1;
};

/// A regular file opened by openRegularFile: its descriptor and its size when opened.
struct RegularFile {
  FileHandle handle;
  uint64_t size = 0;
};

/// Opens `path` with open(2) `flags` (O_RDONLY, or O_WRONLY | O_CREAT | O_APPEND, ...; O_CLOEXEC
/// is added) and `mode` for a created file, without blocking, and refuses anything but a
/// regular file. Messages name the file as `name` (default: the quoted path): "cannot open
/// NAME: No such file or directory", "NAME is a FIFO (named pipe), not a regular file". When
/// open(2) itself fails, `*openErrno` (if given) receives its errno, else 0.
Expected<RegularFile> openRegularFile(const std::filesystem::path &path, int flags,
                                      std::string_view name = {}, int *openErrno = nullptr,
                                      unsigned mode = 0644);

/// openRegularFile(path, O_RDONLY, ...): a file to read.
Expected<RegularFile> openInputFile(const std::filesystem::path &path, std::string_view name = {},
                                    int *openErrno = nullptr);

/// "a directory", "a FIFO (named pipe)", "a socket", ... for the type bits of a st_mode.
std::string_view describeFileType(unsigned mode);

/// Reads exactly `size` bytes at `offset` of `fd` (pread, retried on EINTR and short reads).
/// A file that ends before (it shrank while in use) is an error saying how long it is now.
Error readExactlyAt(int fd, uint64_t offset, void *buffer, size_t size, std::string_view name);

/// Writes all `size` bytes of `data` to `fd` (write, retried on EINTR and short writes, at
/// most 1 GiB a call); an error names `path`.
Error writeAll(int fd, const void *data, size_t size, const std::filesystem::path &path);

/// The whole of the regular file `path` (openInputFile, then readExactlyAt), for inputs that
/// are read at once: vocabularies, merge lists, small corpora.
Expected<std::string> readInputFile(const std::filesystem::path &path, std::string_view name = {});

} // namespace mtc::rt

#endif // MTC_RUNTIME_SUPPORT_REGULARFILE_H
