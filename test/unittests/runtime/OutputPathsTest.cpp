//===- OutputPathsTest.cpp - Checking outputs before the work -------------===//

#include "runtime/support/OutputPaths.h"

#include "TempDir.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

using namespace mtc::rt;

namespace {

using test::TempDir;

TEST(OutputPathsTest, DirectoriesThatCanBeWrittenOrCreated) {
  TempDir dir;
  EXPECT_TRUE(checkOutputDirectory(dir.path(), "--save").ok());
  EXPECT_TRUE(checkOutputDirectory(dir / "new" / "deeper", "--save").ok());
  EXPECT_TRUE(checkOutputDirectory((dir / "new").string() + "/", "--save").ok());
  EXPECT_TRUE(checkOutputDirectory("relative-dir-that-does-not-exist", "--save").ok());
}

TEST(OutputPathsTest, DirectoriesThatCannot) {
  TempDir dir;
  test::writeBytes(dir / "file", "x");
  Error underFile = checkOutputDirectory(dir / "file" / "ckpt", "--save");
  ASSERT_FALSE(underFile.ok());
  EXPECT_EQ(underFile.message(),
            "--save: '" + (dir / "file").string() + "' is a regular file, not a directory");
  Error isFile = checkOutputDirectory(dir / "file", "--save");
  ASSERT_FALSE(isFile.ok());
  EXPECT_EQ(isFile.message(),
            "--save: '" + (dir / "file").string() + "' is a regular file, not a directory");
  Error underDevice = checkOutputDirectory("/dev/null/ckpt", "--save");
  ASSERT_FALSE(underDevice.ok());
  EXPECT_EQ(underDevice.message(), "--save: '/dev/null' is a character device, not a directory");
  if (::geteuid() != 0) {
    std::filesystem::create_directories(dir / "locked");
    ::chmod((dir / "locked").c_str(), 0500);
    Error locked = checkOutputDirectory(dir / "locked" / "ckpt", "--save");
    ASSERT_FALSE(locked.ok());
    EXPECT_NE(locked.message().find("Permission denied"), std::string::npos) << locked.message();
  }
}

TEST(OutputPathsTest, Files) {
  TempDir dir;
  EXPECT_TRUE(checkOutputFile(dir / "out.safetensors", "--export-safetensors").ok());
  test::writeBytes(dir / "old.safetensors", "x");
  EXPECT_TRUE(checkOutputFile(dir / "old.safetensors", "--export-safetensors").ok());

  Error missingParent = checkOutputFile(dir / "absent" / "out.safetensors", "--export-safetensors");
  ASSERT_FALSE(missingParent.ok());
  EXPECT_EQ(missingParent.message(), "--export-safetensors: the directory '" +
                                         (dir / "absent").string() + "' does not exist");
  Error directory = checkOutputFile(dir.path(), "--export-safetensors");
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.message(), "--export-safetensors: '" + dir.path().string() +
                                     "' is a directory, not a regular file");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  Error fifo = checkOutputFile(dir / "fifo", "--metrics");
  ASSERT_FALSE(fifo.ok());
  EXPECT_EQ(fifo.message(),
            "--metrics: '" + (dir / "fifo").string() + "' is a FIFO (named pipe), not a regular file");
  Error underDevice = checkOutputFile("/dev/null/out.safetensors", "--export-safetensors");
  ASSERT_FALSE(underDevice.ok());
  EXPECT_EQ(underDevice.message(),
            "--export-safetensors: '/dev/null' is a character device, not a directory");
}

} // namespace
