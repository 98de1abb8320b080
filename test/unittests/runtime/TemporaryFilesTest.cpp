//===- TemporaryFilesTest.cpp - Atomic writes' temporaries ----------------===//

#include "runtime/support/Safetensors.h"
#include "runtime/support/TemporaryFiles.h"

#include "TempDir.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

using namespace mtc::rt;

namespace {

using test::TempDir;

/// A process id that ran and is gone (a child that exited and was reaped).
pid_t deadPid() {
  pid_t pid = ::fork();
  if (pid == 0)
    ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

std::string temporaryName(std::string_view file, std::string_view host, long pid) {
  return concat(file, ".mtc-tmp.", host, '.', pid);
}

TEST(TemporaryFilesTest, NameSaysHostAndProcess) {
  EXPECT_EQ(temporaryPathFor("/d/checkpoint.safetensors").string(),
            "/d/checkpoint.safetensors.mtc-tmp." + hostName() + "." +
                std::to_string(::getpid()));
}

TEST(TemporaryFilesTest, RemovesOnlyThoseOfDeadProcessesOfThisHost) {
  TempDir dir;
  const std::string host = hostName();
  const std::string dead = temporaryName("w.safetensors", host, deadPid());
  const std::string alive = temporaryName("w.safetensors", host, ::getppid());
  const std::string otherHost = temporaryName("w.safetensors", "some-other-host", deadPid());
  const std::string otherFile = temporaryName("x.safetensors", host, deadPid());
  for (const std::string &name : {dead, alive, otherHost, otherFile, std::string("w.safetensors.tmp.1")})
    test::writeBytes(dir / name, "partial");
  std::vector<std::filesystem::path> removed = removeStaleTemporaries(dir / "w.safetensors");
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].filename().string(), dead);
  EXPECT_FALSE(std::filesystem::exists(dir / dead));
  for (const std::string &kept : {alive, otherHost, otherFile})
    EXPECT_TRUE(std::filesystem::exists(dir / kept)) << kept;
}

// A save killed between writing its temporary and the rename left a full-size file that
// nothing removed; the next write of the same file removes it.
TEST(TemporaryFilesTest, NextWriteRemovesAKilledWritersTemporary) {
  TempDir dir;
  const std::string stale = temporaryName("w.safetensors", hostName(), deadPid());
  test::writeBytes(dir / stale, std::string(4096, 'x'));
  ASSERT_TRUE(writeFileAtomically(dir / "w.safetensors", "new").ok());
  EXPECT_FALSE(std::filesystem::exists(dir / stale));
  std::vector<std::string> names;
  for (const auto &entry : std::filesystem::directory_iterator(dir.path()))
    names.push_back(entry.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"w.safetensors"});
}

} // namespace
