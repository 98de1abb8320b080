//===- LocalLauncherTest.cpp - Starting and reaping the ranks on this host -===//
//
// The ranks here are /bin/sh scripts that read RANK: each test makes one of them fail,
// stop or hang, and checks what the launcher reports.
//
//===----------------------------------------------------------------------===//

#include "runtime/launch/LocalLauncher.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace mtc::rt;

namespace {

/// A job of `worldSize` ranks that each run the shell `script`.
LocalLaunch shellJob(int worldSize, std::string script) {
  LocalLaunch launch;
  launch.executable = "/bin/sh";
  launch.args = {"-c", std::move(script)};
  launch.worldSize = worldSize;
  launch.token = "0123456789abcdef0123456789abcdef";
  launch.grace = std::chrono::milliseconds(300);
  return launch;
}

TEST(LocalLauncherTest, RanksGetTheirVariablesAndSucceed) {
  LocalLaunch launch = shellJob(
      3, "test \"$WORLD_SIZE\" = 3 && test \"$MTC_JOB_TOKEN\" = 0123456789abcdef0123456789abcdef "
         "&& test \"$RANK\" -ge 0 && test \"$RANK\" -lt 3");
  Error err = runLocalRanks(launch);
  EXPECT_TRUE(err.ok()) << err.message();
}

/// Sets (or with null unsets) an environment variable while it lives; restores it after.
class ScopedVariable {
public:
  ScopedVariable(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedVariable() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }

private:
  const char *name_;
  std::optional<std::string> old_;
};

// The ranks' OpenBLAS starts as many threads as the ranks' kernels use: the launcher sets
// OPENBLAS_NUM_THREADS unless the environment already does (or no count is given).
TEST(LocalLauncherTest, RanksGetTheirBlasThreadsUnlessTheEnvironmentSetsThem) {
  {
    ScopedVariable unset("OPENBLAS_NUM_THREADS", nullptr);
    LocalLaunch launch = shellJob(2, "test \"$OPENBLAS_NUM_THREADS\" = 3");
    launch.blasThreads = 3;
    Error err = runLocalRanks(launch);
    EXPECT_TRUE(err.ok()) << err.message();
    launch = shellJob(2, "test -z \"${OPENBLAS_NUM_THREADS+set}\"");
    err = runLocalRanks(launch);
    EXPECT_TRUE(err.ok()) << "no count given: " << err.message();
  }
  ScopedVariable user("OPENBLAS_NUM_THREADS", "5");
  LocalLaunch launch = shellJob(2, "test \"$OPENBLAS_NUM_THREADS\" = 5");
  launch.blasThreads = 3;
  Error err = runLocalRanks(launch);
  EXPECT_TRUE(err.ok()) << "the user's value: " << err.message();
}

TEST(LocalLauncherTest, FailuresAreListedByRank) {
  Error err = runLocalRanks(shellJob(3, "exit $RANK"));
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.message(),
            "the job failed: rank 1 exited with status 1; rank 2 exited with status 2");
}

// A rank that ignores SIGTERM and never ends: after the grace the launcher ends it, and says
// it hung rather than "killed by signal 9".
TEST(LocalLauncherTest, AHungRankIsNamedAsHung) {
  Error err = runLocalRanks(
      shellJob(2, "if [ \"$RANK\" = 0 ]; then exit 1; fi; trap '' TERM; while :; do sleep 1; done"));
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.message(), "the job failed: rank 0 exited with status 1; rank 1 was still running "
                           "after the grace period (hung?): the launcher ended it with signal 9 "
                           "(Killed)");
}

// A stopped rank is announced at once and reported as stopped, not as killed by signal 9.
TEST(LocalLauncherTest, AStoppedRankIsNamedAsStopped) {
  LocalLaunch launch = shellJob(
      2, "if [ \"$RANK\" = 1 ]; then kill -STOP $$; exit 0; fi; sleep 0.5; exit 1");
  std::vector<std::string> notices;
  launch.notice = [&](const std::string &text) { notices.push_back(text); };
  Error err = runLocalRanks(launch);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.message(),
            "the job failed: rank 0 exited with status 1; rank 1 was stopped by signal 19 "
            "(Stopped (signal)) and never continued (the other ranks waited for it): the "
            "launcher ended it with signal 9 (Killed)");
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].find("rank 1 (pid "), std::string::npos) << notices[0];
  EXPECT_NE(notices[0].find(") was stopped by signal 19 (Stopped (signal)); the other ranks wait "
                            "for it until it continues"),
            std::string::npos)
      << notices[0];
}

// A rank killed from elsewhere keeps the plain description.
TEST(LocalLauncherTest, ASignalFromElsewhereIsReportedAsIs) {
  Error err = runLocalRanks(shellJob(2, "if [ \"$RANK\" = 1 ]; then kill -KILL $$; fi"));
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.message(), "the job failed: rank 1 was killed by signal 9 (Killed)");
}

TEST(LocalLauncherTest, AMissingExecutableFailsEveryRank) {
  LocalLaunch launch = shellJob(2, "");
  launch.executable = "/nonexistent/mtrun";
  Error err = runLocalRanks(launch);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.message(),
            "the job failed: rank 0 exited with status 127; rank 1 exited with status 127");
}

/// Runs `launch` and sends this process (the launcher) SIGTERM once its ranks run.
Error runAndTerminate(const LocalLaunch &launch) {
  std::thread terminate([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(::getpid(), SIGTERM);
  });
  Error err = runLocalRanks(launch);
  terminate.join();
  return err;
}

// A signal to the launcher reaches every rank; where it is how the job ends (a server),
// ranks that end cleanly make a success, and a rank that fails still fails the job.
TEST(LocalLauncherTest, ASignalCanBeTheJobsNormalEnd) {
  const char *server = "trap 'exit 0' TERM; while :; do sleep 0.05; done";
  LocalLaunch launch = shellJob(2, server);
  Error interrupted = runAndTerminate(launch);
  ASSERT_FALSE(interrupted.ok());
  EXPECT_EQ(interrupted.message(), "the launcher was sent signal 15 (Terminated) and passed it to "
                                   "every rank: none failed");
  launch.signalEndsTheJob = true;
  Error stopped = runAndTerminate(launch);
  EXPECT_TRUE(stopped.ok()) << stopped.message();
  launch = shellJob(2, "trap 'exit $RANK' TERM; while :; do sleep 0.05; done");
  launch.signalEndsTheJob = true;
  Error failed = runAndTerminate(launch);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.message(), "the launcher was sent signal 15 (Terminated) and passed it to "
                              "every rank: rank 1 exited with status 1");
}

} // namespace
