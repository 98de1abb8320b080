//===- RegularFileTest.cpp - Opening the runtime's files safely -----------===//

#include "runtime/support/RegularFile.h"

#include "TempDir.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

using namespace mtc::rt;

namespace {

using test::TempDir;

TEST(RegularFileTest, OpensARegularFileBlocking) {
  TempDir dir;
  test::writeBytes(dir / "f", "hello");
  Expected<RegularFile> file = openInputFile(dir / "f");
  ASSERT_TRUE(file) << file.error().message();
  EXPECT_EQ(file->size, 5u);
  EXPECT_EQ(::fcntl(file->handle.get(), F_GETFL) & O_NONBLOCK, 0);
  EXPECT_NE(::fcntl(file->handle.get(), F_GETFD) & FD_CLOEXEC, 0);
  char buf[3];
  ASSERT_TRUE(readExactlyAt(file->handle.get(), 2, buf, 3, "f").ok());
  EXPECT_EQ(std::string(buf, 3), "llo");
}

// Each of these would block a plain open(2) or read(2) forever, or fail later unclearly.
TEST(RegularFileTest, RefusesWhatIsNotARegularFileWithoutBlocking) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  Expected<RegularFile> fifo = openInputFile(dir / "fifo");
  ASSERT_FALSE(fifo);
  EXPECT_EQ(fifo.error().message(),
            "'" + (dir / "fifo").string() + "' is a FIFO (named pipe), not a regular file");
  // Opened for writing, a FIFO without a reader fails with ENXIO; still named as a FIFO.
  Expected<RegularFile> fifoOut = openRegularFile(dir / "fifo", O_WRONLY | O_APPEND, "out");
  ASSERT_FALSE(fifoOut);
  EXPECT_EQ(fifoOut.error().message(), "out is a FIFO (named pipe), not a regular file");

  Expected<RegularFile> directory = openInputFile(dir.path(), "DIR");
  ASSERT_FALSE(directory);
  EXPECT_EQ(directory.error().message(), "DIR is a directory, not a regular file");

  Expected<RegularFile> device = openInputFile("/dev/null");
  ASSERT_FALSE(device);
  EXPECT_EQ(device.error().message(), "'/dev/null' is a character device, not a regular file");

  int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string socketPath = (dir / "sock").string();
  ASSERT_LT(socketPath.size(), sizeof addr.sun_path);
  std::copy(socketPath.begin(), socketPath.end(), addr.sun_path);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
  Expected<RegularFile> socketFile = openInputFile(dir / "sock", "SOCK");
  ::close(sock);
  ASSERT_FALSE(socketFile);
  EXPECT_EQ(socketFile.error().message(), "SOCK is a socket, not a regular file");
}

TEST(RegularFileTest, MissingFileReportsErrno) {
  TempDir dir;
  int openErrno = 0;
  Expected<RegularFile> missing = openInputFile(dir / "absent", "ABSENT", &openErrno);
  ASSERT_FALSE(missing);
  EXPECT_EQ(openErrno, ENOENT);
  EXPECT_EQ(missing.error().message(), "cannot open ABSENT: No such file or directory");
}

TEST(RegularFileTest, ReadPastTheEndSaysTheFileWasTruncated) {
  TempDir dir;
  test::writeBytes(dir / "f", std::string(100, 'a'));
  Expected<RegularFile> file = openInputFile(dir / "f");
  ASSERT_TRUE(file);
  ASSERT_EQ(::truncate((dir / "f").c_str(), 40), 0);
  char buf[20];
  Error err = readExactlyAt(file->handle.get(), 30, buf, 20, "F");
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.message(),
            "F ended at byte 40 while 50 were needed: it was truncated while in use");
}

} // namespace
