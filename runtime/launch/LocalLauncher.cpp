//===- LocalLauncher.cpp - Running the ranks of a job on this host --------===//

#include "runtime/launch/LocalLauncher.h"

#include <arpa/inet.h>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <netinet/in.h>
#include <optional>
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
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    std::string_view entry(*e);
    bool replaced = false;
    for (const auto &[name, value] : variables)
      replaced = replaced || (entry.size() > name.size() && entry.starts_with(name) &&
                              entry[name.size()] == '=');
    if (!replaced)
      env.emplace_back(entry);
  }
  for (const auto &[name, value] : variables)
    env.push_back(name + "=" + value);
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

Error runLocalRanks(const LocalLaunch &launch) {
  std::vector<pid_t> pids(size_t(launch.worldSize), -1);
  std::vector<int> statuses(pids.size(), 0);
  size_t running = 0;

  auto killAll = [&](int signal) {
    for (pid_t pid : pids)
      if (pid > 0)
        ::kill(pid, signal);
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
    pid_t pid = ::fork();
    if (pid < 0) {
      std::error_code ec = errnoCode();
      killAll(SIGKILL);
      for (pid_t started : pids)
        if (started > 0)
          ::waitpid(started, nullptr, 0);
      return makeError("cannot start rank ", rank, ": ", ec);
    }
    if (pid == 0) {
      ::execve(argv[0], argv.data(), envp.data());
      std::fprintf(stderr, "mtrun: error: rank %d: cannot run %s: %s\n", rank, argv[0],
                   std::strerror(errno));
      ::_exit(127);
    }
    pids[size_t(rank)] = pid;
    ++running;
  }

  // Wait; after the first failure, give the others `grace`, then SIGTERM, then SIGKILL.
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> deadline;
  bool terminated = false;
  while (running > 0) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, deadline ? WNOHANG : 0);
    if (pid > 0) {
      for (size_t rank = 0; rank < pids.size(); ++rank)
        if (pids[rank] == pid) {
          statuses[rank] = status;
          pids[rank] = -1;
          --running;
          if (failed(status) && !deadline)
            deadline = Clock::now() + launch.grace;
        }
      continue;
    }
    if (pid < 0 && errno != EINTR)
      break;
    if (deadline && Clock::now() > *deadline) {
      killAll(terminated ? SIGKILL : SIGTERM);
      deadline = Clock::now() + std::chrono::seconds(2);
      terminated = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  std::string failures;
  for (size_t rank = 0; rank < statuses.size(); ++rank)
    if (failed(statuses[rank]))
      failures += concat(failures.empty() ? "" : "; ", "rank ", rank, " ",
                         describeStatus(statuses[rank]));
  if (!failures.empty())
    return makeError("the job failed: ", failures);
  return Error::success();
}

} // namespace mtc::rt
