//===- TempDir.h - A fresh temporary directory per test ---------*- C++ -*-===//

#ifndef MTC_TEST_UNITTESTS_RUNTIME_TEMPDIR_H
#define MTC_TEST_UNITTESTS_RUNTIME_TEMPDIR_H

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <system_error>

namespace mtc::rt::test {

/// Creates a unique directory under the system temporary directory (mkdtemp) and removes it
/// with everything in it on destruction.
class TempDir {
public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "mtc-rt-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()))
      path_ = pattern;
    else
      ADD_FAILURE() << "mkdtemp failed for " << pattern;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty())
      std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  const std::filesystem::path &path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

private:
  std::filesystem::path path_;
};

inline void writeBytes(const std::filesystem::path &path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline std::string readBytes(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

} // namespace mtc::rt::test

#endif // MTC_TEST_UNITTESTS_RUNTIME_TEMPDIR_H
