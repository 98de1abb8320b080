//===- MetricsWriter.h - Metrics as JSON lines ------------------*- C++ -*-===//
//
// Appends one compact JSON object per line (JSONL) to a file, e.g.
//   {"step":10,"loss":4.13,"tokens_per_s":51234.5,"lr":0.0003}
// Each record goes to the file with a single write(2) on an O_APPEND descriptor, so a reader
// (tail -f, a plotting script) never sees half a line from a live run, and a crash loses at
// most the record being written. close() fsyncs; the destructor closes (use close() to see
// errors). Non-finite doubles are written as null (JSON has no NaN).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DATA_METRICSWRITER_H
#define MTC_RUNTIME_DATA_METRICSWRITER_H

#include "runtime/support/Error.h"
#include "runtime/support/Json.h"

#include <filesystem>

namespace mtc::rt {

class MetricsWriter {
public:
  /// Opens `path` for appending, creating it if needed (the directory must exist).
  /// `truncate` starts the file afresh instead.
  static Expected<MetricsWriter> open(const std::filesystem::path &path, bool truncate = false);

  MetricsWriter(MetricsWriter &&other) noexcept;
  MetricsWriter &operator=(MetricsWriter &&other) noexcept;
  MetricsWriter(const MetricsWriter &) = delete;
  MetricsWriter &operator=(const MetricsWriter &) = delete;
  ~MetricsWriter();

  bool isOpen() const { return fd_ >= 0; }
  const std::filesystem::path &path() const { return path_; }

  /// Appends `record` as one line.
  Error write(const JsonObject &record);
  /// Forces written records to stable storage (fsync).
  Error sync();
  /// fsync and close; further writes fail. Closing a closed writer succeeds.
  Error close();

private:
  MetricsWriter(std::filesystem::path path, int fd) : path_(std::move(path)), fd_(fd) {}

  std::filesystem::path path_;
  int fd_ = -1;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_DATA_METRICSWRITER_H
