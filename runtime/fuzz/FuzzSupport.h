//===- FuzzSupport.h - What the runtime's fuzz targets share ----*- C++ -*-===//
//
// The runtime's readers take paths, not bytes, so each fuzz target writes its input to a
// scratch directory of its own process first. Each target can also write the seeds its
// corpus starts from (`-mtc_write_seeds=DIR`, run by runtime/fuzz/make-seed-corpus.sh): the
// seeds are made by the runtime's own writers, so they stay valid when the formats change.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_FUZZ_FUZZSUPPORT_H
#define MTC_RUNTIME_FUZZ_FUZZSUPPORT_H

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <unistd.h>

namespace mtc::rt::fuzz {

/// A directory under the system's temporary directory, removed with the object.
class ScratchDirectory {
public:
  ScratchDirectory() {
    std::string pattern = (std::filesystem::temp_directory_path() / "mtc-fuzz-XXXXXX").string();
    if (!mkdtemp(pattern.data())) {
      std::perror("mtc fuzz: cannot create a scratch directory");
      std::abort();
    }
    path_ = pattern;
  }
  ~ScratchDirectory() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDirectory(const ScratchDirectory &) = delete;
  ScratchDirectory &operator=(const ScratchDirectory &) = delete;

  const std::filesystem::path &path() const { return path_; }

private:
  std::filesystem::path path_;
};

/// Writes `bytes` to `path` (replacing it); aborts on failure, which is the harness's fault.
inline void writeFileOrDie(const std::filesystem::path &path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "mtc fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

/// The DIR of a `-mtc_write_seeds=DIR` argument, if given.
inline std::optional<std::filesystem::path> seedDirectoryArgument(int argc, char **argv) {
  constexpr std::string_view flag = "-mtc_write_seeds=";
  for (int i = 1; i < argc; ++i)
    if (std::string_view arg = argv[i]; arg.starts_with(flag))
      return std::filesystem::path(arg.substr(flag.size()));
  return std::nullopt;
}

} // namespace mtc::rt::fuzz

#endif // MTC_RUNTIME_FUZZ_FUZZSUPPORT_H
