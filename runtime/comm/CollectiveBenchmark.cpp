//===- CollectiveBenchmark.cpp - Gloo's all-reduce between two local ranks ===//

#include "runtime/comm/CollectiveBenchmark.h"

#include "runtime/comm/GlooCommunicator.h"
#include "runtime/comm/Rendezvous.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <sys/wait.h>
#include <unistd.h>

namespace mtc::rt {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kTimeout{30000};

/// Both ranks: connect through the store rank 0 serves on `port`, then run every size.
Expected<std::vector<CollectiveSample>> run(int rank, JobStore store,
                                            const std::vector<size_t> &bytes, int iterations) {
  GlooOptions options;
  options.hostname = "127.0.0.1";
  options.timeout = kTimeout;
  options.rendezvousTimeout = kTimeout;
  options.prefix = "calibrate";
  Expected<std::unique_ptr<GlooCommunicator>> comm =
      GlooCommunicator::create(std::move(store), rank, 2, options);
  if (!comm)
    return comm.takeError().withContext("connecting the ranks");
  std::vector<CollectiveSample> samples;
  for (size_t size : bytes) {
    std::vector<float> buffer(std::max<size_t>(1, size / sizeof(float)), 1.0f);
    std::vector<double> times;
    for (int i = 0; i <= iterations; ++i) {
      auto start = Clock::now();
      if (Error e = (*comm)->allReduce(buffer.data(), buffer.size(), MTC_F32, MTC_SUM); !e.ok())
        return std::move(e).withContext(concat("all-reduce of ", size, " bytes"));
      if (i > 0) // the first call warms the connection up
        times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    double mean = std::accumulate(times.begin(), times.end(), 0.0) / double(times.size());
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    samples.push_back({size, times[times.size() / 2], mean});
  }
  return samples;
}

} // namespace

Expected<std::vector<CollectiveSample>> benchmarkLoopbackAllReduce(const std::vector<size_t> &bytes,
                                                                   int iterations) {
  if (iterations < 1)
    return makeError("at least one iteration");
  Expected<std::string> token = generateJobToken();
  if (!token)
    return token.takeError();
  // The peer learns the port rank 0's store listens on through a pipe: it is forked before
  // the store starts its threads.
  int portPipe[2];
  if (pipe(portPipe) != 0)
    return makeError("cannot create a pipe");
  pid_t peer = fork();
  if (peer < 0)
    return makeError("cannot fork the peer rank");
  if (peer == 0) {
    close(portPipe[1]);
    uint16_t port = 0;
    bool ok = read(portPipe[0], &port, sizeof(port)) == sizeof(port);
    Expected<JobStore> store =
        ok ? openJobStore(1, "127.0.0.1", port, *token, kTimeout) : makeError("no port");
    bool done = store && run(1, std::move(*store), bytes, iterations).ok();
    _exit(done ? 0 : 1);
  }
  close(portPipe[0]);
  Expected<JobStore> store = openJobStore(0, "127.0.0.1", 0, *token, kTimeout);
  uint16_t port = store ? store->server->port() : 0;
  bool sent = write(portPipe[1], &port, sizeof(port)) == sizeof(port);
  close(portPipe[1]);
  Expected<std::vector<CollectiveSample>> samples =
      store && sent ? run(0, std::move(*store), bytes, iterations)
                    : Expected<std::vector<CollectiveSample>>(makeError("cannot start the store"));
  int status = 0;
  waitpid(peer, &status, 0);
  if (samples && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
    return makeError("the peer rank failed");
  return samples;
}

} // namespace mtc::rt
