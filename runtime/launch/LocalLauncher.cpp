//===- LocalLauncher.cpp - Running the ranks of a job on this host --------===//

#include "runtime/launch/LocalLauncher.h"

#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <iterator>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <netinet/in.h>
#include <pthread.h>
#include <optional>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char **environ;

namespace mtc::rt {
namespace {

/// Why a child ended, for messages: "exited with status 1", "was killed by signal 9 (Killed)".
std::string describeStatus(int status) {
  if (WIFEXITED(status))
    return concat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return concat("was killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)),
                  ")");
  return "ended";
}

bool failed(int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }

/// The environment of a rank: this process's, with the launch variables replaced.
std::vector<std::string> rankEnvironment(const LocalLaunch &launch, int rank) {
  const std::pair<std::string, std::string> variables[] = {
      {"RANK", concat(rank)},
      {"WORLD_SIZE", concat(launch.worldSize)},
      {"LOCAL_RANK", concat(rank % launch.ranksPerNode)},
      {"LOCAL_WORLD_SIZE", concat(launch.ranksPerNode)},
      {"MASTER_ADDR", launch.masterAddr},
      {"MASTER_PORT", concat(launch.masterPort)},
      {"MTC_JOB_TOKEN", launch.token},
  };
  auto names = [](std::string_view entry, std::string_view name) {
    return entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=';
  };
  std::vector<std::string> env;
  bool blasThreadsSet = false;
  for (char **e = environ; *e; ++e) {
    std::string_view entry(*e);
    bool replaced = false;
    for (const auto &[name, value] : variables)
      replaced = replaced || names(entry, name);
    blasThreadsSet = blasThreadsSet || names(entry, "OPENBLAS_NUM_THREADS");
    if (!replaced)
      env.emplace_back(entry);
  }
  for (const auto &[name, value] : variables)
    env.push_back(name + "=" + value);
  if (launch.blasThreads > 0 && !blasThreadsSet)
    env.push_back(concat("OPENBLAS_NUM_THREADS=", launch.blasThreads));
  return env;
}

} // namespace

Expected<int> pickFreePort(const std::string &address) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return makeError("cannot create a socket: ", errnoCode());
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  if (::inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    ::close(fd);
    return makeError("'", address, "' is not an IPv4 address");
  }
  socklen_t length = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &length) != 0) {
    std::error_code ec = errnoCode();
    ::close(fd);
    return makeError("cannot find a free port on ", address, ": ", ec);
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

namespace {

// The signals that end a job from outside (kill, Ctrl-C, a closed terminal) reach the
// launcher; a POSIX handler can only leave them in static storage, hence these two (the
// launcher's only globals), written by the handler and read by runLocalRanks's wait loop.
std::atomic<int> interruptSignal{0};
std::atomic<int> interruptCount{0};
static_assert(std::atomic<int>::is_always_lock_free, "read and written in a signal handler");

void onInterrupt(int signal) {
  interruptSignal.store(signal);
  interruptCount.fetch_add(1);
}

// The signals torchrun's agent handles and passes to its workers.
constexpr int kForwardedSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
/// How long the ranks get to end after a forwarded signal before SIGKILL (torchrun's 30 s).
constexpr auto kForwardGrace = std::chrono::seconds(30);

/// Catches kForwardedSignals while alive and restores the previous handlers when destroyed.
class InterruptHandlers {
public:
  InterruptHandlers() {
    interruptSignal.store(0);
    interruptCount.store(0);
    struct sigaction action {};
    action.sa_handler = onInterrupt;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < std::size(kForwardedSignals); ++i)
      ::sigaction(kForwardedSignals[i], &action, &previous_[i]);
  }
  ~InterruptHandlers() {
    for (size_t i = 0; i < std::size(kForwardedSignals); ++i)
      ::sigaction(kForwardedSignals[i], &previous_[i], nullptr);
  }
  InterruptHandlers(const InterruptHandlers &) = delete;
  InterruptHandlers &operator=(const InterruptHandlers &) = delete;

private:
  struct sigaction previous_[std::size(kForwardedSignals)];
};

/// "signal 19 (Stopped (signal))".
std::string describeSignal(int signal) {
  return concat("signal ", signal, " (", strsignal(signal), ")");
}

using Clock = std::chrono::steady_clock;

/// What the launcher knows of one rank.
struct RankProcess {
  pid_t pid = -1;       // -1 once reaped
  int status = 0;       // waitpid's, once reaped
  int stopSignal = 0;   // the signal that stopped it, while it is stopped
  int launcherSignal = 0; // the last signal the launcher itself sent it
};

/// Why a rank that ended failed, for the launcher's report: a rank the launcher had to end
/// is named as stopped or hung, not as "killed by signal 9".
std::string describeFailure(const RankProcess &rank) {
  int status = rank.status;
  bool endedByLauncher = WIFSIGNALED(status) && WTERMSIG(status) == rank.launcherSignal;
  if (endedByLauncher && rank.stopSignal != 0)
    return concat("was stopped by ", describeSignal(rank.stopSignal),
                  " and never continued (the other ranks waited for it): the launcher ended it "
                  "with ",
                  describeSignal(WTERMSIG(status)));
  if (endedByLauncher)
    return concat("was still running after the grace period (hung?): the launcher ended it "
                  "with ",
                  describeSignal(WTERMSIG(status)));
  return describeStatus(status);
}

} // namespace

Error runLocalRanks(const LocalLaunch &launch) {
  std::vector<RankProcess> ranks(size_t(launch.worldSize));
  size_t running = 0;
  const pid_t launcher = ::getpid();
  InterruptHandlers handlers;

  auto signalAll = [&](int signal) {
    for (RankProcess &r : ranks)
      if (r.pid > 0) {
        // A stopped rank acts on nothing but SIGKILL.
        int sent = r.stopSignal != 0 ? SIGKILL : signal;
        r.launcherSignal = sent;
        ::kill(r.pid, sent);
      }
  };
  for (int rank = 0; rank < launch.worldSize; ++rank) {
    std::vector<std::string> env = rankEnvironment(launch, rank);
    std::vector<char *> argv{const_cast<char *>(launch.executable.c_str())};
    for (const std::string &arg : launch.args)
      argv.push_back(const_cast<char *>(arg.c_str()));
    argv.push_back(nullptr);
    std::vector<char *> envp;
    for (std::string &e : env)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    // The forwarded signals stay blocked across fork, so that one sent to the new rank
    // before its exec is not taken by the launcher's handler (and lost) but kills it.
    sigset_t forwarded, previousMask;
    sigemptyset(&forwarded);
    for (int signal : kForwardedSignals)
      sigaddset(&forwarded, signal);
    ::pthread_sigmask(SIG_BLOCK, &forwarded, &previousMask);
    pid_t pid = ::fork();
    if (pid != 0)
      ::pthread_sigmask(SIG_SETMASK, &previousMask, nullptr);
    if (pid < 0) {
      std::error_code ec = errnoCode();
      signalAll(SIGKILL);
      for (const RankProcess &started : ranks)
        if (started.pid > 0)
          ::waitpid(started.pid, nullptr, 0);
      return makeError("cannot start rank ", rank, ": ", ec);
    }
    if (pid == 0) {
      // Die with the launcher, however it ends (SIGKILL included), as no rank can finish
      // the job without it; then check that it did not end before the request (the race).
      // SIGKILL, not torchelastic's SIGTERM: it also ends a stopped rank, and a rank has
      // nothing to clean up.
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != launcher)
        ::_exit(128 + SIGKILL);
      // The ranks take the launcher's signals in the default way.
      struct sigaction byDefault {};
      byDefault.sa_handler = SIG_DFL;
      for (int signal : kForwardedSignals)
        ::sigaction(signal, &byDefault, nullptr);
      ::pthread_sigmask(SIG_SETMASK, &previousMask, nullptr);
      ::execve(argv[0], argv.data(), envp.data());
      std::fprintf(stderr, "mtrun: error: rank %d: cannot run %s: %s\n", rank, argv[0],
                   std::strerror(errno));
      ::_exit(127);
    }
    ranks[size_t(rank)].pid = pid;
    ++running;
  }

  // Wait. After the first failure, give the others `grace` to notice (their collectives time
  // out), then SIGTERM, then SIGKILL. A signal to the launcher goes to every rank (as
  // torchrun does), with the same escalation; a second one kills them at once.
  std::optional<Clock::time_point> deadline;
  int forwardedCount = 0;
  int interrupted = 0;
  bool terminated = false;
  while (running > 0) {
    if (int count = interruptCount.load(); count != forwardedCount) {
      interrupted = interruptSignal.load();
      signalAll(forwardedCount == 0 ? interrupted : SIGKILL);
      forwardedCount = count;
      deadline = Clock::now() + kForwardGrace;
      terminated = true;
    }
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG | WUNTRACED | WCONTINUED);
    if (pid > 0) {
      for (RankProcess &r : ranks) {
        if (r.pid != pid)
          continue;
        if (WIFSTOPPED(status)) {
          r.stopSignal = WSTOPSIG(status);
          if (launch.notice)
            launch.notice(concat("rank ", &r - ranks.data(), " (pid ", pid, ") was stopped by ",
                                 describeSignal(r.stopSignal),
                                 "; the other ranks wait for it until it continues"));
        } else if (WIFCONTINUED(status)) {
          r.stopSignal = 0;
        } else {
          r.status = status;
          r.pid = -1;
          --running;
          if (failed(status) && !deadline)
            deadline = Clock::now() + launch.grace;
        }
      }
      continue;
    }
    if (pid < 0 && errno != EINTR)
      break;
    if (deadline && Clock::now() > *deadline) {
      signalAll(terminated ? SIGKILL : SIGTERM);
      deadline = Clock::now() + std::chrono::seconds(2);
      terminated = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  std::string failures;
  for (size_t rank = 0; rank < ranks.size(); ++rank)
    if (failed(ranks[rank].status))
      failures += concat(failures.empty() ? "" : "; ", "rank ", rank, " ",
                         interrupted ? describeStatus(ranks[rank].status)
                                     : describeFailure(ranks[rank]));
  if (interrupted && launch.signalEndsTheJob && failures.empty())
    return Error::success();
  if (interrupted)
    return makeError("the launcher was sent ", describeSignal(interrupted),
                     " and passed it to every rank: ", failures.empty() ? "none failed" : failures);
  if (!failures.empty())
    return makeError("the job failed: ", failures);
  return Error::success();
}

} // namespace mtc::rt
